"""Shared-prefix forward passes (trainers/shared_prefix.py): a prompt prefix common to samples of a
micro-batch is computed once, and the update's logprobs, hidden states, entropies and gradients are
those of the plain forward."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from agentgym.policies.base import SamplingParams
from agentgym.trainers.samples import TokenSequence, make_samples, tokenize_trajectories
from agentgym.trainers.shared_prefix import plan_levels, shared_prefix_logprobs


def _seq(prompt, reply):
    return TokenSequence(input_ids=prompt + reply, loss_mask=[0] * len(prompt) + [1] * len(reply),
                         old_logprobs=[0.0] * (len(prompt) + len(reply)), value_positions=[len(prompt) - 1],
                         response_ends=[len(prompt) + len(reply) - 1])


def test_the_plan_computes_each_shared_token_once_and_rebuilds_every_sample():
    task_a = [1, 2, 3, 4, 5, 6]
    sequences = [
        _seq(task_a + [7, 8], [9]),
        _seq(task_a + [7, 8], [9]),        # the same sample twice (a confident group): one row
        _seq(task_a + [7, 8], [10, 11]),   # the same prompt, another reply
        _seq(task_a + [12], [9]),
        _seq([20, 21, 22], [23]),          # another task: its own cluster
    ]
    plan = plan_levels(sequences)
    stems, rests, replies = plan.levels
    assert sorted(map(tuple, stems.rows)) == [tuple(task_a), (20, 21)]
    assert sorted(map(tuple, rests.rows)) == [(7, 8), (12,), (22,)]
    assert len(replies.rows) == 4
    assert plan.tokens() == (6 + 2) + (2 + 1 + 1) + (1 + 2 + 1 + 1) < sum(len(s) for s in sequences)
    for seq, nodes in zip(sequences, plan.nodes):  # every position maps to a node holding its token
        assert [plan.levels[lv].rows[row][col] for lv, row, col in nodes] == seq.input_ids
    assert plan.usable
    assert not plan_levels([_seq([5], [6])]).usable  # a one-token prompt leaves an empty stem


def test_a_root_shared_by_every_prompt_is_a_level_of_its_own():
    system = list(range(100, 120))
    sequences = [_seq(system + [1, 2, 3], [9]), _seq(system + [1, 2, 4], [9]), _seq(system + [5, 6], [7, 8])]
    from agentgym.trainers.shared_prefix import shared_root_length

    root = shared_root_length(sequences)
    assert root == 20  # the system prompt; each prompt keeps two tokens past it
    plan = plan_levels(sequences, root)
    assert plan.levels[0].rows == [system] and plan.root == 20
    assert all(row for level in plan.levels[1:] for row in level.rows)  # no level starts empty
    for seq, nodes in zip(sequences, plan.nodes):
        assert [plan.levels[lv].rows[row][col] for lv, row, col in nodes] == seq.input_ids
    assert plan.tokens() == sum(len(r) for level in plan.levels[1:] for r in level.rows)  # the root apart
    assert shared_root_length([_seq(system + [1], [9])] + sequences) == 19  # capped: two tokens stay
    with pytest.raises(ValueError, match="shares the first 21"):
        plan_levels(sequences, 21)


def _samples(policy, env_id, mode, history, admissible_only=False, system_prompt="Act."):
    import agentgym

    tasks = agentgym.get_task_space(env_id).split("train")[:3]
    chat = {"history": history, "system_prompt": system_prompt, "show_admissible": True}
    trajectories = agentgym.collect(env_id, tasks, policy, 3, seed=5, chat=chat, max_turns=4,
                                    sampling=SamplingParams(temperature=1.0, max_new_tokens=8, seed=11,
                                                            admissible_only=admissible_only))
    sequences = tokenize_trajectories(trajectories, mode)
    rng = np.random.default_rng(0)
    return make_samples(sequences, [rng.normal(size=len(t.steps)) for t in trajectories],
                        returns=[rng.normal(size=len(t.steps)) for t in trajectories])


def _top_layer_policy(factory):
    """The 2-layer model with LoRA on layer 1 alone, its B small and random: at peft's B = 0 the
    gradient of A would be 0 and a gradient check empty."""
    policy = factory(lora={"r": 4, "top_layers": 1})
    for n, p in policy.model.named_parameters():
        if "lora_B" in n:
            torch.nn.init.normal_(p, std=0.02, generator=torch.Generator().manual_seed(len(n)))
    return policy


@pytest.mark.parametrize("mode,history", [("per-step", 1), ("full", "full")])
def test_logprobs_hidden_states_entropies_and_gradients_equal_the_plain_forward(toy_env_id, tiny_policy_factory,
                                                                              mode, history):
    from agentgym.trainers.ppo import token_logprobs
    from agentgym.trainers.samples import collate

    policy = tiny_policy_factory()
    samples = _samples(policy, toy_env_id, mode, history)[:12]
    plan = plan_levels(samples)
    assert plan.usable and plan.tokens() < sum(len(s) for s in samples)  # something is shared
    batch = collate(samples, policy.tokenizer.pad_token_id)
    where = batch["loss_mask"] > 0
    model = policy.model
    model.train()
    results, grads = [], []
    for shared in (True, False):
        model.zero_grad(set_to_none=True)
        if shared:
            logp, hidden, entropy = shared_prefix_logprobs(model, samples, policy.tokenizer.pad_token_id, where,
                                                           want_hidden=True, want_entropy=True, plan=plan)
        else:
            logp, hidden, entropy = token_logprobs(model, batch["input_ids"], batch["attention_mask"], True,
                                                   want_entropy=True, positions=where)
        # a loss touching logprobs, entropies and the hidden states at each sample's real tokens
        real = batch["attention_mask"].bool()
        (logp.sum() + 0.1 * entropy.sum() + 0.01 * hidden[real].pow(2).sum()).backward()
        results.append((logp.detach(), hidden[real].detach(), entropy.detach()))
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]))
    (a_logp, a_hidden, a_ent), (b_logp, b_hidden, b_ent) = results
    assert torch.allclose(a_logp, b_logp, atol=1e-5) and torch.all(a_logp[~where] == 0)
    assert torch.allclose(a_ent, b_ent, atol=1e-5)
    assert torch.allclose(a_hidden, b_hidden, atol=1e-5)
    assert float((grads[0] - grads[1]).norm() / grads[1].norm()) < 1e-5


def test_the_level_wise_pass_runs_the_lm_head_at_the_loss_positions_alone(toy_env_id, tiny_policy_factory):
    """Each level's forward needs hidden states and keys and values, never logits: the LM head (49k
    wide on a real model) reads exactly the loss positions, once."""
    from agentgym.trainers.samples import collate

    policy = tiny_policy_factory()
    samples = _samples(policy, toy_env_id, "per-step", 1)[:12]
    plan = plan_levels(samples)
    where = collate(samples, policy.tokenizer.pad_token_id)["loss_mask"] > 0
    rows = []
    head = policy.model.get_output_embeddings()
    handle = head.register_forward_hook(lambda module, args, out: rows.append(args[0].reshape(-1, args[0].shape[-1]).shape[0]))
    try:
        shared_prefix_logprobs(policy.model, samples, policy.tokenizer.pad_token_id, where, plan=plan)
    finally:
        handle.remove()
    assert len(plan.levels) >= 2 and rows == [int(where.sum())]


def test_micro_batches_share_only_where_it_computes_fewer_tokens():
    from agentgym.trainers.learner import by_length, micro_batches
    from agentgym.trainers.shared_prefix import plan_micro_batches

    def cut(items):
        return list(micro_batches(by_length(items), 4))

    rng = np.random.default_rng(0)
    distinct = [_seq(list(rng.integers(0, 50, size=int(rng.integers(20, 40)))), [7]) for _ in range(16)]
    assert all(plan is None for _, plan in plan_micro_batches(distinct, 4, cut))
    system = list(range(100, 300))  # a long system prompt in every sample
    shared = [_seq(system + s.input_ids[:-1], [7]) for s in distinct]
    micros = plan_micro_batches(shared, 4, cut)
    assert all(plan is not None and plan.padded_tokens() < 0.5 * sum(len(s) for s in m) for m, plan in micros)
    assert sorted(id(s) for m, _ in micros for s in m) == sorted(id(s) for s in shared)  # each sample once


@pytest.mark.parametrize("value_head", [False, True])
def test_the_update_with_shared_prefixes_gives_the_plain_updates_gradient(toy_env_id, tiny_policy_factory, value_head,
                                                                        monkeypatch):
    """ppo_update with share_prefixes on (sharing forced wherever possible) and off: the summed
    gradient (policy and value head) agrees within 1e-5 of its norm; the update reports how many
    tokens it computed."""
    from agentgym.trainers import learner, shared_prefix

    monkeypatch.setattr(shared_prefix, "SHARING_OVERHEAD", 0.0)
    from agentgym.trainers.config import PPOConfig
    from agentgym.trainers.heads import ValueHead

    samples = _samples(tiny_policy_factory(), toy_env_id, "per-step", 1)
    grads, stats = [], []
    for share in (True, False):
        policy = tiny_policy_factory()
        torch.manual_seed(0)
        head = ValueHead(policy.model.config.hidden_size) if value_head else None
        params = policy.trainable_parameters() + (list(head.parameters()) if head is not None else [])
        pc = PPOConfig(epochs=1, minibatch_size=len(samples), micro_batch_size=8, share_prefixes=share)
        optimizer = torch.optim.SGD(params, lr=0.0)  # keep the gradients, move nothing
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
        stats.append(learner.ppo_update(pc, (0.8, 1.2), policy, optimizer, scheduler, samples,
                                        np.random.default_rng(1), 0, value_head=head))
        grads.append(torch.cat([p.grad.flatten() for p in params if p.grad is not None]))
    assert grads[0].abs().sum() > 0 and grads[0].shape == grads[1].shape
    assert float((grads[0] - grads[1]).norm() / grads[1].norm()) < 1e-5
    assert 0 < stats[0]["shared_prefix_token_ratio"] < 1 and "shared_prefix_token_ratio" not in stats[1]
    assert stats[0]["pg_loss"] == pytest.approx(stats[1]["pg_loss"], abs=1e-5)


def test_a_minibatch_root_computed_once_gives_the_plain_updates_gradient(toy_env_id, tiny_policy_factory,
                                                                        monkeypatch):
    """A long system prompt shared by every sample: ppo_update computes it once per minibatch
    (SharedRoot) and sends its gradient back once; the gradient equals the plain update's within
    1e-5 of its norm, over several micro-batches and two minibatches."""
    from agentgym.trainers import learner, shared_prefix
    from agentgym.trainers.config import PPOConfig

    roots = []
    real_root = shared_prefix.SharedRoot

    class CountedRoot(real_root):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            roots.append(self.mask.shape[1])

    monkeypatch.setattr(learner, "SharedRoot", CountedRoot)
    system = "You are in a house. " * 12 + "Reply with one admissible action and nothing else."
    samples = _samples(tiny_policy_factory(), toy_env_id, "per-step", 1, system_prompt=system)
    grads = []
    for share in (True, False):
        policy = tiny_policy_factory()
        params = policy.trainable_parameters()
        pc = PPOConfig(epochs=1, minibatch_size=(len(samples) + 1) // 2, micro_batch_size=4, share_prefixes=share)
        optimizer = torch.optim.SGD(params, lr=0.0)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
        learner.ppo_update(pc, (0.8, 1.2), policy, optimizer, scheduler, samples, np.random.default_rng(1), 0)
        grads.append(torch.cat([p.grad.flatten() for p in params if p.grad is not None]))
    assert len(roots) == 2 and min(roots) >= shared_prefix.MIN_ROOT_TOKENS  # once per minibatch
    assert grads[0].abs().sum() > 0
    assert float((grads[0] - grads[1]).norm() / grads[1].norm()) < 1e-5


def test_identical_samples_are_computed_once_with_the_same_gradient(toy_env_id, tiny_policy_factory, monkeypatch):
    """A group whose episodes took the same action in the same state gives identical samples (with
    their own advantages): the plain update computes each once and copies its rows back."""
    import dataclasses

    from agentgym.trainers import learner
    from agentgym.trainers.config import PPOConfig
    from agentgym.trainers.ppo import token_logprobs

    base = _samples(tiny_policy_factory(), toy_env_id, "per-step", 1)[:6]
    rng = np.random.default_rng(3)
    samples = base + [dataclasses.replace(s, advantages=[a * float(rng.normal()) for a in s.advantages]) for s in base]
    # one copy drops a token from the loss (drop_abs_adv_below), the other keeps it
    samples[0] = dataclasses.replace(samples[0], loss_mask=[0] * (len(samples[0]) - 1) + [1])
    rows_seen: list[int] = []

    def counting(model, ids, *args, **kwargs):
        rows_seen.append(ids.shape[0])
        return token_logprobs(model, ids, *args, **kwargs)

    monkeypatch.setattr(learner, "token_logprobs", counting)
    grads = []
    for dedup in (True, False):
        if not dedup:
            monkeypatch.setattr(learner, "_unique_forward", lambda model, batch, micro, where, hidden, entropy, _states: counting(
                model, batch["input_ids"], batch["attention_mask"], hidden, want_entropy=entropy, positions=where))
        policy = tiny_policy_factory()
        pc = PPOConfig(epochs=1, minibatch_size=len(samples), micro_batch_size=len(samples), share_prefixes=False)
        optimizer = torch.optim.SGD(policy.trainable_parameters(), lr=0.0)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
        learner.ppo_update(pc, (0.8, 1.2), policy, optimizer, scheduler, samples, np.random.default_rng(1), 0)
        grads.append(torch.cat([p.grad.flatten() for p in policy.trainable_parameters()]))
    assert rows_seen == [6, 12]
    assert grads[0].abs().sum() > 0
    assert float((grads[0] - grads[1]).norm() / grads[1].norm()) < 1e-6


def test_micro_batches_by_tokens_keep_the_budget_and_the_gradient(toy_env_id, tiny_policy_factory):
    """ppo.micro_batch_tokens: rows x longest row within the budget (a longer sample alone), and the
    gradient is the sample-count cut's."""
    from agentgym.trainers import learner
    from agentgym.trainers.config import PPOConfig

    samples = _samples(tiny_policy_factory(), toy_env_id, "per-step", 1)
    longest = max(len(s) for s in samples)
    budget = 3 * longest
    micros = list(learner.token_micro_batches(learner.by_length(samples), budget))
    assert all(len(m) * len(m[0]) <= budget for m in micros) and 1 < len(micros) < len(samples)
    assert list(learner.token_micro_batches(learner.by_length(samples), 1)) == [[s] for s in learner.by_length(samples)]
    grads = []
    for pc in (PPOConfig(minibatch_size=len(samples), micro_batch_size=4, share_prefixes=False),
               PPOConfig(minibatch_size=len(samples), micro_batch_tokens=budget, share_prefixes=False)):
        policy = tiny_policy_factory()
        optimizer = torch.optim.SGD(policy.trainable_parameters(), lr=0.0)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
        learner.ppo_update(pc, (0.8, 1.2), policy, optimizer, scheduler, samples, np.random.default_rng(1), 0)
        grads.append(torch.cat([p.grad.flatten() for p in policy.trainable_parameters()]))
    assert float((grads[0] - grads[1]).norm() / grads[1].norm()) < 1e-6


