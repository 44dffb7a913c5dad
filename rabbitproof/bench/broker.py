"""Broker throughput: our impl beside RabbitMQ 3.10.8, same load generator, same machine, loopback.

    rabbitproof bench broker [--messages N] [--size BYTES] [--window W] [--batch B]
                                       [--prefetch P] [--ack-every K] [--targets impl,rabbitmq]
                                       [--modes transient,persistent]

For each broker and mode it measures, one after the other on the same queue:
- publish: N messages published with confirms (confirm.select), W publishes in flight at most,
  written B messages per socket write; the rate is N over the time until the last confirm arrived;
- consume: the same N messages consumed with manual acks, prefetch P, one basic.ack(multiple=true)
  every K deliveries; the rate is N over the time until the last ack was processed.
"transient" is delivery-mode 1 into a non-durable queue, "persistent" delivery-mode 2 into a durable
one (confirmed only once on disk). The load generator is one process and one thread with non-blocking
sockets: frames are encoded with pamqp once (templates) and written back to back, never one round trip
per message, and received frames are split with a fast path that reads only what it needs (delivery
and confirm tags). To show the generator is not the bottleneck, the bench also measures how fast it
can encode publishes and parse deliveries with no broker at all, and its own CPU use during each run.
"""

from __future__ import annotations

import argparse
import os
import selectors
import socket
import struct
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from pamqp import body as amqp_body
from pamqp import commands, frame, header
from rich.console import Console
from rich.table import Table

from rabbitproof.brokers.impl_broker import ImplBroker, ImplStartFailed
from rabbitproof.brokers.rabbitmq import RabbitMQNode, RabbitMQStartFailed, rabbitmq_installed
from rabbitproof.recording.rawclient import RawConnection
from rabbitproof.options import OneLineParser, int_in, names_in

TARGETS = ("impl", "rabbitmq")
MODES = ("transient", "persistent")
FRAME_HEADER = struct.Struct(">BHI")
METHOD_INDEX = struct.Struct(">I")
TAG_AND_FLAGS = struct.Struct(">QB")
BASIC_ACK = commands.Basic.Ack.index
BASIC_NACK = commands.Basic.Nack.index
BASIC_DELIVER = commands.Basic.Deliver.index
CLOSE_INDEXES = {commands.Channel.Close.index, commands.Connection.Close.index}
SEQUENCE = struct.Struct(">Q")


class BenchError(RuntimeError):
    """The broker refused or broke the run (a channel or connection close, a lost connection)."""


@dataclass
class PhaseResult:
    messages: int
    seconds: float
    cpu_seconds: float

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else float("inf")

    @property
    def cpu_share(self) -> float:
        """The generator's CPU time as a share of the wall time: near 1.0 would mean it is the limit."""
        return self.cpu_seconds / self.seconds if self.seconds > 0 else 0.0


# -- the load generator ------------------------------------------------------------------------------


