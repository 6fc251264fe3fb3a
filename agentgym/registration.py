"""Registering environments under Gymnasium's registry, in the `agentgym` namespace.

Built-in environments are listed in `agentgym.envs.BUILTIN_ENVS` as import strings, so that
`import agentgym` registers every id without importing any environment's code (nor torch).
"""

from __future__ import annotations

from typing import Any, Callable

import gymnasium as gym

from agentgym.errors import UnknownEnvError

NAMESPACE = "agentgym"
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
    from agentgym.envs import BUILTIN_ENVS

    for entry in BUILTIN_ENVS:
        register_env(**entry)
