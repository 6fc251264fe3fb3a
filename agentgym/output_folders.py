"""Folders a command will write its results in, checked before the work that makes them.

An evaluation or a rollout can run for an hour: a `--out` that cannot be written (a file in the way,
a read-only disk, no permission) must be one line before the first episode, not a traceback after
the last one. The trainer's run dir goes through the same check. Imports only agentgym.errors.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from agentgym.errors import ConfigError

DISK_FULL_ERRNOS = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))


def why(exc: OSError) -> str:
    """An OSError's reason, in the words a user acts on."""
    return {errno.EROFS: "it is on a read-only filesystem", errno.EACCES: "permission denied",
            errno.EPERM: "permission denied"}.get(exc.errno, exc.strerror or type(exc).__name__)


def prepare_output_folder(folder: Path, what: str, fix: str) -> None:
    """Make `folder` (parents included) and write and remove a file in it; `what` names it in the
    error ("run dir", "--out folder") and `fix` says what to do. One ConfigError line when it cannot
    be made or written in; a full disk's OSError is raised as it is, for the caller's own line."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ConfigError(f"{what} {folder} is a file, not a folder: {fix}") from None
    except NotADirectoryError:
        above = next((p for p in folder.parents if p.exists() and not p.is_dir()), None)
        raise ConfigError(f"{what} {folder} cannot be made: {above or 'a folder above it'} is a file, not a "
                          f"folder: {fix}") from None
    except OSError as exc:
        if exc.errno in DISK_FULL_ERRNOS:
            raise
        raise ConfigError(f"{what} {folder} cannot be made ({why(exc)}): {fix}") from None
    try:
        fd, probe = tempfile.mkstemp(prefix=".agentgym-write-check-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        if exc.errno in DISK_FULL_ERRNOS:
            raise
        raise ConfigError(f"cannot write in {what} {folder} ({why(exc)}): {fix}") from None


def prepare_output_file(path: Path, what: str, fix: str) -> None:
    """The folder of a file a command will write is made and writable, and `path` is not a folder."""
    if path.is_dir():
        raise ConfigError(f"{what} {path} is a folder, not a file: {fix}")
    prepare_output_folder(path.parent, f"{what} {path}'s folder", fix)
