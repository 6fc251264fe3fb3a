"""BM25 retrieval over a corpus with bm25s, built once and cached.

The index lives in memory per process and on disk under the cache folder
($AGENTGYM_CACHE_DIR, else $XDG_CACHE_HOME/agentgym, else ~/.cache/agentgym), keyed by a hash
of the corpus text, so a changed corpus never reads a stale index. Tokenization is ours (lower
case word characters minus a few stop words) and is shared by documents and queries; queries go
straight to bm25s's score matrix, which keeps a query on the full corpus near a millisecond.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np

from agentgym.envs.search.corpus import Document
from agentgym.errors import require

INDEX_VERSION = "v1"
MAX_QUERY_CHARS = 2000  # longer queries are cut: BM25 gains nothing from 100 kB of text
_TOKEN = re.compile(r"\w+")
_STOPWORDS = frozenset(
    "a an and are as at be by for from has have he her his in is it its of on or she that the their they "
    "this to was were what which who whom with".split()
)
_MEMORY: dict[str, "SearchIndex"] = {}


def tokenize(text: str) -> list[str]:
    return [t for t in _TOKEN.findall(text.lower()) if t not in _STOPWORDS]


def cache_root() -> Path:
    if os.environ.get("AGENTGYM_CACHE_DIR"):
        return Path(os.environ["AGENTGYM_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "agentgym"


def corpus_key(docs: list[Document]) -> str:
    h = hashlib.sha256(INDEX_VERSION.encode())
    for d in docs:
        h.update(f"{d.id}\x1f{d.title}\x1f{d.text}\x1e".encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:20]


class SearchIndex:
    """Top-k BM25 search over `docs` (document i of the corpus is row i of the index)."""

    def __init__(self, retriever, num_docs: int, build_seconds: float, from_cache: bool):
        self.retriever = retriever
        self.vocab: dict[str, int] = retriever.vocab_dict
        self.num_docs = num_docs
        self.build_seconds = build_seconds
        self.from_cache = from_cache

    @classmethod
    def build(cls, docs: list[Document]) -> "SearchIndex":
        import time

        bm25s = require("bm25s", "search")
        start = time.perf_counter()
        vocab: dict[str, int] = {}
        ids: list[list[int]] = []
        for d in docs:
            # The title counts twice: a query naming an entity should find its own article first.
            tokens = tokenize(d.title) + tokenize(f"{d.title} {d.text}")
            ids.append([vocab.setdefault(t, len(vocab)) for t in tokens])
        vocab.setdefault("", len(vocab))  # bm25s scores an empty query through this token
        retriever = bm25s.BM25()
        retriever.index((ids, vocab), show_progress=False)
        return cls(retriever, len(docs), time.perf_counter() - start, from_cache=False)

    def search(self, query: str, k: int = 5) -> list[tuple[int, float]]:
        """(row, score) of the k best documents with a positive score, best first."""
        token_ids = [self.vocab[t] for t in tokenize(query[:MAX_QUERY_CHARS]) if t in self.vocab]
        if not token_ids or k <= 0:
            return []
        scores = self.retriever.get_scores_from_ids(token_ids)
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        # Ties break by row so that results never depend on the partition's internal order.
        top = sorted(top.tolist(), key=lambda i: (-float(scores[i]), i))
        return [(i, float(scores[i])) for i in top if scores[i] > 0]

    # --- caching ----------------------------------------------------------------------------
    @classmethod
    def cached(cls, docs: list[Document], key: str | None = None, use_disk: bool = True) -> "SearchIndex":
        """The index of `docs`: from memory, else from the disk cache, else built (and saved)."""
        key = key or corpus_key(docs)
        if key in _MEMORY:
            return _MEMORY[key]
        index = None
        folder = cache_root() / "search" / INDEX_VERSION / key
        if use_disk and folder.is_dir():
            index = cls._load(folder, len(docs))
            if index is None:  # damaged or stale: make room for a fresh copy
                shutil.rmtree(folder, ignore_errors=True)
        if index is None:
            index = cls.build(docs)
            if use_disk:
                cls._save(index, folder)
        _MEMORY[key] = index
        return index

    @classmethod
    def _load(cls, folder: Path, num_docs: int) -> "SearchIndex | None":
        import time

        bm25s = require("bm25s", "search")
        start = time.perf_counter()
        try:
            retriever = bm25s.BM25.load(str(folder), show_progress=False)
        except Exception as exc:  # a damaged cache is rebuilt, never fatal
            warnings.warn(f"ignoring unreadable search index cache {folder}: {exc}", stacklevel=2)
            return None
        if int(retriever.scores.get("num_docs", -1)) != num_docs:
            return None
        return cls(retriever, num_docs, time.perf_counter() - start, from_cache=True)

    @staticmethod
    def _save(index: "SearchIndex", folder: Path) -> None:
        # Written to a temporary folder and renamed, so concurrent processes never read half an index.
        try:
            folder.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=folder.parent))
            index.retriever.save(str(tmp), show_progress=False)
            try:
                os.replace(tmp, folder)
            except OSError:  # another process won the race
                shutil.rmtree(tmp, ignore_errors=True)
        except OSError as exc:
            warnings.warn(f"could not cache the search index under {folder}: {exc}", stacklevel=2)


def clear_memory_cache() -> None:
    _MEMORY.clear()
