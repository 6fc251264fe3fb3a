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
class TokenSequence:
    """One sequence as the policy generated it, before any credit is assigned: made once from the
    trajectories, read by the no-grad scoring pass (value / progress heads, recomputed logprobs)
    and turned into Samples once the advantages exist (`make_samples`)."""

    input_ids: list[int]
    # Per position p of input_ids (p >= 1): whether token p is a model (response) token and its
    # behaviour logprob. Position 0 is never a target.
    loss_mask: list[int]
    old_logprobs: list[float]
    # Positions (indices into input_ids) of the last prompt token of each step: where the value
    # head reads V(s_t). step_refs are the (trajectory, step) of those steps, in order.
    value_positions: list[int] = field(default_factory=list)
    response_ends: list[int] = field(default_factory=list)  # last response token of each step
    step_refs: list[tuple[int, int]] = field(default_factory=list)
    # admissible-only decoding: position p -> the token ids token p was drawn among; the update
    # renormalizes the policy over them there (None: every position free)
    allowed: dict[int, list[int]] | None = None

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def num_loss_tokens(self) -> int:
        return int(sum(self.loss_mask))


@dataclass
class Sample(TokenSequence):
    """A TokenSequence with what the update trains on: each token's advantage, the value head's
    targets (one per step) and, for decoupled PPO, the logprobs of the weights at update start."""

    advantages: list[float] = field(default_factory=list)
    value_targets: list[float] = field(default_factory=list)
    prox_logprobs: list[float] | None = None


def _check_step(traj_index: int, step_index: int, step) -> None:
    if step.prompt_ids is None or step.response_ids is None:
        raise ValueError(f"trajectory {traj_index} step {step_index} has no token ids: trajectories for training "
                         "must come from an LLM policy that records them (e.g. HFPolicy)")
    if step.response_logprobs is not None and len(step.response_logprobs) != len(step.response_ids):
        raise ValueError(f"trajectory {traj_index} step {step_index}: {len(step.response_ids)} response tokens "
                         f"but {len(step.response_logprobs)} logprobs")
    allowed = step.response_allowed
    if allowed is not None and (not isinstance(allowed, list) or len(allowed) != len(step.response_ids) or any(
            ids is not None and (not isinstance(ids, list) or token not in ids)
            for ids, token in zip(allowed, step.response_ids))):
        raise ValueError(f"trajectory {traj_index} step {step_index}: response_allowed must give, per response token, "
                         "None or a non-empty list of ids that holds the token sampled there")


def _allowed_at(step, first: int) -> dict[int, list[int]]:
    """The step's allowed ids by position in its sequence (its response starts at `first`)."""
    return {first + k: list(ids) for k, ids in enumerate(step.response_allowed or ()) if ids is not None}


def _start(step, ref: tuple[int, int]) -> TokenSequence:
    p, r = list(step.prompt_ids), list(step.response_ids)
    lp = list(step.response_logprobs) if step.response_logprobs is not None else [0.0] * len(r)
    return TokenSequence(
        input_ids=p + r,
        loss_mask=[0] * len(p) + [1] * len(r),
        old_logprobs=[0.0] * len(p) + lp,
        value_positions=[len(p) - 1],
        response_ends=[len(p) + len(r) - 1],
        step_refs=[ref],
        allowed=_allowed_at(step, len(p)) or None,
    )


def _extend(sample: TokenSequence, step, ref: tuple[int, int]) -> bool:
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
    sample.value_positions.append(len(p) - 1)
    sample.response_ends.append(len(p) + len(r) - 1)
    sample.step_refs.append(ref)
    if more := _allowed_at(step, len(p)):
        sample.allowed = {**(sample.allowed or {}), **more}
    return True


def tokenize_trajectories(trajectories: Sequence[Trajectory], mode: str = "per-step") -> list[TokenSequence]:
    """The token sequences of every step of every trajectory without infra_error."""
    sequences: list[TokenSequence] = []
    for i, traj in enumerate(trajectories):
        if traj.infra_error:
            continue
        current: TokenSequence | None = None
        for t, step in enumerate(traj.steps):
            _check_step(i, t, step)
            if not step.response_ids:
                continue
            if not (mode == "full" and current is not None and _extend(current, step, (i, t))):
                current = _start(step, (i, t))
                sequences.append(current)
    return sequences


def response_span(sequence: TokenSequence, k: int) -> range:
    """Positions in input_ids of the response tokens of the sequence's k-th step."""
    return range(sequence.value_positions[k] + 1, sequence.response_ends[k] + 1)


