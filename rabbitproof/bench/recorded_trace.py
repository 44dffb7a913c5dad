"""Trace checker on a run recorded from RabbitMQ 3.10.8: how long the spec takes to judge it.

    rabbitproof bench recorded-trace [--messages 200] [--cuts 100,300,1000] [--broker rabbitmq|impl]

The run is a demanding real one: a publisher in confirm mode publishes persistent messages to a durable
queue one at a time (``--batch``), waiting for their confirms; a consumer connection with two channels (prefetch 10
each) acknowledges each delivery with multiple=true (which also covers any earlier one); the broker is killed (SIGKILL) half-way and
restarted, and both clients connect again and go on until every message is confirmed and drained. The
recording (raw client, every frame) goes through ``rabbitproof.recording.observations``; the checker is
timed on prefixes of the trace cut at whole steps near each asked size, and on the whole trace. Wall-clock
times on this machine; compare within one run.
"""
from __future__ import annotations

import pickle
import tempfile
import time
from pathlib import Path

from pamqp import commands
from rich.console import Console
from rich.table import Table

from rabbitproof.spec import trace
from rabbitproof.recording import observations

from rabbitproof.brokers import make_broker
from rabbitproof.options import OneLineParser, output_console
from rabbitproof.recording.rawclient import ConnectionLost, RawConnection, persistent

QUEUE = "trace-bench"


def _pump(conn: RawConnection, quiet: float = 0.05) -> None:
    try:
        while conn.pump(quiet):
            pass
    except ConnectionLost:
        pass


def _connect(broker) -> RawConnection:
    return RawConnection.connect(broker.host, broker.port, broker.user, broker.password)


def record(broker, messages: int, batch: int = 4) -> list:
    """Run the workload against ``broker`` (killed and restarted once); the recording's slots."""
    pub_logs, con_logs = [], []
    pub, con = _connect(broker), _connect(broker)
    sent = 0
    killed = False
    acked = {1: 0, 2: 0}

    def start() -> None:
        pub.send(1, commands.Channel.Open())
        pub.send(1, commands.Queue.Declare(queue=QUEUE, durable=True), commands.Confirm.Select())
        con.send(1, commands.Channel.Open())
        con.send(2, commands.Channel.Open())
        for ch in (1, 2):
            con.send(ch, commands.Basic.Qos(prefetch_count=10), commands.Basic.Consume(queue=QUEUE,
                                                                                     consumer_tag=f"c{ch}"))
        _pump(pub)
        _pump(con)

    def consume_some() -> None:
        _pump(con)
        for ch in (1, 2):
            tags = [c.method.delivery_tag for c in con.take_all(ch) if c.name == "Basic.Deliver"]
            for tag in tags:
                if tag > acked[ch]:
                    con.send(ch, commands.Basic.Ack(delivery_tag=tag, multiple=True))
                    acked[ch] = tag

    start()
    while sent < messages:
        n = min(batch, messages - sent)
        frames = []
        for i in range(n):
            frames += pub.content_frames(1, commands.Basic.Publish(exchange="", routing_key=QUEUE),
                                         f"msg-{sent + i + 1}".encode(), persistent())
        pub.send_frames(frames)
        sent += n
        _pump(pub)
        consume_some()
        if not killed and sent >= messages // 2:
            broker.kill()
            killed = True
            _pump(pub)
            _pump(con)
            pub_logs.append(pub.command_log())
            con_logs.append(con.command_log())
            broker.restart()
            pub, con = _connect(broker), _connect(broker)
            acked = {1: 0, 2: 0}
            start()
    for _ in range(20):
        consume_some()
    pub_logs.append(pub.command_log())
    con_logs.append(con.command_log())
    pub.close(timeout=2.0)
    con.close(timeout=2.0)
    return [pub_logs, con_logs]


def cut(slots: list, size: int) -> observations.Recorded:
    """The recording up to the moment its trace holds about ``size`` observations (every client's
    log cut at one instant, so what was received was sent before it)."""
    times = sorted(e.at for slot in slots for log in slot for e in log)

    def upto(t: float) -> observations.Recorded:
        return observations.from_recording([[[e for e in log if e.at <= t] for log in slot
                                         if log and log[0].at <= t] or [[]] for slot in slots])

    low, high = 0, len(times) - 1
    while low < high:                       # the first instant whose trace reaches ``size``
        mid = (low + high) // 2
        if upto(times[mid]).size() >= size:
            high = mid
        else:
            low = mid + 1
    return upto(times[low])


def main(argv=None, console: Console | None = None) -> int:
    parser = OneLineParser(prog="rabbitproof bench recorded-trace",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=200, help="persistent publishes (200 give about 850 observations)")
    parser.add_argument("--cuts", default="100,300,1000", help="observation counts to time, comma-separated")
    parser.add_argument("--broker", choices=("rabbitmq", "impl"), default="rabbitmq")
    parser.add_argument("--batch", type=int, default=1, help="publishes per write")
    parser.add_argument("--save", type=Path, help="also write the recording (pickled command logs) here")
    parser.add_argument("--load", type=Path, help="check a recording saved with --save instead of recording")
    parser.add_argument("--max-nodes", type=int, default=2_000_000)
    args = parser.parse_args(argv)
    try:
        cuts = [int(x) for x in args.cuts.split(",")]
    except ValueError:
        parser.error(f"--cuts must be whole numbers separated by commas, not {args.cuts!r}")
    if args.messages < 2 or args.batch < 1 or any(c < 1 for c in cuts):
        parser.error("--messages must be at least 2, --batch and every cut at least 1")
    console = console or output_console()
    if args.load:
        try:
            slots = pickle.loads(args.load.read_bytes())
        except (OSError, pickle.UnpicklingError, EOFError) as error:
            parser.error(f"cannot read the recording {args.load}: {error}")
    else:
        broker = make_broker(args.broker, Path(tempfile.mkdtemp(prefix="recorded-bench-")))
        broker.start()
        try:
            console.print(f"recording {args.messages} messages on {args.broker} (one SIGKILL half-way) ...")
            slots = record(broker, args.messages, args.batch)
        finally:
            broker.close()
    if args.save:
        args.save.write_bytes(pickle.dumps(slots))
    run = observations.from_recording(slots)
    table = Table(title=f"trace checker on a recorded {args.broker} run ({run.size()} observations)")
    for column in ("observations", "verdict", "search nodes", "seconds"):
        table.add_column(column, justify="right")
    failed = False
    for size in sorted({min(c, run.size()) for c in cuts} | {run.size()}):
        part = cut(slots, size)
        start = time.perf_counter()
        verdict = trace.check(part.observations, run.config, max_nodes=args.max_nodes, order=part.order)
        seconds = time.perf_counter() - start
        failed |= verdict.status == trace.REJECTED
        table.add_row(f"{part.size():,}", verdict.status,
                      f"{verdict.explored:,}", f"{seconds:.2f}")
        if not verdict.ok:
            console.print(verdict.explain())
    console.print(table)
    return 1 if failed else 0
