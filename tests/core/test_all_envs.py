"""Contracts every registered environment must keep, checked for every id (future ones too)."""

import shutil

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import agentgym
from agentgym.core import INFO_KEYS
from agentgym.tasks.validation import heldout_ids
from agentgym.tasks import validation as _validation

NEEDS = {  # what an id needs beyond the core install
    "agentgym/WebShop-Browser-v0": lambda: shutil.which("chromium") or pytest.skip("chromium not installed"),
    "agentgym/SWE-v0": lambda: shutil.which("bwrap") or pytest.skip("bubblewrap not installed"),
    "agentgym/ALFWorld-v0": lambda: pytest.importorskip("alfworld", reason="needs the alfworld extra"),
}
ENV_IDS = sorted(i for i in agentgym.registered_envs() if i.startswith("agentgym/"))
REMOTE = "agentgym/OpenEnv-v0"  # wraps a server: checked here against a served Household env


@pytest.fixture(scope="module")
def served_household():
    pytest.importorskip("openenv")
    from agentgym.integrations.openenv_server import ServerProcess

    with ServerProcess("agentgym/Household-v0", max_sessions=4) as server:
        yield server.base_url


def _make(env_id, request=None):
    if env_id == REMOTE:
        return gym.make(env_id, base_url=request.getfixturevalue("served_household"))
    NEEDS.get(env_id, lambda: None)()
    if "TextWorld" in env_id:
        pytest.importorskip("textworld")
    if env_id == "agentgym/TextWorld-v0":
        from agentgym.envs.textworld.games import game_file
        from agentgym.envs.textworld.tasks import TextWorldTaskSpace
        path = game_file(TextWorldTaskSpace("tw-treasure_hunter").split("train")[0])
        return gym.make(env_id, game_file=str(path))
    return gym.make(env_id)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_check_env_and_info_keys(env_id, request):
    env = _make(env_id, request)
    try:
        check_env(env.unwrapped, skip_render_check=True)
        obs, info = env.reset(seed=0)
        assert isinstance(obs, str) and set(INFO_KEYS) <= set(info)
        obs, reward, terminated, truncated, info = env.step("\x00 definitely not an action \u2603")
        assert info["action_valid"] is False and isinstance(obs, str) and obs
        assert set(INFO_KEYS) <= set(info)
    finally:
        env.close()


# A remote env ships no oracle; the env behind it is checked under its own id.
@pytest.mark.parametrize("env_id", [i for i in ENV_IDS if i not in ("agentgym/TextWorld-v0", REMOTE)])
def test_oracle_solves_the_first_tasks_of_every_split(env_id):
    NEEDS.get(env_id, lambda: None)()
    if "TextWorld" in env_id:
        pytest.importorskip("textworld")
    space = agentgym.get_task_space(env_id)
    for name in space.split_names:
        for task in space.split(name)[:2]:
            assert _validation.validate(space, task), (env_id, name, task.task_id)
    held = heldout_ids(space)
    assert held and not held & {t.task_id for t in space.split("train")}
