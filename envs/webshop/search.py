"""Product search: BM25 over the catalog with bm25s.

Both backends and the oracle call the same engine, so a query gives the same result list
everywhere. Ties are broken by catalog order (a stable sort over all scores) rather than by
whatever order a partial top-k selection happens to return.
"""

from __future__ import annotations

import functools
import re

import numpy as np

from agentgym.envs.webshop.catalog import Catalog, default_catalog
from agentgym.errors import require

MAX_RESULTS = 50  # WebShop shows the top 50 products, 10 per page
RESULTS_PER_PAGE = 10

_TOKEN = re.compile(r"[a-z0-9]+")
_STOPWORDS = frozenset(
    "a an and are as at be by for from i in is it its looking me my need of on or that the this to want "
    "which with find buy price lower than dollars some please would like".split()
)


def tokenize(text: str) -> list[str]:
    return [t for t in _TOKEN.findall(text.lower()) if t not in _STOPWORDS]


class SearchEngine:
    def __init__(self, catalog: Catalog):
        bm25s = require("bm25s", "web")
        self.catalog = catalog
        self._asins = [p.asin for p in catalog.products]
        self._bm25 = bm25s.BM25()
        self._bm25.index([tokenize(p.search_text()) for p in catalog.products], show_progress=False)
        self._vocab = self._bm25.vocab_dict
        # Per-engine cache: the training loop repeats the same few queries across a group.
        self.search = functools.lru_cache(maxsize=8192)(self._search)

    def __reduce__(self):
        # The lru_cache wrapper and the BM25 index do not pickle (or are large): the default
        # engine is rebuilt by name in the other process, any other from its catalog.
        if default_engine.cache_info().currsize and default_engine() is self:
            return (default_engine, ())
        return (SearchEngine, (self.catalog,))

    def _search(self, query: str) -> tuple[str, ...]:
        """The asins of the top MAX_RESULTS products for `query` (empty when no word matches)."""
        tokens = [t for t in tokenize(query) if t in self._vocab]
        if not tokens:
            return ()
        scores = self._bm25.get_scores(tokens)
        n_hits = int(np.count_nonzero(scores > 0))
        order = np.argsort(-scores, kind="stable")[: min(MAX_RESULTS, n_hits)]
        return tuple(self._asins[i] for i in order)


@functools.lru_cache(maxsize=1)
def default_engine() -> SearchEngine:
    return SearchEngine(default_catalog())
