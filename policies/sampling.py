"""The distribution a reply's next token is drawn from: temperature, then top-k, then top-p (nucleus),
the one definition the HF engine (`HFPolicy._pick`) and the pool engine (`pool_engine.pick_tokens`) share."""

from __future__ import annotations

import torch

from agentgym.policies.base import SamplingParams


def sampling_probs(logits: torch.Tensor, sampling: SamplingParams) -> torch.Tensor:
    """Per row, the probabilities to draw from at `sampling.temperature` (> 0), with ids outside the
    top-k and outside the smallest prefix whose mass reaches top_p set to 0 (the top id is always kept)."""
    scaled = logits / sampling.temperature
    if sampling.top_k and sampling.top_k > 0:
        kth = torch.topk(scaled, min(sampling.top_k, scaled.shape[-1]), dim=-1).values[:, -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    probs = torch.softmax(scaled, dim=-1)
    if sampling.top_p < 1.0:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        drop = sorted_p.cumsum(-1) - sorted_p >= sampling.top_p
        sorted_p = sorted_p.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
    return probs
