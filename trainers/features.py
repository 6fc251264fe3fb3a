"""Old import path (kept for one release): what a run needs of its env lives in
trainers/env_requirements.py (the old name was easy to take for SPA's hidden-state features)."""

from agentgym.trainers.env_requirements import *  # noqa: F401,F403
