"""ER-1, ER-2, ER-3: bad input from clients never crashes the broker nor harms another client.

Several connections at once send bad input, one case per connection: frames that break AMQP framing
or grammar on purpose (each kind with the reply codes RabbitMQ 3.10.8 gives for it, which the same test
confirms against the real broker), well-formed methods that are wrong (channel errors), valid frames
with random bytes flipped, and random bytes. Meanwhile a well-behaved client publishes with confirms
and consumes its messages back; it must be served throughout and get every message intact and in order.

The oracle for each bad connection, after the bad bytes and a probe (basic.qos on channel 1):
- a connection.close with a hard-error code (ER-2), answered with close-ok and then the end of the
  TCP stream; or
- a channel.close with a soft-error code, after which the connection still works (ER-1); or
- the probe's basic.qos-ok, only for inputs that may well be valid (random flips, random bytes);
never silence (the broker is given filler bytes that complete any partial frame, and must then
reject it), and, from our broker, never a dropped connection without a connection.close.
Generated from a seeded random.Random, bounded in count: each worker sends its cases, and goes on until
the good client has been served GOOD_ROUNDS rounds meanwhile, however fast or loaded the machine. No
assertion is timed: a wait is only how long to wait before padding a partial frame (which changes no
outcome the case allows) or before calling a broker silent, and those are generous.
"""

from __future__ import annotations

import itertools
import os
import random
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import pytest
from pamqp import body as amqp_body
from pamqp import commands, frame, header

from rabbitproof.brokers import Broker
from rabbitproof.recording.rawclient import (
    ChannelClosed,
    ConnectionClosed,
    ConnectionLost,
    ProtocolViolation,
    RawConnection,
)
from tests.fixtures.patience import REPLY_PATIENCE

SEED = int(os.environ.get("RABBITPROOF_BADINPUT_SEED", "501502503"))
WORKERS = 5
CASES_PER_WORKER = 120
GOOD_ROUNDS = 5    # rounds the good client is served while the bad input comes, at least
SILENT = 30.0      # seconds without an answer, after the filler bytes, before a broker is called silent
HARD = {501, 502, 503, 504, 505, 540}
SOFT = {403, 404, 405, 406}
FRAME_END = b"\xce"


def _m(channel: int, value: object) -> bytes:
    return frame.marshal(value, channel)


def _raw_frame(frame_type: int, channel: int, payload: bytes, end: bytes = FRAME_END) -> bytes:
    return struct.pack(">BHI", frame_type, channel, len(payload)) + payload + end


def _shortstr(value: bytes) -> bytes:
    return bytes([len(value)]) + value


def _publish(queue: str, body: bytes, exchange: str = "", channel: int = 1) -> bytes:
    return (_m(channel, commands.Basic.Publish(exchange=exchange, routing_key=queue))
            + _m(channel, header.ContentHeader(body_size=len(body)))
            + _m(channel, amqp_body.ContentBody(body)))


def valid_sequences(queue: str) -> list[bytes]:
    """Frame sequences that are fine on an open channel 1 of a connection owning `queue`."""
    return [
        _m(1, commands.Basic.Qos(prefetch_count=7)),
        _m(1, commands.Queue.Declare(queue=queue, exclusive=True)),
        _publish(queue, b"payload-" + bytes(range(32))),
        _m(1, commands.Basic.Get(queue=queue)),
        _m(1, commands.Exchange.Declare(exchange="amq.direct", exchange_type="direct", passive=True)),
        _m(1, commands.Queue.Bind(queue=queue, exchange="amq.direct", routing_key=queue)),
        _m(1, commands.Basic.Consume(queue=queue, consumer_tag="c1")),
        _m(1, commands.Confirm.Select()),
        _m(1, commands.Basic.Recover(requeue=True)),
        _m(1, commands.Queue.Purge(queue=queue)),
    ]


