"""The virtual host "/": exchanges, queues, bindings, the connections on it, and the durable writes it
asks its owner to commit in batches (group commit, PC-5, DU-2).

The core does no I/O: changes to durable state are appended to the open `Batch`. The owner (the server,
or a test) takes the batch with `take_batch`, commits it to disk, and calls `batch_committed`, which is
when publisher confirms and tx.commit-ok frames waiting on that batch are released.
"""

from __future__ import annotations

import base64
import heapq
import itertools
import os
import time
from typing import TYPE_CHECKING, Any

from pamqp import encode

from impl.core.exchanges import EXCHANGE_TYPES, Exchange
from impl.core.messages import Message, QueuedMessage, dead_lettered
from impl.core.queues import Queue
from impl.core.ttl import deadline, message_ttl

if TYPE_CHECKING:
    from impl.core.channel import Channel
    from impl.core.connection import Connection

DEFAULT_USERS = {"guest": "guest"}
LOOPBACK_ONLY_USERS = frozenset({"guest"})
PREDECLARED_EXCHANGES = (
    ("", "direct"),
    ("amq.direct", "direct"),
    ("amq.fanout", "fanout"),
    ("amq.topic", "topic"),
    ("amq.headers", "headers"),
    ("amq.match", "headers"),
)


def encode_table(arguments: dict | None) -> bytes:
    return encode.field_table(arguments or {})


class Batch:
    """Durable writes to commit together, and what to release once they are on disk."""

    __slots__ = ("ops", "inserts", "completions")

    def __init__(self) -> None:
        self.ops: list[tuple | None] = []
        self.inserts: dict[tuple[str, int], int] = {}
        # (channel, what, argument): released by channel.on_committed once the batch is on disk
        self.completions: list[tuple["Channel", str, int]] = []

    def __bool__(self) -> bool:
        return bool(self.ops) or bool(self.completions)

    def writes(self) -> list[tuple]:
        return [op for op in self.ops if op is not None]


def automatic_deaths(message: Message) -> set[str]:
    """The queues a dead-lettered message died in with no client rejection on the way (RabbitMQ breaks
    such cycles by dropping the message instead of dead-lettering it into them again)."""
    deaths = message.headers().get("x-death") or []
    if any(isinstance(d, dict) and d.get("reason") == "rejected" for d in deaths):
        return set()
    return {d.get("queue") for d in deaths if isinstance(d, dict)}


def random_name(prefix: str) -> str:
    """A server-generated name like RabbitMQ's: amq.gen-XXXXXXXXXXXXXXXXXXXXXX."""
    return prefix + base64.urlsafe_b64encode(os.urandom(16)).decode("ascii").rstrip("=")


