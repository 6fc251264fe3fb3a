"""`policy.engine=pool`: the HF policy's decoding on a preallocated KV pool, in one step function.

The trainer's HFPolicy generates as it always does (`generate_ids`: token ids in, `Completion`s with
ids, logprobs and allowed sets out, a conversation's keys and values reused across its turns, the
frozen layers' states recorded for the update); only how the tokens are computed changes:

* **KV pool.** Keys and values of every layer live in one tensor per kind, [layers, slots, kv heads,
  length + 1, head dim], allocated when first needed and grown by doubling (a logged copy). An
  episode (a cache key) holds one slot for its whole life: a turn prefills its new tokens at the end
  of the slot and decodes in place, with no per-turn copy of its context. A prompt that shares only a
  prefix with the slot's tokens (a windowed history) cuts the slot to that prefix in place. Identical
  prompts of one call (a group's first turn) are prefilled once; the other rows' slots get a copy of
  that prefix (copy at fork: one pool-to-pool copy, not shared pages). A branch of an episode (`fork`,
  tree rollouts) gets a copy of its parent's slot when it forks (past the pool's budget, at its first
  call, of what the parent's slot then shares with its prompt), so its first turn prefills one token.
  The extra column is a scratch position rows outside the call write to.
* **One decode step** for all rows of a call: the decoder written over the model's own weights
  (Llama-family layers: llama, qwen2, mistral), attention of one query per row over the pool as two
  matmuls. Under full fine-tuning the trainer's weights are read as they are (no copy); under LoRA the
  frozen base's projections that read the same input are fused once (q/k/v, gate/up) and the adapters
  run inside the step from copies of their factors refreshed whenever the trainer's weights changed.
* **On the device:** sampling, logprobs, end-of-reply detection and admissible-only decoding. The
  replies' trie becomes two tables over the columns any node allows: per node an allowed mask and a
  next-node index; the LM head computes those columns alone where no row can leave the trie. The
  host reads a turn's tokens, logprobs and nodes once, after its last step (and on a CPU the "all
  rows ended" flag after each step, which costs nothing there; on CUDA every 8 steps).
* **CUDA graphs** (CUDA only): the step captured at batch sizes 1, 2, 4, ... 256 (a call pads its rows
  to the next size); a capture that fails logs one line and the step runs eagerly.

Bad input gets one line: a prompt longer than the model's positions (ConfigError); a pool that would
exceed `max_pool_gib` evicts the least recently used idle episodes (they prefill again at their next
turn) and, if the call alone does not fit, decodes it in parts that do, one after another (it waits);
a branch whose parent's slot was evicted before its first call prefills its whole prompt; more rows
than the largest captured size decode eagerly. Each says so once in the log.
"""

from __future__ import annotations

import sys
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.nn.functional as F

from agentgym.errors import ConfigError
from agentgym.policies.base import Completion, SamplingParams
from agentgym.policies.frozen_states import decoder_stack
from agentgym.policies.sampling import sampling_probs

SUPPORTED = ("llama", "qwen2", "mistral")  # decoder layers the step is written for (RMSNorm, RoPE, GQA, SwiGLU)
GRAPH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
FREE = 0  # the trie node of a row that decodes freely (no trie, or past a leaf that is not an end of reply)


def _base(model: torch.nn.Module) -> torch.nn.Module:
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def check_supported(model: torch.nn.Module) -> None:
    """One line unless the step can run this model's decoder."""
    config = _base(model).config
    kind = getattr(config, "model_type", "?")
    if kind not in SUPPORTED or getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", False):
        raise ConfigError(f"policy.engine=pool runs {', '.join(SUPPORTED)} decoders (without sliding windows); this "
                          f"model is {kind}: use policy.engine=hf")


# --- weights ------------------------------------------------------------------------------------------

@dataclass
class _Linears:
    """Linear layers that read the same input, computed together: `parts` (weight, bias) pairs, either
    one fused copy of a frozen base or the modules' own tensors (trained weights: no copy, so the step
    always reads the trainer's newest values); `lora`: (A [sum r, in], B [sum out, sum r] block-diagonal
    with each adapter's scaling folded in), copies refreshed by `StepWeights.refresh`."""

    modules: list
    parts: list[tuple[torch.Tensor, torch.Tensor | None]]
    lora: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        xin = x.to(self.parts[0][0].dtype)
        # a bias beside a bf16 weight (bf16_base keeps it fp32) is cast as that base's own forward casts it
        outs = [F.linear(xin, w, b if b is None or b.dtype == w.dtype else b.to(w.dtype)) for w, b in self.parts]
        out = outs[0] if len(outs) == 1 else torch.cat(outs, -1)
        if self.lora is not None:  # peft's order: B(A(x)) * scaling, each in the factors' dtype
            a, b, scaling = self.lora
            out = out + (F.linear(F.linear(x.to(a.dtype), a), b) * scaling).to(out.dtype)
        return out


def _adapter(module) -> tuple | None:
    """(A [r, in], B [out, r], scaling) of a PEFT LoRA linear's active adapter, or None."""
    if not hasattr(module, "lora_A") or getattr(module, "disable_adapters", False) or getattr(module, "merged", False):
        return None
    active = [a for a in getattr(module, "active_adapters", []) if a in module.lora_A]
    if not active:
        return None
    if len(active) > 1 or getattr(module, "use_dora", {}).get(active[0], False):
        raise ConfigError("policy.engine=pool runs one plain LoRA adapter per layer (no DoRA, no adapter mixes): "
                          "use policy.engine=hf")
    name = active[0]
    return module.lora_A[name].weight, module.lora_B[name].weight, float(module.scaling[name])


def _plain(module) -> torch.nn.Linear:
    return module.base_layer if hasattr(module, "base_layer") else module


