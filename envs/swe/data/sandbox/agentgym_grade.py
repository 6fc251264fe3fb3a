"""The grading harness, run inside the sandbox as
`python -I <this file> FD WORKSPACE SUITE TESTPATH...`.

Threat model (see envs/swe/README.md): everything in WORKSPACE is hostile, and code that runs in
an interpreter can rewrite anything in it (pytest, the reporter, the test modules, the stack).
So this process, which runs pytest on the project's tests (SUITE, read-only, never in the
workspace) and writes the verdict, never imports the agent's code:

1. Read the key the host wrote on FD (a socket), make this process undumpable (no ptrace, no
   /proc/PID/mem or /proc/PID/fd from the agent's process, which runs as the same user).
2. `import PKG` for a name at the top of WORKSPACE gives a module whose attributes live in a
   second process, started on first use (agentgym_remote.py): it imports the agent's package and
   answers calls over a socket pair. Values come back as data (exact builtin types) or as
   references; see agentgym_remote.py for what crosses and what the tests' objects allow.
3. pytest runs with conftest files, cache and plugin autoload off, `-c /dev/null`, and
   `--import-mode=importlib`: test modules are loaded from their files by path, and WORKSPACE is
   never on sys.path, so no module of the agent can stand in for a test module.
4. One record per test from pytest's own reports in this process, then exactly one report on FD,
   HMAC'd with the key. The agent's process is killed before the report is written.
"""

import os
import sys

TEST_DIRS = ("tests", "hidden_tests")
HERE = os.path.dirname(os.path.abspath(__file__))


def _read_key(fd):
    key = b""
    while not key.endswith(b"\n") and len(key) < 256:
        chunk = os.read(fd, 256)
        if not chunk:
            break
        key += chunk
    return key.strip()


def _undumpable():
    import ctypes

    if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE = 4
        raise OSError("cannot make the grader undumpable")


def _agent_names(workspace, suite):
    """Top-level modules and packages of the workspace, minus anything named like a test."""
    tests = {"conftest"}
    for d in TEST_DIRS:
        tests.add(d)
        for _dirpath, _dirs, files in os.walk(os.path.join(suite, d)):
            tests.update(f[:-3] for f in files if f.endswith(".py"))
    names = {}
    for entry in os.listdir(workspace):
        path = os.path.join(workspace, entry)
        if entry.endswith(".py") and os.path.isfile(path):
            names[entry[:-3]] = False
        elif os.path.isdir(path):
            names[entry] = True
    return {n: pkg for n, pkg in names.items() if n.isidentifier() and n not in tests}


class _Agent:
    """The agent's process, started when a test first imports its package."""

    def __init__(self, workspace):
        self.workspace = workspace
        self.peer = None
        self.proc = None

    def connect(self):
        if self.peer is None:
            import socket
            import subprocess

            import agentgym_remote

            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            self.proc = subprocess.Popen(
                [sys.executable, "-I", os.path.join(HERE, "agentgym_remote.py"), str(theirs.fileno()), self.workspace],
                stdin=subprocess.DEVNULL, pass_fds=(theirs.fileno(),), cwd=self.workspace)
            theirs.close()
            self.peer = agentgym_remote.Peer(ours.detach(), restricted=True)
        return self.peer

    def kill(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()


def _install_finder(agent, names):
    import importlib.abc
    import importlib.machinery
    import types

    class RemoteModule(types.ModuleType):
        def __getattr__(self, name):
            if name.startswith("__") and name.endswith("__") and name not in ("__all__", "__version__"):
                raise AttributeError(name)
            return agent.connect().request("getattr", self.__dict__["_agentgym_ref"], name)

    class Loader(importlib.abc.Loader):
        def create_module(self, spec):
            return RemoteModule(spec.name)

        def exec_module(self, module):
            module.__dict__["_agentgym_ref"] = agent.connect().request("import", module.__name__)

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path=None, target=None):
            top = fullname.partition(".")[0]
            if top not in names:
                return None
            if "." not in fullname:
                if path is not None:
                    return None  # a lookup by location (pytest loading a test file): not ours
                return importlib.machinery.ModuleSpec(fullname, Loader(), is_package=names[top])
            parent = sys.modules.get(fullname.rpartition(".")[0])
            if not isinstance(parent, RemoteModule):
                return None
            return importlib.machinery.ModuleSpec(fullname, Loader(), is_package=True)

    sys.meta_path.append(Finder())  # last: installed and standard modules always win


def main():
    fd = int(sys.argv[1])
    workspace, suite, paths = sys.argv[2], sys.argv[3], sys.argv[4:]
    key = _read_key(fd)
    _undumpable()
    sys.dont_write_bytecode = True
    sys.path.insert(0, HERE)
    import hashlib
    import hmac
    import json

    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    for name in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS"):
        os.environ.pop(name, None)
    agent = _Agent(workspace)
    _install_finder(agent, _agent_names(workspace, suite))
    import pytest

    results = {}

    class Reporter:
        def pytest_runtest_logreport(self, report):
            entry = results.setdefault(report.nodeid, {"outcome": "passed", "message": ""})
            if report.failed and entry["outcome"] == "passed":
                entry["outcome"] = "failed" if report.when == "call" else "error"
                crash = getattr(report.longrepr, "reprcrash", None)
                entry["message"] = (crash.message if crash is not None else str(report.longrepr))[:800]
            elif report.skipped and report.when != "teardown" and entry["outcome"] == "passed":
                entry["outcome"] = "skipped"

        def pytest_collectreport(self, report):
            if report.failed:
                results[report.nodeid or "<collection>"] = {"outcome": "error", "message": str(report.longrepr)[-800:]}

    os.chdir(suite)
    args = ["-q", "-p", "no:cacheprovider", "--noconftest", "--import-mode=importlib", "--tb=no", "--no-header",
            "-c", "/dev/null", "--rootdir", suite, *paths]
    done = False
    try:
        pytest.main(args, plugins=[Reporter()])
        done = True
    finally:
        agent.kill()
        body = json.dumps({"done": done, "results": results}, sort_keys=True).encode()
        mac = hmac.new(key, body, hashlib.sha256).hexdigest().encode()
        out = mac + b" " + body + b"\n"
        while out:
            out = out[os.write(fd, out):]
        os._exit(0)


if __name__ == "__main__":
    main()
