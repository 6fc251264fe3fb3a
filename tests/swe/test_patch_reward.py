"""env.reward=patch_similarity|both on SWE-v0: the oracle's fix scores 1 without running tests, no
change scores -1, a wrong edit lands in between; the reference stays on the host."""

import pytest

from agentgym.envs.swe.env import SWEEnv
from agentgym.envs.swe.space import SWETaskSpace
from agentgym.envs.swe.tools import format_call
from agentgym.errors import ConfigError

SPACE = SWETaskSpace()
TASK = SPACE.split("train")[0]


def finish(env, actions):
    env.reset(options={"task": TASK})
    for a in actions:
        obs, reward, term, trunc, info = env.step(a)
        if term or trunc:
            return obs, reward, info
    raise AssertionError("episode did not end")


@pytest.fixture
def env():
    e = SWEEnv(reward="patch_similarity")
    yield e
    e.close()


@pytest.mark.sandbox
def test_oracle_is_one_and_no_change_is_minus_one(env, monkeypatch):
    import agentgym.envs.swe.env as swe_env

    def no_tests(*a, **k):
        raise AssertionError("patch_similarity must not run the tests")

    monkeypatch.setattr(swe_env, "grade", no_tests)
    obs, reward, info = finish(env, SPACE.solve(TASK))
    assert reward == 1.0 and info["patch_similarity"] == 1.0 and info["success"] and info["score"] == 1.0
    obs, reward, info = finish(env, [format_call("submit")])
    assert reward == -1.0 and info["score"] == 0.0 and not info["success"]
    assert "no patch" in info["patch_note"]


@pytest.mark.sandbox
def test_wrong_edit_is_in_between_and_both_keeps_the_tests_verdict():
    p = TASK.params
    wrong = [format_call("str_replace", path=p["file"], old_str=p["after"], new_str=p["after"] + "  # looked at"),
             format_call("submit")]
    with SWEEnv(reward="both") as env:
        obs, reward, info = finish(env, wrong)
        assert 0.0 < info["patch_similarity"] < 1.0
        assert not info["success"]  # the tests still fail
        assert reward == pytest.approx((info["score"] + info["patch_similarity"]) / 2)
        assert "Hidden tests" in obs and "Patch similarity" in obs


def test_unknown_reward_mode_is_one_line():
    with pytest.raises(ConfigError, match="choose one of tests, patch_similarity, both"):
        SWEEnv(reward="similarity")
