"""The last decoder layer run only where a loss is read.

In an agent's update the loss reads the model's own tokens (5-11% of the positions in the
household jobs); the rest is prompt and observation. Every layer below the last must still run
at every position, because the next layer's keys and values are built from its output. The last
layer's keys and values are needed everywhere too, but its queries, attention output, MLP and the
final norm feed nothing but the LM head: they run at the loss positions alone here. The result is
the same function (equal up to float summation order; tests/trainers/test_last_layer.py checks
values and gradients against the full forward), with fewer FLOPs: about 14/16 of one layer's
work at the skipped positions, i.e. ~40% of the update of the 2-layer demo model and ~3% of a
28-layer one.

Supported: plain Hugging Face decoders of the Llama family (llama, qwen2, qwen3, mistral) with no
sliding window shorter than the batch and no attention dropout, not wrapped for data parallel
(DDP's reducer and FSDP's hooks expect the model's own forward). Anything else returns None and
the caller runs the full forward.
"""

from __future__ import annotations

import threading

import torch
import torch.nn.functional as F

SUPPORTED = frozenset({"llama", "qwen2", "qwen3", "mistral"})
_LAYER_PARTS = ("input_layernorm", "self_attn", "post_attention_layernorm", "mlp")
_ATTENTION_PARTS = ("q_proj", "k_proj", "v_proj", "o_proj", "scaling", "num_key_value_groups", "head_dim")


class _Stop(Exception):
    """Raised by the pre-hook on the last layer once its inputs are captured."""


def _decoder(model):
    """(the base decoder holding `layers` and `norm`, its last layer) when the shape is known, else None."""
    try:
        from transformers import PreTrainedModel
    except ImportError:  # pragma: no cover - transformers is a core dependency
        return None
    config = getattr(model, "config", None)
    base = getattr(model, "model", None)
    if not isinstance(model, PreTrainedModel) or getattr(config, "model_type", None) not in SUPPORTED:
        return None
    layers, norm = getattr(base, "layers", None), getattr(base, "norm", None)
    if layers is None or norm is None or len(layers) == 0:
        return None
    last = layers[-1]
    attn = getattr(last, "self_attn", None)
    if not all(hasattr(last, p) for p in _LAYER_PARTS) or not all(hasattr(attn, p) for p in _ATTENTION_PARTS):
        return None
    if model.training and getattr(config, "attention_dropout", 0.0):
        return None
    if any(type(p).__name__ == "DTensor" for p in last.parameters()):  # FSDP2 shards: its hooks gather them
        return None
    return base, last


def final_hidden_at(model, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    where: torch.Tensor, inputs_embeds: torch.Tensor | None = None) -> torch.Tensor | None:
    """The final hidden states (after the last norm: what the LM head reads) at the positions
    `where` [B, T] marks, as [N, H] in row-major order (= `hidden[where]`), or None when the model
    is not one this module supports. Right-padded batches (attention_mask 1 then 0) only."""
    found = _decoder(model)
    if found is None:
        return None
    base, last = found
    attn = last.self_attn
    window = getattr(attn, "sliding_window", getattr(model.config, "sliding_window", None))
    if window is not None and window < input_ids.shape[1]:
        return None
    captured: dict = {}
    owner = threading.get_ident()

    def capture(module, args, kwargs):
        if threading.get_ident() != owner:  # another thread's forward of the same model runs in full
            return None
        captured["hidden"] = args[0] if args else kwargs["hidden_states"]
        captured["rotary"] = kwargs.get("position_embeddings")
        raise _Stop

    handle = last.register_forward_pre_hook(capture, with_kwargs=True)
    try:
        base(input_ids=None if inputs_embeds is not None else input_ids, inputs_embeds=inputs_embeds,
             attention_mask=attention_mask, use_cache=False)
    except _Stop:
        pass
    finally:
        handle.remove()
    if captured.get("rotary") is None:
        return None
    cos, sin = captured["rotary"]
    if cos.shape[-1] != attn.head_dim:  # partial rotary: not the layout this module computes
        return None
    return _last_layer(last, base.norm, captured["hidden"], cos, sin, attention_mask.bool(),
                       where.bool().to(input_ids.device))


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _last_layer(layer, norm, hidden, cos, sin, keys_valid: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
    attn = layer.self_attn
    batch, width, _ = hidden.shape
    d = attn.head_dim
    rows, cols = where.nonzero(as_tuple=True)
    cos, sin = cos.expand(batch, -1, -1), sin.expand(batch, -1, -1)

    x = layer.input_layernorm(hidden)
    keys = attn.k_proj(x).view(batch, width, -1, d)
    if hasattr(attn, "k_norm"):  # qwen3 normalizes keys and queries per head before the rotation
        keys = attn.k_norm(keys)
    keys = keys.transpose(1, 2)
    keys = keys * cos[:, None] + _rotate_half(keys) * sin[:, None]
    values = attn.v_proj(x).view(batch, width, -1, d).transpose(1, 2)

    queries = attn.q_proj(x[rows, cols]).view(len(rows), -1, d)  # [N, heads, d]
    if hasattr(attn, "q_norm"):
        queries = attn.q_norm(queries)
    c, s = cos[rows, cols][:, None], sin[rows, cols][:, None]
    queries = queries * c + _rotate_half(queries) * s

    # the N queries laid out per row, padded to the row with most of them; a padding slot attends
    # key 0 (a right-padded row's first token is real) so no softmax row is empty, and is dropped
    counts = where.sum(1)
    slots = int(counts.max()) if len(rows) else 0
    starts = torch.cumsum(counts, 0) - counts
    slot = torch.arange(len(rows), device=rows.device) - starts[rows]
    heads = queries.shape[1]
    q = queries.new_zeros((batch, slots, heads, d)).index_put((rows, slot), queries).transpose(1, 2)
    query_pos = torch.zeros((batch, slots), dtype=torch.long, device=rows.device).index_put((rows, slot), cols)
    key_pos = torch.arange(width, device=rows.device)
    mask = (key_pos[None, None, :] <= query_pos[:, :, None]) & keys_valid[:, None, :]  # [B, slots, T]
    groups = attn.num_key_value_groups
    if groups > 1:
        keys, values = keys.repeat_interleave(groups, dim=1), values.repeat_interleave(groups, dim=1)
    out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask[:, None], scale=attn.scaling)
    out = out.transpose(1, 2)[rows, slot].reshape(len(rows), heads * d)  # [N, heads * d]

    h = hidden[rows, cols] + attn.o_proj(out)
    h = h + layer.mlp(layer.post_attention_layernorm(h))
    return norm(h)
