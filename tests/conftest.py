"""Session-wide fixtures: one local Ray (2 CPUs, no dashboard) for the tests that use Ray."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def ray_local():
    ray = pytest.importorskip("ray", reason="pip install 'agentgym-credit[ray]'")
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()
