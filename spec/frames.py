"""Frames: the AMQP methods that cross the wire in the model, and how they read.

A frame in the state is a plain tuple of ints, ``(method, channel, *fields)``, so that states hash
the same in every process (no strings, no None). Content (header and body frames) is folded into
its method: a publish, deliver, get-ok or return carries the message id. That loses no generality
for these semantics, which never look inside a body; payloads are abstracted as small integers
(``msg``), the n-th message published on connection c being ``c * MSG_STRIDE + n``; the stride is
2**32, so that no connection's messages are ever named like another's.
Reply texts are not stored: a close frame carries its reply code, a reason code and one integer
detail, and ``reply_text`` renders the text RabbitMQ 3.10.8 sends.
"""
from __future__ import annotations

from collections import namedtuple
from typing import Any, NamedTuple

MSG_STRIDE = 1 << 32

# Method codes (broker->client confirms reuse BASIC_ACK / BASIC_NACK; the direction tells them apart).
(CHANNEL_OPEN, CHANNEL_OPEN_OK, CHANNEL_CLOSE, CHANNEL_CLOSE_OK,
 CONNECTION_CLOSE, CONNECTION_CLOSE_OK,
 QUEUE_DECLARE, QUEUE_DECLARE_OK, QUEUE_BIND, QUEUE_BIND_OK,
 BASIC_QOS, BASIC_QOS_OK, BASIC_CONSUME, BASIC_CONSUME_OK, BASIC_CANCEL, BASIC_CANCEL_OK,
 BASIC_PUBLISH, BASIC_RETURN, BASIC_DELIVER, BASIC_GET, BASIC_GET_OK, BASIC_GET_EMPTY,
 BASIC_ACK, BASIC_REJECT, BASIC_NACK, BASIC_RECOVER, BASIC_RECOVER_OK,
 CONFIRM_SELECT, CONFIRM_SELECT_OK, TX_SELECT, TX_SELECT_OK, TX_COMMIT, TX_COMMIT_OK,
 TX_ROLLBACK, TX_ROLLBACK_OK, QUEUE_PURGE, QUEUE_PURGE_OK, QUEUE_DELETE, QUEUE_DELETE_OK) = range(1, 40)

# One row per method: the table every other vocabulary derives from (pamqp's names in
# rabbitproof.recording, the conformance suite's replies, the pure reads of `check`, the trace checker's
# client actions). ``fields`` are those the method carries in the model, in order after the channel
# number: pamqp's names, but ``msg`` and ``persistent`` from the content, and ``reason`` and ``detail``
# for a close's reply text. ``answers`` is the request it is the synchronous reply to; ``plain`` marks a
# reply that only says its request was done: a client reading it changes nothing but the wire
# (rabbitproof.check.pure_reads; tests/test_spec_frames.py holds spec.client to it).
CLIENT, BROKER, BOTH = "client", "broker", "both"       # who sends the method


class Method(NamedTuple):
    """One AMQP method of the model."""

    code: int
    name: str                           # as AMQP 0-9-1 writes it: "basic.get-ok"
    fields: tuple[str, ...] = ()
    sender: str = CLIENT
    answers: int = 0                    # the method it is the synchronous reply to (0: none)
    plain: bool = False


