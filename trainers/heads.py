"""The learned heads on the policy's hidden states: GAE's value head and SPA's progress head.

Which heads a run has is the estimator's declaration (`EstimatorSpec.value_head`,
`.progress_head`); `build_heads` makes them, the loop's scoring pass gives them the hidden
states, and the functions here turn those into what `compute_advantages` takes: per-step
values V(s_t) or per-step progress contributions c_t.

SPA progress estimator: a scalar head whose per-step outputs sum to the episode outcome.
SPA-RL (Wang et al. 2025, arXiv 2505.20732) trains a progress estimator that reads each
step of a trajectory and outputs a contribution c_t; only the sum is supervised,

    L = mean_i ( sum_t c_t^i - R_i )^2,

so the estimator has to discover which steps made the outcome happen. In the paper the
estimator is the SFT model with a scalar head; here the head reads per-step features (the
policy's last hidden state at the end of each step's response).

    head = ProgressHead(hidden_size)
    fit_progress(head, features_per_traj, outcomes, epochs=200, lr=1e-2)
    progress = predict_progress(head, features_per_traj)   # -> compute_advantages(..., progress=progress)
"""

from __future__ import annotations

from typing import Sequence

from typing import Callable

import numpy as np
import torch
from torch import nn

from agentgym.trainers.estimators import estimator_spec
from agentgym.trainers.samples import TokenSequence


class ProgressHead(nn.Module):
    """Features [..., T, H] -> contributions [..., T].

    `hidden=None` gives a linear head (what the paper's scalar head on an LLM amounts to);
    an int adds one hidden layer for features that are not linearly informative.
    """

    def __init__(self, feature_size: int, hidden: int | None = None):
        super().__init__()
        if hidden:
            self.net = nn.Sequential(nn.Linear(feature_size, hidden), nn.Tanh(), nn.Linear(hidden, 1))
        else:
            self.net = nn.Linear(feature_size, 1)
        # Start every contribution near 0 so early sums do not swamp the outcome scale.
        last = self.net[-1] if isinstance(self.net, nn.Sequential) else self.net
        nn.init.normal_(last.weight, std=0.01)
        nn.init.zeros_(last.bias)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.net(features).squeeze(-1)


def progress_loss(contribs_per_traj: Sequence[torch.Tensor], outcomes) -> torch.Tensor:
    """Mean over trajectories of (sum_t c_t - R)^2: only the sum is supervised."""
    if len(contribs_per_traj) == 0:
        raise ValueError("progress_loss needs at least one trajectory")
    sums = torch.stack([c.sum() for c in contribs_per_traj])
    target = torch.as_tensor(outcomes, dtype=sums.dtype, device=sums.device).reshape(-1)
    if target.shape != sums.shape:
        raise ValueError(f"{len(contribs_per_traj)} trajectories but {target.numel()} outcomes")
    return ((sums - target) ** 2).mean()


def _flatten(head: nn.Module, features_per_traj: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, int]:
    """All steps in one [N_steps, H] tensor and the trajectory index of each row."""
    param = next(head.parameters())
    feats = [torch.as_tensor(f).to(device=param.device, dtype=param.dtype) for f in features_per_traj]
    for i, f in enumerate(feats):
        if f.ndim != 2:
            raise ValueError(f"features of trajectory {i} must be [steps, feature_size], got shape {tuple(f.shape)}")
    lengths = torch.tensor([len(f) for f in feats], device=param.device)
    seg = torch.repeat_interleave(torch.arange(len(feats), device=param.device), lengths)
    return torch.cat(feats), seg, len(feats)


def _sums(contribs: torch.Tensor, seg: torch.Tensor, n: int) -> torch.Tensor:
    return torch.zeros(n, dtype=contribs.dtype, device=contribs.device).index_add_(0, seg, contribs)


