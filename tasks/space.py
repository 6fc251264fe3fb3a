"""The task-space interface every environment family implements.

The generator, curricula, splits and the oracle policy speak only this interface, so they
work for any environment. Environments are deterministic given their TaskSpec, which is why
the oracle is a plan (a list of actions) rather than a closed-loop controller.
"""

from __future__ import annotations

import json
import re
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from agentgym.errors import ConfigError, SplitFileError, UnknownTaskError
from agentgym.tasks.spec import TaskSpec
from agentgym.tasks.splits import HELDOUT_SPLITS, load_split


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

    # --- shared behaviour -------------------------------------------------------------------
    def make_env(self, **kwargs):
        import gymnasium as gym

        return gym.make(self.env_id, **kwargs)

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
        heldout = self.heldout_ids()
        reserved = getattr(self, "reserved", None)
        out: dict[str, TaskSpec] = {}
        for _ in range(max(1, n) * max_draws_per_task):
            if len(out) >= n:
                break
            spec = self.sample(rng)
            if spec.task_id in heldout or spec.task_id in out or (keep is not None and not keep(spec)):
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

    def _splits(self, name: str) -> tuple[TaskSpec, ...]:
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

    def heldout_ids(self) -> set[str]:
        ids: set[str] = set()
        for name in self.split_names:
            if name in HELDOUT_SPLITS:
                ids.update(t.task_id for t in self._splits(name))
        return ids

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
