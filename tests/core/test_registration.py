import subprocess
import sys

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import agentgym
from agentgym.errors import UnknownEnvError
from agentgym.toy import CounterEnv


def test_third_party_registration_is_one_call():
    env_id = agentgym.register_env("MyCounter-v0", CounterEnv, max_episode_steps=5)
    assert env_id == "agentgym/MyCounter-v0"
    env = gym.make(env_id)
    obs, info = env.reset(seed=0)
    assert info["task_id"] and obs
    check_env(env.unwrapped, skip_render_check=True)
    assert env_id in agentgym.registered_envs()


def test_unknown_env_id_is_one_clear_error():
    with pytest.raises(UnknownEnvError, match="agentgym envs"):
        agentgym.make("agentgym/Nope-v0")


def test_builtin_ids_resolve_through_gymnasiums_module_form():
    code = ("import gymnasium as gym; env = gym.make('agentgym:agentgym/Household-v0'); "
            "obs, info = env.reset(seed=1); print(sorted(info)[:3])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]


def test_reset_is_deterministic_and_rejects_bad_task_option():
    env = CounterEnv()
    a = env.reset(seed=7)
    b = env.reset(seed=7)
    assert a == b
    with pytest.raises(TypeError):
        env.reset(options={"task": 3.5})


def test_step_before_reset():
    with pytest.raises(gym.error.ResetNeeded):
        CounterEnv().step("inc")
