"""The frozen layers' outputs, kept from the rollout for the update.

With LoRA on the top layers only (`policy.lora.top_layers`), the layers below the lowest adapted one
are the frozen base: their output for a token sequence is the same before and after every update.
The rollout computes it anyway (prefill and decode run every layer), so the update need not: the
engine keeps, per generated reply, the hidden state entering the lowest adapted layer at every
position it fed (the prompt and the reply but its last token, which was sampled and never fed), and
the update runs only the adapted layers from there (trainers/shared_prefix.py, `top_layers_only`).

Exact up to float rounding: the rollout computed those states in other batches (another padding,
KV-cached prefill) than the update would, the difference the first PPO ratio already absorbs.
"""

from __future__ import annotations

from typing import Sequence

import torch


class FrozenStates:
    """Hidden states entering decoder layer `layer` ([tokens, hidden]), by the token ids they were
    computed for. The engine records while `recording` is on (the trainer's training rollouts, not its
    evaluations); the trainer clears the store after each update. max_bytes: what it may hold; a
    rollout that would exceed it stops recording (`full`), and the samples it did not keep run the frozen
    layers in the update."""

    def __init__(self, layer: int, max_bytes: int | None = None):
        self.layer = layer
        self.max_bytes = max_bytes
        self.recording = False
        self.full = False
        self.nbytes = 0
        self._by_ids: dict[tuple[int, ...], torch.Tensor] = {}

    def keep(self, ids: Sequence[int], states: torch.Tensor) -> None:
        if not self.recording or states.shape[0] != len(ids):
            return
        size = states.numel() * states.element_size()
        if self.max_bytes is not None and self.nbytes + size > self.max_bytes:
            self.full, self.recording = True, False
            return
        self._by_ids[tuple(ids)] = states
        self.nbytes += size

    def for_sequences(self, sequences: Sequence) -> list[torch.Tensor] | None:
        """Per sequence, the states of all its tokens but the last (which no loss reads as input), or
        None unless every sequence has them: the update runs the frozen layers itself then."""
        found = [self._by_ids.get(tuple(s.input_ids[:-1])) for s in sequences]
        return None if not found or any(f is None for f in found) else found

    def clear(self) -> None:
        self._by_ids.clear()
        self.nbytes, self.full = 0, False

    def __len__(self) -> int:
        return len(self._by_ids)


def decoder_stack(model: torch.nn.Module):
    """The decoder a causal LM runs before its LM head (embeddings, layers, final norm; PEFT's wrapper
    looked through), or None where the model does not name one."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    get = getattr(base, "get_decoder", None)
    return get() if callable(get) else None


def lowest_adapted_layer(model: torch.nn.Module) -> int:
    """Index of the lowest decoder layer holding a trained parameter; 0 when the embeddings or the first
    layer train (nothing below is frozen), or when the layers cannot be told from the names."""
    lowest = None
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        if ".layers." not in name:
            return 0
        index = name.split(".layers.", 1)[1].split(".", 1)[0]
        if not index.isdigit():
            return 0
        lowest = int(index) if lowest is None else min(lowest, int(index))
    return lowest or 0
