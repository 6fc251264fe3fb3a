"""A tiny Llama built from a short corpus (no env rollouts, no downloads) and one in-process
vLLM engine on it, shared by the tests of this folder: starting vLLM costs ~30 s on a busy CPU."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")

CORPUS = [
    "go to the kitchen and take the apple", "open the fridge", "<action>look</action>",
    "You see a table, a chair and a lamp.", "take key", "go right", "go left", "You are in room 2.",
] * 10


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    from agentgym.policies.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("vllm_tiny") / "model", texts=CORPUS, vocab_size=400,
                            hidden=64, layers=2, heads=2, seed=0)


@pytest.fixture(scope="session")
def engine(tiny_model_dir):
    from agentgym.policies.vllm_engine import VLLMPolicy

    policy = VLLMPolicy(tiny_model_dir, dtype="fp32", max_model_len=256, seed=0, kv_cache_gib=0.2)
    yield policy
    policy.close()


@pytest.fixture(scope="session")
def hf_model(tiny_model_dir):
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()


@pytest.fixture(scope="session")
def hf_logprobs():
    return hf_token_logprobs


def hf_token_logprobs(model, prompt_ids, response_ids):
    """Logprob of each response token under a plain transformers forward pass (fp32)."""
    import torch

    ids = torch.tensor([list(prompt_ids) + list(response_ids)])
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).logits[0].float(), -1)
    start = len(prompt_ids) - 1
    return [float(logp[start + j, t]) for j, t in enumerate(response_ids)], logp[start:start + len(response_ids)]