def make_samples(sequences: Sequence[TokenSequence], advantages: Sequence[np.ndarray], *,
                 drop_abs_adv_below: float = 0.0, returns: Sequence[np.ndarray] | None = None,
                 old_logprobs: Sequence[Sequence[float]] | None = None,
                 token_weights: Sequence[Sequence[float]] | None = None) -> list[Sample]:
    """Where sequences and advantages meet, once: new Samples carrying each step's advantage on
    its response tokens and, given `returns`, one value target per step. `old_logprobs` (one list
    per sequence, aligned with input_ids) replaces the behaviour logprobs recorded at generation
    (ppo.recompute_old_logprobs). `token_weights` (one list per sequence, aligned with input_ids) multiply
    each token's advantage (ppo.rollout_correction's weights). Steps with |A| < drop_abs_adv_below leave the loss (LOOP drops
    |A| < 0.01): their tokens are masked, and samples left with no loss token and no value target
    are dropped. The sequences are not modified."""
    samples = []
    for n, seq in enumerate(sequences):
        token_adv = [0.0] * len(seq)
        mask = list(seq.loss_mask)
        targets = []
        for k, (i, t) in enumerate(seq.step_refs):
            a = float(advantages[i][t])
            for pos in response_span(seq, k):
                token_adv[pos] = a if token_weights is None else a * float(token_weights[n][pos])
                if abs(a) < drop_abs_adv_below:
                    mask[pos] = 0
            if returns is not None:
                targets.append(float(returns[i][t]))
        if not (any(mask) or targets):
            continue
        samples.append(Sample(input_ids=seq.input_ids, loss_mask=mask,
                              old_logprobs=list(old_logprobs[n]) if old_logprobs is not None else seq.old_logprobs,
                              value_positions=seq.value_positions, response_ends=seq.response_ends,
                              step_refs=seq.step_refs, allowed=seq.allowed, advantages=token_adv,
                              value_targets=targets))
    return samples


def build_samples(trajectories: Sequence[Trajectory], advantages: Sequence[np.ndarray], mode: str = "per-step",
                  **options) -> list[Sample]:
    """tokenize_trajectories then make_samples: for callers with no scoring pass in between."""
    return make_samples(tokenize_trajectories(trajectories, mode), advantages, **options)


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


def pad_sequences(sequences: Sequence[TokenSequence], pad_id: int, device=None) -> dict:
    """input_ids and attention_mask, right-padded: what a forward pass needs; and, when a sequence
    was decoded within allowed ids, "allowed" [B, width-1, M]: column p-1 holds the ids token p
    was drawn among, -1 padded (all -1 where decoding was free)."""
    import torch

    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(sequences), width), dtype=torch.long)
    for b, s in enumerate(sequences):
        ids[b, :len(s)] = torch.tensor(s.input_ids)
        attn[b, :len(s)] = 1
    out = {"input_ids": ids, "attention_mask": attn}
    most = max((len(a) for s in sequences for a in (s.allowed or {}).values()), default=0)
    if most:
        allowed = torch.full((len(sequences), width - 1, most), -1, dtype=torch.long)
        for b, s in enumerate(sequences):
            for pos, a in (s.allowed or {}).items():
                allowed[b, pos - 1, :len(a)] = torch.tensor(a, dtype=torch.long)
        out["allowed"] = allowed
    return {k: v.to(device) for k, v in out.items()} if device is not None else out


def collate(samples: Sequence[Sample], pad_id: int, device=None) -> dict:
    """pad_sequences plus the update's targets. Target-aligned arrays are shifted: column p-1
    scores token p."""
    import torch

    out = pad_sequences(samples, pad_id)
    width = out["input_ids"].shape[1]

    def targets(values_of) -> "torch.Tensor":
        t = torch.zeros((len(samples), width - 1), dtype=torch.float32)
        for b, s in enumerate(samples):
            t[b, : len(s) - 1] = torch.tensor(values_of(s)[1:], dtype=torch.float32)
        return t

    out["loss_mask"] = targets(lambda s: s.loss_mask)
    out["old_logprobs"] = targets(lambda s: s.old_logprobs)
    out["advantages"] = targets(lambda s: s.advantages)
    if all(s.prox_logprobs is not None for s in samples):
        out["prox_logprobs"] = targets(lambda s: s.prox_logprobs)
    return {k: v.to(device) for k, v in out.items()} if device is not None else out