def fit_progress(
    head: ProgressHead,
    features_per_traj: Sequence[torch.Tensor],
    outcomes,
    epochs: int = 200,
    lr: float = 1e-2,
    batch_size: int | None = None,
    weight_decay: float = 0.0,
    seed: int = 0,
) -> list[float]:
    """Train `head` so that the per-trajectory sum of its step outputs matches the outcome.

    features_per_traj[i]: [T_i, H] tensor (detached features of trajectory i's steps);
    outcomes: R_i per trajectory. Adam over minibatches of whole trajectories (`batch_size`
    trajectories, all of them when None). Returns the mean training loss of each epoch.
    """
    x, seg, n = _flatten(head, features_per_traj)
    target = torch.as_tensor(outcomes, dtype=x.dtype, device=x.device).reshape(-1)
    if target.numel() != n:
        raise ValueError(f"{n} trajectories but {target.numel()} outcomes")
    if not torch.isfinite(target).all() or not torch.isfinite(x).all():
        raise ValueError("fit_progress got non-finite features or outcomes")
    opt = torch.optim.Adam(head.parameters(), lr=lr, weight_decay=weight_decay)
    gen = torch.Generator().manual_seed(seed)
    bs = batch_size or n
    history: list[float] = []
    head.train()
    for _ in range(epochs):
        order = torch.randperm(n, generator=gen).to(x.device)
        epoch_loss = 0.0
        for start in range(0, n, bs):
            chosen = order[start : start + bs]
            # Rows of the chosen trajectories, relabelled 0..len(chosen)-1 for the segment sum.
            relabel = torch.full((n,), -1, dtype=torch.long, device=x.device)
            relabel[chosen] = torch.arange(len(chosen), device=x.device)
            rows = relabel[seg] >= 0
            sums = _sums(head(x[rows]), relabel[seg][rows], len(chosen))
            loss = ((sums - target[chosen]) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            epoch_loss += loss.item() * len(chosen)
        history.append(epoch_loss / n)
    head.eval()
    return history


@torch.no_grad()
def predict_progress(head: ProgressHead, features_per_traj: Sequence[torch.Tensor]) -> list[np.ndarray]:
    """Per-trajectory float32 arrays of contributions c_t, ready for compute_advantages(progress=...)."""
    if len(features_per_traj) == 0:
        return []
    x, seg, n = _flatten(head, features_per_traj)
    contribs = head(x).float().cpu().numpy()
    lengths = np.bincount(seg.cpu().numpy(), minlength=n)
    return np.split(contribs.astype(np.float32), np.cumsum(lengths)[:-1])


class ValueHead(nn.Module):
    """V(s_t) from the policy's last hidden state at the last prompt token of step t.

    It reads detached features: the critic learns next to the policy without pulling the
    shared transformer around (one model copy in memory, as LOOP asks for)."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(hidden_size, hidden_size), nn.Tanh(), nn.Linear(hidden_size, 1))
        nn.init.zeros_(self.net[-1].weight)
        nn.init.zeros_(self.net[-1].bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.net(hidden.detach().float()).squeeze(-1)


def build_heads(estimator_name: str, hidden_size: int, device) -> dict:
    """The heads the estimator declares: {"value": ValueHead} and/or {"progress": ProgressHead}."""
    heads: dict = {}
    spec = estimator_spec(estimator_name)
    if spec.value_head:
        heads["value"] = ValueHead(hidden_size).to(device)
    if spec.progress_head:
        heads["progress"] = ProgressHead(hidden_size).to(device)
    return heads


def per_step_arrays(sequences: list[TokenSequence], trajectories,
                    fill: Callable[[TokenSequence, int], float]) -> list[np.ndarray]:
    """Per trajectory, one value per step gathered from the sequences (0 where a step has none)."""
    arrays = [np.zeros(len(t.steps), dtype=np.float64) for t in trajectories]
    for s in sequences:
        for k, (i, t) in enumerate(s.step_refs):
            arrays[i][t] = fill(s, k)
    return arrays


@torch.no_grad()
def step_values(head: ValueHead, sequences: list[TokenSequence], trajectories, hidden: dict) -> list[np.ndarray]:
    """V(s_t) of every step: the value head at the last prompt token of the step."""
    return per_step_arrays(sequences, trajectories,
                           lambda s, k: float(head(hidden[id(s)][s.value_positions[k]][None])[0]))


def fit_spa_progress(head: ProgressHead, sequences: list[TokenSequence], trajectories, hidden: dict,
                     outcome: str, seed: int) -> list[np.ndarray]:
    """SPA: per-step features = the policy's last hidden state at the end of each step's response;
    the head is refit on this batch (warm-started from the previous iteration) so that its
    per-step outputs sum to each episode's outcome, then predicts the contributions c_t."""
    size = next(head.parameters()).shape[-1]
    feats = [torch.zeros((len(t.steps), size)) for t in trajectories]
    for s in sequences:
        for k, (i, t) in enumerate(s.step_refs):
            feats[i][t] = hidden[id(s)][s.response_ends[k]].cpu()
    live = [i for i, t in enumerate(trajectories) if not t.infra_error and t.steps]
    result = (lambda t: float(t.success)) if outcome == "success" else (lambda t: float(t.score))
    fit_progress(head, [feats[i] for i in live], [result(trajectories[i]) for i in live], epochs=50, lr=1e-2,
                 seed=seed)
    predicted = predict_progress(head, [f if len(f) else torch.zeros((0, size)) for f in feats])
    return [p if len(p) == len(t.steps) else np.zeros(len(t.steps)) for p, t in zip(predicted, trajectories)]
