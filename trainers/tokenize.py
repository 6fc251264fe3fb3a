"""Old import path (kept for one release): the training samples live in trainers/samples.py (the old
name looked like the standard library's `tokenize`)."""

from agentgym.trainers.samples import *  # noqa: F401,F403
