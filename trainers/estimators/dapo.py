"""DAPO: GRPO's group-normalized advantage, with the overlong length penalty added to the outcome;
its loss is clip-higher PPO at token level, and groups with all-equal outcomes are dropped."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from agentgym.trainers.estimators.common import EstimatorSpec, FlatBatch, group_normalized
from agentgym.trainers.estimators.options import resolve_options

if TYPE_CHECKING:
    from agentgym.trainers.estimators import EstimatorConfig

OPTIONS = {
    "clip_low": 0.2,  # r clipped to [1 - clip_low, 1 + clip_high] (paper: 0.2 / 0.28)
    "clip_high": 0.28,
    "overlong_max": 0,  # L_max in tokens per response; 0 = no overlong penalty (set it to rollout.max_new_tokens)
    "overlong_cache": 0,  # L_cache; 0 = one fifth of L_max (the paper's 4,096 of 20,480)
}


def overlong_penalty(length: int | float, max_len: int, cache: int) -> float:
    """DAPO's soft overlong punishment (eq. 13):

        0                                 if |y| <= L_max - L_cache
        ((L_max - L_cache) - |y|) / L_cache   if L_max - L_cache < |y| <= L_max
        -1                                if |y| > L_max
    """
    if max_len <= 0:
        return 0.0
    cache = cache if cache > 0 else max(max_len // 5, 1)
    cache = min(cache, max_len)
    if length <= max_len - cache:
        return 0.0
    if length <= max_len:
        return ((max_len - cache) - length) / cache
    return -1.0


def shaped_outcome(batch: FlatBatch, options: dict) -> np.ndarray:
    """R_i plus the overlong penalty of each of its responses (a step's response = one generation)."""
    max_len, cache = int(options["overlong_max"]), int(options["overlong_cache"])
    if max_len <= 0:
        return batch.outcome
    penalty = np.array([sum(overlong_penalty(len(s.response_ids or ()), max_len, cache) for s in t.steps)
                        for t in batch.trajectories], dtype=np.float64)
    return batch.outcome + np.where(batch.traj_live, penalty, 0.0)


def dapo_advantages(batch: FlatBatch, cfg: "EstimatorConfig", values=None, progress=None) -> np.ndarray:
    """DAPO (Yu et al. 2025, arXiv 2503.14476, eq. 8-13): A_i = (R_i - mean_j R_j) / (std_j R_j + eps)
    with R_i the outcome plus the overlong penalty, broadcast to every step of episode i."""
    options = resolve_options(SPEC, cfg.options)
    outcome = shaped_outcome(batch, options)
    adv = group_normalized(outcome, batch.traj_group, batch.num_groups, batch.traj_live, True, cfg.eps)
    return batch.broadcast(adv)


def informative_groups(trajectories: Sequence, advantages: Sequence[np.ndarray]) -> np.ndarray:
    """Dynamic sampling's filter, per trajectory: True when some episode of its group has a non-zero
    advantage. A group whose outcomes are all equal has all-zero advantages and no gradient; DAPO
    drops it so it does not dilute the token-level mean (it also samples more groups to refill the
    batch; here rollout.oversample_groups plays that part)."""
    alive: dict[str, bool] = {}
    for t, a in zip(trajectories, advantages):
        alive[t.group_id] = alive.get(t.group_id, False) or bool(np.any(np.abs(np.asarray(a)) > 0))
    return np.array([alive[t.group_id] for t in trajectories], dtype=bool)


def episode_part(batch: FlatBatch, cfg: "EstimatorConfig") -> dict[str, np.ndarray]:
    return {"episode": dapo_advantages(batch, cfg)}


SPEC = EstimatorSpec("dapo", dapo_advantages, group_relative=True, parts=episode_part, policy_loss="dapo",
                     loss_agg="token-mean", options=OPTIONS, dynamic_sampling=True)
SPECS = [SPEC]
