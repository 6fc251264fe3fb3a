"""Held-out evaluation: play a split with any Policy and measure it with confidence intervals.

An `EvalRequest` says what to evaluate (env, split, episodes per task, sampling, ...) and
`run_eval(request, policy)` plays every task of the split `episodes_per_task` times through
`agentgym.rollout.play`; `evaluate(env_id, policy, ...)` is the same with the request's fields as
arguments. `compute_metrics` turns the trajectories into an `EvalResult`:

* success rate (a Wilson interval at the effective sample size of episodes clustered in tasks),
  mean score, mean steps and invalid-action rate (cluster bootstrap over tasks): episodes of one
  task share their initial state, so they are not independent;
* pass@k for k = 1..episodes_per_task (unbiased estimator of Chen et al. 2021);
* the same per task category (`task_space.category`);
* episodes with `infra_error` (the environment or the policy backend broke) are counted and
  reported but left out of every metric: they say nothing about the agent.

Works with any Policy: scripted ones need neither torch nor a model.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from agentgym import progress
from agentgym.chat import ChatConfig
from agentgym.errors import ConfigError, SplitFileError
from agentgym.output_folders import prepare_output_file
from agentgym.policies.base import Policy, SamplingParams
from agentgym.tasks.spec import TaskSpec
from agentgym.evaluation.stats import (Estimate, bootstrap_mean, bootstrap_ratio, clustered_wilson_interval,
                                      mean_pass_at_k, pass_at_k)
from agentgym.trajectory import Trajectory, save_trajectories
from agentgym.turn_monitors import OnTurn, TurnsBar
from agentgym.tasks.splits import load_split
from agentgym.registration import check_env_id, get_task_space
from agentgym.rollout import RolloutRequest, _turn_limit, play

UNCATEGORIZED = "all"
#: Upper bound on episodes played in one `collect` call: bounds memory (one env per episode)
#: and the batch an LLM policy sees at once.
DEFAULT_MAX_BATCH_EPISODES = 256


@dataclass
class GroupMetrics:
    """The metrics of a set of episodes (the whole split, or one category)."""

    tasks: int
    episodes: int
    success_rate: Estimate
    mean_score: Estimate
    mean_steps: Estimate
    invalid_action_rate: Estimate

    def to_dict(self) -> dict:
        return {"tasks": self.tasks, "episodes": self.episodes,
                **{name: getattr(self, name).to_dict() for name in METRIC_NAMES}}

    @classmethod
    def from_dict(cls, d: dict) -> "GroupMetrics":
        return cls(tasks=int(d["tasks"]), episodes=int(d["episodes"]),
                   **{name: Estimate.from_dict(d[name]) for name in METRIC_NAMES})


METRIC_NAMES = ("success_rate", "mean_score", "mean_steps", "invalid_action_rate")


@dataclass
class EvalResult:
    env_id: str
    split: str
    policy: str
    episodes_per_task: int
    overall: GroupMetrics
    pass_at_k: dict[int, Estimate]
    categories: dict[str, GroupMetrics]
    per_task: list[dict]
    infra_errors: int
    infra_error_messages: list[str] = field(default_factory=list)
    #: For categories written "a/b" (e.g. task type / difficulty): metrics per part, one dict per
    #: position, so a report can show success by task type and by difficulty. Empty otherwise.
    category_parts: list[dict[str, GroupMetrics]] = field(default_factory=list)
    wall_seconds: float = 0.0
    metadata: dict[str, Any] = field(default_factory=dict)
    trajectories: list[Trajectory] = field(default_factory=list, repr=False, compare=False)

    # Shortcuts for the numbers people look at first.
    @property
    def success_rate(self) -> float:
        return self.overall.success_rate.value

    @property
    def mean_score(self) -> float:
        return self.overall.mean_score.value

    @property
    def num_tasks(self) -> int:
        return len(self.per_task)

    def summary(self, prefix: str = "") -> dict[str, float]:
        """Flat numbers for a MetricsLogger, e.g. {"eval/success_rate": 0.8, "eval/pass@2": 0.9}."""
        out: dict[str, float] = {f"{prefix}{name}": getattr(self.overall, name).value for name in METRIC_NAMES}
        out.update({f"{prefix}pass@{k}": est.value for k, est in self.pass_at_k.items()})
        out[f"{prefix}episodes"] = self.overall.episodes
        out[f"{prefix}infra_errors"] = self.infra_errors
        return out

    def to_dict(self) -> dict:
        return {
            "env_id": self.env_id, "split": self.split, "policy": self.policy,
            "episodes_per_task": self.episodes_per_task, "overall": self.overall.to_dict(),
            "pass_at_k": {str(k): est.to_dict() for k, est in self.pass_at_k.items()},
            "categories": {name: m.to_dict() for name, m in self.categories.items()},
            "category_parts": [{name: m.to_dict() for name, m in part.items()} for part in self.category_parts],
            "per_task": self.per_task, "infra_errors": self.infra_errors,
            "infra_error_messages": self.infra_error_messages, "wall_seconds": self.wall_seconds,
            "metadata": self.metadata,
        }

    @classmethod
    def from_dict(cls, d: dict) -> "EvalResult":
        return cls(
            env_id=d["env_id"], split=d["split"], policy=d["policy"], episodes_per_task=int(d["episodes_per_task"]),
            overall=GroupMetrics.from_dict(d["overall"]),
            pass_at_k={int(k): Estimate.from_dict(v) for k, v in d["pass_at_k"].items()},
            categories={name: GroupMetrics.from_dict(m) for name, m in d["categories"].items()},
            category_parts=[{name: GroupMetrics.from_dict(m) for name, m in part.items()}
                            for part in d.get("category_parts", [])],
            per_task=list(d["per_task"]), infra_errors=int(d["infra_errors"]),
            infra_error_messages=list(d.get("infra_error_messages", [])),
            wall_seconds=float(d.get("wall_seconds", 0.0)), metadata=dict(d.get("metadata", {})),
        )


# --- metrics ------------------------------------------------------------------------------

def _by_task(trajectories: Sequence[Trajectory]) -> dict[str, list[Trajectory]]:
    groups: dict[str, list[Trajectory]] = defaultdict(list)
    for t in trajectories:
        groups[t.task_id].append(t)
    return dict(groups)


def group_metrics(by_task: dict[str, list[Trajectory]], confidence: float = 0.95, seed: int = 0) -> GroupMetrics:
    """Metrics over valid (non-infra-error) episodes, clustered by task for the bootstrap."""
    clusters = [[t for t in trajs if not t.infra_error] for trajs in by_task.values()]
    clusters = [c for c in clusters if c]
    episodes = [t for c in clusters for t in c]
    return GroupMetrics(
        tasks=len(clusters),
        episodes=len(episodes),
        success_rate=clustered_wilson_interval([(sum(bool(t.success) for t in c), len(c)) for c in clusters],
                                               confidence),
        mean_score=bootstrap_mean([[float(t.score) for t in c] for c in clusters], confidence, seed=seed),
        mean_steps=bootstrap_mean([[float(len(t.steps)) for t in c] for c in clusters], confidence, seed=seed),
        invalid_action_rate=bootstrap_ratio(
            [([float(t.num_invalid) for t in c], [float(len(t.steps)) for t in c]) for c in clusters],
            confidence, seed=seed),
    )


def compute_metrics(
    trajectories: Sequence[Trajectory],
    *,
    categories: dict[str, str] | None = None,
    episodes_per_task: int | None = None,
    env_id: str = "",
    split: str = "",
    policy: str = "",
    confidence: float = 0.95,
    seed: int = 0,
) -> EvalResult:
    """Turn evaluation trajectories into an EvalResult.

    categories: task_id -> category name (tasks not in it go to "all").
    episodes_per_task: the k range of pass@k (default: the largest number of episodes a task got).
    """
    by_task = _by_task(trajectories)
    categories = categories or {}
    if episodes_per_task is None:
        episodes_per_task = max((len(v) for v in by_task.values()), default=1)

    per_task, counts = [], {}
    for task_id, trajs in by_task.items():
        valid = [t for t in trajs if not t.infra_error]
        n, c = len(valid), sum(bool(t.success) for t in valid)
        counts[task_id] = (n, c)
        per_task.append({
            "task_id": task_id,
            "category": categories.get(task_id, UNCATEGORIZED),
            "episodes": n,
            "successes": c,
            "mean_score": (sum(float(t.score) for t in valid) / n) if n else None,
            "mean_steps": (sum(len(t.steps) for t in valid) / n) if n else None,
            "infra_errors": len(trajs) - n,
        })

    pass_k: dict[int, Estimate] = {}
    for k in range(1, episodes_per_task + 1):
        value, used = mean_pass_at_k(list(counts.values()), k)
        per_task_values = [[pass_at_k(n, c, k)] for n, c in counts.values() if n >= k]
        est = bootstrap_mean(per_task_values, confidence, seed=seed)
        pass_k[k] = Estimate(value, est.low, est.high, used, confidence, "unbiased (Chen et al. 2021), bootstrap CI")

    by_category: dict[str, dict[str, list[Trajectory]]] = defaultdict(dict)
    for task_id, trajs in by_task.items():
        by_category[categories.get(task_id, UNCATEGORIZED)][task_id] = trajs

    infra = [t for t in trajectories if t.infra_error]
    messages = sorted({t.error or "unknown infra error" for t in infra})
    return EvalResult(
        env_id=env_id,
        split=split,
        policy=policy,
        episodes_per_task=episodes_per_task,
        overall=group_metrics(by_task, confidence, seed),
        pass_at_k=pass_k,
        categories={name: group_metrics(by_category[name], confidence, seed) for name in sorted(by_category)},
        category_parts=_category_parts(by_task, categories, confidence, seed),
        per_task=per_task,
        infra_errors=len(infra),
        infra_error_messages=messages[:20],
        trajectories=list(trajectories),
    )


def _category_parts(by_task: dict[str, list[Trajectory]], categories: dict[str, str], confidence: float,
                    seed: int) -> list[dict[str, GroupMetrics]]:
    names = {categories.get(task_id, UNCATEGORIZED) for task_id in by_task}
    widths = {len(name.split("/")) for name in names}
    if len(widths) != 1 or (width := widths.pop()) < 2:
        return []
    parts = []
    for position in range(width):
        grouped: dict[str, dict[str, list[Trajectory]]] = defaultdict(dict)
        for task_id, trajs in by_task.items():
            grouped[categories.get(task_id, UNCATEGORIZED).split("/")[position]][task_id] = trajs
        parts.append({name: group_metrics(grouped[name], confidence, seed) for name in sorted(grouped)})
    return parts


# --- running an evaluation ------------------------------------------------------------------

def _bare(env_id: str) -> str:
    return env_id.split("/", 1)[1] if env_id.startswith("agentgym/") else env_id


def resolve_tasks(env_id: str, split: str | Path, limit: int | None = None, task_space=None) -> tuple[str, list[TaskSpec]]:
    """(label, tasks) for a split name of the env's task space or a JSONL manifest path."""

    if limit is not None and limit < 1:
        raise ConfigError(f"--limit must be a positive number of tasks, got {limit}")
    space = task_space if task_space is not None else get_task_space(env_id)
    split_str = str(split)
    looks_like_file = split_str.endswith(".jsonl") or Path(split_str).is_file() or "/" in split_str
    if looks_like_file:
        tasks, label = load_split(split_str), Path(split_str).name
    elif split_str in space.split_names:
        tasks, label = space.split(split_str), split_str
    else:
        raise SplitFileError(
            f"unknown split {split_str!r} for {env_id}: choose one of {', '.join(space.split_names)} "
            "or pass the path of a JSONL file of TaskSpecs"
        )
    wrong = [t for t in tasks if _bare(t.env_id) != _bare(env_id)]
    if wrong:
        raise SplitFileError(
            f"{split_str}: task {wrong[0].task_id} is for {wrong[0].env_id}, not {env_id} "
            f"({len(wrong)} of {len(tasks)} tasks): evaluate them on their own environment"
        )
    if not tasks:
        raise SplitFileError(f"split {split_str!r} of {env_id} holds no tasks")
    return label, tasks[:limit] if limit else tasks


