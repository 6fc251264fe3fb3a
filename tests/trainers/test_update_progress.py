"""The PPO update shows its progress in micro-batches inside a progress session (a two-minute
update on a loaded machine used to show nothing)."""

from __future__ import annotations

import io

import numpy as np
import torch

from agentgym import progress
from agentgym.policies.base import SamplingParams


def test_the_update_counts_its_micro_batches(toy_env_id, tiny_policy_factory):
    import agentgym
    from agentgym.trainers.config import PPOConfig
    from agentgym.trainers.learner import ppo_update
    from agentgym.trainers.samples import make_samples, tokenize_trajectories

    policy = tiny_policy_factory()
    tasks = agentgym.get_task_space(toy_env_id).split("train")[:2]
    trajectories = agentgym.collect(toy_env_id, tasks, policy, 2, max_turns=3,
                                    sampling=SamplingParams(max_new_tokens=6, seed=0))
    samples = make_samples(tokenize_trajectories(trajectories), [np.ones(len(t.steps)) for t in trajectories])
    optimizer = torch.optim.SGD(policy.trainable_parameters(), lr=0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    out = io.StringIO()
    pc = PPOConfig(epochs=2, minibatch_size=5, micro_batch_size=2)
    with progress.session(stream=out, mode="plain"):
        ppo_update(pc, (0.8, 1.2), policy, optimizer, scheduler, samples, np.random.default_rng(0), 0)
    expected = 2 * sum(-(-len(c) // 2) for c in np.array_split(np.arange(len(samples)), -(-len(samples) // 5)))
    assert f"update {expected}/{expected} micro-batches (100%)" in out.getvalue()


def test_batches_made_ahead_in_a_thread_show_their_collect_bar(toy_config, tmp_path, tiny_model_dir):
    """The progress session is context-local (agentgym.progress), not a module global: the producer
    thread is handed the command's session, so its rollouts show as inline ones do."""
    from agentgym.policies.hf import HFPolicy
    from agentgym.registration import get_task_space
    from agentgym.tasks.source import make_task_source_from_config
    from agentgym.trainers.batches import BatchProducer
    from agentgym.trainers.task_selection import select_train_tasks

    cfg = toy_config(tmp_path, tiny_model_dir, "rollout.max_staleness=1", "iterations=1")
    space = get_task_space(cfg.env.id)
    source = make_task_source_from_config(cfg.tasks, space, select_train_tasks(cfg.env, space, cfg.seed), seed=cfg.seed)
    out = io.StringIO()
    with progress.session(stream=out, mode="plain"):
        producer = BatchProducer(cfg, HFPolicy(tiny_model_dir), source)
        try:
            assert producer.background and producer.get(0).trajectories
        finally:
            producer.close()
    assert "collect " in out.getvalue(), out.getvalue()
