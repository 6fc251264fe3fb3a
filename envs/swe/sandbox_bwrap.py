"""The bubblewrap backend: every command runs in a fresh, throwaway namespace.

Per command: bwrap mounts the system read-only (only /usr and the Python that runs pytest),
no network (its own empty net namespace), its own PID namespace (when the command ends, the
namespace's init exits and the kernel kills everything left in it), its own /tmp, and a
size-limited tmpfs /workspace holding a copy of the host workspace. The command runs as an
unprivileged uid with rlimits; afterwards the workspace is streamed back as a tar on fd 3 and
the host folder is replaced with it (unsafe entries dropped). The tmpfs caps disk use, the
uid's RLIMIT_NPROC caps processes, the wall clock caps time, the output cap caps output.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import shutil
import signal
import sys
import time
from pathlib import Path

from agentgym.envs.swe.sandbox import (
    CommandResult,
    Limits,
    Sandbox,
    SandboxUnavailable,
    open_channel,
    run_process,
    ulimit_args,
)
from agentgym.envs.swe.workspace import PathError, replace_from_tar

SUPPORT_DIR = Path(__file__).parent / "data" / "sandbox"
INNER_SUPPORT = "/.agentgym/support"
INNER_SOURCE = "/.agentgym/src"
INNER_SUITE = "/.agentgym/suite"

# Runs inside the sandbox as the unprivileged user: copy in, run, stream the result out on fd 3.
# The agent's command gets no fd 3, so it cannot forge the workspace stream.
WRAPPER = r"""
ulimit $2 || { echo "AGENTGYM_COPY_IN_FAILED: ulimit"; exit 111; }
tarfd=$3
[ "$tarfd" = 3 ] || eval "exec 3>&$tarfd $tarfd>&-"
shopt -s dotglob nullglob
src=(/.agentgym/src/*)
if [ ${#src[@]} -gt 0 ]; then
  cp -r --preserve=mode,timestamps "${src[@]}" /workspace/ || { echo "AGENTGYM_COPY_IN_FAILED"; exit 111; }
fi
cd /workspace
bash -c "$1" 3>&- </dev/null
rc=$?
cd /workspace 2>/dev/null || exit $rc
# the entries, not ".", so an unchanged tree gives a byte-identical tar (then nothing is copied back)
out=(*)
if [ ${#out[@]} -eq 0 ]; then tar -cf - -T /dev/null >&3; exit $rc; fi
tar --sort=name --owner=0 --group=0 --numeric-owner -cf - -- "${out[@]}" >&3 2>/dev/null
exit $rc
"""


# --- seccomp: no new user namespaces inside the sandbox ---------------------------------------
# Without a user namespace of its own, bwrap cannot use --disable-userns, so a tiny classic-BPF
# filter refuses clone/unshare with CLONE_NEWUSER (and clone3, whose flags a filter cannot
# read; libc falls back to clone). This closes the kernel attack surface of nested namespaces.
_ARCH = {"x86_64": (0xC000003E, 56, 272, 435), "aarch64": (0xC00000B7, 220, 97, 435)}
CLONE_NEWUSER = 0x10000000


def seccomp_program() -> bytes | None:
    import platform
    import struct

    arch = _ARCH.get(platform.machine())
    if arch is None:
        return None
    audit_arch, nr_clone, nr_unshare, nr_clone3 = arch
    allow, enosys, eperm = 0x7FFF0000, 0x00050000 | 38, 0x00050000 | 1
    ld_abs, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    prog = [
        (ld_abs, 0, 0, 4),                    # 0: A = arch
        (jeq, 0, 8, audit_arch),              # 1: foreign arch -> allow (10)
        (ld_abs, 0, 0, 0),                    # 2: A = syscall nr
        (jge, 5, 0, 0x40000000),              # 3: x32 ABI -> ENOSYS (9)
        (jeq, 4, 0, nr_clone3),               # 4: clone3 -> ENOSYS (9)
        (jeq, 1, 0, nr_unshare),              # 5: unshare -> check flags (7)
        (jeq, 0, 3, nr_clone),                # 6: clone -> check flags (7), else allow (10)
        (ld_abs, 0, 0, 16),                   # 7: A = low word of args[0] (flags)
        (jset, 2, 1, CLONE_NEWUSER),          # 8: NEWUSER -> EPERM (11), else allow (10)
        (ret, 0, 0, enosys),                  # 9
        (ret, 0, 0, allow),                   # 10
        (ret, 0, 0, eperm),                   # 11
    ]
    return b"".join(struct.pack("=HBBI", *ins) for ins in prog)


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def python_roots() -> list[str]:
    """Folders that must be visible (read-only) for the venv's python and pytest to run: the
    interpreter's prefixes, and the real folders of site-packages entries that are links or
    `.pth` additions elsewhere (a venv whose packages are symlinks into another venv)."""
    roots = {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)}
    exe_dir = os.path.dirname(os.path.realpath(sys.executable))
    roots.add(os.path.dirname(exe_dir))
    roots.update(_package_folders_elsewhere(roots))
    return _outermost(r for r in roots if not (r.startswith("/usr/") or r == "/usr"))


# What `python -m venv` makes. A venv is bound by these entries only: a folder kept beside them,
# such as <venv>/src where `pip install -e git+URL` checks the project out, stays outside.
VENV_ENTRIES = ("pyvenv.cfg", "bin", "lib", "lib64", "include")


def python_binds() -> list[str]:
    """The paths the sandbox binds (read-only) for the interpreter: each of `python_roots()`
    whole, except a venv, of which only its own entries (VENV_ENTRIES)."""
    binds: list[str] = []
    for root in python_roots():
        if os.path.isfile(os.path.join(root, "pyvenv.cfg")):
            binds += [os.path.join(root, e) for e in VENV_ENTRIES if os.path.lexists(os.path.join(root, e))]
        else:
            binds.append(root)
    return binds


def _outermost(paths) -> list[str]:
    """The paths, without those nested in another of them."""
    out: list[str] = []
    for p in sorted(set(paths)):
        if not any(p == o or p.startswith(o + "/") for o in out):
            out.append(p)
    return out


def _site_folders() -> list[str]:
    """Every site-packages / dist-packages folder this interpreter imports from (real paths)."""
    import site

    found = list(sys.path) + site.getsitepackages() + [site.getusersitepackages()]
    return _unique(os.path.realpath(p) for p in found
                   if p and os.path.basename(os.path.normpath(p)) in ("site-packages", "dist-packages")
                   and os.path.isdir(p))


def _package_folders_elsewhere(roots: set[str]) -> list[str]:
    """Real folders that the site-packages folders' symlinked entries point into, outside `roots`."""
    out: set[str] = set()
    for folder in _site_folders():
        if not _under(folder, roots):
            out.add(folder)
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.is_symlink():
                target = os.path.dirname(os.path.realpath(entry.path))
                if target != "/" and not _under(target, roots):
                    out.add(target)
    return sorted(out)


def _under(path: str, roots) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _unique(items) -> list[str]:
    return list(dict.fromkeys(items))


# The distribution's records in a site-packages folder, then and now: its metadata, and the hooks of
# an editable install (they name the checkout's folders; their compiled copies are in __pycache__).
RECORD_PATTERNS = ("agentgym", "agentgym-*.dist-info", "agentgym_credit-*.dist-info", "agentgym-*.egg-info",
                   "agentgym_credit*.egg-info", "agentgym.egg-link", "agentgym_credit.egg-link",
                   "__editable__*agentgym*")


def agentgym_folders(visible: list[str]) -> list[str]:
    """Everything of this project that a sandbox bound at `visible` (plus /usr) could read, to be
    hidden under an empty tmpfs (a file: under /dev/null):

    - any installed copy and its records in a site-packages folder, whatever the install layout
      (editable, wheel, venv or system), for this interpreter or another one under a bound root;
    - every checkout of the project: the folder holding each imported agentgym package (its SWE
      data holds every task's reference source and hidden tests), and the folders the install
      records name (direct_url.json, an editable install's hooks, an egg-link). A checkout is hidden
      whole, its git objects included: the project root, the nearest folder up with a
      pyproject.toml or .git, and for a git worktree the repository it belongs to. Where the
      checkout holds the interpreter (a .venv inside it), everything in it but the interpreter's
      folders is hidden.
    """
    import glob

    bound = ["/usr", *visible]
    keep = python_binds()  # what python needs; never hidden
    hits: list[str] = []
    sources: list[str] = []
    for name, module in list(sys.modules.items()):
        if name == "agentgym" or name.startswith("agentgym."):
            for folder in getattr(module, "__path__", None) or ():
                hits.append(os.path.realpath(folder))
                sources.append(os.path.realpath(folder))
    folders = _site_folders() + [v for v in visible if os.path.basename(v) in ("site-packages", "dist-packages")]
    for root in bound:  # installs for another interpreter under a bound root (/usr/lib/python3/...)
        for pattern in ("lib*/python3*/*-packages", "local/lib*/python3*/*-packages", "lib/python3/dist-packages",
                        "python3*/*-packages"):  # the last for a venv's bound lib/
            folders.extend(os.path.realpath(p) for p in glob.glob(os.path.join(root, pattern)))
    for folder in _unique(folders):
        for record in _matching(folder, RECORD_PATTERNS) + _matching(os.path.join(folder, "__pycache__"),
                                                                     ("__editable__*agentgym*",)):
            hits.append(os.path.realpath(record))
            sources.extend(_recorded_sources(record))
    for root in _unique(r for s in sources for r in _project_roots(s)):
        if _under(root, bound):
            hits.extend(_all_but(root, keep))
    return _outermost(h for h in hits if _under(h, bound) and os.path.lexists(h) and not any(_under(k, [h]) for k in keep))


def _matching(folder: str, patterns) -> list[str]:
    """The entries of `folder` whose names match one of the glob patterns (one listing per folder)."""
    import fnmatch

    try:
        names = os.listdir(folder)
    except OSError:
        return []
    match = re.compile("|".join(fnmatch.translate(p) for p in patterns)).match
    return [os.path.join(folder, n) for n in sorted(names) if match(n)]


def _recorded_sources(record: str) -> list[str]:
    """Folders of a checkout that an install record names: direct_url.json's file:// URL (an
    editable install, or a wheel built from a folder), the paths in an editable install's .pth
    file or finder module, an egg-link's first line."""
    import ast
    import json
    from urllib.parse import unquote, urlparse

    out: list[str] = []
    try:
        if record.endswith(".dist-info"):
            with open(os.path.join(record, "direct_url.json"), encoding="utf-8") as f:
                url = urlparse(json.load(f).get("url", ""))
            if url.scheme == "file":
                out.append(unquote(url.path))
        elif record.endswith((".pth", ".egg-link")):
            with open(record, encoding="utf-8") as f:
                out += [line.strip() for line in f if line.startswith("/")]
        elif record.endswith(".py"):
            with open(record, encoding="utf-8") as f:
                text = f.read()
            mapping = re.search(r"^MAPPING[^=]*=\s*(\{.*?\})$", text, re.M | re.S)
            if mapping:
                out += [v for v in ast.literal_eval(mapping.group(1)).values() if isinstance(v, str)]
    except (OSError, ValueError, SyntaxError, AttributeError, TypeError):
        pass
    return [os.path.realpath(p) for p in out if os.path.isabs(p)]


def _project_roots(folder: str, levels: int = 3) -> list[str]:
    """The checkout holding `folder` (a package folder or a project root): the nearest folder up,
    `folder` included, with a pyproject.toml or a .git, and for a git worktree (.git is a file)
    also its repository's root; [] inside a site-packages folder (an installed copy, hidden on its own)."""
    if any(os.path.basename(a) in ("site-packages", "dist-packages") for a in _ancestors(folder)):
        return []
    for root in _ancestors(folder)[: levels + 1]:
        git = os.path.join(root, ".git")
        if os.path.isfile(git):
            return [root, *_worktree_repository(git)]
        if os.path.exists(os.path.join(root, "pyproject.toml")) or os.path.lexists(git):
            return [root]
    return []


def _worktree_repository(git_file: str) -> list[str]:
    """The root of the repository a worktree's `.git` file points into (gitdir: <repo>/.git/worktrees/<name>)."""
    try:
        with open(git_file, encoding="utf-8") as f:
            gitdir = f.read().strip().removeprefix("gitdir:").strip()
        gitdir = os.path.join(os.path.dirname(git_file), gitdir)
        with open(os.path.join(gitdir, "commondir"), encoding="utf-8") as f:
            common = os.path.realpath(os.path.join(gitdir, f.read().strip()))
    except OSError:
        return []
    return [os.path.dirname(common)] if os.path.basename(common) == ".git" else [common]


def _ancestors(path: str) -> list[str]:
    out = [path]
    while (parent := os.path.dirname(out[-1])) != out[-1]:
        out.append(parent)
    return out


def _all_but(root: str, keep: list[str]) -> list[str]:
    """What hides everything under `root` but the paths in `keep`: root itself when it holds none
    of them, else each of its entries that is not a kept path or on the way to one. A link is left
    as it is (its name is all it shows; its target is bound, or hidden, on its own)."""
    inside = [k for k in keep if _under(k, [root])]
    if not inside:
        return [root]
    if root in inside:
        return []
    out: list[str] = []
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return []
    for entry in entries:
        if not entry.is_symlink():
            out.extend(_all_but(entry.path, inside))
    return out


class BwrapSandbox(Sandbox):
    name = "bwrap"
    support_dir = INNER_SUPPORT

    def __init__(self, workspace, limits: Limits | None = None, uid: int | None = None, suite=None):
        super().__init__(workspace, limits, suite)
        self.bwrap = bwrap_path()
        if self.bwrap is None:
            raise SandboxUnavailable("bubblewrap (bwrap) is not installed: `apt-get install bubblewrap`")
        # A uid of its own, so RLIMIT_NPROC counts only this sandbox's processes (root is exempt
        # from RLIMIT_NPROC, so commands never run as root).
        self.uid = uid if uid is not None else random.randrange(200_000, 260_000)
        # As root (CI containers, this project's machines) bwrap sets the sandbox up with full
        # privileges and setpriv drops to self.uid. As a normal user bwrap makes a user
        # namespace instead, commands run as that user, and RLIMIT_NPROC is counted on top of
        # the user's own processes.
        self.privileged = os.geteuid() == 0
        if not self.privileged:
            self.uid = os.getuid()
        self.python_bin = os.path.join(sys.prefix, "bin")
        self._last_tar_digest: str | None = None

    workspace_dir = "/workspace"

    @property
    def suite_dir(self) -> str | None:
        return None if self.suite is None else INNER_SUITE

    @staticmethod
    def _python_binds() -> list[str]:
        argv: list[str] = []
        made: set[str] = {"/tmp", "/workspace"}  # already there, with their own permissions
        binds = python_binds()
        for path in binds:
            # bwrap creates missing parents 0700; create them 0755 so the unprivileged uid can
            # traverse to the interpreter (only these folders exist there, nothing else of /root).
            parts = Path(path).parts[1:-1]
            for i in range(len(parts)):
                d = "/" + "/".join(parts[: i + 1])
                if d not in made:
                    argv += ["--perms", "0755", "--dir", d]
                    made.add(d)
            if os.path.islink(path):  # a venv's lib64 -> lib
                argv += ["--symlink", os.readlink(path), path]
            else:
                argv += ["--ro-bind", path, path]
        # then hide the project's own files (reference sources, hidden tests, checkouts) wherever they sit
        for folder in agentgym_folders(binds):
            argv += ["--tmpfs", folder] if os.path.isdir(folder) else ["--ro-bind", "/dev/null", folder]
        return argv

    def _argv(self, env: dict[str, str] | None = None) -> list[str]:
        lim = self.limits
        argv = [
            self.bwrap,
            "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--hostname", "sandbox",
            "--ro-bind", "/usr", "/usr",
        ]
        for link in ("bin", "lib", "lib64", "sbin"):
            target = os.path.realpath(f"/{link}")
            if os.path.islink(f"/{link}") and target.startswith("/usr/"):
                argv += ["--symlink", target.lstrip("/"), f"/{link}"]
            elif os.path.isdir(f"/{link}"):
                argv += ["--ro-bind", f"/{link}", f"/{link}"]
        argv += [
            "--perms", "0755", "--dir", "/.agentgym",
            "--ro-bind", str(self.workspace), INNER_SOURCE,
            "--ro-bind", str(SUPPORT_DIR), INNER_SUPPORT,
            *(["--ro-bind", str(self.suite), INNER_SUITE] if self.suite is not None else []),
            "--perms", "01777", "--size", str(lim.workspace_bytes), "--tmpfs", "/workspace",
            "--perms", "01777", "--size", str(lim.tmp_bytes), "--tmpfs", "/tmp",
            "--proc", "/proc", "--dev", "/dev",
        ]
        # The interpreter is bound after the tmpfs mounts: a venv that lives under /tmp (a CI
        # checkout, say) must not be hidden by the sandbox's own /tmp.
        argv += self._python_binds()
        argv += [
            "--chdir", "/",
            "--clearenv",
            "--setenv", "PATH", f"{self.python_bin}:/usr/local/bin:/usr/bin:/bin",
            "--setenv", "HOME", "/workspace",
            "--setenv", "USER", "agent", "--setenv", "LOGNAME", "agent",
            "--setenv", "LANG", "C.UTF-8", "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
            "--setenv", "PYTHONPATH", INNER_SUPPORT,
        ]
        for k, v in (env or {}).items():
            argv += ["--setenv", k, v]
        if self.privileged:
            argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        else:
            argv += ["--unshare-user", "--disable-userns"]
        return argv

    def run(self, command: str, timeout: float | None = None, env: dict[str, str] | None = None,
            channel_key: bytes | None = None) -> CommandResult:
        if "\x00" in command:
            raise ValueError("the command contains a NUL byte")
        # The unprivileged sandbox user copies the workspace in: it must be able to enter it.
        os.chmod(self.workspace, 0o755)
        argv = self._argv(env)
        seccomp_fd = None
        program = seccomp_program()
        if program is not None:
            import fcntl

            memfd = os.memfd_create("agentgym-seccomp")
            # keep it clear of fd 3, which the child gets as the workspace stream
            seccomp_fd = fcntl.fcntl(memfd, fcntl.F_DUPFD, 10)
            os.close(memfd)
            os.write(seccomp_fd, program)
            os.lseek(seccomp_fd, 0, os.SEEK_SET)
            argv += ["--seccomp", str(seccomp_fd)]
        if self.privileged:
            argv += ["/usr/bin/setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups",
                     "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
        nproc = self.limits.processes
        if not self.privileged:
            nproc += _processes_of_user(self.uid)
        # The workspace comes back as a tar on its own pipe; the wrapper moves it to fd 3.
        tar_r, tar_w = os.pipe()
        chan_ours = chan_theirs = None
        if channel_key is not None:
            chan_ours, chan_theirs = open_channel(channel_key)
            command = command.replace("{fd}", str(chan_theirs))
        argv += ["/bin/bash", "-c", WRAPPER, "wrapper", command, ulimit_args(self.limits, nproc), str(tar_w)]
        fds = (tar_w,) + ((seccomp_fd,) if seccomp_fd is not None else ()) + \
            ((chan_theirs,) if chan_theirs is not None else ())
        result, tar = run_process(
            argv,
            timeout=self._timeout(timeout),
            output_cap=self.limits.output_bytes,
            env={"PATH": "/usr/bin:/bin"},
            pass_fds=fds,
            extra_read_fd=tar_r,
            extra_cap=self.limits.workspace_bytes + (4 << 20),
            close_after_spawn=fds,
            channel_fd=chan_ours,
        )
        if (result.exit_code == 111 and result.output.startswith("AGENTGYM_COPY_IN_FAILED")) or (
            result.exit_code == 1 and result.output.startswith("bwrap:")
        ):
            raise SandboxUnavailable(f"the bwrap sandbox failed to start: {result.output.strip()[:500]}")
        if self.privileged:
            self._kill_leftovers()
        self._sync_back(result, tar)
        return result

    def _kill_leftovers(self, grace: float = 5.0) -> None:
        """Nothing of the sandbox uid may outlive its command. When the namespace's init dies
        the kernel kills the rest, but asynchronously: a fork bomb's children can still be alive
        for a moment after bwrap returned. The uid is this sandbox's own, so SIGKILL whatever
        is left until nothing is."""
        deadline = time.monotonic() + grace
        while pids := _live_pids_of_user(self.uid):
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            if time.monotonic() > deadline:
                return
            time.sleep(0.005)

    def workspace_changed(self) -> None:
        self._last_tar_digest = None

    def _sync_back(self, result: CommandResult, tar: bytes | None) -> None:
        if not tar:
            result.notes.append("the workspace could not be saved after this command; changes were discarded")
            return
        digest = hashlib.sha256(tar).hexdigest()
        if digest == self._last_tar_digest:
            return  # nothing changed since the last command: skip the rewrite
        try:
            result.notes.extend(replace_from_tar(self.workspace, tar))
        except (PathError, OSError, ValueError) as exc:
            result.notes.append(f"workspace changes were discarded: {exc}")
            return
        self._last_tar_digest = digest


def _processes_of_user(uid: int) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                count += os.stat(f"/proc/{entry}").st_uid == uid
            except OSError:
                pass
    return count


def _live_pids_of_user(uid: int) -> list[int]:
    """Processes owned by `uid` that are not zombies (a zombie runs nothing; its parent reaps it)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != uid:
                continue
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != b"Z":
            pids.append(int(entry))
    return pids


def bwrap_works() -> bool:
    """True when bwrap can start a sandbox here (used by tests to skip, and by the env)."""
    if bwrap_path() is None:
        return False
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        try:
            r = BwrapSandbox(d).run("echo ok", timeout=20)
        except SandboxUnavailable:
            return False
        return r.output.strip() == "ok"
