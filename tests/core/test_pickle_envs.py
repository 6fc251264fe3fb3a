"""Issue 19: envs pickle with cloudpickle (subprocess vector envs started from a made env), and
agentgym/TextWorld-v0 can be made without arguments."""

import cloudpickle
import gymnasium as gym
import pytest

import agentgym  # noqa: F401


def test_webshop_env_pickles_after_reset_and_plays_on():
    env = gym.make("agentgym/WebShop-v0")
    obs, info = env.reset(seed=0)
    env.step("search[shampoo]")
    clone = cloudpickle.loads(cloudpickle.dumps(env))
    assert clone.unwrapped.engine.search("shampoo") == env.unwrapped.engine.search("shampoo")
    obs2, *_ = clone.step("click[back to search]")
    assert isinstance(obs2, str)
    env.close()
    clone.close()


def test_textworld_env_pickles_after_reset_and_keeps_its_state():
    pytest.importorskip("textworld")
    env = gym.make("agentgym/TextWorld-v0")
    obs, info = env.reset(seed=0)
    first = info["admissible_actions"][0]
    _, _, _, _, info1 = env.step(first)
    clone = cloudpickle.loads(cloudpickle.dumps(env))
    assert clone.unwrapped.task == env.unwrapped.task
    a, b = env.step("look"), clone.step("look")
    assert a[0] == b[0] and a[4]["anchor"] == b[4]["anchor"]
    env.close()
    clone.close()


def test_textworld_v0_makes_without_arguments_and_passes_check_env():
    pytest.importorskip("textworld")
    from gymnasium.utils.env_checker import check_env

    env = gym.make("agentgym/TextWorld-v0")
    check_env(env.unwrapped, skip_render_check=True)
    obs, info = env.reset()
    assert info["instruction"]
    env.close()
