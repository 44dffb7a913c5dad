"""Actions: frozen dataclasses named actor + verb, carrying their parameters (STYLE.md, stateright).

Connections and channels are numbered as a person reads them: connection c0, c1, ...; channel 1, 2, ...
``str(action)`` is a sentence for traces; ``actor`` says who acts.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, fields
from functools import cache
from typing import Any, ClassVar

from .frames import (
    BASIC_ACK, BASIC_CANCEL, BASIC_CONSUME, BASIC_GET, BASIC_NACK, BASIC_PUBLISH, BASIC_QOS, BASIC_RECOVER,
    BASIC_REJECT, CHANNEL_CLOSE, CHANNEL_CLOSE_OK, CHANNEL_OPEN, CONFIRM_SELECT, CONNECTION_CLOSE, EXCHANGE_NAMES,
    FANOUT_EXCHANGE, FIELDS, QUEUE_BIND, QUEUE_DECLARE, QUEUE_DELETE, QUEUE_PURGE, R_NORMAL, REPLY_SUCCESS,
    TX_COMMIT, TX_ROLLBACK, TX_SELECT, make_frame, msg_name, queue_name,
)


@dataclass(frozen=True)
class Action:
    """Base of every action."""

    @property
    def actor(self) -> str:
        return "broker"


@dataclass(frozen=True)
class ClientAction(Action):
    """An action of the client on connection ``conn``, channel ``ch`` (0 for the connection itself)."""

    conn: int
    ch: int

    @property
    def actor(self) -> str:
        return f"client c{self.conn}.ch{self.ch}" if self.ch else f"client c{self.conn}"


@dataclass(frozen=True)
class ClientPublish(ClientAction):
    """basic.publish of the connection's next message (PC-1, RT-1, RT-3)."""

    METHOD: ClassVar[int] = BASIC_PUBLISH

    exchange: int
    routing_key: int
    mandatory: bool
    persistent: bool
    immediate: bool = False                       # RabbitMQ refuses it (540)

    def __str__(self) -> str:
        flags = "".join((" mandatory" if self.mandatory else "", " persistent" if self.persistent else "",
                         " immediate" if self.immediate else ""))
        return f"publish to exchange {EXCHANGE_NAMES[self.exchange]!r} key {queue_name(self.routing_key)}{flags}"


@dataclass(frozen=True)
class ClientConsume(ClientAction):
    """basic.consume on a queue, in manual or automatic acknowledgement mode (AM-1)."""

    METHOD: ClassVar[int] = BASIC_CONSUME

    queue: int
    consumer_tag: int
    no_ack: bool
    exclusive: bool = False

    def __str__(self) -> str:
        mode = "automatic" if self.no_ack else "manual"
        return f"consume {queue_name(self.queue)} as ctag {self.consumer_tag} ({mode} ack" + \
            (", exclusive)" if self.exclusive else ")")


@dataclass(frozen=True)
class ClientCancel(ClientAction):
    """basic.cancel of one of the channel's consumers."""

    METHOD: ClassVar[int] = BASIC_CANCEL

    consumer_tag: int

    def __str__(self) -> str:
        return f"cancel consumer {self.consumer_tag}"


@dataclass(frozen=True)
class ClientGet(ClientAction):
    """basic.get from a queue (AM-1, DS-2, PF-4)."""

    METHOD: ClassVar[int] = BASIC_GET

    queue: int
    no_ack: bool

    def __str__(self) -> str:
        return f"get from {queue_name(self.queue)} ({'automatic' if self.no_ack else 'manual'} ack)"


@dataclass(frozen=True)
class ClientAck(ClientAction):
    """basic.ack (ACK-1, ACK-2, ACK-3)."""

    METHOD: ClassVar[int] = BASIC_ACK

    delivery_tag: int
    multiple: bool

    def __str__(self) -> str:
        return f"ack tag {self.delivery_tag}{' multiple' if self.multiple else ''}"


@dataclass(frozen=True)
class ClientNack(ClientAction):
    """basic.nack (ACK-5, ACK-6)."""

    METHOD: ClassVar[int] = BASIC_NACK

    delivery_tag: int
    multiple: bool
    requeue: bool

    def __str__(self) -> str:
        return f"nack tag {self.delivery_tag}{' multiple' if self.multiple else ''} requeue={self.requeue}"


@dataclass(frozen=True)
class ClientReject(ClientAction):
    """basic.reject (ACK-5, ACK-6)."""

    METHOD: ClassVar[int] = BASIC_REJECT

    delivery_tag: int
    requeue: bool

    def __str__(self) -> str:
        return f"reject tag {self.delivery_tag} requeue={self.requeue}"