@dataclass(frozen=True)
class BadCase:
    """Bytes to send after channel 1 is open, and what may come of them.

    `allowed` holds the outcomes the broker may give: ("connection", code), ("channel", code) or
    ("served", 0). `rabbitmq_may_drop` marks the cases where RabbitMQ 3.10.8 closes the TCP
    connection without a connection.close (unknown method ids); our broker must still send one.
    """

    kind: str
    data: bytes
    allowed: frozenset[tuple[str, int]]
    rabbitmq_may_drop: bool = False


def _conn(*codes: int) -> frozenset[tuple[str, int]]:
    return frozenset(("connection", c) for c in codes)


def _chan(*codes: int) -> frozenset[tuple[str, int]]:
    return frozenset(("channel", c) for c in codes)


ANYTHING_CLEAR = _conn(*HARD) | _chan(*SOFT) | {("served", 0)}


def make_case(rng: random.Random, queue: str) -> BadCase:
    """One bad input, of a kind drawn at random. Where RabbitMQ 3.10.8 answers a kind with a
    connection.close or channel.close, the allowed code is exactly its code (the rabbitmq run of this
    test checks that); where it drops the connection instead, the codes AMQP 0-9-1 assigns are allowed."""
    valid = valid_sequences(queue)
    kind = rng.choice([
        "bad-frame-end", "unknown-frame-type", "oversized-frame", "unknown-method", "truncated-arguments",
        "malformed-table",
        "unopened-channel", "header-without-method", "body-without-header", "method-inside-content",
        "body-longer-than-header", "heartbeat-on-channel", "second-channel-open", "connection-method-on-channel",
        "channel-method-on-channel-0", "server-method-from-client",
        "unknown-delivery-tag", "missing-exchange", "tx-commit-without-tx", "missing-queue",
        "flip", "flip", "flip", "flip", "random-bytes", "random-bytes",
    ])
    qos = _m(1, commands.Basic.Qos(prefetch_count=1))
    if kind == "bad-frame-end":
        end = bytes([rng.choice([b for b in range(256) if b != 0xCE])])
        return BadCase(kind, rng.choice(valid)[:-1] + end, _conn(501))
    if kind == "unknown-frame-type":
        frame_type = rng.choice([0, 4, 5, 6, 7, 9, 42, 255])
        return BadCase(kind, _raw_frame(frame_type, 1, rng.randbytes(rng.randint(1, 20))), _conn(501))
    if kind == "oversized-frame":
        size = rng.randint(1 << 20, (1 << 32) - 1)
        return BadCase(kind, struct.pack(">BHI", rng.choice([1, 2, 3]), 1, size) + rng.randbytes(16), _conn(501))
    if kind == "unknown-method":
        class_id, method_id = rng.choice([(60, 999), (99, 10), (0, 0), (20, 77), (10, 12), (65535, 65535)])
        payload = struct.pack(">HH", class_id, method_id) + rng.randbytes(rng.randint(0, 8))
        return BadCase(kind, _raw_frame(1, 1, payload), _conn(501, 503, 540), rabbitmq_may_drop=True)
    if kind == "truncated-arguments":
        whole = rng.choice([f for f in valid if f[0] == 1 and len(f) > 16])
        payload = whole[7:-1]
        cut = payload[: rng.randint(5, len(payload) - 1)]
        return BadCase(kind, _raw_frame(1, 1, cut), _conn(501))
    if kind == "malformed-table":
        # queue.declare whose arguments field table breaks its own grammar.
        name = f"x-{rng.choice(['k', 'max-length', 'message-ttl'])}".encode()
        broken = rng.choice([
            _shortstr(name) + rng.choice(b"ZzQ!\x00") .to_bytes(1, "big") + b"\x00\x00",  # no such field type
            _shortstr(name) + b"S" + struct.pack(">I", rng.randint(3, 1000)) + b"ab",  # string past the table
            _shortstr(name) + b"I" + b"\x00\x01",  # a 32-bit integer cut short
            bytes([200]) + name,  # a field name longer than the table
        ])
        payload = struct.pack(">HHH", 50, 10, 0) + _shortstr(queue.encode()) + b"\x00"
        payload += struct.pack(">I", len(broken)) + broken
        return BadCase(kind, _raw_frame(1, 1, payload), _conn(501, 502), rabbitmq_may_drop=True)
    if kind == "unopened-channel":
        channel = rng.randint(2, 2047)
        return BadCase(kind, _m(channel, commands.Basic.Qos(prefetch_count=1)), _conn(504))
    if kind == "header-without-method":
        return BadCase(kind, _m(1, header.ContentHeader(body_size=rng.randint(0, 100))), _conn(505))
    if kind == "body-without-header":
        return BadCase(kind, _m(1, amqp_body.ContentBody(rng.randbytes(rng.randint(1, 50)))), _conn(505))
    if kind == "method-inside-content":
        start = _m(1, commands.Basic.Publish(routing_key=queue))
        if rng.random() < 0.5:
            start += _m(1, header.ContentHeader(body_size=10))
        return BadCase(kind, start + qos, _conn(505))
    if kind == "body-longer-than-header":
        return BadCase(kind, _m(1, commands.Basic.Publish(routing_key=queue))
                       + _m(1, header.ContentHeader(body_size=2)) + _m(1, amqp_body.ContentBody(b"abc"))
                       + _m(1, amqp_body.ContentBody(b"def")), _conn(505))
    if kind == "heartbeat-on-channel":
        return BadCase(kind, _raw_frame(8, rng.randint(1, 5), b""), _conn(505))
    if kind == "second-channel-open":
        return BadCase(kind, _m(1, commands.Channel.Open()), _conn(504))
    if kind == "connection-method-on-channel":
        return BadCase(kind, _m(1, rng.choice([commands.Connection.Open(), commands.Connection.TuneOk()])),
                       _conn(503))
    if kind == "channel-method-on-channel-0":
        return BadCase(kind, _m(0, rng.choice([commands.Basic.Qos(prefetch_count=1), commands.Channel.Flow(active=True),
                                               commands.Queue.Declare(queue=queue)])), _conn(504))
    if kind == "server-method-from-client":
        method = rng.choice([commands.Basic.QosOk(), commands.Queue.DeclareOk(queue=queue, message_count=0, consumer_count=0),
                             commands.Basic.Deliver(consumer_tag="x", delivery_tag=1, routing_key=queue)])
        data = _m(1, method)
        if isinstance(method, commands.Basic.Deliver):
            data += _m(1, header.ContentHeader(body_size=1)) + _m(1, amqp_body.ContentBody(b"x"))
        return BadCase(kind, data, _conn(503))
    if kind == "unknown-delivery-tag":  # ACK-4
        tag = rng.randint(1, 2**63 - 1)
        method = rng.choice([commands.Basic.Ack(delivery_tag=tag), commands.Basic.Reject(delivery_tag=tag),
                             commands.Basic.Nack(delivery_tag=tag)])
        return BadCase(kind, _m(1, method), _chan(406))
    if kind == "missing-exchange":  # PC-9
        return BadCase(kind, _publish(queue, b"x", exchange=f"no-such-exchange-{rng.randint(0, 999)}"), _chan(404))
    if kind == "tx-commit-without-tx":  # TX-10
        return BadCase(kind, _m(1, rng.choice([commands.Tx.Commit(), commands.Tx.Rollback()])), _chan(406))
    if kind == "missing-queue":
        missing = f"no-such-queue-{rng.randint(0, 999)}"
        method = rng.choice([commands.Queue.Declare(queue=missing, passive=True), commands.Basic.Get(queue=missing),
                             commands.Basic.Consume(queue=missing)])
        return BadCase(kind, _m(1, method), _chan(404))
    if kind == "flip":
        data = bytearray(rng.choice(valid))
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        return BadCase(kind, bytes(data), ANYTHING_CLEAR, rabbitmq_may_drop=True)
    data = rng.randbytes(rng.randint(1, 64))
    return BadCase("random-bytes", data, ANYTHING_CLEAR, rabbitmq_may_drop=True)


