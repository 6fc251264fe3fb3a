"""Briefing-v0: the oracle's reports meet every code-checked criterion on every split task; wrong,
padded or meddling reports lose exactly the criteria they break; the judged part of the rubric runs
end to end through agentgym.rewards with a scripted judge."""

import json

import gymnasium as gym
import pytest

import agentgym  # noqa: F401
from agentgym.envs.briefing.tasks import BriefingTaskSpace
from agentgym.policies.base import Completion
from agentgym.rewards import JudgeReward, Rubric, apply_reward
from agentgym.trajectory import Step, Trajectory
from agentgym.tasks.spec import TaskSpec
from agentgym.tasks import validation as _validation

SPACE = BriefingTaskSpace()


@pytest.fixture(scope="module")
def env():
    e = gym.make("agentgym/Briefing-v0")
    yield e
    e.close()


def run(env, spec, actions):
    env.reset(options={"task": spec})
    for a in actions:
        obs, r, term, trunc, info = env.step(a)
        if term or trunc:
            return obs, r, info
    return obs, r, info


def finish(answer):
    return json.dumps({"name": "finish", "arguments": {"answer": answer}})


def test_oracle_meets_the_rubric_on_every_split_task(env):
    sizes = {}
    for split in ("train", "heldout", "heldout_unseen"):
        tasks = SPACE.split(split)
        sizes[split] = len(tasks)
        for spec in tasks:
            _, reward, info = run(env, spec, SPACE.solve(spec))
            assert info["success"] and reward == 1.0, (spec.params, info.get("failed_checks"))
    assert sizes == {"train": 150, "heldout": 45, "heldout_unseen": 30}
    train_ids = {t.task_id for t in SPACE.split("train")}
    assert not train_ids & {t.task_id for t in SPACE.split("heldout")}
    assert all(_validation.is_reserved(SPACE, t) for t in SPACE.split("heldout_unseen"))


def test_reports_lose_the_criteria_they_break(env):
    spec = TaskSpec("agentgym/Briefing-v0", {"template": "spending_summary", "level": 2}, seed=7)
    plan = SPACE.solve(spec)
    good = json.loads(plan[-1])["arguments"]["answer"]
    _, r, info = run(env, spec, plan)
    assert r == 1.0
    # a report that states no fact earns nothing; one with some of the facts earns those
    _, r, info = run(env, spec, plan[:-1] + [finish("You sent some money.")])
    assert r == 0 and any("total" in f for f in info["failed_checks"])
    partial = good.split(";")[0]  # the count and the total, not the largest payment
    _, r, info = run(env, spec, plan[:-1] + [finish(partial)])
    assert 0 < r < 1 and any("largest" in f for f in info["failed_checks"]), (partial, info["failed_checks"])
    # the length bound is a gate: padding voids the report
    _, r, info = run(env, spec, plan[:-1] + [finish(good + " " + "Great job! " * 25)])
    assert r == 0 and any("at most 60 words" in f for f in info["failed_checks"])
    # a briefing is read-only: paying someone while reporting is collateral damage, score 0
    meddle = json.dumps({"name": "add_shopping_item", "arguments": {"name": "cake", "quantity": 1}})
    _, r, info = run(env, spec, [meddle, finish(good)])
    assert r == 0.0 and info["collateral_damage"]


def test_each_rubric_has_code_checks_and_a_judge_criterion():
    for spec in SPACE.split("train")[:9] + SPACE.split("heldout_unseen")[:3]:
        crit = SPACE.rubric(spec)
        assert any(c.check is None for c in crit) and sum(c.check is not None for c in crit) >= 2
        assert all(c.weight > 0 for c in crit)


def _episode(spec, answer, env_score):
    return Trajectory(task_id=spec.task_id, group_id="g", task=spec.to_dict(), score=env_score,
                      instruction="brief", steps=[Step(observation="o", anchor="a", text=finish(answer),
                                                       action=finish(answer), action_valid=True, reward=env_score)])


def test_judged_rubric_end_to_end():
    spec = SPACE.split("train")[0]
    good = json.loads(SPACE.solve(spec)[-1])["arguments"]["answer"]

    class Judge:
        def generate(self, prompts, sampling=None, contexts=None):
            return [Completion(text="Score: 1" if "works at" in p[-1]["content"] else "Score: 0") for p in prompts]

    by_id = {spec.task_id: spec}
    rubric = Rubric(SPACE.rubric(spec), judge=JudgeReward(Judge()),
                    per_task=lambda t: SPACE.rubric(TaskSpec.from_dict(t.task)) if t.task else None)
    trajs = [_episode(spec, good, 1.0), _episode(spec, "No idea.", 0.2)]
    stats = apply_reward(trajs, rubric)
    assert stats.judged == 2 and by_id
    assert trajs[0].score == pytest.approx(1.0)
    assert 0 <= trajs[1].score < 0.3
    assert trajs[1].metadata["verifiable_score"] == 0.2


def test_the_task_space_checks_its_params_and_keeps_the_unseen_template_out_of_training():
    import numpy as np

    space = BriefingTaskSpace()
    with pytest.raises(ValueError, match="unknown briefing template 'tax_return'; choose one of meeting_brief"):
        space.check_params({"template": "tax_return", "level": 1})
    with pytest.raises(ValueError, match=r"level must be one of \(1, 2, 3\), got 4"):
        space.check_params({"template": "meeting_brief", "level": 4})
    rng = np.random.default_rng(0)
    drawn = {space.sample(rng).params["template"] for _ in range(60)}
    assert drawn == {"meeting_brief", "week_agenda", "spending_summary"}
    unseen = space.split("heldout_unseen")
    assert unseen and all(space.reserved(t) and space.category(t).startswith("unread_digest/L") for t in unseen)
    assert not any(space.reserved(t) for t in space.split("train"))
