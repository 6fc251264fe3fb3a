"""Every shipped task, in the bwrap sandbox: it fails before the fix (no FAIL_TO_PASS test
passes, not solved), and the oracle, through the env's own tools, solves it (all pass)."""

import pytest

from agentgym.envs.swe.env import SWEEnv
from agentgym.envs.swe.space import SWETaskSpace
from agentgym.envs.swe.testing import grade

pytestmark = [pytest.mark.slow, pytest.mark.sandbox]

SPACE = SWETaskSpace()
ALL = [t for name in SPACE.split_names for t in SPACE.split(name)]


def test_there_are_at_least_200_tasks():
    assert len(ALL) >= 200


def test_every_task_fails_before_and_the_oracle_solves_it():
    env = SWEEnv()
    failures = []
    try:
        for task in ALL:
            env.reset(options={"task": task})
            before = grade(task.params, env.workspace, "bwrap")
            if before.success or any(before.fail_to_pass.values()) or before.pass_to_pass_failed:
                failures.append((task.task_id, "before", before.fail_to_pass, before.pass_to_pass_failed))
                continue
            for action in SPACE.solve(task):
                obs, reward, terminated, truncated, info = env.step(action)
            if not (terminated and info["success"] and reward == 1.0):
                failures.append((task.task_id, "after", obs))
    finally:
        env.close()
    assert not failures, f"{len(failures)}/{len(ALL)} tasks failed: {failures[:5]}"
