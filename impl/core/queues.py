"""Queues: ready messages in publication order, consumers, and round-robin dispatch (RQ-1, DS-1).

Everything that changes which messages are ready in a queue lives in this file.
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import TYPE_CHECKING, Any, Iterator

from impl.core.messages import Message, QueuedMessage

if TYPE_CHECKING:
    from impl.core.channel import Channel, Consumer


class ReadyMessages:
    """Ready messages ordered by publication number (RQ-1).

    New messages arrive in increasing order and go to the back of a deque (O(1)); a requeued message goes
    into a heap (O(log n)). The head is the smaller of the two fronts, so a requeued message is delivered
    again from exactly its original place.
    """

    __slots__ = ("fresh", "requeued")

    def __init__(self) -> None:
        self.fresh: deque[QueuedMessage] = deque()
        self.requeued: list[tuple[int, QueuedMessage]] = []

    def __len__(self) -> int:
        return len(self.fresh) + len(self.requeued)

    def __bool__(self) -> bool:
        return bool(self.fresh) or bool(self.requeued)

    def append(self, qm: QueuedMessage) -> None:
        self.fresh.append(qm)

    def requeue(self, qm: QueuedMessage) -> None:
        heapq.heappush(self.requeued, (qm.seq, qm))

    def pop_head(self) -> QueuedMessage:
        requeued = self.requeued
        if requeued and (not self.fresh or requeued[0][0] < self.fresh[0].seq):
            return heapq.heappop(requeued)[1]
        return self.fresh.popleft()

    def clear(self) -> list[QueuedMessage]:
        gone = list(self.fresh) + [qm for _, qm in self.requeued]
        self.fresh.clear()
        self.requeued.clear()
        return gone

    def in_order(self) -> Iterator[QueuedMessage]:
        return iter(sorted(list(self.fresh) + [qm for _, qm in self.requeued], key=lambda qm: qm.seq))


class Queue:
    """One queue of the virtual host."""

    def __init__(
        self,
        broker: Any,
        name: str,
        durable: bool,
        exclusive_owner: Any,
        auto_delete: bool,
        arguments: dict[str, Any],
    ) -> None:
        self.broker = broker
        self.name = name
        self.durable = durable
        self.exclusive_owner = exclusive_owner
        self.auto_delete = auto_delete
        self.arguments = arguments
        self.ready = ReadyMessages()
        self.consumers: deque[Consumer] = deque()
        self.had_consumer = False
        self.next_seq = 1
        self.deleted = False
        self.bindings: set[tuple[str, str, Any]] = set()  # (exchange, routing key, frozen arguments)
        self.persistent_messages = durable  # whether persistent messages in this queue go to disk

    @property
    def dead_letter_exchange(self) -> str | None:
        value = self.arguments.get("x-dead-letter-exchange")
        return value if isinstance(value, str) else None

    @property
    def dead_letter_routing_key(self) -> str | None:
        value = self.arguments.get("x-dead-letter-routing-key")
        return value if isinstance(value, str) else None

    def enqueue(self, message: Message) -> QueuedMessage:
        """Accept a message: give it the next publication number, write it to disk when it must survive
        a restart (DU-2), and make it ready."""
        qm = QueuedMessage(self.next_seq, message, self)
        self.next_seq += 1
        if message.persistent and self.durable:
            qm.on_disk = True
            self.broker.persist_message(self, qm)
        self.ready.append(qm)
        return qm

    def requeue(self, qm: QueuedMessage) -> None:
        """Put a delivered message back in its place (RQ-1); it will carry redelivered=true (RQ-2)."""
        if self.deleted:
            return
        qm.redelivered = True
        self.ready.requeue(qm)

    def forget(self, qm: QueuedMessage) -> None:
        """The message leaves this queue for good (acked, dropped, dead-lettered, auto-ack delivered)."""
        if qm.on_disk and not self.deleted:
            self.broker.unpersist_message(self, qm)

    def add_consumer(self, consumer: "Consumer") -> None:
        self.consumers.append(consumer)
        self.had_consumer = True

    def remove_consumer(self, consumer: "Consumer") -> None:
        try:
            self.consumers.remove(consumer)
        except ValueError:
            return
        if self.auto_delete and not self.consumers and not self.deleted:
            self.broker.delete_queue(self)

    def dispatch(self) -> None:
        """Deliver ready messages, round-robin among the consumers that have room (DS-1, PF-3)."""
        ready = self.ready
        consumers = self.consumers
        while ready and consumers:
            for _ in range(len(consumers)):
                consumer = consumers[0]
                consumers.rotate(-1)
                if consumer.has_room():
                    consumer.channel.deliver(consumer, ready.pop_head())
                    break
            else:
                return
