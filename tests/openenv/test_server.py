"""`agentgym serve` tested with OpenEnv's own client classes on loopback."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

import agentgym
from agentgym.core import INFO_KEYS

from .conftest import HOUSEHOLD, local_episode

openenv = pytest.importorskip("openenv")
from openenv import GenericEnvClient  # noqa: E402

pytestmark = pytest.mark.timeout(900)


def _client(server):
    return GenericEnvClient(base_url=server.base_url, connect_timeout_s=60, message_timeout_s=120).sync()


def _space():
    return agentgym.get_task_space(HOUSEHOLD)


def _wait_live(server, want, timeout=90.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.sessions()["live"] == want:
            return True
        time.sleep(0.2)
    return False


def test_reset_step_state_replay_a_local_episode_exactly(household_server):
    task = _space().split("heldout")[0]
    plan = _space().solve(task)
    expected = local_episode(task, plan, seed=3)
    with _client(household_server) as env:
        first = env.reset(split="heldout", index=0, seed=3)
        assert first.observation["text"] == expected[0][0]
        assert first.metadata["task_id"] == task.task_id and set(INFO_KEYS) <= set(first.metadata)
        assert first.done is False
        for action, (obs, reward, info) in zip(plan, expected[1:]):
            result = env.step({"action": action})
            assert result.observation["text"] == obs and result.reward == reward
            assert result.metadata["anchor"] == info["anchor"]
            assert result.metadata["admissible_actions"] == info["admissible_actions"]
        assert result.done and result.metadata["success"] is True and result.metadata["score"] == 1.0
        assert result.metadata["terminated"] is True and result.metadata["truncated"] is False
        state = env.state()
        assert state["task_id"] == task.task_id and state["step_count"] == len(plan)
        assert state["done"] and state["success"]
        # the session plays on: a new episode on the same connection
        again = env.reset(task_id=task.task_id, seed=3)
        assert again.observation["text"] == expected[0][0] and env.state()["step_count"] == 0


def test_task_selection_through_reset_options(household_server):
    space = _space()
    with _client(household_server) as env:
        by_id = env.reset(task_id=space.split("train")[5].task_id)
        assert by_id.metadata["task_id"] == space.split("train")[5].task_id
        drawn = [env.reset(split="heldout", seed=11).metadata["task_id"] for _ in range(2)]
        assert drawn[0] == drawn[1] and drawn[0] in {t.task_id for t in space.split("heldout")}
        spec = space.split("heldout_unseen")[2]
        assert env.reset(task=spec.to_dict()).metadata["task_id"] == spec.task_id
        default = [env.reset(seed=4).metadata["task_id"] for _ in range(2)]
        assert default[0] == default[1] and default[0] in {t.task_id for t in space.split("train")}
        for bad, message in [({"task_id": "nope"}, "unknown task id"), ({"split": "dev"}, "no split"),
                             ({"split": "train", "index": 10**6}, "out of range"),
                             ({"colour": "red"}, "unknown reset option")]:
            with pytest.raises(RuntimeError, match=message):
                env.reset(**bad)
        assert env.reset(seed=1).observation["text"]  # still usable


def test_sixteen_concurrent_sessions_stay_isolated(household_server):
    """16 clients play 16 different tasks in lock-step; every transcript equals the local one,
    so no session ever saw another's state."""
    tasks = _space().split("heldout")[:16]
    plans = [_space().solve(t)[:6] for t in tasks]
    expected = [local_episode(t, p, seed=i) for i, (t, p) in enumerate(zip(tasks, plans))]
    rounds = max(len(p) for p in plans)
    barrier = threading.Barrier(16, timeout=300)
    got: dict[int, list] = {}
    errors: list[BaseException] = []

    def play(i):
        try:
            with _client(household_server) as env:
                barrier.wait()
                r = env.reset(task_id=tasks[i].task_id, seed=i)
                seen = [(r.observation["text"], r.metadata["anchor"])]
                for k in range(rounds):  # every thread waits every round: steps interleave
                    barrier.wait()
                    if k < len(plans[i]) and not r.done:
                        r = env.step({"action": plans[i][k]})
                        seen.append((r.observation["text"], r.metadata["anchor"]))
                seen.append(env.state()["task_id"])
                got[i] = seen
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=play, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    assert not errors, errors[0]
    for i in range(16):
        want = [(obs, info["anchor"]) for obs, _, info in expected[i]] + [tasks[i].task_id]
        assert got[i] == want, f"session {i} diverged from its own task"
    assert _wait_live(household_server, 0)


