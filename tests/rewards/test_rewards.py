"""Rubric, judge, relative judge, generated rubrics and guards, with scripted judges (a policy whose
answers the test writes), including every way a judge can fail to give a verdict."""

import math
import time

import numpy as np
import pytest

from agentgym.errors import ConfigError
from agentgym.policies import OraclePolicy, RandomPolicy
from agentgym.policies.base import Completion, SamplingParams
from agentgym.rewards import (Criterion, Guarded, JudgeCache, JudgeReward, RelativeJudge, Rubric, RubricStore,
                              apply_reward, divergence, generate_rubrics, make_reward, parse_group_scores,
                              parse_rubric, parse_score)
from agentgym.trainers.estimators import EstimatorConfig, compute_advantages
from agentgym.trajectory import Step, Trajectory


class ScriptedJudge:
    """Answers each prompt with answer(prompt_text); records what it was asked."""

    def __init__(self, answer, delay_s=0.0):
        self.answer, self.delay_s, self.asked, self.calls = answer, delay_s, [], 0

    def generate(self, prompts, sampling=None, contexts=None):
        self.calls += 1
        time.sleep(self.delay_s)
        out = []
        for p in prompts:
            text = p[-1]["content"]
            self.asked.append(text)
            a = self.answer(text)
            out.append(a if isinstance(a, Completion) else Completion(text=a))
        return out


def episode(answer, group="g", score=0.0, task="t1"):
    steps = [Step(observation="You are home.", anchor="s0", text="look", action="look", action_valid=True),
             Step(observation="A desk.", anchor="s1", text=answer, action=answer, action_valid=True, reward=score)]
    return Trajectory(task_id=task, group_id=group, steps=steps, score=score, success=score >= 1,
                      instruction="Write the total spent.")


def test_parse_score_forms_and_no_verdicts():
    assert parse_score("fine.\nScore: 0.8").score == 0.8
    assert parse_score("Score: 7/10").score == pytest.approx(0.7)
    assert parse_score("score=1 then\nScore: 0.25").score == 0.25  # the last line counts
    assert parse_score("**Score: 0.5**\n").score == 0.5
    for bad in ("looks good", "Score: 1.5", "Score: -0.2", "Score: 3/0", "", "score=1 then Score: 0.25"):
        v = parse_score(bad)
        assert v.score is None and not v.has_verdict and v.rationale.startswith("no verdict")


def test_judge_scores_caches_by_content_and_batches():
    judge_policy = ScriptedJudge(lambda text: "ok\nScore: 0.9" if "$84" in text else "no\nScore: 0.1")
    judge = JudgeReward(judge_policy)
    trajs = [episode("The total is $84"), episode("I do not know"), episode("The total is $84")]
    v = judge.score(trajs)
    assert [x.score for x in v] == [0.9, 0.1, 0.9]
    assert judge_policy.calls == 1 and len(judge_policy.asked) == 2  # identical episodes asked once
    judge.score(trajs)
    assert judge_policy.calls == 1  # all from the cache now
    assert judge.cache.hit_rate == pytest.approx(4 / 6)
    assert "Criterion:" in judge_policy.asked[0] and "The total is $84" in judge_policy.asked[0]


def test_cache_persists_across_judges(tmp_path):
    path = tmp_path / "judge.jsonl"
    j1 = JudgeReward(ScriptedJudge(lambda t: "Score: 0.5"), cache=JudgeCache(path))
    j1.score([episode("a")])
    second = ScriptedJudge(lambda t: "Score: 0.0")
    j2 = JudgeReward(second, cache=JudgeCache(path))
    assert j2.score([episode("a")])[0].score == 0.5 and second.calls == 0


