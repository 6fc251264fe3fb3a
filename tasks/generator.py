"""TaskGenerator: proposes new training tasks for a TaskPool, for any environment's task space.

Proposal sources (picked at random by `weights`; a source with nothing to work from falls back
to `sample`):

- sample:  a fresh draw from the task space (`task_space.sample(rng, **sample_kwargs)`);
- mutate:  a nearby variant of a frontier task, estimated success in [lo, hi] (ACCEL: edit the
           levels at the edge of the agent's ability);
- easier:  from a task the agent keeps failing, a mutation that is easier (WebRL: new tasks from
           failures); harder: from a task it always solves, a harder mutation. "Easier" and
           "harder" are judged by a difficulty function (a task space method `difficulty(spec)`,
           or the `difficulty=` argument: a callable over TaskSpec or an import string
           "module:function" of a function over params). Among `variant_candidates` mutations
           the easiest (hardest) one below (above) the parent's difficulty is proposed. Without a
           difficulty function, the variant is a plain mutation of the failed / solved task.
- llm:     any Policy is asked, with the task space's describe() and recent episodes in the prompt,
           to propose a task in words or JSON; `generation.parse(task_space, text)` turns it into a TaskSpec
           (AgentEvolver's self-questioning).

Every proposal goes through one gate (`admit`): it must parse, belong to this env, not be a
held-out task (by id, or by the task space's `reserved(spec)` rule for unseen-combination splits,
e.g. household's reserved (object, destination) pairs), not already be known (pool or earlier rejects) and pass `validation.validate(task_space, spec)`
(the oracle solves it). Rejections are counted by reason in `stats`. After
`max_consecutive_rejects` rejections in a row, `propose` raises TaskGenerationError instead of
looping forever.
"""

from __future__ import annotations

import importlib
import json
from collections import Counter, deque
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from agentgym.errors import AgentGymError, ConfigError
from agentgym.tasks.pool import TaskPool
from agentgym.tasks.generation import describe, difficulty_fn, mutate, parse
from agentgym.tasks.validation import canonical, heldout_keys, reserved_rule, validate
from agentgym.tasks.spec import TaskSpec
from agentgym.policies.base import SamplingParams

SOURCES = ("sample", "mutate", "easier", "harder", "llm")

class TaskGenerationError(AgentGymError):
    """The task space keeps producing proposals that are invalid, duplicates or held out."""


@dataclass
class GeneratorConfig:
    weights: dict = field(default_factory=lambda: {"sample": 1.0, "mutate": 2.0, "easier": 1.0, "harder": 0.5,
                                                   "llm": 0.0})
    frontier: tuple[float, float] = (0.2, 0.8)  # success estimate range of tasks worth mutating
    frontier_min_trials: int = 2
    extreme_min_trials: int = 4  # rollouts before a task counts as always failed / always solved
    variant_candidates: int = 4  # mutations drawn to find an easier / harder variant
    max_consecutive_rejects: int = 200
    sample_kwargs: dict = field(default_factory=dict)  # difficulty keywords for task_space.sample
    llm_batch: int = 4  # proposals asked of the LLM per call
    llm_recent: int = 8  # recent episodes shown in the LLM prompt
    llm_temperature: float = 1.0
    llm_max_new_tokens: int = 160

    def __post_init__(self):
        self.frontier = tuple(float(x) for x in self.frontier)  # type: ignore[assignment]
        unknown = set(self.weights) - set(SOURCES)
        if unknown:
            raise ConfigError(f"unknown generator sources {sorted(unknown)}: use {', '.join(SOURCES)}")
        if any(float(w) < 0 for w in self.weights.values()) or not any(float(w) > 0 for w in self.weights.values()):
            raise ConfigError(f"generator weights must be >= 0 with at least one > 0, got {self.weights}")
        lo, hi = self.frontier
        if not 0.0 <= lo <= hi <= 1.0:
            raise ConfigError(f"generator frontier must satisfy 0 <= lo <= hi <= 1, got {self.frontier}")
        if self.max_consecutive_rejects < 1 or self.variant_candidates < 1 or self.llm_batch < 1:
            raise ConfigError("generator max_consecutive_rejects, variant_candidates and llm_batch must be >= 1")


