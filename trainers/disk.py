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


# safetensors (every model save: checkpoints, final_model, SFT, a converted GGUF) reports a full disk
# as its own SafetensorError, "Error while serializing: IoError(Os { code: 28, kind: StorageFull, ... })"
_SAFETENSORS_FULL = ("StorageFull", "QuotaExceeded", "No space left on device", "Disk quota exceeded",
                     *(f"code: {code}," for code in FULL))


def is_disk_full(exc: BaseException) -> bool:
    if isinstance(exc, OSError):
        return exc.errno in FULL
    return type(exc).__name__ == "SafetensorError" and any(s in str(exc) for s in _SAFETENSORS_FULL)


def disk_full_errno(exc: BaseException) -> int:
    """ENOSPC, or EDQUOT for a quota, of a disk-full error of either kind."""
    if isinstance(exc, OSError) and exc.errno in FULL:
        return exc.errno
    quota = "QuotaExceeded" in str(exc) or "quota" in str(exc).lower() or f"code: {FULL[-1]}," in str(exc)
    return FULL[-1] if quota else errno.ENOSPC


def mount_point(path: str | os.PathLike) -> Path:
    """The mount point of the filesystem holding `path` (its nearest existing folder)."""
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    while not os.path.ismount(path) and path != path.parent:
        path = path.parent
    return path


def disk_full_error(folder: str | os.PathLike, exc: BaseException) -> DiskFullError:
    """One line: the disk (mount point, free space), the folder, and what to do."""
    disk = mount_point(folder)
    try:
        free = f"{shutil.disk_usage(disk).free / 2**30:.2f} GiB free"
    except OSError:
        free = "free space unknown"
    code = disk_full_errno(exc)
    quota = " (your quota on it)" if code == getattr(errno, "EDQUOT", None) else ""
    filename = getattr(exc, "filename", None)
    from agentgym.trainers.checkpoint import latest_checkpoint_name

    last = latest_checkpoint_name(folder)
    kept = f"the last checkpoint, {last}, is intact: free space and rerun with --resume" if last else \
        "no checkpoint was written yet: free space and rerun"
    return DiskFullError(code, f"the disk holding {folder} is full{quota} ({disk}, {free}) while writing "
                               f"{Path(filename).name if filename else 'the run'}: {kept} (or set run_dir on a disk "
                               "with room)")
