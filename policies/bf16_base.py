"""A LoRA policy's frozen base kept in bf16, for the rollout and the update alike (ppo.matmul_dtype=bf16).

With LoRA the base model's linear weights never change, so they can be stored in bf16 once
instead of being cast by autocast at every pass (autocast caches a cast only for weights that
require grad: a frozen base is re-cast at every forward, the whole decoder each time). The
rollout then runs in bf16 too: a decode step reads half the bytes (it is memory-bound at a few
rows) and prefill runs at the bf16 matmul rate. And the tokens the update trains were sampled by
the very bf16 weights the update recomputes their logprobs with, so the first PPO ratio is 1 up
to kernel differences (batch shapes, KV cache vs one pass), not 1 + bf16's rounding of an fp32
policy.

Attention of a decode step (one query per row) runs in fp32 on the single-query path
(agentgym.policies.decode_attention, which every HF policy on a CPU uses): torch's CPU attention
kernel takes 3.5x longer on a bf16 KV cache than on fp32 for a single query (1.2 vs 0.33 ms per
layer at 4 rows x 300 keys; casting the cache is cheap), while for a prefill or an update pass
bf16 is 2x faster and stays.

What stays fp32: the LoRA factors (trained; the optimizer steps them in fp32, autocast casts
them per matmul: they are small), the embeddings, the norms and the residual stream, and the LM
head, which runs outside autocast wherever it is called (`exact_head`): bf16 keeps 8 significant
bits, so logits near 20 would round to 1/8 and the sampled tokens' logprobs with them.
"""

from __future__ import annotations

import types

import torch
import torch.nn.functional as F

from agentgym.policies.decode_attention import use_single_query_decode


def _linear_in_weight_dtype(self, x: torch.Tensor) -> torch.Tensor:
    """A bf16 linear that also runs outside autocast (a caller that does not set it up, e.g. a
    reference forward): its input is cast to the weight's dtype, its output is bf16."""
    bias = None if self.bias is None else self.bias.to(self.weight.dtype)
    return F.linear(x.to(self.weight.dtype), self.weight, bias)


def _head_in_fp32(self, x: torch.Tensor) -> torch.Tensor:
    with torch.autocast(x.device.type, enabled=False):
        return F.linear(x.to(self.weight.dtype), self.weight, self.bias)


def exact_head(model: torch.nn.Module) -> None:
    """The model's LM head computes in its weights' dtype even under autocast (logits stay fp32)."""
    head = model.get_output_embeddings()
    head.forward = types.MethodType(_head_in_fp32, head)


def keep_frozen_linears_in_bf16(model: torch.nn.Module) -> int:
    """Store every frozen linear weight of `model` but the LM head in bf16 (in place, once), and keep
    the head exact. Returns the number of parameters now stored in bf16."""
    head = model.get_output_embeddings()
    cast = 0
    for module in model.modules():
        if not isinstance(module, torch.nn.Linear) or module is head or module.weight.requires_grad:
            continue
        module.weight = torch.nn.Parameter(module.weight.detach().to(torch.bfloat16), requires_grad=False)
        module.forward = types.MethodType(_linear_in_weight_dtype, module)
        cast += module.weight.numel()
    exact_head(model)
    use_single_query_decode(model)
    return cast