def test_admissible_only_samples_share_prefixes_with_the_plain_gradient_and_a_first_ratio_of_1(
        toy_env_id, tiny_policy_factory, monkeypatch):
    """Samples decoded within the admissible actions (their logprobs renormalized over the ids each
    token was drawn among) take the level-wise pass too: the gradient agrees with the plain pass's
    within 1e-5 of its norm, and the first minibatch's ratio to the rollout's logprobs is 1 within 1e-4."""
    from agentgym.trainers import learner, shared_prefix
    from agentgym.trainers.config import PPOConfig

    monkeypatch.setattr(shared_prefix, "SHARING_OVERHEAD", 0.0)
    samples = _samples(tiny_policy_factory(), toy_env_id, "per-step", 1, admissible_only=True)
    assert any(s.allowed for s in samples)
    grads, stats = [], []
    for share in (True, False):
        policy = tiny_policy_factory()
        pc = PPOConfig(epochs=1, minibatch_size=len(samples), micro_batch_size=8, share_prefixes=share)
        optimizer = torch.optim.SGD(policy.trainable_parameters(), lr=0.0)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
        stats.append(learner.ppo_update(pc, (0.8, 1.2), policy, optimizer, scheduler, samples,
                                        np.random.default_rng(1), 0))
        grads.append(torch.cat([p.grad.flatten() for p in policy.trainable_parameters() if p.grad is not None]))
    assert grads[0].abs().sum() > 0
    assert float((grads[0] - grads[1]).norm() / grads[1].norm()) < 1e-5
    assert 0 < stats[0]["shared_prefix_token_ratio"] < 1
    assert abs(stats[0]["ratio_max_first_minibatch"] - 1) < 1e-4


