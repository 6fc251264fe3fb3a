"""The SWE workspace as snapshot data: every directory, file and link under the workspace folder.

The sandbox keeps nothing between commands (each bash call starts in a fresh process tree; files
persist, processes and environment variables do not), so the workspace folder is the whole
state the agent has changed. A snapshot lists each entry with its path, kind, permission bits
and modification time (so `ls -l` reads the same after a restore), file contents in base64 and
link targets as text. Caches (`__pycache__`, `.pytest_cache`) are left out, as the anchor leaves
them out.

Size cap: MAX_WORKSPACE_BYTES of file contents and MAX_ENTRIES entries. A bigger workspace is
refused in one line when the snapshot is taken, and a snapshot claiming more when it is restored.
"""

from __future__ import annotations

import base64
import binascii
import os
import shutil
import stat
from pathlib import Path, PurePosixPath

from agentgym.envs.swe.workspace import IGNORED_NAMES
from agentgym.snapshot import SnapshotError, need

MAX_WORKSPACE_BYTES = 8 * 1024 * 1024  # file contents in one snapshot (a shipped project is ~100 KB)
MAX_ENTRIES = 5000  # as many as a sandbox may sync back (workspace.MAX_SYNC_MEMBERS)
KINDS = ("dir", "file", "link")


def read_workspace(ws: Path) -> list[dict]:
    """The entries under `ws`, parents before children, in path order; SnapshotError over the cap."""
    entries: list[dict] = []
    total = 0
    for dirpath, dirnames, filenames in os.walk(ws):  # never follows links
        dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_NAMES)
        here = Path(dirpath)
        names = sorted([(d, True) for d in dirnames] + [(f, False) for f in filenames if f not in IGNORED_NAMES])
        for name, _ in names:
            full = here / name
            rel = full.relative_to(ws).as_posix()
            st = os.lstat(full)
            entry = {"path": rel, "mode": stat.S_IMODE(st.st_mode), "mtime_ns": st.st_mtime_ns}
            if stat.S_ISLNK(st.st_mode):
                entry.update(kind="link", target=os.readlink(full))
            elif stat.S_ISDIR(st.st_mode):
                entry.update(kind="dir")
            elif stat.S_ISREG(st.st_mode):
                total += st.st_size
                if total > MAX_WORKSPACE_BYTES:
                    raise SnapshotError(f"the workspace holds more than {MAX_WORKSPACE_BYTES >> 20} MiB of files, over "
                                        "what a snapshot may hold: remove build outputs and data files before branching")
                entry.update(kind="file", data=base64.b64encode(full.read_bytes()).decode("ascii"))
            else:
                continue  # sockets and fifos: nothing a later command can read back as state
            entries.append(entry)
            if len(entries) > MAX_ENTRIES:
                raise SnapshotError(f"the workspace has more than {MAX_ENTRIES} files and folders, over what a snapshot "
                                    "may hold: remove generated files before branching")
    root = os.lstat(ws)
    entries.insert(0, {"path": ".", "kind": "dir", "mode": stat.S_IMODE(root.st_mode), "mtime_ns": root.st_mtime_ns})
    return entries


def check_entries(entries) -> list[tuple[dict, bytes | None]]:
    """Every entry checked (paths inside the workspace, parents listed first as folders, sizes
    under the cap), with the decoded contents; SnapshotError in one line otherwise."""
    need(isinstance(entries, list) and bool(entries) and isinstance(entries[0], dict) and entries[0].get("path") == ".",
         "workspace must list the root '.' first")
    need(len(entries) <= MAX_ENTRIES + 1, f"the workspace lists more than {MAX_ENTRIES} entries")
    dirs = {"."}
    seen = set()
    total = 0
    out = []
    for e in entries:
        need(isinstance(e, dict), "a workspace entry must be an object")
        kind = e.get("kind")
        need(kind in KINDS, f"a workspace entry's kind must be one of {', '.join(KINDS)}")
        keys = {"path", "kind", "mode", "mtime_ns"} | ({"data"} if kind == "file" else {"target"} if kind == "link" else set())
        need(set(e) == keys, f"a {kind} entry has exactly {sorted(keys)}")
        path = e["path"]
        need(isinstance(path, str) and path not in seen, f"workspace path {str(path)[:80]!r} is not a string or repeats")
        seen.add(path)
        mode, mtime = e["mode"], e["mtime_ns"]
        need(isinstance(mode, int) and not isinstance(mode, bool) and 0 <= mode <= 0o7777, f"{path}: mode out of range")
        need(isinstance(mtime, int) and not isinstance(mtime, bool) and mtime >= 0, f"{path}: mtime_ns must be a time")
        if path == ".":
            need(kind == "dir" and e is entries[0], "'.' is the workspace folder itself, listed first")
            out.append((e, None))
            continue
        parts = PurePosixPath(path).parts
        need(not path.startswith("/") and path == PurePosixPath(path).as_posix()
             and all(p not in ("", ".", "..") for p in parts) and "\0" not in path,
             f"workspace path {path[:80]!r} leaves the workspace or is not normalized")
        need(not IGNORED_NAMES.intersection(parts), f"{path[:80]}: caches are not part of a snapshot")
        parent = str(PurePosixPath(path).parent)
        need(parent in dirs, f"{path[:80]}: its folder is not listed before it")
        data = None
        if kind == "dir":
            dirs.add(path)
        elif kind == "link":
            need(isinstance(e["target"], str) and e["target"] and "\0" not in e["target"], f"{path}: bad link target")
        else:
            need(isinstance(e["data"], str), f"{path}: file data must be base64 text")
            try:
                data = base64.b64decode(e["data"], validate=True)
            except (binascii.Error, ValueError):
                raise SnapshotError(f"the snapshot's state is impossible for this env: {path[:80]} is not base64") from None
            total += len(data)
            need(total <= MAX_WORKSPACE_BYTES, f"the files add up to more than {MAX_WORKSPACE_BYTES >> 20} MiB, the cap")
        out.append((e, data))
    return out


def write_workspace(ws: Path, checked: list[tuple[dict, bytes | None]]) -> None:
    """Make `ws` hold exactly the checked entries (everything else under it is removed first)."""
    for child in list(ws.iterdir()):
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    for e, data in checked[1:]:
        full = ws / e["path"]
        if e["kind"] == "dir":
            full.mkdir()
        elif e["kind"] == "link":
            os.symlink(e["target"], full)
        else:
            full.write_bytes(data)
    # modes and times last, children before their folders (writing a child touches its folder)
    for e, _ in reversed(checked):
        full = ws / e["path"]
        if e["kind"] != "link":
            os.chmod(full, e["mode"])
        os.utime(full, ns=(e["mtime_ns"], e["mtime_ns"]), follow_symlinks=False)
