"""Issue 52 items 12-13: a server started with --allow-remote plays held-out tasks only for this
machine (or for everyone with --serve-heldout), however a remote client names them; a reset a
client gets wrong is one bounded 4xx line, and the server's log does not grow with its values."""

from __future__ import annotations

import json

import pytest

from .conftest import HOUSEHOLD, connect_as

pytest.importorskip("openenv")
import httpx  # noqa: E402

import agentgym  # noqa: E402

FOREIGN = {"Host": "gpu-box.example:8000"}
pytestmark = pytest.mark.timeout(300)


def _heldout_ways():
    space = agentgym.get_task_space(HOUSEHOLD)
    held, unseen = space.split("heldout")[0], space.split("heldout_unseen")[0]
    relabelled = dict(unseen.to_dict(with_id=False), env_id="agentgym/Other-v0")
    return [{"split": "heldout", "index": 0}, {"split": "heldout_unseen", "seed": 3},
            {"task_id": held.task_id}, {"task": held.to_dict()}, {"task": relabelled}]


@pytest.fixture(scope="module")
def remote_server():
    from agentgym.integrations.openenv_server import ServerProcess

    with ServerProcess(HOUSEHOLD, max_sessions=4, extra_args=["--allow-remote"]) as s:
        yield s


def test_remote_clients_cannot_play_held_out_tasks_however_named(remote_server):
    url = remote_server.base_url
    for body in _heldout_ways():
        r = httpx.post(url + "/reset", json=body, headers=FOREIGN, timeout=60)
        assert r.status_code == 403 and "--serve-heldout" in r.json()["detail"], (body, r.text[:300])
        local = httpx.post(url + "/reset", json=body, timeout=60)  # this machine may (a relabelled copy: wrong env)
        assert local.status_code == (400 if "Other" in json.dumps(body) else 200), local.text[:300]
    assert httpx.post(url + "/reset", json={"split": "train", "index": 0}, headers=FOREIGN, timeout=60).status_code == 200
    with connect_as(remote_server, FOREIGN["Host"]) as ws:
        for body in _heldout_ways():
            ws.send(json.dumps({"type": "reset", "data": body}))
            reply = json.loads(ws.recv(timeout=60))
            assert reply["type"] == "error" and "--serve-heldout" in json.dumps(reply), reply
        ws.send(json.dumps({"type": "reset", "data": {"split": "train", "index": 0}}))
        assert json.loads(ws.recv(timeout=60))["type"] == "observation"  # the session stays usable


def test_the_operator_can_serve_held_out_tasks_to_remote_clients():
    from agentgym.integrations.openenv_server import ServerProcess

    with ServerProcess(HOUSEHOLD, max_sessions=2, extra_args=["--allow-remote", "--serve-heldout"]) as s:
        r = httpx.post(s.base_url + "/reset", json={"split": "heldout", "index": 0}, headers=FOREIGN, timeout=60)
        assert r.status_code == 200


def test_client_errors_on_reset_are_bounded_4xx_and_keep_the_log_small(remote_server):
    url = remote_server.base_url
    huge = "x" * 5_000_000
    before = len(remote_server.log())
    cases = [{"split": "nope"}, {"split": "train", "index": 10**9}, {"task_id": huge}, {huge[:100_000]: 1},
             {"task": {"env_id": HOUSEHOLD, "params": {"x": huge}, "seed": 0}}, {"task": "not a dict"},
             {"seed": -1}, {"index": 3}]
    for body in cases:
        r = httpx.post(url + "/reset", json=body, timeout=60)
        assert 400 <= r.status_code < 500, (str(body)[:100], r.status_code, r.text[:300])
        assert len(r.content) < 5000
    assert len(remote_server.log()) - before < 20_000
