"""The SWE task space: a task is one validated injected bug in one shipped project."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from agentgym.envs.swe.repos import ALL_REPOS, TRAIN_REPOS, UNSEEN_REPOS, source_files
from agentgym.envs.swe.tools import format_call
from agentgym.tasks.space import TaskSpace, check_schema
from agentgym.tasks.generation import parse_json
from agentgym.tasks.spec import TaskSpec
from agentgym.envs.swe.taskgen import all_test_ids, candidate_mutations, make_task
from agentgym.envs.swe.taskgen import build_all


class SWETaskSpace(TaskSpace):
    """Fix a bug in a small Python project. A task is a project (repo) and a single-line bug
    injected into one of its modules (operator: binop_swap, compare_swap, boolop_swap,
    augassign_swap, off_by_one, wrong_constant, removed_line, swapped_args, negated_condition),
    kept only when some of the project's tests fail with it. The agent sees an issue written
    from the failing behaviour; hidden tests grade the fix. Projects for training: datekit,
    graphkit, heapkit, inikit, lexkit, lrukit, matrixkit, moneykit, romankit, wrapkit.
    Propose a task as: repo=<project> operator=<operator> seed=<int>."""

    env_id = "agentgym/SWE-v0"
    split_dir = Path(__file__).parent / "splits"

    def sample(self, rng: np.random.Generator, repo: str | None = None, operator: str | None = None,
               max_tries: int = 40) -> TaskSpec:
        """A fresh validated task (runs the project's tests on the host: trusted code only)."""

        repos = [repo] if repo else list(TRAIN_REPOS)
        for _ in range(max_tries):
            name = repos[int(rng.integers(len(repos)))]
            candidates = [m for m in candidate_mutations(name) if operator in (None, m.operator)]
            if not candidates:
                continue
            mutation = candidates[int(rng.integers(len(candidates)))]
            task = make_task(name, mutation, all_test_ids(name))
            if task is not None:
                return task
        raise ValueError(f"no valid task found for repo={repo} operator={operator} in {max_tries} tries")

    def mutate(self, spec: TaskSpec, rng: np.random.Generator, max_tries: int = 40) -> TaskSpec:
        """A nearby task: another validated bug in the same file of the same project."""

        p = spec.params
        candidates = [m for m in candidate_mutations(p["repo"]) if m.file == p["file"] and m.line != p["line"]]
        rng.shuffle(candidates)
        ids = all_test_ids(p["repo"])
        for mutation in candidates[:max_tries]:
            task = make_task(p["repo"], mutation, ids, seed=spec.seed)
            if task is not None:
                return task
        return self.sample(rng, repo=p["repo"])

    def solve(self, spec: TaskSpec) -> list[str]:
        """The oracle undoes the injected change with str_replace, then submits."""
        p = spec.params
        return [
            format_call("str_replace", path=p["file"], old_str=p["after"], new_str=p["before"]),
            format_call("submit"),
        ]

    def category(self, spec: TaskSpec) -> str:
        p = spec.params
        where = "visible" if p.get("visible_failing") else "hidden"
        return f"{p['operator']}/{where}"

    def build_splits(self) -> dict[str, list[TaskSpec]]:

        return build_all()

    def check_params(self, params: dict) -> dict:
        """Before any file is touched: only known keys with their types, a shipped project, and
        `file` one of that project's library modules (no paths of the agent's choosing)."""
        p = check_schema(params, {"repo": str, "file": str, "line": int, "operator": str, "before": str,
                                  "after": str, "issue": str, "FAIL_TO_PASS": list, "PASS_TO_PASS": list},
                         {"visible_failing": int}, what="SWE")
        if p["repo"] not in ALL_REPOS:
            raise ValueError(f"unknown project {p['repo'][:40]!r}; choose one of {', '.join(ALL_REPOS)}")
        if p["file"] not in source_files(p["repo"]):
            raise ValueError(f"file {p['file'][:80]!r} is not a library module of {p['repo']}")
        for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
            if not all(isinstance(t, str) for t in p[key]):
                raise TypeError(f"{key} must be a list of test ids")
        if not p["before"]:
            raise ValueError("before must not be empty")
        return p

    def reserved(self, spec: TaskSpec) -> bool:
        """The projects kept for heldout_unseen are never trained on, whatever the bug."""
        return spec.params.get("repo") in UNSEEN_REPOS

    def parse(self, text: str) -> TaskSpec | None:
        """'repo=datekit operator=off_by_one seed=3' -> a sampled task (None if it does not parse)."""
        fields = dict(re.findall(r"(repo|operator|seed)\s*[=:]\s*([\w-]+)", text or ""))
        if "repo" not in fields or fields["repo"] not in ALL_REPOS:
            return parse_json(self, text)
        try:
            seed = int(fields.get("seed", 0))
            return self.sample(np.random.default_rng(seed), repo=fields["repo"], operator=fields.get("operator"))
        except ValueError:
            return None

