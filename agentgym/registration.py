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

An env's task space is declared where the env is registered (`register_env(..., task_space=...)`),
so `get_task_space(id)` reads it without building an environment (an SWE sandbox, a browser, a
server connection); an env registered without one is built once and asked for its `task_space`.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import sys
import warnings
from importlib.metadata import entry_points
from typing import Any, Callable

import gymnasium as gym

from agentgym.errors import ConfigError, MissingExtraError, UnknownEnvError
from agentgym.builtin_envs import BUILTIN_ENVS

NAMESPACE = "agentgym"
ENTRY_POINT_GROUP = "agentgym.envs"
_OURS: dict[str, dict[str, Any]] = {}  # id -> registration kwargs, for `agentgym envs`
_TASK_SPACES: dict[str, Any] = {}  # id -> its task space, once asked for
_DECLARED_SPACES: dict[str, Any] = {}  # id -> register_env's task_space, not loaded yet


def register_env(
    id: str,
    entry_point: str | Callable[..., gym.Env],
    *,
    max_episode_steps: int | None = None,
    description: str = "",
    task_space: Any = None,
    **kwargs: Any,
) -> str:
    """Register a TextEnv with Gymnasium in one call; returns the full id.

    A bare name ("MyEnv-v0") goes into the agentgym namespace. Registering the same id again
    replaces the old entry (useful in notebooks); Gymnasium only warns.

    task_space: the env's task space, so that `get_task_space(id)` does not build the env: a task
    space, or a class or function that makes one, called with this registration's `kwargs` as
    the env's constructor is; either may be an import string "module:name" ("name" may be dotted,
    e.g. "mypkg.env:MyEnv.task_space"), loaded on first use so registering imports nothing.
    None: get_task_space builds the env once and reads its `task_space` attribute."""
    if not (isinstance(entry_point, str) and ":" in entry_point) and not callable(entry_point):
        raise ConfigError(f"register_env({id!r}, ...): entry_point must be the env class, a function making the env, "
                          f"or an import string 'module:Class', got {entry_point!r}")
    full_id = id if "/" in id else f"{NAMESPACE}/{id}"
    if full_id in gym.registry:
        del gym.registry[full_id]
    # No PassiveEnvChecker: TextEnv checks its outputs on every call (a str observation, which its
    # AnyText space holds; reward and flags made float and bool; every info key), and gymnasium
    # 1.4's checker marks the first reset checked before running it, so after a first reset that
    # raised (a mistyped task id) every later step failed with "cannot unpack non-iterable NoneType
    # object". `gym.make(id, disable_env_checker=False)` still adds it.
    gym.register(id=full_id, entry_point=entry_point, max_episode_steps=max_episode_steps, kwargs=kwargs,
                 disable_env_checker=True)
    _OURS[full_id] = {"max_episode_steps": max_episode_steps, "description": description, "kwargs": kwargs}
    _TASK_SPACES.pop(full_id, None)
    _DECLARED_SPACES.pop(full_id, None)
    if task_space is not None:
        _DECLARED_SPACES[full_id] = task_space
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
    """The task space of a registered environment (made once per id): the one declared with
    register_env(task_space=...), else the `task_space` of an env built for the purpose."""
    env_id = check_env_id(env_id)
    if env_id not in _TASK_SPACES:
        if env_id in _DECLARED_SPACES:
            _TASK_SPACES[env_id] = _declared_space(env_id, _DECLARED_SPACES[env_id])
        else:
            env = gym.make(env_id)
            try:
                _TASK_SPACES[env_id] = env.unwrapped.task_space
            finally:
                env.close()
    return _TASK_SPACES[env_id]


def _declared_space(env_id: str, declared: Any):
    if isinstance(declared, str):
        declared = _load(env_id, declared)
    # a class or function makes the space; anything else (an instance) is the space itself
    if isinstance(declared, (type, functools.partial)) or inspect.isroutine(declared):
        declared = declared(**gym.spec(env_id).kwargs)
    return declared


def _load(env_id: str, target: str):
    module, _, name = target.partition(":")
    if not name:
        raise ConfigError(f"the task space of {env_id}, {target!r}, names no object: "
                          "register_env(task_space=...) takes 'module:name'")
    try:
        obj = importlib.import_module(module)
        for part in name.split("."):
            obj = getattr(obj, part)
    except MissingExtraError:
        raise  # already says which extra to install
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"the task space of {env_id}, {target!r}, cannot be loaded ({type(exc).__name__}: {exc}); "
                          "check the module and name given to register_env(task_space='module:name')") from None
    return obj


def import_modules(names, flag: str = "--import / imports") -> None:
    """Import each user module (importing it registers its envs), found as `python -m` finds one:
    in the working directory first, then on sys.path. The module's own prints go wherever the
    command's output goes (for `agentgym train`, the training log). One line if one is missing."""
    names = [str(name) for name in names or []]
    if names and os.getcwd() not in sys.path and "" not in sys.path:
        # a console script's sys.path starts at its bin folder, not the user's folder as `python -m` does
        sys.path.insert(0, os.getcwd())
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise ConfigError(f"cannot import {name!r} ({flag}): {exc}; run from the folder that holds it, "
                              "or put that folder on PYTHONPATH") from None


def register_builtin_envs() -> None:

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
