"""One AMQP channel: its methods, outstanding deliveries, consumers, prefetch, confirms and transactions.

Everything that changes a channel's deliveries, confirms or transaction lives in this file. Handlers are
looked up in `HANDLERS` by pamqp method class; a handler refuses a method by raising `Refused`, which the
connection turns into a channel.close or connection.close frame (ER-1). A channel acts on the virtual
host through impl.core.broker, and writes to its connection through the `Link` interface, which
impl.core.connection implements.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable, Protocol

from pamqp import commands, constants

from rabbitproof.impl.core import errors
from rabbitproof.impl.core.broker import Broker
from rabbitproof.impl.core.errors import Refused, vhost_resource
from rabbitproof.impl.core.exchanges import EXCHANGE_TYPES
from rabbitproof.impl.core.frames import ContentHeader, encode_confirm, encode_content, encode_deliver, encode_get_ok
from rabbitproof.impl.core.messages import PERSISTENT, Message, QueuedMessage
from rabbitproof.impl.core.names import random_name
from rabbitproof.impl.core.prefetch import GlobalPrefetch
from rabbitproof.impl.core.queue_arguments import check_consumer_arguments, check_queue_arguments
from rabbitproof.impl.core.queues import Queue
from rabbitproof.impl.core.ttl import message_ttl

Basic = commands.Basic
MAX_MESSAGE_SIZE = 134217728  # RabbitMQ 3.10's default max_message_size
STRING_QUEUE_ARGUMENTS = ("x-dead-letter-exchange", "x-dead-letter-routing-key")
COMPARED_QUEUE_ARGUMENTS = (
    "x-dead-letter-exchange",
    "x-dead-letter-routing-key",
    "x-message-ttl",
    "x-expires",
    "x-max-length",
    "x-max-length-bytes",
    "x-max-priority",
    "x-overflow",
    "x-queue-mode",
    "x-queue-type",
    "x-single-active-consumer",
)

# Channel modes (PC-8, TX-1): which select is allowed from which mode, as data.
MODE_NONE, MODE_CONFIRM, MODE_TX = "none", "confirm", "tx"
MODE_SWITCH = {
    (MODE_NONE, MODE_CONFIRM): None,
    (MODE_CONFIRM, MODE_CONFIRM): None,
    (MODE_TX, MODE_CONFIRM): "cannot switch from tx to confirm mode",
    (MODE_NONE, MODE_TX): None,
    (MODE_TX, MODE_TX): None,
    (MODE_CONFIRM, MODE_TX): "cannot switch from confirm to tx mode",
}


def type_name(value: Any) -> str:
    """The AMQP field-table type RabbitMQ names in inequivalent-argument texts (as pamqp encodes it)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        if -128 <= value <= 127:
            return "byte"
        if -32768 <= value <= 32767:
            return "short"
        if -2147483648 <= value <= 2147483647:
            return "signedint"
        return "long"
    if isinstance(value, (str, bytes)):
        return "longstr"
    if isinstance(value, float):
        return "double"
    if isinstance(value, dict):
        return "table"
    if isinstance(value, list):
        return "array"
    return "void" if value is None else type(value).__name__


def show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


class Link(Protocol):
    """What a channel needs of its connection (impl.core.connection.Connection implements it)."""

    broker: Broker
    frame_max: int
    consumer_cancel_notify: bool

    def write(self, data: bytes) -> None:
        """Queue encoded frames for the socket."""

    def send_method(self, channel: int, method: Any) -> None:
        """Queue one method frame for the socket."""

    def confirm_due(self, channel: "Channel") -> None:
        """The channel has publisher confirms to send with the next output."""

    def replay_held(self, channel: "Channel", held: Any) -> None:
        """Take a frame the channel held back (behind a reply waiting for the disk) in its turn."""


class Consumer:
    """A basic.consume subscription: its queue, acknowledgement mode (AM-1) and per-consumer bound (PF-2)."""

    __slots__ = ("tag", "channel", "queue", "no_ack", "prefetch", "unacked", "exclusive")

    def __init__(self, tag: str, channel: "Channel", queue: Queue, no_ack: bool, prefetch: int, exclusive: bool):
        self.tag = tag
        self.channel = channel
        self.queue = queue
        self.no_ack = no_ack
        self.prefetch = prefetch
        self.unacked = 0
        self.exclusive = exclusive

    def has_room(self) -> bool:
        """Whether a delivery may go to this consumer now (PF-1, PF-2, PF-3; AM-2: no per-consumer bound for
        no-ack, but a reached global limit holds it back, as in RabbitMQ)."""
        channel = self.channel
        if not channel.is_open or channel.global_prefetch.reached():  # a global limit holds no-ack ones too
            return False
        return self.no_ack or not self.prefetch or self.unacked < self.prefetch

    def take(self, qm: QueuedMessage) -> None:
        """Its queue hands it a message: the channel delivers it."""
        self.channel.deliver(self, qm)

    def cancelled(self) -> None:
        """Its queue was deleted."""
        self.channel.consumer_cancelled_by_broker(self)


