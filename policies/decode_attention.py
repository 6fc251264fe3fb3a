"""A decode step's attention (one query per row) as two small matrix multiplies, in fp32, on a CPU.

torch's CPU kernel behind `scaled_dot_product_attention` is built for long queries: for a single
query it costs 1.8 ms per layer at 16 rows x 130 keys (SmolLM2's 9 query and 3 key-value heads),
where `softmax(q k^T) v` with the query heads grouped onto their key-value head takes 0.5 ms; at
400 keys, 9.5 ms against 1.5 ms (`python benchmarks/speed/decode_step_ab.py`). A 30-layer model
decoding 16 rows spent a quarter of each step there. Prefill and the update (many queries per
row) keep transformers' sdpa path.

The single-query path computes in fp32 whatever the cache's dtype (a bf16 KV cache is upcast:
torch's bf16 kernel is slower still for one query, and the softmax wants the precision), and
returns the query's dtype. It takes exactly sdpa's inputs (boolean or additive mask, `scaling`),
so a model's outputs differ from the sdpa path only by the order of floating-point sums (1e-7).
"""

from __future__ import annotations

import torch

NAME = "sdpa_single_query_matmul"  # the attention implementation's name in transformers' registry
# what some models add to attention (soft-capping, sinks, a position bias, a paged cache, a window):
# such a call keeps sdpa's path
_NOT_ON_THE_SINGLE_QUERY_PATH = ("softcap", "s_aux", "sinks", "position_bias", "cache", "sliding_window")


def single_query_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                           mask: torch.Tensor | None, scaling: float) -> torch.Tensor:
    """query [B, H, 1, D], key and value [B, KVH, T, D] (H a multiple of KVH), mask None, boolean
    (True: attend) or additive, broadcastable to [B, 1, 1, T]. Returns [B, H, 1, D] in query's dtype."""
    batch, heads, _, dim = query.shape
    kv_heads = key.shape[1]
    # each key-value head's query heads as rows of one matmul: no copy of the cache per query head
    q = query.float().reshape(batch, kv_heads, heads // kv_heads, dim)
    scores = torch.matmul(q, key.float().transpose(-1, -2)) * scaling  # [B, KVH, G, T]
    if mask is not None:
        mask = mask.reshape(mask.shape[0], 1, 1, mask.shape[-1])
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask.float()
    out = torch.matmul(torch.softmax(scores, dim=-1), value.float())  # [B, KVH, G, D]
    return out.reshape(batch, heads, 1, dim).to(query.dtype)


def _attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling: float | None = None,
               **kwargs):
    """transformers' sdpa attention, with a decode step (query length 1, no dropout, no extras such
    as soft-capping or sinks) on the single-query path."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    extras = [k for k in _NOT_ON_THE_SINGLE_QUERY_PATH if kwargs.get(k) is not None]
    if query.shape[2] != 1 or query.device.type != "cpu" or (dropout and module.training) or extras \
            or query.shape[1] % key.shape[1]:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    if attention_mask is not None and attention_mask.shape[-2] != 1:  # a mask per query row: the first (only) one
        attention_mask = attention_mask[..., -1:, :]
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    out = single_query_attention(query, key, value, attention_mask, scale)
    return out.transpose(1, 2).contiguous(), None


def use_single_query_decode(model: torch.nn.Module) -> bool:
    """Have `model` (a transformers model on sdpa attention) run its decode steps' attention on the
    single-query path; False, and the model left as it is, where it uses another implementation."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    if getattr(base.config, "_attn_implementation", None) not in ("sdpa", NAME):
        return False
    AttentionInterface.register(NAME, _attention)
    AttentionMaskInterface.register(NAME, sdpa_mask)  # sdpa's causal mask (an unknown name gets none)
    base.set_attn_implementation(NAME)
    return True
