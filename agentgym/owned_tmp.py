"""Temporary folders named after the process that owns them (`<prefix><pid>.<start time>-...`), so
that any later process can tell a dead owner's folders (a killed rollout, a crashed worker) from a
live one's and remove them. Envs that keep files on disk (swe workspaces, webshop browser
profiles) make their folders here, each family under its own prefix."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path


def process_start_time(pid: int) -> int | None:
    """The start time of process `pid` (clock ticks since boot, /proc), None when it is gone or
    there is no /proc: with the pid it names one process, even after the pid is reused."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def owned_tmp_dir(prefix: str, suffix: str = "", parent: str | Path | None = None) -> Path:
    """A new temporary folder `<prefix><pid>.<start time>-<suffix>...` owned by this process."""
    pid = os.getpid()
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{pid}.{process_start_time(pid) or 0}-{suffix}",
                                 dir=parent))


def sweep_dead_owners(prefix: str, parent: str | Path | None = None) -> int:
    """Remove the `<prefix>*` folders in `parent` (default: the temp folder) whose owner process has
    exited; folders of live processes, and of other naming, are left alone. Returns how many."""
    parent = Path(parent or tempfile.gettempdir())
    owner = re.compile("^" + re.escape(prefix) + r"(\d+)\.(\d+)-")
    removed = 0
    try:
        names = os.listdir(parent)
    except OSError:
        return 0
    for name in names:
        m = owner.match(name)
        if m and process_start_time(int(m.group(1))) != int(m.group(2)):
            shutil.rmtree(parent / name, ignore_errors=True)
            removed += 1
    return removed
