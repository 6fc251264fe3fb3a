"""Sandbox behaviour that is not an attack: the workspace round trip, limits, local backend."""

import os
import subprocess
import time

import pytest

from agentgym.envs.swe.sandbox import CommandResult, Limits, make_sandbox
from agentgym.errors import ConfigError


@pytest.mark.sandbox
def test_workspace_changes_round_trip(workspace):
    sb = make_sandbox("bwrap", workspace)
    res = sb.run("echo new > new.txt; mkdir -p a/b; echo deep > a/b/c.txt; touch .hidden; rm pkg/mod.py; ln -s a/b/c.txt link")
    assert res.exit_code == 0, res.output
    assert (workspace / "new.txt").read_text() == "new\n"
    assert (workspace / "a/b/c.txt").read_text() == "deep\n"
    assert (workspace / ".hidden").exists() and not (workspace / "pkg/mod.py").exists()
    assert (workspace / "link").is_symlink()
    # host-side edits are seen by the next command
    (workspace / "host.txt").write_text("from host")
    sb.workspace_changed()
    assert sb.run("cat host.txt").output == "from host"
    sb.run("rm -rf ./* ./.hidden")
    assert list(workspace.iterdir()) == []
    assert sb.run("echo back > x").exit_code == 0 and (workspace / "x").exists()


@pytest.mark.sandbox
def test_exit_code_env_and_cwd(workspace):
    sb = make_sandbox("bwrap", workspace)
    res = sb.run("cd /tmp; echo $FOO; exit 3", env={"FOO": "bar"})
    assert res.exit_code == 3 and res.output.strip() == "bar"
    assert "[exit code 3]" in res.describe()
    assert sb.run("pwd").output.strip() == "/workspace"  # every command starts in the repo root
    assert sb.run("python -c 'import pytest; print(pytest.__name__)'").output.strip() == "pytest"


@pytest.mark.sandbox
def test_timeout_is_clamped_to_max(workspace):
    sb = make_sandbox("bwrap", workspace, Limits(timeout=5, max_timeout=1))
    start = time.monotonic()
    res = sb.run("sleep 10", timeout=100)
    assert res.timed_out and time.monotonic() - start < 4


def test_local_backend_limits(workspace):
    sb = make_sandbox("local", workspace, Limits(timeout=1, output_bytes=1000))
    assert sb.run("pwd").output.strip() == str(workspace)
    res = sb.run("sleep 5")
    assert res.timed_out and res.duration < 3
    res = sb.run("yes")
    assert res.output_capped and len(res.output) <= 1000


def test_unknown_backend():
    with pytest.raises(ConfigError):
        make_sandbox("chroot", ".")


def test_describe():
    assert CommandResult("", 0).describe() == "[no output]"
    assert "timed out" in CommandResult("x", None, timed_out=True, duration=2).describe()


def test_sync_back_drops_entries_that_would_escape(tmp_path):
    import io
    import tarfile

    from agentgym.envs.swe.workspace import replace_from_tar

    ws = tmp_path / "ws"
    ws.mkdir()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        def add(name, kind=tarfile.REGTYPE, link="", data=b"x", mode=0o644):
            m = tarfile.TarInfo(name)
            m.type, m.linkname, m.mode = kind, link, mode
            m.size = len(data) if kind == tarfile.REGTYPE else 0
            tar.addfile(m, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
        add("ok.txt", mode=0o4777)
        add("../escape.txt")
        add("/abs.txt")
        add("up", tarfile.SYMTYPE, "../../etc/passwd")
        add("abs_link", tarfile.SYMTYPE, "/etc/passwd")
        add("inside_link", tarfile.SYMTYPE, "ok.txt")
        add("hard", tarfile.LNKTYPE, "/etc/passwd")
        add("dev", tarfile.CHRTYPE)
    notes = replace_from_tar(ws, buf.getvalue())
    assert sorted(p.name for p in ws.iterdir()) == ["inside_link", "ok.txt"]
    assert len(notes) == 6
    assert not (tmp_path / "escape.txt").exists()
    assert (ws / "ok.txt").stat().st_mode & 0o7777 == 0o755  # no setuid, no world write


@pytest.mark.sandbox
@pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox has a uid of its own only when run as root")
def test_processes_of_the_sandbox_uid_never_outlive_a_command(workspace):
    from agentgym.envs.swe.sandbox_bwrap import BwrapSandbox, _live_pids_of_user

    sb = BwrapSandbox(workspace)
    # A process of the sandbox's uid that escaped the PID namespace's teardown (the kernel kills
    # those asynchronously): the next command must not return while it lives.
    stray = subprocess.Popen(["/usr/bin/setpriv", f"--reuid={sb.uid}", f"--regid={sb.uid}", "--clear-groups",
                              "sleep", "60"])
    try:
        deadline = time.monotonic() + 5
        while not _live_pids_of_user(sb.uid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _live_pids_of_user(sb.uid), "the stray process did not start"
        assert sb.run("echo ok").output.strip() == "ok"
        assert _live_pids_of_user(sb.uid) == []
        assert stray.wait(timeout=5) == -9
    finally:
        stray.kill()
