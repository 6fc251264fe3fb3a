from lrukit import LRUCache


def test_put_and_get():
    """A stored value can be read back."""
    c = LRUCache(2)
    c.put("a", 1)
    assert c.get("a") == 1


def test_missing_key_default():
    """A missing key gives the default."""
    assert LRUCache(2).get("nope", 42) == 42


def test_len():
    """len counts the entries."""
    c = LRUCache(5)
    c.put(1, 1)
    c.put(2, 2)
    assert len(c) == 2
