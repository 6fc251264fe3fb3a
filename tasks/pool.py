"""TaskPool: the training tasks the generator keeps, each with a Beta posterior of its success rate.

Every rollout of a task updates its posterior Beta(a0 + successes, b0 + failures) (prior
Beta(1, 1) unless configured). Tasks retire when they stop teaching anything:

- mastered:   posterior mean > `mastered_above` after at least `mastered_min_trials` rollouts;
- impossible: not one success in `impossible_after` rollouts. Every pool task is oracle-valid
              (the generator admits nothing else), so "impossible" means out of the agent's reach
              now, not unsolvable; such tasks retire instead of wasting rollouts on zero-variance
              groups, and their easier variants take their place.

Retired tasks stay in the pool's records (status != "active") so that the generator never
proposes them again and reports can count them. Everything is JSON-serializable.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Sequence

from agentgym.errors import ConfigError, SplitFileError
from agentgym.safe_files import UnsafeFileError, read_json
from agentgym.tasks.spec import TaskSpec

ACTIVE, MASTERED, IMPOSSIBLE = "active", "mastered", "impossible"
STATUSES = (ACTIVE, MASTERED, IMPOSSIBLE)


@dataclass
class PoolEntry:
    spec: TaskSpec
    category: str
    origin: str = "split"  # split | sample | mutate | easier | harder | llm
    parent: str | None = None  # task_id this task was derived from
    successes: float = 0.0
    trials: float = 0.0
    status: str = ACTIVE
    added_round: int = 0

    @property
    def task_id(self) -> str:
        return self.spec.task_id

    @property
    def failures(self) -> float:
        return self.trials - self.successes

    def to_dict(self) -> dict:
        d = asdict(self)
        d["spec"] = self.spec.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "PoolEntry":
        d = dict(d)
        d["spec"] = TaskSpec.from_dict(d["spec"])
        return cls(**d)


@dataclass
class PoolConfig:
    prior: tuple[float, float] = (1.0, 1.0)  # Beta(a0, b0)
    outcome: str = "success"  # "success" (0/1) or "score" (fractional successes in [0, 1])
    mastered_above: float = 0.9
    mastered_min_trials: int = 16
    impossible_after: int = 32  # rollouts without a single success

    def __post_init__(self):
        self.prior = tuple(float(x) for x in self.prior)  # type: ignore[assignment]
        if len(self.prior) != 2 or min(self.prior) <= 0:
            raise ConfigError(f"pool prior must be two positive numbers (a0, b0), got {self.prior}")
        if self.outcome not in ("success", "score"):
            raise ConfigError(f"pool outcome must be 'success' or 'score', got {self.outcome!r}")
        if not 0.0 < self.mastered_above < 1.0:
            raise ConfigError(f"pool mastered_above must be in (0, 1), got {self.mastered_above}")
        if self.mastered_min_trials < 1 or self.impossible_after < 1:
            raise ConfigError("pool mastered_min_trials and impossible_after must be >= 1")


class TaskPool:
    """Tasks by id with success posteriors, categories and retirement."""

    def __init__(self, config: PoolConfig | None = None, **kwargs):
        if config is not None and kwargs:
            raise ConfigError("pass either a PoolConfig or keyword options to TaskPool, not both")
        try:
            self.config = config or PoolConfig(**kwargs)
        except TypeError as exc:
            raise ConfigError(f"unknown task pool option: {exc}") from None
        self.entries: dict[str, PoolEntry] = {}

    # --- membership -----------------------------------------------------------------------
    def __contains__(self, task_id: str) -> bool:
        return task_id in self.entries

    def __len__(self) -> int:
        return len(self.entries)

    def add(self, spec: TaskSpec, category: str, origin: str = "split", parent: str | None = None,
            added_round: int = 0) -> bool:
        """Add a task (the caller has validated it); False when its id is already known."""
        if spec.task_id in self.entries:
            return False
        self.entries[spec.task_id] = PoolEntry(spec, category, origin, parent, added_round=added_round)
        return True

    def active(self) -> list[PoolEntry]:
        return [e for e in self.entries.values() if e.status == ACTIVE]

    def active_specs(self) -> list[TaskSpec]:
        return [e.spec for e in self.active()]

    # --- posteriors -----------------------------------------------------------------------
    def posterior(self, task_id: str) -> tuple[float, float]:
        """(alpha, beta) of the task's Beta posterior; the prior for an unknown task."""
        a0, b0 = self.config.prior
        e = self.entries.get(task_id)
        if e is None:
            return a0, b0
        return a0 + e.successes, b0 + e.failures

    def mean(self, task_id: str) -> float:
        a, b = self.posterior(task_id)
        return a / (a + b)

    def record(self, task_id: str, successes: float, trials: float) -> None:
        e = self.entries.get(task_id)
        if e is None:
            return  # a task played outside the pool (e.g. an eval task): nothing to estimate
        if trials < 0 or not 0 <= successes <= trials:
            raise ValueError(f"bad counts for {task_id}: {successes} successes in {trials} trials")
        e.successes += successes
        e.trials += trials

    def update(self, trajectories: Iterable) -> int:
        """Count every finished rollout (infra errors excluded: not the agent's doing);
        returns how many were counted."""
        counted = 0
        for t in trajectories:
            if t.infra_error or t.task_id not in self.entries:
                continue
            outcome = float(t.success) if self.config.outcome == "success" else min(1.0, max(0.0, float(t.score)))
            self.record(t.task_id, outcome, 1.0)
            counted += 1
        return counted

    # --- what the generator builds from -------------------------------------------------
    def frontier(self, lo: float = 0.2, hi: float = 0.8, min_trials: int = 1) -> list[PoolEntry]:
        """Active tasks tried at least `min_trials` times whose success estimate is in [lo, hi]."""
        return [e for e in self.active() if e.trials >= min_trials and lo <= self.mean(e.task_id) <= hi]

    def always_failed(self, min_trials: int = 4) -> list[PoolEntry]:
        """Tasks (active or retired as impossible) tried often and never solved: seeds for easier variants."""
        return [e for e in self.entries.values() if e.trials >= min_trials and e.successes == 0]

    def always_solved(self, min_trials: int = 4) -> list[PoolEntry]:
        """Tasks tried often and solved every time: seeds for harder variants."""
        return [e for e in self.entries.values() if e.trials >= min_trials and e.successes == e.trials]

    # --- retirement -----------------------------------------------------------------------
    def retire(self) -> dict[str, list[str]]:
        """Retire mastered and impossible active tasks; returns the retired ids by reason."""
        cfg = self.config
        out: dict[str, list[str]] = {MASTERED: [], IMPOSSIBLE: []}
        for e in self.active():
            if e.trials >= cfg.mastered_min_trials and self.mean(e.task_id) > cfg.mastered_above:
                e.status = MASTERED
                out[MASTERED].append(e.task_id)
            elif e.trials >= cfg.impossible_after and e.successes == 0:
                e.status = IMPOSSIBLE
                out[IMPOSSIBLE].append(e.task_id)
        return out

    # --- aggregates -----------------------------------------------------------------------
    def category_stats(self) -> dict[str, dict]:
        """Per category: task counts by status, rollouts, and two success estimates: the pooled
        posterior mean (a0 + sum successes) / (a0 + b0 + sum trials) and the mean of the active
        tasks' posterior means."""
        a0, b0 = self.config.prior
        out: dict[str, dict] = {}
        for e in self.entries.values():
            c = out.setdefault(e.category, {"tasks": 0, ACTIVE: 0, MASTERED: 0, IMPOSSIBLE: 0, "trials": 0.0,
                                            "successes": 0.0, "_means": []})
            c["tasks"] += 1
            c[e.status] += 1
            c["trials"] += e.trials
            c["successes"] += e.successes
            if e.status == ACTIVE:
                c["_means"].append(self.mean(e.task_id))
        for c in out.values():
            means = c.pop("_means")
            c["pooled_mean"] = (a0 + c["successes"]) / (a0 + b0 + c["trials"])
            c["active_mean"] = sum(means) / len(means) if means else None
        return dict(sorted(out.items()))

    def summary(self) -> dict:
        counts = {s: 0 for s in STATUSES}
        for e in self.entries.values():
            counts[e.status] += 1
        return {"tasks": len(self.entries), **counts,
                "trials": sum(e.trials for e in self.entries.values())}

    # --- persistence ----------------------------------------------------------------------
    def state_dict(self) -> dict:
        cfg = asdict(self.config)
        cfg["prior"] = list(cfg["prior"])
        return {"config": cfg, "entries": [e.to_dict() for e in self.entries.values()]}

    def load_state_dict(self, state: dict) -> None:
        self.config = PoolConfig(**state["config"])
        self.entries = {}
        for d in state["entries"]:
            e = PoolEntry.from_dict(d)
            if e.status not in STATUSES:
                raise ValueError(f"pool entry {e.task_id} has unknown status {e.status!r}")
            self.entries[e.task_id] = e

    def save(self, path: str | Path, extra: dict | None = None) -> None:
        Path(path).write_text(json.dumps({**self.state_dict(), **(extra or {})}, indent=1))

    @classmethod
    def load(cls, path: str | Path) -> "TaskPool":
        """The pool a file written by `save` holds (read_pool_file's errors)."""
        return cls.from_file_state(read_pool_file(path), path)

    @classmethod
    def from_file_state(cls, state: dict, path: str | Path) -> "TaskPool":
        """The pool of a pool file's JSON (read_pool_file), read once by a caller that also wants the
        file's other keys; a state that is not a pool's is one SplitFileError naming `path`."""
        try:
            pool = cls()
            pool.load_state_dict(state)
        except (ValueError, KeyError, TypeError) as exc:
            raise SplitFileError(f"{path} is not a task pool file ({type(exc).__name__}: {exc}); "
                                 "write one with `agentgym tasks evolve --out`") from None
        return pool


# A pool of a long evolution is a few MB; a larger file is not one.
MAX_POOL_BYTES = 256 << 20


def read_pool_file(path: str | Path) -> dict:
    """The JSON of a pool file (`TaskPool.save`'s, with its extra keys such as env_id); a missing
    file, one that is not a regular file, too large, not JSON or not an object is one SplitFileError."""
    path = Path(path)
    if not path.exists():
        raise SplitFileError(f"pool file {path} does not exist: write one with `agentgym tasks evolve --out`")
    try:
        state = read_json(path, MAX_POOL_BYTES, "pool file")
    except UnsafeFileError as exc:
        raise SplitFileError(f"{path} is not a task pool file ({exc}); write one with `agentgym tasks evolve --out`") \
            from None
    if not isinstance(state, dict):
        raise SplitFileError(f"{path} is not a task pool file (a JSON {type(state).__name__}, not an object); "
                             "write one with `agentgym tasks evolve --out`")
    return state


def pool_from_tasks(tasks: Sequence[TaskSpec], category_of, **config) -> TaskPool:
    """A pool of trusted tasks (e.g. a shipped train split), without oracle validation."""
    pool = TaskPool(**config)
    for t in tasks:
        pool.add(t, category_of(t), origin="split")
    return pool
