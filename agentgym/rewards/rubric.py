"""Rubrics: weighted criteria, each checked by a function of the episode or by a judge model.

    rubric = Rubric([
        Criterion("answers", 2.0, "States the total spent on groceries.", check=lambda t: "$84.20" in answer(t)),
        Criterion("tone", 1.0, "Reads as a short note to the user."),  # no check: the judge decides
    ], judge=JudgeReward(policy))
    score = prod_g s_g * sum_i w_i s_i / sum_i w_i,  s in [0, 1]

A criterion with `gate=True` (g above) is a constraint, not a point: it earns nothing when met and
multiplies the score, so a report judged unclear (clarity 0) or one naming a distractor scores 0
whatever else it matched. Criteria a do-nothing answer meets (length bounds, distractors left
out, tone) belong there; points are for facts the episode had to find. Weights must be positive
(a gate's weight is unused). A criterion left to the judge that gets no verdict makes the whole
episode "no verdict" (a partial sum over the criteria that happened to parse would be a different
rubric for each episode).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from agentgym.errors import ConfigError
from agentgym.rewards.base import Verdict, as_verdict
from agentgym.trajectory import Trajectory


@dataclass
class Criterion:
    name: str
    weight: float
    description: str
    check: Callable[[Trajectory], Any] | None = None  # -> bool | float in [0, 1] | None (no verdict)
    gate: bool = False  # a constraint: multiplies the score instead of adding to it

    def to_dict(self) -> dict:
        return {"name": self.name, "weight": self.weight, "description": self.description,
                **({"gate": True} if self.gate else {})}

    @classmethod
    def from_dict(cls, d: dict) -> "Criterion":
        return cls(str(d["name"]), float(d["weight"]), str(d["description"]), gate=d.get("gate") is True)


def mentions(text: str | None, fact: str) -> bool:
    """`fact` occurs in `text` as whole words, ignoring case and spacing: "$84.20" is not in
    "$84.205", "Lunch" is not in "Lunches" (a check that matched inside longer tokens would pay
    for strings that merely contain the fact)."""
    norm = lambda s: " ".join(s.lower().split())  # noqa: E731
    fact = norm(fact)
    if not fact:
        return False
    pattern = ("(?<!\\w)" if fact[0].isalnum() or fact[0] == "_" else "") + re.escape(fact) + \
        ("(?!\\w)" if fact[-1].isalnum() or fact[-1] == "_" else "")
    return re.search(pattern, norm(text or "")) is not None


def check_weights(criteria: Sequence[Criterion]) -> None:
    if not criteria:
        raise ConfigError("a rubric needs at least one criterion (name, weight, description)")
    for c in criteria:
        if not (isinstance(c.weight, (int, float)) and math.isfinite(c.weight) and c.weight > 0):
            raise ConfigError(f"rubric criterion {c.name!r} has weight {c.weight}: weights must be positive numbers")
    names = [c.name for c in criteria]
    if len(set(names)) != len(names):
        raise ConfigError(f"rubric criteria names repeat ({', '.join(names)}): give each criterion its own name")


@dataclass
class Rubric:
    criteria: list[Criterion]
    judge: Any = None  # a JudgeReward for the criteria without a check
    name: str = "rubric"
    per_task: Callable[[Trajectory], list[Criterion] | None] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        check_weights(self.criteria)
        if self.judge is None and any(c.check is None for c in self.criteria):
            missing = ", ".join(c.name for c in self.criteria if c.check is None)
            raise ConfigError(f"rubric criteria {missing} have no check function: give the rubric a judge")

    def criteria_for(self, traj: Trajectory) -> list[Criterion]:
        """The rubric's criteria, or the task's own (e.g. a generated rubric stored with the task)."""
        own = self.per_task(traj) if self.per_task else None
        if own:
            check_weights(own)
            return own
        return self.criteria

    def score(self, trajectories: Sequence[Trajectory]) -> list[Verdict]:
        per_traj = [self.criteria_for(t) for t in trajectories]
        # every (episode, criterion) the judge must answer, asked in one batch
        asks = [(i, c) for i, crit in enumerate(per_traj) for c in crit if c.check is None]
        if asks and self.judge is None:
            raise ConfigError("a task's rubric has criteria without a check function: give the rubric a judge")
        judged = self.judge.judge([self.judge.prompt(trajectories[i], c.description) for i, c in asks]) if asks else []
        answers = {(i, c.name): v for (i, c), v in zip(asks, judged)}
        out = []
        for i, (t, crit) in enumerate(zip(trajectories, per_traj)):
            total = weights = 0.0
            gated = 1.0
            notes, missing = [], None
            for c in crit:
                v = answers[(i, c.name)] if c.check is None else as_verdict(c.check(t))
                if not v.has_verdict:
                    missing = f"no verdict on criterion {c.name!r}: {v.rationale}"
                    break
                s = min(max(float(v.score), 0.0), 1.0)
                if c.gate:
                    gated *= s
                else:
                    total += c.weight * s
                    weights += c.weight
                notes.append(f"{c.name}={s:.2f}" + (" (gate)" if c.gate else ""))
            points = total / weights if weights else 1.0
            out.append(Verdict(None, missing) if missing else Verdict(gated * points, ", ".join(notes)))
        return out