class Broker:
    """The one virtual host of this broker and its durable-write batches."""

    def __init__(self, users: dict[str, str] | None = None) -> None:
        self.users = dict(DEFAULT_USERS if users is None else users)
        self.exchanges: dict[str, Exchange] = {}
        self.queues: dict[str, Queue] = {}
        self.connections: set["Connection"] = set()
        self.dirty: set["Connection"] = set()
        self.batch = Batch()
        self.next_connection_id = 1
        self.clock = time.monotonic  # the core's only clock: message TTL and queue expiry (impl.core.ttl)
        self.timers: list[tuple[float, int, Queue]] = []  # (when, tie-breaker, queue): a heap
        self.timer_numbers = itertools.count()
        for name, kind in PREDECLARED_EXCHANGES:
            self.exchanges[name] = Exchange(name, kind, True, False, False, {})

    # --- connections --------------------------------------------------------------------------

    def connect(self, peer_is_loopback: bool = True) -> "Connection":
        """A new client connection, waiting for the protocol header."""
        from impl.core.connection import Connection

        connection = Connection(self, self.next_connection_id, peer_is_loopback)
        self.next_connection_id += 1
        self.connections.add(connection)
        return connection

    def authenticate(self, user: str, password: str, peer_is_loopback: bool) -> bool:
        if self.users.get(user) != password:
            return False
        return peer_is_loopback or user not in LOOPBACK_ONLY_USERS

    def take_dirty(self) -> list["Connection"]:
        """Connections with bytes to send (or to close) since the last call."""
        dirty = list(self.dirty)
        self.dirty.clear()
        return dirty

    # --- durable writes -----------------------------------------------------------------------

    def take_batch(self) -> Batch | None:
        """The open batch, if it holds anything, replaced by a new empty one."""
        if not self.batch:
            return None
        batch, self.batch = self.batch, Batch()
        return batch

    def batch_committed(self, batch: Batch) -> None:
        """The batch is on disk: release what waited for it."""
        for channel, what, argument in batch.completions:
            if channel.is_open:
                channel.on_committed(what, argument)

    def after_commit(self, channel: "Channel", what: str, argument: int = 0) -> None:
        """Run channel.on_committed(what, argument) once the open batch is on disk."""
        self.batch.completions.append((channel, what, argument))

    def persist_message(self, queue: Queue, qm: QueuedMessage) -> None:
        message = qm.message
        key = (queue.name, qm.seq)
        self.batch.inserts[key] = len(self.batch.ops)
        self.batch.ops.append(
            ("m+", queue.name, qm.seq, message.exchange, message.routing_key, message.properties_raw, message.body)
        )

    def unpersist_message(self, queue: Queue, qm: QueuedMessage) -> None:
        key = (queue.name, qm.seq)
        index = self.batch.inserts.pop(key, None)
        if index is not None:  # written and removed within one batch: neither reaches the disk
            self.batch.ops[index] = None
        else:
            self.batch.ops.append(("m-", queue.name, qm.seq))

    # --- timers (message TTL, x-expires) ----------------------------------------------------------

    def schedule(self, when: float, queue: Queue) -> None:
        """Call queue.on_timer once the clock reaches `when`."""
        heapq.heappush(self.timers, (when, next(self.timer_numbers), queue))

    def next_timer(self) -> float | None:
        """When the owner must next call run_timers (on the clock of `self.clock`), None if never."""
        timers = self.timers
        while timers and timers[0][2].deleted:
            heapq.heappop(timers)
        return timers[0][0] if timers else None

    def run_timers(self, now: float | None = None) -> None:
        """Run every timer that is due: expire messages at queue heads, delete unused queues."""
        now = self.clock() if now is None else now
        timers = self.timers
        while timers and timers[0][0] <= now:
            _, _, queue = heapq.heappop(timers)
            if not queue.deleted:
                queue.on_timer(now)

    # --- exchanges ----------------------------------------------------------------------------

    def declare_exchange(
        self, name: str, kind: str, durable: bool, auto_delete: bool, internal: bool, arguments: dict
    ) -> Exchange:
        assert kind in EXCHANGE_TYPES
        exchange = Exchange(name, kind, durable, auto_delete, internal, arguments)
        self.exchanges[name] = exchange
        if durable:
            self.batch.ops.append(("x+", name, kind, auto_delete, internal, encode_table(arguments)))
        return exchange

    def delete_exchange(self, exchange: Exchange) -> None:
        del self.exchanges[exchange.name]
        exchange.exchange_bindings.clear()
        for source in list(self.exchanges.values()):  # bindings to the deleted exchange go too
            if source.exchange_bindings.pop(exchange.name, None) is not None:
                self._exchange_lost_binding(source)
        for queue_name in list(exchange.bindings):
            queue = exchange.queues[queue_name]
            for routing_key, frozen in exchange.unbind_queue(queue):
                queue.bindings.discard((exchange.name, routing_key, frozen))
        if exchange.durable:
            self.batch.ops.append(("x-", exchange.name))

    # --- queues -------------------------------------------------------------------------------

    def declare_queue(
        self, name: str, durable: bool, exclusive_owner: Any, auto_delete: bool, arguments: dict
    ) -> Queue:
        durable = durable and exclusive_owner is None  # DU-4: an exclusive queue's durable flag is ignored
        queue = Queue(self, name, durable, exclusive_owner, auto_delete, arguments)
        self.queues[name] = queue
        if durable:
            self.batch.ops.append(("q+", name, auto_delete, encode_table(arguments)))
        return queue

    def delete_queue(self, queue: Queue) -> int:
        """Delete a queue: its bindings go, its consumers are cancelled, its ready messages are dropped.
        The number of ready messages it held."""
        if queue.deleted:
            return 0
        count = len(queue.ready)
        queue.deleted = True
        self.queues.pop(queue.name, None)
        for exchange_name, routing_key, frozen in list(queue.bindings):
            exchange = self.exchanges.get(exchange_name)
            if exchange is not None:
                exchange.unbind_queue(queue)
                self._exchange_lost_binding(exchange)
        queue.bindings.clear()
        queue.ready.clear()
        for consumer in list(queue.consumers):
            consumer.channel.consumer_cancelled_by_broker(consumer)
        queue.consumers.clear()
        if queue.durable:
            self.batch.ops.append(("q-", queue.name))
        return count

    def purge_queue(self, queue: Queue) -> int:
        gone = queue.ready.clear()
        for qm in gone:
            queue.forget(qm)
        return len(gone)

    # --- bindings -----------------------------------------------------------------------------

    def bind(self, exchange: Exchange, queue: Queue, routing_key: str, arguments: dict) -> None:
        from impl.core.exchanges import freeze

        if exchange.bind(queue, routing_key, arguments):
            queue.bindings.add((exchange.name, routing_key, freeze(arguments)))
            if exchange.durable and queue.durable:
                self.batch.ops.append(("b+", exchange.name, queue.name, routing_key, encode_table(arguments)))

    def unbind(self, exchange: Exchange, queue: Queue, routing_key: str, arguments: dict) -> None:
        from impl.core.exchanges import freeze

        if exchange.unbind(queue, routing_key, arguments):
            queue.bindings.discard((exchange.name, routing_key, freeze(arguments)))
            if exchange.durable and queue.durable:
                self.batch.ops.append(("b-", exchange.name, queue.name, routing_key, encode_table(arguments)))
            self._exchange_lost_binding(exchange)

    def bind_exchange(self, destination: Exchange, source: Exchange, routing_key: str, arguments: dict) -> None:
        """exchange.bind: messages routed by `source` also go through `destination`."""
        if source.bind_exchange(destination, routing_key, arguments) and source.durable and destination.durable:
            self.batch.ops.append(("e+", source.name, destination.name, routing_key, encode_table(arguments)))

    def unbind_exchange(self, destination_name: str, source: Exchange, routing_key: str, arguments: dict) -> None:
        """exchange.unbind; the source may then be auto-deleted."""
        if source.unbind_exchange(destination_name, routing_key, arguments):
            if source.durable:
                self.batch.ops.append(("e-", source.name, destination_name, routing_key, encode_table(arguments)))
            self._exchange_lost_binding(source)

    def _exchange_lost_binding(self, exchange: Exchange) -> None:
        if exchange.auto_delete and not exchange.has_bindings() and exchange.name in self.exchanges:
            self.delete_exchange(exchange)

    # --- publishing ---------------------------------------------------------------------------

    def route(self, exchange_name: str, message: Message) -> list[Queue]:
        """The queues a message reaches (RT-1); the default exchange routes by queue name. Through
        exchange-to-exchange bindings, chains and cycles included, each exchange routes the message once
        and each queue gets it once, as in RabbitMQ."""
        if exchange_name == "":
            queue = self.queues.get(message.routing_key)
            return [queue] if queue is not None else []
        exchange = self.exchanges.get(exchange_name)
        if exchange is None:
            return []
        queues = exchange.route(message.routing_key, message.headers)
        if not exchange.exchange_bindings:
            return queues
        return self.route_through_exchanges(exchange, message, queues)

    def route_through_exchanges(self, source: Exchange, message: Message, queues: list[Queue]) -> list[Queue]:
        """Follow exchange-to-exchange bindings breadth first, visiting each exchange once."""
        seen_exchanges = {source.name}
        seen_queues = {id(q) for q in queues}
        result = list(queues)
        frontier = [source]
        while frontier:
            next_frontier = []
            for exchange in frontier:
                for destination in exchange.route_to_exchanges(message.routing_key, message.headers):
                    if destination.name in seen_exchanges or destination.name not in self.exchanges:
                        continue
                    seen_exchanges.add(destination.name)
                    next_frontier.append(destination)
                    for queue in destination.route(message.routing_key, message.headers):
                        if id(queue) not in seen_queues:
                            seen_queues.add(id(queue))
                            result.append(queue)
            frontier = next_frontier
        return result

    def dead_letter(self, qm: QueuedMessage, reason: str) -> None:
        """A message rejected without requeue (ACK-6), expired or dropped by a length limit leaves its queue,
        through the queue's dead-letter exchange when it has one."""
        qm.queue.forget(qm)
        self.dead_letter_message(qm.queue, qm.message, reason)

    def dead_letter_message(self, queue: Queue, message: Message, reason: str) -> None:
        """Publish a copy of a message that leaves `queue` to the queue's dead-letter exchange, if any (a
        queue that refuses the copy drops it: dead-lettering is at most once, as in RabbitMQ)."""
        exchange_name = queue.dead_letter_exchange
        if exchange_name is None or exchange_name not in self.exchanges:
            return
        copy = dead_lettered(message, queue.name, reason, exchange_name, queue.dead_letter_routing_key)
        cycle = automatic_deaths(copy)
        for target in self.route(exchange_name, copy):
            if target.name in cycle:  # it would die there again without a client's rejection: dropped
                continue
            if target.enqueue(copy) is not None:
                target.dispatch(copy.published_at)
                target.drop_over_limit()

    # --- recovery -----------------------------------------------------------------------------

    def recover(self, state: Any) -> None:
        """Rebuild durable exchanges, queues, bindings and messages from the store (DU-1, DU-2, DU-3).
        Nothing is outstanding after a restart: every recovered message is ready."""
        from impl.core.exchanges import freeze

        for name, kind, auto_delete, internal, arguments in state.exchanges:
            if name not in self.exchanges:
                self.exchanges[name] = Exchange(name, kind, True, auto_delete, internal, arguments)
        for name, auto_delete, arguments in state.queues:
            self.queues[name] = Queue(self, name, True, None, auto_delete, arguments)
        for exchange_name, queue_name, routing_key, arguments in state.bindings:
            exchange = self.exchanges.get(exchange_name)
            queue = self.queues.get(queue_name)
            if exchange is not None and queue is not None and exchange.bind(queue, routing_key, arguments):
                queue.bindings.add((exchange_name, routing_key, freeze(arguments)))
        for source_name, destination_name, routing_key, arguments in state.exchange_bindings:
            source, destination = self.exchanges.get(source_name), self.exchanges.get(destination_name)
            if source is not None and destination is not None:
                source.bind_exchange(destination, routing_key, arguments)
        for queue_name, seq, exchange, routing_key, properties_raw, body, redelivered in state.messages:
            queue = self.queues.get(queue_name)
            if queue is None:
                continue
            message = Message(exchange, routing_key, properties_raw, body, True, message_ttl(properties_raw))
            qm = QueuedMessage(seq, message, queue, redelivered=redelivered, on_disk=True)
            if queue.message_ttl is not None or message.ttl is not None:  # TTLs count again from recovery
                message.published_at = self.clock()
                qm.deadline = deadline(message.published_at, queue.message_ttl, message.ttl)
                queue.expiring = True
            queue.ready.append(qm)
            queue.next_seq = max(queue.next_seq, seq + 1)
        for queue in self.queues.values():  # timers of recovered queues: TTL at the heads, x-expires
            queue.schedule_head()
            queue.touch()

    def delivered_on_disk(self) -> list[tuple[str, int]]:
        """(queue, publication number) of every message on disk that has been delivered before: a clean
        shutdown records them so that they come back with redelivered=true (RQ-2)."""
        keys = []
        for queue in self.queues.values():
            if queue.durable:
                keys += [(queue.name, qm.seq) for qm in queue.ready.in_order() if qm.on_disk and qm.redelivered]
        for connection in self.connections:
            for channel in connection.channels.values():
                for delivery in channel.unacked.values():
                    qm = delivery.qm
                    if qm.on_disk and not qm.queue.deleted:
                        keys.append((qm.queue.name, qm.seq))
        return keys
