"""SWEEnv: fix a real bug in a small Python project through sandboxed tools.

Each episode copies the task's project into a fresh workspace (without its hidden tests),
injects the task's bug, and shows the agent an issue written from the failing behaviour. The
agent works with bash / view / str_replace / create / run_tests and ends with submit; on submit
or at the step limit the project's full suite (hidden tests included, original test files, the
agent's code) runs in a fresh sandbox. Reward (sparse, at the last step) = fraction of
FAIL_TO_PASS tests passing; success when all of them and every PASS_TO_PASS test pass.

reward="patch_similarity" (SWE-RL) scores the episode without running tests: the diff of the
workspace against the buggy checkout, compared with the reference fix on the host (the reference
never enters the sandbox) by agentgym.rewards.patch (-1 for no or malformed diff, else how close
the code it removes and writes is to the fix's, in [0, 1]); info["score"] is max(0, similarity),
the step reward keeps the -1.
reward="both" runs the tests too: reward = (tests score + similarity) / 2, score and success
stay the tests'. info["patch_similarity"] and info["patch_note"] say what was compared.

A sandbox that cannot run (bwrap missing or broken) raises SandboxUnavailable from reset or
step, so rollouts mark the episode infra_error instead of scoring it as a failure.
"""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import ClassVar

from agentgym.core import TextEnv
from agentgym.envs.swe.repos import HIDDEN_TESTS, VISIBLE_TESTS, repo_path
from agentgym.envs.swe.sandbox import BACKENDS, Limits, SandboxUnavailable, make_sandbox
from agentgym.envs.swe.snapshot import check_entries, read_workspace, write_workspace
from agentgym.envs.swe.space import SWETaskSpace
from agentgym.envs.swe.testing import PYTEST_ENV, grade
from agentgym.envs.swe.tools import ActionError, create, parse_action, str_replace, truncate, view
from agentgym.envs.swe.workspace import (
    PathError,
    fresh_copy,
    remove_workspace,
    sweep_stale_now_and_then,
    tree_digest,
)
from agentgym.errors import ConfigError
from agentgym.snapshot import need, need_bool, need_int, need_keys, need_score, need_str
from agentgym.rewards.patch import file_patch, patch_similarity, read_tree, tree_patch
from agentgym.tasks.spec import TaskSpec

REWARDS = ("tests", "patch_similarity", "both")

RULES = """You are fixing a bug in a Python repository, checked out in your working directory
(/workspace). Read the issue, find the bug in the library code, fix it, then submit.
Tools (one call per turn):
- bash(command, timeout=30): run a shell command in a sandbox (no network; each call starts in
  the repository root; files you change persist, processes and environment variables do not).
- view(path, start_line, end_line): show a file with line numbers, or list a directory.
- str_replace(path, old_str, new_str): replace the one exact occurrence of old_str.
- create(path, content): write a file.
- run_tests(paths): run the visible tests (default: tests/).
- submit(): finish; hidden tests then grade your fix.
Call tools as JSON: {"name": "view", "arguments": {"path": "pkg/core.py"}}, or as text:
`bash ls -la`, `view pkg/core.py 10-40`, `run_tests`, `submit`; `create PATH` takes the file
content on the following lines; `str_replace PATH` takes on the following lines
<<<<<<< SEARCH, the old text, =======, the new text, >>>>>>> REPLACE (each marker on its own line).
Long outputs are truncated in the middle."""