def _group(modules: list, lora_dtype: torch.dtype | None) -> _Linears:
    plains = [_plain(m) for m in modules]
    frozen = all(not p.weight.requires_grad and (p.bias is None or not p.bias.requires_grad) for p in plains)
    if frozen and len(plains) > 1:  # a frozen base never changes: fused once
        biases = [p.bias for p in plains]
        bias = None if all(b is None for b in biases) else torch.cat(
            [b.detach() if b is not None else p.weight.new_zeros(p.out_features) for b, p in zip(biases, plains)])
        parts = [(torch.cat([p.weight.detach() for p in plains]), bias)]
    else:
        parts = [(p.weight, p.bias) for p in plains]
    group = _Linears(modules, parts)
    adapters = [_adapter(m) for m in modules]
    if any(a is not None for a in adapters):
        group.lora = _lora_copy(plains, adapters, lora_dtype)
    return group


def _lora_copy(plains: list, adapters: list, dtype: torch.dtype | None) -> tuple[torch.Tensor, ...]:
    ranks = [0 if a is None else a[0].shape[0] for a in adapters]
    outs = [p.out_features for p in plains]
    first = next(a for a in adapters if a is not None)[0]
    dtype = dtype or first.dtype
    a_cat = first.new_zeros((sum(ranks), plains[0].in_features), dtype=dtype)
    b_diag = first.new_zeros((sum(outs), sum(ranks)), dtype=dtype)
    scaling = first.new_zeros(sum(outs), dtype=dtype)
    r0 = o0 = 0
    with torch.no_grad():
        for adapter, r, o in zip(adapters, ranks, outs):
            if adapter is not None:
                a, b, scale = adapter
                a_cat[r0:r0 + r] = a.detach().to(dtype)
                b_diag[o0:o0 + o, r0:r0 + r] = b.detach().to(dtype)
                scaling[o0:o0 + o] = scale
            r0, o0 = r0 + r, o0 + o
    return a_cat, b_diag, scaling


@dataclass
class _Layer:
    input_norm: Callable
    post_norm: Callable
    qkv: _Linears
    o: _Linears
    gate_up: _Linears
    down: _Linears
    act: Callable
    splits: tuple[int, int, int]


class StepWeights:
    """The decoder as the step reads it, built from a (PEFT) HF causal LM. `refresh()` re-reads the LoRA
    factors (after an update); the base weights are the model's own or, frozen, fused once."""

    def __init__(self, model: torch.nn.Module, lora_dtype: torch.dtype | None = None):
        check_supported(model)
        base = _base(model)
        decoder = decoder_stack(model)
        config = base.config
        self.model = model
        self.embed = decoder.embed_tokens
        self.norm = decoder.norm
        self.rotary = decoder.rotary_emb
        self.head = base.get_output_embeddings()
        self.heads = config.num_attention_heads
        self.kv_heads = getattr(config, "num_key_value_heads", None) or self.heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        self.scaling = self.head_dim ** -0.5
        self.max_positions = int(getattr(config, "max_position_embeddings", 1 << 20))
        attention = decoder.layers[0].self_attn
        self.apply_rope = sys.modules[type(attention).__module__].apply_rotary_pos_emb
        self.lora_dtype = lora_dtype
        self.layers: list[_Layer] = []
        for layer in decoder.layers:
            attn, mlp = layer.self_attn, layer.mlp
            q, k = self.heads * self.head_dim, self.kv_heads * self.head_dim
            self.layers.append(_Layer(
                layer.input_layernorm, layer.post_attention_layernorm,
                _group([attn.q_proj, attn.k_proj, attn.v_proj], lora_dtype), _group([attn.o_proj], lora_dtype),
                _group([mlp.gate_proj, mlp.up_proj], lora_dtype), _group([mlp.down_proj], lora_dtype),
                mlp.act_fn, (q, k, k)))

    def refresh(self) -> None:
        """Copy the adapters' factors again, into the same tensors (a captured CUDA graph reads them there)."""
        for layer in self.layers:
            for group in (layer.qkv, layer.o, layer.gate_up, layer.down):
                if group.lora is not None:
                    plains = [_plain(m) for m in group.modules]
                    fresh = _lora_copy(plains, [_adapter(m) for m in group.modules], self.lora_dtype)
                    for mine, new in zip(group.lora, fresh):
                        mine.copy_(new)

    @property
    def device(self) -> torch.device:
        return self.head.weight.device

    def logits(self, hidden: torch.Tensor, columns: torch.Tensor | None) -> torch.Tensor:
        """The LM head on final hidden states [rows, hidden] in fp32, at `columns` alone (or all), as
        the model computes it (bf16_base.exact_head's fp32 head, or the head in the model's dtype)."""
        weight = self.head.weight if columns is None else self.head.weight[columns]
        bias = getattr(self.head, "bias", None)
        bias = None if bias is None or columns is None else bias[columns]
        with torch.autocast(hidden.device.type, enabled=False):
            return F.linear(hidden.to(weight.dtype), weight, bias).float()


# --- the KV pool ---------------------------------------------------------------------------------------

@dataclass
class _Slot:
    ids: list[int] = field(default_factory=list)  # the tokens whose keys and values the slot holds
    version: int = -1  # the weights' version they were computed with
    states: torch.Tensor | None = None  # [len(ids), hidden] entering the lowest adapted layer (frozen states)


