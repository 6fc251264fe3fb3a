"""Old import path (kept for one release): the training loop is trainers/training.py. `loop` is
also the LOOP estimator's name (trainers/estimators/loop.py), so the module was renamed."""

import warnings

from agentgym.trainers.training import *  # noqa: F401,F403
from agentgym.trainers.training import _evaluate_now, _rollout_stats  # noqa: F401  (used by old scripts)

warnings.warn("agentgym.trainers.loop is now agentgym.trainers.training; the old path goes in the next release",
              DeprecationWarning, stacklevel=2)
