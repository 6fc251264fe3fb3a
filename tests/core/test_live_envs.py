"""Issue 19: `collect` keeps at most `max_live_envs` environments and closes each as its
episode ends; SWE workspaces of killed processes are swept."""

import os
import subprocess
import sys
import tempfile

import pytest

import agentgym
from agentgym.policies import OraclePolicy
from agentgym.toy import CounterEnv  # noqa: F401


class Tracker:
    live = 0
    peak = 0
    closed = 0


def _tracked_factory():
    from agentgym.chat import ChatEnv

    env = agentgym.make("agentgym/Household-v0")
    Tracker.live += 1
    Tracker.peak = max(Tracker.peak, Tracker.live)
    inner_close = env.close

    def close():
        if getattr(env, "_tracked_closed", False):
            return inner_close()
        env._tracked_closed = True
        Tracker.live -= 1
        Tracker.closed += 1
        return inner_close()

    env.close = close
    return ChatEnv(env)


@pytest.mark.parametrize("cap", [1, 3])
def test_collect_caps_live_envs_and_closes_each_at_episode_end(cap):
    Tracker.live = Tracker.peak = Tracker.closed = 0
    space = agentgym.get_task_space("agentgym/Household-v0")
    tasks = space.split("train")[:4]
    trajs = agentgym.collect(_tracked_factory, tasks, OraclePolicy(space), group_size=2, max_live_envs=cap)
    assert len(trajs) == 8 and all(t.success for t in trajs)
    assert [t.task_id for t in trajs] == [t.task_id for t in tasks for _ in range(2)]
    assert Tracker.peak <= cap
    assert Tracker.live == 0 and Tracker.closed >= 8


def test_collect_results_do_not_depend_on_the_cap():
    space = agentgym.get_task_space("agentgym/Household-v0")
    tasks = space.split("train")[:3]
    a = agentgym.collect("agentgym/Household-v0", tasks, OraclePolicy(space), group_size=2, max_live_envs=None)
    b = agentgym.collect("agentgym/Household-v0", tasks, OraclePolicy(space), group_size=2, max_live_envs=2)
    assert [(t.task_id, t.score, len(t.steps)) for t in a] == [(t.task_id, t.score, len(t.steps)) for t in b]


def _swe_dirs(pid: int | None = None):
    """The SWE workspace folders of process `pid` (default: this one), which its name carries:
    other processes on the machine (a parallel test run) make their own."""
    return {n for n in os.listdir(tempfile.gettempdir()) if n.startswith(f"agentgym-swe-{pid or os.getpid()}.")}


def test_swe_rollout_never_holds_more_workspaces_than_the_cap():
    from agentgym.envs.swe import env as swe_env

    space = agentgym.get_task_space("agentgym/SWE-v0")
    tasks = space.split("heldout")[:3]
    peak = [0]
    before = _swe_dirs()
    orig = swe_env.fresh_copy

    def counting(*a, **k):
        ws = orig(*a, **k)
        peak[0] = max(peak[0], len(_swe_dirs() - before))
        return ws

    swe_env.fresh_copy = counting
    try:
        from agentgym.policies import RandomPolicy

        agentgym.collect("agentgym/SWE-v0", tasks, RandomPolicy(seed=0), group_size=2, max_live_envs=2,
                         env_kwargs={"backend": "local", "max_steps": 1}, chat={"parser": "json"})
    finally:
        swe_env.fresh_copy = orig
    assert 1 <= peak[0] <= 2 + 1  # two live workspaces (+ a grading copy while one is graded)
    assert not _swe_dirs() - before


def test_workspaces_of_a_killed_process_are_swept():
    code = ("import os, agentgym, gymnasium as gym\n"
            "env = gym.make('agentgym/SWE-v0', backend='local').unwrapped\n"
            "env.reset(options={'task': env.task_space.split('train')[0]})\n"
            "print(os.getpid(), env.workspace.parent.name, flush=True)\n"
            "os.kill(os.getpid(), 9)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    pid, name = out.stdout.strip().splitlines()[-1].split()
    assert name in _swe_dirs(int(pid))  # the SIGKILL left it behind ...
    from agentgym.envs.swe.workspace import sweep_stale

    sweep_stale()
    assert name not in _swe_dirs(int(pid))  # ... and the sweep (run by every new SWEEnv) removed it
