"""Issue 38: a SIGKILLed SWE worker's workspaces are removed at once by its reaper, without
waiting for another process to sweep; a live process's folders are never touched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

WORKER = """
import sys
from agentgym.envs.swe.env import SWEEnv
from agentgym.envs.swe.space import SWETaskSpace
env = SWEEnv(backend="local")
env.reset(options={"task": SWETaskSpace().split("train")[0]})
print(env.workspace, flush=True)
sys.stdin.read()
"""


def test_a_killed_workers_workspace_is_removed_by_its_reaper():
    proc = subprocess.Popen([sys.executable, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        ws = Path(proc.stdout.readline().strip())
        assert ws.is_dir()
        time.sleep(0.5)
        assert ws.is_dir(), "a live worker's workspace was removed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 10
        while ws.parent.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not ws.parent.exists(), f"{ws.parent} outlived its SIGKILLed owner"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_second_temp_parent_keeps_the_live_processes_folders(tmp_path):
    from agentgym.envs.swe.workspace import temp_root

    first = temp_root()
    try:
        second = temp_root(tmp_path)  # replaces the reaper (it now watches two parents)
        time.sleep(0.5)
        assert first.is_dir() and second.is_dir()
    finally:
        import shutil

        shutil.rmtree(first, ignore_errors=True)
