"""The last layer run at the loss positions alone gives the full forward's logprobs and gradients."""

import pytest
import torch

from agentgym.trainers import last_layer
from agentgym.trainers.ppo import token_logprobs

transformers = pytest.importorskip("transformers")

CONFIGS = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {"head_dim": 16}),
    "mistral": ("MistralConfig", "MistralForCausalLM", {"sliding_window": None}),
}


def _model(kind: str, kv_heads: int = 2):
    config_name, model_name, extra = CONFIGS[kind]
    config = getattr(transformers, config_name)(vocab_size=97, hidden_size=64, intermediate_size=128,
                                                num_hidden_layers=2, num_attention_heads=4,
                                                num_key_value_heads=kv_heads, max_position_embeddings=128, **extra)
    torch.manual_seed(0)
    return getattr(transformers, model_name)(config).train()


def _batch():
    torch.manual_seed(1)
    ids = torch.randint(3, 97, (3, 20))
    mask = torch.ones_like(ids)
    mask[1, 14:] = 0  # right padding
    mask[2, 9:] = 0
    ids = ids * mask
    positions = torch.zeros((3, 19), dtype=torch.bool)
    positions[0, [3, 4, 5, 17, 18]] = True
    positions[1, [10, 11, 12]] = True
    positions[2, 7] = True
    return ids, mask, positions


def _run(model, ids, mask, positions, partial: bool, monkeypatch):
    if not partial:
        monkeypatch.setattr("agentgym.trainers.ppo.final_hidden_at", lambda *a, **k: None)
    model.zero_grad()
    logp, _, entropy = token_logprobs(model, ids, mask, want_entropy=True, positions=positions)
    (logp.sum() + 0.1 * entropy.sum()).backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    monkeypatch.undo()
    return logp.detach(), entropy.detach(), grads


@pytest.mark.parametrize("kind", sorted(CONFIGS))
@pytest.mark.parametrize("kv_heads", [4, 2])
def test_same_logprobs_and_gradients(kind, kv_heads, monkeypatch):
    model = _model(kind, kv_heads)
    ids, mask, positions = _batch()
    assert last_layer.final_hidden_at(model, ids, mask, torch.nn.functional.pad(positions, (0, 1))) is not None
    full = _run(model, ids, mask, positions, False, monkeypatch)
    part = _run(model, ids, mask, positions, True, monkeypatch)
    torch.testing.assert_close(part[0], full[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(part[1], full[1], atol=1e-5, rtol=1e-5)
    assert part[2].keys() == full[2].keys()
    for name in full[2]:
        torch.testing.assert_close(part[2][name], full[2][name], atol=1e-5, rtol=1e-4, msg=name)


def test_unsupported_models_run_in_full():
    model = _model("llama")
    ids, mask, positions = _batch()
    where = torch.nn.functional.pad(positions, (0, 1))
    wrapped = torch.nn.Sequential(model)  # not a PreTrainedModel (e.g. a DDP wrapper)
    assert last_layer.final_hidden_at(wrapped, ids, mask, where) is None
    model.config.sliding_window = 8  # a window shorter than the batch
    assert last_layer.final_hidden_at(model, ids, mask, where) is None


def test_hook_removed_and_model_unchanged():
    model = _model("llama")
    ids, mask, positions = _batch()
    before = model(input_ids=ids, attention_mask=mask).logits
    last_layer.final_hidden_at(model, ids, mask, torch.nn.functional.pad(positions, (0, 1)))
    assert not model.model.layers[-1]._forward_pre_hooks
    torch.testing.assert_close(model(input_ids=ids, attention_mask=mask).logits, before)


def test_same_with_gradient_checkpointing(monkeypatch):
    model = _model("llama")
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    ids, mask, positions = _batch()
    full = _run(model, ids, mask, positions, False, monkeypatch)
    part = _run(model, ids, mask, positions, True, monkeypatch)
    torch.testing.assert_close(part[0], full[0], atol=1e-5, rtol=1e-5)
    for name in full[2]:
        torch.testing.assert_close(part[2][name], full[2][name], atol=1e-5, rtol=1e-4, msg=name)
