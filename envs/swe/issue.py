"""Issue text written from the failing behaviour, the way a user would report it.

Only what a user could observe goes in: which behaviours broke (the failing tests' docstrings
and names) and what went wrong (the assertion or exception message). Nothing is taken from
the injected diff: the file, line and operator stay hidden.
"""

from __future__ import annotations

import re

OPENINGS = (
    "Something broke in `{repo}`.",
    "`{repo}` has started misbehaving.",
    "I think there is a regression in `{repo}`.",
    "A bug report for `{repo}`.",
)


def _behaviour(nodeid: str, doc: str) -> str:
    if doc:
        return doc.rstrip(".")
    name = nodeid.rsplit("::", 1)[-1]
    words = re.sub(r"^test_?", "", name).replace("_", " ")
    return f"the behaviour tested as '{words}'"


def _symptom(message: str) -> str:
    lines = [ln.strip() for ln in message.strip().splitlines()
             if ln.strip() and not ln.strip().startswith(("Use -v", "Full diff"))]
    if not lines:
        return ""
    text = " / ".join(lines[:3])
    return text if len(text) <= 300 else text[:297] + "..."


def write_issue(repo: str, failing: list[str], docs: dict[str, str], messages: dict[str, str], seed: int) -> str:
    """`failing` lists nodeids in a stable order; up to three are described."""
    opening = OPENINGS[seed % len(OPENINGS)].format(repo=repo)
    items = []
    for nodeid in failing[:3]:
        behaviour = _behaviour(nodeid, docs.get(nodeid, ""))
        symptom = _symptom(messages.get(nodeid, ""))
        line = f"- Expected: {behaviour}."
        if symptom:
            line += f" Instead I get: {symptom}"
        items.append(line)
    more = len(failing) - len(items)
    tail = f"\n({more} more related checks fail as well.)" if more > 0 else ""
    return (
        f"{opening} These no longer work:\n" + "\n".join(items) + tail +
        "\n\nPlease fix the library code so that this works again (the tests are fine)."
    )
