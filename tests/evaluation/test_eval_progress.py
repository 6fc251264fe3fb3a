"""Issue 39, item 8: evaluation's progress counts turns. Its episodes of a batch often end together
on the last turn (every one at the step limit), so a count of episodes read "0/300 episodes (0%)
... eta ?" for the whole batch; in logs a line came once a minute."""

import io
import re

from agentgym import progress
from agentgym.evaluation.evaluate import evaluate
from agentgym.policies.base import Completion

LINE = re.compile(r"^eval heldout (?P<done>\d+)/(?P<total>\d+) (?P<unit>\w+) \(\d+%\)  elapsed [\d:]+  eta (?P<eta>[\d:?]+)"
                  r"  turn (?P<turn>\d+), (?P<episodes>\d+)/(?P<of>\d+) episodes$")


class LooksAround:
    """Always a valid action that solves nothing: every episode runs to the step limit."""

    def generate(self, prompts, sampling=None, contexts=None):
        return [Completion(text="look") for _ in prompts]


def test_eval_progress_moves_while_episodes_that_end_together_are_played(monkeypatch):
    clock = [0.0]

    def tick():
        clock[0] += 4.0  # a turn of a loaded machine: a plain line about every 15 s
        return clock[0]

    monkeypatch.setattr(progress.time, "monotonic", tick)
    out = io.StringIO()
    with progress.session(stream=out, mode="plain"):
        result = evaluate("agentgym/Household-v0", LooksAround(), split="heldout", limit=6, episodes_per_task=2,
                          env_kwargs={"max_episode_steps": 8}, chat={"parser": "raw"}, max_batch_episodes=8)
    assert result.overall.episodes == 12
    got = [LINE.match(line) for line in out.getvalue().splitlines() if line]
    assert got and all(got), out.getvalue()
    assert all(m["unit"] == "turns" for m in got)
    # 12 episodes x 8 turns in two batches (8 + 4 episodes), all ending on their last turn
    mid = [m for m in got if int(m["episodes"]) == 0]
    assert len(mid) >= 2, out.getvalue()  # lines come while the first batch plays, not once a minute
    assert int(mid[-1]["done"]) > 0 and mid[-1]["eta"] != "?" and int(mid[-1]["total"]) == 96, out.getvalue()
    assert got[-1]["done"] == got[-1]["total"] == "96" and got[-1]["episodes"] == "12"
