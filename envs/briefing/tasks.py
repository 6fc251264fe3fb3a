"""The task space of Briefing-v0: params {"template": name, "level": 1..3}; the seed generates the
world (the tool-use apps' world) and the template adds what the report must cover.

Splits: train and heldout from the training templates with disjoint seeds; heldout_unseen from a
template never trained on (unread_digest)."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from agentgym.envs.briefing.templates import TRAIN_TEMPLATES, UNSEEN_TEMPLATES, Briefing, Template
from agentgym.envs.tools.state import World
from agentgym.rewards.guards import final_answer
from agentgym.rewards.rubric import Criterion
from agentgym.tasks.space import TaskSpace, check_schema
from agentgym.tasks.spec import TaskSpec
from agentgym.tasks.splits import save_split

ENV_ID = "agentgym/Briefing-v0"
TEMPLATES: dict[str, Template] = {t.name: t for t in TRAIN_TEMPLATES + UNSEEN_TEMPLATES}
LEVELS = (1, 2, 3)
SPLIT_SIZES = {"train": 150, "heldout": 45, "heldout_unseen": 30}
SPLIT_SEED_BASE = {"train": 0, "heldout": 10_000_000, "heldout_unseen": 20_000_000}


def check_params(spec: TaskSpec) -> tuple[Template, int]:
    name, level = spec.params.get("template"), spec.params.get("level", 1)
    if name not in TEMPLATES:
        raise ValueError(f"unknown briefing template {name!r}; choose one of {', '.join(TEMPLATES)}")
    if level not in LEVELS or isinstance(level, bool):
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    return TEMPLATES[name], level


@lru_cache(maxsize=256)
def _build(task_json: str) -> tuple[str, dict, Briefing]:
    spec = TaskSpec.from_dict(json.loads(task_json))
    template, level = check_params(spec)
    world = World(np.random.default_rng(spec.seed))
    briefing = template.setup(world, level)
    return json.dumps(world.state), world.state, briefing


def load_briefing(spec: TaskSpec) -> tuple[dict, dict, Briefing]:
    """(a fresh copy of the initial state, the shared read-only initial state, the briefing)."""
    state_json, initial, briefing = _build(json.dumps(spec.to_dict(with_id=False), sort_keys=True))
    return json.loads(state_json), initial, briefing


class BriefingTaskSpace(TaskSpace):
    """Written reports over a user's apps, e.g. "Write me a short brief before my meeting with Dana
    Ortiz: her company, phone and the subject of her last email". Read the apps, then finish with
    the report as the answer. Graded by a rubric: facts mentioned, distractors left out, a length
    bound (checked by code) and clarity (for a judge). Params: {"template": meeting_brief |
    week_agenda | spending_summary, "level": 1..3}."""

    env_id = ENV_ID
    split_dir = Path(__file__).parent / "splits"

    def sample(self, rng: np.random.Generator, template: str | None = None, level: int | None = None,
               **_: Any) -> TaskSpec:
        names = [t.name for t in TRAIN_TEMPLATES]
        name = template or names[int(rng.integers(len(names)))]
        lvl = int(level) if level is not None else int(rng.choice(LEVELS))
        spec = TaskSpec(self.env_id, {"template": name, "level": lvl}, seed=int(rng.integers(0, 2**31 - 1)))
        check_params(spec)
        return spec

    def mutate(self, spec: TaskSpec, rng: np.random.Generator) -> TaskSpec:
        template, level = check_params(spec)
        return TaskSpec(self.env_id, {"template": template.name, "level": level}, seed=int(rng.integers(0, 2**31 - 1)))

    def check_params(self, params: dict) -> dict:
        p = check_schema(params, {"template": str}, {"level": int}, what="Briefing")
        template, level = check_params(TaskSpec(self.env_id, p))
        return {"template": template.name, "level": level}

    def reserved(self, spec: TaskSpec) -> bool:
        return spec.params.get("template") in {t.name for t in UNSEEN_TEMPLATES}

    def solve(self, spec: TaskSpec) -> list[str]:
        _, _, briefing = load_briefing(spec)
        return [json.dumps(c, ensure_ascii=False, sort_keys=True) for c in briefing.goal.plan]

    def rubric(self, spec: TaskSpec) -> list[Criterion]:
        """The task's rubric over episodes: the code-checked criteria read the report the episode
        finished with (rewards.final_answer); the judge-only ones have no check."""
        return [replace(c, check=None if c.check is None else (lambda t, f=c.check: f(final_answer(t))))
                for c in load_briefing(spec)[2].criteria]

    def category(self, spec: TaskSpec) -> str:
        template, level = check_params(spec)
        return f"{template.name}/L{level}"

    def build_splits(self) -> dict[str, list[TaskSpec]]:
        train = [t.name for t in TRAIN_TEMPLATES]
        pools = {"train": train, "heldout": train, "heldout_unseen": [t.name for t in UNSEEN_TEMPLATES]}
        return {name: [TaskSpec(self.env_id, {"template": pools[name][i % len(pools[name])],
                                              "level": LEVELS[(i // len(pools[name])) % len(LEVELS)]},
                                seed=SPLIT_SEED_BASE[name] + i) for i in range(size)]
                for name, size in SPLIT_SIZES.items()}


def write_splits(space: BriefingTaskSpace | None = None) -> None:
    """Regenerate the shipped manifests: `python -m agentgym.envs.briefing.tasks`."""

    space = space or BriefingTaskSpace()
    for name, tasks in space.build_splits().items():
        save_split(Path(space.split_dir) / f"{name}.jsonl", tasks)


if __name__ == "__main__":
    write_splits()
