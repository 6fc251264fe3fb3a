"""An array-backed binary heap. Entries are [priority, order, item]; the insertion order
breaks ties so that equal priorities come out first-in first-out."""


class EmptyQueueError(IndexError):
    pass


class PriorityQueue:
    def __init__(self, items=(), max_heap=False):
        self.max_heap = max_heap
        self._heap = []
        self._counter = 0
        self._index = {}
        for item, priority in items:
            self.push(item, priority)

    def __len__(self):
        return len(self._heap)

    def __bool__(self):
        return len(self._heap) > 0

    def __contains__(self, item):
        return item in self._index

    def _key(self, entry):
        priority = -entry[0] if self.max_heap else entry[0]
        return (priority, entry[1])

    def _less(self, i, j):
        return self._key(self._heap[i]) < self._key(self._heap[j])

    def _swap(self, i, j):
        heap = self._heap
        heap[i], heap[j] = heap[j], heap[i]
        self._index[heap[i][2]] = i
        self._index[heap[j][2]] = j

    def _sift_up(self, i):
        while i > 0:
            parent = (i - 1) // 2
            if not self._less(i, parent):
                break
            self._swap(i, parent)
            i = parent

    def _sift_down(self, i):
        n = len(self._heap)
        while True:
            left = 2 * i + 1
            right = left + 1
            best = i
            if left < n and self._less(left, best):
                best = left
            if right < n and self._less(right, best):
                best = right
            if best == i:
                return
            self._swap(i, best)
            i = best

    def push(self, item, priority):
        if item in self._index:
            raise ValueError(f"{item!r} is already queued; use update()")
        self._heap.append([priority, self._counter, item])
        self._counter += 1
        self._index[item] = len(self._heap) - 1
        self._sift_up(len(self._heap) - 1)

    def peek(self):
        if not self._heap:
            raise EmptyQueueError("peek from an empty queue")
        priority, _, item = self._heap[0]
        return item, priority

    def pop(self):
        if not self._heap:
            raise EmptyQueueError("pop from an empty queue")
        self._swap(0, len(self._heap) - 1)
        priority, _, item = self._heap.pop()
        del self._index[item]
        if self._heap:
            self._sift_down(0)
        return item, priority

    def update(self, item, priority):
        """Change an item's priority (either direction) and restore the heap."""
        i = self._index[item]
        self._heap[i][0] = priority
        self._sift_up(i)
        self._sift_down(self._index[item])

    def remove(self, item):
        i = self._index[item]
        last = len(self._heap) - 1
        self._swap(i, last)
        self._heap.pop()
        del self._index[item]
        if i < len(self._heap):
            self._sift_up(i)
            self._sift_down(self._index[self._heap[i][2]] if i < len(self._heap) else i)

    def drain(self):
        out = []
        while self._heap:
            out.append(self.pop()[0])
        return out


def nsmallest(n, values):
    """The n smallest values in ascending order."""
    if n <= 0:
        return []
    queue = PriorityQueue()
    for i, v in enumerate(values):
        queue.push(i, v)
    out = []
    while queue and len(out) < n:
        out.append(queue.pop()[1])
    return out


def merge_sorted(*lists):
    """Merge already-sorted lists into one sorted list."""
    queue = PriorityQueue()
    positions = {}
    for li, values in enumerate(lists):
        if values:
            queue.push(li, values[0])
            positions[li] = 0
    out = []
    while queue:
        li, value = queue.pop()
        out.append(value)
        positions[li] += 1
        if positions[li] < len(lists[li]):
            queue.push(li, lists[li][positions[li]])
    return out
