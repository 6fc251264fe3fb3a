"""One interface for running an agent's shell commands against a repository workspace.

The workspace is a plain folder on the host. The file tools (view, str_replace, create) edit it
directly, with paths confined to it (see workspace.py); shell commands go through a backend:

- `bwrap` (default): bubblewrap, no network, read-only system, fresh tmpfs copy of the workspace
  per command (copied back afterwards), own /tmp and PID namespace, rlimits, unprivileged uid.
- `docker`: the docker SDK, same interface, for users with an engine.
- `local`: plain subprocesses in the workspace folder. Trusted code only; never the default.

A backend that cannot run at all (bwrap missing or broken, no docker engine) raises
`SandboxUnavailable`: that is an infrastructure failure, not the agent's.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from agentgym.errors import AgentGymError
from agentgym.errors import ConfigError

BACKENDS = ("bwrap", "docker", "local")


class SandboxUnavailable(AgentGymError, RuntimeError):
    """The sandbox itself is broken or missing (infrastructure), not the command inside it."""


@dataclass(frozen=True)
class Limits:
    timeout: float = 30.0  # wall-clock seconds per command (default; the agent may ask for less)
    max_timeout: float = 120.0  # the most an agent may ask for
    cpu_seconds: int = 60
    memory_bytes: int = 1 << 30  # address space per process
    processes: int = 96  # per sandbox uid: a fork bomb dies here
    file_size_bytes: int = 16 << 20
    open_files: int = 256
    workspace_bytes: int = 64 << 20  # tmpfs size of the workspace copy (bounds disk use)
    tmp_bytes: int = 32 << 20
    output_bytes: int = 1 << 20  # output beyond this is dropped and the command killed


@dataclass
class CommandResult:
    output: str
    exit_code: int | None  # None when the command was killed (timeout, output flood)
    timed_out: bool = False
    output_capped: bool = False
    duration: float = 0.0
    notes: list[str] = field(default_factory=list)
    channel: bytes | None = None  # what the command wrote on its report channel (grading), if asked

    def describe(self) -> str:
        """The output as the agent sees it, with what happened to the command."""
        parts = [self.output.rstrip("\n")] if self.output.strip() else []
        if self.output_capped:
            parts.append("[output limit reached: the command was stopped]")
        if self.timed_out:
            parts.append(f"[command timed out after {self.duration:.1f}s and was killed]")
        elif self.exit_code not in (0, None):
            parts.append(f"[exit code {self.exit_code}]")
        parts.extend(f"[{n}]" for n in self.notes)
        return "\n".join(parts) if parts else "[no output]"


class Sandbox:
    """Base class: `run(command, timeout)` in the workspace; `close()` releases resources."""

    name = "base"
    #: where the support files (the grading harness) are, as the command sees them
    support_dir = str(Path(__file__).parent / "data" / "sandbox")

    def __init__(self, workspace: str | Path, limits: Limits | None = None, suite: str | Path | None = None):
        self.workspace = Path(workspace)
        self.limits = limits or Limits()
        # grading only: the project's tests, which a command may read but never change
        self.suite = Path(suite) if suite is not None else None

    @property
    def workspace_dir(self) -> str:
        """The workspace as a command sees it."""
        return str(self.workspace)

    @property
    def suite_dir(self) -> str | None:
        """The test suite folder as a command sees it (None when the sandbox has none)."""
        return None if self.suite is None else str(self.suite)

    def run(self, command: str, timeout: float | None = None, env: dict[str, str] | None = None,
            channel_key: bytes | None = None) -> CommandResult:
        """Run `command`. With `channel_key`, the command also gets a report channel: `{fd}` in
        the command is replaced by the number of a socket on which `channel_key` + newline is
        waiting to be read, and whatever the command writes there comes back in
        `result.channel` (the grader's unforgeable-by-stdout report path)."""
        raise NotImplementedError

    def close(self) -> None:
        pass

    def workspace_changed(self) -> None:
        """Called after the host-side file tools edit the workspace (backends that cache it)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _timeout(self, timeout: float | None) -> float:
        t = self.limits.timeout if timeout is None else float(timeout)
        return max(0.1, min(t, self.limits.max_timeout))


# Each backend's class by import string: the backends import this module's base class, so this
# module names them without importing them (loaded on first use).
BACKEND_CLASSES = {
    "bwrap": "agentgym.envs.swe.sandbox_bwrap:BwrapSandbox",
    "docker": "agentgym.envs.swe.sandbox_docker:DockerSandbox",
    "local": "agentgym.envs.swe.sandbox_local:LocalSandbox",
}


def make_sandbox(backend: str, workspace: str | Path, limits: Limits | None = None, **kwargs) -> Sandbox:
    if backend not in BACKEND_CLASSES:
        raise ConfigError(f"unknown sandbox backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    import importlib

    module, _, name = BACKEND_CLASSES[backend].partition(":")
    return getattr(importlib.import_module(module), name)(workspace, limits, **kwargs)


# --- shared process plumbing -------------------------------------------------------------------

def ulimit_args(limits: Limits, processes: int | None = None) -> str:
    """bash `ulimit` options for the limits (soft and hard). Set by the shell inside the sandbox
    rather than by a Python preexec_fn, which would force a slow fork of the whole interpreter."""
    nproc = limits.processes if processes is None else processes
    return (f"-t {limits.cpu_seconds} -v {limits.memory_bytes // 1024} -u {nproc} "
            f"-f {limits.file_size_bytes // 1024} -n {limits.open_files} -c 0")


def run_process(
    argv: list[str],
    *,
    timeout: float,
    output_cap: int,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    pass_fds: tuple[int, ...] = (),
    extra_read_fd: int | None = None,
    extra_cap: int = 0,
    close_after_spawn: tuple[int, ...] = (),
    channel_fd: int | None = None,
    channel_cap: int = 4 << 20,
) -> tuple[CommandResult, bytes | None]:
    """Run argv in a new session, capturing stdout+stderr up to `output_cap` bytes and killing
    the whole session at the wall-clock deadline or when the output cap is hit.

    `extra_read_fd` is the read end of a second pipe the child writes to (bwrap streams the
    workspace back as a tar on it); its bytes are returned, None if more than `extra_cap`.
    `close_after_spawn` are our copies of fds handed to the child (closed once it started).
    `channel_fd` is our end of the report socket: its bytes go to `result.channel`.
    Every fd given here is closed before returning, also when the process cannot start."""
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            pass_fds=pass_fds,
            close_fds=True,
            start_new_session=True,
        )
    except (OSError, ValueError) as exc:
        for fd in (extra_read_fd, channel_fd):
            if fd is not None:
                os.close(fd)
        if isinstance(exc, ValueError):  # e.g. an embedded NUL byte: the caller's input, not the sandbox
            raise
        raise SandboxUnavailable(f"cannot start {argv[0]}: {exc}") from exc
    finally:
        for fd in close_after_spawn:
            os.close(fd)

    out, extra, chan = bytearray(), bytearray(), bytearray()
    capped = timed_out = extra_overflow = chan_overflow = False
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, "out")
    if extra_read_fd is not None:
        sel.register(extra_read_fd, selectors.EVENT_READ, "extra")
    if channel_fd is not None:
        sel.register(channel_fd, selectors.EVENT_READ, "channel")
    deadline = start + timeout
    open_streams = len(sel.get_map())
    while open_streams:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        for key, _ in sel.select(timeout=min(remaining, 0.5)):
            fd = key.fileobj if isinstance(key.fileobj, int) else key.fileobj.fileno()
            chunk = os.read(fd, 65536)
            if not chunk:
                sel.unregister(key.fileobj)
                open_streams -= 1
                continue
            if key.data == "out":
                room = output_cap - len(out)
                out += chunk[: max(room, 0)]
                if len(chunk) > room:
                    capped = True
            elif key.data == "channel":
                if not chan_overflow:
                    chan += chunk
                    if len(chan) > channel_cap:
                        chan_overflow = True
                        chan.clear()
            elif not extra_overflow:
                extra += chunk
                if len(extra) > extra_cap:
                    extra_overflow = True
                    extra.clear()
        if capped:
            break
    sel.close()
    if timed_out or capped:
        kill_group(proc)
    try:
        proc.wait(timeout=max(0.5, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_group(proc)
        proc.wait()
    proc.stdout.close()
    if extra_read_fd is not None:
        os.close(extra_read_fd)
    if channel_fd is not None:
        os.close(channel_fd)
    result = CommandResult(
        output=out.decode("utf-8", errors="replace"),
        exit_code=None if (timed_out or capped) else proc.returncode,
        timed_out=timed_out,
        output_capped=capped,
        duration=time.monotonic() - start,
        channel=None if (channel_fd is None or chan_overflow) else bytes(chan),
    )
    tar = None if (extra_overflow or extra_read_fd is None) else bytes(extra)
    return result, tar


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the child's whole session/process group (it was started with setsid)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except ProcessLookupError:
        pass


def open_channel(key: bytes) -> tuple[int, int]:
    """A socket pair for a command's report channel: (our end, the child's end, at fd >= 10).
    `key` + newline is already waiting on the child's end. Sockets, unlike pipes, cannot be
    reopened through /proc/PID/fd by another process."""
    import fcntl
    import socket

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ours.sendall(key + b"\n")
    child_fd = fcntl.fcntl(theirs.fileno(), fcntl.F_DUPFD, 10)
    theirs.close()
    our_fd = ours.detach()
    return our_fd, child_fd
