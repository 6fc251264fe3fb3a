"""Shared-prefix forward passes for the update: a prompt prefix common to many samples is computed once.

In an agent's update most tokens are prompt (95% in the main job), and prompts repeat: every sample
of a task starts with the same template and instruction, and a group's episodes meet the same
states (all of them at their first turn). A micro-batch is computed in three levels, each one
batched forward with the levels above it as its KV cache:

    level 0  root        the prefix every prompt of the minibatch shares (a system prompt), once per
                         minibatch (`SharedRoot`): its keys and values are leaves every micro-batch
                         reads, and their summed gradient goes back through its forward once
    level 1  stems       the longest prefix shared by a cluster of prompts, once per cluster
    level 2  prompts     the rest of each distinct prompt, once per distinct prompt
    level 3  replies     the rest of each sample (its response; in full mode the episode after its
                         first prompt), once per sample

Gradients flow through the cache (its keys and values are ordinary tensors gathered by index), so
the loss and its gradient are those of the plain forward up to float summation order
(tests/trainers/test_shared_prefix.py: gradients equal within 1e-5). It pays where prompts share a
long prefix: with a 200-token system prompt before the main job's samples the update's CPU halves
(23.6 -> 11.3 s). The main job's own prompts (85 tokens, no system prompt) differ after a short
stem, and padding three levels costs more than it saves, so `plan_micro_batches` keeps the plain
pass there.

`plan_levels` is pure Python (which tokens go where); `shared_prefix_logprobs` runs the model and
returns exactly what `trainers.ppo.token_logprobs` returns for the right-padded batch of the same
samples, so the loss code is the same for both.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Sequence

import torch

from agentgym.policies.frozen_states import decoder_stack
from agentgym.trainers.samples import TokenSequence
from agentgym.trainers.ppo import head_is_linear


@dataclass
class LevelPlan:
    """One level: `rows` token lists (right-padded when run), each row's parent row in the level
    above (-1 at level 1) and, per token, the position of that token in the samples using it."""

    rows: list[list[int]]
    parents: list[int]
    starts: list[int]  # position (in its samples) of each row's first token = its row's past length


@dataclass
class PrefixPlan:
    levels: list[LevelPlan]
    # per sample, per position p: (level, row, column) of the node that computes token p
    nodes: list[list[tuple[int, int, int]]]
    root: int = 0  # > 0: levels[0] is the minibatch's shared root of this many tokens (computed apart)

    def _own_levels(self) -> list[LevelPlan]:
        """The levels this micro-batch's pass computes (the root is the minibatch's, computed once)."""
        return self.levels[1:] if self.root else self.levels

    def tokens(self) -> int:
        return sum(len(r) for level in self._own_levels() for r in level.rows)

    def padded_tokens(self) -> int:
        """What the level-wise passes compute, padding included (the shared root not counted)."""
        return sum(len(level.rows) * max((len(r) for r in level.rows), default=0) for level in self._own_levels())

    @property
    def usable(self) -> bool:
        """Every row has a token (a one-token prompt leaves an empty stem, whose row would attend
        to nothing): otherwise the caller runs the plain forward."""
        return all(row for level in self.levels for row in level.rows)


def _prompt_length(seq: TokenSequence) -> int:
    """Tokens before the first response token (the first step's prompt)."""
    if seq.value_positions:
        return seq.value_positions[0] + 1
    first_loss = next((p for p, m in enumerate(seq.loss_mask) if m), len(seq))
    return max(first_loss, 1)


def _common_length(a: Sequence[int], b: Sequence[int], limit: int) -> int:
    n = 0
    for x, y in zip(a, b):
        if n >= limit or x != y:
            break
        n += 1
    return min(n, limit)


def shared_root_length(sequences: Sequence[TokenSequence]) -> int:
    """The prompt prefix all `sequences` share (their system prompt and template), capped so that
    every prompt keeps two tokens past it (its stem and rest rows are never empty)."""
    prompts = [s.input_ids[:_prompt_length(s)] for s in sequences]
    if not prompts:
        return 0
    n = min(len(p) for p in prompts) - 2
    for p in prompts[1:]:
        n = _common_length(prompts[0], p, n)
    return max(n, 0)


def plan_levels(sequences: Sequence[TokenSequence], root: int = 0) -> PrefixPlan:
    """Clusters of prompts with a long common prefix (sorted neighbours, joined while sharing
    saves tokens), their stems, the distinct prompt rests, and each sample's reply. root > 0: the
    first `root` tokens (shared by every prompt, `shared_root_length`) are a level of their own,
    which the minibatch computes once (`SharedRoot`); the stems start after it."""
    prompts = [list(s.input_ids[:_prompt_length(s)]) for s in sequences]
    if root and any(p[:root] != prompts[0][:root] or len(p) < root + 2 for p in prompts):
        raise ValueError(f"plan_levels: not every prompt shares the first {root} tokens with two more after them")
    order = sorted(range(len(sequences)), key=lambda i: prompts[i])
    clusters: list[list[int]] = []
    stem_lengths: list[int] = []
    for i in order:
        p = prompts[i]
        if clusters:
            members, stem = clusters[-1], stem_lengths[-1]
            # a stem keeps at least one token in every prompt's rest (that token is where the
            # first response token is predicted from, in level 2)
            shared = _common_length(prompts[members[0]], p, min(stem, len(p) - 1))
            # joining: the cluster's stem shrinks to `shared`; worth it when the tokens saved by
            # sharing with one more prompt outweigh what the members lose (the root is shared anyway)
            if len(members) * (shared - root) >= (len(members) - 1) * (stem - root) and shared > root:
                members.append(i)
                stem_lengths[-1] = shared
                continue
        clusters.append([i])
        stem_lengths.append(len(p) - 1)

    stems = LevelPlan([], [], [])
    rests = LevelPlan([], [], [])
    replies = LevelPlan([], [], [])
    nodes: list[list[tuple[int, int, int]]] = [[] for _ in sequences]
    seen_replies: dict[tuple, int] = {}
    up = 1 if root else 0  # the stems' level index (after the root's)
    for members, stem in zip(clusters, stem_lengths):
        c = len(stems.rows)
        stems.rows.append(prompts[members[0]][root:stem])
        stems.parents.append(0 if root else -1)
        stems.starts.append(root)
        distinct: dict[tuple[int, ...], int] = {}
        for i in members:
            rest = tuple(prompts[i][stem:])
            if rest not in distinct:
                distinct[rest] = len(rests.rows)
                rests.rows.append(list(rest))
                rests.parents.append(c)
                rests.starts.append(stem)
            r = distinct[rest]
            plen = len(prompts[i])
            reply = tuple(sequences[i].input_ids[plen:])
            # identical samples (same prompt, same reply: a confident policy's group) share a row
            if (r, reply) not in seen_replies:
                seen_replies[(r, reply)] = len(replies.rows)
                replies.rows.append(list(reply))
                replies.parents.append(r)
                replies.starts.append(plen)
            b = seen_replies[(r, reply)]
            nodes[i] = ([(0, 0, p) for p in range(root)] + [(up, c, p - root) for p in range(root, stem)]
                        + [(up + 1, r, p - stem) for p in range(stem, plen)]
                        + [(up + 2, b, p - plen) for p in range(plen, len(sequences[i]))])
    levels = [stems, rests, replies]
    if root:
        levels.insert(0, LevelPlan([prompts[0][:root]], [-1], [0]))
    return PrefixPlan(levels, nodes, root)


@contextmanager
def top_layers_only(model, first: int):
    """The model's forward runs decoder layers `first`.. alone, from `inputs_embeds` that are the hidden
    states entering layer `first` (policies/frozen_states.py); its caches hold those layers' keys and
    values only. The layers below are frozen (LoRA on the top layers), so skipping them loses nothing."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    decoder, config = decoder_stack(model), base.config
    every, count, types = decoder.layers, config.num_hidden_layers, getattr(config, "layer_types", None)
    top = list(every)[first:]
    indices = [layer.self_attn.layer_idx for layer in top]
    decoder.layers = torch.nn.ModuleList(top)
    for i, layer in enumerate(top):
        layer.self_attn.layer_idx = i  # the index into the cache, which now holds these layers alone
    config.num_hidden_layers = len(top)
    if types is not None:
        config.layer_types = types[first:]
    try:
        yield
    finally:
        decoder.layers = every
        for layer, i in zip(top, indices):
            layer.self_attn.layer_idx = i
        config.num_hidden_layers = count
        if types is not None:
            config.layer_types = types


def _level_states(plan: "PrefixPlan", depth: int, states: Sequence[torch.Tensor], width: int) -> torch.Tensor:
    """[rows, width, hidden]: the frozen layers' outputs for a level's tokens, read from the samples that
    use them (a sample's last token has none: no loss reads what follows it; it and pads stay 0)."""
    rows = len(plan.levels[depth].rows)
    out = states[0].new_zeros((rows, width, states[0].shape[-1]))
    for nodes, own in zip(plan.nodes, states):
        at = torch.tensor(nodes[:len(own)], dtype=torch.long).reshape(-1, 3)
        mine = torch.nonzero(at[:, 0] == depth).flatten()
        out[at[mine, 1], at[mine, 2]] = own[mine].to(out.device)
    return out


def _forward_level(model, level: LevelPlan, past, past_mask, pad_id: int, device, states: torch.Tensor | None = None):
    """One batched forward of a level's rows (right-padded) on top of their parents' cache; states: the
    rows' inputs to the first computed layer (under `top_layers_only`) instead of their token ids."""
    from transformers.cache_utils import DynamicCache

    width = max(max((len(r) for r in level.rows), default=1), 1)
    n = len(level.rows)
    ids = torch.full((n, width), pad_id, dtype=torch.long)
    mask = torch.zeros((n, width), dtype=torch.long)
    positions = torch.zeros((n, width), dtype=torch.long)
    for j, (row, start) in enumerate(zip(level.rows, level.starts)):
        ids[j, :len(row)] = torch.tensor(row, dtype=torch.long)
        mask[j, :len(row)] = 1
        # pads continue the row's positions: they are never attended to, only kept finite
        positions[j] = torch.arange(start, start + width)
    ids, mask, positions = ids.to(device), mask.to(device), positions.to(device)
    attention = mask if past_mask is None else torch.cat([past_mask, mask], dim=1)
    cache = None if past is None else DynamicCache(ddp_cache_data=past)
    inputs = dict(input_ids=None if states is not None else ids, inputs_embeds=states, attention_mask=attention,
                  position_ids=positions, past_key_values=cache, use_cache=True)
    decoder = decoder_stack(model)
    if decoder is not None:  # a level needs hidden states and keys/values, no logits: the LM head would
        out = decoder(**inputs)  # still run on each row's last position (a 49k-wide product per row)
        hidden = out.last_hidden_state  # after the final norm, as the causal LM's last hidden state
    else:
        out = model(**inputs, output_hidden_states=True, logits_to_keep=1)
        hidden = out.hidden_states[-1]
    past_width = 0 if past is None else past[0][0].shape[2]
    layers = [(layer.keys[:, :, past_width:], layer.values[:, :, past_width:]) for layer in out.past_key_values.layers]
    return hidden, layers, mask


def _gather(kv_levels, mask_levels, parents_chain: list[torch.Tensor]):
    """The cache of a level's rows: their ancestors' keys and values side by side, per layer."""
    layers = []
    for layer in range(len(kv_levels[0])):
        keys = torch.cat([kv[layer][0].index_select(0, index) for kv, index in zip(kv_levels, parents_chain)], dim=2)
        values = torch.cat([kv[layer][1].index_select(0, index) for kv, index in zip(kv_levels, parents_chain)], dim=2)
        layers.append((keys, values))
    mask = torch.cat([m.index_select(0, index) for m, index in zip(mask_levels, parents_chain)], dim=1)
    return layers, mask


class SharedRoot:
    """The minibatch's shared root (level 0 of its plans) computed once, before its micro-batches.

    Its keys and values are handed to every micro-batch's pass as leaves (detached copies that
    collect gradients); `backward()`, after the last micro-batch's, sends their summed gradient
    back through the root's own forward once. The gradient is the plain pass's sum (the chain rule
    split at the cache), computed with the root's tokens run once per minibatch instead of once
    per micro-batch. Its hidden states are detached: no loss or value reads a root position (the
    root ends two tokens before every prompt does) and the update uses it only without a value head."""

    def __init__(self, model, ids: Sequence[int], pad_id: int, device, split: bool = True,
                 states: torch.Tensor | None = None):
        """states: [len(ids), hidden], the frozen layers' outputs for the root (under `top_layers_only`)."""
        hidden, kv, self.mask = _forward_level(model, LevelPlan([list(ids)], [-1], [0]), None, None, pad_id, device,
                                               None if states is None else states[None].to(device))
        self.hidden = hidden.detach()
        if not split:  # one micro-batch's own root: its graph stays whole, no backward() needed
            self.kv, self._outputs, self._leaves = kv, [], []
            return
        self._outputs = [t for layer in kv for t in layer]
        # fp32 leaves: their gradient is a sum over every sample of the minibatch, whose group
        # advantages sum to about zero, so it is accumulated in fp32 rather than in the cache's bf16
        # (under ppo.matmul_dtype=bf16). Measured, this alone did not change the bf16 gradient's
        # distance to fp32 (docs/real_model_speed.md, "Fourth session")
        leaves = [t.detach().float().requires_grad_(t.requires_grad) for t in self._outputs]
        self.kv = [(leaves[2 * i], leaves[2 * i + 1]) for i in range(len(kv))]
        self._leaves = leaves

    def backward(self) -> None:
        pairs = [(out, leaf.grad) for out, leaf in zip(self._outputs, self._leaves) if leaf.grad is not None]
        if pairs:
            torch.autograd.backward([out for out, _ in pairs], [grad for _, grad in pairs])
        self._outputs = self._leaves = self.kv = []  # the graph is spent: free it


def shared_prefix_logprobs(model, sequences: Sequence[TokenSequence], pad_id: int, positions: torch.Tensor,
                           want_hidden: bool = False, want_entropy: bool = False, plan: PrefixPlan | None = None,
                           allowed: torch.Tensor | None = None, root: SharedRoot | None = None,
                           states: Sequence[torch.Tensor] | None = None):
    """`token_logprobs(model, *right-padded batch of sequences*, positions=positions, allowed=allowed, ...)`,
    computed level by level (module docstring). positions: [B, T-1] mask of the places wanted;
    allowed: [B, T-1, M] ids (-1 padded) that admissible-only decoding drew each token among;
    root: the minibatch's `SharedRoot` when the plan has one (computed here when not given); states: per
    sequence, the frozen layers' outputs for its tokens (the model under `top_layers_only`)."""
    from agentgym.trainers.ppo import _renormalize, head_logprobs

    plan = plan or plan_levels(sequences)
    device = positions.device
    if plan.root and root is None:
        root = SharedRoot(model, plan.levels[0].rows[0], pad_id, device, split=False,
                          states=None if states is None else states[0][:plan.root])
    kv_levels, mask_levels, hidden_levels = [], [], []
    chain: list[list[torch.Tensor]] = []  # per level: for its rows, the index of each ancestor row
    for depth, level in enumerate(plan.levels):
        parents = torch.tensor(level.parents, dtype=torch.long, device=device)
        if depth == 0:
            ancestors: list[torch.Tensor] = []
            past, past_mask = None, None
        else:
            ancestors = [up.index_select(0, parents) for up in chain[depth - 1]] + [parents]
            past, past_mask = _gather(kv_levels, mask_levels, ancestors)
        if depth == 0 and plan.root:
            hidden, kv, mask = root.hidden, root.kv, root.mask
        else:
            inputs = None
            if states is not None:
                width = max(max((len(r) for r in level.rows), default=1), 1)
                inputs = _level_states(plan, depth, states, width).to(device)
            hidden, kv, mask = _forward_level(model, level, past, past_mask, pad_id, device, inputs)
        kv_levels.append(kv)
        mask_levels.append(mask)
        hidden_levels.append(hidden)
        chain.append(ancestors)

    # every node's hidden state in one table; a sample's position p reads row index[b, p]
    widths = [h.shape[1] for h in hidden_levels]
    flat = torch.cat([h.reshape(-1, h.shape[-1]) for h in hidden_levels])
    offsets = [0]
    for h in hidden_levels[:-1]:
        offsets.append(offsets[-1] + h.shape[0] * h.shape[1])
    batch, width = positions.shape[0], positions.shape[1] + 1
    index = torch.zeros((batch, width), dtype=torch.long)
    for b, nodes in enumerate(plan.nodes):
        index[b, :len(nodes)] = torch.tensor([offsets[lv] + row * widths[lv] + col for lv, row, col in nodes],
                                             dtype=torch.long)
    index = index.to(device)
    where = positions.bool()
    targets = torch.full((batch, width), pad_id, dtype=torch.long)
    for b, s in enumerate(sequences):
        targets[b, :len(s)] = torch.tensor(s.input_ids, dtype=torch.long)
    targets = targets.to(device)
    picked = head_logprobs(model, flat[index[:, :-1][where]])
    rows = where.nonzero(as_tuple=True)
    chosen = targets[:, 1:][where]
    row_logp = picked.gather(-1, chosen[:, None])[:, 0]
    row_entropy = -(picked.exp() * picked).sum(-1) if want_entropy else None
    if allowed is not None:  # admissible-only decoding's policy: renormalized over the ids it drew among
        row_logp, row_entropy = _renormalize(row_logp, row_entropy, picked, chosen, allowed.to(device)[where])
    logp = torch.zeros(where.shape, dtype=picked.dtype, device=device).index_put(rows, row_logp)
    hidden = flat[index] if want_hidden else None
    if want_entropy:
        entropy = torch.zeros(where.shape, dtype=picked.dtype, device=device).index_put(rows, row_entropy)
        return logp, hidden, entropy
    return logp, hidden


def supports_shared_prefix(model) -> bool:
    """Models whose forward takes a DynamicCache with gradients (Hugging Face causal LMs with a
    plain linear head); anything else runs the plain forward."""

    return head_is_linear(model) and not getattr(model.config, "is_encoder_decoder", False)


# A level-wise pass costs more per computed token than one plain pass (three forwards, the cache
# gathered per level and scattered back in the backward): measured 1.34x on the main job's micro-
# batches (the update's CPU at equal padded tokens). Sharing is chosen only where it computes
# fewer than 1 / SHARING_OVERHEAD of the plain pass's padded tokens.
SHARING_OVERHEAD = 1.5


# A root shorter than this is left in the stems (a pass of its own costs more than it saves).
MIN_ROOT_TOKENS = 16


def plan_micro_batches(samples: Sequence, size: int, cut_plain, root: int = 0) -> list[tuple[list, PrefixPlan | None]]:
    """A minibatch's micro-batches, each with its level plan or None (plain pass, micro-batches as
    `cut_plain` makes them), whichever way computes fewer tokens: micro-batches of `size` samples
    cut from the samples in token order share prompt prefixes (a task's steps, a group's identical
    first turns, a long system prompt); cut by length they carry the least padding. Either way the minibatch's gradient is the same sum, in another order.
    The main job's short, mostly distinct prompts stay plain; a 200-token system prompt shared by
    every sample halves the update's CPU (docs/experiments.md). root: the prefix all `samples` share
    (`shared_root_length`), planned as the minibatch's `SharedRoot` when at least MIN_ROOT_TOKENS."""
    plain = cut_plain(samples)  # the learner's cut: length-sorted, by samples or by tokens
    plain_cost = sum(len(m) * max(len(s) for s in m) for m in plain)
    ordered = sorted(samples, key=lambda s: s.input_ids)
    shared = [list(ordered[i:i + size]) for i in range(0, len(ordered), size)]
    root = root if root >= MIN_ROOT_TOKENS else 0
    plans = [plan_levels(m, root) for m in shared]
    if all(p.usable for p in plans) and SHARING_OVERHEAD * (sum(p.padded_tokens() for p in plans) + root) < plain_cost:
        return list(zip(shared, plans))
    return [(m, None) for m in plain]