def test_lora_on_the_top_layers_trains_them_alone_and_keeps_the_root_gradient(toy_env_id, tiny_policy_factory,
                                                                              tmp_path):
    """policy.lora.top_layers=1 on the 2-layer model: adapters on layer 1 only, so layer 0's output never
    requires grad in the update (no graph below the lowest adapted layer, the root included), the root's
    gradient equals the plain update's, and the saved adapter reloads with the same layers."""
    from agentgym.policies.hf import HFPolicy
    from agentgym.trainers import learner
    from agentgym.trainers.config import PPOConfig

    def adapted_layers(policy):
        return sorted({int(n.split(".layers.")[1].split(".")[0]) for n, p in policy.model.named_parameters()
                       if p.requires_grad and "lora_" in n})

    system = "You are in a house. " * 12 + "Reply with one admissible action and nothing else."
    samples = _samples(tiny_policy_factory(), toy_env_id, "per-step", 1, system_prompt=system)
    grads, bottom_needs_grad = [], []
    for share in (True, False):
        torch.manual_seed(0)
        policy = _top_layer_policy(tiny_policy_factory)
        assert adapted_layers(policy) == [1]
        layer0 = policy.model.base_model.model.model.layers[0]
        hook = layer0.register_forward_hook(
            lambda _m, _i, out: bottom_needs_grad.append((out[0] if isinstance(out, tuple) else out).requires_grad))
        params = policy.trainable_parameters()
        pc = PPOConfig(epochs=1, minibatch_size=(len(samples) + 1) // 2, micro_batch_size=4, share_prefixes=share)
        optimizer = torch.optim.SGD(params, lr=0.0)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
        learner.ppo_update(pc, (0.8, 1.2), policy, optimizer, scheduler, samples, np.random.default_rng(1), 0)
        hook.remove()
        grads.append(torch.cat([p.grad.flatten() for p in params if p.grad is not None]))
    assert bottom_needs_grad and not any(bottom_needs_grad)
    assert grads[0].abs().sum() > 0
    assert float((grads[0] - grads[1]).norm() / grads[1].norm()) < 1e-5
    policy.save(tmp_path / "adapter")
    assert adapted_layers(HFPolicy(tmp_path / "adapter")) == [1]


@pytest.mark.parametrize("lora,says", [
    ({"top_layers": 3}, "top_layers=3 is out of range: this model has 2 decoder layers"),
    ({"layers_to_transform": [0, 5]}, "names layer 5: this model's decoder layers are 0..1"),
    ({"top_layers": 1, "layers_to_transform": [1]}, "sets both top_layers and layers_to_transform"),
])
def test_lora_layers_the_model_does_not_have_are_one_line(tiny_policy_factory, lora, says):
    from agentgym.errors import ConfigError

    with pytest.raises(ConfigError, match=says):
        tiny_policy_factory(lora=lora)


def test_lora_top_layers_below_one_is_refused_with_the_config():
    from agentgym.errors import ConfigError
    from agentgym.trainers.config import load_config

    with pytest.raises(ConfigError, match="top_layers=0 is out of range"):
        load_config({}, ["tiny.build=true", "policy.lora={top_layers: 0}"])


def test_the_update_starts_from_the_rollouts_frozen_layer_outputs_with_the_same_gradient(toy_env_id,
                                                                                          tiny_policy_factory):
    """LoRA on the top layer of 2: the rollout keeps what layer 0 gave each token it fed, and the update
    (shared root and level-wise passes) runs layer 1 alone from those states, never layer 0; its gradient
    and loss equal the update that runs both layers, within 1e-4 (the rollout computed them in other
    batches), and the first ratio stays 1."""
    from agentgym.trainers import learner
    from agentgym.trainers.config import PPOConfig

    torch.manual_seed(0)
    policy = _top_layer_policy(tiny_policy_factory)
    store = policy.keep_frozen_states()
    assert store is not None and store.layer == 1
    store.recording = True
    system = "You are in a house. " * 12 + "Reply with one admissible action and nothing else."
    samples = _samples(policy, toy_env_id, "per-step", 1, system_prompt=system)
    store.recording = False
    assert len(store) >= len(samples) // 2  # a group's identical steps share one entry
    layer0_calls = []
    hook = policy.model.base_model.model.model.layers[0].register_forward_hook(lambda *_: layer0_calls.append(1))
    grads, stats = [], []
    for reuse in (True, False):
        params = policy.trainable_parameters()
        for p in params:
            p.grad = None
        pc = PPOConfig(epochs=1, minibatch_size=(len(samples) + 1) // 2, micro_batch_size=4, reuse_frozen_states=reuse)
        optimizer = torch.optim.SGD(params, lr=0.0)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
        calls_before = len(layer0_calls)
        stats.append(learner.ppo_update(pc, (0.8, 1.2), policy, optimizer, scheduler, samples,
                                        np.random.default_rng(1), 0))
        grads.append(torch.cat([p.grad.flatten() for p in params if p.grad is not None]))
        if reuse:
            assert len(layer0_calls) == calls_before  # the frozen layer never ran in the update
    hook.remove()
    assert len(layer0_calls) > 0  # ... and it does without the states
    assert stats[0]["frozen_states_samples"] == len(samples) and "frozen_states_samples" not in stats[1]
    assert grads[0].abs().sum() > 0
    assert float((grads[0] - grads[1]).norm() / grads[1].norm()) < 1e-4
    assert stats[0]["pg_loss"] == pytest.approx(stats[1]["pg_loss"], abs=1e-5)
    assert stats[0]["ratio_max_first_minibatch"] == pytest.approx(1.0, abs=1e-4)


def test_training_with_lora_on_the_top_layer_updates_from_the_rollouts_states(toy_env_id, tiny_model_dir,
                                                                                toy_config, tmp_path):
    """`train` with policy.lora.top_layers=1 and a long system prompt: every sample of every update
    starts from the training rollout's states (the metric counts them)."""
    from agentgym.trainers.training import train

    system = "You are in a house. " * 12 + "Reply with one admissible action and nothing else."
    cfg = toy_config(tmp_path, tiny_model_dir, "policy.lora={r: 4, top_layers: 1}", f"env.chat.system_prompt={system}",
                     "ppo.micro_batch_size=2", "rollout.temperature=1.0")
    lines = []
    train(cfg, log=lines.append)
    assert any("the update starts at layer 1" in line for line in lines)
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    used = [r["train/frozen_states_samples"] for r in records if "train/frozen_states_samples" in r]
    trained = [r["train/optimizer_steps"] for r in records if "train/optimizer_steps" in r]
    assert len(used) == 2 and all(u > 0 for u in used) and all(t > 0 for t in trained)


def test_training_says_why_the_frozen_states_go_unused(toy_env_id, tiny_model_dir, toy_config, tmp_path):
    """A value head (gae) with LoRA on the top layer: one line naming the reason and the fallback."""
    from agentgym.trainers.training import train

    cfg = toy_config(tmp_path, tiny_model_dir, "policy.lora={r: 4, top_layers: 1}", "estimator.name=gae",
                     "iterations=1")
    lines = []
    train(cfg, log=lines.append)
    assert any("ppo.reuse_frozen_states: not used (a value head); the update runs the frozen layers itself" in line
               for line in lines)


def test_plain_micro_batches_start_from_the_frozen_layer_outputs_too(toy_env_id, tiny_policy_factory):
    """Without shared prefixes (ppo.share_prefixes=false: plain right-padded micro-batches, identical
    samples computed once) the update also runs the adapted layer alone, with the gradient of the update
    that runs both layers (within 1e-4)."""
    from agentgym.trainers import learner
    from agentgym.trainers.config import PPOConfig

    torch.manual_seed(0)
    policy = _top_layer_policy(tiny_policy_factory)
    store = policy.keep_frozen_states()
    store.recording = True
    samples = _samples(policy, toy_env_id, "full", "full")
    store.recording = False
    grads, stats = [], []
    for reuse in (True, False):
        params = policy.trainable_parameters()
        for p in params:
            p.grad = None
        pc = PPOConfig(epochs=1, minibatch_size=len(samples), micro_batch_size=3, share_prefixes=False,
                       reuse_frozen_states=reuse, entropy_coef=0.01)
        optimizer = torch.optim.SGD(params, lr=0.0)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
        stats.append(learner.ppo_update(pc, (0.8, 1.2), policy, optimizer, scheduler, samples,
                                        np.random.default_rng(1), 0))
        grads.append(torch.cat([p.grad.flatten() for p in params if p.grad is not None]))
    assert stats[0]["frozen_states_samples"] == len(samples) and "frozen_states_samples" not in stats[1]
    assert float((grads[0] - grads[1]).norm() / grads[1].norm()) < 1e-4
    assert stats[0]["entropy"] == pytest.approx(stats[1]["entropy"], rel=1e-4)


def test_frozen_states_past_their_memory_cap_fall_back_with_one_line(toy_env_id, tiny_model_dir, toy_config,
                                                                     tmp_path, capsys):
    """ppo.frozen_states_max_gib too small for one reply: recording stops, the run says so in one line
    naming the setting, and the update runs the frozen layer itself (no sample used the states)."""
    from agentgym.policies.frozen_states import FrozenStates
    from agentgym.trainers.training import train

    store = FrozenStates(1, max_bytes=100)
    store.recording = True
    store.keep([1, 2], torch.zeros(2, 8))  # 64 bytes: kept
    store.keep([1, 2, 3], torch.zeros(3, 8))  # 96 more: over the cap
    assert len(store) == 1 and store.full and not store.recording
    store.clear()
    assert len(store) == 0 and not store.full and store.nbytes == 0

    cfg = toy_config(tmp_path, tiny_model_dir, "policy.lora={r: 4, top_layers: 1}", "ppo.frozen_states_max_gib=1e-9",
                     "iterations=1")
    lines = []
    train(cfg, log=lines.append)
    said = "\n".join(lines) + capsys.readouterr().out
    assert "would exceed ppo.frozen_states_max_gib=1e-09" in said and "run the frozen layers in the update" in said
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["train/frozen_states_samples"] for r in records if "train/frozen_states_samples" in r] == [0]
