"""The seeded mutator: bad frames for a connection whose channel 1 is open, and what AMQP 0-9-1 allows.

Every case starts from frames built with pamqp (methods, content headers, bodies) and breaks them in one
way: bits flipped, payloads cut or extended, sizes huge, frame ends wrong, types and methods unknown,
channels unopened or 0, methods out of order or from the wrong side, content headers of the wrong class
or with bad properties, bodies longer than announced, and well-formed methods that are wrong (an unknown
delivery tag, a missing queue). A case names the outcomes AMQP 0-9-1 allows:

- ``("connection", code)``: connection.close with a hard-error code (501 frame error, 502 syntax error,
  503 command invalid, 504 channel error, 505 unexpected frame, 540 not implemented), the code the
  specification assigns to that kind of fault;
- ``("channel", code)``: channel.close with a soft-error code (404, 406), after which the connection lives;
- ``("served", 0)``: the input was valid after all (a flipped bit can land in a routing key);
- ``("client-close", 0)``: the input became the client's own connection.close or channel.close, answered
  with close-ok.

Never allowed: silence (an incomplete frame is completed with zero filler, so the broker must judge it),
541 internal error, a reply that does not decode, or a soft code on a connection.close (and a hard code on
a channel.close). A broker may drop the TCP connection on a frame it cannot parse: ``dropped`` is
reported, and allowed only where the case says ``may_drop`` (framing lost)."""

from __future__ import annotations

import datetime
import random
import struct
import warnings
from dataclasses import dataclass
from typing import Any

from pamqp import body as amqp_body
from pamqp import commands, exceptions, frame, header

FRAME_END = 0xCE
COMPLETED_UP_TO = 1 << 20
HARD_CODES = frozenset(code for code, kind in exceptions.CLASS_MAPPING.items()
                       if issubclass(kind, exceptions.AMQPHardError))
SOFT_CODES = frozenset(code for code, kind in exceptions.CLASS_MAPPING.items()
                       if issubclass(kind, exceptions.AMQPSoftError))
INTERNAL_ERROR = exceptions.AMQPInternalError.value

Outcome = tuple[str, int]


def connection(*codes: int) -> frozenset[Outcome]:
    return frozenset(("connection", code) for code in codes)


def channel(*codes: int) -> frozenset[Outcome]:
    return frozenset(("channel", code) for code in codes)


SERVED = frozenset({("served", 0)})
# A frame changed at random may become anything: valid, wrong, unreadable, even the client's close.
ANY_CLEAR = (connection(*(HARD_CODES - {INTERNAL_ERROR})) | channel(*SOFT_CODES) | SERVED
             | frozenset({("client-close", 0)}))


@dataclass(frozen=True)
class Case:
    """Bytes to send on a connection with channel 1 open, the bad frames among them, and the outcomes
    allowed. ``keeps_state``: the case is well-formed (a wrong method, or a valid one), so when it is
    served or closes only its channel, the connection is in a known state and may carry the next case (a
    random flip may have changed anything, so it never is)."""

    kind: str
    data: bytes
    bad_frames: int
    allowed: frozenset[Outcome]
    keeps_state: bool = False
    may_drop: bool = False

    @property
    def malformed_frames(self) -> int:
        """The bad frames that break framing or grammar (not those well-formed but wrong, which keep state)."""
        return 0 if self.keeps_state else self.bad_frames


def marshal(channel_number: int, value: Any) -> bytes:
    return frame.marshal(value, channel_number)


def raw_frame(frame_type: int, channel_number: int, payload: bytes, end: int = FRAME_END) -> bytes:
    return struct.pack(">BHI", frame_type, channel_number, len(payload)) + payload + bytes((end,))


