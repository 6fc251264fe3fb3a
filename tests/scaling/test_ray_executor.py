"""The Ray executor: env workers as Ray actors on a local Ray (2 CPUs)."""

from __future__ import annotations

import os
import signal
import time

import pytest

import agentgym
from agentgym.errors import ConfigError, MissingExtraError
from agentgym.executors_ray import RayConfig, RayEnvPool
from agentgym.policies import RandomPolicy

HOUSEHOLD = "agentgym/Household-v0"
# Half a CPU per worker: the session's Ray has 2, and a persistent pool may be alive next to a test's workers.
HALF = {"num_workers": 2, "num_cpus_per_worker": 0.5}


def _tasks(n=6):
    from agentgym.registration import get_task_space

    return get_task_space(HOUSEHOLD).split("train")[:n]


def _oracle():
    from agentgym.policies import OraclePolicy
    from agentgym.registration import get_task_space

    return OraclePolicy(get_task_space(HOUSEHOLD))


def _dicts(trajs):
    return [t.to_dict() for t in trajs]


def test_ray_executor_gives_the_same_trajectories_as_inprocess(ray_local):
    tasks = _tasks(6)
    ref = agentgym.collect(HOUSEHOLD, tasks, RandomPolicy(seed=3), group_size=3, seed=11)
    got = agentgym.collect(HOUSEHOLD, tasks, RandomPolicy(seed=3), group_size=3, seed=11, executor="ray",
                           executor_options=HALF)
    assert len(got) == 18 and not any(t.infra_error for t in got)
    assert _dicts(got) == _dicts(ref)


class KillingPolicy:
    """The oracle (each episode's actions independent of the others'), sending `sig` to env
    worker 0's process before turn `at` is stepped: SIGKILL for a death, SIGSTOP for a worker
    that hangs (alive and silent)."""

    def __init__(self, pool: RayEnvPool, at: int, sig: int = signal.SIGKILL):
        self.inner, self.pool, self.at, self.sig, self.turn, self.killed = _oracle(), pool, at, sig, 0, None

    def generate(self, prompts, sampling=None, contexts=None):
        self.turn += 1
        if self.turn == self.at:
            self.killed = self.pool._executor.pids[0]
            os.kill(self.killed, self.sig)
        return self.inner.generate(prompts, sampling, contexts)


def test_a_killed_worker_fails_only_its_episodes_is_restarted_and_the_rollout_goes_on(ray_local):
    tasks = _tasks(4)
    ref = agentgym.collect(HOUSEHOLD, tasks, _oracle(), group_size=2, seed=1)
    pool = RayEnvPool(RayConfig(**HALF))
    try:
        policy = KillingPolicy(pool, at=3)
        got = agentgym.collect(HOUSEHOLD, tasks, policy, group_size=2, seed=1, executor=pool)
        assert policy.killed is not None
        on_dead = [t for i, t in enumerate(got) if i % 2 == 0]  # slot i lives on worker i % 2
        on_live = [t for i, t in enumerate(got) if i % 2 == 1]
        # episodes of the killed worker that were still running end as infra errors, with the reason
        still_running = [t for t, r in zip(on_dead, ref[0::2]) if len(r.steps) >= 3]
        assert still_running and all(t.infra_error and "died" in t.error for t in still_running)
        # the other worker's episodes are exactly the in-process ones
        assert _dicts(on_live) == _dicts(ref[1::2])
        # Ray restarted the worker: the next rollout on the same pool is complete and equal to in-process
        t0 = time.monotonic()
        again = agentgym.collect(HOUSEHOLD, tasks, _oracle(), group_size=2, seed=1, executor=pool)
        assert not any(t.infra_error for t in again), [t.error for t in again]
        assert _dicts(again) == _dicts(ref)
        assert time.monotonic() - t0 < 60
        new_pid = ray_local.get(pool._executor.workers[0].ready.remote())
        assert new_pid != policy.killed
    finally:
        pool.shutdown()


