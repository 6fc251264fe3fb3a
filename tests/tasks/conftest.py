"""Shared fixtures: a Counter-based task space with many held-out ids, trajectories by hand."""

from __future__ import annotations

import numpy as np
import pytest

from agentgym.toy import CounterTaskSpace, register_counter
from agentgym.tasks.spec import TaskSpec
from agentgym.trajectory import Step, Trajectory

register_counter()


class ManyHeldoutCounterSpace(CounterTaskSpace):
    """Counter tasks over 20,000 layout seeds where every seed divisible by 10 is held out
    (10% of everything `sample` can draw), so the generator is offered held-out ids all the time."""

    num_seeds = 20_000

    def sample(self, rng, max_target: int = 5, **_):
        return TaskSpec(self.env_id, {"target": int(rng.integers(1, max_target + 1))},
                        seed=int(rng.integers(self.num_seeds)))

    def build_splits(self):
        return {
            "train": [TaskSpec(self.env_id, {"target": t}, seed=s) for t in (1, 2, 3) for s in range(1, 40, 3)
                      if s % 10],
            "heldout": [TaskSpec(self.env_id, {"target": t}, seed=s) for t in range(1, 6)
                        for s in range(0, self.num_seeds, 10)],
            "heldout_unseen": [],
        }

    def read_split(self, name):
        cache = self.__dict__.setdefault("_built", self.build_splits())
        return tuple(cache[name])


@pytest.fixture
def counter_space():
    return ManyHeldoutCounterSpace()


def make_traj(task: TaskSpec, group: str, success: bool, steps: int = 2, infra_error: bool = False,
              score: float | None = None) -> Trajectory:
    return Trajectory(task_id=task.task_id, group_id=group, env_id=task.env_id, task=task.to_dict(),
                      steps=[Step(observation="", anchor=str(i)) for i in range(steps)], success=success,
                      score=float(success) if score is None else score, infra_error=infra_error,
                      instruction=f"task {task.task_id}")


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture
def traj():
    """The trajectory builder, as a fixture (test modules cannot import conftest by name)."""
    return make_traj