_CLOSE = ("reply_code", "reason", "detail")
METHODS: tuple[Method, ...] = (
    Method(CHANNEL_OPEN, "channel.open"),
    Method(CHANNEL_OPEN_OK, "channel.open-ok", (), BROKER, CHANNEL_OPEN),
    Method(CHANNEL_CLOSE, "channel.close", _CLOSE, BOTH),
    Method(CHANNEL_CLOSE_OK, "channel.close-ok", (), BOTH, CHANNEL_CLOSE),
    Method(CONNECTION_CLOSE, "connection.close", _CLOSE, BOTH),
    Method(CONNECTION_CLOSE_OK, "connection.close-ok", (), BOTH, CONNECTION_CLOSE),
    Method(QUEUE_DECLARE, "queue.declare", ("queue", "durable", "exclusive")),
    Method(QUEUE_DECLARE_OK, "queue.declare-ok", ("queue",), BROKER, QUEUE_DECLARE, True),
    Method(QUEUE_BIND, "queue.bind", ("queue", "exchange")),
    Method(QUEUE_BIND_OK, "queue.bind-ok", (), BROKER, QUEUE_BIND, True),
    Method(BASIC_QOS, "basic.qos", ("prefetch_count", "global_", "prefetch_size")),
    Method(BASIC_QOS_OK, "basic.qos-ok", (), BROKER, BASIC_QOS, True),
    Method(BASIC_CONSUME, "basic.consume", ("queue", "consumer_tag", "no_ack", "exclusive")),
    Method(BASIC_CONSUME_OK, "basic.consume-ok", ("consumer_tag",), BROKER, BASIC_CONSUME, True),
    # basic.cancel goes both ways: from the client, and from the broker to a consumer whose queue was deleted.
    Method(BASIC_CANCEL, "basic.cancel", ("consumer_tag",), BOTH),
    Method(BASIC_CANCEL_OK, "basic.cancel-ok", ("consumer_tag",), BROKER, BASIC_CANCEL, True),
    Method(BASIC_PUBLISH, "basic.publish",
           ("exchange", "routing_key", "mandatory", "persistent", "msg", "immediate")),
    Method(BASIC_RETURN, "basic.return", ("reply_code", "msg"), BROKER),
    Method(BASIC_DELIVER, "basic.deliver", ("consumer_tag", "delivery_tag", "redelivered", "msg"), BROKER),
    Method(BASIC_GET, "basic.get", ("queue", "no_ack")),
    Method(BASIC_GET_OK, "basic.get-ok", ("delivery_tag", "redelivered", "msg", "message_count"), BROKER,
           BASIC_GET),
    Method(BASIC_GET_EMPTY, "basic.get-empty", (), BROKER, BASIC_GET),
    Method(BASIC_ACK, "basic.ack", ("delivery_tag", "multiple"), BOTH),
    Method(BASIC_REJECT, "basic.reject", ("delivery_tag", "requeue")),
    Method(BASIC_NACK, "basic.nack", ("delivery_tag", "multiple", "requeue"), BOTH),
    Method(BASIC_RECOVER, "basic.recover", ("requeue",)),
    Method(BASIC_RECOVER_OK, "basic.recover-ok", (), BROKER, BASIC_RECOVER, True),
    Method(CONFIRM_SELECT, "confirm.select"),
    Method(CONFIRM_SELECT_OK, "confirm.select-ok", (), BROKER, CONFIRM_SELECT, True),
    Method(TX_SELECT, "tx.select"),
    Method(TX_SELECT_OK, "tx.select-ok", (), BROKER, TX_SELECT, True),
    Method(TX_COMMIT, "tx.commit"),
    Method(TX_COMMIT_OK, "tx.commit-ok", (), BROKER, TX_COMMIT),
    Method(TX_ROLLBACK, "tx.rollback"),
    Method(TX_ROLLBACK_OK, "tx.rollback-ok", (), BROKER, TX_ROLLBACK, True),
    Method(QUEUE_PURGE, "queue.purge", ("queue",)),
    Method(QUEUE_PURGE_OK, "queue.purge-ok", ("message_count",), BROKER, QUEUE_PURGE, True),
    Method(QUEUE_DELETE, "queue.delete", ("queue", "if_unused", "if_empty")),
    Method(QUEUE_DELETE_OK, "queue.delete-ok", ("message_count",), BROKER, QUEUE_DELETE, True),
)
METHOD_OF: dict[int, Method] = {m.code: m for m in METHODS}
METHOD_NAMES: dict[int, str] = {m.code: m.name for m in METHODS}
METHOD_CODES: dict[str, int] = {m.name: m.code for m in METHODS}
FIELDS: dict[int, tuple[str, ...]] = {m.code: m.fields for m in METHODS if m.fields}


def _class_name(name: str) -> str:
    """``basic.get-ok`` -> ``BasicGetOk``."""
    return "".join(part.capitalize() for part in name.replace("-", ".").split("."))


# Each method's frame class: a named tuple ``(method, channel, *fields)``, read by name
# (``frame.delivery_tag``), equal to and hashing as the plain tuple of its values, so that states hash
# alike in every process and count as before.
FRAME_CLASSES: dict[int, Any] = {
    m.code: namedtuple(_class_name(m.name), ("method", "channel") + m.fields)  # type: ignore[misc]
    for m in METHODS}
