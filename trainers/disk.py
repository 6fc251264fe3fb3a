"""A full disk during training, said in one line: which disk, which folder, what is intact.

Training writes checkpoints, metrics, trajectories and the final model into the run dir; when
the filesystem holding it fills up (ENOSPC, or EDQUOT for a quota), the run stops with a
DiskFullError naming the mount point, its free space and the run dir, instead of a traceback.
Checkpoints are written into a temporary folder and renamed into place (trainers/checkpoint.py),
so the last complete one stays the one `--resume` continues from.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

from agentgym.errors import AgentGymError

FULL = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))


class DiskFullError(AgentGymError, OSError):
    pass


def is_disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in FULL


def mount_point(path: str | os.PathLike) -> Path:
    """The mount point of the filesystem holding `path` (its nearest existing folder)."""
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    while not os.path.ismount(path) and path != path.parent:
        path = path.parent
    return path


def disk_full_error(folder: str | os.PathLike, exc: OSError) -> DiskFullError:
    """One line: the disk (mount point, free space), the folder, and what to do."""
    disk = mount_point(folder)
    try:
        free = f"{shutil.disk_usage(disk).free / 2**30:.2f} GiB free"
    except OSError:
        free = "free space unknown"
    quota = " (your quota on it)" if exc.errno == getattr(errno, "EDQUOT", None) else ""
    from agentgym.trainers.checkpoint import latest_checkpoint_name

    last = latest_checkpoint_name(folder)
    kept = f"the last checkpoint, {last}, is intact: free space and rerun with --resume" if last else \
        "no checkpoint was written yet: free space and rerun"
    return DiskFullError(exc.errno, f"the disk holding {folder} is full{quota} ({disk}, {free}) while writing "
                                    f"{Path(exc.filename).name if exc.filename else 'the run'}: {kept} (or set run_dir "
                                    "on a disk with room)")