def _category(space, spec: TaskSpec) -> str:
    try:
        return str(space.category(spec))
    except NotImplementedError:
        return UNCATEGORIZED


@dataclass
class EvalRequest:
    """What to evaluate: every task of `split` of `env`, `episodes_per_task` times, and how.

    The evaluation twin of `agentgym.rollout.RolloutRequest`: `run_eval(request, policy)` plays it,
    `evaluate(env_id, policy, ...)` builds one from its arguments. Fields are checked when the
    request is made (a bad value is one line naming it); the env id and the split are checked when
    it runs, against the registry and the env's task space (`resolve`).

    env: a registered env id (e.g. "agentgym/Household-v0").
    split: a split name of the env's task space ("heldout", "heldout_unseen", "train", ...) or the
        path of a JSONL file of TaskSpecs (a training run's eval_heldout.jsonl).
    episodes_per_task: episodes per task, >= 1; the k range of pass@k. Use `sampling` with
        temperature > 0 for k > 1, or every episode of a deterministic policy repeats the first.
    limit: evaluate only the first `limit` tasks of the split (splits are stored in a fixed order);
        None for all, else >= 1.
    sampling: the policy's SamplingParams (None: the policy's defaults; scripted policies ignore it).
    chat: ChatEnv's options, a ChatConfig or a dict of its keys (parser, history, memory, ...).
    env_kwargs: keyword arguments of the env's constructor (as `agentgym.make(env, **env_kwargs)`).
    seed: the reset seed of the i-th task is seed + i, whatever the batching; also the bootstrap's seed.
    confidence: the level of every interval, strictly between 0 and 1.
    max_batch_episodes: at most this many episodes are played in one rollout (bounds memory, one env
        per episode, and the batch an LLM policy sees at once); whole tasks go in a batch, so a task
        with more episodes than this still gets a batch of its own. >= 1.
    executor: a registered executor name ("inprocess", "threads", "process", "ray", or your own);
        num_workers its threads / processes / Ray workers; executor_options its own options.
    task_space: the env's task space (None: the registered one), e.g. one already built by the caller.
    """

    env: str
    split: str | Path = "heldout"
    episodes_per_task: int = 1
    limit: int | None = None
    sampling: SamplingParams | None = None
    chat: ChatConfig | dict | None = None
    env_kwargs: dict | None = None
    seed: int = 0
    confidence: float = 0.95
    max_batch_episodes: int = DEFAULT_MAX_BATCH_EPISODES
    executor: Any = "inprocess"
    num_workers: int | None = 2
    executor_options: dict | None = None
    task_space: Any = None

    def __post_init__(self) -> None:
        if self.episodes_per_task < 1:
            raise ConfigError(f"episodes per task must be >= 1, got {self.episodes_per_task}")
        if self.limit is not None and self.limit < 1:
            raise ConfigError(f"--limit must be a positive number of tasks, got {self.limit}")
        if self.max_batch_episodes < 1:
            raise ConfigError(f"max_batch_episodes must be >= 1, got {self.max_batch_episodes}")
        if not 0 < self.confidence < 1:
            raise ConfigError(f"confidence must be between 0 and 1, got {self.confidence}")

    def resolve(self) -> tuple[str, Any, str, list[TaskSpec]]:
        """(checked env id, task space, split label, tasks): what `run_eval` plays, without playing it
        (the CLI calls it to fail on a bad env or split before loading a model)."""

        env_id = check_env_id(self.env)
        space = self.task_space if self.task_space is not None else get_task_space(env_id)
        label, tasks = resolve_tasks(env_id, self.split, self.limit, task_space=space)
        return env_id, space, label, tasks


