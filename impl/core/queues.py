"""Queues: ready messages in publication order, consumers, and round-robin dispatch (RQ-1, DS-1), with
the length limits (impl.core.limits) and message TTL and queue expiry (impl.core.ttl) RabbitMQ applies.

Everything that changes which messages are ready in a queue lives in this file. A queue knows nothing of
the virtual host above it: what leaves it for good (expired, dropped over a limit) is returned to the
caller (impl.core.broker), which dead-letters it; a queue that should go (x-expires, auto-delete) says
so and the caller deletes it. Consumers are reached through the `Subscriber` interface, which
impl.core.channel implements; durable writes go to the journal, deadlines to the timers.
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import Any, Iterator, Protocol

from rabbitproof.impl.core.journal import Journal
from rabbitproof.impl.core.limits import DROP_HEAD, REJECT_PUBLISH_DLX, limits_of
from rabbitproof.impl.core.messages import Message, QueuedMessage
from rabbitproof.impl.core.timers import Timers
from rabbitproof.impl.core.ttl import deadline, milliseconds


class Subscriber(Protocol):
    """What a queue needs of one of its consumers (impl.core.channel.Consumer implements it)."""

    exclusive: bool

    def has_room(self) -> bool:
        """Whether a delivery may go to it now (PF)."""

    def take(self, qm: QueuedMessage) -> None:
        """Deliver the message to it; the queue has already removed it from its ready messages."""


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
        name: str,
        durable: bool,
        exclusive_owner: Any,
        auto_delete: bool,
        arguments: dict[str, Any],
        journal: Journal,
        timers: Timers,
    ) -> None:
        self.name = name
        self.durable = durable
        self.exclusive_owner = exclusive_owner
        self.auto_delete = auto_delete
        self.arguments = arguments
        self.journal = journal
        self.timers = timers
        self.limits = limits_of(arguments)
        sized = self.limits is not None and self.limits.max_bytes is not None
        self.ready = SizedReadyMessages() if sized else ReadyMessages()
        self.message_ttl = milliseconds(arguments, "x-message-ttl")
        self.expires = milliseconds(arguments, "x-expires")
        self.expiring = self.message_ttl is not None  # some ready message may have a deadline
        self.timer_at: float | None = None  # when the timers next look at the head
        self.expires_at: float | None = None  # x-expires: when the queue goes if still unused
        self.consumers: deque[Subscriber] = deque()
        self.next_seq = 1
        self.deleted = False
        self.bindings: set[tuple[str, str, Any]] = set()  # (exchange, routing key, frozen arguments)

    @property
    def dead_letter_exchange(self) -> str | None:
        value = self.arguments.get("x-dead-letter-exchange")
        return value if isinstance(value, str) else None

    @property
    def dead_letter_routing_key(self) -> str | None:
        value = self.arguments.get("x-dead-letter-routing-key")
        return value if isinstance(value, str) else None

    @property
    def refusals_dead_letter(self) -> bool:
        """A publish this queue refuses (reject-publish-dlx) is dead-lettered, reason maxlen."""
        return self.limits is not None and self.limits.overflow == REJECT_PUBLISH_DLX

    # --- what comes in ------------------------------------------------------------------------

    def enqueue(self, message: Message) -> QueuedMessage | None:
        """Accept a message: give it the next publication number and its deadline (TTL), write it to disk
        when it must survive a restart (DU-2), and make it ready. None when a reject-publish limit refuses
        it (see `refusals_dead_letter`)."""
        limits = self.limits
        if limits is not None and limits.refuses(self.ready, message):
            return None
        qm = QueuedMessage(self.next_seq, message, self)
        self.next_seq += 1
        if self.message_ttl is not None or message.ttl is not None:
            if message.published_at is None:
                message.published_at = self.timers.clock()
            qm.deadline = deadline(message.published_at, self.message_ttl, message.ttl)
            self.expiring = True
        if message.persistent and self.durable:
            qm.on_disk = True
            self.journal.persist_message(self.name, qm.seq, message)
        self.ready.append(qm)
        return qm

    def restore(self, qm: QueuedMessage, now: float) -> None:
        """A message recovered from disk after a restart (DU-1): ready, its TTL counting again from now."""
        message = qm.message
        if self.message_ttl is not None or message.ttl is not None:
            message.published_at = now
            qm.deadline = deadline(now, self.message_ttl, message.ttl)
            self.expiring = True
        self.ready.append(qm)
        self.next_seq = max(self.next_seq, qm.seq + 1)

    def requeue(self, qm: QueuedMessage) -> None:
        """Put a delivered message back in its place (RQ-1); it will carry redelivered=true (RQ-2) and keeps
        its original deadline."""
        if self.deleted:
            return
        qm.redelivered = True
        self.ready.requeue(qm)
        if qm.deadline is not None:
            self.schedule_head()

    # --- what leaves --------------------------------------------------------------------------

    def forget(self, qm: QueuedMessage) -> None:
        """The message leaves this queue for good (acked, dropped, dead-lettered, auto-ack delivered)."""
        if qm.on_disk and not self.deleted:
            self.journal.unpersist_message(self.name, qm.seq)

    def take_head(self) -> QueuedMessage:
        """basic.get: the head leaves the ready messages (DS-1); the caller settles it or forgets it."""
        qm = self.ready.pop_head()
        if self.expiring:
            self.schedule_head()
        return qm

    def purge(self) -> int:
        """queue.purge: every ready message goes for good; outstanding deliveries stay. The count."""
        gone = self.ready.clear()
        for qm in gone:
            self.forget(qm)
        return len(gone)

    def discard(self) -> tuple[int, list[Subscriber]]:
        """The queue is deleted: its ready messages are dropped, its consumers leave it. The number of ready
        messages it held, and the consumers to cancel."""
        count = len(self.ready)
        self.deleted = True
        self.ready.clear()
        consumers = list(self.consumers)
        self.consumers.clear()
        return count, consumers

    def drop_over_limit(self) -> list[QueuedMessage]:
        """drop-head: the oldest ready messages that do not fit leave the queue; returned to be dead-lettered
        (reason maxlen)."""
        limits = self.limits
        dropped: list[QueuedMessage] = []
        if limits is None or limits.overflow != DROP_HEAD:
            return dropped
        while self.ready and limits.over(self.ready):
            qm = self.ready.pop_head()
            self.forget(qm)
            dropped.append(qm)
        return dropped

    def expire_head(self, now: float, inclusive: bool = True) -> list[QueuedMessage]:
        """The ready messages at the head whose deadline has passed leave the queue; returned to be
        dead-lettered (reason expired). With inclusive=False a message due exactly now stays deliverable."""
        ready = self.ready
        expired: list[QueuedMessage] = []
        while ready:
            qm = ready.peek_head()
            due = qm.deadline
            if due is None or due > now or (due == now and not inclusive):
                break
            ready.pop_head()
            self.forget(qm)
            expired.append(qm)
        return expired

    # --- deadlines ----------------------------------------------------------------------------

    def schedule_head(self) -> None:
        """Ask the timers to look at the head when its deadline comes."""
        if not self.ready:
            return
        due = self.ready.peek_head().deadline
        if due is not None and (self.timer_at is None or due < self.timer_at):
            self.timer_at = due
            self.timers.schedule(due, self)

    def touch(self) -> None:
        """x-expires: the queue was used (declared, read with basic.get, left by its last consumer)."""
        if self.expires is not None and not self.deleted:
            self.expires_at = self.timers.clock() + self.expires / 1000.0
            self.timers.schedule(self.expires_at, self)

    def on_timer(self, now: float) -> tuple[list[QueuedMessage], bool]:
        """A deadline the queue asked for has come: the expired messages at the head, and whether the
        queue went unused for its x-expires and must be deleted."""
        if self.timer_at is not None and self.timer_at <= now:
            self.timer_at = None
        expired: list[QueuedMessage] = []
        if self.expiring:
            expired = self.expire_head(now)
            self.schedule_head()
        unused = self.expires_at is not None and self.expires_at <= now and not self.consumers and not self.deleted
        return expired, unused

    # --- consumers and dispatch ---------------------------------------------------------------

    def add_consumer(self, consumer: Subscriber) -> None:
        self.consumers.append(consumer)

    def remove_consumer(self, consumer: Subscriber) -> bool:
        """The consumer leaves; whether the queue must now be deleted (auto-delete, its last consumer)."""
        try:
            self.consumers.remove(consumer)
        except ValueError:
            return False
        if not self.consumers:
            self.touch()
        return self.auto_delete and not self.consumers and not self.deleted

    def dispatch(self, published_at: float | None = None) -> list[QueuedMessage]:
        """Deliver ready messages, round-robin among the consumers that have room (DS-1, PF-3).
        `published_at`: the publish that just enqueued, when the queue may hold messages with a TTL.
        The messages that expired on the way, to be dead-lettered."""
        if self.expiring:
            return self.dispatch_expiring(published_at)
        ready = self.ready
        consumers = self.consumers
        while ready and consumers:
            if not self.hand_out_head():
                break
        return []

    def hand_out_head(self) -> bool:
        """The head goes to the next consumer with room, which moves to the back (DS-1); False when no
        consumer has room."""
        consumers = self.consumers
        for _ in range(len(consumers)):
            consumer = consumers[0]
            consumers.rotate(-1)
            if consumer.has_room():
                consumer.take(self.ready.pop_head())
                return True
        return False

    def dispatch_expiring(self, published_at: float | None) -> list[QueuedMessage]:
        """dispatch for a queue whose messages may expire: an expired head is never delivered; after a
        publish, what no consumer took at once and is due now (TTL 0) expires."""
        now = self.timers.clock() if published_at is None else published_at
        ready = self.ready
        consumers = self.consumers
        expired: list[QueuedMessage] = []
        while True:
            expired += self.expire_head(now, inclusive=False)
            if not ready or not consumers or not self.hand_out_head():
                break
        if published_at is not None:
            expired += self.expire_head(now)
        self.schedule_head()
        return expired