@dataclass
class Outcome:
    kind: str
    result: tuple[str, int]
    text: str = ""
    padded: bool = False
    seconds: float = 0.0


def run_case(broker: Broker, case: BadCase, queue: str, label: str) -> Outcome:
    """Send one bad case on a fresh connection and classify the broker's answer."""
    conn = RawConnection.connect(broker.host, broker.port, broker.user, broker.password, label=label,
                                 timeout=60)
    padded = False
    try:
        conn.channel_open(1)
        conn.queue_declare(1, queue, exclusive=True)
        try:
            conn.send_raw(case.data, channel=1)
            conn.send(1, commands.Basic.Qos(prefetch_count=3))
        except OSError:
            pass  # the broker already closed the connection; what it sent first is still readable
        probes_answered = 0
        # A case that must be refused is probed until the refusal comes (or SILENT seconds pass): a
        # broker that reports an error on another channel late (RabbitMQ's 504) is not taken as served.
        give_up = time.monotonic() + SILENT
        while True:
            try:
                # Unanswered for a second: a partial frame may be waiting for its end, so pad it. A reply
                # that was only slow still comes first, and the filler's own refusal is a clear one.
                conn.expect(1, commands.Basic.QosOk, timeout=SILENT if padded else 1.0)
                probes_answered += 1
                if probes_answered >= 2 and (("served", 0) in case.allowed or time.monotonic() > give_up):
                    return Outcome(case.kind, ("served", 0), "", padded)
                # Errors on other channels may be reported a moment after the probe's answer
                # (RabbitMQ's 504 for an unopened channel is): ask once more.
                time.sleep(0.2)
                conn.send(1, commands.Basic.Qos(prefetch_count=3))
                continue
            except TimeoutError:
                if padded:
                    return Outcome(case.kind, ("silent", 0), "no answer, even after filler bytes", True)
                # A partial frame is waiting for its end: complete it so the broker must judge it.
                try:
                    conn.send_raw(bytes(conn.frame_max + 8))
                except OSError:
                    pass
                padded = True
                continue
            except ConnectionClosed as closed:
                conn.close_ok(closed)
                if closed.reply_code == 501:
                    # After a framing error the broker cannot find our close-ok in the stream any
                    # more; RabbitMQ closes the socket 3 s later. Do not wait for that.
                    return Outcome(case.kind, ("connection", closed.reply_code), closed.reply_text, padded)
                try:
                    while conn.pump(SILENT):  # after close-ok the broker closes the TCP connection
                        pass
                    return Outcome(case.kind, ("connection-not-closed-after-close-ok", closed.reply_code),
                                   closed.reply_text, padded)
                except ConnectionLost:
                    pass
                return Outcome(case.kind, ("connection", closed.reply_code), closed.reply_text, padded)
            except ChannelClosed as closed:
                conn.close_ok(closed)
                conn.channel_open(2)  # ER-1: the connection lives on
                conn.rpc(2, commands.Basic.Qos(prefetch_count=1))
                return Outcome(case.kind, ("channel", closed.reply_code), closed.reply_text, padded)
            except ConnectionLost:
                return Outcome(case.kind, ("dropped", 0), "TCP closed without connection.close", padded)
            except ProtocolViolation as violation:
                return Outcome(case.kind, ("undecodable-reply", 0), str(violation), padded)
            except OSError as error:
                return Outcome(case.kind, ("dropped", 0), f"{type(error).__name__}: {error}", padded)
    finally:
        conn.abort()


