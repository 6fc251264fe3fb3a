"""LRU cache on a doubly linked list plus a dict, so every operation is O(1)."""

import time
from dataclasses import dataclass

_MISSING = object()


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    evictions: int = 0

    @property
    def hit_rate(self):
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


class _Node:
    __slots__ = ("key", "value", "expires", "prev", "next")

    def __init__(self, key, value, expires):
        self.key = key
        self.value = value
        self.expires = expires
        self.prev = None
        self.next = None


class LRUCache:
    def __init__(self, capacity, ttl=None, clock=time.monotonic):
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self.ttl = ttl
        self.clock = clock
        self.stats = CacheStats()
        self._map = {}
        # Sentinels: head.next is the most recent entry, tail.prev the least recent.
        self._head = _Node(None, None, None)
        self._tail = _Node(None, None, None)
        self._head.next = self._tail
        self._tail.prev = self._head

    def __len__(self):
        return len(self._map)

    def __contains__(self, key):
        node = self._map.get(key)
        return node is not None and not self._expired(node)

    def _expired(self, node):
        return node.expires is not None and self.clock() >= node.expires

    def _unlink(self, node):
        node.prev.next = node.next
        node.next.prev = node.prev

    def _push_front(self, node):
        node.prev = self._head
        node.next = self._head.next
        self._head.next.prev = node
        self._head.next = node

    def get(self, key, default=None):
        node = self._map.get(key)
        if node is None:
            self.stats.misses += 1
            return default
        if self._expired(node):
            self._unlink(node)
            del self._map[key]
            self.stats.misses += 1
            return default
        self._unlink(node)
        self._push_front(node)
        self.stats.hits += 1
        return node.value

    def put(self, key, value, ttl=None):
        ttl = self.ttl if ttl is None else ttl
        expires = None if ttl is None else self.clock() + ttl
        node = self._map.get(key)
        if node is not None:
            node.value = value
            node.expires = expires
            self._unlink(node)
            self._push_front(node)
            return
        if len(self._map) >= self.capacity:
            self._evict()
        node = _Node(key, value, expires)
        self._map[key] = node
        self._push_front(node)

    def _evict(self):
        oldest = self._tail.prev
        self._unlink(oldest)
        del self._map[oldest.key]
        self.stats.evictions += 1

    def pop(self, key, default=_MISSING):
        node = self._map.pop(key, None)
        if node is None:
            if default is _MISSING:
                raise KeyError(key)
            return default
        self._unlink(node)
        return node.value

    def keys(self):
        """Keys from most to least recently used."""
        out = []
        node = self._head.next
        while node is not self._tail:
            out.append(node.key)
            node = node.next
        return out

    def resize(self, capacity):
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        while len(self._map) > capacity:
            self._evict()

    def clear(self):
        self._map.clear()
        self._head.next = self._tail
        self._tail.prev = self._head


def memoize(capacity=128):
    """Decorator caching a function's results by its positional arguments."""

    def decorate(fn):
        cache = LRUCache(capacity)

        def wrapper(*args):
            value = cache.get(args, _MISSING)
            if value is _MISSING:
                value = fn(*args)
                cache.put(args, value)
            return value

        wrapper.cache = cache
        wrapper.__name__ = fn.__name__
        return wrapper

    return decorate
