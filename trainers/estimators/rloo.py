"""RLOO and LOOP: the leave-one-out baseline, never divided by a std."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from agentgym.trainers.estimators.common import EstimatorSpec, FlatBatch, segment_stats

if TYPE_CHECKING:
    from agentgym.trainers.estimators import EstimatorConfig


def leave_one_out(batch: FlatBatch) -> np.ndarray:
    """Per-trajectory A_i = R_i - 1/(N-1) sum_{j != i} R_j over the live episodes of i's group.

    Written as N/(N-1) (R_i - mean_j R_j), which is the same number and needs only group sums.
    A group with a single live episode has no other episode to compare with: 0.
    """
    count, mean, _ = segment_stats(batch.outcome, batch.traj_group, batch.num_groups, batch.traj_live)
    n = count[batch.traj_group]
    scale = np.divide(n, n - 1, out=np.zeros_like(n), where=n > 1)
    return np.where(batch.traj_live, scale * (batch.outcome - mean[batch.traj_group]), 0.0)


def rloo_advantages(batch: FlatBatch, cfg: "EstimatorConfig", values=None, progress=None) -> np.ndarray:
    """RLOO (Kool et al. 2019, "Buy 4 REINFORCE samples, get a baseline for free!";
    Ahmadian et al. 2024, "Back to Basics", the RLOO estimator):

        A_i = R_i - 1/(N-1) * sum_{j != i} R_j

    broadcast to every step of episode i. No std normalization, whatever `norm_std` says.
    """
    return batch.broadcast(leave_one_out(batch))


def loop_advantages(batch: FlatBatch, cfg: "EstimatorConfig", values=None, progress=None) -> np.ndarray:
    """LOOP (Chen et al. 2025, "Reinforcement Learning for Long-Horizon Interactive LLM
    Agents", the leave-one-out advantage of LOOP):

        A_i = R_i - 1/(N-1) * sum_{j != i} R_j     (no std normalization)

    The advantage is exactly RLOO's. What makes LOOP LOOP lives in the trainer, not here:
    PPO with this advantage and no critic, several epochs of shuffled minibatches,
    per-token asymmetric clipping of the importance ratio in [1/(1+eps), 1+eps], no KL by
    default, and dropping rollouts with |A| < 0.01.
    """
    return batch.broadcast(leave_one_out(batch))


def episode_part(batch: FlatBatch, cfg: "EstimatorConfig") -> dict[str, np.ndarray]:
    return {"episode": rloo_advantages(batch, cfg)}


SPECS = [EstimatorSpec("rloo", rloo_advantages, group_relative=True, parts=episode_part),
         EstimatorSpec("loop", loop_advantages, group_relative=True, asymmetric_clip=True, parts=episode_part)]
