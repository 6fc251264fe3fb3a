"""The grading harness, run inside the sandbox as `python -I <this file> FD TESTPATH...`.

Threat model (see envs/swe/README.md): everything in the workspace is hostile. This file lives
outside the workspace (a read-only bind) and is run with `-I` (no PYTHONPATH, no script or
current folder on sys.path, no user site), so nothing the agent wrote can replace it, pytest, or
the standard library. FD is one end of a socket pair whose other end the host reads.

1. Before any workspace code can be imported, read the key the host wrote on FD.
2. Fork. The child closes FD (a socket: it cannot be reopened through /proc either), appends the
   workspace at the END of sys.path (it can add modules, never shadow installed ones), runs
   pytest with conftest files, cache and plugin autoload off, and streams one line per finished
   test to the parent over a pipe, tagged with a per-run token, then `DONE` and `os._exit`
   (atexit hooks of the tested code never run).
3. The parent never imports workspace code, makes itself undumpable (the child cannot read its
   memory or ptrace it), keeps the first record of each test (a second record for the same test
   marks it `error`), and writes exactly one report, HMAC'd with the key, on FD.
"""

import os
import sys


def _read_key(fd):
    key = b""
    while not key.endswith(b"\n") and len(key) < 256:
        chunk = os.read(fd, 256)
        if not chunk:
            break
        key += chunk
    return key.strip()


def _undumpable():
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except Exception:
        pass


def _child(w, token, paths):
    import json

    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    for name in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS"):
        os.environ.pop(name, None)
    import pytest

    outcomes = {}

    def emit(obj):
        line = (token + " " + json.dumps(obj) + "\n").encode()
        os.write(w, line)

    class Reporter:
        def pytest_runtest_logreport(self, report):
            entry = outcomes.setdefault(report.nodeid, {"outcome": "passed", "message": ""})
            if report.failed and entry["outcome"] == "passed":
                entry["outcome"] = "failed" if report.when == "call" else "error"
                crash = getattr(report.longrepr, "reprcrash", None)
                entry["message"] = (crash.message if crash is not None else str(report.longrepr))[:800]
            elif report.skipped and report.when != "teardown" and entry["outcome"] == "passed":
                entry["outcome"] = "skipped"
            if report.when == "teardown":
                emit({"nodeid": report.nodeid, **outcomes.pop(report.nodeid)})

        def pytest_collectreport(self, report):
            if report.failed:
                emit({"nodeid": report.nodeid or "<collection>", "outcome": "error",
                      "message": str(report.longrepr)[-800:]})

    cwd = os.getcwd()
    sys.path.append(cwd)
    args = ["-q", "-p", "no:cacheprovider", "--noconftest", "--import-mode=append", "--tb=no", "--no-header",
            "-c", "/dev/null", "--rootdir", cwd, *paths]
    try:
        pytest.main(args, plugins=[Reporter()])
        emit({"done": True})
    finally:
        os._exit(0)


def main():
    fd = int(sys.argv[1])
    paths = sys.argv[2:]
    key = _read_key(fd)
    import hashlib
    import hmac
    import json
    import secrets

    token = secrets.token_hex(16)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.close(fd)
        key = None
        _child(w, token, paths)
    os.close(w)
    _undumpable()
    results, done, buf = {}, False, b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            tok, _, body = line.decode("utf-8", "replace").partition(" ")
            if tok != token or done:
                continue
            try:
                rec = json.loads(body)
            except ValueError:
                continue
            if rec.get("done") is True:
                done = True
                continue
            nodeid = str(rec.get("nodeid"))
            if nodeid in results:
                results[nodeid] = {"outcome": "error", "message": "reported more than once"}
            else:
                results[nodeid] = {"outcome": str(rec.get("outcome")), "message": str(rec.get("message", ""))[:800]}
    os.waitpid(pid, 0)
    body = json.dumps({"done": done, "results": results}, sort_keys=True).encode()
    mac = hmac.new(key, body, hashlib.sha256).hexdigest().encode()
    out = mac + b" " + body + b"\n"
    while out:
        out = out[os.write(fd, out):]
    os._exit(0)


if __name__ == "__main__":
    main()
