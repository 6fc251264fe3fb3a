"""The async producer's copy of the policy follows the trainer through one declared path: the
trainer publishes weights to it (`publish`) and it takes them in `sync()`, as every rollout engine
does (agentgym.policies.engines); the producer writes none of the policy's private attributes."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


def test_a_rollout_copy_takes_published_weights_in_sync(tiny_policy_factory):
    trainer = tiny_policy_factory()
    rollout = trainer.rollout_copy(version=3)
    assert rollout.model is not trainer.model and rollout.tokenizer is not trainer.tokenizer
    assert rollout.reference_model is None and rollout.synced_version == 3 and trainer.synced_version is None
    rollout._prefixes["episode"] = "a cached conversation"
    with torch.no_grad():
        for p in trainer.trainable_parameters():
            p.add_(0.01)
    rollout.sync()  # nothing published: the copy keeps sampling with its weights, never mid-update ones
    assert not all(torch.equal(a, b) for a, b in zip(rollout.model.parameters(), trainer.model.parameters()))
    rollout.publish(4)
    published = [p.detach().clone() for p in trainer.model.parameters()]
    with torch.no_grad():
        for p in trainer.trainable_parameters():
            p.add_(0.01)  # the next update has begun: the snapshot is what was published
    rollout.sync()
    assert rollout.synced_version == 4 and not rollout._prefixes  # prefixes of the old weights dropped
    assert all(torch.equal(a, b) for a, b in zip(rollout.model.parameters(), published))
    assert trainer.sync() == 0.0  # the trainer's own policy: nothing to take
    with pytest.raises(TypeError, match="rollout_copy"):
        trainer.publish(1)


def test_a_rollout_copy_decodes_one_row_exactly_as_the_trainer(tiny_policy_factory):
    """A one-row decode step runs the CPU matrix-vector kernel, whose rounding depends on the
    weights' address alignment; weights loaded from a safetensors map sit 8-byte aligned, every
    copy 64-byte aligned, so HFPolicy gives its loaded weights aligned storage of their own."""
    from agentgym.policies.base import SamplingParams

    trainer = tiny_policy_factory()
    assert all(p.data_ptr() % 64 == 0 for p in trainer.model.parameters())
    rollout = trainer.rollout_copy()
    sampling = SamplingParams(temperature=1.0, max_new_tokens=12, seed=7)
    prompt = [list(range(3, 40))]  # one row: every decode step is a matrix-vector product
    a, b = trainer.generate_ids(prompt, sampling)[0], rollout.generate_ids(prompt, sampling)[0]
    assert a.response_ids == b.response_ids and a.response_logprobs == b.response_logprobs


class _Copy:
    """A policy's rollout copy as the producer sees it: generate, sync, publish, synced_version."""

    def __init__(self, inner, version):
        self.inner, self.synced_version, self.published, self.syncs = inner, version, [], 0

    def generate(self, prompts, sampling=None, contexts=None):
        return self.inner.generate(prompts, sampling, contexts)

    def publish(self, version):
        self.published.append(version)

    def sync(self, force=False):
        self.syncs += 1
        if self.published:
            self.synced_version = self.published[-1]
        return 0.0


class _Trainer:
    """A trainable policy with a rollout copy of its own making (not an HFPolicy)."""

    def __init__(self, inner):
        self.inner, self.copies = inner, []

    def rollout_copy(self, version=0):
        self.copies.append(_Copy(self.inner, version))
        return self.copies[-1]


def test_the_producer_asks_the_policy_for_its_copy_and_syncs_it(toy_config, tmp_path, tiny_model_dir,
                                                                  tiny_policy_factory):
    from agentgym.registration import get_task_space
    from agentgym.tasks.source import make_task_source_from_config
    from agentgym.trainers.batches import BatchProducer
    from agentgym.trainers.task_selection import select_train_tasks

    cfg = toy_config(tmp_path, tiny_model_dir, "rollout.max_staleness=1", "iterations=3")
    space = get_task_space(cfg.env.id)
    source = make_task_source_from_config(cfg.tasks, space, select_train_tasks(cfg.env, space, cfg.seed), seed=cfg.seed)
    trainer = _Trainer(tiny_policy_factory())
    producer = BatchProducer(cfg, trainer, source)
    try:
        [rollout] = trainer.copies
        assert producer.rollout_policy is rollout
        batches = [producer.get(0), producer.get(1)]
        producer.finish(0, trainer, batches[0], [])
        batch = producer.get(2)  # two versions ahead of 0: made after version 1 was published
        assert rollout.published == [1] and rollout.syncs >= 3
        assert {s.policy_version for t in batch.trajectories for s in t.steps} == {1}
    finally:
        producer.close()