@dataclass(frozen=True)
class ClientQos(ClientAction):
    """basic.qos (PF-1, PF-2)."""

    METHOD: ClassVar[int] = BASIC_QOS

    prefetch_count: int
    global_: bool
    prefetch_size: int = 0                        # RabbitMQ refuses any other (540)

    def __str__(self) -> str:
        size = f" prefetch_size={self.prefetch_size}" if self.prefetch_size else ""
        return f"qos prefetch={self.prefetch_count} global={self.global_}{size}"


@dataclass(frozen=True)
class ClientRecover(ClientAction):
    """basic.recover (RQ-5)."""

    METHOD: ClassVar[int] = BASIC_RECOVER

    requeue: bool

    def __str__(self) -> str:
        return f"recover requeue={self.requeue}"


@dataclass(frozen=True)
class ClientConfirmSelect(ClientAction):
    """confirm.select (PC-1, PC-8)."""

    METHOD: ClassVar[int] = CONFIRM_SELECT

    def __str__(self) -> str:
        return "confirm.select"


@dataclass(frozen=True)
class ClientTxSelect(ClientAction):
    """tx.select (TX-1, PC-8)."""

    METHOD: ClassVar[int] = TX_SELECT

    def __str__(self) -> str:
        return "tx.select"


@dataclass(frozen=True)
class ClientTxCommit(ClientAction):
    """tx.commit (TX-2, TX-3, TX-7, TX-10)."""

    METHOD: ClassVar[int] = TX_COMMIT

    def __str__(self) -> str:
        return "tx.commit"


@dataclass(frozen=True)
class ClientTxRollback(ClientAction):
    """tx.rollback (TX-2, TX-3, TX-10)."""

    METHOD: ClassVar[int] = TX_ROLLBACK

    def __str__(self) -> str:
        return "tx.rollback"


@dataclass(frozen=True)
class ClientDeclareQueue(ClientAction):
    """queue.declare with the configuration's flags for that queue (DU-1, DU-4)."""

    METHOD: ClassVar[int] = QUEUE_DECLARE

    queue: int
    durable: bool
    exclusive: bool

    def __str__(self) -> str:
        flags = "".join((" durable" if self.durable else "", " exclusive" if self.exclusive else ""))
        return f"declare {queue_name(self.queue)}{flags}"


@dataclass(frozen=True)
class ClientBindQueue(ClientAction):
    """queue.bind of a queue to the fanout exchange (RT-1)."""

    METHOD: ClassVar[int] = QUEUE_BIND

    queue: int

    def __str__(self) -> str:
        return f"bind {queue_name(self.queue)} to the fanout exchange"


@dataclass(frozen=True)
class ClientPurgeQueue(ClientAction):
    """queue.purge: the queue's ready messages are dropped."""

    METHOD: ClassVar[int] = QUEUE_PURGE

    queue: int

    def __str__(self) -> str:
        return f"purge {queue_name(self.queue)}"


@dataclass(frozen=True)
class ClientDeleteQueue(ClientAction):
    """queue.delete, optionally only if it has no consumers (if_unused) or no ready message (if_empty)."""

    METHOD: ClassVar[int] = QUEUE_DELETE

    queue: int
    if_unused: bool
    if_empty: bool

    def __str__(self) -> str:
        flags = "".join((" if-unused" if self.if_unused else "", " if-empty" if self.if_empty else ""))
        return f"delete {queue_name(self.queue)}{flags}"


@dataclass(frozen=True)
class ClientChannelClose(ClientAction):
    """channel.close by the client (RQ-4)."""

    METHOD: ClassVar[int] = CHANNEL_CLOSE

    def __str__(self) -> str:
        return "close channel"


@dataclass(frozen=True)
class ClientChannelOpen(ClientAction):
    """channel.open of a closed channel number: a new channel (ER-1)."""

    METHOD: ClassVar[int] = CHANNEL_OPEN

    def __str__(self) -> str:
        return "open channel"


@dataclass(frozen=True)
class ClientConnectionClose(ClientAction):
    """connection.close by the client (RQ-4, DU-4)."""

    METHOD: ClassVar[int] = CONNECTION_CLOSE

    def __str__(self) -> str:
        return "close connection"


