"""The local backend: commands run as plain subprocesses in the workspace folder.

No isolation beyond rlimits and a process-group kill at the deadline: use it only for code you
trust (your own repositories, benchmarks' reference). It is never chosen by default.
"""

from __future__ import annotations

import os
import sys

from agentgym.envs.swe.sandbox import CommandResult, Limits, Sandbox, open_channel, run_process, ulimit_args
from agentgym.envs.swe.sandbox_bwrap import SUPPORT_DIR


class LocalSandbox(Sandbox):
    name = "local"

    def __init__(self, workspace, limits: Limits | None = None, suite=None):
        super().__init__(workspace, limits, suite)

    def run(self, command: str, timeout: float | None = None, env: dict[str, str] | None = None,
            channel_key: bytes | None = None) -> CommandResult:
        if "\x00" in command:
            raise ValueError("the command contains a NUL byte")
        chan_ours = chan_theirs = None
        if channel_key is not None:
            chan_ours, chan_theirs = open_channel(channel_key)
            command = command.replace("{fd}", str(chan_theirs))
        full_env = {
            "PATH": f"{os.path.join(sys.prefix, 'bin')}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.workspace),
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONPATH": str(SUPPORT_DIR),
            **(env or {}),
        }
        # Trusted code runs as ourselves, so RLIMIT_NPROC would count (and, for a normal user,
        # break on) all our own processes: leave it out here.
        limits = self.limits
        ulimits = ulimit_args(limits).replace(f"-u {limits.processes} ", "")
        result, _ = run_process(
            ["/bin/bash", "-c", f'ulimit {ulimits} && eval "$1"', "local", command],
            timeout=self._timeout(timeout),
            output_cap=limits.output_bytes,
            cwd=str(self.workspace),
            env=full_env,
            pass_fds=(chan_theirs,) if chan_theirs is not None else (),
            close_after_spawn=(chan_theirs,) if chan_theirs is not None else (),
            channel_fd=chan_ours,
        )
        return result
