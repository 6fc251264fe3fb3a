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


def check_template_level(spec: TaskSpec, templates: dict, label: str = "template") -> tuple[Any, int]:
    """The template (of `templates`, by name) and level of a spec: {"template": name, "level": 1..3},
    the params of every task space whose seed generates a World and whose template sets it up.
    ValueError with a clear message when they are wrong."""
    name, level = spec.params.get("template"), spec.params.get("level", 1)
    if name not in templates:
        raise ValueError(f"unknown {label} {name!r}; choose one of {', '.join(templates)}")
    if level not in LEVELS or isinstance(level, bool):
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    return templates[name], level


def check_params(spec: TaskSpec) -> tuple[Template, int]:
    """The template and level of a ToolUse spec; ValueError with a clear message when they are wrong."""
    return check_template_level(spec, TEMPLATES)


def setup_world(spec: TaskSpec, templates: dict, label: str = "template") -> tuple[str, dict, Any]:
    """The spec's world, generated from its seed and set up by its template: (the initial state as
    JSON, the state itself, what the template's setup returned: a Goal, a Briefing)."""
    template, level = check_template_level(spec, templates, label)
    world = World(np.random.default_rng(spec.seed))
    made = template.setup(world, level)
    return json.dumps(world.state), world.state, made


@lru_cache(maxsize=256)
def _build(task_json: str) -> tuple[str, dict, Goal]:
    return setup_world(TaskSpec.from_dict(json.loads(task_json)), TEMPLATES)


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


class TemplateTaskSpace(TaskSpace):
    """A task space of params {"template": name, "level": 1..3} whose seed generates the world:
    ToolUse's errands and Briefing's reports. Subclasses name their templates (`templates`, every
    one by name; `unseen_templates`, kept for heldout_unseen), the training ones
    (`train_templates`), `what` a schema error calls the family (and `template_label` an unknown
    template), `split_sizes` and `split_seed_base` (disjoint seed ranges: no world is shared across
    splits)."""

    templates: dict[str, Any]
    unseen_templates: list[str]
    train_templates: list[str]
    what: str
    template_label = "template"  # what an unknown template is called in its error
    split_sizes: dict[str, int]
    split_seed_base: dict[str, int]

    def template_and_level(self, spec: TaskSpec) -> tuple[Any, int]:
        return check_template_level(spec, self.templates, self.template_label)

    def sample(self, rng: np.random.Generator, template: str | None = None, level: int | None = None,
               **_: Any) -> TaskSpec:
        """A task from the training templates (or the named one) at a random (or given) level."""
        name = template or self.train_templates[int(rng.integers(len(self.train_templates)))]
        lvl = int(level) if level is not None else int(rng.choice(LEVELS))
        spec = TaskSpec(self.env_id, {"template": name, "level": lvl}, seed=int(rng.integers(0, 2**31 - 1)))
        self.template_and_level(spec)
        return spec

    def check_params(self, params: dict) -> dict:
        p = check_schema(params, {"template": str}, {"level": int}, what=self.what)
        template, level = self.template_and_level(TaskSpec(self.env_id, p))
        return {"template": template.name, "level": level}

    def reserved(self, spec: TaskSpec) -> bool:
        """The unseen templates are kept for heldout_unseen."""
        return spec.params.get("template") in self.unseen_templates

    def category(self, spec: TaskSpec) -> str:
        template, level = self.template_and_level(spec)
        return f"{template.name}/L{level}"

    def build_splits(self) -> dict[str, list[TaskSpec]]:
        pools = {"train": self.train_templates, "heldout": self.train_templates,
                 "heldout_unseen": self.unseen_templates}
        splits = {}
        for name, size in self.split_sizes.items():
            pool = pools[name]
            # Round-robin over templates x levels: every category is represented evenly.
            splits[name] = [TaskSpec(self.env_id, {"template": pool[i % len(pool)],
                                                   "level": LEVELS[(i // len(pool)) % len(LEVELS)]},
                                     seed=self.split_seed_base[name] + i) for i in range(size)]
        return splits

    def write_splits(self) -> None:
        """Regenerate the shipped manifests from build_splits."""
        for name, tasks in self.build_splits().items():
            save_split(Path(self.split_dir) / f"{name}.jsonl", tasks)


class ToolUseTaskSpace(TemplateTaskSpace):
    """Multi-step errands over a user's apps (contacts, calendar, email, files, bank, shopping
    list), e.g. "Move every meeting I have with Dana Ortiz next week to Friday and email her the
    new times". Params: {"template": one of the template names, "level": 1, 2 or 3}; the seed
    generates the people, dates, balances and messages. Graded on the final app state: the
    required changes must be there and nothing else may change."""

    env_id = ENV_ID
    split_dir = Path(__file__).parent / "splits"
    templates = TEMPLATES
    unseen_templates = [t.name for t in UNSEEN_TEMPLATES]
    what = "ToolUse"
    split_sizes = SPLIT_SIZES
    split_seed_base = SPLIT_SEED_BASE

    def __init__(self, templates: list[str] | None = None):
        self.train_templates = templates or [t.name for t in TRAIN_TEMPLATES]

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

    def solve(self, spec: TaskSpec) -> list[str]:
        _, goal = build_task(spec)
        return [json.dumps(c, ensure_ascii=False, sort_keys=True) for c in goal.plan]

    def describe(self) -> str:
        lines = [(type(self).__doc__ or "").strip(), "", "Training templates:"]
        lines += [f"- {t.name} (apps: {', '.join(t.apps)})" for t in TRAIN_TEMPLATES]
        return "\n".join(lines)


def write_splits(space: ToolUseTaskSpace | None = None) -> None:
    """Regenerate the shipped manifests: `python -m agentgym.envs.tools.tasks`."""
    (space or ToolUseTaskSpace()).write_splits()


if __name__ == "__main__":
    write_splits()