@dataclass(frozen=True)
class ClientChannelCloseOk(ClientAction):
    """channel.close-ok written by a client that answers a channel.close itself (a recorded raw client;
    client libraries answer as they read it: ``ClientReceive``), or sends one out of turn."""

    METHOD: ClassVar[int] = CHANNEL_CLOSE_OK

    def __str__(self) -> str:
        return "channel.close-ok"


@dataclass(frozen=True)
class ClientConnect(ClientAction):
    """A new connection in this slot (the handshake is not modelled), its channels open, or closed
    until the client opens them (recorded traces, where the client's channel.open is observed)."""

    channels_open: bool = True

    def __str__(self) -> str:
        return "connect"


@dataclass(frozen=True)
class ClientReceive(ClientAction):
    """The client reads the oldest frame in flight to it on channel ``ch`` (0: the connection's own).
    A client library answers a channel.close with close-ok as it reads it; with ``answer`` false the
    client answers (or not) with a step of its own (``ClientChannelCloseOk``)."""

    answer: bool = True

    def __str__(self) -> str:
        return f"receive the next frame of channel {self.ch}" if self.ch else "receive the next connection frame"


@dataclass(frozen=True)
class BrokerTakeFrame(Action):
    """The broker takes the oldest frame a client sent on channel ``ch`` of connection ``conn`` and acts
    on it; channels are taken in any order (RabbitMQ runs each channel concurrently)."""

    conn: int
    ch: int

    def __str__(self) -> str:
        where = f"c{self.conn}.ch{self.ch}" if self.ch else f"c{self.conn} (connection)"
        return f"take the next frame from {where}"


@dataclass(frozen=True)
class BrokerCloseOk(Action):
    """channel.close-ok for a channel the client closed, once the channel is gone; frames the client
    sent on it in between were dropped (ER-1)."""

    conn: int
    ch: int

    def __str__(self) -> str:
        return f"channel.close-ok on c{self.conn}.ch{self.ch}"


@dataclass(frozen=True)
class BrokerDeliver(Action):
    """The queue delivers its head message to the next consumer with room (DS-1, PF-3)."""

    queue: int

    def __str__(self) -> str:
        return f"deliver the head of {queue_name(self.queue)}"


@dataclass(frozen=True)
class BrokerRequeue(Action):
    """The queues take the requeue a channel sent before its limiter's resume overtook it: the copies it
    requeued, at their places, can be delivered again (RQ-1, PF-2; spec.interleavings)."""

    def __str__(self) -> str:
        return "the queues take the requeue that waited behind the resume"


@dataclass(frozen=True)
class BrokerConfirm(Action):
    """A publisher confirm (basic.ack or basic.nack) on a confirm-mode channel (PC-2, PC-3, PC-7)."""

    conn: int
    ch: int
    seq: int
    multiple: bool

    def __str__(self) -> str:
        return f"confirm c{self.conn}.ch{self.ch} seq {self.seq}{' multiple' if self.multiple else ''}"


@dataclass(frozen=True)
class BrokerCommitOk(Action):
    """tx.commit-ok once the commit's persistent copies are on disk (TX-7)."""

    conn: int
    ch: int

    def __str__(self) -> str:
        return f"tx.commit-ok on c{self.conn}.ch{self.ch}"


@dataclass(frozen=True)
class BrokerQueueFail(Action):
    """Fault: the queues of an unconfirmed publish fail to take it; it will be nacked (PC-6)."""

    conn: int
    ch: int
    seq: int

    def __str__(self) -> str:
        return f"queue fails to take c{self.conn}.ch{self.ch} seq {self.seq}"


@dataclass(frozen=True)
class BrokerCrash(Action):
    """Fault: the broker process dies; memory and unwritten data are gone (DU-2, PC-10, TX-8, TX-9)."""

    def __str__(self) -> str:
        return "CRASH"


@dataclass(frozen=True)
class BrokerRestart(Action):
    """The broker starts again and recovers durable queues and their persisted messages (DU-1..3)."""

    def __str__(self) -> str:
        return "restart and recover from disk"


@dataclass(frozen=True)
class DiskFsync(Action):
    """The disk makes one copy's pending write (or removal) durable (PC-5, TX-8)."""

    queue: int
    key: int
    msg: int
    write: bool

    @property
    def actor(self) -> str:
        return "disk"

    def __str__(self) -> str:
        verb = "write" if self.write else "remove"
        return f"fsync: {verb} {msg_name(self.msg)} in {queue_name(self.queue)} (position {self.key})"


