"""Making tasks from a task space: variants, LLM proposals, fresh training tasks and the shipped
split manifests. Functions taking the space; a family customises them through the optional hooks
named in `agentgym.tasks.protocol` (`mutate`, `difficulty`, `describe`, `parse`, `build_splits`)."""

from __future__ import annotations

import json
import re
from typing import Callable

import numpy as np

from agentgym.errors import ConfigError
from agentgym.tasks.protocol import family_hook
from agentgym.tasks.spec import TaskSpec
from agentgym.tasks.validation import heldout_keys, is_reserved, validate


def mutate(space, spec: TaskSpec, rng: np.random.Generator) -> TaskSpec:
    """A nearby variant of `spec` (ACCEL-style level editing), from the family's `mutate` hook."""
    hook = family_hook(space, "mutate")
    if hook is None:
        missing_hook(space, "mutate(spec, rng)", "the task generator cannot make variants of its tasks")
    return hook(spec, rng)


def missing_hook(space, hook: str, consequence: str):
    raise NotImplementedError(f"{space.env_id}'s task space defines no {hook}: {consequence}")


def difficulty_fn(space) -> Callable[[TaskSpec], float] | None:
    """The family's `difficulty(spec) -> float` (higher is harder), or None when it has no such scale
    (the generator then works from success rates alone)."""
    fn = getattr(space, "difficulty", None)
    return fn if callable(fn) else None


def describe(space) -> str:
    """What the environment's tasks look like, in words, for LLM task proposers: the family's
    `describe` hook, else the space class's docstring."""
    hook = family_hook(space, "describe")
    return hook() if hook is not None else docstring(space)


def docstring(space) -> str:
    """The space class's docstring (or its env id): `describe`'s default."""
    return (type(space).__doc__ or space.env_id).strip()


def parse(space, text: str) -> TaskSpec | None:
    """An LLM's proposal as a TaskSpec (the family's `parse` hook, else `parse_json`); None when it
    does not parse."""
    hook = family_hook(space, "parse")
    return hook(text) if hook is not None else parse_json(space, text)


def parse_json(space, text: str) -> TaskSpec | None:
    """The first JSON object in `text` read as {"params": {...}, "seed": N} (or bare params) for
    `space.env_id`; None when there is none. Families with a task grammar in words call it first."""
    match = re.search(r"\{.*\}", text, flags=re.S)
    if not match:
        return None
    try:
        obj = json.loads(match.group(0))
        params = obj.get("params", obj)
        return TaskSpec(space.env_id, params=params, seed=int(obj.get("seed", 0)))
    except (ValueError, TypeError, AttributeError, RecursionError):  # a model's text: anything may come
        return None


def build_splits(space, **options) -> dict[str, list[TaskSpec]]:
    """Generate the shipped split manifests deterministically (the family's `build_splits` hook)."""
    hook = family_hook(space, "build_splits")
    if hook is None:
        missing_hook(space, "build_splits()", "its splits are not generated")
    return hook(**options)


def fresh_tasks(space, n: int, seed: int, keep=None, max_draws_per_task: int = 500) -> list[TaskSpec]:
    """`n` new training tasks drawn from `space.sample` (deterministic in `seed`): never a held-out
    id, never a combination reserved for `heldout_unseen`, no duplicates, each valid (`validate`);
    `keep(spec)` narrows them (e.g. to some categories). A training stream far wider than the shipped
    train split, for agents that would otherwise memorize its layouts."""
    rng = np.random.default_rng([seed, 11])
    heldout = heldout_keys(space)
    out: dict[str, TaskSpec] = {}
    for _ in range(max(1, n) * max_draws_per_task):
        if len(out) >= n:
            break
        spec = space.sample(rng)
        if spec.task_id in heldout or spec.content_key in heldout or spec.task_id in out or (
                keep is not None and not keep(spec)):
            continue
        if is_reserved(space, spec) or not validate(space, spec):
            continue
        out[spec.task_id] = spec
    if len(out) < n:
        raise ConfigError(f"drew only {len(out)} of {n} fresh {space.env_id} tasks that pass the filter: "
                          "loosen the categories / task filter or ask for fewer")
    return list(out.values())
