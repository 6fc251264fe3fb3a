"""Offline task generation: inject bugs into the shipped projects, keep the validated ones.

A mutation becomes a task only if every test passes on the original project and at least one
test (at least one of them hidden) fails on the mutated one. Its FAIL_TO_PASS tests are the
failing ones, PASS_TO_PASS the rest. Mutations that break every test (an import error) or hang
are dropped. Validating hundreds of mutants takes minutes, so the result is shipped as JSONL
splits and `python -m agentgym.envs.swe.taskgen` regenerates them.

Generation runs the projects' own tests on the host (trusted code written for this package)
in forked children that already have pytest imported, which is several times faster than a
fresh interpreter per mutant; the slow tests re-check every shipped task in the bwrap sandbox.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import select
import signal
import sys
import time
from pathlib import Path

import numpy as np

from agentgym.envs.swe.issue import write_issue
from agentgym.envs.swe.mutation import Mutation, apply_mutation, find_mutations, unique_window
from agentgym.envs.swe.repos import (
    HIDDEN_TESTS, TRAIN_REPOS, UNSEEN_REPOS, VISIBLE_TESTS, repo_path, source_files,
)
from agentgym.envs.swe.testing import PYTEST_ARGS, TestReport
from agentgym.envs.swe.workspace import fresh_copy, remove_workspace
from agentgym.tasks.spec import TaskSpec
from agentgym.tasks.splits import save_split

ENV_ID = "agentgym/SWE-v0"
SUPPORT_DIR = Path(__file__).parent / "data" / "sandbox"


# what a forked child may map beyond the parent's address space it starts with
CHILD_MEMORY_BYTES = 1 << 30


def _address_space_bytes() -> int | None:
    """This process's virtual memory size (/proc/self/statm), None where there is no /proc."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def fork_pytest(ws: Path, timeout: float = 20.0) -> TestReport:
    """Run the project's full suite in a forked child (trusted code only)."""
    import pytest  # imported once in the parent so children start warm

    if str(SUPPORT_DIR) not in sys.path:
        sys.path.insert(0, str(SUPPORT_DIR))
    nonce = secrets.token_hex(8)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        try:
            import resource

            # a mutant can loop forever or grow without bound: cap it like the sandbox would. The
            # cap counts from the parent's own size, which the child inherits: a parent with torch
            # and a model loaded is already past 1 GiB, and a fixed cap failed every allocation.
            now = _address_space_bytes()
            if now is not None:
                resource.setrlimit(resource.RLIMIT_AS, (now + CHILD_MEMORY_BYTES, now + CHILD_MEMORY_BYTES))
            resource.setrlimit(resource.RLIMIT_CPU, (int(timeout) + 1, int(timeout) + 1))
            os.close(r)
            os.dup2(w, 1)
            os.dup2(w, 2)
            os.chdir(ws)
            sys.path.insert(0, str(ws))
            os.environ["AGENTGYM_REPORT_NONCE"] = nonce
            os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
            os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
            sys.dont_write_bytecode = True
            sys.modules.pop("agentgym_report", None)
            pytest.main(PYTEST_ARGS.split() + [VISIBLE_TESTS, HIDDEN_TESTS])
        finally:
            os._exit(0)
    os.close(w)
    out = bytearray()
    deadline = time.monotonic() + timeout
    timed_out = False
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        ready, _, _ = select.select([r], [], [], remaining)
        if not ready:
            continue
        chunk = os.read(r, 65536)
        if not chunk:
            break
        out += chunk
    if timed_out:
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    os.close(r)
    report = TestReport()
    text = out.decode("utf-8", "replace")
    found = re.findall(rf"@@REPORT-{nonce}@@(.*?)@@END-{nonce}@@", text, flags=re.S)
    if found and not timed_out:
        report.complete = True
        for nodeid, entry in json.loads(found[-1]).items():
            report.outcomes[nodeid] = entry["outcome"]
            report.messages[nodeid] = entry.get("message", "")
            if entry.get("doc"):
                report.docs[nodeid] = entry["doc"]
    return report


def all_test_ids(repo: str) -> list[str]:
    ws = fresh_copy(repo_path(repo))
    try:
        base = fork_pytest(ws)
    finally:
        remove_workspace(ws)
    if not base.complete or base.failing() or not base.outcomes:
        raise RuntimeError(f"{repo}: the unmodified project does not pass its own tests: {base.failing()}")
    return sorted(base.outcomes)


