import subprocess
import sys

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import agentgym
from agentgym.errors import UnknownEnvError, UnknownTaskError
from agentgym.toy import CounterEnv


def test_third_party_registration_is_one_call():
    env_id = agentgym.register_env("MyCounter-v0", CounterEnv, max_episode_steps=5)
    assert env_id == "agentgym/MyCounter-v0"
    env = gym.make(env_id)
    obs, info = env.reset(seed=0)
    assert info["task_id"] and obs
    check_env(env.unwrapped, skip_render_check=True)
    assert env_id in agentgym.registered_envs()


@pytest.mark.parametrize("entry_point", [42, "mypkg.envs.MyEnv", None])
def test_an_entry_point_that_cannot_make_an_env_is_refused_when_registered(entry_point):
    """It was accepted, and gym.make failed later with "'int' object has no attribute 'split'"."""
    with pytest.raises(agentgym.errors.ConfigError, match="entry_point must be the env class"):
        agentgym.register_env("NotAnEnv-v0", entry_point)
    assert "agentgym/NotAnEnv-v0" not in gym.registry


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


def test_an_env_whose_first_reset_raised_plays_after_a_good_reset():
    """gymnasium 1.4's PassiveEnvChecker marked the first reset checked before running it: after a
    mistyped task id, a good reset then every step raised "cannot unpack non-iterable NoneType"."""
    env = gym.make("agentgym/Household-v0")
    with pytest.raises(UnknownTaskError):
        env.reset(options={"task": "no-such-task"})
    env.reset(seed=0)
    assert isinstance(env.step("look")[0], str) and isinstance(env.step("look")[0], str)


def test_an_observation_that_is_not_text_is_an_environment_bug():
    class NumberEnv(CounterEnv):
        def _step(self, action):
            obs, *rest = super()._step(action)
            return 3, *rest

    env = NumberEnv()
    env.reset(seed=0)
    with pytest.raises(TypeError, match="environment bug: the observation must be a str, got int"):
        env.step("inc")


# --- the task space declared where the env is registered ------------------------------------------
def _no_env(*args, **kwargs):
    raise AssertionError("get_task_space built an environment")


@pytest.fixture
def fresh_spaces(monkeypatch):
    """get_task_space as on a first call (no space made yet for any id); ids the test registers
    are removed after it, so no later test meets them."""
    from agentgym import registration

    monkeypatch.setattr(registration, "_TASK_SPACES", {})
    monkeypatch.setattr(registration, "_OURS", dict(registration._OURS))
    monkeypatch.setattr(registration, "_DECLARED_SPACES", dict(registration._DECLARED_SPACES))
    before = set(gym.registry)
    yield registration
    for env_id in set(gym.registry) - before:
        del gym.registry[env_id]


def test_builtin_task_spaces_come_without_building_an_env(fresh_spaces, monkeypatch):
    from agentgym.builtin_envs import BUILTIN_ENVS

    declared = [f"agentgym/{e['id']}" for e in BUILTIN_ENVS if "task_space" in e]
    # every built-in but OpenEnv-v0, whose space is the server's (known once made with base_url)
    assert {f"agentgym/{e['id']}" for e in BUILTIN_ENVS} - set(declared) == {"agentgym/OpenEnv-v0"}
    for env_id in declared:
        monkeypatch.setattr(gym.registry[env_id], "entry_point", _no_env)
    for env_id in declared:
        space = agentgym.get_task_space(env_id)
        # the browser variant plays WebShop-v0's tasks
        assert space.env_id == env_id or env_id == "agentgym/WebShop-Browser-v0", env_id
        assert agentgym.get_task_space(env_id) is space  # made once per id


def test_a_declared_space_is_the_one_the_env_plays(fresh_spaces):
    space = agentgym.get_task_space("agentgym/Household-v0")
    env = gym.make("agentgym/Household-v0")
    try:
        assert env.unwrapped.task_space is space
    finally:
        env.close()
    textworld = agentgym.get_task_space("agentgym/TextWorld-Cooking-v0")  # made from the registered challenge
    assert textworld.challenge == "tw-cooking"


def test_an_env_registered_without_a_space_is_built_once_for_it(fresh_spaces):
    built = []

    class Counted(CounterEnv):
        def __init__(self, **kwargs):
            built.append(1)
            super().__init__(**kwargs)

    env_id = agentgym.register_env("CountedCounter-v0", Counted, max_episode_steps=5)
    space = agentgym.get_task_space(env_id)
    assert built == [1] and space is CounterEnv.task_space
    assert agentgym.get_task_space(env_id) is space and built == [1]


def test_a_space_declared_by_object_class_or_string(fresh_spaces):
    from agentgym.toy import CounterTaskSpace

    made = CounterTaskSpace()
    assert agentgym.get_task_space(agentgym.register_env("SpaceObj-v0", CounterEnv, task_space=made)) is made
    by_class = agentgym.get_task_space(agentgym.register_env("SpaceCls-v0", CounterEnv, task_space=CounterTaskSpace))
    assert type(by_class) is CounterTaskSpace and by_class is not made
    by_string = agentgym.get_task_space(agentgym.register_env("SpaceStr-v0", CounterEnv,
                                                              task_space="agentgym.toy:CounterEnv.task_space"))
    assert by_string is CounterEnv.task_space


@pytest.mark.parametrize("target", ["agentgym.toy", "agentgym.toy:NoSuchSpace", "no_such_module_xyz:Space"])
def test_a_bad_task_space_string_is_one_clear_error(fresh_spaces, target):
    from agentgym.errors import ConfigError

    env_id = agentgym.register_env("BadSpace-v0", CounterEnv, task_space=target)
    with pytest.raises(ConfigError, match="module:name") as err:
        agentgym.get_task_space(env_id)
    assert "\n" not in str(err.value)
