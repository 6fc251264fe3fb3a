"""Bad snapshots are refused in one line and change nothing: truncated, of another env, version or
task, hand-edited into an impossible state, or a workspace over the SWE cap."""

from __future__ import annotations

import copy
import dataclasses
import json
import shutil

import gymnasium as gym
import pytest

import agentgym
from agentgym.core import TextEnv
from agentgym.snapshot import Snapshot, SnapshotError, SnapshotUnsupported, restore, snapshot
from agentgym.tasks.protocol import split_tasks


def _played(env_id: str, steps: int = 2, **kwargs):
    env = gym.make(env_id, **kwargs)
    task = split_tasks(env.unwrapped.task_space, "train")[0]
    env.reset(seed=0, options={"task": task})
    for action in list(env.unwrapped.task_space.solve(task))[:steps]:
        env.step(action)
    return env, task


def _refused(env, snap_or_text, *words):
    """The restore is refused in one line naming `words`, and the env's state did not move."""
    before = snapshot(env)
    with pytest.raises(SnapshotError) as err:
        restore(env, snap_or_text)
    message = str(err.value)
    assert "\n" not in message and all(w in message for w in words), message
    assert snapshot(env) == before
    return message


def _edited(snap: Snapshot, **state_changes) -> Snapshot:
    state = copy.deepcopy(snap.state)
    state.update(state_changes)
    return dataclasses.replace(snap, state=state)


@pytest.fixture
def household():
    env, task = _played("agentgym/Household-v0", steps=3)
    yield env
    env.close()


def test_a_truncated_file_is_refused(household):
    text = snapshot(household).to_json()
    _refused(household, text[: len(text) // 2], "not valid JSON")
    data = json.loads(text)
    del data["state"]
    _refused(household, json.dumps(data), "lacks state")


def test_another_env_version_or_task_is_refused(household):
    snap = snapshot(household)
    _refused(household, dataclasses.replace(snap, env_id="agentgym/WebShop-v0"), "agentgym/WebShop-v0")
    _refused(household, dataclasses.replace(snap, version=snap.version + 1), "version")
    other = split_tasks(household.unwrapped.task_space, "train")[1]
    _refused(household, dataclasses.replace(snap, task_id=other.task_id), "reset it with task")
    webshop, _ = _played("agentgym/WebShop-v0")
    try:
        _refused(webshop, snap, "agentgym/Household-v0")  # a household snapshot into a web shop
    finally:
        webshop.close()


def test_a_restore_needs_an_episode_of_the_task():
    env = gym.make("agentgym/Household-v0")
    source, _ = _played("agentgym/Household-v0")
    with pytest.raises(SnapshotError, match="reset"):
        restore(env, snapshot(source))
    env.close(), source.close()


def test_household_refuses_impossible_states(household):
    snap = snapshot(household)
    n = len(snap.state["obj_loc"])
    _refused(household, _edited(snap, held=0, obj_loc=[0] * n), "held object")  # held but lying on a receptacle
    _refused(household, _edited(snap, obj_loc=snap.state["obj_loc"][:-1]), "obj_loc")
    _refused(household, _edited(snap, loc=99), "loc")
    _refused(household, _edited(snap, shaped_rewards=True), "shaped_rewards")


def test_webshop_search_and_tools_refuse_impossible_states():
    env, _ = _played("agentgym/WebShop-v0")
    snap = snapshot(env)
    _refused(env, _edited(snap, kind="item", asin="B000NOSUCH"), "no page")
    _refused(env, _edited(snap, done=True), "done")
    env.close()
    env, _ = _played("agentgym/SearchQA-v0", steps=1)
    snap = snapshot(env)
    _refused(env, _edited(snap, opened=["no-such-doc"]), "no document")
    _refused(env, _edited(snap, success=True), "answer")
    env.close()
    env, _ = _played("agentgym/ToolUse-v0", steps=1)
    snap = snapshot(env)
    apps = copy.deepcopy(snap.state["apps"])
    apps["today"] = "1999-01-01"
    _refused(env, _edited(snap, apps=apps), "today")
    _refused(env, _edited(snap, touched=["the moon"]), "touched")
    env.close()


def test_alfworld_refuses_commands_that_do_not_play_or_reach_another_state():
    pytest.importorskip("alfworld", reason="needs the alfworld extra")
    env, _ = _played("agentgym/ALFWorld-v0", steps=2)
    try:
        snap = snapshot(env)
        _refused(env, _edited(snap, commands=[*snap.state["commands"], "fly to the moon"]), "not admissible")
        _refused(env, _edited(snap, anchor="0" * 16), "another state")
        restore(env, snap)  # the refusals left the engine able to take the real one
        assert snapshot(env) == snap
    finally:
        env.close()


@pytest.mark.skipif(not shutil.which("bwrap"), reason="bubblewrap not installed")
def test_swe_refuses_escaping_paths_and_workspaces_over_the_cap():
    from agentgym.envs.swe.snapshot import MAX_WORKSPACE_BYTES

    env, _ = _played("agentgym/SWE-v0", steps=1)
    try:
        snap = snapshot(env)
        entries = copy.deepcopy(snap.state["workspace"])
        entries.append({"path": "../escape.txt", "kind": "file", "mode": 0o644, "mtime_ns": 0, "data": ""})
        _refused(env, _edited(snap, workspace=entries), "leaves the workspace")
        entries[-1] = {"path": "big.bin", "kind": "file", "mode": 0o644, "mtime_ns": 0,
                       "data": "A" * (4 * (MAX_WORKSPACE_BYTES // 3 + 2))}
        _refused(env, _edited(snap, workspace=entries), "cap")
        (env.unwrapped.workspace / "data.bin").write_bytes(b"\0" * (MAX_WORKSPACE_BYTES + 1))
        with pytest.raises(SnapshotError, match="MiB of files"):
            snapshot(env)
    finally:
        env.close()


class NoSnapshots(TextEnv):
    task_space = agentgym.get_task_space("agentgym/Household-v0")

    def _reset(self, task):
        return "", {}


def test_an_env_without_the_contract_gets_one_clear_error():
    with pytest.raises(SnapshotUnsupported) as err:
        snapshot(NoSnapshots())
    assert "\n" not in str(err.value) and "_get_state" in str(err.value)
    assert not agentgym.snapshot.supports_snapshots(NoSnapshots())