class KVPool:
    """Keys and values [layers, slots, kv heads, length + 1, dim] (the last position a scratch column),
    slots handed out per cache key and kept in least-recently-used order."""

    def __init__(self, layers: int, kv_heads: int, head_dim: int, dtype: torch.dtype, device: torch.device,
                 max_bytes: int):
        self.shape = (layers, kv_heads, head_dim)
        self.dtype, self.device, self.max_bytes = dtype, device, max_bytes
        self.keys = self.values = None
        self.slots, self.length = 0, 0
        self.owner: dict[str, int] = {}  # cache key -> slot
        self.meta: dict[int, _Slot] = {}
        self.used: OrderedDict[str, None] = OrderedDict()  # cache keys, least recently used first
        self.grown = 0  # reallocations (each copies the pool once)
        self.evicted = 0

    def bytes_for(self, slots: int, length: int) -> int:
        layers, kv_heads, dim = self.shape
        return 2 * layers * slots * kv_heads * (length + 1) * dim * torch.finfo(self.dtype).bits // 8

    def ensure(self, slots: int, length: int) -> None:
        """Room for `slots` slots of `length` positions: grown by doubling (within the budget), the
        contents kept (one copy of the pool, counted in `grown`)."""
        if slots <= self.slots and length <= self.length:
            return
        new_slots = max(slots, 2 * self.slots if slots > self.slots else self.slots)
        new_length = max(length, 2 * self.length if length > self.length else self.length)
        while self.bytes_for(new_slots, new_length) > self.max_bytes and new_slots > max(slots, self.slots):
            new_slots = max(slots, self.slots, new_slots // 2)
        while self.bytes_for(new_slots, new_length) > self.max_bytes and new_length > max(length, self.length):
            new_length = max(length, self.length, new_length // 2)
        layers, kv_heads, dim = self.shape
        shape = (layers, new_slots, kv_heads, new_length + 1, dim)
        keys = torch.zeros(shape, dtype=self.dtype, device=self.device)
        values = torch.zeros(shape, dtype=self.dtype, device=self.device)
        if self.keys is not None:
            keys[:, :self.slots, :, :self.length] = self.keys[:, :, :, :self.length]
            values[:, :self.slots, :, :self.length] = self.values[:, :, :, :self.length]
            self.grown += 1
        self.keys, self.values, self.slots, self.length = keys, values, new_slots, new_length

    def slot_of(self, key: str) -> int | None:
        slot = self.owner.get(key)
        if slot is not None:
            self.used.move_to_end(key)
        return slot

    def take(self, key: str, busy: set[int]) -> int | None:
        """A free slot for `key` (the lowest, so a call's rows stay close), or None when every slot is taken."""
        taken = set(self.owner.values()) | busy
        free = next((s for s in range(self.slots) if s not in taken), None)
        if free is not None:
            self.owner[key] = free
            self.used[key] = None
            self.meta[free] = _Slot()
        return free

    def evict(self, keep: set[str], count: int) -> int:
        """Free up to `count` slots of the least recently used keys not in `keep`; how many were freed."""
        freed = 0
        for key in list(self.used):
            if freed == count:
                break
            if key not in keep:
                self.release(key)
                freed += 1
        self.evicted += freed
        return freed

    def release(self, key: str) -> None:
        slot = self.owner.pop(key, None)
        self.used.pop(key, None)
        if slot is not None:
            self.meta.pop(slot, None)

    def clear(self) -> None:
        self.owner.clear()
        self.used.clear()
        self.meta.clear()


# --- the replies' trie as tensors -------------------------------------------------------------------

@dataclass
class TrieTables:
    """Tries of a call's rows flattened: node 0 is FREE (every token, back to FREE); `allowed` [nodes,
    columns] and `next` [nodes, columns] over `columns` (the sorted ids any node allows); `root` per
    row; `children` per node the sorted ids it allows (None for FREE), for the Completion;
    `head_columns`: whether no row can reach FREE before its reply ends, so the LM head need only
    compute `columns`."""

    columns: torch.Tensor
    allowed: torch.Tensor
    next: torch.Tensor
    root: torch.Tensor
    children: list
    head_columns: bool
    column_of: torch.Tensor | None = None  # [vocab] -> column or -1 (when the head computes every id)


def build_tries(tries: list[dict | None], eos: set[int], vocab: int, device) -> TrieTables | None:
    """`tries`: per row a trie dict (token -> subtrie, as hf._reply_trie builds) or None (free). None
    when every row decodes freely. Identical tries (a group's rows) share their nodes."""
    if all(t is None for t in tries):
        return None
    nodes: list[dict] = [{}]  # node -> {token: child node}
    children: list = [None]
    seen: dict[int, int] = {}
    ends_cleanly = all(t is not None for t in tries)

    def add(trie: dict) -> int:
        nonlocal ends_cleanly
        index = len(nodes)
        nodes.append({})
        children.append(sorted(trie))
        for token, sub in trie.items():
            if sub:
                nodes[index][token] = add(sub)
            else:  # a leaf: past it the row decodes freely, unless the reply ended there
                nodes[index][token] = FREE
                ends_cleanly &= token in eos
        return index

    roots = []
    for trie in tries:
        if trie is None:
            roots.append(FREE)
            continue
        if id(trie) not in seen:
            seen[id(trie)] = add(trie)
        roots.append(seen[id(trie)])
    columns = sorted({t for node in nodes for t in node})
    where = {t: c for c, t in enumerate(columns)}
    allowed = torch.zeros((len(nodes), len(columns)), dtype=torch.bool)
    nxt = torch.zeros((len(nodes), len(columns)), dtype=torch.long)
    allowed[FREE] = True
    for n, node in enumerate(nodes):
        for token, child in node.items():
            allowed[n, where[token]] = True
            nxt[n, where[token]] = child
    tables = TrieTables(torch.tensor(columns, dtype=torch.long), allowed, nxt, torch.tensor(roots, dtype=torch.long),
                        children, ends_cleanly)
    if not ends_cleanly:
        column_of = torch.full((vocab,), -1, dtype=torch.long)
        column_of[tables.columns] = torch.arange(len(columns))
        tables.column_of = column_of
    for name in ("columns", "allowed", "next", "root", "column_of"):
        value = getattr(tables, name)
        if value is not None:
            setattr(tables, name, value.to(device))
    return tables


def constrain(logits: torch.Tensor, node: torch.Tensor, tables: TrieTables) -> torch.Tensor:
    """`logits` [rows, columns or vocab] with every id the row's node does not allow at -inf."""
    allowed = tables.allowed[node]
    if not tables.head_columns:  # full-vocabulary logits: FREE rows allow every id, trie rows their columns
        full = (node == FREE)[:, None].expand_as(logits).clone()
        full[:, tables.columns] = allowed
        allowed = full
    return logits.masked_fill(~allowed, float("-inf"))


def advance(node: torch.Tensor, pick: torch.Tensor, token: torch.Tensor, tables: TrieTables) -> torch.Tensor:
    """Each row's node after the id it drew (`pick`: its column where the head computes columns alone)."""
    if tables.head_columns:
        return tables.next[node, pick]
    column = tables.column_of[token]
    return torch.where((column >= 0) & (node != FREE), tables.next[node, column.clamp(min=0)],
                       torch.zeros_like(node))


def pick_tokens(logits: torch.Tensor, sampling: SamplingParams, generator: torch.Generator | None) -> torch.Tensor:
    """A draw per row from HFPolicy._pick's distribution (greedy at temperature 0; temperature, top-k,
    top-p), on the device, by the inverse of the cumulative distribution: one uniform number per row
    rather than torch.multinomial's one per id (on a CPU 49k exponential draws a row: 36 of a 16-row
    decode step's 250 ms). The distribution is the same; the random stream is not HFPolicy's, so
    sampled (not greedy) replies differ from the eager path's for the same seed."""
    if sampling.temperature <= 0:
        return logits.argmax(-1)
    probs = sampling_probs(logits, sampling)
    cdf = probs.cumsum(-1)
    u = torch.rand((probs.shape[0], 1), generator=generator, device=probs.device, dtype=cdf.dtype) * cdf[:, -1:]
    # the first id whose cumulative mass exceeds u: an id of zero mass never is (its cdf equals the one before)
    return torch.searchsorted(cdf, u, right=True)[:, 0].clamp(max=probs.shape[-1] - 1)


# --- the engine ----------------------------------------------------------------------------------------

def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


@dataclass
class EngineStats:
    """What the engine did, for benchmarks and logs: seconds (wall, and this process's CPU) by phase."""

    prefill_s: float = 0.0
    decode_s: float = 0.0
    prefill_cpu_s: float = 0.0
    decode_cpu_s: float = 0.0
    decode_context: int = 0  # keys attended, summed over the call's rows and steps (the floor's attention)
    prefill_tokens: int = 0
    decode_steps: int = 0
    decode_rows: int = 0  # summed over steps (rows computed, the call's idle slots included)
    sampled_tokens: int = 0
    captures: int = 0  # CUDA graphs captured (a recapture after the pool grew counts again)
    eager_steps: int = 0

    def add(self, phase: str, start: tuple[float, float]) -> None:
        setattr(self, f"{phase}_s", getattr(self, f"{phase}_s") + time.perf_counter() - start[0])
        setattr(self, f"{phase}_cpu_s", getattr(self, f"{phase}_cpu_s") + time.process_time() - start[1])


class PoolEngine:
    """The decoding of one HFPolicy on a KV pool (module docstring). `generate_ids` takes HFPolicy's
    arguments and returns its Completions; `forget` drops episodes' slots."""

    def __init__(self, policy, max_pool_gib: float | None = None, graphs: bool | None = None,
                 log: Callable[[str], None] | None = None):
        self.policy = policy
        self.log = log or (lambda line: print(line, file=sys.stderr))
        self.weights = StepWeights(policy.model, self._lora_dtype())
        self.device = self.weights.device
        if max_pool_gib is None:
            max_pool_gib = 4.0 if self.device.type == "cpu" else 0.3 * torch.cuda.mem_get_info(self.device)[1] / 2**30
        layers = len(self.weights.layers)
        kv_dtype = self.weights.embed.weight.dtype
        self.pool = KVPool(layers, self.weights.kv_heads, self.weights.head_dim, kv_dtype, self.device,
                           int(max_pool_gib * 2**30))
        self.stats = EngineStats()
        self.graphs = self.device.type == "cuda" if graphs is None else graphs
        self._graphs: dict[tuple, _Graph] = {}  # (rows, pool slots, pool length) -> the captured step
        self._failed = False  # a capture failed: eager from then on
        # prefill's attention (many queries a row) in bf16 over a bf16 base, as the update's autocast runs it
        self.prefill_attention_dtype = self._lora_dtype() if self._lora_dtype() == torch.bfloat16 else None
        self._said: set[str] = set()
        self._version = self._weights_version()
        self.forks: dict[str, str] = {}  # a branch's cache key -> its parent's, until the branch's first call

    def _lora_dtype(self) -> torch.dtype | None:
        """The adapters' matmul dtype: their frozen base's (bf16 under keep_base_in_bf16, as autocast runs them)."""
        return next((m.base_layer.weight.dtype for m in self.policy.model.modules()
                     if hasattr(m, "base_layer") and hasattr(m, "lora_A")), None)

    def say_once(self, key: str, line: str) -> None:
        if key not in self._said:
            self._said.add(key)
            self.log(line)

    def _weights_version(self) -> int:
        return sum(int(p._version) for p in self.policy.model.parameters())

    def _graph_for(self, rows: int) -> "_Graph | None":
        """The captured step of the smallest size holding slots 0..rows-1, captured on first use; None (the
        eager step) where no size does or a capture failed, each said once."""
        size = next((n for n in GRAPH_SIZES if n >= rows and n <= self.pool.slots), None)
        if size is None:
            self.say_once("graph-size", f"policy.engine=pool: {rows} rows exceed the largest captured decode step "
                                        f"({min(GRAPH_SIZES[-1], self.pool.slots)} rows): they decode eagerly")
            return None
        key = (size, self.pool.slots, self.pool.length)  # a grown pool is a new tensor: capture again
        if key not in self._graphs:
            if self._failed:
                return None
            for old in [k for k in self._graphs if k[1:] != key[1:]]:
                del self._graphs[old]  # captured over the pool before it grew
            try:
                self._graphs[key] = _Graph(self, size)
                self.stats.captures += 1
                if self.device.type == "cuda":
                    self.log(f"policy.engine=pool: captured the decode step at {size} rows "
                             f"({self.stats.captures} captures so far)")
            except Exception as exc:  # noqa: BLE001 - any op the capture refuses: one line, then eager
                self._failed = True
                self.log(f"policy.engine=pool: capturing the decode step failed ({type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''}); decoding eagerly")
                return None
        return self._graphs[key]

    def rebuild(self) -> None:
        """The model's modules changed (bf16 base kept, weights replaced): read them again, drop the pool's caches."""
        self.weights = StepWeights(self.policy.model, self._lora_dtype())
        self.prefill_attention_dtype = self._lora_dtype() if self._lora_dtype() == torch.bfloat16 else None
        self._graphs.clear()
        self.forget()

    def sync(self) -> None:
        """Called before each call: new weights (an update) drop every cached context and refresh the
        LoRA factors' copies."""
        version = self._weights_version()
        if version != self._version:
            self._version = version
            self.weights.refresh()
            self.pool.clear()
            self.forks.clear()

    def forget(self, cache_keys: list[str] | None = None) -> None:
        """Drop these episodes' slots; None: all, and re-read the LoRA factors (weights were replaced in a
        way torch's version counters may not show, e.g. through `.data`)."""
        if cache_keys is None:
            self.pool.clear()
            self.forks.clear()
            self.weights.refresh()
            self._version = self._weights_version()
            return
        for key in cache_keys:
            self.pool.release(key)
            self.forks.pop(key, None)

    @torch.inference_mode()  # the pool's tensors are inference tensors
    def fork(self, parent_key: str, child_key: str) -> None:
        """`child_key` branches from `parent_key` (HFPolicy.fork): a slot of its own gets a copy of the
        parent's now, the pool grown for it within its budget (no episode is evicted for a fork). Where
        the budget is reached, the child's first call copies what the parent's slot shares with its
        prompt then (all of it for a growing conversation; a windowed parent that played on meanwhile
        has cut its slot to a shorter prefix)."""
        pool = self.pool
        source = pool.owner.get(parent_key)
        if source is None or pool.meta[source].version != self._version or pool.slot_of(child_key) is not None:
            return
        slot = pool.take(child_key, busy=set())
        if slot is None and pool.bytes_for(pool.slots + 1, pool.length) <= pool.max_bytes:
            pool.ensure(pool.slots + 1, pool.length)
            slot = pool.take(child_key, busy=set())
        if slot is None:
            self.forks[child_key] = parent_key
            return
        self._copy_slot(source, slot, len(pool.meta[source].ids))

    # --- one call --------------------------------------------------------------------------------
    @torch.inference_mode()
    def generate_ids(self, prompt_ids: list[list[int]], sampling: SamplingParams,
                     cache_keys: list[str] | None = None, tries: list[dict | None] | None = None) -> list[Completion]:
        if not prompt_ids:
            return []
        self.sync()
        longest = max(len(p) for p in prompt_ids) + sampling.max_new_tokens
        if longest > self.weights.max_positions:
            raise ConfigError(f"a prompt of {longest - sampling.max_new_tokens} tokens plus max_new_tokens="
                              f"{sampling.max_new_tokens} exceeds this model's {self.weights.max_positions} positions: "
                              "shorten the history (env.chat.history) or max_new_tokens")
        keys = list(cache_keys) if cache_keys is not None else [None] * len(prompt_ids)
        out: list[Completion | None] = [None] * len(prompt_ids)
        pending = list(range(len(prompt_ids)))
        while pending:
            part = self._admit(pending, keys, longest)
            for i, completion in zip(part, self._generate_part(part, prompt_ids, keys, sampling, tries)):
                out[i] = completion
            pending = [i for i in pending if i not in set(part)]
        return out  # type: ignore[return-value]

    def _admit(self, rows: list[int], keys: list, longest: int) -> list[int]:
        """The rows of `rows` that decode now, slots made for them: all of them, evicting idle episodes
        (least recently used first) where the pool's budget is reached; where even the call alone does
        not fit, as many as fit (the others wait for the next part)."""
        pool = self.pool
        in_call = {keys[i] for i in rows if keys[i] is not None}
        owned = [i for i in rows if keys[i] is not None and pool.slot_of(keys[i]) is not None]
        fresh = len(rows) - len(owned)
        length = max(longest, pool.length)
        cap = pool.max_bytes // pool.bytes_for(1, length)
        if cap < 1:
            raise ConfigError(f"policy.engine=pool: a row of {longest} positions does not fit the KV pool's budget of "
                              f"{pool.max_bytes / 2**30:.2f} GiB: raise max_pool_gib or shorten the prompts")
        if len(pool.owner) + fresh > cap:
            pool.evict(in_call, len(pool.owner) + fresh - cap)
            self.say_once("evict", f"policy.engine=pool: the KV pool's budget ({pool.max_bytes / 2**30:.1f} GiB) is "
                                   "reached: idle episodes' caches are evicted (least recently used first) and "
                                   "prefilled again at their next turn")
        part = rows
        if len(pool.owner) + fresh > cap:  # the call alone does not fit: a part of it now, the rest after
            budget = cap - len(pool.owner)
            part = [i for i in rows if i in owned or (budget := budget - 1) >= 0]
            self.say_once("wait", f"policy.engine=pool: {len(rows)} rows do not fit the KV pool's budget "
                                  f"({pool.max_bytes / 2**30:.1f} GiB): they decode in parts of at most {cap}, the "
                                  "others waiting")
        slots = len(pool.owner) + len(part) - len([i for i in part if i in owned])
        if self.graphs:  # as many slots as the captured size that holds them, where the budget allows
            size = next((n for n in GRAPH_SIZES if n >= slots), slots)
            slots = size if pool.bytes_for(size, length) <= pool.max_bytes else slots
        pool.ensure(slots, longest)
        return part

    def _generate_part(self, rows: list[int], prompt_ids: list, keys: list, sampling: SamplingParams,
                       tries: list | None) -> list[Completion]:
        pool, policy = self.pool, self.policy
        busy: set[int] = set()
        slots: list[int] = []
        temporary: list[str] = []
        forked: set[tuple] = set()  # prompts a branch's slot was forked for: identical ones copy its prefill
        for i in rows:
            key = keys[i] if keys[i] is not None else f"\x00row{i}"
            if keys[i] is None:
                temporary.append(key)
            slot = pool.slot_of(key)
            if slot is None:
                slot = pool.take(key, busy)
                if slot is None:  # _admit made room
                    raise RuntimeError("KV pool: no free slot after admission")
            parent = self.forks.pop(key, None)
            prompt = tuple(prompt_ids[i])
            if parent is not None and prompt not in forked and self._copy_from(parent, slot, prompt_ids[i]):
                forked.add(prompt)
            busy.add(slot)
            slots.append(slot)
        prompts = [prompt_ids[i] for i in rows]
        recording = policy.frozen_states is not None and policy.frozen_states.recording
        # no autocast: the linears run in their weights' dtype (a bf16 base in bf16), attention, norms and
        # the residual stream in fp32 (closer to the update's logprobs than bf16 attention: docs/engine_speed.md)
        start = _clock()
        lengths, last_hidden, prompt_states = self._prefill(slots, prompts, recording)
        self.stats.add("prefill", start)
        row_tries = [tries[i] for i in rows] if tries is not None else [None] * len(rows)
        start = _clock()
        tokens, logprobs, nodes, ended, reply_states, tables = self._decode(
            slots, lengths, last_hidden, sampling, row_tries, recording)
        self.stats.add("decode", start)
        completions = []
        for b, (i, slot) in enumerate(zip(rows, slots)):
            n = ended[b]
            response = tokens[:n, b].tolist()
            lps = logprobs[:n, b].tolist()
            finish = "stop" if n and response[-1] in policy.eos_ids else "length"
            allowed = None
            if tables is not None and row_tries[b] is not None:
                allowed = [tables.children[node] for node in nodes[:n, b].tolist()]
                if all(a is None for a in allowed):
                    allowed = None
            if policy.stop_strings and finish == "length" and n < sampling.max_new_tokens:
                finish = "stop"
            meta = pool.meta[slot]
            meta.ids = prompts[b] + response[:-1]
            meta.version = self._version
            if recording and prompt_states[b] is not None:
                states = prompt_states[b] if n <= 1 else torch.cat([prompt_states[b], reply_states[:n - 1, b]])
                meta.states = states
                policy.frozen_states.keep(meta.ids, states)
            completions.append(Completion(text=policy.tokenizer.decode(response, skip_special_tokens=True),
                                          prompt_ids=list(prompts[b]), response_ids=response, response_logprobs=lps,
                                          finish_reason=finish, response_allowed=allowed))
        for key in temporary:
            pool.release(key)
        return completions

    def _copy_from(self, parent_key: str, slot: int, ids: list[int]) -> bool:
        """A branch's first call, its fork left for then: copy the parent's keys and values over the
        tokens `ids` shares with the parent's slot (one left to prefill) into `slot`; whether anything
        was copied. Before this call's prefill, so a parent in the same call has not yet written past
        what it shares."""
        pool = self.pool
        source = pool.owner.get(parent_key)
        if source is None:
            self.say_once("fork-evicted", "policy.engine=pool: a branch's parent cache was evicted before the "
                                          "branch's first turn (the KV pool's budget): that branch prefills its "
                                          "whole prompt")
            return False
        meta = pool.meta[source]
        limit = min(len(meta.ids), len(ids) - 1) if meta.version == self._version else 0
        shared = 0
        while shared < limit and meta.ids[shared] == ids[shared]:
            shared += 1
        if shared:
            self._copy_slot(source, slot, shared)
        return shared > 0

    def _copy_slot(self, source: int, slot: int, length: int) -> None:
        """`slot` holds the first `length` tokens of `source` (keys, values, ids and frozen-layer states)."""
        pool = self.pool
        meta = pool.meta[source]
        pool.keys[:, slot, :, :length] = pool.keys[:, source, :, :length]
        pool.values[:, slot, :, :length] = pool.values[:, source, :, :length]
        pool.meta[slot] = _Slot(meta.ids[:length], meta.version, None if meta.states is None else meta.states[:length])

    # --- prefill -------------------------------------------------------------------------------
    def _prefill(self, slots: list[int], prompts: list[list[int]], recording: bool):
        """Write each row's new prompt tokens' keys and values into its slot; return the rows' lengths
        (tokens in the slot), the last prompt token's final hidden state per row, and per row the
        prompt's frozen-layer states (recording)."""
        pool, w = self.pool, self.weights
        policy = self.policy
        # how much of each slot's tokens the prompt starts with (kept, the rest cut in place)
        cached = []
        for slot, ids in zip(slots, prompts):
            meta = pool.meta[slot]
            shared = 0
            if meta.version == self._version:
                limit = min(len(meta.ids), len(ids) - 1)
                while shared < limit and meta.ids[shared] == ids[shared]:
                    shared += 1
            if recording and shared and (meta.states is None or meta.states.shape[0] < shared):
                shared = 0  # no states for the cached part: prefill it again so they are recorded
            cached.append(shared)
        # identical prompts prefill once (from the row with the longest cached prefix); the others copy
        first: dict[tuple, int] = {}
        for b, ids in enumerate(prompts):
            key = tuple(ids)
            if key not in first or cached[b] > cached[first[key]]:
                first[key] = b
        computing = sorted(set(first.values()))
        new = [prompts[b][cached[b]:] for b in computing]
        policy.last_prefill_tokens = [0] * len(prompts)
        for b, ids in zip(computing, new):
            policy.last_prefill_tokens[b] = len(ids)
        self.stats.prefill_tokens += sum(len(n) for n in new)
        device = self.device
        token_ids = torch.tensor([t for ids in new for t in ids], dtype=torch.long, device=device)
        row_of = torch.tensor([r for r, ids in enumerate(new) for _ in ids], dtype=torch.long, device=device)
        positions = torch.tensor([cached[b] + j for b, ids in zip(computing, new) for j in range(len(ids))],
                                 dtype=torch.long, device=device)
        slot_ids = torch.tensor([slots[b] for b in computing], dtype=torch.long, device=device)
        token_slots = slot_ids[row_of]
        total = [cached[b] + len(ids) for b, ids in zip(computing, new)]
        width_q, width_k = max(len(n) for n in new), max(total)
        query_index = torch.tensor([j for ids in new for j in range(len(ids))], dtype=torch.long, device=device)
        # attention mask [rows, 1, queries, keys]: query j of a row (at position cached + j) sees keys <= its position
        key_pos = torch.arange(width_k, device=device)
        query_pos = torch.tensor([[cached[b] + j for j in range(width_q)] for b in computing], device=device)
        valid_q = torch.arange(width_q, device=device)[None, :] < torch.tensor([len(n) for n in new], device=device)[:, None]
        mask = (key_pos[None, None, :] <= query_pos[:, :, None]) | ~valid_q[:, :, None]
        mask = mask[:, None]
        captured = None
        hidden = w.embed(token_ids)
        cos, sin = w.rotary(hidden[None], positions[None])
        lowest = policy.frozen_states.layer if recording else -1
        for index, layer in enumerate(w.layers):
            if index == lowest:
                captured = hidden
            hidden = self._prefill_layer(index, layer, hidden, cos, sin, token_slots, positions, slot_ids, row_of,
                                         query_index, width_q, width_k, mask)
        last = torch.tensor([sum(len(n) for n in new[:r + 1]) - 1 for r in range(len(new))], device=device)
        final = w.norm(hidden[last])
        # rows that copy an identical prompt's prefill
        source = {tuple(prompts[b]): b for b in computing}
        lengths = [len(ids) for ids in prompts]
        by_row = [final[computing.index(source[tuple(ids)])] for ids in prompts]
        for b, ids in enumerate(prompts):
            src = source[tuple(ids)]
            if src != b:
                pool.keys[:, slots[b], :, :len(ids)] = pool.keys[:, slots[src], :, :len(ids)]
                pool.values[:, slots[b], :, :len(ids)] = pool.values[:, slots[src], :, :len(ids)]
        prompt_states: list = [None] * len(prompts)
        if recording:
            offsets = [0]
            for ids in new:
                offsets.append(offsets[-1] + len(ids))
            for r, b in enumerate(computing):
                part = captured[offsets[r]:offsets[r + 1]]
                meta = pool.meta[slots[b]]
                prompt_states[b] = torch.cat([meta.states[:cached[b]], part]) if cached[b] else part
            for b, ids in enumerate(prompts):
                prompt_states[b] = prompt_states[source[tuple(ids)]]
        return lengths, torch.stack(by_row), prompt_states

    def _prefill_layer(self, index: int, layer: _Layer, hidden, cos, sin, token_slots, positions, slot_ids, row_of,
                       query_index, width_q: int, width_k: int, mask):
        w, pool = self.weights, self.pool
        residual = hidden
        x = layer.input_norm(hidden)
        q, k, v = layer.qkv(x).split(layer.splits, -1)
        tokens = hidden.shape[0]
        q = q.view(1, tokens, w.heads, w.head_dim).transpose(1, 2)
        k = k.view(1, tokens, w.kv_heads, w.head_dim).transpose(1, 2)
        q, k = w.apply_rope(q, k, cos, sin)
        q, k = q[0].transpose(0, 1), k[0].transpose(0, 1)  # [tokens, heads, dim]
        v = v.view(tokens, w.kv_heads, w.head_dim)
        pool.keys[index, token_slots, :, positions] = k.to(pool.dtype)
        pool.values[index, token_slots, :, positions] = v.to(pool.dtype)
        rows = slot_ids.shape[0]
        dtype = self.prefill_attention_dtype or q.dtype
        padded = q.new_zeros((rows, width_q, w.heads, w.head_dim), dtype=dtype)
        padded[row_of, query_index] = q.to(dtype)
        keys = pool.keys[index, slot_ids, :, :width_k].to(dtype)
        values = pool.values[index, slot_ids, :, :width_k].to(dtype)
        groups = w.heads // w.kv_heads
        if groups > 1:
            keys, values = keys.repeat_interleave(groups, 1), values.repeat_interleave(groups, 1)
        out = F.scaled_dot_product_attention(padded.transpose(1, 2), keys, values, attn_mask=mask, scale=w.scaling)
        out = out.transpose(1, 2)[row_of, query_index].reshape(tokens, w.heads * w.head_dim).to(q.dtype)
        hidden = residual + layer.o(out)
        residual = hidden
        gate, up = layer.gate_up(layer.post_norm(hidden)).chunk(2, -1)
        return residual + layer.down(layer.act(gate) * up)

    # --- decode ------------------------------------------------------------------------------------
    def _decode(self, slots: list[int], lengths: list[int], last_hidden: torch.Tensor, sampling: SamplingParams,
                row_tries: list, recording: bool):
        """Sample up to max_new_tokens per row, all rows of the call in one batch: the span of slots
        from the lowest to the highest of the call (slots between that belong to other episodes
        compute along and are discarded). Returns tokens, logprobs and nodes [steps, rows] on the host,
        each row's reply length, the fed reply tokens' frozen-layer states and the trie tables."""
        policy, pool, w = self.policy, self.pool, self.weights
        device = self.device
        rows = len(slots)
        graph = self._graph_for(max(slots) + 1) if self.graphs and not recording and not policy.stop_strings else None
        low, high = (0, graph.rows) if graph is not None else (min(slots), max(slots) + 1)
        span = high - low
        row_index = torch.tensor([s - low for s in slots], dtype=torch.long, device=device)
        in_call = torch.zeros(span, dtype=torch.bool, device=device)
        in_call[row_index] = True
        # per span row: the position its next token's keys go to (rows outside the call: the scratch column)
        position = torch.full((span,), pool.length, dtype=torch.long, device=device)
        position[row_index] = torch.tensor(lengths, dtype=torch.long, device=device)
        tables = build_tries([t if t else None for t in row_tries], policy.eos_ids, w.head.weight.shape[0], device)
        columns = tables.columns if tables is not None and tables.head_columns else None
        node = torch.zeros(span, dtype=torch.long, device=device)
        if tables is not None:
            node[row_index] = tables.root
        eos = torch.zeros(w.head.weight.shape[0], dtype=torch.bool, device=device)
        eos[torch.tensor(sorted(policy.eos_ids), dtype=torch.long, device=device)] = True
        generator = policy._generator if policy._generator.device.type == device.type else None
        steps = sampling.max_new_tokens
        out_tokens = torch.zeros((steps, rows), dtype=torch.long, device=device)
        out_logprobs = torch.zeros((steps, rows), dtype=torch.float32, device=device)
        out_nodes = torch.zeros((steps, rows), dtype=torch.long, device=device)
        states = [] if recording else None
        done = torch.zeros(rows, dtype=torch.bool, device=device)
        ended = torch.full((rows,), steps, dtype=torch.long, device=device)
        hidden = last_hidden
        check_every = 1 if device.type == "cpu" else 8
        keys_view = pool.keys[:, low:high]
        values_view = pool.values[:, low:high]
        step = 0
        while True:
            logits = w.logits(hidden, columns)
            node_rows = node[row_index]
            if tables is not None:
                logits = constrain(logits, node_rows, tables)
            pick = pick_tokens(logits, sampling, generator)
            logprob = torch.log_softmax(logits, -1).gather(-1, pick[:, None])[:, 0]
            token = columns[pick] if columns is not None else pick
            out_tokens[step], out_logprobs[step], out_nodes[step] = token, logprob, node_rows
            stop = eos[token]
            if policy.stop_strings:
                stop = stop | self._stop_strings(out_tokens[:step + 1], device)
            newly = stop & ~done
            ended = torch.where(newly, torch.full_like(ended, step + 1), ended)
            done = done | stop
            step += 1
            if step == steps or ((step % check_every == 0 or step == steps) and bool(done.all())):
                break
            if tables is not None:
                node[row_index] = advance(node_rows, pick, token, tables)
            feed = torch.zeros(span, dtype=torch.long, device=device)
            feed[row_index] = token
            if graph is not None:
                hidden = graph.run(feed, position)[row_index]
            else:
                hidden_span, captured = self._step(feed, position, keys_view, values_view, recording)
                hidden = hidden_span[row_index]
                if recording:
                    states.append(captured[row_index])
                self.stats.eager_steps += 1
            position = torch.where(in_call, position + 1, position)
            self.stats.decode_rows += span
        fed = step - 1  # decode steps run (the last sampled token is never fed)
        self.stats.decode_steps += fed
        self.stats.decode_context += fed * sum(lengths) + rows * fed * (fed + 1) // 2
        self.stats.sampled_tokens += int(ended.sum())
        reply_states = torch.stack(states) if states else None
        return out_tokens[:step].cpu(), out_logprobs[:step].cpu(), out_nodes[:step].cpu(), ended.tolist(), \
            reply_states, tables

    def _stop_strings(self, tokens: torch.Tensor, device) -> torch.Tensor:
        """Rows whose last tokens (up to 8) decode to a text holding a stop string (read on the host)."""
        tail = tokens[-8:].T.tolist()
        decode = self.policy.tokenizer.decode
        hits = [any(s in decode(row) for s in self.policy.stop_strings) for row in tail]
        return torch.tensor(hits, dtype=torch.bool, device=device)

    def _step(self, token: torch.Tensor, position: torch.Tensor, keys_view, values_view, recording: bool,
              whole_pool: bool = False):
        """One decode step of the span's rows: each row's token at its position, its keys and values
        written into its slot; returns the final hidden states [span, hidden] (and the frozen layer's input).
        Attention reads the keys up to the furthest row's position (read on the host), or, for a CUDA
        graph (`whole_pool`: no host read), every position of the pool, the others masked."""
        w = self.weights
        hidden = w.embed(token)
        cos, sin = w.rotary(hidden[:, None], position[:, None])
        span = token.shape[0]
        length = keys_view.shape[-2] if whole_pool else int(position[position < self.pool.length].max()) + 1
        visible = torch.arange(length, device=token.device)[None, :] <= position[:, None]  # [span, length]
        rows = torch.arange(span, device=token.device)
        lowest = self.policy.frozen_states.layer if recording else -1
        captured = None
        for index, layer in enumerate(w.layers):
            if index == lowest:
                captured = hidden
            hidden = self._decode_layer(layer, hidden, cos, sin, keys_view[index], values_view[index], rows, position,
                                        length, visible)
        return w.norm(hidden), captured

    def _decode_layer(self, layer: _Layer, hidden, cos, sin, keys, values, rows, position, length: int, visible):
        w = self.weights
        span = hidden.shape[0]
        residual = hidden
        q, k, v = layer.qkv(layer.input_norm(hidden)).split(layer.splits, -1)
        q = q.view(span, 1, w.heads, w.head_dim).transpose(1, 2)
        k = k.view(span, 1, w.kv_heads, w.head_dim).transpose(1, 2)
        q, k = w.apply_rope(q, k, cos, sin)
        keys[rows, :, position] = k[:, :, 0].to(keys.dtype)
        values[rows, :, position] = v.view(span, w.kv_heads, w.head_dim).to(values.dtype)
        groups = w.heads // w.kv_heads
        query = q.float().reshape(span, w.kv_heads, groups, w.head_dim)
        scores = torch.matmul(query, keys[:, :, :length].float().transpose(-1, -2)) * w.scaling  # [span, kvh, g, len]
        scores = scores.masked_fill(~visible[:, None, None, :], float("-inf"))
        out = torch.matmul(torch.softmax(scores, -1), values[:, :, :length].float())
        out = out.reshape(span, w.heads * w.head_dim).to(q.dtype)
        hidden = residual + layer.o(out)
        residual = hidden
        gate, up = layer.gate_up(layer.post_norm(hidden)).chunk(2, -1)
        return residual + layer.down(layer.act(gate) * up)


class _Graph:
    """The decode step of `rows` rows (slots 0..rows-1) over static inputs: captured as a CUDA graph on a
    GPU; on a CPU (graphs=True, for tests) the same fixed-size step run eagerly."""

    def __init__(self, engine: PoolEngine, rows: int):
        pool, device = engine.pool, engine.device
        self.rows = rows
        self.token = torch.zeros(rows, dtype=torch.long, device=device)
        self.position = torch.full((rows,), pool.length, dtype=torch.long, device=device)  # the scratch column
        keys, values = pool.keys[:, :rows], pool.values[:, :rows]
        self.step = lambda: engine._step(self.token, self.position, keys, values, False, whole_pool=True)[0]
        self.graph = None
        if device.type != "cuda":
            self.step()  # what the capture's warm-up runs: an op that fails, fails here
            return
        stream = torch.cuda.Stream(device)
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):  # warm-up (kernel selection, allocator) off the capture
            for _ in range(2):
                self.step()
        torch.cuda.current_stream(device).wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.hidden = self.step()

    def run(self, token: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        self.token.copy_(token)
        self.position.copy_(position)
        if self.graph is None:
            return self.step()
        self.graph.replay()
        return self.hidden


def pool_rollout_engine(trainer_policy, _model_path: str, settings) -> Any:
    """`policy.engine=pool`: the trainer's HFPolicy, decoding on a PoolEngine (it generates with the very
    model it trains, as "hf" does)."""
    trainer_policy.use_pool_engine()
    return trainer_policy