def publish(queue: str, body: bytes, exchange: str = "", channel_number: int = 1,
            properties: commands.Basic.Properties | None = None) -> bytes:
    """basic.publish, its content header and one body frame (none for an empty body)."""
    data = (marshal(channel_number, commands.Basic.Publish(exchange=exchange, routing_key=queue))
            + marshal(channel_number, header.ContentHeader(body_size=len(body), properties=properties)))
    return data + (marshal(channel_number, amqp_body.ContentBody(body)) if body else b"")


def valid_frames(rng: random.Random, queue: str) -> list[bytes]:
    """Single valid frames for channel 1 of a connection that declared `queue` (exclusive)."""
    return [
        marshal(1, commands.Basic.Qos(prefetch_count=rng.randint(0, 100))),
        marshal(1, commands.Queue.Declare(queue=queue, exclusive=True)),
        marshal(1, commands.Queue.Declare(queue=queue, exclusive=True,
                                          arguments={"x-max-length": rng.randint(1, 50), "x-message-ttl": 60000})),
        marshal(1, commands.Basic.Get(queue=queue, no_ack=rng.random() < 0.5)),
        marshal(1, commands.Exchange.Declare(exchange="amq.direct", exchange_type="direct", passive=True)),
        marshal(1, commands.Exchange.Declare(exchange=f"{queue}-x", exchange_type="fanout", auto_delete=True)),
        marshal(1, commands.Queue.Bind(queue=queue, exchange="amq.direct", routing_key=queue)),
        marshal(1, commands.Queue.Unbind(queue=queue, exchange="amq.direct", routing_key=queue)),
        marshal(1, commands.Basic.Consume(queue=queue, consumer_tag=f"c{rng.randint(0, 9)}")),
        marshal(1, commands.Basic.Cancel(consumer_tag=f"c{rng.randint(0, 9)}")),
        marshal(1, commands.Basic.Recover(requeue=True)),
        marshal(1, commands.Queue.Purge(queue=queue)),
        marshal(1, commands.Basic.Publish(exchange="", routing_key=queue, mandatory=rng.random() < 0.5)),
        marshal(1, header.ContentHeader(body_size=rng.randint(0, 64),
                                        properties=commands.Basic.Properties(
                                            content_type="text/plain", delivery_mode=rng.choice([1, 2]),
                                            headers={"n": rng.randint(0, 999), "s": "fuzz"},
                                            priority=rng.randint(0, 9)))),
        marshal(1, amqp_body.ContentBody(rng.randbytes(rng.randint(1, 64)))),
    ]


def valid_sequences(rng: random.Random, queue: str) -> list[bytes]:
    """Whole valid commands (a publish with its content too) for channel 1."""
    frames = valid_frames(rng, queue)
    body = rng.randbytes(rng.randint(0, 48))
    properties = commands.Basic.Properties(message_id=f"m{rng.randint(0, 999)}", delivery_mode=rng.choice([1, 2]),
                                           headers={"k": rng.randint(0, 9)})
    return [f for f in frames if f[0] == 1] + [publish(queue, body, properties=properties)]


def split(data: bytes) -> list[bytes]:
    """Well-formed frames back into single frames."""
    frames, offset = [], 0
    while offset < len(data):
        size = struct.unpack_from(">I", data, offset + 3)[0]
        frames.append(data[offset: offset + 8 + size])
        offset += 8 + size
    return frames


def flip_bits(rng: random.Random, data: bytes, flips: int) -> bytes:
    changed = bytearray(data)
    for _ in range(flips):
        changed[rng.randrange(len(changed))] ^= 1 << rng.randrange(8)
    return bytes(changed)


def payload_of(data: bytes) -> bytes:
    return data[7:-1]


# -- the kinds of case: each returns a Case ---------------------------------------------------------------


def flip(rng: random.Random, queue: str) -> Case:
    """1 to 4 bits flipped in one valid command."""
    command = rng.choice(valid_sequences(rng, queue))
    return Case("flip", flip_bits(rng, command, rng.randint(1, 4)), len(split(command)), ANY_CLEAR, may_drop=True)


