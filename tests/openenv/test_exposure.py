"""Issue 38: what the OpenEnv server exposed. Sessions that only a request created are freed
when idle, one attached with /ws?session_id= when its socket closes; foreign Host/Origin are
refused; held-out tasks are not listed to other machines; binding beyond loopback needs
--allow-remote and a failed bind says why; frames that are not JSON objects keep the session;
an abrupt disconnect logs no ASGI exception. Each failed on the code before the fix."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest

from .conftest import HOUSEHOLD, connect_as

pytest.importorskip("openenv")
import httpx  # noqa: E402
from websockets.exceptions import InvalidStatus  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def server():
    from agentgym.integrations.openenv_server import ServerProcess

    with ServerProcess(HOUSEHOLD, max_sessions=2, extra_args=["--idle-timeout", "1"]) as s:
        yield s


def _ws_url(server, query=""):
    return server.base_url.replace("http://", "ws://") + "/ws" + query


def _mcp_create(server):
    r = httpx.post(server.base_url + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create",
                                                   "params": {}}, timeout=60)
    return r.json()


def _open(server) -> int:
    return httpx.get(server.base_url + "/agentgym/sessions", timeout=60).json()["open"]


def _wait(cond, timeout=30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.25)
    return False


def _reset(ws) -> dict:
    ws.send(json.dumps({"type": "reset", "data": {"split": "train", "index": 0}}))
    return json.loads(ws.recv(timeout=60))


def test_sessions_made_by_requests_are_freed_when_idle(server):
    assert _wait(lambda: _open(server) == 0)
    first, second = _mcp_create(server), _mcp_create(server)
    assert "session_id" in first["result"] and "session_id" in second["result"]
    assert "error" in _mcp_create(server)  # --max-sessions 2 is full
    assert _wait(lambda: _open(server) == 0, timeout=20), "idle sessions were never freed"
    with connect(_ws_url(server), open_timeout=60) as ws:  # the server serves again
        assert _reset(ws)["type"] == "observation"


def test_an_attached_session_is_freed_when_its_socket_closes(server):
    assert _wait(lambda: _open(server) == 0)
    sid = _mcp_create(server)["result"]["session_id"]
    with connect(_ws_url(server, f"?session_id={sid}"), open_timeout=60) as ws:
        assert _reset(ws)["type"] == "observation"
    assert _wait(lambda: _open(server) == 0, timeout=3), "the attached session outlived its socket"


def test_a_connected_session_is_not_reaped_while_idle(server):
    with connect(_ws_url(server), open_timeout=60) as ws:
        assert _reset(ws)["type"] == "observation"
        time.sleep(7)  # several idle timeouts and reaper rounds
        ws.send(json.dumps({"type": "step", "data": {"action": "look"}}))
        reply = json.loads(ws.recv(timeout=60))
        assert reply["type"] == "observation", reply


@pytest.mark.parametrize("headers", [{"Origin": "http://evil.example"}, {"Host": "evil.example:8000"}])
def test_foreign_origin_or_host_is_refused(server, headers):
    with pytest.raises(InvalidStatus) as refused:
        if "Host" in headers:
            connect_as(server, headers["Host"])
        else:
            connect(_ws_url(server), additional_headers=headers, open_timeout=60)
    assert refused.value.response.status_code == 403  # the server's refusal, not a malformed handshake
    r = httpx.get(server.base_url + "/Household-v0/splits", headers=headers, timeout=60)
    assert r.status_code == 403 and "allow" in r.json()["detail"]


def test_a_request_with_two_host_headers_is_refused_whichever_parser_runs():
    """h11 answers it 400 itself; httptools (uvicorn[standard]) passes both on, and the server then
    read the last one: a foreign name first and a loopback one last got a loopback-only server's
    held-out listing. The app is driven through ASGI, as uvicorn would with httptools."""
    import asyncio

    from agentgym.integrations.openenv_server import create_app

    app = create_app(HOUSEHOLD, max_sessions=1)

    async def get(hosts):
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
                 "scheme": "http", "path": "/Household-v0/splits", "raw_path": b"/Household-v0/splits",
                 "root_path": "", "query_string": b"", "client": ("127.0.0.1", 50000),
                 "server": ("127.0.0.1", 8000), "headers": [(b"host", h.encode()) for h in hosts]}
        sent = []

        async def receive():
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message):
            sent.append(message)

        await app(scope, receive, send)
        return next(m["status"] for m in sent if m["type"] == "http.response.start")

    assert asyncio.run(get(["127.0.0.1:8000"])) == 200
    assert asyncio.run(get(["evil.example:8000"])) == 403
    assert asyncio.run(get(["evil.example:8000", "127.0.0.1:8000"])) == 400


def test_heldout_tasks_are_not_listed_to_other_machines():
    from agentgym.integrations.openenv_server import ServerProcess

    with ServerProcess(HOUSEHOLD, max_sessions=2, extra_args=["--allow-remote"]) as s:
        foreign = {"Host": "gpu-box.example:8000"}
        names = [x["name"] for x in httpx.get(s.base_url + "/Household-v0/splits", headers=foreign).json()]
        assert names == ["train"]
        r = httpx.post(s.base_url + "/Household-v0/tasks", json={"split": "heldout"}, headers=foreign)
        assert r.status_code == 404 and "heldout" not in r.text.replace("'heldout'", "")
        assert httpx.post(s.base_url + "/Household-v0/num_tasks", json={"split": "heldout_unseen"},
                          headers=foreign).status_code == 404
        local = [x["name"] for x in httpx.get(s.base_url + "/Household-v0/splits").json()]
        assert local == ["train", "heldout", "heldout_unseen"]


def test_malformed_frames_keep_the_session(server):
    with connect(_ws_url(server), open_timeout=60, max_size=None) as ws:
        assert _reset(ws)["type"] == "observation"
        for frame in ("[1, 2]", '"text"', "42", "[" * 100_000 + "]" * 100_000, b"\x00\x01binary", "{not json"):
            ws.send(frame)
            reply = json.loads(ws.recv(timeout=60))
            assert reply["type"] == "error", reply
        ws.send(json.dumps({"type": "step", "data": {"action": "look"}}))
        assert json.loads(ws.recv(timeout=60))["type"] == "observation"


# the socket is cut without a close frame, so it cannot be opened as a context manager that closes it
@pytest.mark.filterwarnings("ignore:connect\\(\\) must be used as a context manager:DeprecationWarning")
def test_an_abrupt_disconnect_logs_no_asgi_exception(server):
    for _ in range(3):
        ws = connect(_ws_url(server), open_timeout=60)
        _reset(ws)
        ws.send(json.dumps({"type": "step", "data": {"action": "look"}}))
        ws.socket.shutdown(socket.SHUT_RDWR)  # gone without a close frame
        ws.socket.close()
    time.sleep(2)
    assert "Exception in ASGI application" not in server.log(), server.log()[-2000:]


def _serve(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "agentgym.cli", "serve", HOUSEHOLD, *args], capture_output=True,
                          text=True, timeout=timeout)


def test_binding_beyond_loopback_needs_allow_remote_and_bind_errors_say_why():
    out = _serve("--host", "0.0.0.0", "--port", "1")
    lines = [x for x in out.stderr.splitlines() if x.strip()]
    assert out.returncode != 0 and len(lines) == 1 and "--allow-remote" in lines[0], out.stderr
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        out = _serve("--port", str(busy.getsockname()[1]))
    lines = [x for x in out.stderr.splitlines() if x.strip()]
    assert out.returncode != 0 and len(lines) == 1 and "in use" in lines[0], out.stderr
    out = _serve("--host", "192.0.2.1", "--allow-remote", "--port", "8000")  # TEST-NET: not this machine
    lines = [x for x in out.stderr.splitlines() if x.strip()]
    assert out.returncode != 0 and len(lines) == 1 and "not an address of this machine" in lines[0], out.stderr
