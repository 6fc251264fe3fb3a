import random

import pytest

from heapkit import EmptyQueueError, PriorityQueue, merge_sorted, nsmallest


def test_drain_sorted():
    """Draining gives items in priority order."""
    rng = random.Random(3)
    values = [rng.randint(0, 1000) for _ in range(200)]
    q = PriorityQueue([(i, v) for i, v in enumerate(values)])
    priorities = []
    while q:
        priorities.append(q.pop()[1])
    assert priorities == sorted(values)


def test_ties_are_fifo():
    """Equal priorities come out in insertion order."""
    q = PriorityQueue([("first", 1), ("second", 1), ("third", 1), ("zero", 0)])
    assert q.drain() == ["zero", "first", "second", "third"]


def test_max_heap():
    """max_heap=True pops the highest priority first."""
    q = PriorityQueue([("a", 1), ("b", 9), ("c", 5)], max_heap=True)
    assert q.drain() == ["b", "c", "a"]


def test_peek_does_not_remove():
    """peek returns the best item without removing it."""
    q = PriorityQueue([("a", 3), ("b", 1)])
    assert q.peek() == ("b", 1)
    assert len(q) == 2


def test_peek_empty():
    """peek on an empty queue raises EmptyQueueError."""
    with pytest.raises(EmptyQueueError):
        PriorityQueue().peek()


def test_update_decrease_and_increase():
    """update moves an item up or down."""
    q = PriorityQueue([("a", 5), ("b", 6), ("c", 7)])
    q.update("c", 1)
    assert q.peek() == ("c", 1)
    q.update("c", 10)
    assert q.drain() == ["a", "b", "c"]


def test_duplicate_push_rejected():
    """Pushing an item twice is an error."""
    q = PriorityQueue([("a", 1)])
    with pytest.raises(ValueError):
        q.push("a", 2)


def test_remove_middle():
    """remove takes out any item and keeps the rest ordered."""
    q = PriorityQueue([(c, i) for i, c in enumerate("abcdefg")])
    q.remove("c")
    q.remove("a")
    assert "c" not in q
    assert q.drain() == ["b", "d", "e", "f", "g"]


def test_bool():
    """An empty queue is falsy."""
    assert not PriorityQueue()
    assert PriorityQueue([("a", 1)])


def test_nsmallest():
    """nsmallest returns the n smallest in ascending order."""
    assert nsmallest(3, [5, 1, 4, 2, 8]) == [1, 2, 4]
    assert nsmallest(0, [1, 2]) == []
    assert nsmallest(10, [3, 1]) == [1, 3]


def test_merge_sorted():
    """merge_sorted merges sorted lists."""
    assert merge_sorted([1, 4, 9], [2, 3, 10], [], [0]) == [0, 1, 2, 3, 4, 9, 10]