class SWEEnv(TextEnv):
    task_space = SWETaskSpace()
    rules: ClassVar[str] = RULES
    # ChatEnv reads this: JSON tool calls keep multi-line edits intact (the <action> parser
    # collapses whitespace).
    action_parser: ClassVar[str] = "json"
    snapshot_version = 1

    def __init__(self, render_mode: str | None = None, backend: str = "bwrap", max_steps: int = 30,
                 max_output_chars: int = 8000, limits: Limits | None = None, sandbox_options: dict | None = None,
                 reward: str = "tests"):
        super().__init__(render_mode)
        if backend not in BACKENDS:
            raise ConfigError(f"unknown sandbox backend {backend!r}; choose one of {', '.join(BACKENDS)}")
        if reward not in REWARDS:
            raise ConfigError(f"unknown SWE reward {reward!r}; choose one of {', '.join(REWARDS)}")
        self.reward_mode = reward
        self._patch: tuple[float, str] | None = None
        self.backend = backend
        self.max_steps = int(max_steps)
        self.max_output_chars = int(max_output_chars)
        self.limits = limits or Limits()
        self.sandbox_options = dict(sandbox_options or {})
        self.workspace: Path | None = None
        sweep_stale_now_and_then()  # workspaces of killed workers or rollouts
        self.sandbox = None
        self._finalizer = None
        self._steps = 0
        self._done = False
        self._success = False
        self._score = 0.0

    # --- episode ------------------------------------------------------------------------------
    def _reset(self, task: TaskSpec) -> tuple[str, dict]:
        self._teardown()
        p = task.params
        ws = fresh_copy(repo_path(p["repo"]), skip=(HIDDEN_TESTS,))
        self._finalizer = weakref.finalize(self, remove_workspace, ws)
        self.workspace = ws
        target = ws / p["file"]
        source = target.read_text()
        if source.count(p["before"]) != 1:
            raise ValueError(f"task {task.task_id} does not match the shipped project {p['repo']}")
        target.write_text(source.replace(p["before"], p["after"], 1))
        self.sandbox = make_sandbox(self.backend, ws, self.limits, **self.sandbox_options)
        self._steps = 0
        self._done = False
        self._success = False
        self._score = 0.0
        self._patch = None
        obs = (
            f"Repository `{p['repo']}` is checked out in /workspace (your working directory).\n\n"
            f"Issue:\n{p['issue']}\n\n{view(ws, '.')}"
        )
        return obs, self._info(task, action_valid=True)

    def _step(self, action: str):
        task = self.task
        if self._done:
            return "The episode is over; call reset().", 0.0, True, False, self._info(task, action_valid=False)
        self._steps += 1
        valid = True
        terminated = False
        try:
            call = parse_action(action)
            obs, terminated = self._run_tool(call)
        except (ActionError, PathError) as exc:
            obs, valid = f"Error: {exc}", False
        except (OSError, ValueError) as exc:  # e.g. view of a binary file the agent made; NUL bytes
            obs, valid = f"Error: {type(exc).__name__}: {exc}", False
        reward = 0.0
        truncated = False
        if not terminated and self._steps >= self.max_steps:
            obs += "\n\n[step limit reached: your work is graded as it is]\n" + self._grade()
            truncated = True
        if terminated or truncated:
            self._done = True
            reward = self._score
            if self._patch is not None and self.reward_mode == "patch_similarity":
                reward = self._patch[0]
            elif self._patch is not None:
                reward = (self._score + self._patch[0]) / 2
        return truncate(obs, self.max_output_chars), reward, terminated, truncated, self._info(task, valid)

    def _run_tool(self, call) -> tuple[str, bool]:
        ws, args = self.workspace, call.args
        if call.name == "bash":
            res = self.sandbox.run(args["command"], timeout=args.get("timeout"))
            return res.describe(), False
        if call.name == "view":
            return view(ws, args["path"], args.get("start_line"), args.get("end_line")), False
        if call.name == "str_replace":
            out = str_replace(ws, args["path"], args["old_str"], args["new_str"])
            self.sandbox.workspace_changed()
            return out, False
        if call.name == "create":
            out = create(ws, args["path"], args["content"])
            self.sandbox.workspace_changed()
            return out, False
        if call.name == "run_tests":
            paths = args["paths"] or [VISIBLE_TESTS]
            quoted = " ".join("'" + p.replace("'", "'\\''") + "'" for p in paths)
            res = self.sandbox.run(f"python -m pytest -q -p no:cacheprovider --tb=short {quoted}", env=PYTEST_ENV)
            return res.describe(), False
        if call.name == "submit":
            return "Submitted.\n" + self._grade(), True
        raise ActionError(f"unknown tool {call.name}")

    def _patch_reward(self) -> str:
        """SWE-RL's similarity of the workspace's diff to the reference fix, computed on the host."""
        p = self.task.params
        original = read_tree(repo_path(p["repo"]), skip_top=(HIDDEN_TESTS,))
        fixed = original[p["file"]]
        original[p["file"]] = fixed.decode("utf-8").replace(p["before"], p["after"], 1).encode("utf-8")
        predicted = tree_patch(original, read_tree(self.workspace, skip_top=(HIDDEN_TESTS,)))
        result = patch_similarity(predicted, file_patch(p["file"], original[p["file"]], fixed))
        self._patch = (result.score, result.note)
        return f"Patch similarity to the reference fix: {result.score:.3f}" + (f" ({result.note})" if result.note else "")

    def _grade(self) -> str:
        if self.reward_mode != "tests":
            note = self._patch_reward()
            if self.reward_mode == "patch_similarity":
                self._score, self._success = max(self._patch[0], 0.0), self._patch[0] == 1.0
                return note
            return note + "\n" + self._grade_tests()
        return self._grade_tests()

    def _grade_tests(self) -> str:
        try:
            g = grade(self.task.params, self.workspace, self.backend, self.limits)
        except SandboxUnavailable:
            raise
        except Exception as exc:  # whatever the agent left in the workspace, grading ends the episode
            self._score, self._success = 0.0, False
            return f"Grading failed ({type(exc).__name__}: {str(exc)[:200]}). Not solved."
        self._score, self._success = g.score, g.success
        passed = sum(g.fail_to_pass.values())
        lines = [f"Hidden tests: {passed}/{len(g.fail_to_pass)} of the tests for this issue pass."]
        if g.pass_to_pass_failed:
            lines.append(f"{len(g.pass_to_pass_failed)} previously passing tests now fail.")
        lines.append("Solved." if g.success else "Not solved.")
        return " ".join(lines)

    def _info(self, task: TaskSpec, action_valid: bool) -> dict:
        return {
            "task_id": task.task_id,
            "instruction": task.params["issue"],
            "anchor": tree_digest(self.workspace) if self.workspace else "",
            "admissible_actions": None,
            "action_valid": bool(action_valid),
            "success": self._success,
            "score": float(self._score),
            "steps": self._steps,
            **({"patch_similarity": self._patch[0], "patch_note": self._patch[1]} if self._patch else {}),
        }

    # --- snapshots: the workspace folder (envs/swe/snapshot.py: its entries and size cap) and the
    # episode's counters; the sandbox keeps nothing between commands but the workspace -----------
    def _get_state(self) -> dict:
        return {"workspace": read_workspace(self.workspace), "steps": self._steps, "done": self._done,
                "success": self._success, "score": self._score,
                "patch": list(self._patch) if self._patch is not None else None}

    def _set_state(self, state: dict) -> None:
        need_keys(state, ("workspace", "steps", "done", "success", "score", "patch"))
        steps = need_int(state["steps"], 0, self.max_steps, "steps")
        done, success = need_bool(state["done"], "done"), need_bool(state["success"], "success")
        score = need_score(state["score"], "score")
        need(done or (not success and score == 0.0 and state["patch"] is None), "only a graded episode has a score")
        need(done or steps < self.max_steps, "an episode at the step limit is over")
        patch = state["patch"]
        if patch is not None:
            need(isinstance(patch, list) and len(patch) == 2, "patch must be [similarity, note]")
            need_score(patch[0], "the patch similarity", low=-1.0)
            need_str(patch[1], "the patch note")
        checked = check_entries(state["workspace"])
        write_workspace(self.workspace, checked)
        self.sandbox.workspace_changed()
        self._steps, self._done, self._success, self._score = steps, done, success, score
        self._patch = (float(patch[0]), patch[1]) if patch is not None else None

    # --- cleanup ------------------------------------------------------------------------------
    def _teardown(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()
            self.sandbox = None
        if self._finalizer is not None:
            self._finalizer()
            self._finalizer = None
        self.workspace = None

    def close(self) -> None:
        self._teardown()
        super().close()


__all__ = ["SWEEnv", "SandboxUnavailable"]