@dataclass
class GoodClientReport:
    rounds: int = 0
    messages: int = 0
    worst_round_seconds: float = 0.0
    errors: list[str] = field(default_factory=list)


def good_client(broker: Broker, stop: threading.Event, report: GoodClientReport, served: threading.Event) -> None:
    """Publish 20 messages with confirms, get them back in order, intact; again until told to stop.
    ``served`` is set after GOOD_ROUNDS rounds, or when the client gives up."""
    try:
        with RawConnection.connect(broker.host, broker.port, broker.user, broker.password,
                                   label="good", timeout=60) as conn:
            conn.channel_open(1)
            conn.confirm_select(1)
            queue = f"good-client-{os.getpid()}"
            conn.queue_declare(1, queue, exclusive=True)
            serial = 0
            while not stop.is_set():
                started = time.monotonic()
                bodies = [f"good-{serial + i}-".encode() * (1 + (serial + i) % 7) for i in range(20)]
                serial += 20
                frames = []
                for b in bodies:
                    frames += conn.content_frames(1, commands.Basic.Publish(routing_key=queue), b)
                conn.send_frames(frames)
                confirmed = 0
                while confirmed < len(bodies):
                    ack = conn.expect(1, commands.Basic.Ack, commands.Basic.Nack, timeout=60).method
                    assert isinstance(ack, commands.Basic.Ack), f"good client got {ack!r}"
                    confirmed = int(ack.delivery_tag) - (serial - 20) if ack.multiple else confirmed + 1
                got = [conn.basic_get(1, queue, no_ack=True) for _ in bodies]
                assert [g.body for g in got] == bodies, "good client's messages changed or were reordered"
                report.rounds += 1
                report.messages += len(bodies)
                report.worst_round_seconds = max(report.worst_round_seconds, time.monotonic() - started)
                if report.rounds >= GOOD_ROUNDS:
                    served.set()
    except Exception as error:  # reported and asserted on by the test
        report.errors.append(f"{type(error).__name__}: {error}")
    finally:
        served.set()


