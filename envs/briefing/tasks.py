"""The task space of Briefing-v0: params {"template": name, "level": 1..3}; the seed generates the
world (the tool-use apps' world) and the template adds what the report must cover.

Splits: train and heldout from the training templates with disjoint seeds; heldout_unseen from a
template never trained on (unread_digest)."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

import numpy as np

from agentgym.envs.briefing.templates import TRAIN_TEMPLATES, UNSEEN_TEMPLATES, Briefing, Template
from agentgym.envs.tools.tasks import TemplateTaskSpace, check_template_level, setup_world
from agentgym.rewards.guards import final_answer
from agentgym.rewards.rubric import Criterion
from agentgym.tasks.spec import TaskSpec

ENV_ID = "agentgym/Briefing-v0"
TEMPLATES: dict[str, Template] = {t.name: t for t in TRAIN_TEMPLATES + UNSEEN_TEMPLATES}
TEMPLATE_LABEL = "briefing template"  # what an unknown template is called in its error
SPLIT_SIZES = {"train": 150, "heldout": 45, "heldout_unseen": 30}
SPLIT_SEED_BASE = {"train": 0, "heldout": 10_000_000, "heldout_unseen": 20_000_000}


def check_params(spec: TaskSpec) -> tuple[Template, int]:
    """The template and level of a Briefing spec; ValueError with a clear message when they are wrong."""
    return check_template_level(spec, TEMPLATES, TEMPLATE_LABEL)


@lru_cache(maxsize=256)
def _build(task_json: str) -> tuple[str, dict, Briefing]:
    return setup_world(TaskSpec.from_dict(json.loads(task_json)), TEMPLATES, TEMPLATE_LABEL)


def load_briefing(spec: TaskSpec) -> tuple[dict, dict, Briefing]:
    """(a fresh copy of the initial state, the shared read-only initial state, the briefing)."""
    state_json, initial, briefing = _build(json.dumps(spec.to_dict(with_id=False), sort_keys=True))
    return json.loads(state_json), initial, briefing


class BriefingTaskSpace(TemplateTaskSpace):
    """Written reports over a user's apps, e.g. "Write me a short brief before my meeting with Dana
    Ortiz: her company, phone and the subject of her last email". Read the apps, then finish with
    the report as the answer. Graded by a rubric: facts mentioned, distractors left out, a length
    bound (checked by code) and clarity (for a judge). Params: {"template": meeting_brief |
    week_agenda | spending_summary, "level": 1..3}."""

    env_id = ENV_ID
    split_dir = Path(__file__).parent / "splits"
    templates = TEMPLATES
    train_templates = [t.name for t in TRAIN_TEMPLATES]
    unseen_templates = [t.name for t in UNSEEN_TEMPLATES]
    what = "Briefing"
    template_label = TEMPLATE_LABEL
    split_sizes = SPLIT_SIZES
    split_seed_base = SPLIT_SEED_BASE

    def mutate(self, spec: TaskSpec, rng: np.random.Generator) -> TaskSpec:
        template, level = check_params(spec)
        return TaskSpec(self.env_id, {"template": template.name, "level": level}, seed=int(rng.integers(0, 2**31 - 1)))

    def solve(self, spec: TaskSpec) -> list[str]:
        _, _, briefing = load_briefing(spec)
        return [json.dumps(c, ensure_ascii=False, sort_keys=True) for c in briefing.goal.plan]

    def rubric(self, spec: TaskSpec) -> list[Criterion]:
        """The task's rubric over episodes: the code-checked criteria read the report the episode
        finished with (rewards.final_answer); the judge-only ones have no check."""
        return [replace(c, check=None if c.check is None else (lambda t, f=c.check: f(final_answer(t))))
                for c in load_briefing(spec)[2].criteria]


def write_splits(space: BriefingTaskSpace | None = None) -> None:
    """Regenerate the shipped manifests: `python -m agentgym.envs.briefing.tasks`."""
    (space or BriefingTaskSpace()).write_splits()


if __name__ == "__main__":
    write_splits()