def evaluate(
    env_id: str,
    policy: Policy,
    split: str | Path = "heldout",
    episodes_per_task: int = 1,
    limit: int | None = None,
    *,
    sampling: SamplingParams | None = None,
    executor: str = "inprocess",
    num_workers: int = 2,
    chat: ChatConfig | dict | None = None,
    env_kwargs: dict | None = None,
    seed: int = 0,
    confidence: float = 0.95,
    max_batch_episodes: int = DEFAULT_MAX_BATCH_EPISODES,
    trajectories_path: str | Path | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    policy_name: str | None = None,
    task_space=None,
    session: Any = progress.CURRENT,
) -> EvalResult:
    """Play `split` (a split name or a JSONL file) with `policy` and measure it.

    A convenience: the arguments are EvalRequest's fields (see it for each), and this is
    `run_eval(EvalRequest(env_id, split, episodes_per_task, limit, ...), policy, ...)`.
    trajectories_path: also save every trajectory (including infra errors) as JSONL.
    on_progress(done_episodes, total_episodes) after every batched turn (progress bars).
    policy_name: the policy's name in the result (default: its class name).
    session: where the bar draws (agentgym.progress; by default the calling command's session).
    """
    request = EvalRequest(env_id, split, episodes_per_task, limit, sampling=sampling, chat=chat,
                          env_kwargs=env_kwargs, seed=seed, confidence=confidence,
                          max_batch_episodes=max_batch_episodes, executor=executor, num_workers=num_workers,
                          task_space=task_space)
    return run_eval(request, policy, on_progress=on_progress, trajectories_path=trajectories_path,
                    policy_name=policy_name, session=session)