class Delivery:
    """An outstanding manual-mode delivery (AM-3): its tag, the message, and the consumer (None: basic.get)."""

    __slots__ = ("tag", "qm", "consumer")

    def __init__(self, tag: int, qm: QueuedMessage, consumer: Consumer | None) -> None:
        self.tag = tag
        self.qm = qm
        self.consumer = consumer


class Channel:
    """An open channel of a connection."""

    def __init__(self, connection: Link, number: int) -> None:
        self.connection = connection
        self.broker = connection.broker
        self.number = number
        self.is_open = True
        self.closing = False  # the broker sent channel.close and waits for close-ok (ER-1)
        self.mode = MODE_NONE
        self.next_tag = 1  # DT-1
        self.unacked: dict[int, Delivery] = {}
        self.unacked_order: deque[int] = deque()
        self.consumers: dict[str, Consumer] = {}
        self.consumer_prefetch = 0  # the bound of consumers started from now on (PF-2)
        self.global_prefetch = GlobalPrefetch()
        self.publish_seq = 0  # PC-1
        self.to_confirm: list[int] = []
        self.to_nack: list[int] = []  # publishes a queue refused (reject-publish), nacked with the next flush
        self.waiting_for_disk: deque[int] = deque()
        self.tx_publishes: list[tuple[Message, bool]] = []
        self.tx_settlements: list[tuple[str, list[Delivery], bool]] = []
        self.commit_waiting = False  # tx.commit waits for the disk; later methods wait behind it
        self.held_frames: list[Any] = []  # behind a reply waiting for the disk: methods, (type, payload) content
        self.last_queue: str | None = None
        # content being received: (exchange, routing key, mandatory), header, body parts, bytes so far
        self.content_method: tuple[str, str, bool] | None = None
        self.content_header: ContentHeader | None = None
        self.content_parts: list[bytes] = []
        self.content_received = 0

    # --- output -------------------------------------------------------------------------------

    def send(self, method: Any) -> None:
        self.connection.send_method(self.number, method)

    # --- content assembly (publish) -----------------------------------------------------------

    def on_content_header(self, header: ContentHeader) -> None:
        if header.body_size > MAX_MESSAGE_SIZE:
            exchange, routing_key, _ = self.content_method  # type: ignore[misc]
            self.content_method = None
            raise Refused(
                errors.PRECONDITION_FAILED,
                f"message size {header.body_size} is larger than configured max size {MAX_MESSAGE_SIZE}",
            )
        self.content_header = header
        self.content_parts = []
        self.content_received = 0
        if header.body_size == 0:
            self.content_complete()

    def on_content_body(self, data: bytes) -> bool:
        """Add a body frame; False when it overruns the size the header announced."""
        self.content_received += len(data)
        if self.content_received > self.content_header.body_size:  # type: ignore[union-attr]
            return False
        self.content_parts.append(data)
        if self.content_received == self.content_header.body_size:  # type: ignore[union-attr]
            self.content_complete()
        return True

    def content_complete(self) -> None:
        exchange, routing_key, mandatory = self.content_method  # type: ignore[misc]
        header = self.content_header
        assert header is not None
        parts = self.content_parts
        body = parts[0] if len(parts) == 1 else b"".join(parts)
        self.content_method = None
        self.content_header = None
        self.content_parts = []
        properties_raw, delivery_mode = header.properties_raw, header.delivery_mode
        message = Message(
            exchange, routing_key, properties_raw, body, delivery_mode == PERSISTENT, message_ttl(properties_raw)
        )
        self.publish(message, mandatory)

    # --- publishing (PC-*, TX-2, RT-*) --------------------------------------------------------

    def publish(self, message: Message, mandatory: bool) -> None:
        if self.mode == MODE_TX:
            self.tx_publishes.append((message, mandatory))  # TX-2
            return
        seq = 0
        if self.mode == MODE_CONFIRM:
            self.publish_seq += 1
            seq = self.publish_seq
        on_disk, refused = self.route_and_enqueue(message, mandatory)
        if seq:
            if refused:  # a queue at its length limit refused it (reject-publish): basic.nack
                self.to_nack.append(seq)
                self.connection.confirm_due(self)
            elif on_disk:  # PC-5: confirmed once the batch holding it is committed
                self.waiting_for_disk.append(seq)
                self.broker.journal.after_commit(self.confirm_on_disk, seq)
            else:  # PC-4 and transient messages: confirmed now, after any basic.return
                self.to_confirm.append(seq)
                self.connection.confirm_due(self)

    def route_and_enqueue(self, message: Message, mandatory: bool) -> tuple[bool, bool]:
        """Route a message, enqueue a copy in each queue (RT-2), return it if unroutable and mandatory
        (RT-3); whether any copy went to disk, and whether any queue refused it (length limit)."""
        reached, on_disk, refused = self.broker.publish(message)
        if not reached and mandatory:
            self.send_return(message)
        return on_disk, refused

    def send_return(self, message: Message) -> None:
        self.send(
            Basic.Return(
                reply_code=errors.NO_ROUTE.value,
                reply_text="NO_ROUTE",
                exchange=message.exchange,
                routing_key=message.routing_key,
            )
        )
        self.connection.write(
            encode_content(self.number, message.properties_raw, message.body, self.connection.frame_max)
        )

    def confirm_on_disk(self, seq: int) -> None:
        """The batch holding publish `seq` is on disk (PC-5): its confirm is due."""
        if not self.is_open:
            return
        waiting = self.waiting_for_disk
        if waiting and waiting[0] == seq:
            waiting.popleft()
        else:
            waiting.remove(seq)
        self.to_confirm.append(seq)
        self.connection.confirm_due(self)

    def commit_on_disk(self, _: int) -> None:
        """The batch a tx.commit waited for is on disk (TX-7): commit-ok, then the methods held behind it."""
        self.reply_written(commands.Tx.CommitOk())

    def reply_on_disk(self, reply: Any) -> None:
        """Send `reply` once the open batch is on disk; the channel's later methods wait behind it."""
        self.commit_waiting = True
        self.broker.journal.after_commit(lambda _: self.reply_written(reply))

    def reply_written(self, reply: Any) -> None:
        """The batch a reply waited for is on disk: the reply, then the methods held behind it."""
        if not self.is_open:
            return
        self.commit_waiting = False
        self.send(reply)
        held, self.held_frames = self.held_frames, []
        for frame in held:
            self.connection.replay_held(self, frame)

    def flush_confirms(self) -> None:
        """Send the confirms that are due: one basic.ack multiple=true for those below every confirm still
        waiting for the disk (PC-3), single acks for the others (PC-7)."""
        out = []
        if self.to_nack:  # before any ack multiple=true that would cover them
            out = [encode_confirm(self.number, tag, False, positive=False) for tag in sorted(self.to_nack)]
            self.to_nack = []
        tags = sorted(self.to_confirm)
        self.to_confirm = []
        if not self.is_open or not (tags or out):
            return
        floor = self.waiting_for_disk[0] if self.waiting_for_disk else None
        below = tags if floor is None else [t for t in tags if t < floor]
        above = [] if floor is None else [t for t in tags if t > floor]
        if below:
            out.append(encode_confirm(self.number, below[-1], len(below) > 1))
        for tag in above:
            out.append(encode_confirm(self.number, tag, False))
        self.connection.write(b"".join(out))

    # --- delivering (DT-*, AM-*, RQ-2) --------------------------------------------------------

    def deliver(self, consumer: Consumer, qm: QueuedMessage) -> None:
        tag = self.next_tag
        self.next_tag = tag + 1
        message = qm.message
        connection = self.connection
        connection.write(
            encode_deliver(self.number, consumer.tag, tag, qm.redelivered, message.exchange, message.routing_key)
            + encode_content(self.number, message.properties_raw, message.body, connection.frame_max)
        )
        if consumer.no_ack:
            qm.queue.forget(qm)  # AM-2
        else:
            self.unacked[tag] = Delivery(tag, qm, consumer)
            self.unacked_order.append(tag)
            consumer.unacked += 1
            self.global_prefetch.delivered()

    def consumer_cancelled_by_broker(self, consumer: Consumer) -> None:
        """The consumer's queue was deleted: forget the consumer and tell the client (basic.cancel)."""
        if self.consumers.get(consumer.tag) is consumer:
            del self.consumers[consumer.tag]
            if self.is_open and self.connection.consumer_cancel_notify:
                self.send(Basic.Cancel(consumer_tag=consumer.tag, nowait=True))

    # --- settling (ACK-*) ---------------------------------------------------------------------

    def take_deliveries(self, tag: int, multiple: bool) -> list[Delivery]:
        """Remove and return the deliveries a settlement names (ACK-1, ACK-2, ACK-3), or refuse it whole
        when the tag is not outstanding on this channel (ACK-4)."""
        unacked = self.unacked
        if multiple and tag == 0:
            taken = [unacked[t] for t in self.unacked_order if t in unacked]
            unacked.clear()
            self.unacked_order.clear()
            return taken
        if tag not in unacked:
            raise Refused(errors.PRECONDITION_FAILED, f"unknown delivery tag {tag}")
        if not multiple:
            return [unacked.pop(tag)]
        taken = []
        order = self.unacked_order
        while order and order[0] <= tag:
            delivery = unacked.pop(order.popleft(), None)
            if delivery is not None:
                taken.append(delivery)
        return taken

    def release(self, deliveries: list[Delivery]) -> dict[Queue, None]:
        """Free the prefetch room the deliveries held (PF-3); the queues that may now dispatch, in order:
        the settled deliveries' queues first, then (under a global limit) the channel's other consumers'."""
        wake: dict[Queue, None] = {}
        for delivery in deliveries:
            consumer = delivery.consumer
            if consumer is not None:
                consumer.unacked -= 1
                wake[consumer.queue] = None
        if wake and self.global_prefetch:
            self.global_prefetch.settled(sum(1 for d in deliveries if d.consumer is not None))
            for consumer in self.consumers.values():
                wake[consumer.queue] = None
        return wake

    def apply_settlement(self, kind: str, deliveries: list[Delivery], requeue: bool) -> None:
        for queue in self.settled(kind, deliveries, requeue):
            self.broker.dispatch(queue)

    def settled(self, kind: str, deliveries: list[Delivery], requeue: bool) -> dict[Queue, None]:
        """Settle `deliveries` at once (one limiter ack); the queues that may now dispatch, in order."""
        wake = self.release(deliveries)
        if kind == "ack":
            for delivery in deliveries:
                delivery.qm.queue.forget(delivery.qm)
        elif requeue:  # ACK-6, RQ-1, RQ-2
            for delivery in deliveries:
                queue = delivery.qm.queue
                queue.requeue(delivery.qm)
                wake[queue] = None
        else:
            for delivery in deliveries:
                self.broker.dead_letter(delivery.qm, "rejected")
        return wake

    def settle(self, kind: str, tag: int, multiple: bool, requeue: bool) -> None:
        deliveries = self.take_deliveries(tag, multiple)
        if self.mode == MODE_TX:  # TX-3: held back until commit
            self.tx_settlements.append((kind, deliveries, requeue))
        else:
            self.apply_settlement(kind, deliveries, requeue)

    def requeue_outstanding(self) -> None:
        """Requeue every outstanding delivery of the channel (RQ-4, RQ-5), including settlements held
        in an uncommitted transaction."""
        deliveries = [self.unacked[t] for t in self.unacked_order if t in self.unacked]
        for _, held, _ in self.tx_settlements:
            deliveries += held
        self.tx_settlements = []
        self.unacked.clear()
        self.unacked_order.clear()
        self.apply_settlement("requeue", deliveries, True)

    # --- closing ------------------------------------------------------------------------------

    def teardown(self, closing: bool = False) -> None:
        """The channel closes (ER-1): consumers go, outstanding deliveries are requeued (RQ-4). A channel
        that is only closing (it waits for a close-ok), as in RabbitMQ 3.10.8, gives back at once what
        its consumers took and what came from the queues it consumes, and keeps the basic.get deliveries
        of other queues until it is gone (``requeue_outstanding`` then)."""
        if not self.is_open:
            return
        self.is_open = False
        self.content_method = None
        self.tx_publishes = []
        self.held_frames = []
        consumers = list(self.consumers.values())
        self.consumers.clear()
        for consumer in consumers:
            self.broker.remove_consumer(consumer.queue, consumer)
        if not closing:
            self.requeue_outstanding()
            return
        consumed = {consumer.queue for consumer in consumers}
        for _, held, _ in self.tx_settlements:      # held back by the transaction: outstanding again
            for delivery in held:
                self.unacked[delivery.tag] = delivery
        self.tx_settlements = []
        self.unacked_order = sorted(self.unacked)
        now = [self.unacked[t] for t in self.unacked_order
               if self.unacked[t].consumer is not None or self.unacked[t].qm.queue in consumed]
        for delivery in now:
            del self.unacked[delivery.tag]
        self.unacked_order = [t for t in self.unacked_order if t in self.unacked]
        self.apply_settlement("requeue", now, True)

    # --- queue and exchange lookups -----------------------------------------------------------

    def queue_name(self, name: str) -> str:
        if name:
            return name
        if self.last_queue is None:
            raise Refused(errors.NOT_FOUND, "no previously declared queue")
        return self.last_queue

    def check_exclusive(self, queue: Queue) -> None:
        owner = queue.exclusive_owner
        if owner is not None and owner is not self.connection:
            raise Refused(errors.RESOURCE_LOCKED, locked_text(queue.name))

    def find_queue(self, name: str) -> Queue:
        queue = self.broker.queues.get(name)
        if queue is None:
            raise Refused(errors.NOT_FOUND, "no " + vhost_resource("queue", name))
        self.check_exclusive(queue)
        return queue

    def find_exchange(self, name: str) -> Any:
        exchange = self.broker.exchanges.get(name)
        if exchange is None:
            raise Refused(errors.NOT_FOUND, "no " + vhost_resource("exchange", name))
        return exchange

    def wake_consumer_queues(self) -> None:
        for queue in dict.fromkeys(c.queue for c in self.consumers.values()):
            self.broker.dispatch(queue)

    # --- method handlers ----------------------------------------------------------------------

    def on_channel_flow(self, m: commands.Channel.Flow) -> None:
        if not m.active:
            raise Refused(errors.NOT_IMPLEMENTED, "active=false")
        self.send(commands.Channel.FlowOk(active=True))

    def on_exchange_declare(self, m: commands.Exchange.Declare) -> None:
        name, kind = m.exchange, m.exchange_type
        broker = self.broker
        if name == "":
            raise Refused(errors.ACCESS_REFUSED, "operation not permitted on the default exchange")
        if m.passive:
            self.find_exchange(name)
            if not m.nowait:
                self.send(commands.Exchange.DeclareOk())
            return
        if kind not in EXCHANGE_TYPES:
            raise Refused(errors.COMMAND_INVALID, f"unknown exchange type '{kind}'")
        check_name("exchange", name)
        existing = broker.exchanges.get(name)
        if existing is None:
            if name.startswith("amq."):
                raise Refused(
                    errors.ACCESS_REFUSED, f"exchange name '{name}' contains reserved prefix 'amq.*'"
                )
            broker.declare_exchange(name, kind, m.durable, m.auto_delete, m.internal, dict(m.arguments or {}))
        else:
            for arg, received, current in (
                ("type", kind, existing.kind),
                ("durable", m.durable, existing.durable),
                ("auto_delete", m.auto_delete, existing.auto_delete),
                ("internal", m.internal, existing.internal),
            ):
                if received != current:
                    raise Refused(
                        errors.PRECONDITION_FAILED,
                        f"inequivalent arg '{arg}' for {vhost_resource('exchange', name)}: "
                        f"received '{show(received)}' but current is '{show(current)}'",
                    )
        if not m.nowait:
            self.send(commands.Exchange.DeclareOk())

    def on_exchange_delete(self, m: commands.Exchange.Delete) -> None:
        name = m.exchange
        if name == "":
            raise Refused(errors.ACCESS_REFUSED, "operation not permitted on the default exchange")
        if name.startswith("amq."):  # any amq.* name, declared or not, as RabbitMQ 3.10.8 refuses it
            raise Refused(errors.ACCESS_REFUSED, f"deletion of system {vhost_resource('exchange', name)} not allowed")
        exchange = self.broker.exchanges.get(name)
        if exchange is not None:
            if m.if_unused and exchange.has_bindings():
                raise Refused(errors.PRECONDITION_FAILED, vhost_resource("exchange", name) + " in use")
            self.broker.delete_exchange(exchange)
        if not m.nowait:
            self.send(commands.Exchange.DeleteOk())

    def on_exchange_bind(self, m: commands.Exchange.Bind) -> None:
        """Exchange-to-exchange binding: messages routed by the source also go through the destination."""
        if m.source == "" or m.destination == "":
            raise Refused(errors.ACCESS_REFUSED, "operation not permitted on the default exchange")
        source = self.find_exchange(m.source)  # RabbitMQ names a missing source first
        destination = self.find_exchange(m.destination)
        self.broker.bind_exchange(destination, source, m.routing_key, dict(m.arguments or {}))
        if not m.nowait:
            self.send(commands.Exchange.BindOk())

    def on_exchange_unbind(self, m: commands.Exchange.Unbind) -> None:
        """Remove an exchange-to-exchange binding; unbinding what does not exist succeeds."""
        if m.source == "" or m.destination == "":
            raise Refused(errors.ACCESS_REFUSED, "operation not permitted on the default exchange")
        source = self.broker.exchanges.get(m.source)
        if source is not None:
            self.broker.unbind_exchange(m.destination, source, m.routing_key, dict(m.arguments or {}))
        if not m.nowait:
            self.send(commands.Exchange.UnbindOk())

    def on_queue_declare(self, m: commands.Queue.Declare) -> None:
        broker = self.broker
        if m.passive:
            queue = self.find_queue(self.queue_name(m.queue))
            queue.touch()  # a passive declare renews x-expires too, as in RabbitMQ
            self.last_queue = queue.name
            if not m.nowait:
                self.send(
                    commands.Queue.DeclareOk(
                        queue=queue.name, message_count=len(queue.ready), consumer_count=len(queue.consumers)
                    )
                )
            return
        name = m.queue or random_name("amq.gen-")
        arguments = dict(m.arguments or {})
        check_name("queue", name)
        if m.queue.startswith("amq."):
            raise Refused(errors.ACCESS_REFUSED, f"queue name '{name}' contains reserved prefix 'amq.*'")
        check_queue_arguments(name, arguments)
        for arg in STRING_QUEUE_ARGUMENTS:
            if arg in arguments and not isinstance(arguments[arg], (str, bytes)):
                raise Refused(
                    errors.PRECONDITION_FAILED,
                    f"invalid type '{type_name(arguments[arg])}' for arg '{arg}' in {vhost_resource('queue', name)}",
                )
            if isinstance(arguments.get(arg), bytes):
                arguments[arg] = arguments[arg].decode("utf-8", "replace")
        queue = broker.queues.get(name)
        created = queue is None
        if queue is None:
            owner = self.connection if m.exclusive else None
            queue = broker.declare_queue(name, m.durable, owner, m.auto_delete, arguments)
            queue.declared_durable = m.durable
        else:
            self.check_exclusive(queue)
            if bool(m.exclusive) != (queue.exclusive_owner is not None):
                raise Refused(errors.RESOURCE_LOCKED, locked_text(name))
            self.check_queue_equivalence(queue, m, arguments)
        queue.touch()
        self.last_queue = name
        if not m.nowait:
            reply = commands.Queue.DeclareOk(queue=name, message_count=len(queue.ready),
                                             consumer_count=len(queue.consumers))
            if created and queue.durable:
                self.reply_on_disk(reply)   # DU-1: a durable queue survives a crash once declare-ok is out
            else:
                self.send(reply)

    def check_queue_equivalence(self, queue: Queue, m: commands.Queue.Declare, arguments: dict) -> None:
        where = vhost_resource("queue", queue.name)
        declared_durable = getattr(queue, "declared_durable", queue.durable)
        compared = [("auto_delete", m.auto_delete, queue.auto_delete)]
        if queue.exclusive_owner is None:       # RabbitMQ 3.10.8 never compares an exclusive queue's durable flag
            compared.insert(0, ("durable", m.durable, declared_durable))
        for arg, received, current in compared:
            if bool(received) != bool(current):
                raise Refused(
                    errors.PRECONDITION_FAILED,
                    f"inequivalent arg '{arg}' for {where}: received '{show(received)}' but current is '{show(current)}'",
                )
        for arg in COMPARED_QUEUE_ARGUMENTS:
            received, current = arguments.get(arg), queue.arguments.get(arg)
            if received == current:
                continue
            if current is None:
                detail = f"received the value '{show(received)}' of type '{type_name(received)}' but current is none"
            elif received is None:
                detail = f"received none but current is the value '{show(current)}' of type '{type_name(current)}'"
            else:
                detail = f"received '{show(received)}' but current is '{show(current)}'"
            raise Refused(errors.PRECONDITION_FAILED, f"inequivalent arg '{arg}' for {where}: {detail}")

    def binding_target(self, m: Any) -> tuple[Any, Queue, str]:
        name = self.queue_name(m.queue)
        routing_key = m.routing_key if (m.queue or m.routing_key) else name
        if m.exchange == "":
            raise Refused(errors.ACCESS_REFUSED, "operation not permitted on the default exchange")
        queue = self.find_queue(name)
        exchange = self.find_exchange(m.exchange)
        return exchange, queue, routing_key

    def on_queue_bind(self, m: commands.Queue.Bind) -> None:
        exchange, queue, routing_key = self.binding_target(m)
        self.broker.bind(exchange, queue, routing_key, dict(m.arguments or {}))
        if not m.nowait:  # a durable binding survives a crash once bind-ok is out, like its queue (DU-1)
            (self.reply_on_disk if exchange.durable and queue.durable else self.send)(commands.Queue.BindOk())

    def on_queue_unbind(self, m: commands.Queue.Unbind) -> None:
        name = self.queue_name(m.queue)
        if m.exchange == "":
            raise Refused(errors.ACCESS_REFUSED, "operation not permitted on the default exchange")
        queue = self.broker.queues.get(name)  # unbinding what does not exist succeeds, as in RabbitMQ
        exchange = self.broker.exchanges.get(m.exchange)
        if queue is not None:
            self.check_exclusive(queue)
            if exchange is not None:
                self.broker.unbind(exchange, queue, m.routing_key, dict(m.arguments or {}))
        self.send(commands.Queue.UnbindOk())

    def on_queue_purge(self, m: commands.Queue.Purge) -> None:
        queue = self.find_queue(self.queue_name(m.queue))
        count = queue.purge()
        if not m.nowait:
            self.send(commands.Queue.PurgeOk(message_count=count))

    def on_queue_delete(self, m: commands.Queue.Delete) -> None:
        name = self.queue_name(m.queue)
        queue = self.broker.queues.get(name)
        count = 0
        if queue is not None:
            self.check_exclusive(queue)
            where = vhost_resource("queue", name)
            if m.if_empty and queue.ready:  # unacked messages do not count; checked first, as in RabbitMQ
                raise Refused(errors.PRECONDITION_FAILED, where + " not empty")
            if m.if_unused and queue.consumers:  # basic.get deliveries do not count
                raise Refused(errors.PRECONDITION_FAILED, where + " in use")
            count = len(queue.ready)
        if not m.nowait:  # before the basic.cancel the deletion sends to the queue's consumers
            self.send(commands.Queue.DeleteOk(message_count=count))
        if queue is not None:
            self.broker.delete_queue(queue)

    def on_basic_qos(self, m: Basic.Qos) -> None:
        if m.prefetch_size:
            raise Refused(errors.NOT_IMPLEMENTED, f"prefetch_size!=0 ({m.prefetch_size})")
        if m.global_:
            self.global_prefetch.set(m.prefetch_count, len(self.unacked))
        else:  # RabbitMQ's unlimit: a per-consumer qos removes the channel-wide limit
            self.consumer_prefetch = m.prefetch_count
            self.global_prefetch.remove()
        self.send(Basic.QosOk())
        self.wake_consumer_queues()

    def on_basic_consume(self, m: Basic.Consume) -> None:
        tag = m.consumer_tag or random_name("amq.ctag-")
        if tag in self.consumers:  # before the queue is looked up, as in RabbitMQ
            raise Refused(errors.NOT_ALLOWED, f"attempt to reuse consumer tag '{tag}'")
        queue = self.find_queue(self.queue_name(m.queue))
        if m.arguments:
            check_consumer_arguments(m.arguments)
        if queue.consumers and (m.exclusive or any(c.exclusive for c in queue.consumers)):
            raise Refused(errors.ACCESS_REFUSED, vhost_resource("queue", queue.name) + " in exclusive use")
        consumer = Consumer(tag, self, queue, bool(m.no_ack), self.consumer_prefetch, bool(m.exclusive))
        self.consumers[tag] = consumer
        if not m.nowait:
            self.send(Basic.ConsumeOk(consumer_tag=tag))
        queue.add_consumer(consumer)
        self.broker.dispatch(queue)

    def on_basic_cancel(self, m: Basic.Cancel) -> None:
        consumer = self.consumers.pop(m.consumer_tag, None)
        if not m.nowait:
            self.send(Basic.CancelOk(consumer_tag=m.consumer_tag))
        if consumer is not None:
            self.broker.remove_consumer(consumer.queue, consumer)

    def on_basic_publish(self, m: Basic.Publish) -> None:
        if m.immediate:  # RabbitMQ refuses it before anything else: a connection error
            raise Refused(errors.NOT_IMPLEMENTED, "immediate=true")
        if m.exchange:
            exchange = self.find_exchange(m.exchange)
            if exchange.internal:
                raise Refused(
                    errors.ACCESS_REFUSED,
                    f"cannot publish to internal {vhost_resource('exchange', m.exchange)}",
                )
        self.content_method = (m.exchange, m.routing_key, bool(m.mandatory))

    def on_basic_get(self, m: Basic.Get) -> None:
        queue = self.find_queue(self.queue_name(m.queue))
        qm = self.broker.get(queue)  # DS-1, never an expired message
        if qm is None:
            self.send(Basic.GetEmpty())  # DS-2
            return
        tag = self.next_tag
        self.next_tag = tag + 1
        message = qm.message
        self.connection.write(
            encode_get_ok(self.number, tag, qm.redelivered, message.exchange, message.routing_key, len(queue.ready))
            + encode_content(self.number, message.properties_raw, message.body, self.connection.frame_max)
        )
        if m.no_ack:
            queue.forget(qm)
        else:
            self.unacked[tag] = Delivery(tag, qm, None)  # PF-4: not counted against prefetch
            self.unacked_order.append(tag)

    def on_basic_ack(self, m: Basic.Ack) -> None:
        self.settle("ack", unsigned(m.delivery_tag), bool(m.multiple), False)

    def on_basic_reject(self, m: Basic.Reject) -> None:
        self.settle("reject", unsigned(m.delivery_tag), False, bool(m.requeue))

    def on_basic_nack(self, m: Basic.Nack) -> None:
        self.settle("nack", unsigned(m.delivery_tag), bool(m.multiple), bool(m.requeue))

    def on_basic_recover(self, m: Basic.Recover) -> None:
        if not m.requeue:
            raise Refused(errors.NOT_IMPLEMENTED, "requeue=false")  # RQ-5
        self.send(Basic.RecoverOk())
        self.requeue_outstanding()

    def on_basic_recover_async(self, m: Basic.RecoverAsync) -> None:
        if not m.requeue:
            raise Refused(errors.NOT_IMPLEMENTED, "requeue=false")
        self.requeue_outstanding()

    def select_mode(self, mode: str) -> None:
        refusal = MODE_SWITCH[(self.mode, mode)]
        if refusal is not None:
            raise Refused(errors.PRECONDITION_FAILED, refusal)
        self.mode = mode

    def on_confirm_select(self, m: commands.Confirm.Select) -> None:
        self.select_mode(MODE_CONFIRM)  # PC-1, PC-8
        if not m.nowait:
            self.send(commands.Confirm.SelectOk())

    def on_tx_select(self, m: commands.Tx.Select) -> None:
        self.select_mode(MODE_TX)  # TX-1, PC-8
        self.send(commands.Tx.SelectOk())

    def on_tx_commit(self, m: commands.Tx.Commit) -> None:
        if self.mode != MODE_TX:
            raise Refused(errors.PRECONDITION_FAILED, "channel is not transactional")  # TX-10
        publishes, self.tx_publishes = self.tx_publishes, []
        settlements, self.tx_settlements = self.tx_settlements, []
        on_disk = False
        for message, mandatory in publishes:  # TX-6: returns go out before commit-ok
            if self.route_and_enqueue(message, mandatory)[0]:
                on_disk = True
        wake: dict[Queue, None] = {}
        for kind, deliveries, requeue in settlement_runs(settlements):
            wake.update(self.settled(kind, deliveries, requeue))
        if on_disk:  # TX-7: the deliveries the commit frees may go out while commit-ok waits
            self.commit_waiting = True
            self.broker.journal.after_commit(self.commit_on_disk)
        else:  # RabbitMQ writes commit-ok before the deliveries its queues then make
            self.send(commands.Tx.CommitOk())
        for queue in wake:
            self.broker.dispatch(queue)

    def on_tx_rollback(self, m: commands.Tx.Rollback) -> None:
        if self.mode != MODE_TX:
            raise Refused(errors.PRECONDITION_FAILED, "channel is not transactional")  # TX-10
        self.tx_publishes = []
        settlements, self.tx_settlements = self.tx_settlements, []
        for _, deliveries, _ in settlements:  # TX-3: the deliveries stay outstanding
            for delivery in deliveries:
                self.unacked[delivery.tag] = delivery
        self.unacked = dict(sorted(self.unacked.items()))
        self.unacked_order = deque(self.unacked)
        self.send(commands.Tx.RollbackOk())