def bad_worker(broker: Broker, worker: int, good_served: threading.Event, outcomes: list[tuple[BadCase, Outcome]],
               lock: threading.Lock) -> None:
    """CASES_PER_WORKER cases, then more until the good client has been served its rounds meanwhile."""
    rng = random.Random(f"{SEED}-{worker}")
    for i in itertools.count():
        if i >= CASES_PER_WORKER and good_served.is_set():
            return
        queue = f"bad-{worker}-{i}"
        case = make_case(rng, queue)
        started = time.monotonic()
        try:
            outcome = run_case(broker, case, queue, f"bad-{worker}-{i}")
        except Exception as error:  # the set-up itself failed: the broker is in trouble
            outcome = Outcome(case.kind, ("harness-error", 0), f"{type(error).__name__}: {error}")
        outcome.seconds = time.monotonic() - started
        with lock:
            outcomes.append((case, outcome))


def verdict(kind: str, case: BadCase, outcome: Outcome) -> str | None:
    """None if the outcome is allowed for this case on this broker, else why not."""
    if outcome.result in case.allowed:
        return None
    if kind == "rabbitmq" and case.rabbitmq_may_drop and outcome.result == ("dropped", 0):
        return None
    return f"{case.kind}: got {outcome.result} {outcome.text!r}, allowed {sorted(case.allowed)}; data {case.data[:48]!r}"


