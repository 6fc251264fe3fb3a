"""PPO baseline: generalized advantage estimation from a learned value head."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from agentgym.errors import ConfigError
from agentgym.trainers.estimators.common import EstimatorSpec, FlatBatch, gae

if TYPE_CHECKING:
    from agentgym.trainers.estimators import EstimatorConfig


def gae_advantages(batch: FlatBatch, cfg: "EstimatorConfig", values=None, progress=None) -> np.ndarray:
    """PPO with a critic (Schulman et al. 2017), advantages by GAE (Schulman et al. 2016, eq. 16):

        delta_t = r_t + gamma * V(s_{t+1}) - V(s_t)
        A_t     = sum_{k>=0} (gamma * lam)^k * delta_{t+k}

    over the env steps of each episode (one value per step: V at the state the step's prompt
    shows). r_t is the env reward minus the invalid-action penalty. V(s_T) = 0 after a
    terminated episode; a truncated one bootstraps from values[i][T] when given. Value-loss
    targets are A_t + V(s_t). No group is needed and no normalization is applied here
    (whiten per minibatch in the trainer if wanted).
    """
    if values is None:
        raise ConfigError(f"estimator {cfg.name!r} needs value estimates: pass values=[V(s_0..s_T-1) per "
                          "trajectory] from a value head")
    return gae(batch, batch.reward, values, cfg.gamma, cfg.lam)


SPECS = [EstimatorSpec("gae", gae_advantages, value_head=True)]