def flip_burst(rng: random.Random, queue: str) -> Case:
    """5 to 15 valid frames in a row, a byte of each replaced at random."""
    frames = valid_frames(rng, queue)
    chosen = [bytearray(rng.choice(frames)) for _ in range(rng.randint(5, 15))]
    for f in chosen:
        f[rng.randrange(len(f))] = rng.randrange(256)
    return Case("flip-burst", b"".join(chosen), len(chosen), ANY_CLEAR, may_drop=True)


def truncated_frame(rng: random.Random, queue: str) -> Case:
    """A frame cut short while its size field still claims the whole payload: the broker must wait, and
    then read the filler's zero where the frame end should be (501)."""
    whole = rng.choice(valid_frames(rng, queue))
    return Case("truncated-frame", whole[: rng.randint(7, len(whole) - 1)], 1, connection(501), may_drop=True)


def truncated_arguments(rng: random.Random, queue: str) -> Case:
    """A method frame whose arguments stop early, with a size that matches: a frame that cannot decode."""
    whole = rng.choice([f for f in valid_frames(rng, queue) if f[0] == 1 and len(f) > 13])
    payload = payload_of(whole)
    return Case("truncated-arguments", raw_frame(1, 1, payload[: rng.randint(4, len(payload) - 1)]), 1,
                connection(501, 502))


def extra_arguments(rng: random.Random, queue: str) -> Case:
    """A method frame with bytes after its last argument."""
    whole = rng.choice([f for f in valid_frames(rng, queue) if f[0] == 1])
    return Case("extra-arguments", raw_frame(1, 1, payload_of(whole) + rng.randbytes(rng.randint(1, 16))), 1,
                connection(501, 502))


def huge_size(rng: random.Random, queue: str) -> Case:
    """A frame header whose size is beyond the negotiated frame_max."""
    size = rng.choice([131065, 1 << 20, rng.randint(1 << 17, (1 << 32) - 1), (1 << 32) - 1])
    return Case("huge-size", struct.pack(">BHI", rng.choice([1, 2, 3, 8]), 1, size) + rng.randbytes(16), 1,
                connection(501), may_drop=True)


def bad_frame_end(rng: random.Random, queue: str) -> Case:
    whole = rng.choice(valid_frames(rng, queue))
    end = rng.choice([b for b in range(256) if b != FRAME_END])
    return Case("bad-frame-end", whole[:-1] + bytes((end,)), 1, connection(501), may_drop=True)


def unknown_frame_type(rng: random.Random, queue: str) -> Case:
    frame_type = rng.choice([0, 4, 5, 6, 7, 9, 42, 206, 255])
    return Case("unknown-frame-type", raw_frame(frame_type, rng.choice([0, 1]), rng.randbytes(rng.randint(0, 20))),
                1, connection(501), may_drop=True)


def unknown_method(rng: random.Random, queue: str) -> Case:
    class_id, method_id = rng.choice([(60, 999), (99, 10), (0, 0), (20, 77), (10, 12), (65535, 65535), (85, 99)])
    payload = struct.pack(">HH", class_id, method_id) + rng.randbytes(rng.randint(0, 8))
    return Case("unknown-method", raw_frame(1, 1, payload), 1, connection(501, 503, 540), may_drop=True)


def unopened_channel(rng: random.Random, queue: str) -> Case:
    """A method, or content, on a channel never opened."""
    number = rng.randint(2, 65535)
    data = rng.choice([marshal(number, commands.Basic.Qos(prefetch_count=1)),
                       marshal(number, commands.Queue.Declare(queue=queue, exclusive=True)),
                       marshal(number, header.ContentHeader(body_size=3)),
                       marshal(number, amqp_body.ContentBody(b"abc"))])
    return Case("unopened-channel", data, 1, connection(504, 505))


