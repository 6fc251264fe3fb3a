"""Issue 52, item 2: Briefing-v0 was solved by a constant report written without a tool call
(week_agenda 65/65, unread_digest 30/30) and keyword stuffing met every `mentions` criterion.
Points now come only from facts the agent must look up; length, clarity and "names no
distractor" are gates. The probes live in benchmarks/robustness/hostile_round4_graders.py."""

import sys
from pathlib import Path

import pytest

from agentgym.envs.briefing.tasks import TEMPLATES
from agentgym.rewards import Criterion, Rubric, make_reward
from agentgym.trajectory import Step, Trajectory

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.robustness import hostile_round4_graders as round4  # noqa: E402


@pytest.fixture(scope="module")
def scores():
    return round4.briefing_scores(per_template=2)


def test_no_constant_or_stuffed_report_passes_any_split_task(scores):
    assert {r["split"] for r in scores} == set(round4.BRIEFING_SPLITS)
    assert {r["template"] for r in scores} == set(TEMPLATES)
    passed = [r for r in scores if r["success"]]
    assert not passed, passed[:5]
    stuffed = [r["score"] for r in scores if r["constant"] == 1]
    assert stuffed and max(stuffed) == 0.0
    for template in TEMPLATES:  # a constant may guess a fact now and then, no more
        mine = [r["score"] for r in scores if r["template"] == template]
        assert sum(mine) / len(mine) < 0.2, template


def _answer(text):
    return Trajectory(task_id="t", group_id="g", steps=[Step(observation="o", anchor="a", text=text, action=text,
                                                             action_valid=True, reward=0.0)])


def test_a_gate_zeroes_the_rubric_whatever_else_it_met():
    """A Briefing rubric gave 0.83 with clarity judged 0: a gate multiplies instead of adding."""
    rubric = Rubric([Criterion("total", 2.0, "total", lambda t: True), Criterion("count", 1.0, "count", lambda t: True),
                     Criterion("clear", 1.0, "clear", lambda t: 0.0, gate=True)])
    assert rubric.score([_answer("x")])[0].score == 0.0
    half = Rubric([Criterion("total", 2.0, "total", lambda t: True), Criterion("count", 2.0, "count", lambda t: False),
                   Criterion("clear", 1.0, "clear", lambda t: 1.0, gate=True)])
    assert half.score([_answer("x")])[0].score == pytest.approx(0.5)


def test_declarative_contains_matches_whole_words_and_excludes_gates_stuffing():
    spec = {"kind": "rubric", "criteria": [
        {"name": "total", "weight": 2, "description": "states the total", "check": "contains:$84.20"},
        {"name": "not_other", "weight": 1, "description": "no other total", "check": "excludes:$91.00", "gate": True}]}
    reward = make_reward(spec)
    honest, stuffed, longer = (_answer("You spent $84.20."), _answer("$84.20 or $91.00 or $12.00"),
                               _answer("You spent $84.205 in all"))
    assert [v.score for v in reward.score([honest, stuffed, longer])] == [1.0, 0.0, 0.0]
