"""Counter: the smallest complete TextEnv, as an example of writing and registering one and
as a fixture for tests of the wrappers and the rollout engine.

The agent must bring a counter from 0 to a target with `inc` / `dec`. `crash_at` makes the env
fail at a given step (raise, or kill its worker process) to exercise infra-error handling.
"""

from __future__ import annotations

import hashlib
import os

import numpy as np

from agentgym.core import TextEnv
from agentgym.tasks.space import TaskSpace
from agentgym.tasks.spec import TaskSpec
from agentgym.registration import register_env
from agentgym.snapshot import need_int, need_keys

COUNTER_ID = "agentgym/Counter-v0"


class CounterTaskSpace(TaskSpace):
    """Count from 0 to `target` (1..9) with `inc`; `dec` goes back."""

    env_id = COUNTER_ID

    def sample(self, rng: np.random.Generator, max_target: int = 5, **_) -> TaskSpec:
        return TaskSpec(self.env_id, {"target": int(rng.integers(1, max_target + 1))}, seed=int(rng.integers(1 << 20)))

    def mutate(self, spec: TaskSpec, rng: np.random.Generator) -> TaskSpec:
        target = min(9, max(1, spec.params["target"] + int(rng.choice([-1, 1]))))
        return TaskSpec(self.env_id, {"target": target}, seed=spec.seed)

    def solve(self, spec: TaskSpec) -> list[str]:
        return ["inc"] * int(spec.params["target"])

    def category(self, spec: TaskSpec) -> str:
        return f"target{spec.params['target']}"

    def build_splits(self) -> dict[str, list[TaskSpec]]:
        return {
            "train": [TaskSpec(self.env_id, {"target": t}, seed=s) for t in (1, 2, 3) for s in range(4)],
            "heldout": [TaskSpec(self.env_id, {"target": t}, seed=100 + s) for t in (1, 2, 3) for s in range(2)],
            "heldout_unseen": [TaskSpec(self.env_id, {"target": 4}, seed=s) for s in range(3)],
        }

    def read_split(self, name: str) -> tuple[TaskSpec, ...]:
        return tuple(self.build_splits()[name])  # generated, nothing shipped


class CounterEnv(TextEnv):
    task_space = CounterTaskSpace()
    rules = "Actions: `inc` adds one to the counter, `dec` subtracts one. Reach the target."
    snapshot_version = 1

    def __init__(self, render_mode: str | None = None, crash_at: int | None = None, crash_mode: str = "raise"):
        super().__init__(render_mode=render_mode)
        self.crash_at, self.crash_mode = crash_at, crash_mode

    def _info(self, valid: bool) -> dict:
        target = self.task.params["target"]
        done = self.count == target
        return {
            "task_id": self.task.task_id,
            "instruction": f"bring the counter to {target}.",
            "anchor": hashlib.sha1(f"{self.count}".encode()).hexdigest()[:12],
            "admissible_actions": ["inc", "dec"],
            "action_valid": valid,
            "success": done,
            "score": 1.0 if done else 0.0,
            "progress": max(0.0, min(1.0, self.count / target)),
        }

    def _get_state(self) -> dict:
        return {"count": self.count, "t": self.t}

    def _set_state(self, state: dict) -> None:
        need_keys(state, ("count", "t"))
        t = need_int(state["t"], 0, 1 << 30, "t (the steps played)")
        count = need_int(state["count"], -t, t, "count (at most t steps from 0)")
        self.count, self.t = count, t

    def _reset(self, task: TaskSpec):
        self.count, self.t = 0, 0
        return "The counter shows 0.", self._info(True)

    def _step(self, action: str):
        self.t += 1
        if self.crash_at is not None and self.t >= self.crash_at:
            if self.crash_mode == "exit":
                os._exit(3)  # simulate a segfault / OOM kill of the worker process
            raise RuntimeError("injected environment failure")
        act = action.strip().lower()
        valid = act in ("inc", "dec")
        if valid:
            self.count += 1 if act == "inc" else -1
            obs = f"The counter shows {self.count}."
        else:
            obs = "Nothing happens. Valid actions: inc, dec."
        info = self._info(valid)
        return obs, info["score"] if info["success"] else 0.0, info["success"], False, info


def register_counter(**kwargs) -> str:

    return register_env(COUNTER_ID, "agentgym.toy:CounterEnv", max_episode_steps=12,
                        description="toy: count to a target", **kwargs)