class PublishEncoder:
    """Publish frames from pamqp-encoded templates: per message only the body frame is built."""

    def __init__(self, queue: str, size: int, persistent: bool, frame_max: int) -> None:
        if size + 8 > frame_max:
            raise ValueError(f"--size {size} does not fit one body frame of frame_max {frame_max}")
        properties = commands.Basic.Properties(delivery_mode=2 if persistent else 1)
        self.prefix = (frame.marshal(commands.Basic.Publish(exchange="", routing_key=queue), 1)
                       + frame.marshal(header.ContentHeader(body_size=size, properties=properties), 1))
        self.size = size
        self.body_head = FRAME_HEADER.pack(3, 1, size)
        self.filler = (b"rabbitproof-bench-" * (size // 18 + 1))[: max(0, size - 8)]

    def batch(self, first: int, count: int) -> bytes:
        """`count` publish commands (method, header, body frames) for sequence numbers from `first`."""
        if self.size >= 8:
            parts = [b"".join((self.prefix, self.body_head, SEQUENCE.pack(n), self.filler, b"\xce"))
                     for n in range(first, first + count)]
        elif self.size > 0:
            one = self.prefix + self.body_head + b"x" * self.size + b"\xce"
            parts = [one] * count
        else:
            parts = [self.prefix] * count  # an empty body has no body frame
        return b"".join(parts)


def split_frames(buf: bytearray) -> tuple[list[tuple[int, int, bytes]], int]:
    """Every complete method frame in buf as (type, channel, payload), and the bytes all complete
    frames take; content header and body frames are skipped without copying (the bench needs none)."""
    frames = []
    offset, end = 0, len(buf)
    while end - offset >= 8:
        frame_type, channel, size = FRAME_HEADER.unpack_from(buf, offset)
        total = size + 8
        if end - offset < total:
            break
        if frame_type == 1:
            frames.append((frame_type, channel, bytes(buf[offset + 7: offset + 7 + size])))
        offset += total
    return frames, offset


def _refusal(payload: bytes, channel: int) -> BenchError:
    raw = FRAME_HEADER.pack(1, channel, len(payload)) + bytes(payload) + b"\xce"
    _, _, close = frame.unmarshal(raw)
    return BenchError(f"{close.name} {close.reply_code} {close.reply_text}")


def _io_loop(sock: socket.socket, on_frames, want_write, deadline: float) -> None:
    """Drive one non-blocking socket: write what want_write() gives, feed read frames to on_frames()
    until it returns True. Raises BenchError on a lost connection or time-out."""
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE)
    out = bytearray()
    buf = bytearray()
    try:
        while True:
            if not out:
                out += want_write()
            sel.modify(sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if out else 0))
            for _, events in sel.select(timeout=1.0):
                if events & selectors.EVENT_WRITE and out:
                    sent = sock.send(out)
                    del out[:sent]
                if events & selectors.EVENT_READ:
                    data = sock.recv(1 << 20)
                    if not data:
                        raise BenchError("the broker closed the connection")
                    buf += data
                    frames, used = split_frames(buf)
                    del buf[:used]
                    extra, done = on_frames(frames)
                    out += extra
                    if done and not out:
                        return
                    if done:
                        sock.sendall(out)
                        return
            if time.monotonic() > deadline:
                raise BenchError("no progress before the deadline")
    finally:
        sel.close()


def publish_confirmed(conn: RawConnection, queue: str, messages: int, size: int, persistent: bool,
                      window: int, batch: int, timeout: float) -> PhaseResult:
    """Publish `messages` with confirms, pipelined; return when every one is confirmed."""
    encoder = PublishEncoder(queue, size, persistent, conn.frame_max)
    sock = conn.sock
    sock.setblocking(False)
    settled = bytearray(messages + 2)
    state = {"sent": 0, "confirmed": 0, "lowest": 1, "nacked": 0}

    def want_write() -> bytes:
        room = window - (state["sent"] - state["confirmed"])
        count = min(batch, room, messages - state["sent"])
        if count <= 0:
            return b""
        data = encoder.batch(state["sent"] + 1, count)
        state["sent"] += count
        return data

    def on_frames(frames):
        for frame_type, channel, payload in frames:
            if frame_type != 1:
                continue
            (index,) = METHOD_INDEX.unpack_from(payload, 0)
            if index == BASIC_ACK or index == BASIC_NACK:
                tag, flags = TAG_AND_FLAGS.unpack_from(payload, 4)
                if index == BASIC_NACK:
                    state["nacked"] += 1
                first = state["lowest"] if flags & 1 else tag
                for seq in range(first, tag + 1):
                    if not settled[seq]:
                        settled[seq] = 1
                        state["confirmed"] += 1
                lowest = state["lowest"]
                while lowest <= messages and settled[lowest]:
                    lowest += 1
                state["lowest"] = lowest
            elif index in CLOSE_INDEXES:
                raise _refusal(payload, channel)
        return b"", state["confirmed"] >= messages

    cpu0, t0 = time.process_time(), time.perf_counter()
    _io_loop(sock, on_frames, want_write, time.monotonic() + timeout)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    sock.setblocking(True)
    sock.settimeout(conn.timeout)
    if state["nacked"]:
        raise BenchError(f"the broker nacked {state['nacked']} publishes")
    return PhaseResult(messages, seconds, cpu)