def channel_method_on_channel_0(rng: random.Random, queue: str) -> Case:
    method = rng.choice([commands.Basic.Qos(prefetch_count=1), commands.Channel.Flow(active=True),
                         commands.Queue.Declare(queue=queue), commands.Channel.Open(),
                         commands.Basic.Publish(routing_key=queue)])
    return Case("channel-method-on-channel-0", marshal(0, method), 1, connection(503, 504))


def content_on_channel_0(rng: random.Random, queue: str) -> Case:
    data = rng.choice([marshal(0, header.ContentHeader(body_size=1)), marshal(0, amqp_body.ContentBody(b"x"))])
    return Case("content-on-channel-0", data, 1, connection(503, 504, 505))


def connection_method_on_channel(rng: random.Random, queue: str) -> Case:
    method = rng.choice([commands.Connection.Open(), commands.Connection.TuneOk(),
                         commands.Connection.StartOk(mechanism="PLAIN", response="\0guest\0guest"),
                         commands.Connection.SecureOk(response="x")])
    return Case("connection-method-on-channel", marshal(1, method), 1, connection(503, 504))


def server_method_from_client(rng: random.Random, queue: str) -> Case:
    method = rng.choice([commands.Basic.QosOk(), commands.Queue.DeclareOk(queue=queue, message_count=0, consumer_count=0),
                         commands.Basic.Deliver(consumer_tag="x", delivery_tag=1, routing_key=queue),
                         commands.Channel.OpenOk(), commands.Basic.ConsumeOk(consumer_tag="x"),
                         commands.Connection.Start(), commands.Connection.Tune()])
    number = 0 if isinstance(method, (commands.Connection.Start, commands.Connection.Tune)) else 1
    data = marshal(number, method)
    if isinstance(method, commands.Basic.Deliver):
        data += marshal(1, header.ContentHeader(body_size=1)) + marshal(1, amqp_body.ContentBody(b"x"))
    # A handshake method on channel 0 of an open connection: RabbitMQ answers 504 (channel 0 is not in the
    # state for it), which AMQP 0-9-1's wording of channel-error covers as well as 503's.
    codes = (503, 504, 540) if number == 0 else (503, 540)
    return Case("server-method-from-client", data, 1, connection(*codes))


def second_channel_open(rng: random.Random, queue: str) -> Case:
    return Case("second-channel-open", marshal(1, commands.Channel.Open()), 1, connection(504))


def header_without_method(rng: random.Random, queue: str) -> Case:
    return Case("header-without-method", marshal(1, header.ContentHeader(body_size=rng.randint(0, 100))), 1,
                connection(505))


def body_without_header(rng: random.Random, queue: str) -> Case:
    data = marshal(1, amqp_body.ContentBody(rng.randbytes(rng.randint(1, 50))))
    if rng.random() < 0.5:  # a publish, then its body before its header
        data = marshal(1, commands.Basic.Publish(routing_key=queue)) + data
    return Case("body-without-header", data, 1, connection(505))


def method_inside_content(rng: random.Random, queue: str) -> Case:
    start = marshal(1, commands.Basic.Publish(routing_key=queue))
    if rng.random() < 0.5:
        start += marshal(1, header.ContentHeader(body_size=10))
    method = rng.choice([commands.Basic.Qos(prefetch_count=1), commands.Basic.Publish(routing_key=queue),
                         commands.Channel.Close(reply_code=200, reply_text="", class_id=0, method_id=0)])
    return Case("method-inside-content", start + marshal(1, method), 1, connection(505))


def second_header(rng: random.Random, queue: str) -> Case:
    data = marshal(1, commands.Basic.Publish(routing_key=queue)) + marshal(1, header.ContentHeader(body_size=5))
    return Case("second-content-header", data + marshal(1, header.ContentHeader(body_size=5)), 1, connection(505))


def body_longer_than_header(rng: random.Random, queue: str) -> Case:
    announced = rng.randint(1, 20)
    data = (marshal(1, commands.Basic.Publish(routing_key=queue))
            + marshal(1, header.ContentHeader(body_size=announced))
            + marshal(1, amqp_body.ContentBody(rng.randbytes(announced + rng.randint(1, 20)))))
    return Case("body-longer-than-header", data, 1, connection(501, 505))


