"""The HF rollout policy as Ray actors (policies/ray_policy.py), on CPU with the tiny model."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("ray")

from agentgym.policies.base import SamplingParams  # noqa: E402

PROMPTS = [[{"role": "user", "content": f"You are in room {i}. Take the key in room {(i + 1) % 3}."}] for i in range(5)]


def _ids(completions):
    return [c.response_ids for c in completions]


@pytest.fixture
def make_remote(ray_local, tiny_model_dir):
    from agentgym.executors_ray import RayConfig
    from agentgym.policies.ray_policy import RayRolloutPolicy

    made = []

    def make(trainer, replicas=1):
        rc = RayConfig(policy_replicas=replicas, policy_num_cpus=0.5)
        made.append(RayRolloutPolicy(trainer, tiny_model_dir, rc))
        return made[-1]

    yield make
    for p in made:
        p.close()


def test_one_replica_generates_what_the_local_policy_generates(tiny_policy_factory, make_remote):
    local, trainer = tiny_policy_factory(), tiny_policy_factory()
    remote = make_remote(trainer)
    sampling = SamplingParams(temperature=1.0, max_new_tokens=8, seed=7)
    a, b = local.generate(PROMPTS, sampling), remote.generate(PROMPTS, sampling)
    assert _ids(a) == _ids(b) and [c.prompt_ids for c in a] == [c.prompt_ids for c in b]
    for x, y in zip(a, b):
        assert torch.allclose(torch.tensor(x.response_logprobs), torch.tensor(y.response_logprobs), atol=1e-5)
    assert remote.num_syncs == 1


def test_trainer_updates_are_synced_into_the_replicas(tiny_policy_factory, make_remote):
    trainer, reference = tiny_policy_factory(), tiny_policy_factory()
    remote = make_remote(trainer, replicas=2)
    greedy = SamplingParams(temperature=0.0, max_new_tokens=6)
    before = remote.generate(PROMPTS, greedy)
    assert _ids(before) == _ids(reference.generate(PROMPTS, greedy))  # 2 replicas, greedy: same as local
    assert remote.generate(PROMPTS, greedy) and remote.num_syncs == 1  # unchanged weights: no second sync
    with torch.no_grad():  # an "update": in-place writes, as the optimizer does
        for (_, p), (_, q) in zip(trainer.model.named_parameters(), reference.model.named_parameters()):
            noise = torch.randn_like(p) * 0.5
            p.add_(noise)
            q.add_(noise)
    after = remote.generate(PROMPTS, greedy)
    assert remote.num_syncs == 2 and remote.last_sync_s > 0
    assert _ids(after) == _ids(reference.generate(PROMPTS, greedy))
    assert _ids(after) != _ids(before)


def test_trainer_runs_with_ray_env_workers_and_ray_policy(toy_config, tiny_model_dir, tmp_path, ray_local, monkeypatch):
    """The training loop with env.executor=ray and policy.engine=ray (the toy env's factory is
    shipped to the env workers by value: its module is not importable there)."""
    import ray.cloudpickle

    from agentgym.trainers.training import train

    from agentgym.executors_ray import RayEnvPool
    from . import conftest

    shut = []
    real_shutdown = RayEnvPool.shutdown
    monkeypatch.setattr(RayEnvPool, "shutdown", lambda self: (shut.append(self), real_shutdown(self)))
    ray.cloudpickle.register_pickle_by_value(conftest)
    try:
        cfg = toy_config(tmp_path, tiny_model_dir, "env.executor=ray", "policy.engine=ray", "ray.num_cpus_per_worker=0.5",
                         "ray.policy_num_cpus=0.5", "ray.policy_replicas=1", "iterations=1")
        summary = train(cfg, log=lambda *_: None)
    finally:
        ray.cloudpickle.unregister_pickle_by_value(conftest)
    assert summary["iterations"] == 1
    assert shut and all(pool._executor is None for pool in shut)  # the run's env workers are gone with the run


def test_a_killed_replica_is_restarted_and_never_serves_stale_weights(tiny_policy_factory, make_remote):
    """SIGKILL a replica after an update: the next call waits for Ray's new process, loads the
    trainer's current weights into it (not the start model it was rebuilt from) and completes
    every prompt."""
    import os
    import signal

    trainer, reference = tiny_policy_factory(), tiny_policy_factory()
    remote = make_remote(trainer, replicas=2)
    greedy = SamplingParams(temperature=0.0, max_new_tokens=6)
    start = _ids(remote.generate(PROMPTS, greedy))
    with torch.no_grad():
        for (_, p), (_, q) in zip(trainer.model.named_parameters(), reference.model.named_parameters()):
            noise = torch.randn_like(p) * 0.5
            p.add_(noise)
            q.add_(noise)
    expected = _ids(reference.generate(PROMPTS, greedy))
    assert _ids(remote.generate(PROMPTS, greedy)) == expected != start
    old_pid = remote.pids[1]
    os.kill(old_pid, signal.SIGKILL)
    out = remote.generate(PROMPTS, greedy)
    assert [c.error for c in out] == [None] * len(PROMPTS)
    assert _ids(out) == expected  # the restarted replica serves the trained weights
    assert remote.pids[1] != old_pid and remote.restarts == 1 and remote.num_syncs == 2


def test_a_replica_whose_policy_raises_fails_its_prompts_and_is_not_restarted(tiny_policy_factory, make_remote):
    """An exception inside the replica (here a malformed prompt) is an infra error for that call's
    prompts, named in one line; the replica is not a death: same process, next call served."""
    remote = make_remote(tiny_policy_factory())
    pid = remote.pids[0]
    greedy = SamplingParams(temperature=0.0, max_new_tokens=4)
    out = remote.generate([[{"text": "no role or content"}]], greedy)
    assert out[0].finish_reason == "error" and out[0].error.startswith("policy replica 0 failed: ")
    assert "\n" not in out[0].error
    assert remote.restarts == 0 and remote.pids[0] == pid
    assert [c.error for c in remote.generate(PROMPTS, greedy)] == [None] * len(PROMPTS)
