"""Errors a user can cause. The CLI prints their message as one line, without a traceback,
so every message must say what went wrong and what to do about it."""

from __future__ import annotations

# The name to `pip install` (the registry's `agentgym` is an unrelated project); the import name
# stays `agentgym`. pyproject.toml's [project] name, checked by tests/core/test_packaging.py.
DISTRIBUTION = "agentgym-credit"


def install_hint(extra: str) -> str:
    """The command that installs an extra, as error messages and docs give it."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"


class AgentGymError(Exception):
    """Base class: a problem in the user's input (config, ids, files, missing extras)."""


class UnknownEnvError(AgentGymError):
    pass


class UnknownTaskError(AgentGymError):
    pass


class TaskParamError(AgentGymError, ValueError, TypeError):
    """A task (TaskSpec, dict or params) the environment cannot play: wrong env, unknown keys,
    wrong types, paths."""


class HeldoutTaskError(AgentGymError):
    """A held-out task was offered where training tasks are expected."""


class SplitFileError(AgentGymError):
    """A split manifest (JSONL of TaskSpecs) is missing or malformed."""


class ConfigError(AgentGymError):
    pass


class MissingExtraError(AgentGymError, ImportError):
    pass


def require(module: str, extra: str):
    """Import an optional dependency, or fail with the pip command that installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(
            f"{module} is not installed: run `{install_hint(extra)}` ({exc})"
        ) from exc
