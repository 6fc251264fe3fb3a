"""lrukit: a least-recently-used cache."""

from lrukit.cache import CacheStats, LRUCache, memoize

__all__ = ["CacheStats", "LRUCache", "memoize"]
