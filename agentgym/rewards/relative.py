"""A relative judge (as ART's RULER): the episodes of one group are shown together and the judge
scores each against the others, in one call per group. Group-relative estimators only need the
scores' order and spread inside a group, which a side-by-side reading gives more reliably than
separate absolute scores.

The judge answers one line per episode, `Episode <k>: <score from 0 to 1>`. An episode whose line is
missing or unreadable gets no verdict (left out of its group's statistics); the others keep theirs.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Sequence

from agentgym.rewards.base import Verdict
from agentgym.rewards.judge import QUOTED_DATA, JudgeReward, quoted, render_episode, verdict_lines
from agentgym.trajectory import Trajectory

RELATIVE_SYSTEM = ("You compare several attempts at the same task. Score each attempt from 0 to 1 for how well "
                   "it meets the criterion, relative to the others: the best gets the highest score. "
                   + QUOTED_DATA + " Give a short reason, then end with one line per attempt, exactly "
                   "'Episode <k>: <score>'.")

_LINE = re.compile(r"[*_`\s]*episode\s*(\d+)\s*[:=]\s*(.*?)[*_`\s]*", re.I)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def parse_group_scores(text: str, n: int) -> list[Verdict]:
    """The scores in the block of `Episode <k>: <score>` lines that ends the answer; lines before it
    (the judge's reasons, which may quote an episode's text) are never read. An episode whose line
    is missing, not a number or given twice in the block gets no verdict."""
    block = []
    for line in reversed(verdict_lines(text)):
        m = _LINE.fullmatch(line)
        if m is None:
            break
        block.append((int(m.group(1)), m.group(2)))
    given: dict[int, list[str]] = {}
    for k, value in block:
        given.setdefault(k, []).append(value)
    found = {k: float(v[0]) for k, v in given.items() if len(v) == 1 and _NUMBER.fullmatch(v[0])}
    out = []
    for k in range(1, n + 1):
        if k not in found:
            why = "given twice" if len(given.get(k, [])) > 1 else "not a number" if k in given else "missing"
            out.append(Verdict(None, f"no verdict: the 'Episode {k}:' line in the judge's answer is {why}"))
        elif not 0.0 <= found[k] <= 1.0:
            out.append(Verdict(None, f"no verdict: episode {k} scored {found[k]}, outside [0, 1]"))
        else:
            out.append(Verdict(found[k], "relative to its group"))
    return out


def _ends_with_scores(text: str) -> bool:
    lines = verdict_lines(text)
    return bool(lines) and _LINE.fullmatch(lines[-1]) is not None


@dataclass
class RelativeJudge:
    judge: JudgeReward  # its policy, sampling, cache, timeout and criterion are used
    name: str = "relative_judge"

    def prompt(self, group: Sequence[Trajectory]) -> list[dict]:
        parts = [f"Task: {quoted(group[0].instruction, 2000)}", f"Criterion: {self.judge.criterion}"]
        for k, t in enumerate(group, 1):
            episode = render_episode(t, self.judge.max_chars_per_turn).split("\n", 1)[-1]  # the task once, above
            parts.append(f"=== Episode {k} ===\n{episode}")
        return [{"role": "system", "content": RELATIVE_SYSTEM},
                {"role": "user", "content": "\n\n".join(parts) + "\n\nYour scores:"}]

    def score(self, trajectories: Sequence[Trajectory]) -> list[Verdict]:
        groups: dict[str, list[int]] = defaultdict(list)
        for i, t in enumerate(trajectories):
            groups[t.group_id].append(i)
        members = list(groups.values())
        prompts = [self.prompt([trajectories[i] for i in idx]) for idx in members]
        # the judge's machinery (cache under this judge's own name, batching, timeout), another parser
        texts = self.judge.answers(prompts, readable=_ends_with_scores,
                                   cache_name=self.name)
        out: list[Verdict | None] = [None] * len(trajectories)
        for idx, (text, why) in zip(members, texts):
            verdicts = parse_group_scores(text, len(idx)) if text is not None else [Verdict(None, why)] * len(idx)
            for i, v in zip(idx, verdicts):
                out[i] = v
                self.judge.stats.no_verdict += not v.has_verdict
        return out  # type: ignore[return-value]
