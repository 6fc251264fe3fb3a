"""Issue 38: WebShop-Browser-v0 pickles after reset (the copy plays on its own browser), and a
killed browser or killed process leaves no Chromium or Playwright temp folders."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time

import pytest

pytest.importorskip("playwright")
from agentgym.envs.webshop.browser import chromium_path  # noqa: E402

if not os.path.exists(chromium_path()):
    pytest.skip("no Chromium", allow_module_level=True)

from agentgym.envs.webshop.env import WebShopEnv  # noqa: E402
from agentgym.envs.webshop.tasks import WebShopTaskSpace  # noqa: E402

# a browser call that hangs fails its own test (as in test_browser.py), not the whole run
pytestmark = pytest.mark.timeout(180)

SPACE = WebShopTaskSpace()
LEFTOVER = ("org.chromium.", ".org.chromium.", "playwright")  # Chromium's and Playwright's own: never left in /tmp


def _tmp(pid: int | None = None) -> set[str]:
    """The temp folders a browser env of process `pid` (default: this one) could leave: ours carry
    their owner's pid (other processes on the machine, a parallel test run, make their own)."""
    ours = f"agentgym-web-{pid or os.getpid()}."
    return {n for n in os.listdir(tempfile.gettempdir()) if n.startswith(LEFTOVER) or n.startswith(ours)}


def _solve(env, task) -> bool:
    env.reset(options={"task": task})
    for action in SPACE.solve(task):
        *_, info = env.step(action)
    return bool(info["success"])


def test_the_browser_env_pickles_after_reset_and_the_copy_plays():
    task = SPACE.split("train")[2]
    env = WebShopEnv(backend="browser")
    copy = None
    try:
        env.reset(options={"task": task})
        copy = pickle.loads(pickle.dumps(env))
        assert _solve(copy, task) and _solve(env, task)
    finally:
        env.close()
        if copy is not None:
            copy.close()


def test_a_killed_browser_leaves_no_temp_folders():
    before = _tmp()
    env = WebShopEnv(backend="browser")
    task = SPACE.split("train")[0]
    try:
        env.reset(options={"task": task})
        os.kill(env.backend.browser_pid, signal.SIGKILL)
        time.sleep(0.5)
        assert _solve(env, task)  # relaunched
    finally:
        env.close()
    time.sleep(0.5)
    assert _tmp() - before == set(), _tmp() - before


WORKER = """
from agentgym.envs.webshop.env import WebShopEnv
from agentgym.envs.webshop.tasks import WebShopTaskSpace
env = WebShopEnv(backend="browser")
env.reset(options={"task": WebShopTaskSpace().split("train")[0]})
print("ready", env.backend.browser_pid, flush=True)
import sys; sys.stdin.read()
"""


def _wait_until_group_exits(pgid: int, timeout: float = 20.0) -> None:
    """Until no live process (zombies aside) is left in process group `pgid`, read from /proc."""
    def alive() -> bool:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != b"Z":
                return True
        return False

    deadline = time.monotonic() + timeout
    while alive() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_a_killed_process_leaves_folders_the_next_launch_removes():
    from agentgym.envs.webshop.browser import sweep_stale_tmp

    before = _tmp()
    proc = subprocess.Popen([sys.executable, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        ready, browser = proc.stdout.readline().split()
        assert ready == "ready"
        left = _tmp(proc.pid) - before
        assert any(n.startswith("agentgym-web-") for n in left), left
        os.killpg(proc.pid, signal.SIGKILL)  # the process, its driver and its browser
        proc.wait()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    _wait_until_group_exits(proc.pid)  # a dying driver can still write into its folder (seen under load)
    # Playwright starts Chromium in a process group of its own: orphaned, it shuts down on its
    # own and writes its profile into the driver's folder as it goes (seen under load)
    _wait_until_group_exits(int(browser))
    sweep_stale_tmp()  # what every later browser launch does first
    assert _tmp(proc.pid) - before == set(), _tmp(proc.pid) - before
