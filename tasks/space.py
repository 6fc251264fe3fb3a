"""The task-space interface every environment family implements.

The generator, curricula, splits and the oracle policy speak only this interface, so they
work for any environment. Environments are deterministic given their TaskSpec, which is why
the oracle is a plan (a list of actions) rather than a closed-loop controller.
"""

from __future__ import annotations

import json
import re
import warnings
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from agentgym.errors import ConfigError, SplitFileError, TaskParamError, UnknownTaskError
from agentgym.tasks.spec import TaskSpec
from agentgym.tasks.splits import HELDOUT_SPLITS, is_heldout, load_split


class TaskSpace:
    """Base class. Subclasses set `env_id` and `split_dir` and implement the abstract methods."""

    env_id: str = ""
    split_dir: Path | None = None  # folder with <split>.jsonl manifests shipped with the package
    split_names: tuple[str, ...] = ("train", "heldout", "heldout_unseen")

    # --- implemented by each environment family -------------------------------------------
    def sample(self, rng: np.random.Generator, **difficulty: Any) -> TaskSpec:
        raise NotImplementedError

    def mutate(self, spec: TaskSpec, rng: np.random.Generator) -> TaskSpec:
        """A nearby variant of `spec` (ACCEL-style level editing)."""
        raise NotImplementedError

    def solve(self, spec: TaskSpec) -> list[str] | None:
        """The oracle: actions that solve `spec` from its initial state, or None if unsolvable."""
        raise NotImplementedError

    def category(self, spec: TaskSpec) -> str:
        """A coarse bucket, e.g. task type x difficulty, used by curricula and reports."""
        raise NotImplementedError

    def build_splits(self) -> dict[str, list[TaskSpec]]:
        """Generate the shipped split manifests deterministically (used by scripts and tests)."""
        raise NotImplementedError

    def check_params(self, params: dict) -> dict:
        """The family's task-parameter validator: the canonical params (types fixed, e.g. a
        float knob given as an int becomes a float) or a ValueError/TypeError naming the
        problem (unknown keys, wrong types, paths). Runs before anything is built or any file
        is touched. The default accepts any JSON params; families override it."""
        return dict(params)

    def reserved(self, spec: TaskSpec) -> bool:
        """Whether the task lies in a region kept for held-out evaluation (products, goal
        pairs, projects): refused for training whatever its id. Default: no region."""
        return False

    #: Optional `difficulty(spec) -> float`, higher is harder: the task generator makes easier or
    #: harder variants with it and curricula can order by it. None: the family has no such scale
    #: (the generator then works from success rates alone).
    difficulty: Callable[[TaskSpec], float] | None = None

    # --- shared behaviour -------------------------------------------------------------------
    def canonical(self, spec: TaskSpec) -> TaskSpec:
        """`spec` checked and in canonical form (this family's env id, validated params), so
        equal games have equal task ids; TaskParamError (one line: what is wrong and what to
        do) otherwise."""
        if not isinstance(spec, TaskSpec):
            raise TaskParamError(f"expected a TaskSpec for {self.env_id}, got {type(spec).__name__}")
        if _bare(spec.env_id) != _bare(self.env_id):
            raise TaskParamError(
                f"this task is for {spec.env_id}, not {self.env_id}: make that environment, or pick a task from "
                f"`agentgym tasks list {self.env_id}`")
        try:
            params = self.check_params(dict(spec.params))
        except (ValueError, TypeError, KeyError) as exc:
            msg = str(exc).strip("'\"") if isinstance(exc, KeyError) else str(exc)
            raise TaskParamError(
                f"invalid {self.env_id} task params: {msg.splitlines()[0] if msg else type(exc).__name__}; "
                f"see `agentgym tasks list {self.env_id}` for valid tasks") from None
        return TaskSpec(self.env_id, params=params, seed=spec.seed)

    def is_heldout(self, spec: TaskSpec) -> bool:
        """Held out by id, by canonical content, by content with another env id, or by region."""
        ids = self.heldout_keys()
        if is_heldout(spec, ids, self.reserved):
            return True
        try:
            return is_heldout(self.canonical(TaskSpec(self.env_id, spec.params, spec.seed)), ids, self.reserved)
        except TaskParamError:
            return False

    def make_env(self, **kwargs):
        """A bare env of this space's registered id: its class built from the registered entry point
        with the registered kwargs, no Gymnasium wrappers (cheap enough to validate thousands of
        proposals). Looked up by id, so task spaces never import their env's module."""
        import gymnasium as gym
        from gymnasium.envs.registration import load_env_creator

        spec = gym.spec(self.env_id)
        creator = load_env_creator(spec.entry_point) if isinstance(spec.entry_point, str) else spec.entry_point
        return creator(**{**spec.kwargs, **kwargs})

    def validate(self, spec: TaskSpec) -> bool:
        """A task is valid when the oracle's plan solves it in a fresh environment."""
        try:
            plan = self.solve(spec)
        except (ValueError, KeyError, TypeError):
            return False
        if plan is None:
            return False
        env = self.make_env().unwrapped
        try:
            _, info = env.reset(options={"task": spec})
            for action in plan:
                _, _, terminated, truncated, info = env.step(action)
                if terminated or truncated:
                    break
            return bool(info["success"])
        except (ValueError, KeyError, TypeError):
            return False
        finally:
            env.close()

    def describe(self) -> str:
        """What the environment's tasks look like, in words, for LLM task proposers."""
        return (type(self).__doc__ or self.env_id).strip()

    def parse(self, text: str) -> TaskSpec | None:
        """Turn an LLM's proposal into a TaskSpec; None when it does not parse.

        The default reads the first JSON object in the text as {"params": {...}, "seed": N}.
        Families with a natural-language task grammar override this."""
        match = re.search(r"\{.*\}", text, flags=re.S)
        if not match:
            return None
        try:
            obj = json.loads(match.group(0))
            params = obj.get("params", obj)
            return TaskSpec(self.env_id, params=params, seed=int(obj.get("seed", 0)))
        except (ValueError, TypeError, AttributeError):
            return None

    def fresh_tasks(self, n: int, seed: int, keep=None, max_draws_per_task: int = 500) -> list[TaskSpec]:
        """`n` new training tasks drawn from `sample` (deterministic in `seed`): never a held-out
        id, never a combination reserved for `heldout_unseen`, no duplicates, each solved by the
        oracle; `keep(spec)` narrows them (e.g. to some categories). A training stream far wider
        than the shipped train split, for agents that would otherwise memorize its layouts."""
        rng = np.random.default_rng([seed, 11])
        heldout = _heldout_keys(self)
        reserved = self.reserved
        out: dict[str, TaskSpec] = {}
        for _ in range(max(1, n) * max_draws_per_task):
            if len(out) >= n:
                break
            spec = self.sample(rng)
            if spec.task_id in heldout or spec.content_key in heldout or spec.task_id in out or (
                    keep is not None and not keep(spec)):
                continue
            if (callable(reserved) and reserved(spec)) or not self.validate(spec):
                continue
            out[spec.task_id] = spec
        if len(out) < n:
            raise ConfigError(f"drew only {len(out)} of {n} fresh {self.env_id} tasks that pass the filter: "
                              "loosen the categories / task filter or ask for fewer")
        return list(out.values())

    def split(self, name: str) -> list[TaskSpec]:
        return list(self._splits(name))

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

    def heldout_ids(self) -> set[str]:
        """The held-out tasks' ids."""
        ids: set[str] = set()
        for name in self.split_names:
            if name in HELDOUT_SPLITS:
                ids.update(t.task_id for t in self._splits(name))
        return ids

    def heldout_keys(self) -> set[str]:
        """The held-out tasks' ids and their `content_key`s (which ignore the env id and
        number types), so relabelled or re-typed copies are caught too: what the generator,
        the task sources and the trainer refuse."""
        cached = self.__dict__.get("_heldout_keys")
        if cached is None:
            cached = set()
            for name in self.split_names:
                if name in HELDOUT_SPLITS:
                    for t in self._splits(name):
                        cached.update((t.task_id, t.content_key))
            self.__dict__["_heldout_keys"] = frozenset(cached)
        return set(cached)

    @cached_property
    def _index(self) -> dict[str, TaskSpec]:
        return {t.task_id: t for name in self.split_names for t in self._splits(name)}

    def find(self, task_id: str) -> TaskSpec:
        try:
            return self._index[task_id]
        except KeyError:
            raise UnknownTaskError(
                f"unknown task id {task_id!r} for {self.env_id}: pass a TaskSpec or an id from one of "
                f"its splits ({', '.join(self.split_names)}); `agentgym tasks list {self.env_id}` shows them"
            ) from None


