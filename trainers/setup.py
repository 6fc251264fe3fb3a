"""Old import path (kept for one release): a run's set-up (run folder, start model, policy and
engine, heads, optimizer) lives in trainers/run_setup.py; the old name looked like setuptools'."""

import warnings

from agentgym.trainers.run_setup import *  # noqa: F401,F403

warnings.warn("agentgym.trainers.setup is now agentgym.trainers.run_setup; the old path goes in the next release",
              DeprecationWarning, stacklevel=2)