def make_task(repo: str, mutation: Mutation, test_ids: list[str], seed: int = 0) -> TaskSpec | None:
    """Validate one mutation; a TaskSpec when it makes a good task, else None."""
    root = repo_path(repo)
    original = (root / mutation.file).read_text()
    mutated = apply_mutation(original, mutation)
    ws = fresh_copy(root)
    try:
        (ws / mutation.file).write_text(mutated)
        report = fork_pytest(ws)
    finally:
        remove_workspace(ws)
    if not report.complete:
        return None  # hung or crashed the interpreter
    failing = [t for t in test_ids if not report.passed(t)]
    if not failing or len(failing) == len(test_ids):
        return None  # equivalent mutant, or one that breaks everything (import error)
    if not any(t.startswith(HIDDEN_TESTS + "/") for t in failing):
        return None
    before, after = unique_window(original, mutated, mutation.line)
    # Describe visible failures first (what the agent can reproduce), then hidden ones.
    ordered = sorted(failing, key=lambda t: (not t.startswith(VISIBLE_TESTS + "/"), t))
    issue = write_issue(repo, ordered, report.docs, report.messages, seed=mutation.line)
    params = {
        "repo": repo,
        "file": mutation.file,
        "line": mutation.line,
        "operator": mutation.operator,
        "before": before,
        "after": after,
        "issue": issue,
        "FAIL_TO_PASS": failing,
        "PASS_TO_PASS": [t for t in test_ids if t not in failing],
        "visible_failing": sum(t.startswith(VISIBLE_TESTS + "/") for t in failing),
    }
    return TaskSpec(ENV_ID, params=params, seed=seed)


def candidate_mutations(repo: str) -> list[Mutation]:
    root = repo_path(repo)
    return [m for f in source_files(repo) for m in find_mutations((root / f).read_text(), f)]


def generate_repo_tasks(repo: str, count: int, rng: np.random.Generator, max_tries: int | None = None,
                        log=None) -> list[TaskSpec]:
    """Up to `count` validated tasks for one project, operators drawn round-robin for variety."""
    test_ids = all_test_ids(repo)
    by_op: dict[str, list[Mutation]] = {}
    for m in candidate_mutations(repo):
        by_op.setdefault(m.operator, []).append(m)
    for ms in by_op.values():
        rng.shuffle(ms)
    ops = sorted(by_op)
    tasks: list[TaskSpec] = []
    tries = 0
    max_tries = max_tries or count * 4
    while len(tasks) < count and tries < max_tries and any(by_op.values()):
        for op in ops:
            if not by_op[op] or len(tasks) >= count:
                continue
            tries += 1
            task = make_task(repo, by_op[op].pop(), test_ids)
            if task is not None:
                tasks.append(task)
    if log:
        log(f"{repo}: {len(tasks)} tasks from {tries} mutants")
    return tasks


def build_all(per_train_repo: int = 22, per_unseen_repo: int = 12, seed: int = 0, log=print) -> dict[str, list[TaskSpec]]:
    rng = np.random.default_rng(seed)
    train, heldout, unseen = [], [], []
    for repo in TRAIN_REPOS:
        tasks = generate_repo_tasks(repo, per_train_repo, rng, log=log)
        # One task in five of each project is held out (same projects, unseen bugs).
        for i, t in enumerate(sorted(tasks, key=lambda t: t.task_id)):
            (heldout if i % 5 == 0 else train).append(t)
    for repo in UNSEEN_REPOS:
        unseen.extend(generate_repo_tasks(repo, per_unseen_repo, rng, log=log))
    return {"train": train, "heldout": heldout, "heldout_unseen": unseen}


def main(argv: list[str] | None = None) -> None:

    parser = argparse.ArgumentParser(description="Regenerate the SWE task splits")
    parser.add_argument("--out", default=str(Path(__file__).parent / "splits"))
    parser.add_argument("--per-train-repo", type=int, default=22)
    parser.add_argument("--per-unseen-repo", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    t0 = time.time()
    splits = build_all(args.per_train_repo, args.per_unseen_repo, args.seed)
    for name, tasks in splits.items():
        save_split(Path(args.out) / f"{name}.jsonl", tasks)
        print(f"{name}: {len(tasks)} tasks")
    print(f"done in {time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