def test_hostile_actions_never_break_a_session(household_server):
    with _client(household_server) as env:
        with pytest.raises(RuntimeError, match="call reset before step"):
            env.step({"action": "look"})
        env.reset(split="train", index=0)
        for bad in ({"action": 3}, {"action": None}, {}, {"action": "look", "extra": 1}, {"act": "look"},
                    {"action": "x" * ((1 << 20) + 1)}):
            with pytest.raises(RuntimeError, match="Server error"):
                env.step(bad)
        for weird in ("\x00\x01\x02", "\u2603" * 50_000, "' OR 1=1; --", "{\"action\": \"look\"}",
                      "../../../../etc/passwd", "go to " * 10_000, "", " "):
            r = env.step({"action": weird})
            assert r.metadata["action_valid"] is False and isinstance(r.observation["text"], str)
        r = env.step({"action": "look"})
        assert r.metadata["action_valid"] is True
    # raw frames OpenEnv's client would never send: broken JSON, unknown types
    from websockets.sync.client import connect

    with connect(household_server.base_url.replace("http", "ws") + "/ws", open_timeout=60) as ws:
        for frame in ("{not json", '{"type": "explode"}', '{"type": "step"}', "[]" * 1000):
            ws.send(frame)
            assert '"error"' in ws.recv(timeout=60)
        ws.send('{"type": "reset", "data": {"split": "train", "index": 1}}')
        assert '"observation"' in ws.recv(timeout=60)


def test_step_after_the_episode_ended_changes_nothing(household_server):
    task = _space().split("train")[0]
    with _client(household_server) as env:
        env.reset(task_id=task.task_id)
        for action in _space().solve(task):
            last = env.step({"action": action})
        assert last.done
        after = env.step({"action": "look"})
        assert after.done and after.reward == 0.0 and "episode is over" in after.observation["text"]
        assert env.state()["step_count"] == len(_space().solve(task))


def test_a_vanished_client_has_its_session_reclaimed(household_server):
    assert _wait_live(household_server, 0)
    code = (
        "import sys, time\n"
        "from openenv import GenericEnvClient\n"
        f"env = GenericEnvClient(base_url={household_server.base_url!r}).sync()\n"
        "env.reset(split='train', index=2); env.step({'action': 'look'})\n"
        "print('ready', flush=True); time.sleep(120)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        assert household_server.sessions()["live"] == 1
        proc.kill()  # no close frame: the process is gone mid-episode
        proc.wait(60)
        assert _wait_live(household_server, 0), "the dead client's session was not reclaimed"
    finally:
        if proc.poll() is None:
            proc.kill()
    with _client(household_server) as env:  # and the slot is free again
        assert env.reset(split="train", index=2).observation["text"]


def test_server_restart_and_capacity():
    from agentgym.integrations.openenv_server import ServerProcess

    server = ServerProcess(HOUSEHOLD, max_sessions=2).start()
    try:
        env = _client(server)
        first = env.reset(split="train", index=3).observation["text"]
        env.step({"action": "look"})
        a, b = _client(server), _client(server)
        a.reset(seed=0)
        with pytest.raises(RuntimeError, match="CAPACITY"):
            b.reset(seed=0)  # a third session at --max-sessions 2
        a.close()
        b.close()
        server.stop()
        with pytest.raises(Exception):
            env.step({"action": "look"})  # the server is gone
        server.start()  # same port
        # the same client object reconnects: a new session, a new episode
        assert env.reset(split="train", index=3).observation["text"] == first
        assert env.step({"action": "look"}).metadata["action_valid"] is True
        env.close()
    finally:
        server.stop()


def test_unknown_env_id_is_one_line():
    out = subprocess.run([sys.executable, "-m", "agentgym.cli", "serve", "agentgym/Nope-v0", "--port", "1"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2
    lines = [line for line in out.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and "unknown environment 'agentgym/Nope-v0'" in lines[0], out.stderr


def test_health_schema_and_task_routes(household_server):
    import httpx

    base = household_server.base_url
    assert httpx.get(base + "/health").json()["status"] == "healthy"
    schema = httpx.get(base + "/schema").json()
    assert schema["action"]["properties"]["action"]["type"] == "string"
    assert "action" in schema["action"]["required"]
    splits = [s["name"] for s in httpx.get(base + "/Household-v0/splits").json()]
    assert splits == ["train", "heldout", "heldout_unseen"]
    n = httpx.post(base + "/Household-v0/num_tasks", json={"split": "heldout"}).json()["num_tasks"]
    assert n == len(_space().split("heldout"))
    task = httpx.post(base + "/Household-v0/task", json={"split": "heldout", "index": 4}).json()["task"]
    assert task["task_id"] == _space().split("heldout")[4].task_id
