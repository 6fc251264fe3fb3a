"""A decode step's two speed changes keep the policy's numbers: attention of a single query as two
matmuls (policies/decode_attention.py) equals torch's sdpa, and the LM head restricted to the
allowed ids (admissible-only decoding) gives the whole head's logits there (up to the order of sums), -inf elsewhere,
and is itself again afterwards."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from agentgym.policies.base import SamplingParams
from agentgym.policies.decode_attention import NAME, single_query_attention
from agentgym.policies.hf import _head_restricted_to


def _sdpa(query, key, value, mask, scale):
    groups = query.shape[1] // key.shape[1]
    key, value = key.repeat_interleave(groups, 1), value.repeat_interleave(groups, 1)
    return F.scaled_dot_product_attention(query.float(), key.float(), value.float(), attn_mask=mask, scale=scale)


@pytest.mark.parametrize("mask_kind", ["none", "bool", "additive"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_single_query_attention_equals_sdpa(mask_kind, dtype):
    torch.manual_seed(0)
    rows, heads, kv_heads, keys, dim = 5, 9, 3, 37, 16
    query = torch.randn(rows, heads, 1, dim).to(dtype)
    key, value = torch.randn(rows, kv_heads, keys, dim).to(dtype), torch.randn(rows, kv_heads, keys, dim).to(dtype)
    padded = torch.arange(keys)[None, :] >= torch.tensor([0, 3, 10, 0, 30])[:, None]  # left padding per row
    mask = {"none": None, "bool": padded[:, None, None, :],
            "additive": torch.where(padded, 0.0, float("-inf"))[:, None, None, :]}[mask_kind]
    out = single_query_attention(query, key, value, mask, 0.25)
    assert out.shape == query.shape and out.dtype == dtype
    expected = _sdpa(query, key, value, mask, 0.25)
    assert torch.allclose(out.float(), expected, atol=1e-6 if dtype == torch.float32 else 1e-2)
    if mask_kind != "none":  # the padding is really left out: a padded key changed changes nothing
        key[2, :, 0] = 100.0
        assert torch.allclose(single_query_attention(query, key, value, mask, 0.25), out)


def test_a_cpu_policy_decodes_on_the_single_query_path_with_sdpas_numbers(tiny_policy_factory):
    policy = tiny_policy_factory()
    assert policy.model.config._attn_implementation == NAME
    prompts = [[5, 9, 17, 33], [5, 9], [7, 8, 9, 10, 11, 12]]  # different lengths: left padding in the batch
    sampling = SamplingParams(temperature=0.0, max_new_tokens=8)
    fast = policy.generate_ids(prompts, sampling)
    policy.model.set_attn_implementation("sdpa")
    plain = policy.generate_ids(prompts, sampling)
    for a, b in zip(fast, plain):
        assert a.response_ids == b.response_ids
        assert max(abs(x - y) for x, y in zip(a.response_logprobs, b.response_logprobs)) < 1e-5


@pytest.mark.parametrize("bf16_base", [False, True])
def test_the_restricted_head_computes_the_allowed_columns_exactly_and_is_restored(bf16_base, tiny_policy_factory):
    policy = tiny_policy_factory(lora={})
    if bf16_base:
        policy.keep_base_in_bf16()  # the head then has its own exact forward, which the restriction keeps
    ids = torch.tensor([[5, 9, 17, 33]])
    columns = torch.tensor([3, 17, 40])
    with torch.no_grad(), policy.matmul_context():
        full = policy.model(input_ids=ids, logits_to_keep=1).logits
        with _head_restricted_to(policy.model, columns):
            part = policy.model(input_ids=ids, logits_to_keep=1).logits
        again = policy.model(input_ids=ids, logits_to_keep=1).logits
    assert part.dtype == full.dtype and part.shape == full.shape
    assert torch.allclose(part[..., columns], full[..., columns], rtol=0, atol=1e-6)  # up to the order of sums
    outside = torch.ones(full.shape[-1], dtype=torch.bool)
    outside[columns] = False
    assert bool(torch.isinf(part[..., outside]).all())
    assert torch.equal(again, full)  # the head is whole again