def consume_acked(conn: RawConnection, queue: str, messages: int, prefetch: int, ack_every: int,
                  timeout: float) -> PhaseResult:
    """Consume `messages` with manual acks, one multiple ack per `ack_every` deliveries."""
    sock = conn.sock
    consume = frame.marshal(commands.Basic.Consume(queue=queue, consumer_tag="bench"), 1)
    state = {"delivered": 0, "acked_through": 0, "last_tag": 0, "started": False}

    def want_write() -> bytes:
        if not state["started"]:
            state["started"] = True
            return consume
        return b""

    def on_frames(frames):
        out = []
        for frame_type, channel, payload in frames:
            if frame_type != 1:
                continue
            (index,) = METHOD_INDEX.unpack_from(payload, 0)
            if index == BASIC_DELIVER:
                tag_at = 5 + payload[4]  # after the consumer-tag short string
                (state["last_tag"],) = SEQUENCE.unpack_from(payload, tag_at)
                state["delivered"] += 1
            elif index in CLOSE_INDEXES:
                raise _refusal(payload, channel)
        pending = state["delivered"] - state["acked_through"]
        done = state["delivered"] >= messages
        if pending >= ack_every or (done and pending):
            out.append(frame.marshal(commands.Basic.Ack(delivery_tag=state["last_tag"], multiple=True), 1))
            state["acked_through"] = state["delivered"]
        return b"".join(out), done

    cpu0, t0 = time.process_time(), time.perf_counter()
    sock.setblocking(False)
    _io_loop(sock, on_frames, want_write, time.monotonic() + timeout)
    sock.setblocking(True)
    sock.settimeout(conn.timeout)
    # A round trip after the last ack: the broker has processed every ack when qos-ok comes back.
    conn.rpc(1, commands.Basic.Qos(prefetch_count=prefetch))
    seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return PhaseResult(messages, seconds, cpu)