def test_unparseable_answer_is_no_verdict_counted_and_excluded_from_groups():
    judge = JudgeReward(ScriptedJudge(lambda t: "I refuse to grade" if "bad" in t else
                                      ("Score: 1" if "good" in t else "Score: 0")))
    trajs = [episode("good", score=0.0), episode("meh", score=1.0), episode("bad", score=1.0),
             episode("good", group="h"), episode("meh", group="h")]
    stats = apply_reward(trajs, judge)
    assert stats.no_verdict == 1 and stats.judged == 4 and judge.stats.no_verdict == 1
    bad = trajs[2]
    assert bad.metadata["no_verdict"] and math.isnan(bad.score) and bad.score != 0
    assert bad.metadata["verifiable_score"] == 1.0
    # the judged outcome replaced the env's, and the last step's reward followed it
    assert trajs[0].score == 1.0 and trajs[0].steps[-1].reward == 1.0 and trajs[1].steps[-1].reward == 0.0
    adv = compute_advantages(trajs, EstimatorConfig(name="grpo"))
    assert np.all(adv[2] == 0)
    # group g without the no-verdict episode: two episodes, scores 1 and 0
    assert adv[0][0] == pytest.approx(1 / (np.std([1, 0], ddof=1) + 1e-6) * 0.5, rel=1e-5)
    # greedy: the unparseable answer is cached (the same prompt gets the same answer); sampling: asked again
    assert "I refuse to grade" in judge.cache.data.values()
    sampling_judge = JudgeReward(ScriptedJudge(lambda t: "I refuse to grade"),
                                 sampling=SamplingParams(temperature=1.0))
    sampling_judge.score([episode("bad")])
    assert not sampling_judge.cache.data


def test_judge_error_and_timeout_are_no_verdict():
    erring = JudgeReward(ScriptedJudge(lambda t: Completion(text="", error="HTTP 500")))
    v = erring.score([episode("x")])[0]
    assert v.score is None and "HTTP 500" in v.rationale and erring.stats.errors == 1
    slow = JudgeReward(ScriptedJudge(lambda t: "Score: 1", delay_s=0.5), timeout_s=0.05)
    v = slow.score([episode("x")])[0]
    assert v.score is None and "within 0.05 s" in v.rationale and "\n" not in v.rationale
    assert slow.stats.errors == 1
    with pytest.raises(ConfigError, match="timeout_s"):
        JudgeReward(ScriptedJudge(lambda t: ""), timeout_s=0)


def test_rubric_weights_checks_and_judge():
    judge_policy = ScriptedJudge(lambda t: "Score: 1" if "short note" in t and "$84" in t else "Score: 0")
    rubric = Rubric([Criterion("total", 3.0, "states the total", check=lambda t: "$84" in t.steps[-1].text),
                     Criterion("short", 1.0, "under 40 characters", check=lambda t: len(t.steps[-1].text) < 40),
                     Criterion("tone", 1.0, "reads as a short note")], judge=JudgeReward(judge_policy))
    v = rubric.score([episode("The total is $84"), episode("nothing to say about the spending at all, sorry")])
    assert v[0].score == pytest.approx(1.0)
    assert v[1].score == pytest.approx(0.0)
    assert "total=1.00" in v[0].rationale
    half = rubric.score([episode("Total: $84 " + "x" * 40)])[0]
    assert half.score == pytest.approx((3 * 1 + 1 * 0 + 1 * 1) / 5)


def test_rubric_no_verdict_on_a_judged_criterion_is_no_verdict():
    rubric = Rubric([Criterion("a", 1.0, "x", check=lambda t: True), Criterion("b", 1.0, "y")],
                    judge=JudgeReward(ScriptedJudge(lambda t: "hmm")))
    v = rubric.score([episode("z")])[0]
    assert v.score is None and "criterion 'b'" in v.rationale


@pytest.mark.parametrize("weight", [0, -1, float("nan")])
def test_rubric_bad_weights_are_one_line(weight):
    with pytest.raises(ConfigError, match="weights must be positive") as err:
        Rubric([Criterion("a", weight, "x", check=lambda t: True)])
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="weights must be positive"):
        make_reward({"kind": "rubric", "criteria": [{"name": "a", "weight": weight, "description": "x",
                                                     "check": "contains:a"}]})


def test_make_reward_from_config_and_bad_input():
    r = make_reward({"kind": "rubric", "criteria": [
        {"name": "total", "weight": 2, "description": "states the total", "check": "contains:$84"},
        {"name": "short", "weight": 1, "description": "short", "check": "max_chars:20"}]})
    assert [v.score for v in r.score([episode("The total is $84"), episode("no idea at all, sorry!")])] == \
        pytest.approx([1.0, 0.0])
    with pytest.raises(ConfigError, match="unknown reward kind 'rubrik'"):
        make_reward({"kind": "rubrik"})
    with pytest.raises(ConfigError, match="give the rubric a judge|configure one"):
        make_reward({"kind": "rubric", "criteria": [{"name": "a", "weight": 1, "description": "x"}]})
    with pytest.raises(ConfigError, match="rubric check 'startswith:x' is unknown"):
        make_reward({"kind": "rubric", "criteria": [{"name": "a", "weight": 1, "description": "x",
                                                     "check": "startswith:x"}]})
    with pytest.raises(ConfigError, match="unknown reward option 'wieght'"):
        make_reward({"kind": "judge", "wieght": 1})


