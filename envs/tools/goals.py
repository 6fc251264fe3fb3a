"""Goals and their state-based grading.

A task template turns a generated world into a `Goal`: the instruction, the oracle's tool
calls, the required state checks and a rule saying which records the task may touch.
Grading compares the final state with the initial one, as AppWorld's tests do:

* required checks: each is a (label, passed) pair over the final state (and the answer given to
  `finish`); the score is the fraction that pass;
* gates (optional): constraints such as "names no distractor" or a length bound. They earn
  nothing when met (a report that says nothing meets them all) and any one that fails sets the
  score to 0 (a report that lists every candidate cannot buy the facts it stuffed in);
* collateral damage: every record added, removed or changed (ignoring benign fields such as an
  email's read flag) must be one the goal permits. Any other change sets the score to 0,
  because an agent that deletes a stranger's contact while doing its errand has not done it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from agentgym.envs.tools.state import COLLECTIONS, Change, diff

Check = tuple[str, bool]


@dataclass
class Goal:
    instruction: str
    plan: list[dict]  # oracle tool calls, {"name": ..., "arguments": {...}}, ending with finish
    checks: Callable[[dict, dict, str | None], list[Check]]  # (initial, final, answer) -> checks
    permits: Callable[[Change], bool] = lambda change: False
    gates: Callable[[dict, dict, str | None], list[Check]] | None = None  # (initial, final, answer) -> checks


@dataclass
class Grade:
    score: float
    success: bool
    progress: float  # fraction of checks passing, ignoring collateral damage
    failed: list[str] = field(default_factory=list)
    collateral: list[str] = field(default_factory=list)


def grade(goal: Goal, initial: dict, final: dict, answer: str | None, touched=COLLECTIONS) -> Grade:
    """touched: the collections that may differ from the initial state (all by default; the env
    passes those its tools wrote this episode)."""
    checks = goal.checks(initial, final, answer)
    passed = sum(ok for _, ok in checks)
    fraction = passed / len(checks) if checks else 1.0
    gates = goal.gates(initial, final, answer) if goal.gates is not None else []
    collateral = [str(c) for c in diff(initial, final, touched) if not goal.permits(c)]
    score = 0.0 if collateral or not all(ok for _, ok in gates) else fraction
    return Grade(score=score, success=score == 1.0, progress=fraction,
                 failed=[label for label, ok in gates + checks if not ok], collateral=collateral)


# --- helpers shared by templates -------------------------------------------------------------------
def call(tool_name: str, /, **arguments) -> dict:
    # positional-only, so that tools with a `name` argument (add_contact) can be called
    return {"name": tool_name, "arguments": arguments}


def new_records(initial: dict, final: dict, collection: str) -> list[dict]:
    return [r for key, r in final[collection].items() if key not in initial[collection]]


def new_sent(initial: dict, final: dict) -> list[dict]:
    return [m for m in new_records(initial, final, "emails") if m["folder"] == "sent"]


def addressed_to(message: dict, email: str) -> bool:
    return email.lower() in (a.lower() for a in message["to"])


def same(a: str, b: str) -> bool:
    return " ".join(a.lower().split()) == " ".join(b.lower().split())


def parse_amount(answer: str | None) -> float | None:
    """Dollar amount in a free-text answer: '$1,234.50', '1234.5 dollars' -> 1234.5."""
    if not answer:
        return None
    import re

    match = re.search(r"-?\d[\d,]*(?:\.\d+)?", answer.replace("$", ""))
    if not match:
        return None
    try:
        return float(match.group(0).replace(",", ""))
    except ValueError:
        return None
