"""Running a project's pytest suite in a sandbox and reading per-test outcomes.

Outcomes come from a small pytest plugin (data/sandbox/agentgym_report.py) that prints one
JSON report framed by a random nonce; the last framed report in the output is used. A test
that does not appear in the report (collection error, crashed interpreter) counts as failed.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from agentgym.envs.swe.repos import HIDDEN_TESTS, VISIBLE_TESTS, repo_path
from agentgym.envs.swe.sandbox import CommandResult, Limits, make_sandbox
from agentgym.envs.swe.workspace import fresh_copy, remove_workspace

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
    nonce = secrets.token_hex(8)
    cmd = f"python -m pytest {PYTEST_ARGS} {' '.join(paths)}"
    result = sandbox.run(cmd, timeout=timeout, env={**PYTEST_ENV, "AGENTGYM_REPORT_NONCE": nonce})
    report = TestReport(result=result)
    found = re.findall(rf"@@REPORT-{nonce}@@(.*?)@@END-{nonce}@@", result.output, flags=re.S)
    if found:
        try:
            data = json.loads(found[-1])
        except ValueError:
            data = {}
        report.complete = bool(found)
        for nodeid, entry in data.items():
            report.outcomes[nodeid] = entry.get("outcome", "failed")
            report.messages[nodeid] = entry.get("message", "")
            if entry.get("doc"):
                report.docs[nodeid] = entry["doc"]
    return report


def prepare_grading_copy(repo: str, agent_workspace: Path, parent: Path | None = None) -> Path:
    """A fresh folder with the agent's code and the project's original visible + hidden tests."""
    ws = fresh_copy(agent_workspace, parent, skip=(VISIBLE_TESTS, HIDDEN_TESTS))
    for p in list(ws.rglob("*")):
        if p.name in GRADING_DROP and (p.is_file() or p.is_symlink()):
            p.unlink()
    src = repo_path(repo)
    for name in (VISIBLE_TESTS, HIDDEN_TESTS):
        shutil.copytree(src / name, ws / name, ignore=shutil.ignore_patterns("__pycache__"))
    return ws


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
    ws = prepare_grading_copy(params["repo"], agent_workspace)
    try:
        with make_sandbox(backend, ws, limits) as sandbox:
            report = run_pytest(sandbox, [VISIBLE_TESTS, HIDDEN_TESTS], timeout=(limits or Limits()).max_timeout)
    finally:
        remove_workspace(ws)
    f2p = {t: report.passed(t) for t in params["FAIL_TO_PASS"]}
    p2p_failed = [t for t in params["PASS_TO_PASS"] if not report.passed(t)]
    score = sum(f2p.values()) / max(1, len(f2p))
    success = bool(f2p) and all(f2p.values()) and not p2p_failed
    return Grade(score=1.0 if success else score, success=success, fail_to_pass=f2p,
                 pass_to_pass_failed=p2p_failed, report=report)


def baseline_report(repo: str, backend: str = "local") -> TestReport:
    """The full suite on the unmodified project (every test must pass)."""
    ws = fresh_copy(repo_path(repo))
    try:
        with make_sandbox(backend, ws) as sandbox:
            return run_pytest(sandbox, [VISIBLE_TESTS, HIDDEN_TESTS])
    finally:
        remove_workspace(ws)