def generator_capacity(messages: int, size: int, batch: int) -> tuple[float, float]:
    """Messages per second the generator alone can encode (publishes) and parse (deliveries)."""
    encoder = PublishEncoder("bench-queue", size, True, 131072)
    t0 = time.perf_counter()
    for first in range(1, messages + 1, batch):
        encoder.batch(first, min(batch, messages - first + 1))
    encode_rate = messages / (time.perf_counter() - t0)

    deliver = []
    for tag in range(1, 2001):
        deliver.append(frame.marshal(commands.Basic.Deliver(consumer_tag="bench", delivery_tag=tag,
                                                            routing_key="bench-queue"), 1))
        deliver.append(frame.marshal(header.ContentHeader(body_size=size), 1))
        if size:
            deliver.append(frame.marshal(amqp_body.ContentBody(b"x" * size), 1))
    stream = b"".join(deliver)
    rounds = max(1, messages // 2000)
    t0 = time.perf_counter()
    for _ in range(rounds):
        buf = bytearray(stream)
        frames, used = split_frames(buf)
        for frame_type, _, payload in frames:
            if frame_type == 1 and METHOD_INDEX.unpack_from(payload, 0)[0] == BASIC_DELIVER:
                SEQUENCE.unpack_from(payload, 5 + payload[4])
        del buf[:used]
    parse_rate = rounds * 2000 / (time.perf_counter() - t0)
    return encode_rate, parse_rate


# -- running against brokers ---------------------------------------------------------------------------


def bench_broker(host: str, port: int, options: argparse.Namespace) -> dict[str, tuple[PhaseResult, PhaseResult]]:
    """Warm the broker up with a short unmeasured run, then measure each mode."""
    if options.warmup:
        warmup = argparse.Namespace(**{**vars(options), "messages": options.warmup, "warmup": 0,
                                       "modes": ["transient"]})
        run_modes(host, port, warmup, "warmup")
    return run_modes(host, port, options, "bench")


def run_modes(host: str, port: int, options: argparse.Namespace,
              prefix: str) -> dict[str, tuple[PhaseResult, PhaseResult]]:
    results = {}
    for mode in options.modes:
        persistent = mode == "persistent"
        queue = f"{prefix}-{mode}-{os.getpid()}"
        with RawConnection.connect(host, port, label=f"bench-{mode}", timeout=30) as conn:
            conn.channel_open(1)
            conn.queue_declare(1, queue, durable=persistent)
            conn.queue_purge(1, queue)
            conn.confirm_select(1)
            published = publish_confirmed(conn, queue, options.messages, options.size, persistent,
                                          options.window, options.batch, options.timeout)
        with RawConnection.connect(host, port, label=f"bench-{mode}-consumer", timeout=30) as conn:
            conn.channel_open(1)
            ready = int(conn.queue_declare(1, queue, durable=persistent, passive=True).message_count)
            if ready != options.messages:
                raise BenchError(f"{ready} messages in {queue} after {options.messages} confirmed publishes")
            conn.basic_qos(1, options.prefetch)
            consumed = consume_acked(conn, queue, options.messages, options.prefetch, options.ack_every,
                                     options.timeout)
            left = int(conn.queue_delete(1, queue))
            if left:
                raise BenchError(f"{left} messages left in {queue} after consuming all of them")
        results[mode] = (published, consumed)
    return results


def run_target(target: str, options: argparse.Namespace, workdir: Path):
    if target == "impl":
        broker = ImplBroker(workdir / "impl")
    else:
        broker = RabbitMQNode(workdir / "rabbitmq")
    broker.start()
    try:
        return bench_broker(broker.host, broker.port, options)
    finally:
        broker.close()


# -- command line ------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = OneLineParser(prog="rabbitproof bench broker",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int_in(1, 10_000_000), default=100_000,
                        help="messages per run (default 100000)")
    parser.add_argument("--warmup", type=int_in(0, 10_000_000), default=5_000,
                        help="messages of an unmeasured run before the measured ones (default 5000)")
    parser.add_argument("--size", type=int_in(0, 131_000), default=128,
                        help="body size in bytes, one body frame at most (default 128)")
    parser.add_argument("--window", type=int_in(1, 1_000_000), default=2000,
                        help="publishes in flight (unconfirmed) at most (default 2000)")
    parser.add_argument("--batch", type=int_in(1, 10_000), default=100,
                        help="publishes per socket write (default 100)")
    parser.add_argument("--prefetch", type=int_in(0, 65535), default=1000,
                        help="consumer prefetch count, 0 for no limit (default 1000)")
    parser.add_argument("--ack-every", type=int_in(1, 1_000_000), default=100,
                        help="deliveries per multiple ack (default 100)")
    parser.add_argument("--targets", type=names_in(TARGETS, "a target"), default=None,
                        help="impl,rabbitmq (default: impl, and rabbitmq when installed)")
    parser.add_argument("--modes", type=names_in(MODES, "a mode"), default=",".join(MODES),
                        help="transient,persistent (default both)")
    parser.add_argument("--timeout", type=int_in(1, 3600), default=300,
                        help="seconds a phase may take before the run is abandoned (default 300)")
    options = parser.parse_args(argv)
    if options.prefetch and options.ack_every > options.prefetch:
        parser.error(f"--ack-every {options.ack_every} exceeds --prefetch {options.prefetch}: the consumer "
                     "would wait for deliveries the broker holds back until it acks")
    if options.batch > options.window:
        parser.error(f"--batch {options.batch} exceeds --window {options.window}")
    options.rabbitmq_missing = False
    if options.targets is None:
        options.targets = ("impl",) + (("rabbitmq",) if rabbitmq_installed() else ())
        options.rabbitmq_missing = not rabbitmq_installed()
    elif "rabbitmq" in options.targets and not rabbitmq_installed():
        parser.error("--targets includes rabbitmq but RabbitMQ 3.10.8 is not installed "
                     "(/usr/lib/rabbitmq/bin/rabbitmq-server): run `make rabbitmq`")
    return options


