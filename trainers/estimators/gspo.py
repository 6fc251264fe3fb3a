"""GSPO: GRPO's group-normalized advantage with a sequence-level importance ratio in the loss."""

from __future__ import annotations

from agentgym.trainers.estimators.common import EstimatorSpec
from agentgym.trainers.estimators.grpo import episode_part, grpo_advantages

OPTIONS = {
    # s_i clipped to [1 - clip_low, 1 + clip_high]; the paper's ranges are tiny because s_i is a
    # per-token geometric mean (3e-4 / 4e-4)
    "clip_low": 3e-4,
    "clip_high": 4e-4,
}

# GSPO (Zheng et al. 2025, "Group Sequence Policy Optimization", eq. 5-7): the advantage is GRPO's,
#     A_i = (R_i - mean_j R_j) / std_j R_j,
# and the loss (policy loss `gspo`) clips s_i = (pi(y_i) / pi_old(y_i))^(1/|y_i|) per sequence.
SPECS = [EstimatorSpec("gspo", grpo_advantages, group_relative=True, parts=episode_part, policy_loss="gspo",
                       loss_agg="seq-mean", options=OPTIONS)]
