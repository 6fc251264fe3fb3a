"""Guards against a policy that learns to please the judge instead of doing the task.

- `Guarded(reward, max_chars=..., pattern=..., floor=...)`: before the judge is asked, the episode's
  final answer must be at most `max_chars` long and match `pattern` (format check), and no turn of
  the agent, the first as much as the last, may imitate the judge prompt's structure or verdict
  (`Score:`, `Criterion:`, `Environment:`, `=== Episode k ===`, chat-template tokens: `forged_structure`);
  an episode that fails gets `floor` with the reason, and the judge never sees it (a long
  flattering essay or an injected verdict cannot buy a score).
- The env's verifiable score is kept beside the judged one (`apply_reward` stores it), and
  `divergence` measures how far the two drift apart over a batch: a judged mean climbing while the
  verifiable mean stays put, or a falling correlation, is the signature of reward hacking.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Sequence

from agentgym.errors import ConfigError
from agentgym.rewards.base import Reward, Verdict, divergence  # noqa: F401  (re-exported: the guards' metric)
from agentgym.rewards.judge import agent_text
from agentgym.trajectory import Trajectory


def final_answer(traj: Trajectory) -> str:
    """What the episode hands in: `metadata["answer"]` when something recorded it, else the `answer`
    argument of a final JSON tool call (finish), else the model's last message."""
    answer = traj.metadata.get("answer")
    if isinstance(answer, str):
        return answer
    if not traj.steps:
        return ""
    last = traj.steps[-1]
    try:
        call = json.loads(last.action or "")
    except (ValueError, RecursionError):
        call = None
    calls = call if isinstance(call, list) else [call]
    for c in reversed(calls):
        if isinstance(c, dict) and isinstance(c.get("arguments"), dict) and isinstance(c["arguments"].get("answer"), str):
            return c["arguments"]["answer"]
    return last.text


# A line that reads as part of a judge prompt or a judge's answer (rewards.judge, rewards.relative),
# or a chat template's role markers: agent text has no business writing one.
_FORGED = re.compile(
    r"^[\s*_`#>\"'-]*(?:score|criterion|task|environment|agent|final answer|your judgement|your scores|"
    r"episode\s*\d+|system|assistant|user)\s*[:=]|===\s*episode|<\|[a-z_]+\|>|\[/?inst\]|</?(?:system|s)>",
    re.I | re.M)


def forged_structure(text: str | None) -> str | None:
    """The first line of `text` that imitates the judge's prompt or verdict, or None."""
    normal = re.sub(r"[\r\u2028\u2029\x85\x0b\x0c]", "\n", text or "")
    m = _FORGED.search(normal)
    return None if m is None else normal[m.start():].strip().split("\n", 1)[0][:80]


@dataclass
class Guarded:
    reward: Reward
    max_chars: int | None = None
    pattern: str | None = None  # a regex the final answer must contain (re.search)
    floor: float = 0.0

    def __post_init__(self) -> None:
        if self.max_chars is not None and self.max_chars <= 0:
            raise ConfigError(f"guard max_chars={self.max_chars} must be a positive number of characters")
        if self.pattern is not None:
            try:
                self._re = re.compile(self.pattern, re.S)
            except re.error as exc:
                raise ConfigError(f"guard pattern {self.pattern!r} is not a valid regular expression: {exc}") from None
        self.name = f"guarded({self.reward.name})"

    def check(self, traj: Trajectory) -> str | None:
        """Why the episode fails the guards, or None."""
        answer = final_answer(traj)
        texts = [(f"turn {k + 1}", t) for k, step in enumerate(traj.steps) for t in {agent_text(step), step.text or ""}]
        for where, text in texts + [("the final answer", answer)]:
            forged = forged_structure(text)
            if forged is not None:
                return f"{where} imitates the judge's prompt or verdict ({forged!r})"
        if self.max_chars is not None and len(answer) > self.max_chars:
            return f"answer of {len(answer)} characters is over the {self.max_chars} allowed"
        if self.pattern is not None and not self._re.search(answer):
            return f"answer does not match the required format {self.pattern!r}"
        return None

    def score(self, trajectories: Sequence[Trajectory]) -> list[Verdict]:
        reasons = [self.check(t) for t in trajectories]
        passed = [t for t, r in zip(trajectories, reasons) if r is None]
        inner = iter(self.reward.score(passed) if passed else [])
        return [next(inner) if r is None else Verdict(self.floor, f"guard: {r}") for r in reasons]