@pytest.mark.parametrize("kind", ["impl", "rabbitmq"])
def test_bad_input_is_refused_cleanly_while_a_good_client_is_served(kind, request):
    broker: Broker = request.getfixturevalue("impl_broker" if kind == "impl" else "rabbitmq_node")
    started = time.monotonic()
    stop, good_served = threading.Event(), threading.Event()
    good = GoodClientReport()
    good_thread = threading.Thread(target=good_client, args=(broker, stop, good, good_served), daemon=True)
    good_thread.start()
    outcomes: list[tuple[BadCase, Outcome]] = []
    lock = threading.Lock()
    workers = [threading.Thread(target=bad_worker, args=(broker, w, good_served, outcomes, lock), daemon=True)
               for w in range(WORKERS)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    rounds_during_attack = good.rounds
    stop.set()
    good_thread.join(120)
    elapsed = time.monotonic() - started

    by_kind: Counter[tuple[str, str]] = Counter()
    seconds: Counter[tuple[str, str]] = Counter()
    for case, outcome in outcomes:
        key = (case.kind, f"{outcome.result[0]} {outcome.result[1]}".strip())
        by_kind[key] += 1
        seconds[key] += outcome.seconds
    print(f"\n{kind}: {len(outcomes)} bad connections from {WORKERS} clients at once in {elapsed:.1f} s, seed {SEED}")
    for (case_kind, result), n in sorted(by_kind.items()):
        print(f"  {case_kind:30} {result:16} x{n:<4} {seconds[(case_kind, result)] / n * 1000:6.0f} ms each")
    print(f"  good client: {good.rounds} rounds, {good.messages} messages intact and in order, "
          f"worst round {good.worst_round_seconds * 1000:.0f} ms, errors {good.errors}")
    if kind == "impl":
        tracebacks = broker.stderr_text().count("Traceback")
        print(f"  impl stderr: {tracebacks} tracebacks")

    failures = [v for case, outcome in outcomes if (v := verdict(kind, case, outcome))]
    assert broker.is_running(), f"{kind} died under bad input:\n{broker.log_tail()}"
    assert not failures, f"{len(failures)} unclear refusals:\n" + "\n".join(failures[:25])
    assert not good.errors, good.errors
    assert rounds_during_attack >= GOOD_ROUNDS, f"the good client was served only {rounds_during_attack} rounds"
    assert len(outcomes) >= WORKERS * CASES_PER_WORKER
    # The broker still serves a new client after all that.
    with RawConnection.connect(broker.host, broker.port, broker.user, broker.password, timeout=REPLY_PATIENCE) as after:
        after.channel_open(1)
        after.rpc(1, commands.Basic.Qos(prefetch_count=1))


AMQP_0_9_1 = b"AMQP\x00\x00\x09\x01"
BAD_PROTOCOL_HEADERS = [
    b"AMQP\x00\x00\x09\x02",  # a revision we do not speak
    b"AMQP\x01\x01\x00\x0a",  # AMQP 0-10
    b"AMQP\x00\x00\x08\x00",  # 0-8
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    b"\x01\x00\x00\x00\x00\x00\x04\x00\x0a\x00\x0b\xce",  # a frame before any protocol header
]


@pytest.mark.parametrize("kind", ["impl", "rabbitmq"])
def test_bad_protocol_header_gets_our_header_and_a_close(kind, request):
    """A client that does not open with AMQP 0-9-1's header is told the version the broker speaks
    (the protocol header `AMQP 0 0 9 1`) and the socket is closed; nothing else is sent."""
    import socket

    broker: Broker = request.getfixturevalue("impl_broker" if kind == "impl" else "rabbitmq_node")
    rng = random.Random(f"{SEED}-header")
    attempts = BAD_PROTOCOL_HEADERS + [rng.randbytes(8) for _ in range(5)]
    answers = []
    for attempt in attempts:
        with socket.create_connection((broker.host, broker.port), timeout=10) as sock:
            sock.sendall(attempt)
            received = b""
            try:
                while chunk := sock.recv(4096):
                    received += chunk
            except ConnectionResetError:
                pass  # RabbitMQ resets the connection after its answer; the answer was read
        answers.append(received)
        assert received in (b"", AMQP_0_9_1), f"{attempt!r} was answered with {received!r}"
    with_header = sum(a == AMQP_0_9_1 for a in answers)
    print(f"\n{kind}: {len(attempts)} bad protocol headers; answered with the 0-9-1 header: "
          f"{with_header}, closed silently: {answers.count(b'')}")
    assert broker.is_running()
    with RawConnection.connect(broker.host, broker.port, broker.user, broker.password, timeout=REPLY_PATIENCE) as after:
        after.channel_open(1)