def main(argv: list[str] | None = None, console: Console | None = None) -> int:
    """Run the bench and print its tables; 0 on success, 1 when a broker failed the run."""

    options = parse_args(argv)
    console = console if console is not None else Console()
    console.print(f"[bold]broker bench[/]: {options.messages} messages of {options.size} bytes, "
                  f"window {options.window}, batch {options.batch}, prefetch {options.prefetch}, "
                  f"ack every {options.ack_every}, warm-up {options.warmup}; {os.cpu_count()} CPUs, loopback")
    if options.rabbitmq_missing:
        console.print("[yellow]RabbitMQ 3.10.8 is not installed (make rabbitmq): impl only[/]")

    encode_rate, parse_rate = generator_capacity(options.messages, options.size, options.batch)
    results: dict[str, dict[str, tuple[PhaseResult, PhaseResult]]] = {}
    with tempfile.TemporaryDirectory(prefix="rabbitproof-bench-") as workdir:
        for target in options.targets:
            console.print(f"running against {target} ...")
            try:
                results[target] = run_target(target, options, Path(workdir))
            except (BenchError, ImplStartFailed, RabbitMQStartFailed, OSError) as error:
                console.print(f"[red]{target}: {type(error).__name__}: {error}[/]")
                return 1

    table = Table(title="msgs/s (publish: until confirmed; consume: until acked)")
    table.add_column("broker")
    table.add_column("mode")
    table.add_column("publish msgs/s", justify="right")
    table.add_column("consume msgs/s", justify="right")
    table.add_column("generator CPU pub/cons", justify="right")
    for target, by_mode in results.items():
        for mode, (pub, cons) in by_mode.items():
            table.add_row(target, mode, f"{pub.rate:,.0f}", f"{cons.rate:,.0f}",
                          f"{pub.cpu_share:.0%} / {cons.cpu_share:.0%}")
    console.print(table)

    if "impl" in results and "rabbitmq" in results:
        ratios = Table(title="impl / RabbitMQ 3.10.8")
        ratios.add_column("mode")
        ratios.add_column("publish", justify="right")
        ratios.add_column("consume", justify="right")
        for mode in options.modes:
            impl_pub, impl_cons = results["impl"][mode]
            rmq_pub, rmq_cons = results["rabbitmq"][mode]
            ratios.add_row(mode, f"{impl_pub.rate / rmq_pub.rate:.2f}", f"{impl_cons.rate / rmq_cons.rate:.2f}")
        console.print(ratios)

    capacity = Table(title="load generator alone (no broker)")
    capacity.add_column("what")
    capacity.add_column("msgs/s", justify="right")
    capacity.add_column("x fastest broker rate", justify="right")
    fastest_pub = max((pub.rate for by_mode in results.values() for pub, _ in by_mode.values()), default=0)
    fastest_cons = max((cons.rate for by_mode in results.values() for _, cons in by_mode.values()), default=0)
    capacity.add_row("encode publishes", f"{encode_rate:,.0f}", f"{encode_rate / fastest_pub:.1f}" if fastest_pub else "-")
    capacity.add_row("parse deliveries", f"{parse_rate:,.0f}", f"{parse_rate / fastest_cons:.1f}" if fastest_cons else "-")
    console.print(capacity)
    console.print("The generator CPU column is its own CPU time over the wall time of each run: well below "
                  "100% means it spent the rest waiting for the broker.")
    return 0
