"""The host-side workspace folder: fresh copies, confined paths, safe sync-back from a sandbox."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
import tempfile
from pathlib import Path

from agentgym.owned_tmp import owned_tmp_dir, process_start_time, sweep_dead_owners

# Files the sandbox tooling may leave behind; never part of the agent's work.
IGNORED_NAMES = {"__pycache__", ".pytest_cache"}
MAX_SYNC_MEMBERS = 5000


class PathError(ValueError):
    """A path the agent gave points outside the workspace or cannot be used."""


PREFIX = "agentgym-swe-"


def temp_root(dest_parent: Path | None = None) -> Path:
    """A new temporary folder named after its owner process (pid and start time), so that
    `sweep_stale` can remove it once that process is gone, even after a SIGKILL: the process's
    reaper does so as soon as it dies (`start_reaper`), any later process's sweep otherwise."""
    parent = Path(dest_parent or tempfile.gettempdir())
    start_reaper(parent)
    return owned_tmp_dir(PREFIX, parent=parent)


# The reaper: a small process that waits for its parent's death (EOF on a pipe only the parent
# holds open, whatever killed it) and then removes that parent's folders. Its own session, so a
# signal to the parent's process group spares it; `python -I -S`, so it starts in ~20 ms.
_REAPER = """
import os, re, shutil, sys, time
pid, start, parents = sys.argv[1], sys.argv[2], sys.argv[3:]
seen = b""
while True:
    chunk = os.read(0, 4096)
    if not chunk:
        break
    seen += chunk[-1:]
if seen.endswith(b"q"):  # replaced by a reaper that watches more folders: the parent lives on
    sys.exit(0)

def alive():
    try:
        with open("/proc/%s/stat" % pid, "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return fields[0] not in (b"Z", b"X") and fields[19].decode() == start
    except (OSError, IndexError):
        return False

deadline = time.monotonic() + 5  # the pipe closes a moment before the process is a zombie
while alive() and time.monotonic() < deadline:
    time.sleep(0.02)
if alive():
    sys.exit(0)
pattern = re.compile(r"^agentgym-swe-" + re.escape(pid + "." + start) + "-")
for parent in parents:
    try:
        names = os.listdir(parent)
    except OSError:
        continue
    for name in names:
        if pattern.match(name):
            shutil.rmtree(os.path.join(parent, name), ignore_errors=True)
"""
_reaper: dict = {"pid": None, "proc": None, "parents": set()}


def start_reaper(parent: Path) -> None:
    """Once per process (and per temp parent): start the reaper of this process's folders."""
    import subprocess
    import sys
    import threading

    pid = os.getpid()
    key = str(parent)
    with _reaper_lock:
        if _reaper["pid"] == pid and key in _reaper["parents"] and _reaper["proc"].poll() is None:
            return
        if _reaper["pid"] != pid:  # a forked child: its parent's reaper watches the parent only
            _reaper.update(pid=pid, proc=None, parents=set())
        _reaper["parents"].add(key)
        old = _reaper["proc"]
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _REAPER, str(pid), str(process_start_time(pid) or 0),
                 *sorted(_reaper["parents"])],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                close_fds=True, start_new_session=True)
        except OSError:
            return  # no reaper: the next process's sweep still removes the folders
        _reaper["proc"] = proc
        if old is not None:  # it watched fewer folders: tell it to leave without sweeping
            try:
                old.stdin.write(b"q")
                old.stdin.close()
            except OSError:
                pass
            threading.Thread(target=old.wait, daemon=True).start()


_reaper_lock = __import__("threading").Lock()


def sweep_stale(parent: Path | None = None) -> int:
    """Remove the `agentgym-swe-*` folders whose owner process has exited (killed workers,
    crashed rollouts). Folders of live processes, and of other naming, are left alone."""
    return sweep_dead_owners(PREFIX, parent)


_last_sweep = 0.0


def sweep_stale_now_and_then(interval: float = 60.0) -> None:
    """`sweep_stale` at most once per `interval` seconds per process."""
    import time

    global _last_sweep
    now = time.monotonic()
    if now - _last_sweep >= interval or _last_sweep == 0.0:
        _last_sweep = now
        sweep_stale()


def fresh_copy(source: Path, dest_parent: Path | None = None, skip: tuple[str, ...] = ()) -> Path:
    """Copy a project folder into a new temporary directory and return its path."""
    root = temp_root(dest_parent)
    ws = root / "ws"

    def ignore(dirpath, names):
        top = Path(dirpath) == source
        return {n for n in names if n in IGNORED_NAMES or (top and n in skip)}

    shutil.copytree(source, ws, ignore=ignore)
    return ws