def test_relative_judge_one_call_per_group_and_partial_answers():
    def answer(text):
        if "=== Episode 3 ===" in text:
            return "1 is best.\nEpisode 1: 0.9\nEpisode 2: 0.2\nEpisode 3: banana"
        return "Episode 1: 0.3\nEpisode 2: 0.6"
    policy = ScriptedJudge(answer)
    rel = RelativeJudge(JudgeReward(policy))
    trajs = [episode("a"), episode("b", group="h"), episode("c"), episode("d", group="h"), episode("e")]
    v = rel.score(trajs)
    assert policy.calls == 1 and len(policy.asked) == 2  # two groups, one batched call
    assert [x.score for x in v] == [0.9, 0.3, 0.2, 0.6, None]
    assert rel.judge.stats.no_verdict == 1
    assert parse_group_scores("Episode 1: 2", 1)[0].score is None


def test_generated_rubric_is_stored_with_the_task(tmp_path):
    policy = ScriptedJudge(lambda t: "- [3] States the total\n- [1] Is polite\nnot a criterion\n- [0] ignored")
    store = RubricStore(tmp_path / "rubrics.jsonl")
    got = generate_rubrics(policy, [("t1", "Write the total spent."), ("t2", "Email Dana.")], store)
    assert [c.weight for c in got["t1"]] == [3.0, 1.0] and got["t1"][0].description == "States the total"
    again = generate_rubrics(policy, [("t1", "Write the total spent.")], RubricStore(tmp_path / "rubrics.jsonl"))
    assert policy.calls == 1 and again["t1"][1].description == "Is polite"  # read back, not asked again
    assert parse_rubric("The rubric is: be good") == []
    # the rubric reward uses a task's stored rubric before its own criteria
    judge = JudgeReward(ScriptedJudge(lambda t: "Score: 1" if "States the total" in t else "Score: 0"))
    rubric = Rubric([Criterion("fallback", 1.0, "anything")], judge=judge, per_task=store.for_trajectory)
    assert rubric.score([episode("x", task="t1")])[0].score == pytest.approx(3 / 4)
    assert rubric.score([episode("x", task="t9")])[0].score == 0.0


def test_a_rubric_store_torn_by_a_killed_run_skips_the_torn_line_and_appends_on_a_line_of_its_own(tmp_path):
    path = tmp_path / "rubrics.jsonl"
    path.write_text('{"task_id": "t1", "criteria": [{"name": "c1", "weight": 2.0, "description": "States it"}]}\n'
                    '{"task_id": "t2", "crit')  # killed mid-append
    store = RubricStore(path)
    assert list(store.data) == ["t1"] and store.get("t1")[0].weight == 2.0 and store.log.skipped_lines == 1
    store.put("t2", [Criterion("c1", 1.0, "Is polite")])
    again = RubricStore(path)
    assert again.get("t2")[0].description == "Is polite" and again.get("t1")[0].description == "States it"
    other = tmp_path / "other.jsonl"
    other.write_text('{"key": "k", "answer": "Score: 1"}\n')  # a judge cache, not rubrics
    with pytest.raises(ConfigError, match="holds no rubrics") as err:
        RubricStore(other)
    assert "\n" not in str(err.value)


def test_guards_refuse_long_or_malformed_answers_before_the_judge():
    policy = ScriptedJudge(lambda t: "Score: 1")
    guarded = Guarded(JudgeReward(policy), max_chars=30, pattern=r"\$\d+")
    v = guarded.score([episode("Total $84"), episode("Total $84 " + "great work! " * 10), episode("no number")])
    assert v[0].score == 1.0
    assert v[1].score == 0.0 and "over the 30 allowed" in v[1].rationale
    assert v[2].score == 0.0 and "format" in v[2].rationale
    assert len(policy.asked) == 1  # the judge never saw the two that failed
    with pytest.raises(ConfigError, match="not a valid regular expression"):
        Guarded(JudgeReward(policy), pattern="(")


