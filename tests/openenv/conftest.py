"""A Household server started once per module with `agentgym serve` (a child process on a free
loopback port), and a local env to compare its episodes with."""

from __future__ import annotations

import pytest

pytest.importorskip("openenv")

HOUSEHOLD = "agentgym/Household-v0"


@pytest.fixture(scope="module")
def household_server():
    from agentgym.integrations.openenv_server import ServerProcess

    with ServerProcess(HOUSEHOLD, max_sessions=20) as server:
        yield server


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
