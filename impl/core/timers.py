"""The core's only clock, and the deadlines queues ask to be woken at (message TTL, x-expires)."""

from __future__ import annotations

import heapq
import itertools
import time
from typing import Any, Callable


class Timers:
    """A heap of (when, tie-breaker, queue); a deleted queue's deadlines are skipped."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.heap: list[tuple[float, int, Any]] = []
        self.numbers = itertools.count()

    def schedule(self, when: float, queue: Any) -> None:
        heapq.heappush(self.heap, (when, next(self.numbers), queue))

    def next(self) -> float | None:
        """The earliest deadline of a queue that still exists, None if none."""
        heap = self.heap
        while heap and heap[0][2].deleted:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def due(self, now: float) -> list[Any]:
        """The queues whose deadline has come, in deadline order, taken off the heap."""
        heap, due = self.heap, []
        while heap and heap[0][0] <= now:
            queue = heapq.heappop(heap)[2]
            if not queue.deleted:
                due.append(queue)
        return due