@dataclass(frozen=True)
class BrokerChannelError(Action):
    """Fault: the broker closes channel ``ch`` of connection ``conn`` with a channel error, as when an
    operation of the application on that channel fails (here a publish to a missing exchange, 404): the
    channel's consumer deliveries are requeued at once and what the client sends on it is ignored
    until its close-ok (ER-1, RQ-4)."""

    conn: int
    ch: int

    def __str__(self) -> str:
        return f"CHANNEL ERROR: the broker closes c{self.conn}.ch{self.ch}"


@dataclass(frozen=True)
class BrokerDetect(Action):
    """The broker notices that the client of the connection held in slot ``conn`` vanished (a missed
    heartbeat) and closes it: its deliveries are requeued (RQ-4), its exclusive queues deleted."""

    conn: int

    def __str__(self) -> str:
        return f"heartbeat timeout: the broker closes the vanished client's old connection (held as c{self.conn})"


@dataclass(frozen=True)
class ClientVanish(Action):
    """Fault: the client of connection ``conn`` vanishes without closing its socket (its host crashed, a
    partition, its process paused). Its side is gone at once and it may connect again; the broker still
    holds the old connection (moved to a slot of its own) until it notices (``BrokerDetect``)."""

    conn: int

    @property
    def actor(self) -> str:
        return "network"

    def __str__(self) -> str:
        return f"connection c{self.conn} VANISHES (the broker has not noticed)"


@dataclass(frozen=True)
class NetworkLoss(Action):
    """Fault: connection ``conn`` is lost with its socket closed, which the broker notices at once; frames
    in flight either way are gone (RQ-4, AM-2)."""

    conn: int

    @property
    def actor(self) -> str:
        return "network"

    def __str__(self) -> str:
        return f"connection c{self.conn} LOST"


# A rule ID (rabbitproof/rules.toml) as the docstrings above cite it: ``ACK-2``, or a range ``DU-1..3``.
RULE_ID = re.compile(r"\b(DT|AM|ACK|PF|RQ|DS|PC|TX|DU|ER|RT)-(\d+)(?:\.\.(\d+))?\b")


def rules_of(action_type: type) -> tuple[str, ...]:
    """The rule IDs an action's docstring cites, a range ``DU-1..3`` as each of its rules, in order."""
    out: dict[str, None] = {}
    for family, first, last in RULE_ID.findall(action_type.__doc__ or ""):
        for n in range(int(first), int(last or first) + 1):
            out.setdefault(f"{family}-{n}")
    return tuple(out)


def all_actions() -> tuple[type, ...]:
    """Every action of the spec (the classes above but the two bases), in the order they are defined."""
    return tuple(cls for cls in globals().values() if isinstance(cls, type) and issubclass(cls, Action)
                 and cls not in (Action, ClientAction))


# ---------------------------------------------------------------- client actions and their frames
# A client action that writes a method names it (``METHOD``); its fields after (conn, ch) are named as
# the method's fields in spec.frames.METHODS, so that each way between them is derived, not tabled.
# The fields the action does not choose: the message a publish carries (the connection's next one),
# the exchange a bind names (the model binds only to the fanout exchange) and a client's close
# (200, normal).
_CHOSEN_FOR = {"exchange": FANOUT_EXCHANGE, "reply_code": REPLY_SUCCESS, "reason": R_NORMAL, "detail": 0}


def writes_method() -> dict[int, type]:
    """The client action that writes each method a client sends."""
    return {cls.METHOD: cls for cls in all_actions() if getattr(cls, "METHOD", None)}


@cache
def _own_fields(cls: type) -> tuple[tuple[str, bool], ...]:
    """An action class's fields after (conn, ch), each with whether it is a flag (read once per class)."""
    return tuple((f.name, f.type in ("bool", bool)) for f in fields(cls)[2:])


def frame_of(a: Any, msg: int = 0) -> Any:
    """The frame client action ``a`` writes (a publish carries message ``msg``)."""
    own = vars(a)
    values = [msg if name == "msg" else own[name] if name in own else _CHOSEN_FOR[name]
              for name in FIELDS.get(a.METHOD, ())]
    return make_frame(a.METHOD, a.ch, *values)


def action_of(conn: int, frame: Any) -> ClientAction | None:
    """The client action of connection ``conn`` that writes ``frame`` (None: no action writes it)."""
    cls = _WRITERS.get(frame.method)
    if cls is None:
        return None
    return cls(conn, frame.channel, *(bool(getattr(frame, name)) if flag else getattr(frame, name)
                                      for name, flag in _own_fields(cls)))


_WRITERS = writes_method()
