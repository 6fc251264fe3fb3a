"""GiGPO: episode-level group advantage plus a step-level advantage inside anchor-state groups."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from agentgym.trainers.estimators.common import EstimatorSpec, FlatBatch, discounted_returns, group_normalized
from agentgym.trainers.estimators.grpo import episode_advantage

if TYPE_CHECKING:
    from agentgym.trainers.estimators import EstimatorConfig


def anchor_groups(batch: FlatBatch) -> tuple[np.ndarray, int]:
    """Integer id per step for its anchor-state group: steps of the same episode group whose
    `anchor` (canonical state key) is equal, whatever their time index or episode."""
    index: dict[tuple[int, str], int] = {}
    groups = batch.traj_group.tolist()
    ids = np.fromiter(
        (
            index.setdefault((g, step.anchor), len(index))
            for g, traj in zip(groups, batch.trajectories)
            for step in traj.steps
        ),
        dtype=np.int64,
        count=len(batch.reward),
    )
    return ids, len(index)


def step_advantage(batch: FlatBatch, cfg: "EstimatorConfig") -> np.ndarray:
    """A^S per step: (R_t - mean of R over the anchor group) / F; 0 in singleton anchor groups."""
    returns = discounted_returns(batch, batch.reward, cfg.gamma)
    ids, num = anchor_groups(batch)
    # infra_error steps are masked out of the statistics, so they cannot be anyone's baseline
    return group_normalized(returns, ids, num, batch.live, cfg.norm_std, cfg.eps)


def gigpo_advantages(batch: FlatBatch, cfg: "EstimatorConfig", values=None, progress=None) -> np.ndarray:
    """GiGPO (Feng et al. 2025, "Group-in-Group Policy Optimization for LLM Agent Training",
    arXiv 2505.10978, the episode relative advantage, the step relative advantage and the
    combined group-in-group advantage of its method section):

        episode level:  A^E(tau_i) = (R(tau_i) - mean_j R(tau_j)) / F_norm
        step return:    R_t^i = r_t^i + gamma * R_{t+1}^i
        step level:     A^S(a_t^i) = (R_t^i - mean over the anchor group U_s of R) / F_norm
        combined:       A(a_t^i) = A^E(tau_i) + omega * A^S(a_t^i)

    F_norm = std + eps with `norm_std`, else 1. r_t includes -invalid_penalty for an invalid
    action (the public code uses 0.1); R(tau_i) is the configured episode outcome.
    Anchor groups gather steps of one episode group with equal `anchor`, including steps at
    different time indices and repeated visits within one episode.
    """
    adv = batch.broadcast(episode_advantage(batch, cfg))
    if cfg.omega:
        adv = adv + cfg.omega * step_advantage(batch, cfg)
    return adv


def gigpo_parts(batch: FlatBatch, cfg: "EstimatorConfig") -> dict[str, np.ndarray]:
    """The two terms of the GiGPO advantage, per step: A^E broadcast, and omega * A^S."""
    return {"episode": batch.broadcast(episode_advantage(batch, cfg)), "step": cfg.omega * step_advantage(batch, cfg)}


SPECS = [EstimatorSpec("gigpo", gigpo_advantages, group_relative=True, parts=gigpo_parts)]
