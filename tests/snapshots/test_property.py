"""The snapshot property, for every registered id: restore a state, replay the same actions, and
get identical observations, rewards, flags and infos (agentgym.snapshot.check_snapshot), over
random action sequences drawn by Hypothesis. Ids that cannot snapshot say why in one line."""

from __future__ import annotations

import shutil

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentgym
from agentgym.snapshot import SnapshotUnsupported, check_snapshot, snapshot
from agentgym.tasks.protocol import split_tasks
from agentgym.toy import COUNTER_ID, register_counter

register_counter()
REFUSING = {"agentgym/WebShop-Browser-v0", "agentgym/OpenEnv-v0"}  # a live browser, a remote server
IDS = sorted(i for i in agentgym.registered_envs() if i.startswith("agentgym/") and i not in REFUSING)
# examples per id: the in-process families are cheap; engines and sandboxes take seconds a step
EXAMPLES = {"agentgym/SWE-v0": 3, "agentgym/ALFWorld-v0": 4}
TEXTWORLD_EXAMPLES = 3
INVALID = ["", "definitely not an action \u2603", "<action>look</action>"]
_ENVS: dict[str, tuple] = {}


def _make(env_id: str):
    if env_id == "agentgym/SWE-v0" and not shutil.which("bwrap"):
        pytest.skip("bubblewrap not installed")
    if env_id == "agentgym/ALFWorld-v0":
        pytest.importorskip("alfworld", reason="needs the alfworld extra")
    if "TextWorld" in env_id:
        pytest.importorskip("textworld", reason="needs the textworld extra")
    if env_id == "agentgym/TextWorld-v0":
        from agentgym.envs.textworld.games import game_file
        from agentgym.envs.textworld.tasks import TextWorldTaskSpace

        path = game_file(TextWorldTaskSpace("tw-treasure_hunter").split("train")[0])
        return gym.make(env_id, game_file=str(path))
    return gym.make(env_id)


def _pair(env_id: str):
    """Two envs of the id, kept for the module: the one checked and the one restored into."""
    if env_id not in _ENVS:
        _ENVS[env_id] = (_make(env_id), _make(env_id))
    return _ENVS[env_id]


@pytest.fixture(scope="module", autouse=True)
def _close_envs():
    yield
    for envs in _ENVS.values():
        for env in envs:
            env.close()
    _ENVS.clear()


def _actions(env, task, choices: list[int]) -> list[str]:
    """The actions `choices` pick as the episode goes: among the admissible actions and an invalid
    one where the env lists them, else among the oracle's actions (in any order) and invalid ones."""
    _, info = env.reset(seed=0, options={"task": task})
    oracle = list(env.unwrapped.task_space.solve(task))
    played = []
    for c in choices:
        listed = info.get("admissible_actions")
        pool = [*listed, INVALID[c % len(INVALID)]] if listed else [*oracle, *INVALID]
        action = pool[c % len(pool)]
        played.append(action)
        _, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    return played


def _examples(env_id: str) -> int:
    return EXAMPLES.get(env_id, TEXTWORLD_EXAMPLES if "TextWorld" in env_id else 20)


@pytest.mark.parametrize("env_id", IDS)
def test_restore_then_replay_gives_the_same_episode(env_id):
    env, other = _pair(env_id)
    long = env_id in EXAMPLES or "TextWorld" in env_id
    # a TextWorld game compiles per task (seconds): one task there, random sequences over it
    tasks = split_tasks(env.unwrapped.task_space, "train")[:1 if "TextWorld" in env_id else 2 if long else 4]

    @settings(max_examples=_examples(env_id), deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(task=st.sampled_from(tasks), choices=st.lists(st.integers(0, 99), min_size=1, max_size=5 if long else 12),
           cut=st.integers(0, 12), detour=st.lists(st.integers(0, 99), max_size=3))
    def prop(task, choices, cut, detour):
        actions = _actions(env, task, choices)
        # the detour: a few actions of the same kind, played before each restore (the env must forget them)
        detour_actions = [INVALID[d % len(INVALID)] if d % 2 else actions[d % len(actions)] for d in detour]
        check_snapshot(env, actions, prefix=min(cut, len(actions)), task=task, other=other, detour=detour_actions)

    prop()


@pytest.mark.parametrize("env_id", sorted(REFUSING))
def test_envs_without_snapshots_say_why_in_one_line(env_id):
    if env_id == "agentgym/OpenEnv-v0":
        from agentgym.integrations.openenv_client import OpenEnvTextEnv

        env = OpenEnvTextEnv.__new__(OpenEnvTextEnv)  # no server needed to know it cannot snapshot
    else:
        env = gym.make(env_id)  # the browser starts at the first reset: not needed here
    try:
        with pytest.raises(SnapshotUnsupported) as err:
            snapshot(env)
        message = str(err.value)
        assert "\n" not in message and ("browser" in message.lower() or "server" in message)
    finally:
        if env_id != "agentgym/OpenEnv-v0":
            env.close()


def test_the_counter_is_checked_too():
    assert COUNTER_ID in IDS  # the toy env users copy from implements the contract
