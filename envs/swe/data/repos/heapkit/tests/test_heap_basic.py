import pytest

from heapkit import EmptyQueueError, PriorityQueue


def test_pop_lowest_first():
    """The lowest priority comes out first."""
    q = PriorityQueue([("b", 2), ("a", 1), ("c", 3)])
    assert q.pop() == ("a", 1)


def test_len_and_contains():
    """len and `in` reflect the queued items."""
    q = PriorityQueue([("x", 5)])
    assert len(q) == 1 and "x" in q


def test_pop_empty():
    """Popping an empty queue raises EmptyQueueError."""
    with pytest.raises(EmptyQueueError):
        PriorityQueue().pop()