def header_of_wrong_class(rng: random.Random, queue: str) -> Case:
    """basic.publish followed by a content header whose class is not basic (60)."""
    class_id = rng.choice([0, 10, 20, 40, 50, 85, 90, 61, 65535])
    payload = struct.pack(">HHQH", class_id, 0, 3, 0)
    data = marshal(1, commands.Basic.Publish(routing_key=queue)) + raw_frame(2, 1, payload)
    return Case("header-of-wrong-class", data, 1, connection(501, 502, 503, 505))


def header_with_bad_properties(rng: random.Random, queue: str) -> Case:
    """A content header whose property flags or values do not decode."""
    body_size = struct.pack(">HHQ", 60, 0, 3)
    properties = rng.choice([
        b"\x00\x01",                                    # bit 0: a continuation flag with nothing after it
        b"\x80\x00\x40abc",                              # content-type claims 64 bytes, 3 follow
        b"\x20\x00\x00\x00\x10\x00S",                    # headers table claims 4096 bytes
        b"\x10",                                        # flags cut in half
        b"\x00",                                        # flags cut in half
        b"\x20\x00\x00\x00\x00\x05\x01kZ\x00\x00",      # a field of an unknown type
        b"\x10\x00",                                    # delivery-mode flag, value missing
        b"\x00\x00xyz",                                 # bytes after the last property
        b"\x00\x08\x05ab",                              # app-id claims 5 bytes, 2 follow
    ])
    data = (marshal(1, commands.Basic.Publish(routing_key=queue)) + raw_frame(2, 1, body_size + properties)
            + marshal(1, amqp_body.ContentBody(b"abc")))
    return Case("header-with-bad-properties", data, 1, connection(501, 502))


def short_header(rng: random.Random, queue: str) -> Case:
    """A content header shorter than its fixed fields."""
    payload = struct.pack(">HHQ", 60, 0, 3)[: rng.randint(0, 11)]
    data = marshal(1, commands.Basic.Publish(routing_key=queue)) + raw_frame(2, 1, payload)
    return Case("short-content-header", data, 1, connection(501, 502))


def heartbeat_on_channel(rng: random.Random, queue: str) -> Case:
    return Case("heartbeat-on-channel", raw_frame(8, rng.randint(1, 65535), b""), 1, connection(501, 503, 505))


def heartbeat_with_payload(rng: random.Random, queue: str) -> Case:
    return Case("heartbeat-with-payload", raw_frame(8, 0, rng.randbytes(rng.randint(1, 16))), 1, connection(501))


def unknown_delivery_tag(rng: random.Random, queue: str) -> Case:
    tag = rng.randint(1, 2**63 - 1)
    method = rng.choice([commands.Basic.Ack(delivery_tag=tag), commands.Basic.Reject(delivery_tag=tag),
                         commands.Basic.Nack(delivery_tag=tag), commands.Basic.Ack(delivery_tag=tag, multiple=True)])
    return Case("unknown-delivery-tag", marshal(1, method), 1, channel(406), keeps_state=True)


def missing_exchange(rng: random.Random, queue: str) -> Case:
    data = rng.choice([publish(queue, b"x", exchange=f"no-such-exchange-{rng.randint(0, 999)}"),
                       marshal(1, commands.Exchange.Declare(exchange=f"no-such-{rng.randint(0, 999)}", passive=True)),
                       marshal(1, commands.Queue.Bind(queue=queue, exchange=f"no-such-{rng.randint(0, 99)}"))])
    return Case("missing-exchange", data, 1, channel(404), keeps_state=True)


