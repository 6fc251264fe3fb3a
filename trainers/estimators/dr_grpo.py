"""Dr. GRPO: GRPO without its two normalizations (no std in the advantage, no 1/|o_i| in the loss)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from agentgym.trainers.estimators.common import EstimatorSpec, FlatBatch, group_normalized

if TYPE_CHECKING:
    from agentgym.trainers.estimators import EstimatorConfig

OPTIONS = {
    # the constant the summed token losses are divided by, per sample; 0 = rollout.max_new_tokens
    # (the paper divides by the generation budget)
    "norm_tokens": 0,
}


def dr_grpo_advantages(batch: FlatBatch, cfg: "EstimatorConfig", values=None, progress=None) -> np.ndarray:
    """Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-like Training: A Critical Perspective", sec. 3.2):

        A_i = R_i - mean_j R_j        (whatever `norm_std` says)

    broadcast to every step of episode i; the loss sums token terms and divides by a constant
    (policy loss `dr_grpo`, aggregation token-sum) instead of by each response's length.
    """
    return batch.broadcast(group_normalized(batch.outcome, batch.traj_group, batch.num_groups, batch.traj_live,
                                            False, cfg.eps))


def episode_part(batch: FlatBatch, cfg: "EstimatorConfig") -> dict[str, np.ndarray]:
    return {"episode": dr_grpo_advantages(batch, cfg)}


SPECS = [EstimatorSpec("dr_grpo", dr_grpo_advantages, group_relative=True, parts=episode_part,
                       policy_loss="dr_grpo", loss_agg="token-sum", options=OPTIONS)]
