"""Registering environments under Gymnasium's registry, in the `agentgym` namespace.

Built-in environments are listed in `agentgym.builtin_envs.BUILTIN_ENVS` as import strings, so that
`import agentgym` registers every id without importing any environment's code (nor torch).

Third-party packages register theirs without any code on the user's side, as Gymnasium plugins
do: they declare an entry point in the group `agentgym.envs` (pyproject.toml:
`[project.entry-points."agentgym.envs"] mypkg = "mypkg.envs:register"`), and `import agentgym`
loads every such entry point. The object it names is either a function, called with no
arguments (it calls `agentgym.register_env` itself), or a list of `register_env` keyword dicts
(like BUILTIN_ENVS). A plugin that fails to load is reported as one warning and skipped, so a
broken package never breaks `import agentgym`.
"""

from __future__ import annotations

import warnings
from importlib.metadata import entry_points
from typing import Any, Callable

import gymnasium as gym

from agentgym.errors import UnknownEnvError

NAMESPACE = "agentgym"
ENTRY_POINT_GROUP = "agentgym.envs"
_OURS: dict[str, dict[str, Any]] = {}  # id -> registration kwargs, for `agentgym envs`
_TASK_SPACES: dict[str, Any] = {}


def register_env(
    id: str,
    entry_point: str | Callable[..., gym.Env],
    *,
    max_episode_steps: int | None = None,
    description: str = "",
    **kwargs: Any,
) -> str:
    """Register a TextEnv with Gymnasium in one call; returns the full id.

    A bare name ("MyEnv-v0") goes into the agentgym namespace. Registering the same id again
    replaces the old entry (useful in notebooks); Gymnasium only warns."""
    full_id = id if "/" in id else f"{NAMESPACE}/{id}"
    if full_id in gym.registry:
        del gym.registry[full_id]
    gym.register(id=full_id, entry_point=entry_point, max_episode_steps=max_episode_steps, kwargs=kwargs)
    _OURS[full_id] = {"max_episode_steps": max_episode_steps, "description": description, "kwargs": kwargs}
    _TASK_SPACES.pop(full_id, None)
    return full_id


def registered_envs() -> dict[str, dict[str, Any]]:
    return dict(_OURS)


def check_env_id(env_id: str) -> str:
    if env_id in gym.registry:
        return env_id
    if f"{NAMESPACE}/{env_id}" in gym.registry:
        return f"{NAMESPACE}/{env_id}"
    known = ", ".join(sorted(_OURS)) or "none"
    raise UnknownEnvError(f"unknown environment {env_id!r}; registered agentgym ids: {known} (see `agentgym envs`; "
                          "an env your own module registers needs `--import MODULE` or `imports: [MODULE]`)")


def make(env_id: str, **kwargs: Any) -> gym.Env:
    """gym.make with agentgym's id check (one clear error for an unknown id)."""
    return gym.make(check_env_id(env_id), **kwargs)


def get_task_space(env_id: str):
    """The task space of a registered environment (built once per id)."""
    env_id = check_env_id(env_id)
    if env_id not in _TASK_SPACES:
        env = gym.make(env_id)
        try:
            _TASK_SPACES[env_id] = env.unwrapped.task_space
        finally:
            env.close()
    return _TASK_SPACES[env_id]


def register_builtin_envs() -> None:
    from agentgym.builtin_envs import BUILTIN_ENVS

    for entry in BUILTIN_ENVS:
        register_env(**entry)


class PluginWarning(UserWarning):
    """A package's `agentgym.envs` entry point could not be loaded."""


def load_env_plugins(group: str = ENTRY_POINT_GROUP) -> list[str]:
    """Register the environments that installed packages declare under the entry-point group;
    returns the names of the entry points loaded."""
    loaded = []
    for ep in entry_points(group=group):
        try:
            target = ep.load()
            if callable(target):
                target = target()
            if target is not None:
                for entry in target:
                    register_env(**entry)
        except Exception as exc:  # a third-party bug must not break `import agentgym`
            dist = getattr(ep.dist, "name", "?")
            warnings.warn(f"agentgym: skipped env plugin {ep.name!r} of package {dist!r} ({ep.value}): "
                          f"{type(exc).__name__}: {exc}", PluginWarning, stacklevel=2)
            continue
        loaded.append(ep.name)
    return loaded