def missing_queue(rng: random.Random, queue: str) -> Case:
    missing = f"no-such-queue-{rng.randint(0, 999)}"
    method = rng.choice([commands.Queue.Declare(queue=missing, passive=True), commands.Basic.Get(queue=missing),
                         commands.Basic.Consume(queue=missing), commands.Queue.Purge(queue=missing)])
    return Case("missing-queue", marshal(1, method), 1, channel(404), keeps_state=True)


def tx_without_select(rng: random.Random, queue: str) -> Case:
    return Case("tx-without-select", marshal(1, rng.choice([commands.Tx.Commit(), commands.Tx.Rollback()])), 1,
                channel(406), keeps_state=True)


def reserved_exchange(rng: random.Random, queue: str) -> Case:
    """Declaring an exchange named amq.* (403) or redeclaring amq.direct with another type (406)."""
    if rng.random() < 0.5:
        return Case("reserved-exchange", marshal(1, commands.Exchange.Declare(
            exchange=f"amq.fuzz{rng.randint(0, 99)}", exchange_type="direct")), 1, channel(403), keeps_state=True)
    return Case("reserved-exchange", marshal(1, commands.Exchange.Declare(exchange="amq.direct",
                                                                          exchange_type="fanout")),
                1, channel(406), keeps_state=True)


def valid_command(rng: random.Random, queue: str) -> Case:
    """A control case: a valid command, which must be served. Never basic.qos: its qos-ok would pass for
    the probe's."""
    data = rng.choice([
        marshal(1, commands.Queue.Declare(queue=queue, exclusive=True)),
        marshal(1, commands.Exchange.Declare(exchange="amq.direct", exchange_type="direct", passive=True)),
        marshal(1, commands.Queue.Bind(queue=queue, exchange="amq.fanout")),
        publish(queue, rng.randbytes(rng.randint(0, 40))),
        publish(f"nowhere-{rng.randint(0, 99)}", b"unroutable"),
    ])
    return Case("valid", data, 0, SERVED, keeps_state=True)


# Methods a client sends on an open channel, filled at random by `random_method`.
CLIENT_METHODS = (
    commands.Channel.Flow, commands.Channel.Close,
    commands.Exchange.Declare, commands.Exchange.Delete, commands.Exchange.Bind, commands.Exchange.Unbind,
    commands.Queue.Declare, commands.Queue.Bind, commands.Queue.Purge, commands.Queue.Delete, commands.Queue.Unbind,
    commands.Basic.Qos, commands.Basic.Consume, commands.Basic.Cancel, commands.Basic.Publish, commands.Basic.Get,
    commands.Basic.Ack, commands.Basic.Reject, commands.Basic.RecoverAsync, commands.Basic.Recover,
    commands.Basic.Nack, commands.Tx.Select, commands.Tx.Commit, commands.Tx.Rollback, commands.Confirm.Select,
)
ARGUMENT_KEYS = ("x-max-length", "x-max-length-bytes", "x-message-ttl", "x-expires", "x-dead-letter-exchange",
                 "x-dead-letter-routing-key", "x-max-priority", "x-queue-type", "x-overflow",
                 "x-single-active-consumer", "x-queue-mode", "x-match", "x-priority", "alternate-exchange", "k")


def random_name(rng: random.Random, queue: str) -> str:
    """A queue, exchange or tag name: mostly ones that exist or are reserved, from a small pool (so that a
    long run does not pile up durable queues and exchanges), sometimes odd ones."""
    return rng.choice([queue, queue, "", "amq.direct", "amq.fanout", "amq.topic", "amq.headers", "amq.match",
                       "amq.default", "amq.fuzz", f"fuzz-any-{rng.randint(0, 4)}", f"c{rng.randint(0, 3)}",
                       "x" * 255, "".join(chr(rng.randint(32, 126)) for _ in range(rng.randint(1, 12))),
                       "é\u00ff\u4e2d"])


