"""HFPolicy: a transformers causal LM as an agentgym Policy (CPU fp32 or CUDA bf16, PEFT LoRA).

Generation is our own short sampling loop over the model's KV cache rather than
`model.generate`, because we need (a) the exact token ids sampled, (b) the logprob of each
sampled token, (c) a seedable torch.Generator, for reproducible rollouts and exact resume.

Recorded logprobs: `response_logprobs[i] = log softmax(logits)[token_i]` of the raw model
logits, i.e. the policy at temperature 1 without top-p/top-k, whatever the sampling settings.
That is the distribution the PPO ratio is taken against; when sampling at temperature 1 and
top_p 1 it is also exactly the sampling distribution. The trainer may recompute them anyway
(`ppo.recompute_old_logprobs`) where numerics differ (bf16, batched vs unbatched). Admissible-only
decoding is different: it changes the policy, not only how it is sampled, so its logprobs are
of the model renormalized over the ids the trie allows (`Completion.response_allowed`), and the
update renormalizes the same way (training the raw model on constrained samples drifted its mass
off the admissible replies until the run collapsed: docs/experiments.md).

Reference for KL: with LoRA the same model with the adapter disabled (no second copy);
without LoRA an optional frozen deep copy (`reference="copy"`).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import threading
import time
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from agentgym.errors import ConfigError
from agentgym.policies.base import Completion, Messages, SamplingParams, TurnContext
from agentgym.policies.decode_attention import use_single_query_decode
from agentgym.policies.frozen_states import FrozenStates, decoder_stack, lowest_adapted_layer
from agentgym.policies.model_files import DTYPES, encode_chat_prompt, eos_ids, resolve_model
from agentgym.policies.sampling import sampling_probs

DEFAULT_LORA = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.0, "target_modules": "all-linear"}


def _resolve_dtype(dtype: Any, device: str) -> torch.dtype:
    if dtype is None or dtype == "auto":
        return torch.bfloat16 if str(device).startswith("cuda") else torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return getattr(torch, DTYPES[str(dtype)])
    except KeyError:
        raise ConfigError(f"unknown dtype {dtype!r}; choose fp32, bf16 or fp16") from None


def _own_aligned_weights(model: torch.nn.Module, alignment: int = 64) -> None:
    """Give every CPU parameter and buffer not at an `alignment`-byte address its own copy there.

    transformers loads a safetensors file's CPU tensors as views of its memory map, at the file's
    data offset: 8-byte aligned only (a sft test model's start at 24 mod 64). torch's own
    allocations (deepcopy, clone, the rollout copy, the reference model) are 64-byte aligned, and
    the CPU matrix-vector kernel rounds differently by the weight's alignment: a one-row decode
    step's logits came out ~1e-7 apart between the loaded weights and a copy of them, so the
    background producer's rollout copy did not reproduce the inline run. Aligned once at load,
    the trainer's weights and every copy of them take the same kernels. Weights shared by several
    parameters (tied embeddings) stay shared."""
    moved: dict[tuple, torch.Tensor] = {}
    with torch.no_grad():
        for t in [*model.parameters(), *model.buffers()]:
            if t.device.type != "cpu" or t.numel() == 0 or t.data_ptr() % alignment == 0:
                continue
            key = (t.data_ptr(), t.dtype, tuple(t.shape), t.stride())
            if key not in moved:
                moved[key] = t.data.clone()
            t.data = moved[key]


def _row_states(prompt: torch.Tensor, reply: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat([prompt, torch.stack(reply)]) if reply else prompt


def lora_settings(net: torch.nn.Module, lora: dict) -> dict:
    """LoraConfig kwargs for this model. `top_layers: K` (ours) puts the adapters on the last K decoder
    layers only (peft's `layers_to_transform`): the layers below stay the frozen base, so the update's
    backward stops at the lowest adapted layer (no graph is built below it) and the shared prefix's
    keys and values there need no gradient. peft refuses `target_modules: all-linear` with a layer
    list, so it is spelled out here as the decoder's linear layers (the output head excluded)."""
    lora = dict(lora)
    layers = net.config.num_hidden_layers
    top = lora.pop("top_layers", None)
    if top is not None:
        if not 1 <= top <= layers:
            raise ConfigError(f"policy.lora.top_layers={top} is out of range: this model has {layers} decoder "
                              f"layers (1..{layers}; {layers} = every layer, as without top_layers)")
        if "layers_to_transform" in lora:
            raise ConfigError("policy.lora sets both top_layers and layers_to_transform: keep one")
        lora["layers_to_transform"] = list(range(layers - top, layers))
    chosen = lora.get("layers_to_transform")
    if chosen is not None:
        bad = [i for i in ([chosen] if isinstance(chosen, int) else chosen) if not 0 <= i < layers]
        if bad:
            raise ConfigError(f"policy.lora.layers_to_transform names layer {bad[0]}: this model's decoder layers "
                              f"are 0..{layers - 1}")
        if lora.get("target_modules") == "all-linear":
            lora["target_modules"] = sorted({name.rsplit(".", 1)[-1] for name, module in net.named_modules()
                                             if isinstance(module, torch.nn.Linear) and ".layers." in f".{name}"})
    return lora


@dataclass
class _Follow:
    """What a rollout copy follows: its trainer, the newest snapshot the trainer published (version,
    weights; shared across threads under `lock`) and the version the copy loaded last."""

    trainer: "HFPolicy"
    published: tuple[int, dict | None]
    synced_version: int
    lock: threading.Lock = field(default_factory=threading.Lock)


@functools.cache
def _reserved_layer_class():
    """DynamicLayer with room reserved for `reserve` more positions (defined once, on first use:
    transformers is imported lazily)."""
    from transformers.cache_utils import DynamicLayer

    class ReservedLayer(DynamicLayer):
        def __init__(self, reserve: int):
            super().__init__()
            self.reserve = reserve
            self.buffers: tuple[torch.Tensor, torch.Tensor] | None = None
            self.length = 0

        def update(self, key_states, value_states, *args, **kwargs):
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            n = key_states.shape[-2]
            if self.buffers is None or self.length + n > self.buffers[0].shape[-2]:
                shape = (*key_states.shape[:2], self.length + n + self.reserve, key_states.shape[-1])
                grown = (key_states.new_empty(shape), value_states.new_empty(shape))
                if self.length:
                    grown[0][:, :, :self.length] = self.keys
                    grown[1][:, :, :self.length] = self.values
                self.buffers = grown
            self.buffers[0][:, :, self.length:self.length + n] = key_states
            self.buffers[1][:, :, self.length:self.length + n] = value_states
            self.length += n
            self.keys, self.values = self.buffers[0][:, :, :self.length], self.buffers[1][:, :, :self.length]
            return self.keys, self.values

        def batch_select_indices(self, indices: torch.Tensor) -> None:
            if self.buffers is not None:
                self.buffers = (self.buffers[0][indices], self.buffers[1][indices])
                self.keys, self.values = self.buffers[0][:, :, :self.length], self.buffers[1][:, :, :self.length]

    return ReservedLayer


def _reserved_cache(reserve: int, layers: list | None = None):
    """A KV cache whose layers keep room for `reserve` more positions, so a decode step writes its
    token in place. Hugging Face's DynamicLayer concatenates instead, copying the whole cache every
    step (0.93x the CPU per turn of a growing conversation's rollout without the copies:
    benchmarks/speed/engine_ab.py)."""
    from transformers.cache_utils import DynamicCache

    layer_class = _reserved_layer_class()
    cache = DynamicCache()
    cache.layer_class_to_replicate = lambda: layer_class(reserve)
    for index, (keys, values) in enumerate(layers or []):
        cache.update(keys, values, index)
    return cache


def _reply_trie(replies: list[list[int]] | None, max_new_tokens: int) -> dict | None:
    """The replies' token ids as a trie (token -> subtrie); None for free decoding. Replies that
    cannot end within max_new_tokens are left out, unless none can."""
    if replies is None:
        return None
    fitting = [r for r in replies if 0 < len(r) <= max_new_tokens] or [r for r in replies if r]
    if not fitting:
        return None
    root: dict = {}
    for reply in fitting:
        node = root
        for token in reply:
            node = node.setdefault(int(token), {})
    return root


def _within(logits: torch.Tensor, nodes: list[dict | None]) -> torch.Tensor:
    """`logits` with every token that leaves its row's trie node at -inf (rows without one: as they are)."""
    if all(node is None for node in nodes):
        return logits
    mask = torch.zeros_like(logits, dtype=torch.bool)
    for b, node in enumerate(nodes):
        if node is None:
            mask[b] = True
        else:
            mask[b, list(node)] = True
    return logits.masked_fill(~mask, float("-inf"))


def _allowed_columns(nodes: list[dict | None] | None, device) -> torch.Tensor | None:
    """The ids any row's trie node allows, sorted (the columns admissible-only decoding reads); None
    when some row decodes freely (or none is given)."""
    if not nodes or any(node is None for node in nodes):
        return None
    return torch.tensor(sorted(set().union(*nodes)), dtype=torch.long, device=device)


@contextlib.contextmanager
def _head_restricted_to(model: torch.nn.Module, columns: torch.Tensor | None):
    """Inside, the LM head computes only `columns` of the logits, as the whole head would (up to the
    order of floating-point sums, 1e-7), and gives the others -inf. Admissible-only decoding samples within a trie node's few ids, so the
    rest of the head (a real model's 49k x 576 output layer: a fifth of SmolLM2's weights and 40% of
    a 16-row decode step's matmul time) is never read. Left as it is where the head is not a plain
    nn.Linear (an adapter on it) or columns is None."""
    head = model.get_output_embeddings() if columns is not None else None
    if type(head) is not torch.nn.Linear:
        yield
        return
    own = head.__dict__.get("forward")  # an instance override (bf16_base.exact_head), else the class's

    def forward(x: torch.Tensor) -> torch.Tensor:
        sliced = types.SimpleNamespace(weight=head.weight[columns],
                                       bias=None if head.bias is None else head.bias[columns])
        part = own.__func__(sliced, x) if own is not None else torch.nn.functional.linear(x, sliced.weight, sliced.bias)
        out = part.new_full((*part.shape[:-1], head.weight.shape[0]), float("-inf"))
        out[..., columns] = part
        return out

    head.forward = forward
    try:
        yield
    finally:
        if own is not None:
            head.forward = own
        else:
            del head.forward


@dataclass
class _Prefix:
    """A conversation's cached context: its token ids and, per layer, keys and values [heads, len, dim]."""

    ids: list[int]
    layers: list[tuple[torch.Tensor, torch.Tensor]]
    version: int  # the weights' version they were computed with
    states: torch.Tensor | None = None  # [len, hidden] entering the lowest adapted layer (FrozenStates)


class HFPolicy:
    def __init__(
        self,
        model: str | Path,
        device: str = "cpu",
        dtype: Any = None,
        lora: dict | None = None,
        reference: str | None = None,
        max_prompt_tokens: int | None = None,
        stop_strings: list[str] | None = None,
        trust_remote_code: bool = False,
    ):
        """model: a local HF folder (full model, or a PEFT adapter folder whose config names its
        base), a hub id already in the local cache, a catalog name (smollm2-135m-instruct) or a
        GGUF file (policies/model_catalog.py: converted once into a cached folder). lora: LoraConfig kwargs to add a fresh
        adapter ({} = DEFAULT_LORA). reference: None, or "copy" for a frozen copy when there is
        no LoRA (with LoRA the reference is always the base with the adapter disabled)."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model = resolve_model(str(model))  # a catalog name or GGUF file: its converted folder
        self.device = torch.device(device)
        self.dtype = _resolve_dtype(dtype, device)
        adapter_dir = Path(model).expanduser()
        is_adapter = (adapter_dir / "adapter_config.json").is_file()
        try:
            if is_adapter:
                from peft import PeftConfig, PeftModel

                base_path = PeftConfig.from_pretrained(str(adapter_dir)).base_model_name_or_path
                base = AutoModelForCausalLM.from_pretrained(base_path, dtype=self.dtype,
                                                            trust_remote_code=trust_remote_code)
                net = PeftModel.from_pretrained(base, str(adapter_dir), is_trainable=True)
            else:
                net = AutoModelForCausalLM.from_pretrained(model, dtype=self.dtype, trust_remote_code=trust_remote_code)
            tok_src = model if (adapter_dir / "tokenizer_config.json").is_file() or not is_adapter else base_path
            self.tokenizer = AutoTokenizer.from_pretrained(tok_src, trust_remote_code=trust_remote_code)
        except OSError as exc:
            raise ConfigError(f"cannot load model {model!r}: {exc}".splitlines()[0]) from None
        if lora is not None and not is_adapter:
            from peft import LoraConfig, get_peft_model

            net = get_peft_model(net, LoraConfig(task_type="CAUSAL_LM", **lora_settings(net, {**DEFAULT_LORA, **lora})))
        self.model = net.to(self.device)
        _own_aligned_weights(self.model)  # not the file map's 8-byte alignment: a copy must compute alike
        self.model.eval()
        self.is_lora = is_adapter or lora is not None
        self._set_up_generation(max_prompt_tokens, stop_strings)
        if reference == "copy" and not self.is_lora:
            self.reference_model = copy.deepcopy(self.model).eval().requires_grad_(False)

    @classmethod
    def from_loaded(cls, model, tokenizer, max_prompt_tokens: int | None = None,
                    stop_strings: list[str] | None = None) -> "HFPolicy":
        """A policy over a model already in memory, shared rather than copied (e.g. the model a
        TRL trainer is updating): generation sees every update the owner makes."""
        self = cls.__new__(cls)
        self.model, self.tokenizer = model, tokenizer
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        self.is_lora = hasattr(model, "disable_adapter") and hasattr(model, "peft_config")
        self._set_up_generation(max_prompt_tokens, stop_strings)
        return self

    def _set_up_generation(self, max_prompt_tokens: int | None, stop_strings: list[str] | None) -> None:
        """What both constructors share once model and tokenizer are there: left padding for batched
        generation, the stop ids and strings, no reference model, a seeded sampling generator."""
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.eos_ids = self._eos_ids()
        self.max_prompt_tokens = max_prompt_tokens
        self.stop_strings = list(stop_strings or [])
        self.reference_model = None
        self.reuse_kv = True  # growing conversations: a turn's KV cache is extended by the next turn
        self.matmul_context = contextlib.nullcontext  # the context of the policy's own forwards (keep_base_in_bf16)
        self._prefixes: dict[str, _Prefix] = {}
        self.last_prefill_tokens: list[int] = []
        # the frozen layers' outputs for the update, kept while recording (`keep_frozen_states`)
        self.frozen_states: FrozenStates | None = None
        self.pool_engine = None  # policy.engine=pool: decoding on a KV pool (use_pool_engine)
        if self.device.type == "cpu":  # a decode step's attention as two matmuls (policies/decode_attention.py)
            use_single_query_decode(self.model)
        self._generator = torch.Generator(device=self.device)
        self._generator.manual_seed(0)
        self._last_seed: int | None = None

    # --- tokens ---------------------------------------------------------------------------
    def _eos_ids(self) -> set[int]:
        return eos_ids(self.tokenizer, getattr(getattr(self.model, "generation_config", None), "eos_token_id", None))

    def encode_prompt(self, messages: Messages) -> list[int]:
        return encode_chat_prompt(self.tokenizer, messages, self.max_prompt_tokens)

    def encode_response(self, text: str, add_eos: bool = True) -> list[int]:
        """Tokens of a target reply (SFT); generated replies keep their sampled ids instead."""
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return list(ids) + ([self.tokenizer.eos_token_id] if add_eos else [])

    # --- sampling -------------------------------------------------------------------------
    def reseed(self, seed: int) -> None:
        self._generator.manual_seed(int(seed))
        self._last_seed = int(seed)

    def sampling_state(self) -> dict:
        """The sampler's state, for checkpoints: {"rng": the generator's state, "last_seed": the
        seed it was last set to (a request with that seed does not reseed)}. A resumed run that
        loads it samples on exactly as the saved one would have."""
        return {"rng": self._generator.get_state(), "last_seed": self._last_seed}

    def load_sampling_state(self, state: dict) -> None:
        """Restore what `sampling_state()` returned (a missing key or a foreign rng state raises)."""
        self._generator.set_state(state["rng"])
        self._last_seed = state["last_seed"]

    @torch.inference_mode()
    def generate(self, prompts: list[Messages], sampling: SamplingParams | None = None,
                 contexts: list[TurnContext] | None = None, batch_size: int = 64) -> list[Completion]:
        sampling = sampling or SamplingParams()
        prompt_ids = [self.encode_prompt(m) for m in prompts]
        return self.generate_ids(prompt_ids, sampling, batch_size=batch_size)

    @torch.inference_mode()
    def generate_ids(self, prompt_ids: list[list[int]], sampling: SamplingParams | None = None,
                     cache_keys: list[str] | None = None, batch_size: int = 64,
                     allowed_replies: list[list[list[int]] | None] | None = None) -> list[Completion]:
        """Sample a reply to each prompt, given as token ids. cache_keys: one key per prompt (an
        episode of a growing conversation): the prompt's longest prefix cached under its key by the
        previous call is not prefilled again, and the prompt + reply are cached for the next one
        (`forget` drops keys). Prompts are batched by length, `batch_size` at a time.

        allowed_replies: per prompt, None (free decoding) or the token ids of every reply it may
        give, each ending with an end-of-turn id: decoding walks a trie of them, so the reply is one
        of them (those longer than max_new_tokens are left out unless none fits). That constrained
        distribution is the policy: its logprobs are recorded (the model's renormalized over the
        ids the trie allowed at each token, `Completion.response_allowed`), and the update trains it."""
        sampling = sampling or SamplingParams()
        if sampling.seed is not None and sampling.seed != self._last_seed:
            self.reseed(sampling.seed)
        if self.pool_engine is not None:  # every row in one call: the engine batches and pools them itself
            tries = [_reply_trie(a, sampling.max_new_tokens) for a in allowed_replies] \
                if allowed_replies is not None else None
            return self.pool_engine.generate_ids(prompt_ids, sampling, cache_keys, tries)
        was_training = self.model.training
        self.model.eval()
        try:
            order = sorted(range(len(prompt_ids)), key=lambda i: len(prompt_ids[i]))  # little padding per batch
            out: list[Completion | None] = [None] * len(prompt_ids)
            for start in range(0, len(order), batch_size):
                rows = order[start:start + batch_size]
                keys = [cache_keys[i] for i in rows] if cache_keys is not None else None
                tries = [_reply_trie(allowed_replies[i], sampling.max_new_tokens) for i in rows] \
                    if allowed_replies is not None else None
                for i, c in zip(rows, self._sample([prompt_ids[i] for i in rows], sampling, keys, tries=tries)):
                    out[i] = c
            return out  # type: ignore[return-value]
        finally:
            self.model.train(was_training)

    def forget(self, cache_keys=None) -> None:
        """Drop the cached prefixes of these keys (their episodes ended); None: all of them (the
        weights were replaced in a way torch does not count, e.g. through `.data`)."""
        if cache_keys is None:
            self._prefixes.clear()
        for key in cache_keys or ():
            self._prefixes.pop(key, None)
        if self.pool_engine is not None:
            self.pool_engine.forget(cache_keys)

    def fork(self, parent_key: str, child_key: str) -> None:
        """A branch of an episode (tree rollouts, called right after the parent's turn at the branch
        step): `child_key`'s next prompt starts from `parent_key`'s cached context as it is now, cut (as
        any cached context is) to the tokens the prompt shares with it, so a branch's first turn, whose
        prompt is its parent's, prefills one token. The context is shared, not copied: no cached context
        is written in place (each turn caches a new one under its key), so neither changes the other's.
        The pool engine copies the parent's slot (PoolEngine.fork). Nothing cached for the parent: no-op."""
        if self.pool_engine is not None:
            self.pool_engine.fork(parent_key, child_key)
        elif parent_key in self._prefixes:
            self._prefixes[child_key] = self._prefixes[parent_key]

    def use_pool_engine(self, **settings) -> None:
        """Decode on a preallocated KV pool with one step function (policy.engine=pool,
        agentgym.policies.pool_engine): the same Completions, computed faster. settings: PoolEngine's."""
        from agentgym.policies.pool_engine import PoolEngine

        self.pool_engine = PoolEngine(self, **settings)

    def keep_frozen_states(self, max_bytes: int | None = None) -> FrozenStates | None:
        """With adapters on the top layers only, a store of the frozen layers' outputs that this
        policy's rollouts fill while it records (policies/frozen_states.py), holding at most max_bytes;
        None when every layer trains. Rollout copies share it."""
        layer = lowest_adapted_layer(self.model)
        if layer > 0 and self.frozen_states is None:
            self.frozen_states = FrozenStates(layer, max_bytes)
        return self.frozen_states

    def _frozen_layer_hook(self, captured: list):
        """A forward hook on the last frozen layer that appends its output to `captured`."""
        layers = decoder_stack(self.model).layers

        def hook(_module, _inputs, output):
            captured.append((output[0] if isinstance(output, tuple) else output).detach())

        return layers[self.frozen_states.layer - 1].register_forward_hook(hook)

    def _weights_version(self) -> int:
        return sum(int(p._version) for p in self.model.parameters())

    def _cached_prefix(self, key: str | None, ids: list[int], version: int) -> "_Prefix | None":
        """The key's cached context cut to the longest prefix it shares with `ids` (all of it for a
        growing conversation; the template and task line for a windowed prompt), keeping at least
        one new token to prefill; None when nothing is shared or the weights changed."""
        entry = self._prefixes.get(key) if key is not None else None
        if entry is None or entry.version != version:
            return None
        limit = min(len(entry.ids), len(ids) - 1)
        shared = 0
        while shared < limit and entry.ids[shared] == ids[shared]:
            shared += 1
        if shared == 0:
            return None
        if shared == len(entry.ids):
            return entry
        return _Prefix(entry.ids[:shared], [(k[:, :shared], v[:, :shared]) for k, v in entry.layers], version,
                       None if entry.states is None else entry.states[:shared])

    def _sample(self, prompt_ids: list[list[int]], sampling: SamplingParams,
                cache_keys: list[str] | None = None, tries: list[dict | None] | None = None) -> list[Completion]:
        """Prefill (the part of each prompt not cached), then decode one token per step; a row
        leaves the batch as soon as it ends, so finished replies cost nothing more. tries: per
        prompt, None or the trie of the replies it may give (`_reply_trie`)."""
        batch = len(prompt_ids)
        tries = list(tries) if tries else None  # walked in place, one node per row and token
        pad = self.tokenizer.pad_token_id
        version = self._weights_version() if cache_keys is not None else 0
        prefixes = [self._cached_prefix(k, p, version) for k, p in zip(cache_keys or [None] * batch, prompt_ids)]
        cached = [len(e.ids) if e is not None else 0 for e in prefixes]
        # identical prompts (a group's episodes at their first turn, or in the same state) are
        # prefilled once, from the longest cache any of them has, and their cache copied: rows
        # sample independently from there
        unique: dict[tuple, int] = {}
        expand = [unique.setdefault(tuple(p), len(unique)) for p in prompt_ids]
        rows = list(range(len(unique)))  # per prefilled row: the prompt it computes
        for i, u in enumerate(expand):
            if i == expand.index(u) or cached[i] > cached[rows[u]]:
                rows[u] = i
        self.last_prefill_tokens = [0] * batch  # what this call prefilled, per prompt (benchmarks)
        for i in rows:
            self.last_prefill_tokens[i] = len(prompt_ids[i]) - cached[i]
        prefixes, cached = [prefixes[i] for i in rows], [cached[i] for i in rows]
        new = [prompt_ids[i][c:] for i, c in zip(rows, cached)]
        width_cache, width_new = max(cached), max(len(n) for n in new)
        rows_in = len(new)
        # columns: [pad][cached prefix][pad][new prompt tokens]; position ids continue each row's prefix
        input_ids = torch.full((rows_in, width_new), pad, dtype=torch.long)
        attention = torch.zeros((rows_in, width_cache + width_new), dtype=torch.long)
        positions = torch.zeros((rows_in, width_new), dtype=torch.long)
        for i, (c, ids) in enumerate(zip(cached, new)):
            input_ids[i, width_new - len(ids):] = torch.tensor(ids, dtype=torch.long)
            attention[i, width_cache - c:width_cache] = 1
            attention[i, width_cache + width_new - len(ids):] = 1
            positions[i, width_new - len(ids):] = torch.arange(c, c + len(ids))
        past = None
        if width_cache:
            layers, first = [], next(e for e in prefixes if e is not None)
            for layer, (k0, v0) in enumerate(first.layers):
                keys = k0.new_zeros((rows_in, k0.shape[0], width_cache, k0.shape[2]))
                values = v0.new_zeros((rows_in, v0.shape[0], width_cache, v0.shape[2]))
                for i, e in enumerate(prefixes):
                    if e is not None:
                        keys[i, :, width_cache - cached[i]:] = e.layers[layer][0]
                        values[i, :, width_cache - cached[i]:] = e.layers[layer][1]
                layers.append((keys.to(self.device), values.to(self.device)))
            past = _reserved_cache(sampling.max_new_tokens, layers)
        else:
            past = _reserved_cache(sampling.max_new_tokens)
        if rows_in == batch and all(u == i for i, u in enumerate(expand)):
            expand = None
        attention, positions = attention.to(self.device), positions.to(self.device)
        columns = _allowed_columns(tries, self.device)  # the first step's: every row is at its trie's root
        recording = self.frozen_states is not None and self.frozen_states.recording and \
            all(c == 0 or e.states is not None for c, e in zip(cached, prefixes))
        captured: list[torch.Tensor] = []
        hook = self._frozen_layer_hook(captured) if recording else None
        try:
            with self.matmul_context(), _head_restricted_to(self.model, columns):
                out = self.model(input_ids=input_ids.to(self.device), attention_mask=attention, position_ids=positions,
                                 past_key_values=past, use_cache=True, logits_to_keep=1)
        finally:
            if hook is not None:
                hook.remove()
        past = out.past_key_values
        # per prompt: the states of its tokens (the cached prefix's, then the prefill's), then its fed reply tokens'
        prompt_states = reply_states = None
        if recording:
            unique_states = [torch.cat([e.states, captured[0][u, width_new - len(n):]]) if c else
                             captured[0][u, width_new - len(n):] for u, (c, e, n) in enumerate(zip(cached, prefixes, new))]
            prompt_states = [unique_states[u] for u in (expand or range(batch))]
            reply_states = [[] for _ in range(batch)]
        if expand is not None:
            index = torch.tensor(expand, device=self.device)
            past.batch_select_indices(index)
            out.logits, attention, positions = out.logits[index], attention[index], positions[index]

        responses: list[list[int]] = [[] for _ in range(batch)]
        logprobs: list[list[float]] = [[] for _ in range(batch)]
        reasons = ["length"] * batch
        allowed: list[list] = [[] for _ in range(batch)]  # per token, the ids the trie allowed (None: free)
        eos = torch.tensor(sorted(self.eos_ids), device=self.device)
        # What the loop reads per row (the sampled token, its logprob, whether it ended) comes to the
        # host once per step as lists: indexing a device tensor row by row is a sync per element.
        live = list(range(batch))  # batch rows still decoding -> their prompt index
        for step in range(sampling.max_new_tokens):
            logits = out.logits[:, -1, :].float()
            rows = live
            nodes = [tries[i] for i in rows] if tries else None
            if columns is not None:  # every row within its trie node: sample among the allowed columns alone
                ids = columns.tolist()
                within = torch.tensor([[c in node for c in ids] for node in nodes], device=self.device)
                logits = logits[:, columns].masked_fill(~within, float("-inf"))
            elif tries:  # admissible-only decoding: the policy is the model renormalized within each row's trie node
                logits = _within(logits, nodes)
            pick = self._pick(logits, sampling)
            token_logprob = torch.log_softmax(logits, dim=-1).gather(-1, pick[:, None])[:, 0]
            token = columns[pick] if columns is not None else pick
            token_ids, token_logprobs = token.tolist(), token_logprob.tolist()
            done = torch.isin(token, eos).tolist()
            if tries:
                for b, i in enumerate(rows):
                    if tries[i] is not None:
                        allowed[i].append(sorted(tries[i]))
                        tries[i] = tries[i].get(token_ids[b]) or None
                    else:
                        allowed[i].append(None)
            for b, i in enumerate(rows):
                responses[i].append(token_ids[b])
                logprobs[i].append(token_logprobs[b])
                if done[b]:
                    reasons[i] = "stop"
                elif self.stop_strings and any(s in self.tokenizer.decode(responses[i][-8:]) for s in self.stop_strings):
                    done[b] = True
                    reasons[i] = "stop"
            last = step == sampling.max_new_tokens - 1
            ended = range(len(rows)) if last else [b for b, d in enumerate(done) if d]
            if recording:  # a reply that ended: its states, prompt and fed reply tokens, for the update
                for b in ended:
                    i = rows[b]
                    self.frozen_states.keep(prompt_ids[i] + responses[i][:-1], _row_states(prompt_states[i], reply_states[i]))
            if cache_keys is not None:
                for b in ended:
                    i = rows[b]
                    self._keep_prefix(cache_keys[i], prompt_ids[i] + responses[i][:-1], past, b, attention[b], version,
                                      _row_states(prompt_states[i], reply_states[i]) if recording else None)
            if last or all(done):
                break
            kept = [b for b, d in enumerate(done) if not d]
            if len(kept) < len(rows):  # finished rows leave the batch (and its KV cache)
                keep = torch.tensor(kept, device=self.device)
                past.batch_select_indices(keep)
                live = [rows[b] for b in kept]
                token, attention, positions = token[keep], attention[keep], positions[keep]
            positions = positions[:, -1:] + 1
            attention = torch.cat([attention, torch.ones((len(live), 1), dtype=attention.dtype, device=self.device)], 1)
            # the next step's columns: the live rows' nodes after this step's token (what its logits are sampled within)
            columns = _allowed_columns([tries[i] for i in live] if tries else None, self.device)
            captured.clear()
            hook = self._frozen_layer_hook(captured) if recording else None
            try:
                with self.matmul_context(), _head_restricted_to(self.model, columns):
                    out = self.model(input_ids=token[:, None], attention_mask=attention, position_ids=positions,
                                     past_key_values=past, use_cache=True, logits_to_keep=1)
            finally:
                if hook is not None:
                    hook.remove()
            if recording:
                for b, i in enumerate(live):
                    reply_states[i].append(captured[0][b, 0])
            past = out.past_key_values
        return [
            Completion(text=self.tokenizer.decode(r, skip_special_tokens=True), prompt_ids=list(p), response_ids=r,
                       response_logprobs=lp, finish_reason=why,
                       response_allowed=a if any(x is not None for x in a) else None)
            for p, r, lp, why, a in zip(prompt_ids, responses, logprobs, reasons, allowed)
        ]

    def _keep_prefix(self, key: str, ids: list[int], past, row: int, row_attention: torch.Tensor, version: int,
                     states: torch.Tensor | None = None) -> None:
        """Cache row `row`'s keys and values (its attended columns: prompt + reply without its last
        token, which was sampled but never fed) under `key` for the episode's next turn."""
        if not self.reuse_kv:
            return
        columns = torch.nonzero(row_attention).flatten()
        layers = [(layer.keys[row].index_select(1, columns).clone(), layer.values[row].index_select(1, columns).clone())
                  for layer in past.layers]
        if layers and layers[0][0].shape[1] == len(ids):
            self._prefixes[key] = _Prefix(ids, layers, version, states)

    def _pick(self, logits: torch.Tensor, sampling: SamplingParams) -> torch.Tensor:
        if sampling.temperature <= 0:
            return logits.argmax(-1)
        probs = sampling_probs(logits, sampling)
        gen = self._generator if probs.device.type == self._generator.device.type else None
        return torch.multinomial(probs, 1, generator=gen)[:, 0]

    # --- as the rollout engine "hf" (agentgym.policies.engines) ------------------------------
    def sync(self, force: bool = False) -> float:
        """The engine's one weight path. The trainer's own policy generates with the very weights it
        updates: nothing to take. A `rollout_copy()` loads the newest weights its trainer published
        (all of them again with force=True); seconds spent."""
        follow = getattr(self, "_follow", None)
        if follow is None:
            return 0.0
        t0 = time.perf_counter()
        with follow.lock:
            version, snapshot = follow.published
        if snapshot is not None and (force or version > follow.synced_version):
            params = dict(self.model.named_parameters())
            for name, tensor in snapshot.items():
                params[name].data.copy_(tensor)
            self.forget()  # cached conversation prefixes were computed with the old weights
            follow.synced_version = version
        return time.perf_counter() - t0

    # --- a copy that samples while this policy trains (the async batch producer's) ------------
    def rollout_copy(self, version: int = 0) -> "HFPolicy":
        """A second HFPolicy on its own model, tokenizer and sampling generator (no reference model)
        that generates in another thread while this one is updated, and follows it as every engine
        does, through `sync()`: the trainer calls `copy.publish(version)` between updates (a
        snapshot of its trainable weights, so the copy never reads weights mid-update) and the copy
        loads the newest snapshot on its next `sync()`. `version`: the weights' version now;
        `copy.synced_version` is the version it samples with."""
        clone = copy.copy(self)
        clone.model = copy.deepcopy(self.model).eval()  # requires_grad kept: under inference_mode it costs nothing,
        # and torch picks other CPU kernels for weights that do not require grad (logprobs 5e-7 apart)
        clone.tokenizer = copy.deepcopy(self.tokenizer)  # fast tokenizers are not safe to share across threads
        clone.reference_model = None
        clone._prefixes = {}  # its own cached conversations
        clone._generator = torch.Generator(device=self.device)
        clone._generator.manual_seed(0)
        clone._last_seed = None
        clone._follow = _Follow(trainer=self, published=(int(version), None), synced_version=int(version))
        if self.pool_engine is not None:  # its own pool over its own weights
            clone.pool_engine = None
            clone.use_pool_engine(max_pool_gib=self.pool_engine.pool.max_bytes / 2**30, log=self.pool_engine.log)
        return clone

    @property
    def synced_version(self) -> int | None:
        """A rollout copy: the version of the weights it samples with (None for a trainer's policy)."""
        follow = getattr(self, "_follow", None)
        return None if follow is None else follow.synced_version

    def publish(self, version: int) -> None:
        """A rollout copy, called from the trainer's thread after an update: snapshot the trainer's
        trainable weights as `version`, for the copy's next `sync()`."""
        follow = getattr(self, "_follow", None)
        if follow is None:
            raise TypeError("publish() is for a rollout copy: make one with policy.rollout_copy()")
        with torch.no_grad():
            snapshot = {n: p.detach().clone() for n, p in follow.trainer.model.named_parameters() if p.requires_grad}
        with follow.lock:
            follow.published = (int(version), snapshot)

    def sleep(self, level: int = 1) -> None:
        pass

    def close(self) -> None:
        pass

    # --- training support -----------------------------------------------------------------
    def reference_forward(self, **kwargs):
        """The frozen reference model's forward pass (no gradients), called like the model."""
        with torch.no_grad(), self.matmul_context():
            if self.is_lora:
                with self.model.disable_adapter():
                    return self.model(**kwargs)
            if self.reference_model is None:
                raise ConfigError("no reference model: set policy.reference=copy or use LoRA to train with a KL term")
            return self.reference_model(**kwargs)

    def keep_base_in_bf16(self) -> int:
        """LoRA: store the frozen base's linear weights in bf16 (once) and run the policy's own
        forwards (rollout prefill and decode, reference) under bf16 autocast, the LM head in fp32
        (agentgym.policies.bf16_base); the update runs under the same autocast (ppo.matmul_dtype=bf16).
        Returns the number of parameters stored in bf16."""
        from agentgym.policies.bf16_base import keep_frozen_linears_in_bf16

        if not self.is_lora:
            raise ValueError("keep_base_in_bf16 needs a LoRA policy: full fine-tuning trains the base weights")
        cast = keep_frozen_linears_in_bf16(self.model)
        self.matmul_context = functools.partial(torch.autocast, self.device.type, dtype=torch.bfloat16)
        self.forget()  # cached keys and values were computed in fp32
        if self.pool_engine is not None:  # the frozen weights are new tensors: the step reads them again
            self.pool_engine.rebuild()
        return cast

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        return [p for p in self.model.parameters() if p.requires_grad]

    def hidden_size(self) -> int:
        return int(self.model.config.hidden_size)

    def save(self, out_dir: str | Path, state_dict: dict | None = None) -> None:
        """Full model, or only the LoRA adapter (PEFT's adapter_config.json + adapter_model.safetensors).
        state_dict: the weights to write instead of the model's own (the trainer's FSDP shards gathered)."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(out, state_dict=state_dict)
        self.tokenizer.save_pretrained(out)

    def load_weights(self, model_dir: str | Path) -> None:
        """Load weights saved by `save` into this policy, in place (resume keeps optimizer refs valid)."""
        from safetensors.torch import load_file

        model_dir = Path(model_dir)
        if self.is_lora:
            from peft import set_peft_model_state_dict

            state = load_file(str(model_dir / "adapter_model.safetensors"))
            set_peft_model_state_dict(self.model, state)
            return
        files = sorted(model_dir.glob("model*.safetensors"))
        state: dict[str, torch.Tensor] = {}
        for f in files:
            state.update(load_file(str(f)))
        missing, unexpected = self.model.load_state_dict(state, strict=False)
        # tied embeddings: lm_head.weight is not saved separately
        missing = [k for k in missing if not k.endswith("lm_head.weight")]
        if missing or unexpected:
            raise RuntimeError(f"checkpoint mismatch: missing {missing[:5]}, unexpected {unexpected[:5]}")
