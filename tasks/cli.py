"""Old path of `agentgym tasks` (a command-line app, now agentgym/tasks_cli.py in the apps layer).
Kept, without a warning, for installs made before the move: their `agentgym.commands` entry point
still names this module until `pip install -e .` re-reads pyproject.toml. Nothing imports it."""

from agentgym.tasks_cli import *  # noqa: F401,F403
from agentgym.tasks_cli import register  # noqa: F401
