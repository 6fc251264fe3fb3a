"""agentgym: Gymnasium text environments and trainers for multi-turn LLM agent RL.

`import agentgym` registers every built-in environment under the `agentgym/` namespace
without importing any environment's code, torch or other heavy dependencies, then the
environments that installed packages declare through the `agentgym.envs` entry-point group.
"""

from agentgym.chat import ChatEnv
from agentgym.core import INFO_KEYS, AnyText, StepInfo, TextEnv
from agentgym.errors import AgentGymError
from agentgym.parsing import ActionParser, JSONToolCallParser, ParsedAction, RawActionParser, TagActionParser
from agentgym.registration import get_task_space, make, register_env, registered_envs
from agentgym.rollout import collect
from agentgym.snapshot import Snapshot, SnapshotError, check_snapshot
from agentgym.tasks.space import TaskSpace
from agentgym.tasks.spec import TaskSpec
from agentgym.trajectory import Step, Trajectory, load_trajectories, save_trajectories

__version__ = "0.1.0"

__all__ = [
    "ActionParser", "AgentGymError", "AnyText", "ChatEnv", "INFO_KEYS", "JSONToolCallParser", "ParsedAction",
    "RawActionParser", "Snapshot", "SnapshotError", "Step", "StepInfo", "TagActionParser", "TaskSpace", "TaskSpec", "TextEnv", "Trajectory", "check_snapshot", "collect",
    "get_task_space", "load_trajectories", "make", "register_env", "registered_envs", "save_trajectories",
]

from agentgym.registration import load_env_plugins as _load_env_plugins
from agentgym.registration import register_builtin_envs as _register_builtin_envs

_register_builtin_envs()
_load_env_plugins()  # third-party packages' `agentgym.envs` entry points