def resolve_difficulty(task_space, difficulty: Callable | str | None) -> Callable[[TaskSpec], float] | None:
    """A difficulty function over TaskSpecs, from an explicit argument or the task space's own
    `difficulty(spec)` method; None when neither exists."""
    if difficulty is None:
        return difficulty_fn(task_space)  # the family's difficulty(spec) hook, or None
    if isinstance(difficulty, str):
        module, _, name = difficulty.partition(":")
        try:
            fn = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            raise ConfigError(f"difficulty function {difficulty!r} not found: write 'module:function'") from None
        return lambda spec: float(fn(dict(spec.params)))
    if callable(difficulty):
        return difficulty
    raise ConfigError(f"difficulty must be a callable or 'module:function', got {difficulty!r}")


class TaskGenerator:
    def __init__(self, task_space, pool: TaskPool, *, seed: int = 0, heldout_ids: Iterable[str] | None = None,
                 llm=None, difficulty: Callable | str | None = None, config: GeneratorConfig | None = None,
                 **options: Any):
        if config is not None and options:
            raise ConfigError("pass either a GeneratorConfig or keyword options to TaskGenerator, not both")
        try:
            self.config = config or GeneratorConfig(**options)
        except TypeError as exc:
            raise ConfigError(f"unknown task generator option: {exc}") from None
        self.space = task_space
        self.pool = pool
        self.rng = np.random.default_rng(seed)
        self.heldout = set(heldout_keys(task_space) if heldout_ids is None else heldout_ids)
        self.llm = llm
        self.difficulty = resolve_difficulty(task_space, difficulty)
        self.reserved = reserved_rule(task_space)  # regions kept for heldout_unseen (the family's reserved hook)
        self.round = 0
        self.stats: Counter = Counter()
        self.rejected: set[str] = set()  # ids that failed validation: never re-validated
        self.recent: deque = deque(maxlen=self.config.llm_recent)
        self._llm_queue: deque = deque()
        self.last_error = ""
        self._parents: dict[str, list] = {}
        self._none_reason = "unparsed"

    # --- the gate -------------------------------------------------------------------------
    def admit(self, spec: TaskSpec | None, origin: str, parent: str | None = None,
              none_reason: str = "unparsed") -> str:
        """Add `spec` to the pool if it passes every check; returns "admitted" or the reason it
        was dropped (also counted in stats as rejected/<reason>; `none_reason` when spec is None)."""
        if spec is not None:
            spec, reason = self._canonical(spec)
            if reason is None:
                reason = self._check(spec)
        else:
            reason = none_reason
        if reason == "admitted":
            self.pool.add(spec, self.space.category(spec), origin=origin, parent=parent, added_round=self.round)
            self.stats[f"admitted/{origin}"] += 1
        else:
            self.stats[f"rejected/{reason}"] += 1
        return reason

    def _canonical(self, spec) -> tuple:
        """The family's validator runs first, before anything is built or written: unknown
        keys, wrong types and paths are refused here; equal games get equal ids."""
        if not isinstance(spec, TaskSpec) or spec.env_id != self.space.env_id:
            return spec, "wrong_env"
        try:
            return canonical(self.space, spec), None
        except AgentGymError as exc:
            self.last_error = str(exc)
            return spec, "invalid"

    def _check(self, spec: TaskSpec | None) -> str:
        if spec is None:
            return "unparsed"
        if not isinstance(spec, TaskSpec) or spec.env_id != self.space.env_id:
            return "wrong_env"
        tid = spec.task_id
        if tid in self.heldout or spec.content_key in self.heldout:
            return "heldout"
        try:
            if self.reserved is not None and self.reserved(spec):
                return "reserved"
        except (KeyError, TypeError, ValueError):
            return "invalid"
        if tid in self.pool:
            return "duplicate"
        if tid in self.rejected:
            return "invalid"
        try:
            ok = bool(validate(self.space, spec))
        except Exception as exc:  # a crashing oracle on a weird proposal is just an invalid task
            self.last_error = f"validate raised {type(exc).__name__}: {exc}"
            ok = False
        if not ok:
            self.rejected.add(tid)
            return "invalid"
        return "admitted"

    # --- seeding and proposing ------------------------------------------------------------
    def seed_from(self, tasks: Sequence[TaskSpec]) -> int:
        """Admit given tasks (e.g. part of the train split) as origin "split"; returns how many."""
        return sum(self.admit(t, "split") == "admitted" for t in tasks)

    def propose(self, n: int) -> list[TaskSpec]:
        """Admit `n` new tasks into the pool and return them."""
        out: list[TaskSpec] = []
        rejects = 0
        # Parents come from the pool as it is now: new tasks have no rollouts yet, so they could
        # not be frontier / failed / solved parents anyway, and one scan per call keeps this O(pool).
        k = self.config.extreme_min_trials
        self._parents = {"mutate": self.pool.frontier(*self.config.frontier, self.config.frontier_min_trials),
                         "easier": self.pool.always_failed(k), "harder": self.pool.always_solved(k)}
        while len(out) < n:
            source = self._pick_source()
            self.stats[f"proposed/{source}"] += 1
            spec, origin, parent = self._draw(source)
            if self.admit(spec, origin, parent, self._none_reason) == "admitted":
                out.append(spec)
                rejects = 0
                continue
            rejects += 1
            if rejects >= self.config.max_consecutive_rejects:
                reasons = {k.split("/", 1)[1]: v for k, v in self.stats.items() if k.startswith("rejected/")}
                raise TaskGenerationError(
                    f"{self.space.env_id}: no valid new task in {rejects} proposals in a row (rejected so far: "
                    f"{reasons}{'; last error: ' + self.last_error if self.last_error else ''}); check the task "
                    "space's sample/mutate/validate or the generator's sample_kwargs, or raise "
                    "max_consecutive_rejects")
        return out

    def step_round(self, n_new: int) -> dict:
        """One generator round: retire mastered / impossible tasks, then propose `n_new` tasks."""
        self.round += 1
        retired = self.pool.retire()
        for reason, ids in retired.items():
            self.stats[f"retired/{reason}"] += len(ids)
        new = self.propose(n_new) if n_new > 0 else []
        return {"retired": {k: len(v) for k, v in retired.items()}, "new": len(new)}

    def observe(self, trajectories: Iterable) -> None:
        """Remember recent episodes for the LLM proposer's prompt."""
        for t in trajectories:
            if not t.infra_error:
                self.recent.append({"task_id": t.task_id, "instruction": t.instruction, "success": bool(t.success),
                                    "steps": len(t.steps)})

    # --- sources --------------------------------------------------------------------------
    def _pick_source(self) -> str:
        weights = {k: float(v) for k, v in self.config.weights.items() if float(v) > 0}
        if self.llm is None:
            weights.pop("llm", None)
        if not weights:
            weights = {"sample": 1.0}
        names = sorted(weights)
        p = np.array([weights[k] for k in names])
        return names[int(self.rng.choice(len(names), p=p / p.sum()))]

    def _draw(self, source: str) -> tuple[TaskSpec | None, str, str | None]:
        """One proposal; when it is None, `self._none_reason` says why."""
        self._none_reason = "unparsed" if source == "llm" else "error"
        try:
            if source == "mutate":
                parents = self._parents["mutate"]
                if parents:
                    parent = parents[int(self.rng.integers(len(parents)))].spec
                    return mutate(self.space, parent, self.rng), "mutate", parent.task_id
            elif source in ("easier", "harder"):
                parents = self._parents[source]
                if parents:
                    parent = parents[int(self.rng.integers(len(parents)))].spec
                    return self._variant(parent, easier=source == "easier"), source, parent.task_id
            elif source == "llm":
                return self._from_llm(), "llm", None
            if source != "sample":
                self.stats[f"fallback/{source}"] += 1
            return self.space.sample(self.rng, **self.config.sample_kwargs), "sample", None
        except (ValueError, KeyError, TypeError, RuntimeError) as exc:
            self.last_error = f"{source} raised {type(exc).__name__}: {exc}"
            return None, source, None

    def _variant(self, parent: TaskSpec, easier: bool) -> TaskSpec | None:
        candidates = [mutate(self.space, parent, self.rng) for _ in range(self.config.variant_candidates)]
        if self.difficulty is None:
            return candidates[0]
        sign = 1.0 if easier else -1.0  # minimize difficulty for easier, maximize for harder
        base = sign * self.difficulty(parent)
        scored = [(sign * self.difficulty(c), i) for i, c in enumerate(candidates)]
        better = [(s, i) for s, i in scored if s < base]
        if not better:
            self._none_reason = "no_variant"
            return None
        return candidates[min(better)[1]]

    # --- LLM self-questioning -------------------------------------------------------------
    def llm_prompt(self) -> list[dict[str, str]]:
        lines = [f"Environment: {self.space.env_id}", describe(self.space), ""]
        if self.recent:
            lines.append("Recent episodes of the agent:")
            lines += [f"- {r['instruction'] or r['task_id']}: {'solved' if r['success'] else 'failed'} "
                      f"in {r['steps']} steps" for r in self.recent]
            lines.append("")
        lo, hi = self.config.frontier
        frontier = self.pool.frontier(lo, hi, self.config.frontier_min_trials)[:3]
        if frontier:
            lines.append("Tasks the agent solves only sometimes:")
            lines += [json.dumps({"params": dict(e.spec.params), "seed": e.spec.seed}, sort_keys=True) for e in frontier]
            lines.append("")
        lines.append('Propose ONE new task the agent can almost, but not yet reliably, solve. Answer with a JSON '
                     'object {"params": {...}, "seed": N} or with the task instruction in words.')
        return [{"role": "system", "content": "You design training tasks for an agent acting in a text environment."},
                {"role": "user", "content": "\n".join(lines)}]

    def _from_llm(self) -> TaskSpec | None:
        if not self._llm_queue:
            sampling = SamplingParams(temperature=self.config.llm_temperature,
                                      max_new_tokens=self.config.llm_max_new_tokens,
                                      seed=int(self.rng.integers(2**31)))
            prompt = self.llm_prompt()
            try:
                completions = self.llm.generate([prompt] * self.config.llm_batch, sampling, None)
            except Exception as exc:  # the proposer is optional: its failure drops its proposals, nothing else
                self.stats["llm/errors"] += 1
                self.last_error = f"llm raised {type(exc).__name__}: {exc}"
                return None
            for comp in completions:
                if getattr(comp, "error", None):
                    self.stats["llm/errors"] += 1
                    self.last_error = f"llm completion error: {comp.error}"
                    continue
                self._llm_queue.append(getattr(comp, "text", comp))
            if not self._llm_queue:
                return None
        text = self._llm_queue.popleft()
        self.stats["llm/texts"] += 1
        try:
            return parse(self.space, text) if isinstance(text, str) else None
        except Exception as exc:
            self.last_error = f"parse raised {type(exc).__name__}: {exc}"
            return None

    # --- persistence ----------------------------------------------------------------------
    def state_dict(self) -> dict:
        cfg = asdict(self.config)
        cfg["frontier"] = list(cfg["frontier"])
        return {"config": cfg, "rng": self.rng.bit_generator.state, "round": self.round, "stats": dict(self.stats),
                "rejected": sorted(self.rejected), "recent": list(self.recent), "llm_queue": list(self._llm_queue)}

    def load_state_dict(self, state: dict) -> None:
        self.config = GeneratorConfig(**state["config"])
        self.rng.bit_generator.state = state["rng"]
        self.round = int(state["round"])
        self.stats = Counter(state["stats"])
        self.rejected = set(state["rejected"])
        self.recent = deque(state["recent"], maxlen=self.config.llm_recent)
        self._llm_queue = deque(state.get("llm_queue", []))