def test_a_silent_worker_times_out_fails_only_its_episodes_and_is_replaced(ray_local):
    tasks = _tasks(4)
    ref = agentgym.collect(HOUSEHOLD, tasks, _oracle(), group_size=2, seed=1)
    # 3 s: shorter than an actor restart here (2-4 s), so the next reset must wait for the new
    # process rather than time it out and kill it again
    pool = RayEnvPool(RayConfig(**HALF, step_timeout_s=3.0))
    policy = KillingPolicy(pool, at=3, sig=signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        got = agentgym.collect(HOUSEHOLD, tasks, policy, group_size=2, seed=1, executor=pool)
        assert policy.killed is not None and time.monotonic() - t0 < 60
        still_running = [t for t, r in zip(got[0::2], ref[0::2]) if len(r.steps) >= 3]
        assert still_running and all(t.infra_error and "did not answer within 3s" in t.error for t in still_running)
        assert _dicts(got[1::2]) == _dicts(ref[1::2])  # the other worker's episodes are untouched
        assert pool._executor.restarts >= 1
        again = agentgym.collect(HOUSEHOLD, tasks, _oracle(), group_size=2, seed=1, executor=pool)
        assert _dicts(again) == _dicts(ref)  # a fresh process took the frozen one's place
        assert ray_local.get(pool._executor.workers[0].ready.remote()) != policy.killed
    finally:
        if policy.killed is not None:
            try:
                os.kill(policy.killed, signal.SIGKILL)  # if Ray has not reaped it already
            except ProcessLookupError:
                pass
        pool.shutdown()


def test_the_persistent_pool_reuses_its_workers(ray_local):
    pool = RayEnvPool(RayConfig(**HALF))
    try:
        tasks = _tasks(2)
        agentgym.collect(HOUSEHOLD, tasks, RandomPolicy(seed=0), group_size=2, executor=pool)
        pids = list(pool._executor.pids)
        agentgym.collect(HOUSEHOLD, tasks, RandomPolicy(seed=0), group_size=2, executor=pool)
        assert ray_local.get([w.ready.remote() for w in pool._executor.workers]) == pids
    finally:
        pool.shutdown()


def test_bad_ray_input_fails_with_one_line_before_any_work(ray_local):
    tasks = _tasks(1)
    with pytest.raises(ConfigError, match=r"= 6 CPUs, but the Ray cluster has 2"):
        agentgym.collect(HOUSEHOLD, tasks, RandomPolicy(), group_size=6, executor="ray",
                         executor_options={"num_workers": 6, "num_cpus_per_worker": 1})
    with pytest.raises(ConfigError, match="allow 2"):
        agentgym.collect(HOUSEHOLD, tasks, RandomPolicy(), group_size=4, executor="ray",
                         executor_options={**HALF, "envs_per_worker": 1})
    with pytest.raises(ConfigError, match="unknown ray executor option"):
        agentgym.collect(HOUSEHOLD, tasks, RandomPolicy(), executor="ray", executor_options={"workers": 2})


def test_unreachable_address_is_one_line(monkeypatch):
    from agentgym import executors_ray

    ray = pytest.importorskip("ray")
    monkeypatch.setattr(ray, "is_initialized", lambda: False)  # pretend no session: connect() must probe first
    called = []
    monkeypatch.setattr(ray, "init", lambda *a, **k: called.append(1))
    t0 = time.monotonic()
    with pytest.raises(ConfigError, match=r"cannot reach a Ray cluster at 127\.0\.0\.1:1 .*ray start --head"):
        executors_ray.connect(RayConfig(address="127.0.0.1:1"))
    assert not called and time.monotonic() - t0 < 5
    with pytest.raises(ConfigError, match="is not host:port"):
        executors_ray.connect(RayConfig(address="nowhere"))


def test_no_ray_installed_names_the_extra(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(MissingExtraError, match=r"pip install 'agentgym-credit\[ray\]'"):
        agentgym.collect(HOUSEHOLD, _tasks(1), RandomPolicy(), executor="ray")


def test_a_local_cluster_too_small_is_refused_before_ray_starts(monkeypatch):
    """A Ray this process would start has ray.num_cpus CPUs: a request over that needs no cluster
    to refuse. One that fits, or a cluster to join, is checked against the cluster itself."""
    import sys
    import types

    from agentgym import executors_ray

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setitem(sys.modules, "ray", types.SimpleNamespace(is_initialized=lambda: False))
    started = []
    monkeypatch.setattr(executors_ray, "connect", lambda rc: started.append(rc) or pytest.fail("Ray was started"))
    with pytest.raises(ConfigError, match="= 3 CPUs, but the Ray cluster has 2"):
        executors_ray.check_resources(RayConfig(num_workers=3, num_cpus=2))
    assert not started
    joined = types.SimpleNamespace(cluster_resources=lambda: {"CPU": 8.0})
    monkeypatch.setattr(executors_ray, "connect", lambda rc: started.append(rc) or joined)
    assert executors_ray.check_resources(RayConfig(num_workers=3, address="auto"))["cpus"] == 8.0
    assert executors_ray.check_resources(RayConfig(num_workers=2, num_cpus=2))["cpus"] == 8.0
    assert len(started) == 2


def test_train_with_more_ray_workers_than_cpus_stops_before_any_work(tmp_path):
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.run([sys.executable, "-m", "agentgym.cli", "train", "household-tiny", "env.executor=ray",
                           "ray.num_workers=3", "ray.num_cpus=2", f"run_dir={tmp_path}/run"],
                          capture_output=True, text=True, timeout=180, env=env)
    assert proc.returncode == 2, proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "= 3 CPUs, but the Ray cluster has 2" in errors[0]
    assert not (tmp_path / "run" / "tiny_model").exists()
