"""GRPO: the group-normalized episode return, broadcast to every step of the episode."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from agentgym.trainers.estimators.common import EstimatorSpec, FlatBatch, group_normalized

if TYPE_CHECKING:
    from agentgym.trainers.estimators import EstimatorConfig


def episode_advantage(batch: FlatBatch, cfg: "EstimatorConfig") -> np.ndarray:
    """Per-trajectory A_i = (R_i - mean_j R_j) / F over the live episodes of i's group.

    F = std_j R_j + eps with `norm_std`, else 1 ("Dr. GRPO"). Shared with GiGPO, whose
    episode advantage A^E is the same quantity.
    """
    return group_normalized(
        batch.outcome, batch.traj_group, batch.num_groups, batch.traj_live, cfg.norm_std, cfg.eps
    )


def grpo_advantages(batch: FlatBatch, cfg: "EstimatorConfig", values=None, progress=None) -> np.ndarray:
    """GRPO (Shao et al. 2024, DeepSeekMath, sec. 4.1.2 "outcome supervision"):

        A_i = (R_i - mean({R_1..R_N})) / (std({R_1..R_N}) + eps)

    applied to every step (and so every response token) of episode i. All-equal groups give
    0. A group left with one live episode (the others infra_error) has no baseline: 0.
    """
    return batch.broadcast(episode_advantage(batch, cfg))


def episode_part(batch: FlatBatch, cfg: "EstimatorConfig") -> dict[str, np.ndarray]:
    return {"episode": grpo_advantages(batch, cfg)}


SPECS = [EstimatorSpec("grpo", grpo_advantages, group_relative=True, parts=episode_part)]