def copy_regular_files(source: Path, dest: Path, skip_top: tuple[str, ...] = (), drop: tuple[str, ...] = ()) -> list[str]:
    """Copy the folders and regular files of `source` into the new folder `dest`, never
    following a link: symlinks (dangling or not), devices, fifos and sockets are left out, and
    every file is opened with O_NOFOLLOW. Returns the relative paths left out."""
    left_out: list[str] = []
    dest.mkdir(mode=0o755)
    src_fd = os.open(source, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        _copy_dir(src_fd, dest, "", skip_top, drop, left_out)
    finally:
        os.close(src_fd)
    return left_out


def _copy_dir(dir_fd: int, dest: Path, rel: str, skip_top, drop, left_out: list[str]) -> None:
    import stat

    for name in sorted(os.listdir(dir_fd)):
        path = f"{rel}{name}"
        if name in IGNORED_NAMES or (not rel and name in skip_top):
            continue
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            left_out.append(path)
            continue
        if stat.S_ISDIR(st.st_mode):
            sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
            try:
                (dest / name).mkdir(mode=0o755)
                _copy_dir(sub, dest / name, path + "/", skip_top, drop, left_out)
            finally:
                os.close(sub)
        elif stat.S_ISREG(st.st_mode) and name not in drop:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dir_fd)
            with os.fdopen(fd, "rb") as fin, open(dest / name, "xb") as fout:
                shutil.copyfileobj(fin, fout)
            os.chmod(dest / name, 0o755 if st.st_mode & 0o100 else 0o644)
        else:
            left_out.append(path)


def remove_workspace(ws: Path) -> None:
    """Delete a workspace made by fresh_copy (its temporary parent too)."""
    parent = ws.parent
    if parent.name.startswith("agentgym-swe-"):
        shutil.rmtree(parent, ignore_errors=True)
    else:
        shutil.rmtree(ws, ignore_errors=True)


def resolve_inside(ws: Path, path: str) -> Path:
    """The absolute host path for an agent-given path, refusing anything that ends up outside
    the workspace after resolving `..` and symlinks (relative paths and /workspace/... accepted)."""
    if not isinstance(path, str) or not path.strip():
        raise PathError("a file path is required")
    if "\x00" in path:
        raise PathError("the path contains a NUL byte")
    p = path.strip()
    if p == "/workspace" or p.startswith("/workspace/"):
        p = p[len("/workspace"):].lstrip("/") or "."
    if os.path.isabs(p):
        raise PathError(f"{path} is outside the workspace: use a path relative to the repository root")
    root = ws.resolve()
    target = (root / p).resolve()
    if target != root and root not in target.parents:
        raise PathError(f"{path} is outside the workspace")
    return target


def relative(ws: Path, target: Path) -> str:
    return str(target.relative_to(ws.resolve()))


def tree_digest(ws: Path) -> str:
    """A hash of every file's path and content: equal digests mean equal workspaces."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(ws):
        dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_NAMES)
        for name in sorted(filenames):
            full = Path(dirpath) / name
            h.update(str(full.relative_to(ws)).encode() + b"\0")
            try:
                if full.is_symlink():
                    h.update(b"link:" + os.readlink(full).encode())
                else:
                    h.update(full.read_bytes())
            except OSError:
                h.update(b"unreadable")
            h.update(b"\0")
    return h.hexdigest()[:16]


def _safe_member(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    """The member if it stays inside `dest` once extracted, else None (it is dropped).

    Our own check rather than tarfile's `data` filter, which Python < 3.11.4 lacks: plain
    files, folders and symlinks whose target stays inside; no absolute or `..` names, no
    hard links or devices; permissions reduced to rwx for the owner, r-x for others."""
    name = member.name
    if name.startswith("/") or ".." in Path(name).parts or "\x00" in name:
        return None
    if not (member.isreg() or member.isdir() or member.issym()):
        return None
    if member.issym():
        target = member.linkname
        if os.path.isabs(target):
            return None
        resolved = os.path.normpath(os.path.join(dest, os.path.dirname(name), target))
        if resolved != dest and not resolved.startswith(dest.rstrip("/") + "/"):
            return None
    member.mode = (member.mode & 0o755) | (0o700 if member.isdir() else 0o600)
    member.uid = member.gid = 0
    member.uname = member.gname = "root"
    return member


def _drop_escaping_links(root: Path) -> list[str]:
    notes = []
    real_root = os.path.realpath(root)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            if os.path.islink(full):
                target = os.path.realpath(full)
                if target != real_root and not target.startswith(real_root + os.sep):
                    os.unlink(full)
                    notes.append(f"dropped link {os.path.relpath(full, root)!r}: it leads outside the workspace")
    return notes


def replace_from_tar(ws: Path, data: bytes) -> list[str]:
    """Make `ws` hold exactly the tree in the tar `data` (as streamed out of a sandbox).

    Members that would escape the folder (absolute paths, `..`, links pointing outside,
    devices) are dropped; returns notes about anything dropped."""
    notes = []
    staging = Path(tempfile.mkdtemp(prefix=".sync-", dir=ws.parent))
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            members = tar.getmembers()
            if len(members) > MAX_SYNC_MEMBERS:
                raise PathError(f"the workspace has more than {MAX_SYNC_MEMBERS} files; changes were not kept")
            kept = []
            for m in members:
                safe = _safe_member(m, str(staging))
                if safe is None:
                    notes.append(f"dropped unsafe entry {m.name!r}")
                else:
                    kept.append(safe)
            # members were vetted above; tarfile's own filters exist only on Python >= 3.11.4
            trusted = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}
            tar.extractall(staging, members=kept, **trusted)
        # A member's link text can look inside while a chain of links leads out (a/l -> ../..,
        # u -> a/l/..): resolve every link as the kernel would, in the extracted tree.
        notes.extend(_drop_escaping_links(staging))
        os.chmod(staging, 0o755)  # mkdtemp makes it 0700; the sandbox user must read it
        old = ws.with_name(ws.name + ".old")
        os.rename(ws, old)
        os.rename(staging, ws)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return notes
