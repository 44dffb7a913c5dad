"""Queues: ready messages in publication order, consumers, and round-robin dispatch (RQ-1, DS-1), with
the length limits (impl.core.limits) and message TTL and queue expiry (impl.core.ttl) RabbitMQ applies.

Everything that changes which messages are ready in a queue lives in this file.
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import TYPE_CHECKING, Any, Iterator

from impl.core.limits import DROP_HEAD, REJECT_PUBLISH_DLX, limits_of
from impl.core.messages import Message, QueuedMessage
from impl.core.ttl import deadline, milliseconds

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

    def peek_head(self) -> QueuedMessage:
        """The message pop_head would return, left in place."""
        requeued = self.requeued
        if requeued and (not self.fresh or requeued[0][0] < self.fresh[0].seq):
            return requeued[0][1]
        return self.fresh[0]

    def clear(self) -> list[QueuedMessage]:
        gone = list(self.fresh) + [qm for _, qm in self.requeued]
        self.fresh.clear()
        self.requeued.clear()
        return gone

    def in_order(self) -> Iterator[QueuedMessage]:
        return iter(sorted(list(self.fresh) + [qm for _, qm in self.requeued], key=lambda qm: qm.seq))


class SizedReadyMessages(ReadyMessages):
    """Ready messages that also keep the total size of their bodies (for x-max-length-bytes); only queues
    with a byte limit pay for the bookkeeping."""

    __slots__ = ("size",)

    def __init__(self) -> None:
        super().__init__()
        self.size = 0

    def append(self, qm: QueuedMessage) -> None:
        self.size += len(qm.message.body)
        self.fresh.append(qm)

    def requeue(self, qm: QueuedMessage) -> None:
        self.size += len(qm.message.body)
        heapq.heappush(self.requeued, (qm.seq, qm))

    def pop_head(self) -> QueuedMessage:
        qm = super().pop_head()
        self.size -= len(qm.message.body)
        return qm

    def clear(self) -> list[QueuedMessage]:
        self.size = 0
        return super().clear()


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
        self.limits = limits_of(arguments)
        sized = self.limits is not None and self.limits.max_bytes is not None
        self.ready = SizedReadyMessages() if sized else ReadyMessages()
        self.message_ttl = milliseconds(arguments, "x-message-ttl")
        self.expires = milliseconds(arguments, "x-expires")
        self.expiring = self.message_ttl is not None  # some ready message may have a deadline
        self.timer_at: float | None = None  # when the broker's timer next looks at the head
        self.expires_at: float | None = None  # x-expires: when the queue goes if still unused
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

    def enqueue(self, message: Message) -> QueuedMessage | None:
        """Accept a message: give it the next publication number and its deadline (TTL), write it to disk
        when it must survive a restart (DU-2), and make it ready. None when a reject-publish limit refuses
        it (reject-publish-dlx dead-letters it)."""
        limits = self.limits
        if limits is not None and limits.refuses(self, message):
            if limits.overflow == REJECT_PUBLISH_DLX:
                self.broker.dead_letter_message(self, message, "maxlen")
            return None
        qm = QueuedMessage(self.next_seq, message, self)
        self.next_seq += 1
        if self.message_ttl is not None or message.ttl is not None:
            if message.published_at is None:
                message.published_at = self.broker.clock()
            qm.deadline = deadline(message.published_at, self.message_ttl, message.ttl)
            self.expiring = True
        if message.persistent and self.durable:
            qm.on_disk = True
            self.broker.persist_message(self, qm)
        self.ready.append(qm)
        return qm

    def requeue(self, qm: QueuedMessage) -> None:
        """Put a delivered message back in its place (RQ-1); it will carry redelivered=true (RQ-2) and keeps
        its original deadline."""
        if self.deleted:
            return
        qm.redelivered = True
        self.ready.requeue(qm)
        if qm.deadline is not None:
            self.schedule_head()

    def drop_over_limit(self) -> None:
        """drop-head: drop (or dead-letter, reason maxlen) the oldest ready messages until the queue fits."""
        limits = self.limits
        if limits is None or limits.overflow != DROP_HEAD:
            return
        while self.ready and limits.over(self):
            self.broker.dead_letter(self.ready.pop_head(), "maxlen")

    def expire_head(self, now: float, inclusive: bool = True) -> None:
        """Drop (or dead-letter, reason expired) the ready messages at the head whose deadline has passed;
        with inclusive=False a message whose deadline is exactly now is still deliverable."""
        ready = self.ready
        while ready:
            qm = ready.peek_head()
            due = qm.deadline
            if due is None or due > now or (due == now and not inclusive):
                return
            ready.pop_head()
            self.broker.dead_letter(qm, "expired")

    def schedule_head(self) -> None:
        """Ask the broker's timer to look at the head when its deadline comes."""
        if not self.ready:
            return
        due = self.ready.peek_head().deadline
        if due is not None and (self.timer_at is None or due < self.timer_at):
            self.timer_at = due
            self.broker.schedule(due, self)

    def touch(self) -> None:
        """x-expires: the queue was used (declared, read with basic.get, left by its last consumer)."""
        if self.expires is not None and not self.deleted:
            self.expires_at = self.broker.clock() + self.expires / 1000.0
            self.broker.schedule(self.expires_at, self)

    def on_timer(self, now: float) -> None:
        """A deadline the queue asked for has come: expire the head; delete the queue if it went unused."""
        if self.timer_at is not None and self.timer_at <= now:
            self.timer_at = None
        if self.expiring:
            self.expire_head(now)
            self.schedule_head()
        if self.expires_at is not None and self.expires_at <= now and not self.consumers and not self.deleted:
            self.broker.delete_queue(self)

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
        if not self.consumers:
            self.touch()
        if self.auto_delete and not self.consumers and not self.deleted:
            self.broker.delete_queue(self)

    def dispatch(self, published_at: float | None = None) -> None:
        """Deliver ready messages, round-robin among the consumers that have room (DS-1, PF-3).
        `published_at`: the publish that just enqueued, when the queue may hold messages with a TTL."""
        if self.expiring:
            self.dispatch_expiring(published_at)
            return
        ready = self.ready
        consumers = self.consumers
        while ready and consumers:
            if not self.hand_out_head():
                return

    def hand_out_head(self) -> bool:
        """The head goes to the next consumer with room, which moves to the back (DS-1); False when no
        consumer has room."""
        consumers = self.consumers
        for _ in range(len(consumers)):
            consumer = consumers[0]
            consumers.rotate(-1)
            if consumer.has_room():
                consumer.channel.deliver(consumer, self.ready.pop_head())
                return True
        return False

    def dispatch_expiring(self, published_at: float | None) -> None:
        """dispatch for a queue whose messages may expire: an expired head is never delivered; after a
        publish, what no consumer took at once and is due now (TTL 0) expires."""
        now = self.broker.clock() if published_at is None else published_at
        ready = self.ready
        consumers = self.consumers
        while True:
            self.expire_head(now, inclusive=False)
            if not ready or not consumers or not self.hand_out_head():
                break
        if published_at is not None:
            self.expire_head(now)
        self.schedule_head()
