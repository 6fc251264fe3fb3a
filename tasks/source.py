"""Task sources: what the trainer asks for the next training tasks, and tells what happened.

    source = make_task_source("evolve", task_space, train_tasks, curriculum="sec", seed=cfg.seed)
    for iteration in ...:
        tasks = source.next_tasks(tasks_per_iter)            # list[TaskSpec], never held out
        trajectories = collect(env_id, tasks, policy, group_size, ...)
        advantages = compute_advantages(trajectories, est_cfg)
        source.update(trajectories, advantages)                # pool posteriors, curriculum bandit
        checkpoint["task_source"] = source.state_dict()       # load_state_dict(...) on resume

kind="split":  the candidates are the given train tasks; the curriculum picks among them (their
               success posteriors live in a TaskPool, without re-validating the shipped split).
kind="evolve": a TaskGenerator grows a pool, seeded with `seed_tasks` train tasks; every call to
               next_tasks is one generator round (retire mastered / impossible tasks, propose
               `new_per_round` new ones, top the pool up to `min_active`), then the curriculum
               picks among the active pool tasks.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from agentgym.errors import ConfigError
from agentgym.tasks.curricula import CURRICULA, Curriculum, make_curriculum
from agentgym.tasks.generator import GeneratorConfig, TaskGenerator
from agentgym.tasks.pool import TaskPool, pool_from_tasks
from agentgym.tasks.spec import TaskSpec
from agentgym.tasks.splits import refuse_heldout
from agentgym.tasks.validation import heldout_keys

KINDS = ("split", "evolve")


def batch_samples(trajectories, advantages, category_of) -> dict[str, list[float]]:
    """category -> per-trajectory mean |advantage| (the curricula's sample rewards)."""
    if len(trajectories) != len(advantages):
        raise ValueError(f"{len(trajectories)} trajectories but {len(advantages)} advantage arrays")
    out: dict[str, list[float]] = defaultdict(list)
    for traj, adv in zip(trajectories, advantages):
        adv = np.asarray(adv, dtype=np.float64)
        if traj.infra_error or adv.size == 0:
            continue
        out[category_of(traj)].append(float(np.abs(adv).mean()))
    return dict(out)


def zero_variance_fraction(trajectories, outcome: str = "success") -> float:
    """Share of groups whose episodes all had the same outcome ("success" or "score"): no
    episode-level advantage, no gradient."""
    groups: dict[str, set] = defaultdict(set)
    for t in trajectories:
        if not t.infra_error:
            groups[t.group_id].add(bool(t.success) if outcome == "success" else round(float(t.score), 9))
    return float(np.mean([len(v) == 1 for v in groups.values()])) if groups else 0.0


def category_or_all(space, spec: TaskSpec) -> str:
    """The task's category, or "all" for a task space without categories (category() is optional)."""
    try:
        return str(space.category(spec))
    except NotImplementedError:
        return "all"


class TaskSource:
    def __init__(self, kind: str, task_space, curriculum: Curriculum, pool: TaskPool, seed: int,
                 heldout_ids: set[str], generator: TaskGenerator | None = None,
                 candidates: Sequence[TaskSpec] | None = None, new_per_round: int = 0, min_active: int = 0):
        self.kind = kind
        self.space = task_space
        self.curriculum = curriculum
        self.pool = pool
        self.generator = generator
        self.heldout = heldout_ids
        self.candidates = list(candidates) if candidates is not None else None
        self.new_per_round, self.min_active = new_per_round, min_active
        self.rng = np.random.default_rng([seed, 8])
        self.last: dict[str, Any] = {}

    def _category_of_traj(self, traj) -> str:
        entry = self.pool.entries.get(traj.task_id)
        if entry is not None:
            return entry.category
        if traj.task:
            return self._category(TaskSpec.from_dict(traj.task))
        return "unknown"

    def _category(self, spec: TaskSpec) -> str:
        return category_or_all(self.space, spec)

    def next_tasks(self, n: int) -> list[TaskSpec]:
        if n < 1:
            raise ConfigError(f"asked for {n} training tasks: ask for at least 1")
        if self.generator is not None:
            info = self.generator.step_round(self.new_per_round)
            short = self.min_active - len(self.pool.active())
            if short > 0:
                info["new"] += len(self.generator.propose(short))
            self.last["round"] = info
        candidates = self.pool.active_specs() if self.candidates is None else self.candidates
        if not candidates:
            raise ConfigError("the task pool has no active tasks left: lower tasks.pool.mastered_above or raise "
                              "tasks.min_active")
        chosen = self.curriculum.select(candidates, n, self.rng, self.pool, self._category)
        refuse_heldout(chosen, self.heldout, what="training")  # defense in depth: nothing held out gets out
        return chosen

    def update(self, trajectories, advantages) -> dict:
        """Record the batch: pool posteriors, curriculum rewards, generator memory; returns the
        batch's metrics (also in `self.last`)."""
        samples = batch_samples(trajectories, advantages, self._category_of_traj)
        self.pool.update(trajectories)
        self.curriculum.update(samples)
        if self.generator is not None:
            self.generator.observe(trajectories)
        all_abs = [v for vals in samples.values() for v in vals]
        self.last.update({"zero_variance_frac": zero_variance_fraction(trajectories, self.pool.config.outcome),
                          "mean_abs_adv": float(np.mean(all_abs)) if all_abs else 0.0,
                          "categories": len(samples)})
        return dict(self.last)

    def metrics(self) -> dict:
        """Scalars for the training log."""
        out = {k: v for k, v in self.last.items() if isinstance(v, (int, float))}
        summary = self.pool.summary()
        out.update({f"pool_{k}": v for k, v in summary.items() if k != "trials"})
        if self.generator is not None:  # task counts: admitted / rejected (by reason) / retired, so far
            out.update({f"gen_{k.replace('/', '_')}": int(v) for k, v in self.generator.stats.items()
                        if not k.startswith("proposed/")})
        return out

    def state_dict(self) -> dict:
        return {"kind": self.kind, "curriculum": self.curriculum.name, "curriculum_state": self.curriculum.state_dict(),
                "pool": self.pool.state_dict(), "rng": self.rng.bit_generator.state,
                "generator": self.generator.state_dict() if self.generator is not None else None}

    def load_state_dict(self, state: dict) -> None:
        if state["kind"] != self.kind or state["curriculum"] != self.curriculum.name:
            raise ConfigError(f"checkpoint task source is {state['kind']}/{state['curriculum']} but the config asks "
                              f"for {self.kind}/{self.curriculum.name}: resume with the same tasks settings")
        self.curriculum.load_state_dict(state["curriculum_state"])
        self.pool.load_state_dict(state["pool"])
        self.rng.bit_generator.state = state["rng"]
        if self.generator is not None:
            self.generator.load_state_dict(state["generator"])


def make_task_source(kind: str, task_space, train_tasks: Sequence[TaskSpec], curriculum: str = "uniform",
                     seed: int = 0, *, curriculum_opts: dict | None = None, pool: dict | None = None,
                     generator: dict | None = None, seed_tasks: int = 64, new_per_round: int = 4,
                     min_active: int = 32, llm=None, difficulty=None, heldout_ids: set[str] | None = None) -> TaskSource:
    """Build the task source the trainer draws from (see the module docstring).

    curriculum_opts: options of the curriculum (sec: alpha, tau; dump: c, tau, window; learnability: floor).
    pool: TaskPool options (prior, outcome, mastered_above, mastered_min_trials, impossible_after).
    generator: TaskGenerator options (weights, frontier, sample_kwargs, max_consecutive_rejects, ...).
    llm: a Policy that proposes tasks in words (generator weight "llm" > 0 to use it).
    """
    if kind not in KINDS:
        raise ConfigError(f"unknown task source {kind!r}: choose one of {', '.join(KINDS)}")
    if curriculum not in CURRICULA:
        raise ConfigError(f"unknown curriculum {curriculum!r}: choose one of {', '.join(CURRICULA)}")

    heldout = set(heldout_keys(task_space) if heldout_ids is None else heldout_ids)
    train_tasks = list(train_tasks)
    refuse_heldout(train_tasks, heldout, what="training")
    cur = make_curriculum(curriculum, **(curriculum_opts or {}))
    if kind == "split":
        if not train_tasks:
            raise ConfigError("the split task source needs training tasks: check env.split / env.tasks_file")
        task_pool = pool_from_tasks(train_tasks, lambda t: category_or_all(task_space, t), **(pool or {}))
        return TaskSource(kind, task_space, cur, task_pool, seed, heldout, candidates=train_tasks)
    if new_per_round < 0 or min_active < 1 or seed_tasks < 0:
        raise ConfigError("tasks.new_per_round and tasks.seed_tasks must be >= 0 and tasks.min_active >= 1")
    require_evolvable(task_space, generator or {}, difficulty)
    task_pool = TaskPool(**(pool or {}))
    gen = TaskGenerator(task_space, task_pool, seed=seed, heldout_ids=heldout, llm=llm, difficulty=difficulty,
                        **(generator or {}))
    rng = np.random.default_rng([seed, 7])
    if train_tasks and seed_tasks:
        picks = rng.choice(len(train_tasks), size=min(seed_tasks, len(train_tasks)), replace=False)
        gen.seed_from([train_tasks[int(i)] for i in picks])
    return TaskSource(kind, task_space, cur, task_pool, seed, heldout, generator=gen,
                      new_per_round=new_per_round, min_active=min_active)


def require_evolvable(task_space, generator: Mapping, difficulty=None) -> None:
    """One line, before anything is built, when the evolving source is asked for what the env's
    task space cannot do: variants of its tasks (a `mutate` hook) for the mutate / easier / harder
    proposals, or a difficulty scale when the config weights easier / harder explicitly (with the
    default weights those fall back to plain variants)."""
    from agentgym.tasks.generation import difficulty_fn
    from agentgym.tasks.protocol import family_hook

    asked = dict(generator.get("weights") or {})
    weights = asked or GeneratorConfig().weights  # given weights replace the defaults, as in GeneratorConfig
    variants = [k for k in ("mutate", "easier", "harder") if float(weights.get(k, 0)) > 0]
    if variants and family_hook(task_space, "mutate") is None:
        raise ConfigError(f"{task_space.env_id}'s task space cannot mutate its tasks, which the evolving task source's "
                          f"{'/'.join(variants)} proposals need: set tasks.source=split, or tasks.generator.weights "
                          "to {sample: 1}")
    graded = [k for k in ("easier", "harder") if float(asked.get(k, 0)) > 0]
    if graded and difficulty is None and difficulty_fn(task_space) is None:
        raise ConfigError(f"{task_space.env_id}'s task space has no difficulty(spec) to grade "
                          f"{'/'.join(graded)} variants: set their tasks.generator.weights to 0")


@dataclass
class TasksConfig:
    """The trainer's `tasks:` config section (YAML / command-line overrides such as
    `tasks.source=evolve tasks.curriculum=sec tasks.curriculum_opts.tau=0.5`)."""

    source: str = "split"  # split | evolve
    curriculum: str = "uniform"  # uniform | learnability | sec | dump
    curriculum_opts: dict = field(default_factory=dict)  # sec: alpha, tau; dump: c, tau, window; learnability: floor, shrink
    pool: dict = field(default_factory=dict)  # prior, outcome, mastered_above, mastered_min_trials, impossible_after
    generator: dict = field(default_factory=dict)  # weights, frontier, sample_kwargs, max_consecutive_rejects, ...
    seed_tasks: int = 64  # evolve: train tasks the pool starts from
    new_per_round: int = 4  # evolve: new tasks proposed per iteration
    min_active: int = 32  # evolve: active pool size kept at least


def make_task_source_from_config(cfg: TasksConfig | Mapping, task_space, train_tasks: Sequence[TaskSpec], seed: int,
                                 llm=None) -> TaskSource:
    """make_task_source from a TasksConfig or the equivalent mapping (unknown keys are refused)."""
    if not isinstance(cfg, TasksConfig):
        names = {f.name for f in dataclasses.fields(TasksConfig)}
        unknown = set(cfg) - names
        if unknown:
            raise ConfigError(f"unknown config field(s) tasks.{', tasks.'.join(sorted(unknown))}; known: "
                              f"{', '.join(sorted(names))}")
        cfg = TasksConfig(**cfg)
    return make_task_source(cfg.source, task_space, train_tasks, curriculum=cfg.curriculum, seed=seed,
                            curriculum_opts=cfg.curriculum_opts, pool=cfg.pool, generator=cfg.generator,
                            seed_tasks=cfg.seed_tasks, new_per_round=cfg.new_per_round, min_active=cfg.min_active,
                            llm=llm)