def settlement_runs(settlements: list) -> list:
    """A commit's held-back settlements as RabbitMQ 3.10.8's channel applies them (TX-3): consecutive
    settlements of one kind (ack, requeue, discard) merged into one, oldest first, so that the global
    limit counts each run off at once (rabbit_channel merges them as they are held back)."""
    runs: list = []
    for kind, deliveries, requeue in settlements:
        key = "ack" if kind == "ack" else ("requeue" if requeue else "discard")
        if runs and runs[-1][0] == key:
            runs[-1][2].extend(deliveries)
        else:
            runs.append((key, kind, list(deliveries), requeue))
    return [(kind, deliveries, requeue) for _, kind, deliveries, requeue in runs]


def unsigned(tag: int) -> int:
    """A delivery tag as sent: a 64-bit unsigned number, which pamqp decodes as signed (DT-3)."""
    return tag % (1 << 64)


def check_name(kind: str, name: str) -> None:
    """Names must be sendable in replies: pamqp encodes only names of its queue-name / exchange-name domain."""
    if not constants.DOMAIN_REGEX[f"{kind}-name"].match(name):
        raise Refused(errors.PRECONDITION_FAILED, f"invalid {kind} name '{name}'")


def locked_text(name: str) -> str:
    return (
        f"cannot obtain exclusive access to locked {vhost_resource('queue', name)}. It could be originally "
        "declared on another connection or the exclusive property value does not match that of the "
        "original declaration."
    )


