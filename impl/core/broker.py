"""The virtual host "/": exchanges, queues, bindings, routing and dead-lettering, the connections on it,
its durable writes (impl.core.journal) and its deadlines (impl.core.timers).

The core does no I/O: changes to durable state go to the journal's open batch. The owner (the server, or
a test) takes the batch with `take_batch`, commits it to disk, and calls `batch_committed`, which is
when publisher confirms and tx.commit-ok frames waiting on that batch are released.

Calls go one way through the core: connection -> channel -> broker -> exchanges, queues -> journal,
timers, messages. A queue returns what leaves it to the broker, which dead-letters it; the broker reaches
consumers and connections only through the interfaces they implement (`queues.Subscriber`, `Client`).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Protocol

from rabbitproof.impl.core.exchanges import EXCHANGE_TYPES, Exchange, freeze
from rabbitproof.impl.core.journal import Batch, Journal, encode_table
from rabbitproof.impl.core.messages import Message, QueuedMessage, dead_lettered
from rabbitproof.impl.core.queues import Queue
from rabbitproof.impl.core.timers import Timers
from rabbitproof.impl.core.ttl import message_ttl

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


class Client(Protocol):
    """A connection on the virtual host, as the broker sees it (impl.core.connection.Connection)."""

    def delivered_on_disk(self) -> list[tuple[str, int]]:
        """(queue, publication number) of the on-disk messages its channels have outstanding."""


def automatic_deaths(message: Message) -> set[str]:
    """The queues a dead-lettered message died in with no client rejection on the way (RabbitMQ breaks
    such cycles by dropping the message instead of dead-lettering it into them again)."""
    deaths = message.headers().get("x-death") or []
    if any(isinstance(d, dict) and d.get("reason") == "rejected" for d in deaths):
        return set()
    return {d.get("queue") for d in deaths if isinstance(d, dict)}


class Broker:
    """The one virtual host of this broker."""

    def __init__(self, users: dict[str, str] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.users = dict(DEFAULT_USERS if users is None else users)
        self.exchanges: dict[str, Exchange] = {}
        self.queues: dict[str, Queue] = {}
        self.connections: set[Client] = set()
        self.dirty: set[Any] = set()  # connections with bytes to send since the owner last looked
        self.next_connection_id = 1
        self.journal = Journal()
        self.timers = Timers(clock)  # the core's only clock: message TTL and queue expiry (impl.core.ttl)
        for name, kind in PREDECLARED_EXCHANGES:
            self.exchanges[name] = Exchange(name, kind, True, False, False, {})

    @property
    def clock(self) -> Callable[[], float]:
        return self.timers.clock

    # --- connections --------------------------------------------------------------------------

    def register(self, connection: Client) -> int:
        """A new client connection (impl.core.connection.Connection registers itself); its number."""
        number = self.next_connection_id
        self.next_connection_id += 1
        self.connections.add(connection)
        return number

    def unregister(self, connection: Client) -> None:
        self.connections.discard(connection)

    def authenticate(self, user: str, password: str, peer_is_loopback: bool) -> bool:
        if self.users.get(user) != password:
            return False
        return peer_is_loopback or user not in LOOPBACK_ONLY_USERS

    def take_dirty(self) -> list[Any]:
        """Connections with bytes to send (or to close) since the last call."""
        dirty = list(self.dirty)
        self.dirty.clear()
        return dirty

    # --- durable writes -----------------------------------------------------------------------

    def take_batch(self) -> Batch | None:
        """The open batch, if it holds anything, replaced by a new empty one."""
        return self.journal.take()

    def batch_committed(self, batch: Batch) -> None:
        """The batch is on disk: release what waited for it."""
        self.journal.committed(batch)

    # --- timers (message TTL, x-expires) ----------------------------------------------------------

    def next_timer(self) -> float | None:
        """When the owner must next call run_timers (on the clock of `self.clock`), None if never."""
        return self.timers.next()

    def run_timers(self, now: float | None = None) -> None:
        """Run every timer that is due: expire messages at queue heads, delete unused queues."""
        now = self.clock() if now is None else now
        while due := self.timers.due(now):
            for queue in due:
                if queue.deleted:
                    continue
                expired, unused = queue.on_timer(now)
                self.dead_letter_all(queue, expired, "expired")
                if unused:
                    self.delete_queue(queue)

    # --- exchanges ----------------------------------------------------------------------------

    def declare_exchange(
        self, name: str, kind: str, durable: bool, auto_delete: bool, internal: bool, arguments: dict
    ) -> Exchange:
        assert kind in EXCHANGE_TYPES
        exchange = Exchange(name, kind, durable, auto_delete, internal, arguments)
        self.exchanges[name] = exchange
        if durable:
            self.journal.write("x+", name, kind, auto_delete, internal, encode_table(arguments))
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
            self.journal.write("x-", exchange.name)

    # --- queues -------------------------------------------------------------------------------

    def declare_queue(
        self, name: str, durable: bool, exclusive_owner: Any, auto_delete: bool, arguments: dict
    ) -> Queue:
        durable = durable and exclusive_owner is None  # DU-4: an exclusive queue's durable flag is ignored
        queue = Queue(name, durable, exclusive_owner, auto_delete, arguments, self.journal, self.timers)
        self.queues[name] = queue
        if durable:
            self.journal.write("q+", name, auto_delete, encode_table(arguments))
        return queue

    def delete_queue(self, queue: Queue) -> int:
        """Delete a queue: its bindings go, its consumers are cancelled, its ready messages are dropped.
        The number of ready messages it held."""
        if queue.deleted:
            return 0
        self.queues.pop(queue.name, None)
        for exchange_name, routing_key, frozen in list(queue.bindings):
            exchange = self.exchanges.get(exchange_name)
            if exchange is not None:
                exchange.unbind_queue(queue)
                self._exchange_lost_binding(exchange)
        queue.bindings.clear()
        count, consumers = queue.discard()
        for consumer in consumers:
            consumer.cancelled()
        if queue.durable:
            self.journal.write("q-", queue.name)
        return count

    def remove_consumer(self, queue: Queue, consumer: Any) -> None:
        """A consumer leaves its queue (basic.cancel, its channel closes); an auto-delete queue goes with
        its last consumer."""
        if queue.remove_consumer(consumer):
            self.delete_queue(queue)

    # --- bindings -----------------------------------------------------------------------------

    def bind(self, exchange: Exchange, queue: Queue, routing_key: str, arguments: dict) -> None:
        if exchange.bind(queue, routing_key, arguments):
            queue.bindings.add((exchange.name, routing_key, freeze(arguments)))
            if exchange.durable and queue.durable:
                self.journal.write("b+", exchange.name, queue.name, routing_key, encode_table(arguments))

    def unbind(self, exchange: Exchange, queue: Queue, routing_key: str, arguments: dict) -> None:
        if exchange.unbind(queue, routing_key, arguments):
            queue.bindings.discard((exchange.name, routing_key, freeze(arguments)))
            if exchange.durable and queue.durable:
                self.journal.write("b-", exchange.name, queue.name, routing_key, encode_table(arguments))
            self._exchange_lost_binding(exchange)

    def bind_exchange(self, destination: Exchange, source: Exchange, routing_key: str, arguments: dict) -> None:
        """exchange.bind: messages routed by `source` also go through `destination`."""
        if source.bind_exchange(destination, routing_key, arguments) and source.durable and destination.durable:
            self.journal.write("e+", source.name, destination.name, routing_key, encode_table(arguments))

    def unbind_exchange(self, destination_name: str, source: Exchange, routing_key: str, arguments: dict) -> None:
        """exchange.unbind; the source may then be auto-deleted."""
        if source.unbind_exchange(destination_name, routing_key, arguments):
            if source.durable:
                self.journal.write("e-", source.name, destination_name, routing_key, encode_table(arguments))
            self._exchange_lost_binding(source)

    def _exchange_lost_binding(self, exchange: Exchange) -> None:
        if exchange.auto_delete and not exchange.has_bindings() and exchange.name in self.exchanges:
            self.delete_exchange(exchange)

    # --- publishing and dispatch ------------------------------------------------------------------

    def publish(self, message: Message) -> tuple[bool, bool, bool]:
        """Route a message and enqueue a copy in each queue it reaches (RT-1, RT-2), then let those queues
        deliver. Whether it reached a queue, whether a copy went to disk, and whether a queue refused it
        (a reject-publish length limit)."""
        queues = self.route(message.exchange, message)
        on_disk = refused = False
        for queue in queues:
            qm = queue.enqueue(message)
            if qm is None:
                refused = True
                if queue.refusals_dead_letter:
                    self.dead_letter_message(queue, message, "maxlen")
            elif qm.on_disk:
                on_disk = True
        for queue in queues:
            self.dispatch(queue, message.published_at)
            if queue.limits is not None:
                self.dead_letter_all(queue, queue.drop_over_limit(), "maxlen")
        return bool(queues), on_disk, refused

    def dispatch(self, queue: Queue, published_at: float | None = None) -> None:
        """Let the queue deliver to its consumers that have room (DS-1); what expires on the way is
        dead-lettered."""
        if not queue.deleted:
            self.dead_letter_all(queue, queue.dispatch(published_at), "expired")

    def get(self, queue: Queue) -> QueuedMessage | None:
        """basic.get: the head of the queue (DS-1), never an expired one; None when the queue is empty."""
        if queue.expires is not None:
            queue.touch()
        if queue.expiring:
            self.dead_letter_all(queue, queue.expire_head(self.clock()), "expired")
        return queue.take_head() if queue.ready else None

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
        """A delivered message rejected without requeue (ACK-6) leaves its queue, through the queue's
        dead-letter exchange when it has one; a deleted queue dead-letters nothing, as in RabbitMQ."""
        queue = qm.queue
        if queue.deleted:
            return
        queue.forget(qm)
        self.dead_letter_message(queue, qm.message, reason)

    def dead_letter_all(self, queue: Queue, gone: list[QueuedMessage], reason: str) -> None:
        """Messages that left `queue` (expired, dropped by a length limit) go to its dead-letter exchange."""
        for qm in gone:
            self.dead_letter_message(queue, qm.message, reason)

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
                self.dispatch(target, copy.published_at)
                self.dead_letter_all(target, target.drop_over_limit(), "maxlen")

    # --- recovery -----------------------------------------------------------------------------

    def recover(self, state: Any) -> None:
        """Rebuild durable exchanges, queues, bindings and messages from the store (DU-1, DU-2, DU-3).
        Nothing is outstanding after a restart: every recovered message is ready."""
        for name, kind, auto_delete, internal, arguments in state.exchanges:
            if name not in self.exchanges:
                self.exchanges[name] = Exchange(name, kind, True, auto_delete, internal, arguments)
        for name, auto_delete, arguments in state.queues:
            self.queues[name] = Queue(name, True, None, auto_delete, arguments, self.journal, self.timers)
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
            queue.restore(QueuedMessage(seq, message, queue, redelivered=redelivered, on_disk=True), self.clock())
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
            keys += connection.delivered_on_disk()
        return keys
