"""The BM25 index: ranking, the disk cache and its recovery from damage."""

import numpy as np
import pytest

from agentgym.envs.search.corpus import Document
from agentgym.envs.search.index import INDEX_VERSION, SearchIndex, cache_root, clear_memory_cache, corpus_key, tokenize

DOCS = [Document(f"d{i}", t, x) for i, (t, x) in enumerate([
    ("Harbour", "The old harbour of Velm holds fishing boats."),
    ("Velm", "Velm is a town by the sea with a harbour and a lighthouse."),
    ("Lighthouse", "A lighthouse guides ships at night."),
    ("Bees", "Bees make honey in the summer."),
])]


def test_tokenizer_drops_stop_words_and_case():
    assert tokenize("The Harbour OF Velm, 12,057!") == ["harbour", "velm", "12", "057"]


def test_ranking_and_k(search_cache_dir):
    index = SearchIndex.build(DOCS)
    hits = index.search("harbour velm", k=3)
    assert [row for row, _ in hits][:2] in ([0, 1], [1, 0])
    assert all(score > 0 for _, score in hits) and len(hits) == 2  # d2 and d3 do not match
    assert index.search("honey", k=10) == [(3, index.search("honey")[0][1])]
    assert index.search("", k=5) == [] and index.search("unknownword", k=5) == []
    assert index.search("harbour", k=0) == []


def test_disk_cache_round_trip_and_damage(search_cache_dir):
    clear_memory_cache()
    key = corpus_key(DOCS)
    built = SearchIndex.cached(DOCS)
    assert not built.from_cache and (cache_root() / "search" / INDEX_VERSION / key).is_dir()
    clear_memory_cache()
    loaded = SearchIndex.cached(DOCS)
    assert loaded.from_cache
    for q in ["harbour", "lighthouse ships", "bees honey summer"]:
        assert loaded.search(q) == built.search(q)
    # a damaged cache is rebuilt, not fatal
    folder = cache_root() / "search" / INDEX_VERSION / key
    for f in folder.iterdir():
        f.write_bytes(b"garbage")
    clear_memory_cache()
    with pytest.warns(UserWarning, match="unreadable search index cache"):
        rebuilt = SearchIndex.cached(DOCS)
    assert rebuilt.search("harbour") == built.search("harbour") and not rebuilt.from_cache
    clear_memory_cache()
    assert SearchIndex.cached(DOCS).from_cache  # the damaged copy was replaced
    # another corpus never reads this cache
    assert corpus_key(DOCS[:3]) != key


def test_title_queries_find_their_article_on_the_full_corpus(source, world):
    rng = np.random.default_rng(0)
    ids = [world.by_type[t][int(rng.integers(len(world.by_type[t])))] for t in ("person", "city", "company", "work")
           for _ in range(50)]
    hits = sum(eid in {source.docs[r].id for r, _ in source.index.search(world.get(eid).title, 5)} for eid in ids)
    assert hits / len(ids) >= 0.95