# Method class -> handler (ER-1: anything not here is refused by the connection as an unimplemented method).
HANDLERS: dict[type, Callable[[Channel, Any], None]] = {
    commands.Channel.Flow: Channel.on_channel_flow,
    commands.Exchange.Declare: Channel.on_exchange_declare,
    commands.Exchange.Delete: Channel.on_exchange_delete,
    commands.Exchange.Bind: Channel.on_exchange_bind,
    commands.Exchange.Unbind: Channel.on_exchange_unbind,
    commands.Queue.Declare: Channel.on_queue_declare,
    commands.Queue.Bind: Channel.on_queue_bind,
    commands.Queue.Unbind: Channel.on_queue_unbind,
    commands.Queue.Purge: Channel.on_queue_purge,
    commands.Queue.Delete: Channel.on_queue_delete,
    Basic.Qos: Channel.on_basic_qos,
    Basic.Consume: Channel.on_basic_consume,
    Basic.Cancel: Channel.on_basic_cancel,
    Basic.Publish: Channel.on_basic_publish,
    Basic.Get: Channel.on_basic_get,
    Basic.Ack: Channel.on_basic_ack,
    Basic.Reject: Channel.on_basic_reject,
    Basic.Nack: Channel.on_basic_nack,
    Basic.Recover: Channel.on_basic_recover,
    Basic.RecoverAsync: Channel.on_basic_recover_async,
    commands.Confirm.Select: Channel.on_confirm_select,
    commands.Tx.Select: Channel.on_tx_select,
    commands.Tx.Commit: Channel.on_tx_commit,
    commands.Tx.Rollback: Channel.on_tx_rollback,
}
