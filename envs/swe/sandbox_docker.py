"""The docker backend: the same interface on a container, for users with a docker engine.

One container per sandbox (image with python and pytest; default `python:3.11-slim` plus
pytest you install, or any image you name), no network, read-only root, a size-limited tmpfs
/tmp, pids/memory/cpu limits from `Limits`, the host workspace bind-mounted at /workspace.
Each command is a `docker exec` wrapped in `timeout -s KILL`; when it ends, processes it left
behind are killed (`pkill -KILL -u agent` inside the container, the command's user).
"""

from __future__ import annotations

import time

from agentgym.envs.swe.sandbox import CommandResult, Limits, Sandbox, SandboxUnavailable
from agentgym.envs.swe.sandbox_bwrap import SUPPORT_DIR
from agentgym.errors import require

DEFAULT_IMAGE = "python:3.11-slim"
AGENT_UID = 1000


class DockerSandbox(Sandbox):
    name = "docker"

    workspace_dir = "/workspace"

    def __init__(self, workspace, limits: Limits | None = None, image: str = DEFAULT_IMAGE, client=None,
                 suite=None):
        super().__init__(workspace, limits, suite)  # not mounted: docker grades fail closed

        docker = require("docker", "swe")
        try:
            self.client = client or docker.from_env()
            self.client.ping()
        except Exception as exc:  # the SDK raises several unrelated types for "no engine"
            raise SandboxUnavailable(f"no docker engine is reachable ({exc}); use backend='bwrap'") from exc
        lim = self.limits
        try:
            self.container = self.client.containers.run(
                image,
                command=["sleep", "infinity"],
                detach=True,
                network_disabled=True,
                read_only=True,
                tmpfs={"/tmp": f"size={lim.tmp_bytes}"},
                volumes={
                    str(self.workspace): {"bind": "/workspace", "mode": "rw"},
                    str(SUPPORT_DIR): {"bind": "/.agentgym/support", "mode": "ro"},
                },
                working_dir="/workspace",
                environment={"PYTHONPATH": "/.agentgym/support", "PYTHONDONTWRITEBYTECODE": "1", "HOME": "/tmp"},
                pids_limit=lim.processes,
                mem_limit=lim.memory_bytes,
                nano_cpus=1_000_000_000,
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                ulimits=[docker.types.Ulimit(name="fsize", soft=lim.file_size_bytes, hard=lim.file_size_bytes),
                         docker.types.Ulimit(name="nofile", soft=lim.open_files, hard=lim.open_files)],
                auto_remove=True,
            )
        except Exception as exc:
            raise SandboxUnavailable(f"cannot start a container from {image!r}: {exc}") from exc

    support_dir = "/.agentgym/support"

    def run(self, command: str, timeout: float | None = None, env: dict[str, str] | None = None,
            channel_key: bytes | None = None) -> CommandResult:
        # No report channel through docker exec yet: result.channel stays None and grading
        # fails closed (score 0) rather than trusting the command's output.
        t = self._timeout(timeout)
        start = time.monotonic()
        try:
            exec_id = self.client.api.exec_create(
                self.container.id, ["timeout", "-s", "KILL", str(t), "bash", "-c", command],
                user=str(AGENT_UID), workdir="/workspace", environment=env or {},
            )["Id"]
            stream = self.client.api.exec_start(exec_id, stream=True, demux=False)
            out = bytearray()
            capped = False
            for chunk in stream:
                room = self.limits.output_bytes - len(out)
                out += chunk[: max(room, 0)]
                if len(chunk) > room:
                    capped = True
                    break
            code = self.client.api.exec_inspect(exec_id).get("ExitCode")
            # nothing the command started may outlive it
            self.container.exec_run(["pkill", "-KILL", "-u", str(AGENT_UID)], user="root")
        except Exception as exc:
            raise SandboxUnavailable(f"docker exec failed: {exc}") from exc
        timed_out = code == 137 and time.monotonic() - start >= t - 0.5
        return CommandResult(
            output=out.decode("utf-8", "replace"),
            exit_code=None if (timed_out or capped) else code,
            timed_out=timed_out,
            output_capped=capped,
            duration=time.monotonic() - start,
        )

    def close(self) -> None:
        container = getattr(self, "container", None)
        if container is not None:
            try:
                container.remove(force=True)
            except Exception:
                pass
            self.container = None


def docker_works() -> bool:
    try:
        import docker

        docker.from_env().ping()
        return True
    except Exception:
        return False