def run_eval(request: EvalRequest, policy: Policy, *, on_progress: Callable[[int, int], None] | None = None,
             trajectories_path: str | Path | None = None, policy_name: str | None = None,
             session: Any = progress.CURRENT) -> EvalResult:
    """Play `request` with `policy` and measure it (the evaluation itself; `evaluate` builds the request).

    The split's tasks go to `agentgym.rollout.play` in batches of whole tasks (at most
    max_batch_episodes episodes), task i reset with seed + i; the trajectories become an
    EvalResult through `compute_metrics`, its metadata recording the request's settings.
    on_progress(done_episodes, total_episodes) after every batched turn; trajectories_path: also
    save every trajectory (including infra errors) as JSONL; policy_name: the policy's name in the
    result (default: its class name); session: where the bar draws (agentgym.progress; by default
    the calling command's session)."""

    r = request
    env_id, space, label, tasks = r.resolve()
    if trajectories_path is not None:  # before the episodes, not after them
        prepare_output_file(Path(trajectories_path), "trajectories_path", "pass a JSONL file in a folder you can write")
    episodes_per_task, seed = r.episodes_per_task, r.seed
    total = len(tasks) * episodes_per_task
    tasks_per_batch = max(1, r.max_batch_episodes // episodes_per_task)
    trajectories: list[Trajectory] = []
    start = time.perf_counter()
    # Counted in turns, not episodes: a batch's episodes often end together on its last turn, so an
    # episode count (and its ETA) would sit at 0 for the whole batch. The bound counts every episode
    # not yet ended at the turn limit and shrinks as episodes end early; both meet at the end.
    turn_limit = _turn_limit(env_id, r.env_kwargs, RolloutRequest.max_turns)
    with progress.bar(f"eval {label}", total=total * turn_limit, unit="turns", every=15.0, session=session) as bar:
        turns_before = 0  # turns played by finished batches
        for first in range(0, len(tasks), tasks_per_batch):
            batch = tasks[first:first + tasks_per_batch]
            done_before = len(trajectories)
            later = (total - done_before - len(batch) * episodes_per_task) * turn_limit  # batches not started
            monitors = [TurnsBar(bar, turns_before, later, episodes_before=done_before, episodes_total=total)]
            if on_progress is not None:
                monitors.append(OnTurn(on_progress, episodes_before=done_before, episodes_total=total))
            rollout = RolloutRequest(env_id, batch, episodes_per_task, seed=seed + first, sampling=r.sampling,
                                     executor=r.executor, num_workers=r.num_workers,
                                     executor_options=r.executor_options, env_kwargs=r.env_kwargs, chat=r.chat)
            new = play(rollout, policy, monitors=monitors)
            trajectories += new
            turns_before += sum(len(t.steps) for t in new)
            bar.update(turns_before, total=turns_before + later)
            if on_progress is not None:
                on_progress(len(trajectories), total)
    wall = time.perf_counter() - start

    if trajectories_path is not None:
        save_trajectories(trajectories_path, trajectories)
    result = compute_metrics(
        trajectories,
        categories={t.task_id: _category(space, t) for t in tasks},
        episodes_per_task=episodes_per_task,
        env_id=env_id, split=label, policy=policy_name or type(policy).__name__,
        confidence=r.confidence, seed=seed,
    )
    result.wall_seconds = wall
    result.metadata = {
        "seed": seed, "limit": r.limit, "tasks": len(tasks), "executor": r.executor,
        "sampling": asdict(r.sampling) if r.sampling is not None else None,
        "chat": ChatConfig.of(r.chat).kwargs(),  # every field, defaults included, so reports compare field by field
        "env_kwargs": dict(r.env_kwargs or {}),
        "confidence": r.confidence, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "trajectories_path": str(trajectories_path) if trajectories_path is not None else None,
    }
    return result
