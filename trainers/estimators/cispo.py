"""CISPO: GRPO's group-normalized advantage; the loss clips the importance weight, not the update."""

from __future__ import annotations

from agentgym.trainers.estimators.common import EstimatorSpec
from agentgym.trainers.estimators.grpo import episode_part, grpo_advantages

OPTIONS = {
    # the weight r_t is clipped to [1 - clip_low, 1 + clip_high]. MiniMax-M1 sets no lower bound
    # (clip_low = 1: the weight only has its natural floor 0) and tunes the upper one.
    "clip_low": 1.0,
    "clip_high": 0.28,
}

# CISPO (MiniMax 2025, "MiniMax-M1", sec. 3.1, eq. 4-5): A is GRPO's group-normalized advantage; the
# loss (policy loss `cispo`) is -sg(clip(r_t, 1 - e_low, 1 + e_high)) A log pi(t), averaged over all
# tokens of the batch.
SPECS = [EstimatorSpec("cispo", grpo_advantages, group_relative=True, parts=episode_part, policy_loss="cispo",
                       loss_agg="token-mean", options=OPTIONS)]
