"""Briefing-v0: the tool-use apps, read-only, and a written report as the result.

The agent reads the user's apps with the same JSON tools as ToolUse-v0 and ends with
`finish(answer=<the report>)`. A report has no single right wording, so a rubric grades it
(BriefingTaskSpace.rubric): the env's own score is the fraction of the rubric's code-checked
criteria the report meets (facts mentioned, distractors left out, length), and any change to the
apps is collateral damage (score 0). The criteria that need a reader (clarity) are left to a judge:
train with `agentgym.rewards.Rubric(..., judge=..., per_task=...)` over `rubric(spec)`.
"""

from __future__ import annotations

from agentgym.envs.briefing.tasks import BriefingTaskSpace, load_briefing
from agentgym.envs.tools.env import APPS, ToolUseEnv
from agentgym.envs.tools.state import PARTS, part_hash, weekday
from agentgym.tasks.spec import TaskSpec


class BriefingEnv(ToolUseEnv):
    task_space = BriefingTaskSpace()
    rules = ToolUseEnv.rules + "\nThis task asks for a written report: put it in finish's `answer`."

    def _reset(self, task: TaskSpec) -> tuple[str, dict]:
        self.state, self._initial, briefing = load_briefing(task)
        self._goal = briefing.goal
        self._parts = {name: part_hash(self.state, name) for name in PARTS}
        self._touched, self._grade = set(), None
        self._finished = False
        user, today = self.state["user"], self.state["today"]
        obs = (f"Today is {weekday(today)} {today}. You are {user['name']} <{user['email']}>. "
               f"Your apps: {', '.join(APPS)}. Look up what the report needs, then call finish with the report.")
        return obs, self._info(action_valid=True, final=False)
