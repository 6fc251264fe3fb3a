"""policy.engine=pool (policies/pool_engine.py) computes what the eager HF path computes: the same greedy
tokens, logprobs within 1e-4 in fp32 (2e-2 with the bf16 base), the same allowed sets, KV reuse across
turns of growing and windowed conversations, identical prompts prefilled once, LoRA inside the step, the
frozen layers' states, and a first PPO ratio of 1; its pool evicts or waits, in one line, when full."""

from __future__ import annotations

import copy
import random

import pytest
import torch

from agentgym.errors import ConfigError
from agentgym.policies.base import SamplingParams

WORDS = ["go", "north", "south", "take", "mug", "open", "drawer", "look", "put", "in", "on", "table", "the", "a"]


def _texts() -> list[str]:
    rng = random.Random(0)
    return [" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(200)]


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def model_dir(request, tmp_path_factory):
    """A tiny random model with grouped key-value heads (and, for qwen2, biased q/k/v projections)."""
    from transformers import AutoModelForCausalLM, GenerationConfig

    from agentgym.policies.tiny import tiny_config, train_tokenizer

    out = tmp_path_factory.mktemp(f"tiny_{request.param}")
    tokenizer = train_tokenizer(_texts(), vocab_size=300)
    config = tiny_config(tokenizer, arch=request.param, hidden=64, layers=3, heads=4)
    config.num_key_value_heads = 2
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    with torch.no_grad():  # sharper logits than the init's: fewer near ties, replies of various lengths
        model.lm_head.weight.mul_(8.0)
        if request.param == "qwen2":
            for layer in model.model.layers:
                layer.self_attn.q_proj.bias.normal_(0, 0.5)
                layer.self_attn.k_proj.bias.normal_(0, 0.5)
    model.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def _policies(model_dir, **kwargs):
    from agentgym.policies.hf import HFPolicy

    torch.manual_seed(1)
    eager = HFPolicy(model_dir, **kwargs)
    torch.manual_seed(2)  # the adapters' values below: the same on every device
    if kwargs.get("lora") is not None:  # adapters away from peft's zero init, so the step must run them
        with torch.no_grad():
            for name, p in eager.model.named_parameters():
                if "lora_B" in name:
                    p.normal_(0, 0.05)
    pooled = copy.copy(eager)
    pooled._prefixes, pooled._generator = {}, torch.Generator(device=eager.device).manual_seed(0)
    pooled.use_pool_engine(log=lambda line: None)
    return eager, pooled


def _prompts(policy, count: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    return [policy.encode_prompt([{"role": "user", "content": " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 9)))}])
            for _ in range(count)]


def _same(a, b, tol: float = 1e-4) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.response_ids == y.response_ids and x.prompt_ids == y.prompt_ids
        assert x.finish_reason == y.finish_reason
        assert x.response_allowed == y.response_allowed
        assert max((abs(p - q) for p, q in zip(x.response_logprobs, y.response_logprobs)), default=0) < tol


def test_greedy_tokens_and_logprobs_equal_the_eager_path(model_dir):
    eager, pooled = _policies(model_dir)
    prompts = _prompts(eager, 24) + [_prompts(eager, 1, seed=5)[0]] * 3  # three identical: prefilled once
    sampling = SamplingParams(temperature=0.0, max_new_tokens=32)
    _same(pooled.generate_ids(prompts, sampling), eager.generate_ids(prompts, sampling))
    assert pooled.last_prefill_tokens[-2:] == [0, 0]  # the repeats copied the first one's prefill


def test_growing_and_windowed_conversations_reuse_their_slot(model_dir):
    eager, pooled = _policies(model_dir)
    sampling = SamplingParams(temperature=0.0, max_new_tokens=12)
    prompts = _prompts(eager, 6)
    keys = [f"episode-{i}" for i in range(6)]
    for turn in range(3):
        a, b = pooled.generate_ids(prompts, sampling, cache_keys=keys), eager.generate_ids(prompts, sampling, cache_keys=keys)
        _same(a, b)
        if turn:  # only what follows the episode's cached tokens was prefilled
            assert sorted(pooled.last_prefill_tokens) == sorted(eager.last_prefill_tokens)
            assert max(pooled.last_prefill_tokens) < 12
        # growing conversations for the first three, a window (the first prompt's first 5 tokens + new text) for the rest
        tail = eager.encode_prompt([{"role": "user", "content": "look"}])
        prompts = [p + c.response_ids + tail if i < 3 else p[:5] + tail for i, (p, c) in enumerate(zip(prompts, b))]
    slots = dict(pooled.pool_engine.pool.owner)
    assert sorted(slots) == sorted(keys) and len(set(slots.values())) == 6
    pooled.forget(keys[:2])
    assert sorted(pooled.pool_engine.pool.owner) == keys[2:]


def test_admissible_only_decoding_gives_the_same_replies_logprobs_and_allowed_sets(model_dir):
    eager, pooled = _policies(model_dir)
    end = eager.tokenizer.eos_token_id
    rng = random.Random(3)
    prompts = _prompts(eager, 10)
    replies = [[eager.encode_response(" ".join(rng.sample(WORDS, rng.randint(1, 3))))
                for _ in range(rng.randint(1, 6))] for _ in prompts]
    replies[2] = None  # one row decodes freely beside the others: the head computes every id
    for temperature in (0.0, 1.0):
        sampling = SamplingParams(temperature=temperature, max_new_tokens=10, seed=7)
        a = pooled.generate_ids(prompts, sampling, allowed_replies=replies)
        b = eager.generate_ids(prompts, sampling, allowed_replies=replies)
        for c, allowed in zip(a, replies):
            if allowed is not None:
                assert c.response_ids in [r for r in allowed if len(r) <= 10] and c.response_ids[-1] == end
        if temperature == 0:
            _same(a, b)
    only_tries = [r or [[end]] for r in replies]  # every row within a trie: the head computes their columns alone
    sampling = SamplingParams(temperature=0.0, max_new_tokens=10)
    _same(pooled.generate_ids(prompts, sampling, allowed_replies=only_tries),
          eager.generate_ids(prompts, sampling, allowed_replies=only_tries))


def test_lora_runs_inside_the_step_and_follows_the_trainers_updates(model_dir):
    eager, pooled = _policies(model_dir, lora={"r": 4})
    prompts = _prompts(eager, 8)
    sampling = SamplingParams(temperature=0.0, max_new_tokens=16)
    keys = [f"e{i}" for i in range(8)]
    _same(pooled.generate_ids(prompts, sampling, cache_keys=keys), eager.generate_ids(prompts, sampling))
    with torch.no_grad():  # an optimizer step: the engine's copies of the factors and its cached contexts go stale
        for p in eager.trainable_parameters():
            p.add_(torch.randn_like(p) * 0.05)
    _same(pooled.generate_ids(prompts, sampling, cache_keys=keys), eager.generate_ids(prompts, sampling))
    assert max(pooled.last_prefill_tokens) == max(len(p) for p in prompts)  # nothing computed before the step reused


def test_the_bf16_base_gives_the_updates_logprobs_within_bf16s_rounding(model_dir):
    """Against what the update computes (token_logprobs under the policy's bf16 autocast): the pooled step's
    logprobs within 2e-2 on average and 0.1 at worst, as the eager path's are (bf16 rounds a decode step and
    one whole-sequence pass apart whichever engine samples)."""
    from agentgym.trainers.ppo import token_logprobs

    eager, pooled = _policies(model_dir, lora={"r": 4})
    eager.keep_base_in_bf16()
    pooled.pool_engine.rebuild()  # the copy shares the model, whose frozen linears are new bf16 tensors now
    pooled.matmul_context = eager.matmul_context
    prompts = _prompts(eager, 8)
    sampling = SamplingParams(temperature=0.0, max_new_tokens=8)
    for engine in (pooled, eager):
        gaps = []
        for c in engine.generate_ids(prompts, sampling):
            ids = torch.tensor([c.prompt_ids + c.response_ids])
            with torch.no_grad(), eager.matmul_context():
                update, _ = token_logprobs(eager.model, ids, torch.ones_like(ids))
            gaps += [abs(a - b) for a, b in zip(update[0, len(c.prompt_ids) - 1:].tolist(), c.response_logprobs)]
        assert sum(gaps) / len(gaps) < 2e-2 and max(gaps) < 0.1, (engine is pooled, sum(gaps) / len(gaps), max(gaps))


def test_first_ppo_ratio_is_one(model_dir):
    """The update's logprobs of what the engine sampled (trainers.ppo.token_logprobs, renormalized over the
    allowed ids) equal the engine's: exp(new - old) = 1 within 1e-4."""
    from agentgym.trainers.ppo import token_logprobs

    _, pooled = _policies(model_dir, lora={"r": 4})
    end = pooled.tokenizer.eos_token_id
    prompts = _prompts(pooled, 6)
    replies = [[pooled.encode_response(w) for w in ("go north", "take mug", "look")] for _ in prompts]
    replies[0] = None
    out = pooled.generate_ids(prompts, SamplingParams(temperature=1.0, max_new_tokens=8, seed=3), allowed_replies=replies)
    for c in out:
        ids = torch.tensor([c.prompt_ids + c.response_ids])
        allowed = None
        if c.response_allowed is not None:
            width = max(len(a or []) for a in c.response_allowed)
            allowed = torch.full((1, ids.shape[1] - 1, width), -1)
            for j, a in enumerate(c.response_allowed):
                if a is not None:
                    allowed[0, len(c.prompt_ids) - 1 + j, :len(a)] = torch.tensor(a)
        with torch.no_grad():
            logp, _ = token_logprobs(pooled.model, ids, torch.ones_like(ids), allowed=allowed)
        new = logp[0, len(c.prompt_ids) - 1:]
        ratio = torch.exp(new - torch.tensor(c.response_logprobs))
        assert torch.allclose(ratio, torch.ones_like(ratio), atol=1e-4), ratio
        assert c.response_ids[-1] == end or len(c.response_ids) == 8


def test_frozen_layer_states_equal_the_eager_paths(model_dir):
    eager, pooled = _policies(model_dir, lora={"r": 4, "top_layers": 1})
    stores = [policy.keep_frozen_states() for policy in (eager, pooled)]
    pooled.frozen_states = copy.copy(stores[0])  # the copy shared eager's store: give it its own
    pooled.frozen_states._by_ids = {}
    stores[1] = pooled.frozen_states
    for store in stores:
        store.recording = True
    prompts = _prompts(eager, 5)
    keys = [f"e{i}" for i in range(5)]
    sampling = SamplingParams(temperature=0.0, max_new_tokens=6)
    for _turn in range(2):
        a = pooled.generate_ids(prompts, sampling, cache_keys=keys)
        b = eager.generate_ids(prompts, sampling, cache_keys=keys)
        _same(a, b)
        tail = eager.encode_prompt([{"role": "user", "content": "look"}])
        prompts = [p + c.response_ids + tail for p, c in zip(prompts, b)]
    assert set(stores[0]._by_ids) == set(stores[1]._by_ids) and len(stores[1]) == 10
    for ids, states in stores[0]._by_ids.items():
        assert torch.allclose(stores[1]._by_ids[ids], states, atol=1e-5)


def test_a_full_pool_evicts_idle_episodes_and_a_call_too_large_waits(model_dir):
    eager, pooled = _policies(model_dir)
    lines: list[str] = []
    pooled.use_pool_engine(log=lines.append)
    pool = pooled.pool_engine.pool
    sampling = SamplingParams(temperature=0.0, max_new_tokens=8)
    prompts = _prompts(eager, 8)
    shortest = min(len(p) for p in prompts)
    prompts = [p[:shortest] for p in prompts]  # one length: the pool's length never grows
    pool.max_bytes = pool.bytes_for(4, shortest + 8)  # room for 4 episodes
    pooled.generate_ids(prompts[:3], sampling, cache_keys=["a", "b", "c"])
    _same(pooled.generate_ids(prompts[3:5], sampling, cache_keys=["d", "e"]), eager.generate_ids(prompts[3:5], sampling))
    assert "a" not in pool.owner and {"d", "e"} <= set(pool.owner)  # the least recently used made room
    _same(pooled.generate_ids(prompts, sampling, cache_keys=list("pqrstuvw")), eager.generate_ids(prompts, sampling))
    assert len(lines) == 2 and "evicted" in lines[0] and "wait" in lines[1]
    assert all("\n" not in line for line in lines)


def test_a_prompt_longer_than_the_models_positions_is_refused_in_one_line(model_dir):
    _, pooled = _policies(model_dir)
    with pytest.raises(ConfigError, match="exceeds this model's 4096 positions") as info:
        pooled.generate_ids([[5] * 4090], SamplingParams(max_new_tokens=16))
    assert "\n" not in str(info.value)
    pooled.pool_engine.pool.max_bytes = 1000
    with pytest.raises(ConfigError, match="does not fit the KV pool's budget"):
        pooled.generate_ids([[5] * 40], SamplingParams(max_new_tokens=16))


def test_sampling_resumes_exactly_from_the_policys_saved_state(model_dir):
    _, pooled = _policies(model_dir)
    prompts = _prompts(pooled, 6)
    sampling = SamplingParams(temperature=1.0, max_new_tokens=12, seed=11)
    pooled.generate_ids(prompts, sampling)
    state = copy.deepcopy(pooled.sampling_state())  # as a checkpoint keeps it
    after = pooled.generate_ids(prompts, sampling)
    pooled.load_sampling_state(state)
    _same(pooled.generate_ids(prompts, sampling), after, tol=1e-12)


def test_the_fixed_size_step_a_graph_captures_computes_the_same(model_dir):
    """graphs=True on a CPU runs the step a CUDA graph captures (slots 0..n-1 padded to a fixed size,
    attention over the whole pool) without capturing it: the same replies as the eager path."""
    eager, pooled = _policies(model_dir)
    pooled.use_pool_engine(graphs=True, log=lambda line: None)
    prompts = _prompts(eager, 5)
    sampling = SamplingParams(temperature=0.0, max_new_tokens=10)
    keys = [f"e{i}" for i in range(5)]
    _same(pooled.generate_ids(prompts, sampling, cache_keys=keys), eager.generate_ids(prompts, sampling))
    assert [k[0] for k in pooled.pool_engine._graphs] == [8]  # 5 rows padded to the size 8
    pooled.forget(keys[1:4])  # a call of slots 0 and 4: rows between compute along, discarded
    _same(pooled.generate_ids([prompts[0], prompts[4]], sampling, cache_keys=[keys[0], keys[4]]),
          eager.generate_ids([prompts[0], prompts[4]], sampling))


def test_a_capture_that_fails_says_so_in_one_line_and_decodes_eagerly(model_dir):
    eager, pooled = _policies(model_dir)
    lines: list[str] = []
    pooled.use_pool_engine(graphs=True, log=lines.append)
    engine = pooled.pool_engine
    real_step = engine._step

    def refusing_step(*args, whole_pool=False, **kwargs):  # an op the capture cannot take
        if whole_pool:
            raise RuntimeError("operation not permitted when stream is capturing")
        return real_step(*args, **kwargs)

    engine._step = refusing_step
    prompts = _prompts(eager, 4)
    sampling = SamplingParams(temperature=0.0, max_new_tokens=6)
    _same(pooled.generate_ids(prompts, sampling), eager.generate_ids(prompts, sampling))
    _same(pooled.generate_ids(prompts, sampling), eager.generate_ids(prompts, sampling))
    assert len(lines) == 1 and "capturing the decode step failed" in lines[0] and "eagerly" in lines[0]
    assert engine.stats.eager_steps > 0 and engine.stats.captures == 0


def test_a_rollout_copy_decodes_on_its_own_pool_and_follows_published_weights(model_dir):
    eager, pooled = _policies(model_dir, lora={"r": 4})
    clone = pooled.rollout_copy(version=0)
    assert clone.pool_engine is not None and clone.pool_engine is not pooled.pool_engine
    assert clone.pool_engine.policy is clone and clone.pool_engine.weights.model is clone.model
    prompts = _prompts(eager, 4)
    sampling = SamplingParams(temperature=0.0, max_new_tokens=8)
    with torch.no_grad():
        for p in pooled.trainable_parameters():
            p.add_(torch.randn_like(p) * 0.05)
    clone.publish(1)
    clone.sync()  # loads the snapshot through .data: the pool's copies of the factors must follow
    _same(clone.generate_ids(prompts, sampling), eager.generate_ids(prompts, sampling))
