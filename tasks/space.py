"""`TaskSpace`: the convenient base class for a family's task space.

It implements the protocol in `agentgym.tasks.protocol` (`sample`, `solve`, `category` are the
family's; `read_split` reads shipped manifests by default) plus `split` and `find`. Validation and
the generator's hooks are functions taking the space, in `agentgym.tasks.validation` and
`agentgym.tasks.generation`; the methods of the same names below are kept for one release and warn.
"""

from __future__ import annotations

import warnings
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from agentgym.errors import SplitFileError, UnknownTaskError
from agentgym.tasks import generation, validation
from agentgym.tasks.protocol import REQUIRED_METHODS, TaskSpaceProtocol, default_hook, split_tasks
from agentgym.tasks.spec import TaskSpec
from agentgym.tasks.splits import load_split
from agentgym.tasks.validation import _bare, check_schema  # noqa: F401  (old import path, kept)

__all__ = ["TaskSpace", "TaskSpaceProtocol", "REQUIRED_METHODS", "check_schema"]


def _moved(name: str, module: str, func: str | None = None, default: str | None = None) -> None:
    also = f" (from an override, its default is agentgym.tasks.{default})" if default else ""
    warnings.warn(f"TaskSpace.{name}() is deprecated and kept for one release: call "
                  f"agentgym.tasks.{module}.{func or name}(space, ...) instead{also}", DeprecationWarning, stacklevel=3)