def test_divergence_flags_a_judge_drifting_from_the_env():
    agree = divergence([(1.0, 1.0), (0.0, 0.0), (0.9, 1.0), (0.1, 0.0)])
    assert agree["correlation"] > 0.9 and agree["disagree_rate"] == 0.0
    hacked = divergence([(1.0, 0.0), (0.9, 0.0), (1.0, 1.0), (0.8, 0.0)])
    assert hacked["gap"] > 0.5 and hacked["disagree_rate"] == 0.75
    assert divergence([]) == {}


def test_reward_hook_from_config():
    from agentgym.rewards.hook import env_reward_kwargs, reward_hook

    assert env_reward_kwargs("patch_similarity") == {"reward": "patch_similarity"} and env_reward_kwargs(None) == {}
    assert reward_hook(None) is None and reward_hook("tests") is None
    hook = reward_hook({"kind": "rubric", "combine": "mean", "weight": 0.5, "criteria": [
        {"name": "total", "weight": 1, "description": "states the total", "check": "contains:$84"}]})
    trajs = [episode("The total is $84", score=0.0), episode("no", score=1.0)]
    metrics = hook(trajs)
    assert [t.score for t in trajs] == [0.5, 0.5] and metrics["judged"] == 2 and metrics["disagree_rate"] == 1.0
    meta = reward_hook({"kind": "meta_reasoning", "weight": 2.0})
    t = episode("<explore>try</explore><action>open box</action>")
    assert meta([t])["tag_explore"] == 1
    with pytest.raises(ConfigError, match="unknown meta_reasoning option"):
        reward_hook({"kind": "meta_reasoning", "planing": 1})
    with pytest.raises(ConfigError, match="mapping with a kind"):
        reward_hook(3)


def test_a_training_config_names_its_judge(monkeypatch):
    """env.reward.judge.policy (hf:PATH or openai:URL:MODEL, as `agentgym eval --policy`) builds the
    judge the trainer's hook uses; it used to be accepted and ignored, so a judged reward in a config
    could never run (the loop passes no judge)."""
    import agentgym.policies.specs as specs
    from agentgym.rewards.hook import reward_hook
    from agentgym.trainers.run_setup import load_judge

    built = []

    def fake_load(spec, env_id, **kw):
        built.append(spec.label if hasattr(spec, "label") else spec)
        return ScriptedJudge(lambda text: "ok\nScore: 0.75" if "$84" in text else "Score: 0")

    monkeypatch.setattr(specs, "load_policy", fake_load)
    spec = {"kind": "rubric", "criteria": [
        {"name": "total", "weight": 1, "description": "states the total", "check": "contains:$84"},
        {"name": "tone", "weight": 1, "description": "reads as a short note"}],
        "judge": {"policy": "openai:http://localhost:8000/v1:judge-model", "max_new_tokens": 32}}
    with pytest.raises(ConfigError, match="pass judge_policy= to make_reward"):
        reward_hook(spec)  # the trainer loads the judge a config names (load_judge), not the reward layer
    hook = reward_hook(spec, load_judge(spec))
    trajs = [episode("The total is $84"), episode("no")]
    metrics = hook(trajs)
    assert len(built) == 1 and [t.score for t in trajs] == pytest.approx([0.875, 0.0])
    assert metrics["judged"] == 2 and metrics["judge_prompts"] == 2
    with pytest.raises(ConfigError, match="cannot judge"):
        load_judge({"kind": "judge", "judge": {"policy": "random"}})
    for scripted in (RandomPolicy(), OraclePolicy()):  # in Python as in a config: one line, not a ValueError later
        with pytest.raises(ConfigError, match=f"{type(scripted).__name__} acts on an env's admissible actions and "
                                              "cannot judge"):
            make_reward(spec, judge_policy=scripted)
    with pytest.raises(ConfigError, match="max_new_tokens"):
        make_reward({"kind": "judge", "judge": {"policy": "openai:http://h:1/v1:m", "max_new_tokens": 0}})
    with pytest.raises(ConfigError, match="unknown judge option 'model'"):
        make_reward({"kind": "judge", "judge": {"model": "x"}}, judge_policy=ScriptedJudge(lambda t: "Score: 1"))
