"""Rubrics written by a model from a task's instruction, stored with the task.

    store = RubricStore("runs/x/rubrics.jsonl")
    criteria = generate_rubric(policy, task_id, instruction, store)   # asked once per task, then read back
    rubric = Rubric([...fallback...], judge=judge, per_task=store.for_trajectory)

The model is asked for 3 to 6 lines `- [weight] criterion`; lines that do not parse are skipped, and
an answer with no usable line leaves the task without a rubric (the caller's fallback applies), as
does a weight that is not positive. The store is a JSONL of {task_id, criteria}: a rubric is part of
the task's record, keyed by the same content hash, and never regenerated once written.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from agentgym.policies.base import SamplingParams
from agentgym.rewards.rubric import Criterion
from agentgym.trajectory import Trajectory

SYSTEM = ("You write grading rubrics. Given a task for an assistant, list 3 to 6 checkable criteria a good "
          "result meets, one per line, as '- [weight] criterion', weight a number from 1 to 5 for how much "
          "it matters. No other text.")

_LINE = re.compile(r"^\s*(?:[-*]|\d+[.)])\s*\[\s*(\d+(?:\.\d+)?)\s*\]\s*(.+?)\s*$")


def parse_rubric(text: str) -> list[Criterion]:
    criteria = []
    for line in (text or "").splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        weight, description = float(m.group(1)), m.group(2)
        if weight > 0 and description:
            criteria.append(Criterion(f"c{len(criteria) + 1}", weight, description))
    return criteria


class RubricStore:
    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else None
        self.data: dict[str, list[Criterion]] = {}
        if self.path and self.path.exists():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    row = json.loads(line)
                    self.data[row["task_id"]] = [Criterion.from_dict(c) for c in row["criteria"]]

    def get(self, task_id: str) -> list[Criterion] | None:
        return self.data.get(task_id)

    def put(self, task_id: str, criteria: list[Criterion]) -> None:
        self.data[task_id] = criteria
        if self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps({"task_id": task_id, "criteria": [c.to_dict() for c in criteria]}) + "\n")

    def for_trajectory(self, traj: Trajectory) -> list[Criterion] | None:
        return self.get(traj.task_id)


def generate_rubrics(policy: Any, tasks: list[tuple[str, str]], store: RubricStore,
                     sampling: SamplingParams | None = None) -> dict[str, list[Criterion]]:
    """Rubrics for (task_id, instruction) pairs not in `store`, asked in one batch and stored."""
    todo = [(tid, text) for tid, text in tasks if store.get(tid) is None]
    if todo:
        prompts = [[{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"Task: {text}\n\nRubric:"}]
                   for _, text in todo]
        completions = policy.generate(prompts, sampling or SamplingParams(temperature=0.0, max_new_tokens=256))
        for (tid, _), c in zip(todo, completions):
            criteria = [] if getattr(c, "error", None) else parse_rubric(c.text)
            if criteria:
                store.put(tid, criteria)
    return {tid: store.get(tid) for tid, _ in tasks if store.get(tid)}