def random_value(rng: random.Random, depth: int = 0) -> object:
    """A field-table value of a type drawn at random, edge values likely."""
    choice = rng.randrange(8 if depth < 2 else 5)
    if choice == 0:
        return rng.choice([0, 1, -1, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63), rng.randint(-1000, 100000)])
    if choice == 1:
        return rng.choice(["", "direct", "topic", "fanout", "headers", "quorum", "classic", "stream", "lazy",
                           "reject-publish", "drop-head", "all", "any", "nonsense", "100", "-5"])
    if choice == 2:
        return rng.random() < 0.5
    if choice == 3:
        return rng.choice([0.0, 1.5, -2.25, 1e300])
    if choice == 4:
        return rng.randbytes(rng.randint(0, 8)).decode("latin-1")
    if choice == 5:
        return {rng.choice(ARGUMENT_KEYS): random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))}
    if choice == 6:
        return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return rng.choice([2**64 - 1, -(2**63) - 1])  # beyond a 64-bit integer: pamqp may refuse it


def random_field(rng: random.Random, kind: str, name: str, queue: str) -> object:
    if kind == "bit":
        return rng.random() < 0.5
    if kind == "octet":
        return rng.choice([0, 1, 2, 9, 10, 255])
    if kind == "short":
        return rng.choice([0, 1, 200, 320, 404, 541, 65535, rng.randrange(65536)])
    if kind == "long":
        return rng.choice([0, 1, 100, 2**31, 2**32 - 1, rng.randrange(2**32)])
    if kind == "longlong":
        return rng.choice([0, 1, 2, 2**63, 2**64 - 1, rng.randrange(2**64)])
    if kind == "table":
        return {rng.choice(ARGUMENT_KEYS): random_value(rng) for _ in range(rng.randint(0, 4))}
    if kind == "longstr":
        return rng.randbytes(rng.randint(0, 16)).decode("latin-1")
    if name in ("exchange_type",):
        return rng.choice(["direct", "fanout", "topic", "headers", "x-consistent-hash", "", "nonsense"])
    if name in ("routing_key", "reply_text"):
        return rng.choice([queue, "", "#", "*.a", "a.b.c", "x" * 255])
    return random_name(rng, queue)


def random_properties(rng: random.Random) -> bytes:
    """Encoded content-header properties, some values out of range (delivery mode 7, priority 255,
    expiration "-1" or "abc")."""
    chosen = [name for name in commands.Basic.Properties.__slots__ if rng.random() < 0.3]
    values: dict[str, Any] = {
        "content_type": "text/plain", "content_encoding": "gzip", "headers": {"k": random_value(rng)},
        "delivery_mode": rng.choice([1, 2]), "priority": rng.choice([0, 5, 9, 10, 255]), "correlation_id": "c",
        "reply_to": random_name(rng, "r"), "expiration": rng.choice(["0", "100", "-1", "abc", "", "99999999999999999"]),
        "message_id": "m", "message_type": "t", "user_id": rng.choice(["guest", "someone", ""]), "app_id": "a",
        "cluster_id": "",
    }
    values["timestamp"] = datetime.datetime(2020, 1, 1)
    properties = commands.Basic.Properties(**{name: values[name] for name in chosen})
    return properties.marshal()


def random_method(rng: random.Random, queue: str) -> Case:
    """A client method of any kind on channel 1, every argument drawn at random (names from a pool, edge
    numbers, odd tables); a publish comes with a content header of random properties and a body. The
    frames are well-formed, so the broker must answer in words: never by dropping the connection."""
    for _ in range(20):
        kind = rng.choice(CLIENT_METHODS)
        with warnings.catch_warnings():  # pamqp warns that basic.recover-async is deprecated: so it is, and sent
            warnings.simplefilter("ignore", DeprecationWarning)
            method = kind()
        for name in method.__slots__:
            setattr(method, name, random_field(rng, method.amqp_type(name), name, queue))
        try:
            data = marshal(1, method)
            if kind is commands.Basic.Publish:
                body = rng.randbytes(rng.choice([0, 1, 10, 200]))
                head = struct.pack(">HHQ", 60, 0, len(body)) + random_properties(rng)
                data += raw_frame(2, 1, head) + (marshal(1, amqp_body.ContentBody(body)) if body else b"")
        except Exception:  # pamqp refuses some values (an integer beyond 64 bits): draw again
            continue
        return Case("random-method", data, 1, ANY_CLEAR)
    return Case("random-method", marshal(1, commands.Basic.Recover(requeue=True)), 1, ANY_CLEAR)


