"""The replies' trie as tensors (policies/pool_engine.py: build_tries, constrain, advance): decoding within it
never leaves it, over random tries, random logits and any mix of constrained and free rows, and every
reply it gives is one of the allowed replies."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgym.policies.hf import _reply_trie
from agentgym.policies.pool_engine import FREE, advance, build_tries, constrain

VOCAB, EOS = 40, 1

reply = st.lists(st.integers(2, VOCAB - 1), min_size=0, max_size=5).map(lambda body: body + [EOS])
row = st.one_of(st.none(), st.lists(reply, min_size=1, max_size=6))


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(row, min_size=1, max_size=6), seed=st.integers(0, 2**16), end_cleanly=st.booleans())
def test_decoding_within_random_tries_never_leaves_them(rows, seed, end_cleanly):
    if not end_cleanly:  # some replies end without an end-of-reply id: past them the row decodes freely
        rows = [r if r is None else [x[:-1] or x for x in r] for r in rows]
    tries = [_reply_trie(r, 6) for r in rows]
    tables = build_tries(tries, {EOS}, VOCAB, "cpu")
    if all(t is None for t in tries):
        assert tables is None
        return
    generator = torch.Generator().manual_seed(seed)
    node = tables.root.clone()
    walked = [[] for _ in rows]
    live = [t is not None for t in tries]
    for _step in range(6):
        width = len(tables.columns) if tables.head_columns else VOCAB
        logits = torch.randn((len(rows), width), generator=generator) * 4
        masked = constrain(logits, node, tables)
        pick = torch.multinomial(torch.softmax(masked, -1), 1, generator=generator)[:, 0]
        token = tables.columns[pick] if tables.head_columns else pick
        for b, trie in enumerate(tries):
            if not live[b]:
                continue
            at = int(node[b])
            if at == FREE:  # past a leaf without an end: free decoding, which only a non-clean trie allows
                assert not tables.head_columns
                live[b] = False
                continue
            allowed = tables.children[at]
            assert int(token[b]) in allowed  # never leaves the trie
            assert sorted(int(tables.columns[c]) for c in torch.nonzero(tables.allowed[at]).flatten()) == allowed
            walked[b].append(int(token[b]))
            if int(token[b]) == EOS:
                live[b] = False
        node = advance(node, pick, token, tables)
    for b, r in enumerate(rows):
        if r is not None and walked[b] and walked[b][-1] == EOS:
            assert walked[b] in r  # a finished reply is one of the allowed replies


def test_identical_tries_share_their_nodes_and_free_rows_allow_every_id():
    trie = _reply_trie([[5, 6, EOS], [5, EOS], [7, EOS]], 8)
    tables = build_tries([trie, trie, None], {EOS}, VOCAB, "cpu")
    assert tables.root[0] == tables.root[1] and tables.root[2] == FREE
    assert not tables.head_columns  # a free row needs the whole vocabulary
    masked = constrain(torch.zeros(3, VOCAB), tables.root, tables)
    assert torch.isfinite(masked[2]).all()
    assert sorted(torch.nonzero(torch.isfinite(masked[0])).flatten().tolist()) == [5, 7]


def test_the_draw_follows_the_policys_distribution_and_never_picks_an_excluded_id():
    from agentgym.policies.base import SamplingParams
    from agentgym.policies.pool_engine import pick_tokens

    logits = torch.tensor([[2.0, 1.0, 0.0, float("-inf"), -1.0, 0.5]]).repeat(40000, 1)
    generator = torch.Generator().manual_seed(0)
    for sampling, kept in ((SamplingParams(temperature=1.0), [0, 1, 2, 4, 5]),
                           (SamplingParams(temperature=0.7, top_k=3), [0, 1, 5]),
                           (SamplingParams(temperature=1.0, top_p=0.6), [0, 1])):
        scaled = logits[0] / sampling.temperature
        expected = torch.zeros(6)
        expected[kept] = torch.softmax(scaled[kept], -1)
        counts = torch.bincount(pick_tokens(logits, sampling, generator), minlength=6) / logits.shape[0]
        assert torch.allclose(counts, expected, atol=0.01), (sampling, counts, expected)
        assert counts[[i for i in range(6) if i not in kept]].sum() == 0
    again = torch.Generator().manual_seed(0)  # the same generator state, the same draws (exact resume)
    first = pick_tokens(logits[:50], SamplingParams(), torch.Generator().manual_seed(0))
    assert torch.equal(first, pick_tokens(logits[:50], SamplingParams(), again))