def check_schema(params: dict, required: dict, optional: dict | None = None, what: str = "task") -> dict:
    """Check `params` against {key: type or (types)}: unknown or missing keys and wrong types
    raise ValueError/TypeError naming them; a `float` key given an int becomes a float (so the
    same game has the same id); `bool` is never accepted as a number. Strings must not hold NUL
    bytes. The helper behind each family's `check_params`."""
    if not isinstance(params, dict):
        raise TypeError(f"{what} params must be an object, got {type(params).__name__}")
    optional = optional or {}
    unknown = sorted(set(params) - set(required) - set(optional))
    if unknown:
        raise ValueError(f"unknown keys {unknown}; {what} params take {sorted(set(required) | set(optional))}")
    missing = sorted(set(required) - set(params))
    if missing:
        raise ValueError(f"missing keys {missing}")
    out = {}
    for key, value in params.items():
        want = required.get(key, optional.get(key))
        types = want if isinstance(want, tuple) else (want,)
        if float in types and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if isinstance(value, bool) and bool not in types:
            raise TypeError(f"{key} must be {' or '.join(t.__name__ for t in types)}, got {value!r}")
        if not isinstance(value, types):
            raise TypeError(f"{key} must be {' or '.join(t.__name__ for t in types)}, got {type(value).__name__}")
        if isinstance(value, str) and "\x00" in value:
            raise ValueError(f"{key} contains a NUL byte")
        out[key] = value
    return out


def _heldout_keys(space) -> set[str]:
    """`heldout_keys()` for task spaces that are not TaskSpace subclasses (duck-typed ones)."""
    keys = getattr(space, "heldout_keys", None)
    return set(keys()) if callable(keys) else set(space.heldout_ids())


def _bare(env_id: str) -> str:
    """The id without the default namespace: `Household-v0` and `agentgym/Household-v0` agree."""
    return env_id[len("agentgym/"):] if isinstance(env_id, str) and env_id.startswith("agentgym/") else env_id
