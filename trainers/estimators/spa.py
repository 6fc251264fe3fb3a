"""SPA: dense step rewards from a progress estimator, then advantages over those rewards."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from agentgym.errors import ConfigError
from agentgym.trainers.estimators.common import (
    EstimatorSpec,
    FlatBatch,
    as_float_array,
    describe_trajectory,
    discounted_returns,
    gae,
    group_normalized,
)

if TYPE_CHECKING:
    from agentgym.trainers.estimators import EstimatorConfig


def spa_step_rewards(batch: FlatBatch, cfg: "EstimatorConfig", progress: Sequence[Any]) -> np.ndarray:
    """r_t = c_t + grounding_bonus * [action executed] - invalid_penalty * [action invalid].

    The env's own (sparse) reward is not added: the contributions c_t were trained to sum
    to the episode outcome, so they already carry it, spread over the steps.
    """
    if len(progress) != batch.num_traj:
        raise ValueError(f"progress has {len(progress)} entries for {batch.num_traj} trajectories")
    contrib = np.zeros(len(batch.reward))
    for i, traj in enumerate(batch.trajectories):
        if not batch.traj_live[i]:
            continue
        c = as_float_array(progress[i])
        length = int(batch.lengths[i])
        if len(c) != length:
            raise ValueError(f"{describe_trajectory(i, traj)} has {length} steps but {len(c)} progress contributions")
        if not np.all(np.isfinite(c)):
            raise ValueError(f"{describe_trajectory(i, traj)} has a non-finite progress contribution")
        start = int(batch.offsets[i])
        contrib[start : start + length] = c
    return contrib + cfg.grounding_bonus * batch.valid - cfg.invalid_penalty * (~batch.valid)


def spa_advantages(batch: FlatBatch, cfg: "EstimatorConfig", values=None, progress=None) -> np.ndarray:
    """SPA-RL (Wang et al. 2025, "Reinforcing LLM Agents via Stepwise Progress Attribution",
    arXiv 2505.20732): the progress estimator gives per-step contributions c_t with
    sum_t c_t ~ R (trained by MSE on the sum, see spa_progress.py), and the step reward is

        r_t = c_t + grounding_bonus * 1[action executed]

    The paper and its public code feed these dense rewards to PPO with a critic, so with
    `values` the advantage is GAE over r_t (Schulman et al. 2016, eq. 16), exactly as the
    `ppo` estimator computes it. Without values (critic-free use) it is the discounted
    return of the dense rewards minus a group baseline: the mean return of the live
    episodes of the same group at the same step index,

        A_t^i = G_t^i - mean_{j in group, T_j > t} G_t^j,   G_t = r_t + gamma * G_{t+1}

    with no std normalization (the rewards are already on the outcome's scale). A step index
    reached by one episode only has no baseline: 0. Comparing equal step indices keeps
    early steps from always looking better than late ones just because more bonus lies ahead.
    """
    if progress is None:
        raise ConfigError(
            "estimator 'spa' needs per-step progress contributions: fit a ProgressHead "
            "(agentgym.trainers.spa_progress) and pass progress=[c_0..c_T-1 per trajectory]"
        )
    rewards = spa_step_rewards(batch, cfg, progress)
    if values is not None:
        return gae(batch, rewards, values, cfg.gamma, cfg.lam)
    batch.require_groups(f"{cfg.name} (without values)")
    returns = discounted_returns(batch, rewards, cfg.gamma)
    seg = batch.group * (batch.max_len or 1) + batch.time  # one segment per (group, step index)
    return group_normalized(returns, seg, batch.num_groups * max(batch.max_len, 1), batch.live, False, cfg.eps)


SPECS = [EstimatorSpec("spa", spa_advantages, progress_head=True)]
