"""Issue 52 items 14-15: config values and admissible-only decoding that a fourth hostile run
broke. Each bad value is one line before anything starts (no traceback, no 159 s wait, no run on
silently wrong settings); an empty admissible list is decoded freely, said once and counted."""

from __future__ import annotations

import time
import warnings
from types import SimpleNamespace

import pytest

from agentgym.errors import AgentGymError, ConfigError
from agentgym.trainers.config import load_config

BASE = ["tiny.build=true"]
RUBRIC = "criteria: [{name: a, weight: 1, description: d, check: success}]"
CASES = {
    "env.env_kwargs.max_episode_steps=0": "max_episode_steps",
    "env.env_kwargs.max_episode_steps=-1": "max_episode_steps",
    "env.env_kwargs.max_episode_steps=abc": "max_episode_steps",
    "env.fresh_tasks=5 env.categories=[bogus]": "matches no category",
    "env.reward=tests": "has none",
    "env.reward={kind: rubric, weight: x, " + RUBRIC + "}": "env.reward.weight",
    "env.reward={kind: rubric, weight: -1, " + RUBRIC + "}": "env.reward.weight",
    "env.reward={kind: rubric, weight: .nan, " + RUBRIC + "}": "env.reward.weight",
    "env.reward={kind: rubric, criteria: [{name: a, weight: x, description: d, check: success}]}": "weight",
    "env.reward={kind: rubric, criteria: [{name: a, weight: -2, description: d, check: success}]}": "weight",
    "env.reward={kind: meta_reasoning, planning: x}": "planning",
    "env.reward={kind: meta_reasoning, reflection: -1}": "reflection",
    "env.reward={kind: judge, judge: {cache: /etc/passwd}}": "no judge answers",
    "env.reward={kind: judge, judge: {cache: /proc/self/mem}}": "judge cache",
    "env.reward={kind: judge, judge: {cache: /dev/zero}}": "not a regular file",
    "env.reward={kind: judge, judge: {cache: /}}": "not a regular file",
    "env.reward={kind: rubric, criteria: 5}": "env.reward",
    "rollout.admissible_only=true env.chat.parser=json": "env.chat.parser=json",
}


@pytest.mark.parametrize("overrides", list(CASES), ids=[c[:50] for c in CASES])
def test_each_bad_value_is_one_line_before_training_starts(overrides):
    if "/proc/self/mem" in overrides and not __import__("os").path.exists("/proc/self/mem"):
        pytest.skip("no /proc")
    start = time.perf_counter()
    with pytest.raises(ConfigError) as err:
        load_config(None, BASE + overrides.split(" ", 1) if overrides.startswith(("env.fresh", "rollout"))
                    else BASE + [overrides])
    text = str(err.value)
    assert isinstance(err.value, AgentGymError) and "\n" not in text and CASES[overrides] in text, text
    assert time.perf_counter() - start < 10


def test_good_values_still_load(tmp_path):
    cache = tmp_path / "judge.jsonl"
    cache.write_text('{"key": "k", "answer": "Score: 1"}\n{"key": "k2", "answ')  # torn last line
    cfg = load_config(None, BASE + ["env.env_kwargs.max_episode_steps=5", "env.reward={kind: rubric, weight: 0.3, "
                                    + RUBRIC + "}", "rollout.admissible_only=true", "env.chat.parser=tag"])
    assert cfg.env.env_kwargs["max_episode_steps"] == 5
    load_config(None, BASE + ["env.reward={kind: judge, judge: {cache: " + str(cache) + "}}"])
    load_config(None, BASE + ["env.reward={kind: judge, judge: {cache: " + str(tmp_path / "new.jsonl") + "}}"])


def test_a_torn_judge_cache_line_is_skipped_and_counted(tmp_path):
    from agentgym.rewards.judge import JudgeCache

    path = tmp_path / "judge.jsonl"
    path.write_text('{"key": "a", "answer": "Score: 1"}\n{"key": "b", "ans\n{"key": "c", "answer": "Score: 0"}\n'
                    '[1, 2]\n{"key": "d", "answ')
    cache = JudgeCache(path)
    assert cache.data == {"a": "Score: 1", "c": "Score: 0"} and cache.skipped_lines == 3
    cache.put("e", "Score: 0.5")
    assert JudgeCache(path).data["e"] == "Score: 0.5"


def _ctx(actions, episode="0"):
    return SimpleNamespace(info={"admissible_actions": actions}, task=SimpleNamespace(task_id="t1"), episode=episode,
                           format_action=lambda a: f"<action>{a}</action>")


def test_an_empty_admissible_list_is_decoded_freely_said_once_and_counted():
    from agentgym.continuation import AdmissibleReplies

    policy = SimpleNamespace(encode_response=lambda text, add_eos=True: [len(text), 0])
    replies = AdmissibleReplies(policy)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = replies([_ctx(["go left"]), _ctx([], "1")])
        out2 = replies([_ctx([], "1"), _ctx([], "2")])
    assert out[0] == [[len("<action>go left</action>"), 0]] and out[1] is None and out2 == [None, None]
    said = [w for w in caught if "admissible" in str(w.message)]
    assert len(said) == 1 and "\n" not in str(said[0].message) and "free_turns" in str(said[0].message)
    assert replies.free_turns == {"1": 2, "2": 1}
    with pytest.raises(ConfigError):  # an open action space (no list at all) is still refused
        replies([_ctx(None)])