def random_bytes(rng: random.Random, queue: str) -> Case:
    data = rng.randbytes(rng.randint(1, 64))
    return Case("random-bytes", data, 1, ANY_CLEAR, may_drop=True)


# Kind -> (maker, weight). Cases that keep the connection's state are weighted up so that a connection
# carries several cases.
KINDS = {
    "flip": (flip, 12),
    "flip-burst": (flip_burst, 6),
    "random-bytes": (random_bytes, 2),
    "random-method": (random_method, 10),
    "truncated-frame": (truncated_frame, 3),
    "truncated-arguments": (truncated_arguments, 3),
    "extra-arguments": (extra_arguments, 2),
    "huge-size": (huge_size, 2),
    "bad-frame-end": (bad_frame_end, 2),
    "unknown-frame-type": (unknown_frame_type, 2),
    "unknown-method": (unknown_method, 2),
    "unopened-channel": (unopened_channel, 2),
    "channel-method-on-channel-0": (channel_method_on_channel_0, 1),
    "content-on-channel-0": (content_on_channel_0, 1),
    "connection-method-on-channel": (connection_method_on_channel, 1),
    "server-method-from-client": (server_method_from_client, 1),
    "second-channel-open": (second_channel_open, 1),
    "header-without-method": (header_without_method, 1),
    "body-without-header": (body_without_header, 1),
    "method-inside-content": (method_inside_content, 1),
    "second-content-header": (second_header, 1),
    "body-longer-than-header": (body_longer_than_header, 1),
    "header-of-wrong-class": (header_of_wrong_class, 2),
    "header-with-bad-properties": (header_with_bad_properties, 2),
    "short-content-header": (short_header, 1),
    "heartbeat-on-channel": (heartbeat_on_channel, 1),
    "heartbeat-with-payload": (heartbeat_with_payload, 1),
    "unknown-delivery-tag": (unknown_delivery_tag, 8),
    "missing-exchange": (missing_exchange, 6),
    "missing-queue": (missing_queue, 6),
    "tx-without-select": (tx_without_select, 4),
    "reserved-exchange": (reserved_exchange, 4),
    "valid": (valid_command, 4),
}
_NAMES = tuple(KINDS)
_WEIGHTS = tuple(weight for _, weight in KINDS.values())


def make_case(rng: random.Random, queue: str) -> Case:
    """One case of a kind drawn at random (weighted), for a connection that declared `queue`."""
    kind = rng.choices(_NAMES, _WEIGHTS)[0]
    return KINDS[kind][0](rng, queue)


def bytes_to_complete(data: bytes, frame_max: int) -> int:
    """How many filler bytes complete the last frame of `data` as the broker splits it (0 when the bytes
    end on a frame boundary). A frame larger than frame_max is completed too, up to 1 MiB, for a broker
    that reads it whole before it refuses it; a larger one only up to its header. The filler is zeros,
    so a completed frame ends with 0 where the frame end belongs."""
    offset = 0
    while True:
        left = len(data) - offset
        if left == 0:
            return 0
        head = data[offset: offset + 7] + bytes(max(0, 7 - left))
        size = struct.unpack_from(">I", head, 3)[0]
        if size > COMPLETED_UP_TO:  # refused by any broker once its header is complete
            return max(0, 7 - left)
        total = 8 + size
        if left < total:
            return total - left
        if size > frame_max - 8:  # complete and too large: refused here; what follows is not read as frames
            return 0
        offset += total
