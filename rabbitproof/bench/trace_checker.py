"""Trace checker benchmark: how long ``spec.trace.check`` takes to decide long traces, and how that grows.

    rabbitproof bench trace-checker [--sizes 100,300,1000] [--seeds 5] [--messages 200] [--max-nodes N]

The traces are random executions of the spec (``spec.simulate``) in the configuration the trace
checker must keep up with: one publisher in confirm mode publishing persistent messages
(200 by default) to a durable queue, two consumers on two channels of another connection
acknowledging with and without multiple, and one broker crash part-way (which every client sees as
a lost connection), after which the clients connect again. Each trace is cut to the number of
observations asked for; the crash comes at step nine tenths of that number (about two fifths of the
way through the observations). With 200 messages the workload ends at about 770 observations, so a
larger size needs ``--messages`` (about a quarter of the size). Times are wall-clock on this machine.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import replace

from rich.console import Console
from rich.table import Table

from rabbitproof.spec import simulate, trace
from rabbitproof.spec.configs import TO_Q0, Config
from rabbitproof.spec.roles import QueueSpec, Role

from rabbitproof.options import OneLineParser, output_console

BENCH = Config(
    "trace_bench", "200 persistent confirmed publishes, two consumers acking with multiple, one crash",
    connections=2, channels=2, messages=200, crashes=1, queues=(QueueSpec(durable=True),),
    roles={(0, 1): Role(publish=TO_Q0, persistent=(True,), confirm=True),
           (1, 1): Role(consume=((0, False),), ack=True, multiple=True),
           (1, 2): Role(consume=((0, False),), ack=True, multiple=True)})


def measure(size: int, seed: int, max_nodes: int, config: Config = BENCH) -> dict:
    """Check one trace of about ``size`` observations; its size, verdict, search nodes and seconds."""
    run = simulate.random_run(config, seed, max_steps=20 * size, crash_at=int(size * 0.9), max_observations=size)
    start = time.perf_counter()
    verdict = trace.check(run.observations, config, max_nodes=max_nodes)
    return {"size": size, "seed": seed, "observations": run.size(), "status": verdict.status,
            "nodes": verdict.explored, "seconds": time.perf_counter() - start}


def growth(results: list) -> list:
    """Per asked size: traces, decided, median observations, median and slowest seconds, and the median
    search nodes and milliseconds per observation (how the cost grows with a trace's length)."""
    rows = []
    for size in sorted({r["size"] for r in results}):
        rs = [r for r in results if r["size"] == size]
        rows.append({
            "size": size, "traces": len(rs), "accepted": sum(r["status"] == trace.ACCEPTED for r in rs),
            "observations": statistics.median(r["observations"] for r in rs),
            "median_s": statistics.median(r["seconds"] for r in rs), "max_s": max(r["seconds"] for r in rs),
            "nodes_per_obs": statistics.median(r["nodes"] / max(r["observations"], 1) for r in rs),
            "ms_per_obs": statistics.median(1000 * r["seconds"] / max(r["observations"], 1) for r in rs)})
    return rows


def main(argv=None, console: Console | None = None) -> int:
    parser = OneLineParser(prog="rabbitproof bench trace-checker", description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100,300,1000", help="observations per trace, comma-separated")
    parser.add_argument("--seeds", type=int, default=5, help="traces per size")
    parser.add_argument("--messages", type=int, default=BENCH.messages, help="messages the publisher sends")
    parser.add_argument("--max-nodes", type=int, default=2_000_000, help="search nodes before giving up")
    args = parser.parse_args(argv)
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        parser.error(f"--sizes must be whole numbers separated by commas, not {args.sizes!r}")
    if any(s < 1 for s in sizes) or args.seeds < 1 or args.messages < 1:
        parser.error("sizes, --seeds and --messages must be at least 1")
    config = BENCH if args.messages == BENCH.messages else replace(
        BENCH, description=BENCH.description.replace("200", str(args.messages), 1), messages=args.messages)
    console = console or output_console()
    table = Table(title="trace checker bench (" + config.description + ")")
    for column in ("asked", "seed", "obs", "verdict", "nodes", "seconds", "ms/obs"):
        table.add_column(column, justify="right")
    results = []
    for size in sizes:
        for seed in range(1, args.seeds + 1):
            r = measure(size, seed, args.max_nodes, config)
            results.append(r)
            table.add_row(str(size), str(seed), str(r["observations"]), r["status"], f"{r['nodes']:,}",
                          f"{r['seconds']:.2f}", f"{1000 * r['seconds'] / max(r['observations'], 1):.2f}")
    console.print(table)
    summary = Table(title="growth with the trace's length (medians over the random seeds)")
    for column in ("asked", "traces", "accepted", "obs", "median s", "max s", "nodes/obs", "ms/obs"):
        summary.add_column(column, justify="right")
    for g in growth(results):
        summary.add_row(str(g["size"]), str(g["traces"]), str(g["accepted"]), f"{g['observations']:.0f}",
                        f"{g['median_s']:.2f}", f"{g['max_s']:.2f}", f"{g['nodes_per_obs']:.1f}",
                        f"{g['ms_per_obs']:.2f}")
    console.print(summary)
    return 0 if all(r["status"] == trace.ACCEPTED for r in results) else 1