globals().update({cls.__name__: cls for cls in FRAME_CLASSES.values()})    # importable: they pickle by name
_ARITY: dict[int, int] = {m.code: 2 + len(m.fields) for m in METHODS}


def make_frame(method: int, channel: int, *values: Any) -> Any:
    """The frame of ``method`` on ``channel``, its fields' ``values`` in the table's order."""
    if len(values) + 2 != _ARITY[method]:
        raise TypeError(f"{METHOD_NAMES[method]} carries {_ARITY[method] - 2} fields "
                        f"({', '.join(FIELDS.get(method, ()))}), not {len(values)}")
    return tuple.__new__(FRAME_CLASSES[method], (method, channel) + values)


def as_frame(values: tuple) -> Any:
    """The frame a plain tuple ``(method, channel, *fields)`` writes (a trace file, a recording)."""
    return make_frame(values[0], values[1], *values[2:])


# Trailing fields a trace may leave out when they are 0 (they are written only when set): the
# publish flag immediate, prefetch_size, and the exclusive flag of basic.consume.
OPTIONAL_BY_METHOD = {BASIC_PUBLISH: "immediate", BASIC_QOS: "prefetch_size", BASIC_CONSUME: "exclusive"}

# Reply codes (AMQP 0-9-1, ER-2).
NO_ROUTE = 312
ACCESS_REFUSED, NOT_FOUND, RESOURCE_LOCKED, PRECONDITION_FAILED = 403, 404, 405, 406
COMMAND_INVALID, CHANNEL_ERROR, NOT_ALLOWED, NOT_IMPLEMENTED = 503, 504, 530, 540
REPLY_SUCCESS = 200

# Reasons: which error it is, so that the text can be rendered (detail is the one integer it names).
(R_NORMAL, R_UNKNOWN_TAG, R_TX_TO_CONFIRM, R_CONFIRM_TO_TX, R_NOT_TX, R_NO_EXCHANGE, R_NO_QUEUE,
 R_LOCKED, R_RECOVER_NO_REQUEUE, R_TAG_REUSED, R_PREFETCH_SIZE, R_IMMEDIATE, R_EXPECTED_OPEN,
 R_SECOND_OPEN, R_UNIMPLEMENTED, R_IN_USE, R_NOT_EMPTY, R_EXCLUSIVE_USE, R_COMMIT_PENDING,
 R_INEQUIVALENT_DURABLE, R_INEQUIVALENT_TRANSIENT) = range(21)
REASONS = 21
# A close read from a broker whose reply text is not judged (AMQP 0-9-1 fixes reply codes, not texts):
# it reads as any close of that channel with the same reply code (spec.network.same_frame).
R_ANY = -1

# Exchanges of the model (RT-1): 0 the default exchange, 1 a fanout exchange, 2 one that is never declared.
DEFAULT_EXCHANGE, FANOUT_EXCHANGE, MISSING_EXCHANGE = 0, 1, 2
EXCHANGE_NAMES = {DEFAULT_EXCHANGE: "", FANOUT_EXCHANGE: "fanout", MISSING_EXCHANGE: "missing"}


def queue_name(q: int) -> str:
    """The name of model queue q (queues are numbered from 0)."""
    return f"q{q}"


def msg_name(msg: int) -> str:
    """A message id as it reads in traces: m<connection>.<n>."""
    return f"m{msg // MSG_STRIDE}.{msg % MSG_STRIDE}"


