"""Training samples from trajectories, on the token ids recorded at generation time.

Per-step mode: each step is one sample, `prompt_ids + response_ids`, loss on the response.
Full-conversation mode: the steps of an episode are merged into one sequence wherever the
next step's prompt starts with this step's prompt + response (true for chat templates that
only append, as with `history="full"`); env and template tokens between responses are in the
sequence but masked from the loss. Where a template rewrites earlier turns the episode
simply continues in a new sequence, so every response is always scored in exactly the
context the model generated it in. Nothing is re-tokenized from text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from agentgym.trajectory import Trajectory


@dataclass
class Sample:
    input_ids: list[int]
    # Per position p of input_ids (p >= 1): whether token p is a model token trained on, its
    # behaviour logprob and its advantage. Position 0 is never a target.
    loss_mask: list[int]
    old_logprobs: list[float]
    advantages: list[float]
    # Positions (indices into input_ids) of the last prompt token of each step: where the value
    # head reads V(s_t). step_refs are the (trajectory, step) of those steps, in order.
    value_positions: list[int] = field(default_factory=list)
    response_ends: list[int] = field(default_factory=list)  # last response token of each step
    step_refs: list[tuple[int, int]] = field(default_factory=list)
    value_targets: list[float] = field(default_factory=list)
    # Decoupled PPO (async rollouts): per position, the logprob under the weights at update start.
    prox_logprobs: list[float] | None = None

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def num_loss_tokens(self) -> int:
        return int(sum(self.loss_mask))


def _check_step(traj_index: int, step_index: int, step) -> None:
    if step.prompt_ids is None or step.response_ids is None:
        raise ValueError(f"trajectory {traj_index} step {step_index} has no token ids: trajectories for training "
                         "must come from an LLM policy that records them (e.g. HFPolicy)")
    if step.response_logprobs is not None and len(step.response_logprobs) != len(step.response_ids):
        raise ValueError(f"trajectory {traj_index} step {step_index}: {len(step.response_ids)} response tokens "
                         f"but {len(step.response_logprobs)} logprobs")


def _start(step, ref: tuple[int, int]) -> Sample:
    p, r = list(step.prompt_ids), list(step.response_ids)
    lp = list(step.response_logprobs) if step.response_logprobs is not None else [0.0] * len(r)
    return Sample(
        input_ids=p + r,
        loss_mask=[0] * len(p) + [1] * len(r),
        old_logprobs=[0.0] * len(p) + lp,
        advantages=[0.0] * (len(p) + len(r)),
        value_positions=[len(p) - 1],
        response_ends=[len(p) + len(r) - 1],
        step_refs=[ref],
    )


def _extend(sample: Sample, step, ref: tuple[int, int]) -> bool:
    """Append `step` to `sample` if its prompt continues the sequence; False otherwise."""
    p = step.prompt_ids
    n = len(sample.input_ids)
    if len(p) < n or p[:n] != sample.input_ids:
        return False
    between = list(p[n:])  # env observation + template tokens: context, not trained on
    r = list(step.response_ids)
    lp = list(step.response_logprobs) if step.response_logprobs is not None else [0.0] * len(r)
    sample.input_ids += between + r
    sample.loss_mask += [0] * len(between) + [1] * len(r)
    sample.old_logprobs += [0.0] * len(between) + lp
    sample.advantages += [0.0] * (len(between) + len(r))
    sample.value_positions.append(len(p) - 1)
    sample.response_ends.append(len(p) + len(r) - 1)
    sample.step_refs.append(ref)
    return True


def build_samples(trajectories: Sequence[Trajectory], mode: str = "per-step") -> list[Sample]:
    """Samples (advantages still 0) for every step of every trajectory without infra_error."""
    samples: list[Sample] = []
    for i, traj in enumerate(trajectories):
        if traj.infra_error:
            continue
        current: Sample | None = None
        for t, step in enumerate(traj.steps):
            _check_step(i, t, step)
            if not step.response_ids:
                continue
            if not (mode == "full" and current is not None and _extend(current, step, (i, t))):
                current = _start(step, (i, t))
                samples.append(current)
    return samples


def response_span(sample: Sample, k: int) -> range:
    """Positions in input_ids of the response tokens of the sample's k-th step."""
    return range(sample.value_positions[k] + 1, sample.response_ends[k] + 1)


def assign_advantages(samples: Sequence[Sample], advantages: Sequence[np.ndarray], drop_abs_adv_below: float = 0.0,
                      returns: Sequence[np.ndarray] | None = None) -> list[Sample]:
    """Write each step's advantage onto its response tokens (and its value target when given).
    Steps with |A| < drop_abs_adv_below leave the loss (LOOP drops |A| < 0.01): their tokens are
    masked, and samples left with no loss token and no value target are dropped."""
    kept = []
    for s in samples:
        s.value_targets = []
        for k, (i, t) in enumerate(s.step_refs):
            a = float(advantages[i][t])
            dropped = abs(a) < drop_abs_adv_below
            for pos in response_span(s, k):
                s.advantages[pos] = a
                if dropped:
                    s.loss_mask[pos] = 0
            if returns is not None:
                s.value_targets.append(float(returns[i][t]))
        if s.num_loss_tokens > 0 or s.value_targets:
            kept.append(s)
    return kept


def sft_sample(prompt_ids: list[int], response_ids: list[int]) -> Sample:
    """A behaviour-cloning sample: loss on the response tokens, advantage 1 (unused by SFT)."""
    return Sample(
        input_ids=list(prompt_ids) + list(response_ids),
        loss_mask=[0] * len(prompt_ids) + [1] * len(response_ids),
        old_logprobs=[0.0] * (len(prompt_ids) + len(response_ids)),
        advantages=[0.0] * len(prompt_ids) + [1.0] * len(response_ids),
        value_positions=[len(prompt_ids) - 1],
        response_ends=[len(prompt_ids) + len(response_ids) - 1],
    )


def collate(samples: Sequence[Sample], pad_id: int, device=None):
    """Right-padded tensors. Target-aligned arrays are shifted: column p-1 scores token p."""
    import torch

    width = max(len(s) for s in samples)
    batch = len(samples)
    ids = torch.full((batch, width), pad_id, dtype=torch.long)
    attn = torch.zeros((batch, width), dtype=torch.long)
    mask = torch.zeros((batch, width - 1), dtype=torch.float32)
    old = torch.zeros((batch, width - 1), dtype=torch.float32)
    adv = torch.zeros((batch, width - 1), dtype=torch.float32)
    for b, s in enumerate(samples):
        n = len(s)
        ids[b, :n] = torch.tensor(s.input_ids)
        attn[b, :n] = 1
        mask[b, : n - 1] = torch.tensor(s.loss_mask[1:], dtype=torch.float32)
        old[b, : n - 1] = torch.tensor(s.old_logprobs[1:], dtype=torch.float32)
        adv[b, : n - 1] = torch.tensor(s.advantages[1:], dtype=torch.float32)
    out = {"input_ids": ids, "attention_mask": attn, "loss_mask": mask, "old_logprobs": old, "advantages": adv}
    if all(s.prox_logprobs is not None for s in samples):
        prox = torch.zeros((batch, width - 1), dtype=torch.float32)
        for b, s in enumerate(samples):
            prox[b, : len(s) - 1] = torch.tensor(s.prox_logprobs[1:], dtype=torch.float32)
        out["prox_logprobs"] = prox
    if device is not None:
        out = {k: v.to(device) for k, v in out.items()}
    return out
