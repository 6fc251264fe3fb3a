"""Token in, token out: with history="full" an episode is trained as one sequence made of exactly
the ids the policy sampled and the template's ids between them, on an untrained tiny model whose
samples do not survive a decode / encode round trip. Also: KV reuse across turns, bucketed
micro-batches, logprobs at loss positions only, template mismatches."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agentgym.policies.base import SamplingParams

FULL_CHAT = {"history": "full", "system_prompt": "Act.", "show_admissible": True}


def _collect(policy, env_id, *, chat=FULL_CHAT, **options):
    import agentgym

    tasks = agentgym.get_task_space(env_id).split("train")[:3]
    return agentgym.collect(env_id, tasks, policy, 2, seed=5, chat=chat, max_turns=4,
                            sampling=SamplingParams(temperature=1.0, max_new_tokens=12, seed=11), **options)


def check_one_sequence_per_episode(trajectories, policy, replies_drift: bool = True, atol: float = 1e-5) -> float:
    """Every trained response token is the sampled token with its behaviour logprob, env and
    template tokens are masked, and the policy's own logprobs of the sequence equal the behaviour
    logprobs (the first PPO ratio) within `atol` (returned: the largest difference). replies_drift:
    also check that some sampled reply does not survive a decode / encode round trip (free sampling
    from an untrained model)."""
    from agentgym.trainers.learner import score_sequences
    from agentgym.trainers.samples import response_span, tokenize_trajectories

    tok = policy.tokenizer
    replies = [s.response_ids for t in trajectories for s in t.steps]
    # the point of the test: a re-tokenized reply would not be the sampled one
    assert not replies_drift or any(tok(tok.decode(r), add_special_tokens=False)["input_ids"] != r for r in replies if r), replies[:6]
    sequences = tokenize_trajectories(trajectories, "full")
    episodes = [t for t in trajectories if t.steps and not t.infra_error]
    assert len(sequences) == len(episodes)  # one sequence per episode, never a fallback
    assert all(len(s.step_refs) == len(t.steps) for s, t in zip(sequences, episodes))
    for seq in sequences:
        trained = set()
        for k, (i, t) in enumerate(seq.step_refs):
            step = trajectories[i].steps[t]
            span = response_span(seq, k)
            assert [seq.input_ids[p] for p in span] == step.response_ids
            assert [seq.old_logprobs[p] for p in span] == step.response_logprobs
            trained.update(span)
        assert [p for p, m in enumerate(seq.loss_mask) if m] == sorted(trained)  # everything else is masked
    scored = score_sequences(policy, sequences, micro=4, want_hidden=False)
    worst = 0.0
    for seq, (logp, _) in zip(sequences, scored):
        mask = torch.tensor(seq.loss_mask[1:], dtype=torch.bool)
        old = torch.tensor(seq.old_logprobs[1:])
        worst = max(worst, float((logp[mask] - old[mask]).abs().max()))
    assert worst < atol, worst  # ratio exp(logp - old) is 1 within atol
    return worst


def test_hf_engine_trains_exactly_what_it_sampled(toy_env_id, tiny_policy_factory):
    policy = tiny_policy_factory()
    check_one_sequence_per_episode(_collect(policy, toy_env_id), policy)


def test_threads_executor_gives_the_same_episodes(toy_env_id, tiny_policy_factory):
    a = _collect(tiny_policy_factory(), toy_env_id, executor="inprocess")
    b = _collect(tiny_policy_factory(), toy_env_id, executor="threads")
    assert [[s.response_ids for s in t.steps] for t in a] == [[s.response_ids for s in t.steps] for t in b]


def test_kv_reuse_prefills_only_the_new_tokens_and_changes_nothing(toy_env_id, tiny_policy_factory):
    prefilled: list[list[int]] = [[], []]

    def counting(policy, log):
        real = policy._sample

        def sample(prompt_ids, sampling, cache_keys=None, **options):
            out = real(prompt_ids, sampling, cache_keys, **options)
            log.append(sum(policy.last_prefill_tokens))
            return out

        policy._sample = sample
        return policy

    policy = counting(tiny_policy_factory(), prefilled[0])
    with_reuse = _collect(policy, toy_env_id)
    plain = counting(tiny_policy_factory(), prefilled[1])
    plain.reuse_kv = False
    without = _collect(plain, toy_env_id)
    reused, prefilled = prefilled
    assert [[s.response_ids for s in t.steps] for t in with_reuse] == [[s.response_ids for s in t.steps] for t in without]
    for a, b in zip(with_reuse, without):
        for s, r in zip(a.steps, b.steps):
            assert np.allclose(s.response_logprobs, r.response_logprobs, atol=1e-5)
    assert reused[0] == prefilled[0]  # the first turn has nothing cached
    assert sum(reused[1:]) < 0.5 * sum(prefilled[1:])  # later turns feed only the reply's last token + the new message
    assert not policy._prefixes  # the rollout released its cached prefixes


@pytest.mark.parametrize("history", [0, 1])
def test_windowed_prompts_reuse_the_prefix_shared_with_the_previous_turn(toy_env_id, tiny_policy_factory, history):
    """A windowed prompt is rendered anew each turn; the part it shares with the episode's previous
    turn (template, instruction) comes from the cache: same tokens and logprobs, fewer prefilled."""
    prefilled: list[list[int]] = [[], []]
    policies = []
    for reuse, log in zip((True, False), prefilled):
        policy = tiny_policy_factory()
        policy.reuse_kv = reuse
        real = policy._sample

        def sample(prompt_ids, sampling, cache_keys=None, real=real, log=log, policy=policy, **options):
            out = real(prompt_ids, sampling, cache_keys, **options)
            log.append(sum(policy.last_prefill_tokens))
            return out

        policy._sample = sample
        policies.append(policy)
    chat = {**FULL_CHAT, "history": history}
    with_reuse, without = (_collect(p, toy_env_id, chat=chat) for p in policies)
    assert [[s.prompt_ids for s in t.steps] for t in with_reuse] == [[s.prompt_ids for s in t.steps] for t in without]
    assert [[s.response_ids for s in t.steps] for t in with_reuse] == [[s.response_ids for s in t.steps] for t in without]
    for a, b in zip(with_reuse, without):
        for s, r in zip(a.steps, b.steps):
            assert np.allclose(s.response_logprobs, r.response_logprobs, atol=1e-5)
    reused, plain = prefilled
    # the toy prompts share their system prompt and instruction: 13% (history 0) and 7% (history 1)
    assert reused[0] == plain[0] and sum(reused[1:]) < 0.95 * sum(plain[1:])
    assert not policies[0]._prefixes  # the rollout released its cached prefixes


def test_logprobs_at_loss_positions_equal_the_full_computation(tiny_policy_factory):
    from agentgym.trainers.ppo import token_logprobs

    model = tiny_policy_factory(lora={}).model
    ids = torch.randint(0, 300, (3, 17))
    attention = torch.ones_like(ids)
    attention[1, 12:] = 0
    where = torch.rand((3, 16)) < 0.3
    full_logp, full_hidden, full_entropy = token_logprobs(model, ids, attention, True, want_entropy=True)
    logp, hidden, entropy = token_logprobs(model, ids, attention, True, want_entropy=True, positions=where)
    assert torch.allclose(logp[where], full_logp[where], atol=1e-6) and torch.all(logp[~where] == 0)
    assert torch.allclose(entropy[where], full_entropy[where], atol=1e-5)
    assert torch.allclose(hidden, full_hidden)
    (logp.sum() + entropy.sum()).backward()  # gradients reach the adapter through the chosen rows only
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters() if p.requires_grad)


def test_bucketed_micro_batches_give_the_same_gradient(toy_env_id, tiny_policy_factory, monkeypatch):
    """Sorting a minibatch by length before cutting micro-batches changes the summation order
    only: the summed gradient matches the unsorted one within 1e-6 (relative to its norm)."""
    from agentgym.trainers import learner
    from agentgym.trainers.config import PPOConfig
    from agentgym.trainers.samples import make_samples, tokenize_trajectories

    sampler = tiny_policy_factory()
    trajectories = _collect(sampler, toy_env_id, chat={**FULL_CHAT, "history": 1})
    sequences = tokenize_trajectories(trajectories, "per-step")
    rng = np.random.default_rng(0)
    samples = make_samples(sequences, [rng.normal(size=len(t.steps)) for t in trajectories])
    assert len({len(s) for s in samples}) > 1  # lengths differ: sorting reorders the micro-batches
    pc = PPOConfig(epochs=1, minibatch_size=len(samples), micro_batch_size=3, lr=1e-3, share_prefixes=False)
    grads = []
    for bucket in (True, False):
        policy = tiny_policy_factory()
        if not bucket:
            monkeypatch.setattr(learner, "by_length", list)
        optimizer = torch.optim.SGD(policy.trainable_parameters(), lr=0.0)  # keep the gradients, move nothing
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
        learner.ppo_update(pc, (0.8, 1.2), policy, optimizer, scheduler, samples, np.random.default_rng(1), 0)
        grads.append(torch.cat([p.grad.flatten() for p in policy.trainable_parameters()]))
    assert grads[0].abs().sum() > 0
    assert float((grads[0] - grads[1]).norm() / grads[1].norm()) < 1e-6


def test_a_template_that_rewrites_earlier_turns_is_one_line_or_counted(toy_env_id, tiny_policy_factory):
    from agentgym.continuation import TemplateMismatch
    from agentgym.trainers.samples import tokenize_trajectories

    policy = tiny_policy_factory()
    # a template that drops every assistant turn but the last (as reasoning-stripping templates do)
    policy.tokenizer.chat_template = (
        "{% for m in messages %}{% if m['role'] != 'assistant' or loop.last %}"
        "<|{{ m['role'] }}|>{{ m['content'] }}\n{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}")
    with pytest.raises(TemplateMismatch, match=r"does not extend the previous turn's rendering \(first difference at "
                                                r"character \d+.*rollout.on_template_mismatch=per-turn"):
        _collect(policy, toy_env_id)
    trajectories = _collect(policy, toy_env_id, on_template_mismatch="per-turn")
    counted = sum(t.metadata.get("retokenized_turns", 0) for t in trajectories)
    assert counted == sum(max(len(t.steps) - 1, 0) for t in trajectories) > 0
    assert len(tokenize_trajectories(trajectories, "full")) == sum(len(t.steps) for t in trajectories)


def test_a_tokenizer_without_chat_template_is_one_line(toy_env_id, tiny_policy_factory):
    from agentgym.errors import ConfigError

    policy = tiny_policy_factory()
    policy.tokenizer.chat_template = None
    with pytest.raises(ConfigError, match="has no chat template: set tokenizer.chat_template"):
        _collect(policy, toy_env_id)


def test_ray_replicas_train_exactly_what_they_sampled(toy_env_id, tiny_policy_factory, tiny_model_dir, ray_local):
    import dataclasses

    from agentgym.executors_ray import RayConfig
    from agentgym.policies.ray_policy import RayRolloutPolicy

    trainer = tiny_policy_factory()
    rc = dataclasses.replace(RayConfig(), num_workers=1, policy_replicas=1, policy_num_cpus=0.5)
    remote = RayRolloutPolicy(trainer, tiny_model_dir, rc)
    try:
        check_one_sequence_per_episode(_collect(remote, toy_env_id), trainer)
    finally:
        remote.close()


def test_vllm_engine_trains_exactly_what_it_sampled(toy_env_id, tmp_path):
    pytest.importorskip("vllm", reason="pip install 'agentgym-credit[vllm]'")
    from agentgym.policies.hf import HFPolicy
    from agentgym.policies.tiny import build_tiny_model
    from agentgym.policies.vllm_engine import VLLMRolloutPolicy
    from agentgym.trainers.run_setup import collect_env_texts

    # vLLM's CPU attention needs a head size of 32 or more: 64 units over 2 heads
    texts = collect_env_texts(toy_env_id, num_tasks=18, chat={"history": 1, "system_prompt": "Act."})
    model_dir = build_tiny_model(tmp_path / "model", env_id=toy_env_id, texts=texts, vocab_size=400, hidden=64,
                                 layers=2, heads=2)
    trainer = HFPolicy(model_dir)
    engine = VLLMRolloutPolicy(trainer, model_dir, dtype="fp32", max_model_len=1024, kv_cache_gib=0.2, seed=0)
    try:
        trajectories = _collect(engine, toy_env_id)
        assert not [t.error for t in trajectories if t.infra_error]
        check_one_sequence_per_episode(trajectories, trainer)
        assert engine.prefix_cache_hit_rate() > 0.3  # later turns find their conversation's earlier turns cached
    finally:
        engine.close()


def test_sft_with_full_history_trains_one_sequence_per_episode_on_the_same_targets(toy_env_id, tiny_policy_factory):
    """history="full": SFT makes one sample per episode whose every target token has the context of
    its per-step sample (so the summed target logprobs agree), with far fewer tokens; slips are
    context only."""
    import agentgym
    from agentgym.trainers.ppo import token_logprobs
    from agentgym.trainers.samples import collate
    from agentgym.trainers.sft import oracle_trajectories, sft_episode_samples, sft_samples

    policy = tiny_policy_factory()
    tasks = agentgym.get_task_space(toy_env_id).split("train")[:4]
    trajs = oracle_trajectories(toy_env_id, tasks, FULL_CHAT, None, seed=1)
    assert all(len(t.steps) > 1 for t in trajs)
    trajs[0].steps[0].action_valid = False  # a slip: context, not a target, in both layouts
    per_step, episodes = sft_samples(policy, trajs), sft_episode_samples(policy, trajs)
    assert len(episodes) == len(trajs) < len(per_step)
    assert sum(s.num_loss_tokens for s in episodes) == sum(s.num_loss_tokens for s in per_step)
    assert sum(len(s) for s in episodes) < 0.8 * sum(len(s) for s in per_step)  # 2-3 turns here; 12 turns: ~1/6

    def target_logprob(samples):
        batch = collate(samples, policy.tokenizer.pad_token_id)
        with torch.no_grad():
            logp, _ = token_logprobs(policy.model, batch["input_ids"], batch["attention_mask"])
        return float((logp * batch["loss_mask"]).sum())

    assert target_logprob(episodes) == pytest.approx(target_logprob(per_step), rel=1e-4)


def test_a_reserved_cache_samples_what_a_concatenating_one_does(toy_env_id, tiny_policy_factory, monkeypatch):
    """The engine writes decode steps into a cache with room reserved (no copy of the whole cache per
    token): the episodes, tokens and logprobs are those of Hugging Face's concatenating cache."""
    from transformers.cache_utils import DynamicCache

    import agentgym.policies.hf as hf

    reserved = _collect(tiny_policy_factory(), toy_env_id)
    monkeypatch.setattr(hf, "_reserved_cache",
                        lambda reserve, layers=None: DynamicCache(ddp_cache_data=layers) if layers else DynamicCache())
    plain = _collect(tiny_policy_factory(), toy_env_id)
    assert [[s.response_ids for s in t.steps] for t in reserved] == [[s.response_ids for s in t.steps] for t in plain]
    for a, b in zip(reserved, plain):
        for s, r in zip(a.steps, b.steps):
            assert np.allclose(s.response_logprobs, r.response_logprobs, atol=1e-5)
