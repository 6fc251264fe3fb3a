"""heapkit: priority queues on a binary heap."""

from heapkit.queue import EmptyQueueError, PriorityQueue, merge_sorted, nsmallest

__all__ = ["EmptyQueueError", "PriorityQueue", "merge_sorted", "nsmallest"]
