"""REINFORCE++: discounted returns normalized over the whole batch (no group, no critic)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from agentgym.trainers.estimators.common import EstimatorSpec, FlatBatch, discounted_returns, segment_stats

if TYPE_CHECKING:
    from agentgym.trainers.estimators import EstimatorConfig


def reinforce_pp_advantages(batch: FlatBatch, cfg: "EstimatorConfig", values=None, progress=None) -> np.ndarray:
    """REINFORCE++ (Hu 2025, "REINFORCE++: A Simple and Efficient Approach for Aligning Large Language
    Models", sec. 3): per step the discounted return G_t = r_t + gamma G_{t+1}, normalized over every
    live step of the batch,

        A_t = (G_t - mean_batch G) / (std_batch G + eps),

    with no group baseline. The token-level KL to the reference enters as a reward in the loss
    (policy loss `reinforce_pp`, with ppo.kl_coef as beta). Under data parallelism the batch is each
    rank's share of it.
    """
    returns = discounted_returns(batch, batch.reward, cfg.gamma)
    zero = np.zeros(len(returns), dtype=np.int64)
    count, mean, std = segment_stats(returns, zero, 1, batch.live)
    if count[0] < 2:
        return np.zeros(len(returns))
    return np.where(batch.live, (returns - mean[0]) / (std[0] + cfg.eps), 0.0)


SPECS = [EstimatorSpec("reinforce_pp", reinforce_pp_advantages, policy_loss="reinforce_pp", loss_agg="token-mean")]
