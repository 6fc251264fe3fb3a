"""A tiny counting game to evaluate against, independent of the real environment families.

The agent must bring a counter from 0 to a target (positive: `inc`, negative: `dec`). Tasks
with params {"explode": True} raise inside `step`, as a broken environment would, so the
rollout marks them infra_error.
"""

from __future__ import annotations

import numpy as np
import pytest

import agentgym
from agentgym import TaskSpace, TaskSpec, TextEnv
from agentgym.tasks.splits import save_split
from agentgym.tasks import generation as _generation

ENV_ID = "agentgym/EvalCounter-v0"
ACTIONS = ["inc", "dec", "look"]


class CounterSpace(TaskSpace):
    """Bring a counter to a target value."""

    env_id = ENV_ID

    def sample(self, rng, **difficulty):
        target = int(rng.integers(1, 4)) * (1 if rng.random() < 0.5 else -1)
        return TaskSpec(ENV_ID, {"target": target}, seed=int(rng.integers(1000)))

    def mutate(self, spec, rng):
        return TaskSpec(ENV_ID, {"target": spec.params["target"] + 1}, seed=spec.seed)

    def solve(self, spec):
        target = spec.params["target"]
        return ["inc" if target > 0 else "dec"] * abs(target)

    def category(self, spec):
        target = spec.params["target"]
        return ("up" if target > 0 else "down") + ("-easy" if abs(target) == 1 else "-hard")

    def build_splits(self):
        def tasks(targets, seed):
            return [TaskSpec(ENV_ID, {"target": t}, seed=seed + i) for i, t in enumerate(targets)]

        return {
            "train": tasks([1, 2, -1, -2], 0),
            "heldout": tasks([1, 2, 3, -1, -2, -3], 100),
            "heldout_unseen": tasks([4, -4], 200),
        }


class CounterEnv(TextEnv):
    task_space = CounterSpace()
    rules = "Actions: inc, dec, look."

    def _info(self, valid: bool) -> dict:
        target = self.task.params["target"]
        score = max(0.0, 1.0 - abs(self.value - target) / abs(target))
        return dict(task_id=self.task.task_id, instruction=f"Make the counter equal {target}.",
                    anchor=str(self.value), admissible_actions=list(ACTIONS), action_valid=valid,
                    success=self.value == target, score=score)

    def _reset(self, task):
        self.value = 0
        return "The counter shows 0.", self._info(True)

    def _step(self, action):
        if self.task.params.get("explode"):
            raise RuntimeError("simulated environment crash")
        action = action.strip()
        valid = action in ACTIONS
        if action == "inc":
            self.value += 1
        elif action == "dec":
            self.value -= 1
        info = self._info(valid)
        obs = f"The counter shows {self.value}." if valid else "Nothing happens."
        return obs, float(info["score"]) if info["success"] else 0.0, bool(info["success"]), False, info


@pytest.fixture(scope="session")
def counter_env(tmp_path_factory):
    """Registers the counting game with its split manifests; returns its id."""
    split_dir = tmp_path_factory.mktemp("counter_splits")
    space = CounterEnv.task_space
    for name, tasks in _generation.build_splits(space).items():
        save_split(split_dir / f"{name}.jsonl", tasks)
    space.split_dir = split_dir
    agentgym.register_env("EvalCounter-v0", CounterEnv, max_episode_steps=6)
    return ENV_ID


@pytest.fixture
def rng():
    return np.random.default_rng(0)
