"""A Household server started once per module with `agentgym serve` (a child process on a free
loopback port), and a local env to compare its episodes with."""

from __future__ import annotations

import socket

import pytest

pytest.importorskip("openenv")

HOUSEHOLD = "agentgym/Household-v0"


@pytest.fixture(scope="module")
def household_server():
    from agentgym.integrations.openenv_server import ServerProcess

    with ServerProcess(HOUSEHOLD, max_sessions=20) as server:
        yield server


def connect_as(server, host: str, query: str = "", **kwargs):
    """A WebSocket to `server` as a client on another machine opens it: its one `Host` header names
    `host` (the TCP connection still goes to the loopback port). websockets' `additional_headers`
    cannot stand in: it adds a second Host beside its own, which uvicorn's h11 parser answers with
    HTTP 400 before the server sees the request."""
    from websockets.sync.client import connect

    sock = socket.create_connection(("127.0.0.1", server.port), timeout=60)
    return connect(f"ws://{host}/ws{query}", sock=sock, open_timeout=60, **kwargs)


def local_episode(task, plan, seed=0):
    """(observations, rewards, infos) of `plan` on a local env: what a server must reproduce."""
    import agentgym

    env = agentgym.make(HOUSEHOLD)
    try:
        obs, info = env.reset(seed=seed, options={"task": task})
        out = [(obs, 0.0, info)]
        for action in plan:
            obs, reward, terminated, truncated, info = env.step(action)
            out.append((obs, reward, info))
            if terminated or truncated:
                break
        return out
    finally:
        env.close()
