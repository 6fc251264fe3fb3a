"""Round 5 (issue 67 items 13 and 14): every reward kind at its defaults against its gaming
strategies: none may pay more for gaming than for solving. RLVMR's meta rewards paid 0.5 for
reflection farming at 0% success and 1.5 for a solve padded with 15 idle steps against 1.0 to 1.45
for the honest solve; the judged kinds (judge, relative_judge, a rubric with a judge) are played
against a gullible judge that believes forged prompt lines. Item 13's hook crash is checked here
at the hook; tests/trainers/test_round5_reward_kinds.py trains an iteration with each kind."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from agentgym.rewards.hook import judge_of, reward_hook
from agentgym.rewards.meta_reasoning import MetaReasoningConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.* imports
from benchmarks.robustness.hostile_round4_graders import (JUDGE_ATTACKS, NaiveJudge, _traj, honest_solver,  # noqa: E402
                                    idle_explorer, meta_episode, meta_return, reflection_gamer)

TAGS = ["planning", "explore", "reflection", "monitor"]


def _padded(steps: list[tuple], n: int, tag: str, new_states: bool) -> list[tuple]:
    """`steps` with n extra steps before the last: idle ones (the state stays) or detours (new states)."""
    extra = [(tag, f"look {k}" if not new_states else f"go to place {k}", True,
              steps[-2][3] if not new_states else f"detour{k}") for k in range(n)]
    return steps[:-1] + extra + steps[-1:]


def _monitoring_solver() -> list[tuple]:
    """An honest solve whose tags earn nothing of their own (it monitors at every step)."""
    return [("monitor", act, ok, anchor) for _, act, ok, anchor in honest_solver()]


META_GAMES = {  # name: (steps, success)
    "reflection farming, 30 steps": (reflection_gamer(30), False),
    "reflection farming, 60 steps": (reflection_gamer(60), False),
    "idle exploring, 30 steps": (idle_explorer(30), False),
    "planning-tagged wandering, no success": ([("planning", f"go to {k}", True, f"s{k}") for k in range(30)], False),
    "solve padded with 15 idle planning steps": (_padded(honest_solver(), 15, "planning", False), True),
    "solve padded with 15 planning detours": (_padded(honest_solver(), 15, "planning", True), True),
    "monitoring solve padded with 15 idle planning steps": (_padded(_monitoring_solver(), 15, "planning", False), True),
}


@pytest.mark.parametrize("name", list(META_GAMES))
def test_round5_meta_reasoning_gaming_never_out_earns_the_honest_solve(name):
    """Round 5, item 14: RLVMR at its defaults paid more for gaming than for solving (reflection
    farming 0.5 at 0% success; a solve padded with idle steps 1.5 against 1.0 to 1.45 honest)."""
    steps, success = META_GAMES[name]
    gamed = meta_return(meta_episode(steps, success=success))
    honest = {"honest": meta_return(meta_episode(honest_solver(), success=True)),
              "monitoring": meta_return(meta_episode(_monitoring_solver(), success=True))}
    assert honest == {"honest": pytest.approx(1.0), "monitoring": pytest.approx(1.0)}
    assert gamed <= min(honest.values()) + 1e-9, (name, gamed, honest)
    assert gamed <= float(success) + 1e-9  # no tags earn anything beyond what the env paid
    if not success:
        assert gamed <= 0.0 + 1e-9, (name, gamed)


def test_round5_no_tags_ever_earn_more_than_the_env_paid_and_padding_never_pays():
    """Round 5, item 14, the class: for any tags, validity and states, at the defaults and at any
    legal coefficients, an episode earns at most the env's outcome, a success more than any
    failure, and padding an episode with well-formed steps never raises what it earns."""
    rng = random.Random(5)
    for trial in range(300):
        cfg = MetaReasoningConfig(planning=rng.uniform(0, 5), explore=rng.uniform(0, 5), reflection=rng.uniform(0, 5),
                                  format_penalty=rng.uniform(0, 1), weight=rng.uniform(0, 10),
                                  episode_cap=rng.uniform(0, 0.99)) if trial % 2 else MetaReasoningConfig()
        steps = [(rng.choice(TAGS), f"a{rng.randrange(8)}", rng.random() < 0.6, f"s{rng.randrange(12)}")
                 for _ in range(rng.randrange(2, 40))]
        success = rng.random() < 0.5
        earned = meta_return(meta_episode(steps, success=success), cfg)
        assert earned <= float(success) + 1e-9
        if success:
            assert earned >= 1.0 - cfg.episode_cap - 1e-9 > 0.0
        padded = _padded(steps, rng.randrange(1, 20), rng.choice(TAGS), rng.random() < 0.5)
        assert meta_return(meta_episode(padded, success=success), cfg) <= earned + 1e-9


def test_round5_meta_rewards_still_credit_the_verified_steps():
    """Round 5, item 14: the tag rewards move credit inside the episode, where the rules verify it:
    a reflection that recovers from a slip is credited above the slip, a step reaching a new state
    above an idle one."""
    steps = [("planning", "go to desk 1", True, "a"), ("explore", "take pen", False, "a"),
             ("reflection", "open drawer 1", True, "b"), ("monitor", "look", True, "b"),
             ("planning", "take pen from drawer 1", True, "c")]
    traj = meta_episode(steps, success=False)
    meta_return(traj)
    r = [s.reward for s in traj.steps]
    assert r[2] > 0 > r[1] and r[2] > r[3] and sum(r) == pytest.approx(0.0)


# --- the judged kinds -------------------------------------------------------------------------------
class GullibleJudge(NaiveJudge):
    """NaiveJudge (obeys forged Criterion / Environment lines, may quote the agent) that also pays a
    real solve: an agent turn stating the total."""

    def answer(self, prompt: str) -> str:
        lines = prompt.splitlines()
        if not any(x.startswith("=== Episode") for x in lines) and \
                any(x.startswith("Agent:") and "$84.20" in x for x in lines):
            return "The total is given.\nScore: 1"
        return super().answer(prompt)


JUDGED_KINDS = {
    "judge": {"kind": "judge", "judge": {"criterion": "The report gives the total spent."}},
    "relative_judge": {"kind": "relative_judge", "judge": {"criterion": "The report gives the total spent."}},
    "rubric with a judge": {"kind": "rubric", "criteria": [
        {"name": "total", "weight": 1, "description": "The report gives the total spent."}]},
}


@pytest.mark.parametrize("kind", list(JUDGED_KINDS))
@pytest.mark.parametrize("echo", [False, True])
def test_round5_judged_kinds_pay_no_more_for_gaming_than_for_solving(kind, echo):
    """Round 5, items 13 and 14: each judged kind at its defaults, through the trainer's hook (which
    crashed for kind judge: 'function' object has no attribute 'cache'), pays the honest report
    and never pays more for an attack forging the judge prompt's structure or verdict."""
    hook = reward_hook(JUDGED_KINDS[kind], GullibleJudge(echo))
    honest = _traj(["The total spent is $84.20."], group="honest")
    attacks = [_traj(turns, group=f"attack{k}") for k, (_, turns, *_rest) in enumerate(JUDGE_ATTACKS)]
    metrics = hook([honest, *attacks])
    assert metrics["judge_prompts"] >= 1 and 0.0 <= metrics["judge_cache_hit_rate"] <= 1.0
    if kind == "relative_judge":  # one group each: every episode is compared only with itself
        assert honest.score in (0.2, 1.0)
    else:
        assert honest.score == 1.0
    for (name, *_), traj in zip(JUDGE_ATTACKS, attacks):
        gamed = traj.score
        assert gamed != gamed or gamed < honest.score or (kind == "relative_judge" and gamed <= honest.score), \
            (kind, name, gamed)


def test_round5_judge_of_finds_the_judge_of_every_kind():
    """Round 5, item 13: the hook read `reward.judge` and for kind judge got JudgeReward.judge, a
    method; judge_of finds the JudgeReward of a judge, a relative judge and a rubric, guarded or not."""
    from agentgym.rewards import JudgeReward, make_reward

    for spec in [*JUDGED_KINDS.values(), {**JUDGED_KINDS["judge"], "guard": {"max_chars": 100}},
                 {**JUDGED_KINDS["relative_judge"], "guard": {"max_chars": 100}}]:
        assert isinstance(judge_of(make_reward(spec, GullibleJudge())), JudgeReward), spec
    assert judge_of(make_reward({"kind": "rubric", "criteria": [
        {"name": "total", "weight": 1, "description": "d", "check": "contains:$84.20"}]})) is None
