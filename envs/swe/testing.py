"""Running a project's pytest suite in a sandbox and reading per-test outcomes.

Grading runs the harness data/sandbox/agentgym_grade.py (outside the workspace, `python -I`):
pytest runs the project's own tests (a read-only suite folder, never taken from the agent) in a
process that never imports the agent's code; the agent's package, from a link-free copy of its
files, lives in a second process reached over a socket (data/sandbox/agentgym_remote.py).
Outcomes come back on a socket the sandbox hands the harness, HMAC'd with a key only the
harness reads, never from the output. A test that does not appear in the report (collection
error, crashed process, tampering) counts as failed.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from agentgym.envs.swe.repos import HIDDEN_TESTS, VISIBLE_TESTS, repo_path
from agentgym.envs.swe.sandbox import CommandResult, Limits, make_sandbox
from agentgym.envs.swe.workspace import copy_regular_files, temp_root

GRADER = "agentgym_grade.py"
# Used by taskgen's trusted host-side runs (fork_pytest); grading goes through GRADER instead.
PYTEST_ARGS = "-q -p no:cacheprovider -p agentgym_report --tb=no --no-header -c /dev/null --rootdir=."
# pytest's own entry points (hypothesis, anyio, ...) cost seconds per run and could differ
# between machines: the sandbox loads only our reporter.
PYTEST_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
# Files that could change how pytest runs the hidden tests: never taken from the agent.
GRADING_DROP = ("conftest.py", "pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml")


@dataclass
class TestReport:
    outcomes: dict[str, str] = field(default_factory=dict)  # nodeid -> passed/failed/error/skipped
    messages: dict[str, str] = field(default_factory=dict)
    docs: dict[str, str] = field(default_factory=dict)
    result: CommandResult | None = None
    complete: bool = False  # a report was found in the output

    def passed(self, nodeid: str) -> bool:
        return self.outcomes.get(nodeid) == "passed"

    def failing(self) -> list[str]:
        return sorted(n for n, o in self.outcomes.items() if o in ("failed", "error"))


def run_pytest(sandbox, paths: list[str], timeout: float = 60.0) -> TestReport:
    """Run the tests through the grading harness (data/sandbox/agentgym_grade.py) and read the
    outcomes from its report channel, never from the output: see the threat model in
    envs/swe/README.md. No report, a report with a bad MAC, more than one report or a run that
    did not finish -> `complete` is False and every test counts as failed."""
    if sandbox.suite_dir is None:
        raise ValueError("run_pytest needs a sandbox made with suite= (the project's tests, read-only)")
    key = secrets.token_hex(32).encode()
    harness = f"{sandbox.support_dir}/{GRADER}"
    quoted = " ".join(shlex.quote(p) for p in [sandbox.workspace_dir, sandbox.suite_dir, *paths])
    cmd = f"exec python -I {shlex.quote(harness)} {{fd}} {quoted}"
    result = sandbox.run(cmd, timeout=timeout, env=PYTEST_ENV, channel_key=key)
    report = TestReport(result=result)
    data = parse_channel(result.channel, key)
    if data is None:
        return report
    report.complete = bool(data.get("done"))
    for nodeid, entry in data.get("results", {}).items():
        if not isinstance(entry, dict):
            continue
        report.outcomes[str(nodeid)] = str(entry.get("outcome", "failed")) if report.complete else "failed"
        report.messages[str(nodeid)] = str(entry.get("message", ""))
    return report


def parse_channel(raw: bytes | None, key: bytes) -> dict | None:
    """The harness's one report line `MAC JSON` when its HMAC checks out, else None."""
    if not raw or raw.count(b"\n") != 1 or not raw.endswith(b"\n"):
        return None
    mac, _, body = raw.rstrip(b"\n").partition(b" ")
    if not hmac.compare_digest(mac, hmac.new(key, body, hashlib.sha256).hexdigest().encode()):
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def prepare_grading_copy(repo: str, agent_workspace: Path, root: Path) -> Path:
    """`root`/ws: the agent's folders and regular files (no links of any kind, no pytest config
    or conftest files, no test folders)."""
    ws = root / "ws"
    copy_regular_files(agent_workspace, ws, skip_top=(VISIBLE_TESTS, HIDDEN_TESTS), drop=GRADING_DROP)
    return ws


def prepare_suite(repo: str, root: Path) -> Path:
    """`root`/suite: the project's original visible + hidden tests (mounted read-only in the
    sandbox; the agent's process never gets a writable copy)."""
    suite = root / "suite"
    suite.mkdir(mode=0o755)
    src = repo_path(repo)
    for name in (VISIBLE_TESTS, HIDDEN_TESTS):
        copy_regular_files(src / name, suite / name)
    return suite


@dataclass
class Grade:
    score: float
    success: bool
    fail_to_pass: dict[str, bool]
    pass_to_pass_failed: list[str]
    report: TestReport


def grade(params: dict, agent_workspace: Path, backend: str = "bwrap", limits: Limits | None = None) -> Grade:
    """Run every test of the project (hidden ones included) on the agent's code in a fresh
    sandbox: score = fraction of FAIL_TO_PASS passing; success = all of them and every
    PASS_TO_PASS pass."""
    root = temp_root()
    try:
        ws = prepare_grading_copy(params["repo"], agent_workspace, root)
        suite = prepare_suite(params["repo"], root)
        with make_sandbox(backend, ws, limits, suite=suite) as sandbox:
            report = run_pytest(sandbox, [VISIBLE_TESTS, HIDDEN_TESTS], timeout=(limits or Limits()).max_timeout)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    f2p = {t: report.passed(t) for t in params["FAIL_TO_PASS"]}
    p2p_failed = [t for t in params["PASS_TO_PASS"] if not report.passed(t)]
    score = sum(f2p.values()) / max(1, len(f2p))
    success = bool(f2p) and all(f2p.values()) and not p2p_failed
    return Grade(score=1.0 if success else score, success=success, fail_to_pass=f2p,
                 pass_to_pass_failed=p2p_failed, report=report)


def baseline_report(repo: str, backend: str = "local") -> TestReport:
    """The full suite on the unmodified project (every test must pass)."""
    root = temp_root()
    try:
        ws = root / "ws"
        copy_regular_files(repo_path(repo), ws, skip_top=(VISIBLE_TESTS, HIDDEN_TESTS))
        with make_sandbox(backend, ws, suite=prepare_suite(repo, root)) as sandbox:
            return run_pytest(sandbox, [VISIBLE_TESTS, HIDDEN_TESTS])
    finally:
        shutil.rmtree(root, ignore_errors=True)