class TaskSpace:
    """Base class implementing `TaskSpaceProtocol`. Subclasses set `env_id` (and `split_dir` when
    they ship manifests) and implement `sample`, `solve` and `category`; optional hooks
    (`mutate`, `check_params`, `reserved`, `parse`, ...) are listed in `TaskSpaceProtocol`."""

    env_id: str = ""
    split_dir: Path | None = None  # folder with <split>.jsonl manifests shipped with the package
    split_names: tuple[str, ...] = ("train", "heldout", "heldout_unseen")

    # --- the protocol: implemented by each environment family ------------------------------
    def sample(self, rng: np.random.Generator, **difficulty: Any) -> TaskSpec:
        raise NotImplementedError

    def solve(self, spec: TaskSpec) -> list[str] | None:
        """The oracle: actions that solve `spec` from its initial state, or None if unsolvable."""
        raise NotImplementedError

    def category(self, spec: TaskSpec) -> str:
        """A coarse bucket, e.g. task type x difficulty, used by curricula and reports."""
        raise NotImplementedError

    #: Optional hook `difficulty(spec) -> float`, higher is harder (see `generation.difficulty_fn`).
    difficulty: Callable[[TaskSpec], float] | None = None
    #: Optional: prefixes of valid commands that change nothing in the world (`protocol.idle_commands`).
    idle_commands: tuple[str, ...] = ()

    # --- deprecated: defaults of optional hooks, and functions that moved to tasks/ ----------
    # A family still overrides a hook by defining the method; callers use the functions. These
    # base methods give the hook's default (not the dispatching function), so an override that
    # calls super() gets the default, as before, and never itself again.
    @default_hook
    def mutate(self, spec: TaskSpec, rng: np.random.Generator) -> TaskSpec:
        """Deprecated: `agentgym.tasks.generation.mutate(space, spec, rng)`."""
        _moved("mutate", "generation")
        generation.missing_hook(self, "mutate(spec, rng)", "the task generator cannot make variants of its tasks")

    @default_hook
    def build_splits(self, **options) -> dict[str, list[TaskSpec]]:
        """Deprecated: `agentgym.tasks.generation.build_splits(space)`."""
        _moved("build_splits", "generation")
        generation.missing_hook(self, "build_splits()", "its splits are not generated")

    @default_hook
    def check_params(self, params: dict) -> dict:
        """Deprecated: `agentgym.tasks.validation.check_params(space, params)`."""
        _moved("check_params", "validation")
        return dict(params)  # the default: any JSON params

    @default_hook
    def reserved(self, spec: TaskSpec) -> bool:
        """Deprecated: `agentgym.tasks.validation.is_reserved(space, spec)`."""
        _moved("reserved", "validation", "is_reserved")
        return False  # the default: no region

    @default_hook
    def canonical(self, spec: TaskSpec) -> TaskSpec:
        """Deprecated: `agentgym.tasks.validation.canonical(space, spec)`."""
        _moved("canonical", "validation")
        return validation.canonical(self, spec)

    @default_hook
    def is_heldout(self, spec: TaskSpec) -> bool:
        """Deprecated: `agentgym.tasks.validation.is_heldout(space, spec)`."""
        _moved("is_heldout", "validation")
        return validation.is_heldout(self, spec)

    @default_hook
    def make_env(self, **kwargs):
        """Deprecated: `agentgym.tasks.validation.make_env(space, **kwargs)`."""
        _moved("make_env", "validation", default="validation.registered_env(self.env_id, ...)")
        return validation.registered_env(self.env_id, **kwargs)

    @default_hook
    def validate(self, spec: TaskSpec) -> bool:
        """Deprecated: `agentgym.tasks.validation.validate(space, spec)`."""
        _moved("validate", "validation", default="validation.oracle_solves(self, ...)")
        return validation.oracle_solves(self, spec)

    @default_hook
    def describe(self) -> str:
        """Deprecated: `agentgym.tasks.generation.describe(space)`."""
        _moved("describe", "generation", default="generation.docstring(self, ...)")
        return generation.docstring(self)

    @default_hook
    def parse(self, text: str) -> TaskSpec | None:
        """Deprecated: `agentgym.tasks.generation.parse(space, text)` (a family's override that
        wants the JSON default calls `generation.parse_json(self, text)`)."""
        _moved("parse", "generation", default="generation.parse_json(self, ...)")
        return generation.parse_json(self, text)

    @default_hook
    def fresh_tasks(self, n: int, seed: int, keep=None, max_draws_per_task: int = 500) -> list[TaskSpec]:
        """Deprecated: `agentgym.tasks.generation.fresh_tasks(space, n, seed, ...)`."""
        _moved("fresh_tasks", "generation")
        return generation.fresh_tasks(self, n, seed, keep=keep, max_draws_per_task=max_draws_per_task)

    @default_hook
    def heldout_ids(self) -> set[str]:
        """Deprecated: `agentgym.tasks.validation.heldout_ids(space)`."""
        _moved("heldout_ids", "validation", default="validation.split_heldout_ids(self, ...)")
        return validation.split_heldout_ids(self)

    @default_hook
    def heldout_keys(self) -> set[str]:
        """Deprecated: `agentgym.tasks.validation.heldout_keys(space)`."""
        _moved("heldout_keys", "validation", default="validation.split_heldout_keys(self, ...)")
        return validation.split_heldout_keys(self)

    # --- splits -----------------------------------------------------------------------------
    def split(self, name: str) -> list[TaskSpec]:
        """The tasks of split `name` as a list."""
        return list(split_tasks(self, name))

    def read_split(self, name: str) -> Sequence[TaskSpec]:
        """The tasks of split `name`: the hook a family overrides when its splits are not JSONL
        manifests in `split_dir` (generated, read from a dataset, asked of a server). The default
        reads `split_dir/<name>.jsonl` once per space; an override is asked every time (cache in it
        if reading is slow). An unknown name raises SplitFileError: `super().read_split(name)`."""
        cache = self.__dict__.setdefault("_split_cache", {})
        if name not in cache:
            if name not in self.split_names:
                raise SplitFileError(
                    f"{self.env_id} has no split {name!r}; choose one of {', '.join(self.split_names)}"
                )
            if self.split_dir is None:
                raise SplitFileError(f"{self.env_id} ships no split manifests")
            cache[name] = tuple(load_split(Path(self.split_dir) / f"{name}.jsonl"))
        return cache[name]

    def _splits(self, name: str) -> tuple[TaskSpec, ...]:
        """Deprecated extension point (override `read_split`); kept working for one release."""
        return tuple(self.read_split(name))

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "_splits" in cls.__dict__:
            warnings.warn(f"{cls.__qualname__} overrides TaskSpace._splits, which is deprecated and kept for one "
                          "release: override the public hook read_split(name) instead (same arguments, "
                          "returns the split's TaskSpecs)", DeprecationWarning, stacklevel=2)

    @cached_property
    def _index(self) -> dict[str, TaskSpec]:
        return {t.task_id: t for name in self.split_names for t in split_tasks(self, name)}

    def find(self, task_id: str) -> TaskSpec:
        try:
            return self._index[task_id]
        except KeyError:
            raise UnknownTaskError(
                f"unknown task id {task_id!r} for {self.env_id}: pass a TaskSpec or an id from one of "
                f"its splits ({', '.join(self.split_names)}); `agentgym tasks list {self.env_id}` shows them"
            ) from None


def _heldout_keys(space) -> set[str]:
    """Old private name of `agentgym.tasks.validation.heldout_keys` (kept for one release)."""
    return validation.heldout_keys(space)
