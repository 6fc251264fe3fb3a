"""Old import path of SPA's progress head (kept for one release): it lives in trainers/heads.py."""

from agentgym.trainers.heads import ProgressHead, fit_progress, predict_progress, progress_loss  # noqa: F401