# The text RabbitMQ 3.10.8 writes for each reason: {n} is the detail as a number, {q} the queue it
# names, {x} the exchange it names.
REPLY_TEXTS = {
    R_UNKNOWN_TAG: "PRECONDITION_FAILED - unknown delivery tag {n}",
    R_TX_TO_CONFIRM: "PRECONDITION_FAILED - cannot switch from tx to confirm mode",
    R_CONFIRM_TO_TX: "PRECONDITION_FAILED - cannot switch from confirm to tx mode",
    R_NOT_TX: "PRECONDITION_FAILED - channel is not transactional",
    R_NO_EXCHANGE: "NOT_FOUND - no exchange '{x}' in vhost '/'",
    R_NO_QUEUE: "NOT_FOUND - no queue '{q}' in vhost '/'",
    R_LOCKED: ("RESOURCE_LOCKED - cannot obtain exclusive access to locked queue '{q}' in vhost '/'. It could "
               "be originally declared on another connection or the exclusive property value does not match "
               "that of the original declaration."),
    R_RECOVER_NO_REQUEUE: "NOT_IMPLEMENTED - requeue=false",
    R_TAG_REUSED: "NOT_ALLOWED - attempt to reuse consumer tag '{n}'",
    R_PREFETCH_SIZE: "NOT_IMPLEMENTED - prefetch_size!=0 ({n})",
    R_IMMEDIATE: "NOT_IMPLEMENTED - immediate=true",
    R_EXPECTED_OPEN: "CHANNEL_ERROR - expected 'channel.open'",
    R_SECOND_OPEN: "CHANNEL_ERROR - second 'channel.open' seen",
    R_UNIMPLEMENTED: "COMMAND_INVALID - unimplemented method",
    R_IN_USE: "PRECONDITION_FAILED - queue '{q}' in vhost '/' in use",
    R_NOT_EMPTY: "PRECONDITION_FAILED - queue '{q}' in vhost '/' not empty",
    R_EXCLUSIVE_USE: "ACCESS_REFUSED - queue '{q}' in vhost '/' in exclusive use",
    R_COMMIT_PENDING: "CHANNEL_ERROR - unexpected command while processing 'tx.commit'",
    R_INEQUIVALENT_DURABLE: ("PRECONDITION_FAILED - inequivalent arg 'durable' for queue '{q}' in vhost '/': "
                             "received 'true' but current is 'false'"),
    R_INEQUIVALENT_TRANSIENT: ("PRECONDITION_FAILED - inequivalent arg 'durable' for queue '{q}' in vhost '/': "
                               "received 'false' but current is 'true'"),
}


def reply_text(code: int, reason: int, detail: int) -> str:
    """The reply text RabbitMQ 3.10.8 sends with a channel.close or connection.close."""
    if reason == R_ANY:
        return "(any text)"
    template = REPLY_TEXTS.get(reason)
    if template is None:
        return "OK" if code == REPLY_SUCCESS else str(code)
    return template.format(n=detail, q=queue_name(detail), x=EXCHANGE_NAMES.get(detail, detail))


def frame_text(frame: Any) -> str:
    """A frame as a person reads it: ``basic.ack(ch=1, delivery_tag=3, multiple=True)``."""
    method, ch, *values = frame
    names = FIELDS.get(method, ())
    parts = [f"ch={ch}"]
    optional = OPTIONAL_BY_METHOD.get(method)
    for name, value in zip(names, values):
        if name == optional and not value:
            continue                        # written only when set
        if name == "msg":
            value = msg_name(value)
        elif name == "queue":
            value = queue_name(value)
        elif name == "exchange":
            value = repr(EXCHANGE_NAMES[value])
        elif name == "routing_key":
            value = repr(queue_name(value))
        elif name in ("redelivered", "multiple", "requeue", "no_ack", "mandatory", "persistent",
                      "global_", "durable", "exclusive", "immediate", "if_unused", "if_empty"):
            value = bool(value)
        elif name == "reason":
            continue
        elif name == "detail":
            value = repr(reply_text(values[0], values[1], values[2]))
            name = "text"
        parts.append(f"{name.rstrip('_')}={value}")             # global_ reads as AMQP's global
    return f"{METHOD_NAMES[method]}({', '.join(parts)})"


class Wire(NamedTuple):
    """A label of a step: one frame that crossed connection ``conn`` (to the broker or to the client).

    ``sent`` frames are those a client wrote (observed at ClientX actions); ``received`` frames are
    those a client read (observed at ClientReceive). Broker-internal steps cross no wire of their own:
    the frames they emit are observed when the client reads them.
    """

    conn: int
    to_broker: bool
    frame: Any

    def __str__(self) -> str:
        arrow = "client->broker" if self.to_broker else "broker->client"
        return f"c{self.conn} {arrow} {frame_text(self.frame)}"
