"""Shipped tasks, in the bwrap sandbox: each fails before the fix (no FAIL_TO_PASS test passes,
not solved), and the oracle, through the env's own tools, solves it (all pass).

The suite checks one task of every operator/visibility category in every split (42 of the 256;
the whole sweep takes about 4 of CI's 20 minutes); `AGENTGYM_FULL_SWEEP=1 pytest tests/swe/test_all_tasks.py`
checks every task, as a change to the task builder should be checked before it ships."""

import os
from collections import Counter

import pytest

from agentgym.envs.swe.env import SWEEnv
from agentgym.envs.swe.space import SWETaskSpace
from agentgym.envs.swe.testing import grade

pytestmark = [pytest.mark.slow, pytest.mark.sandbox]

SPACE = SWETaskSpace()
ALL = [t for name in SPACE.split_names for t in SPACE.split(name)]


def _one_of_each_category() -> list:
    seen: Counter = Counter()
    picked = []
    for name in SPACE.split_names:
        for task in SPACE.split(name):
            key = (name, SPACE.category(task))
            if seen[key] < 1:
                seen[key] += 1
                picked.append(task)
    return picked


CHECKED = ALL if os.environ.get("AGENTGYM_FULL_SWEEP") == "1" else _one_of_each_category()


def test_there_are_at_least_200_tasks():
    assert len(ALL) >= 200


def _check(tasks) -> list:
    """The failures among `tasks`, played in one env."""
    env = SWEEnv()
    failures = []
    try:
        for task in tasks:
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
    return failures


def test_every_task_fails_before_and_the_oracle_solves_it():
    from concurrent.futures import ThreadPoolExecutor

    # two envs in threads: the time is in sandboxed test runs (child processes), so two cores
    # play about twice as many tasks
    with ThreadPoolExecutor(2) as pool:
        failures = [f for part in pool.map(_check, (CHECKED[0::2], CHECKED[1::2])) for f in part]
    assert len({SPACE.category(t) for t in CHECKED}) == len({SPACE.category(t) for t in ALL})
    assert not failures, f"{len(failures)}/{len(CHECKED)} tasks failed: {failures[:5]}"
