"""The docker backend speaks the same interface; its tests run only where an engine answers."""

import pytest

from agentgym.envs.swe.sandbox import SandboxUnavailable
from agentgym.envs.swe.sandbox_docker import docker_works

needs_engine = pytest.mark.skipif(not docker_works(), reason="no docker engine reachable")


def test_no_engine_is_an_infra_error(workspace, monkeypatch):
    """Without an engine the backend raises SandboxUnavailable (infra), not a command failure."""
    if docker_works():
        pytest.skip("an engine is running here")
    from agentgym.envs.swe.sandbox import make_sandbox

    with pytest.raises(SandboxUnavailable):
        make_sandbox("docker", workspace)


@needs_engine
def test_docker_runs_commands_with_limits(workspace):
    from agentgym.envs.swe.sandbox_docker import DockerSandbox

    with DockerSandbox(workspace) as sb:
        res = sb.run("echo hi > f.txt; cat f.txt; id -u")
        assert res.output.split()[0] == "hi" and res.output.split()[1] != "0"
        assert (workspace / "f.txt").exists()
        assert sb.run("sleep 30", timeout=1).timed_out
        assert sb.run("python -c \"import socket; socket.create_connection(('127.0.0.1', 9), timeout=1)\"").exit_code != 0
