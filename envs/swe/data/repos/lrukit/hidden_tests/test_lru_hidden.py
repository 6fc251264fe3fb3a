import pytest

from lrukit import LRUCache, memoize


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_evicts_least_recently_used():
    """When full, the least recently used key is evicted."""
    c = LRUCache(2)
    c.put("a", 1)
    c.put("b", 2)
    c.get("a")
    c.put("c", 3)
    assert "b" not in c, "b was the least recently used"
    assert "a" in c and "c" in c


def test_capacity_respected():
    """The cache never holds more than its capacity."""
    c = LRUCache(3)
    for i in range(10):
        c.put(i, i)
    assert len(c) == 3
    assert c.keys() == [9, 8, 7]


def test_update_moves_to_front():
    """Updating a key makes it the most recent and keeps one entry."""
    c = LRUCache(2)
    c.put("a", 1)
    c.put("b", 2)
    c.put("a", 10)
    assert c.keys() == ["a", "b"]
    assert c.get("a") == 10
    assert len(c) == 2


def test_stats_count_hits_misses_evictions():
    """stats counts hits, misses and evictions."""
    c = LRUCache(1)
    c.put("a", 1)
    c.get("a")
    c.get("x")
    c.put("b", 2)
    assert (c.stats.hits, c.stats.misses, c.stats.evictions) == (1, 1, 1)
    assert c.stats.hit_rate == 0.5


def test_hit_rate_empty():
    """hit_rate is 0 before any lookup."""
    assert LRUCache(1).stats.hit_rate == 0.0


def test_ttl_expiry():
    """Entries expire once their time-to-live has passed."""
    clock = FakeClock()
    c = LRUCache(4, ttl=10, clock=clock)
    c.put("a", 1)
    clock.now = 9.9
    assert c.get("a") == 1
    clock.now = 10.0
    assert c.get("a") is None, "the entry expires exactly at its ttl"
    assert len(c) == 0


def test_per_entry_ttl_overrides_default():
    """A ttl given to put overrides the cache's default."""
    clock = FakeClock()
    c = LRUCache(4, ttl=100, clock=clock)
    c.put("short", 1, ttl=1)
    clock.now = 2
    assert "short" not in c


def test_pop():
    """pop removes and returns; a missing key raises KeyError without a default."""
    c = LRUCache(2)
    c.put("a", 1)
    assert c.pop("a") == 1
    assert "a" not in c
    assert c.pop("a", None) is None
    with pytest.raises(KeyError):
        c.pop("a")


def test_resize_evicts_oldest():
    """Shrinking evicts the least recent entries."""
    c = LRUCache(4)
    for k in "abcd":
        c.put(k, k)
    c.resize(2)
    assert c.keys() == ["d", "c"]


def test_clear():
    """clear empties the cache."""
    c = LRUCache(2)
    c.put(1, 1)
    c.clear()
    assert len(c) == 0 and c.keys() == []


def test_invalid_capacity():
    """Capacity must be at least one."""
    with pytest.raises(ValueError):
        LRUCache(0)


def test_memoize_calls_once():
    """memoize calls the function once per distinct argument tuple."""
    calls = []

    @memoize(capacity=2)
    def square(x):
        calls.append(x)
        return x * x

    assert [square(3), square(3), square(4)] == [9, 9, 16]
    assert calls == [3, 4]
    assert square.__name__ == "square"
