"""The task space of ToolUse-v0: TaskSpec params are {"template": name, "level": 1..3}; the
seed generates the world (people, dates, balances, mail...) and the template's records.

Splits: `train` and `heldout` draw from the training templates with disjoint seeds;
`heldout_unseen` uses only templates never seen in training (templates_unseen.py)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from agentgym.envs.tools.goals import Goal
from agentgym.envs.tools.state import World
from agentgym.envs.tools.templates import TRAIN_TEMPLATES, Template
from agentgym.envs.tools.templates_unseen import UNSEEN_TEMPLATES
from agentgym.tasks.space import TaskSpace, check_schema
from agentgym.tasks.spec import TaskSpec
from agentgym.tasks.splits import save_split

ENV_ID = "agentgym/ToolUse-v0"
TEMPLATES: dict[str, Template] = {t.name: t for t in TRAIN_TEMPLATES + UNSEEN_TEMPLATES}
LEVELS = (1, 2, 3)
SPLIT_SIZES = {"train": 400, "heldout": 100, "heldout_unseen": 100}
# Seeds of different splits come from disjoint ranges, so no world is shared across them.
SPLIT_SEED_BASE = {"train": 0, "heldout": 10_000_000, "heldout_unseen": 20_000_000}


def check_params(spec: TaskSpec) -> tuple[Template, int]:
    """The template and level of a spec; ValueError with a clear message when they are wrong."""
    name, level = spec.params.get("template"), spec.params.get("level", 1)
    if name not in TEMPLATES:
        raise ValueError(f"unknown template {name!r}; choose one of {', '.join(TEMPLATES)}")
    if level not in LEVELS or isinstance(level, bool):
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    return TEMPLATES[name], level


@lru_cache(maxsize=256)
def _build(task_json: str) -> tuple[str, dict, Goal]:
    spec = TaskSpec.from_dict(json.loads(task_json))
    template, level = check_params(spec)
    world = World(np.random.default_rng(spec.seed))
    goal = template.setup(world, level)
    return json.dumps(world.state), world.state, goal


def load_task(spec: TaskSpec) -> tuple[dict, dict, Goal]:
    """(a fresh copy of the initial state to act on, the shared initial state, the goal).

    Cached: the episodes of a GRPO group replay one task, and parsing the JSON of the state is
    cheaper than regenerating the world. The shared initial state must be treated as read-only
    (the grader only reads it)."""
    state_json, initial, goal = _build(json.dumps(spec.to_dict(with_id=False), sort_keys=True))
    return json.loads(state_json), initial, goal


def build_task(spec: TaskSpec) -> tuple[dict, Goal]:
    """A fresh copy of the task's initial state, and its goal."""
    state, _, goal = load_task(spec)
    return state, goal


class ToolUseTaskSpace(TaskSpace):
    """Multi-step errands over a user's apps (contacts, calendar, email, files, bank, shopping
    list), e.g. "Move every meeting I have with Dana Ortiz next week to Friday and email her the
    new times". Params: {"template": one of the template names, "level": 1, 2 or 3}; the seed
    generates the people, dates, balances and messages. Graded on the final app state: the
    required changes must be there and nothing else may change."""

    env_id = ENV_ID
    split_dir = Path(__file__).parent / "splits"

    def __init__(self, templates: list[str] | None = None):
        self.train_templates = templates or [t.name for t in TRAIN_TEMPLATES]

    def sample(self, rng: np.random.Generator, template: str | None = None, level: int | None = None,
               **_: Any) -> TaskSpec:
        """A task from the training templates (or the named one) at a random (or given) level."""
        name = template or self.train_templates[int(rng.integers(len(self.train_templates)))]
        lvl = int(level) if level is not None else int(rng.choice(LEVELS))
        spec = TaskSpec(self.env_id, {"template": name, "level": lvl}, seed=int(rng.integers(0, 2**31 - 1)))
        check_params(spec)
        return spec

    def mutate(self, spec: TaskSpec, rng: np.random.Generator) -> TaskSpec:
        """A new world for the same goal, or the same world one level up or down."""
        template, level = check_params(spec)
        if rng.random() < 0.5:
            return TaskSpec(self.env_id, {"template": template.name, "level": level},
                            seed=int(rng.integers(0, 2**31 - 1)))
        step = int(rng.choice([-1, 1]))
        new_level = min(max(level + step, LEVELS[0]), LEVELS[-1])
        if new_level == level:
            new_level = level - step
        return TaskSpec(self.env_id, {"template": template.name, "level": new_level}, seed=spec.seed)

    def check_params(self, params: dict) -> dict:
        p = check_schema(params, {"template": str}, {"level": int}, what="ToolUse")
        template, level = check_params(TaskSpec(self.env_id, p))
        return {"template": template.name, "level": level}

    def reserved(self, spec: TaskSpec) -> bool:
        """The unseen templates are kept for heldout_unseen."""
        return spec.params.get("template") in {t.name for t in UNSEEN_TEMPLATES}

    def solve(self, spec: TaskSpec) -> list[str]:
        _, goal = build_task(spec)
        return [json.dumps(c, ensure_ascii=False, sort_keys=True) for c in goal.plan]

    def category(self, spec: TaskSpec) -> str:
        template, level = check_params(spec)
        return f"{template.name}/L{level}"

    def build_splits(self) -> dict[str, list[TaskSpec]]:
        unseen = [t.name for t in UNSEEN_TEMPLATES]
        pools = {"train": self.train_templates, "heldout": self.train_templates, "heldout_unseen": unseen}
        splits = {}
        for name, size in SPLIT_SIZES.items():
            pool = pools[name]
            # Round-robin over templates x levels: every category is represented evenly.
            splits[name] = [TaskSpec(self.env_id, {"template": pool[i % len(pool)],
                                                   "level": LEVELS[(i // len(pool)) % len(LEVELS)]},
                                     seed=SPLIT_SEED_BASE[name] + i) for i in range(size)]
        return splits

    def describe(self) -> str:
        lines = [(type(self).__doc__ or "").strip(), "", "Training templates:"]
        lines += [f"- {t.name} (apps: {', '.join(t.apps)})" for t in TRAIN_TEMPLATES]
        return "\n".join(lines)


def write_splits(space: ToolUseTaskSpace | None = None) -> None:
    """Regenerate the shipped manifests: `python -m agentgym.envs.tools.tasks`."""

    space = space or ToolUseTaskSpace()
    for name, tasks in space.build_splits().items():
        save_split(Path(space.split_dir) / f"{name}.jsonl", tasks)


if __name__ == "__main__":
    write_splits()
