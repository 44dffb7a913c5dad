"""The channel-wide prefetch limit (basic.qos global=true) as RabbitMQ 3.10.8 keeps it (PF-1..PF-5).

RabbitMQ counts a channel's deliveries against its global limit in a limiter of its own, and the count is
not the channel's number of outstanding deliveries (docs/rabbitmq-3.10.8-observations.md, B1..B7):
- setting a limit when there is none starts the count at the channel's outstanding deliveries, basic.get
  ones included; changing a limit that is set keeps the count;
- only manual-mode consumer deliveries made while the limit is set are added, and only settlements of
  consumer deliveries are taken off, so a basic.get delivery that was counted stays counted; a count of
  0 stays 0, any other can go below 0 (after a commit: `settled`);
- while the count is at the limit no consumer of the channel gets anything, no-ack consumers included
  (they are never counted);
- qos(global=true, 0) and any qos(global=false) remove the limit and the count.
Everything that changes the count lives in this file.
"""

from __future__ import annotations


class GlobalPrefetch:
    """A channel's global prefetch limit (0: none) and the count RabbitMQ's limiter holds against it."""

    __slots__ = ("limit", "volume")

    def __init__(self) -> None:
        self.limit = 0
        self.volume = 0

    def __bool__(self) -> bool:
        return self.limit > 0

    def set(self, limit: int, outstanding: int) -> None:
        """basic.qos(global=true, limit): from no limit, the count starts at `outstanding`."""
        if limit == 0:
            self.remove()
            return
        if self.limit == 0:
            self.volume = outstanding
        self.limit = limit

    def remove(self) -> None:
        """qos(global=true, 0), or any qos(global=false): no channel-wide limit any more."""
        self.limit = 0
        self.volume = 0

    def reached(self) -> bool:
        """Whether the limit holds back every consumer of the channel (PF-3)."""
        return self.limit > 0 and self.volume >= self.limit

    def delivered(self) -> None:
        """A manual-mode consumer delivery was made."""
        if self.limit:
            self.volume += 1

    def settled(self, count: int) -> None:
        """`count` consumer deliveries were settled or requeued at once (never basic.get ones): as
        RabbitMQ's limiter takes an ack, a count of 0 stays 0 and any other drops by `count`, below 0
        if `count` is larger. Only a commit does that: the deliveries a transaction held back when the
        limit was set from none were never counted, yet the commit counts them off, and the channel
        then gets that many deliveries beyond its limit."""
        if self.limit and count and self.volume:
            self.volume -= count
