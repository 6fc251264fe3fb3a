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

import re
from pathlib import Path
from typing import Any

from agentgym.policies.base import SamplingParams
from agentgym.rewards.append_log import AppendLog
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


def _stored_rubric(row) -> tuple[str, list[Criterion]] | None:
    """A rubric store line's (task id, criteria), or None when it is not one."""
    task_id, criteria = row["task_id"], row["criteria"]
    if not isinstance(task_id, str) or not isinstance(criteria, list):
        return None
    return task_id, [Criterion.from_dict(c) for c in criteria]


class RubricStore:
    """Rubrics by task id, optionally kept in a JSONL file of {task_id, criteria} across runs (an
    AppendLog: a line torn by a killed run is skipped, and its task's rubric asked for again)."""

    def __init__(self, path: str | Path | None = None):
        self.log = AppendLog(path, "rubric store", "rubrics", "give RubricStore a JSONL file of its own")
        self.path = self.log.path
        self.data: dict[str, list[Criterion]] = dict(self.log.read(_stored_rubric))

    def get(self, task_id: str) -> list[Criterion] | None:
        return self.data.get(task_id)

    def put(self, task_id: str, criteria: list[Criterion]) -> None:
        self.data[task_id] = criteria
        self.log.append({"task_id": task_id, "criteria": [c.to_dict() for c in criteria]})

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
