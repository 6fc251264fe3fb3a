"""Fixtures every test folder may use: one local Ray (2 CPUs, no dashboard) for the tests that use Ray, and
`play`, which plays a list of actions on an env from a task's reset."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def ray_local():
    ray = pytest.importorskip("ray", reason="pip install 'agentgym-credit[ray]'")
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


@pytest.fixture
def play():
    def run(env, task, actions):
        """Reset on `task`, play `actions`; the last (obs, reward, terminated, truncated, info)."""
        obs, info = env.reset(options={"task": task})
        out = (obs, 0.0, False, False, info)
        for a in actions:
            out = env.step(a)
        return out

    return run
