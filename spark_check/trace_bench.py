"""Trace checker benchmark: how long ``spec.trace.check`` takes to decide long traces, and how that grows.

    python -m spark_check.trace_bench [--sizes 100,300,1000] [--seeds 3] [--max-nodes N]

The traces are random executions of the spec (``spec.simulate``) in the configuration the trace
checker must keep up with: one publisher in confirm mode publishing 200 persistent messages to a
durable queue, two consumers on two channels of another connection acknowledging with and without
multiple, and one broker crash part-way (which every client sees as a lost connection), after which
the clients connect again. Each trace is cut to the number of observations asked for, with the crash
at nine tenths of it. Times are wall-clock on this machine; compare sizes within one run.
"""
from __future__ import annotations

import argparse
import sys
import time

from rich.console import Console
from rich.table import Table

from spec import simulate, trace
from spec.configs import TO_Q0, Config
from spec.roles import QueueSpec, Role

BENCH = Config(
    "trace_bench", "200 persistent confirmed publishes, two consumers acking with multiple, one crash",
    connections=2, channels=2, messages=200, crashes=1, queues=(QueueSpec(durable=True),),
    roles={(0, 1): Role(publish=TO_Q0, persistent=(True,), confirm=True),
           (1, 1): Role(consume=((0, False),), ack=True, multiple=True),
           (1, 2): Role(consume=((0, False),), ack=True, multiple=True)})


def measure(size: int, seed: int, max_nodes: int) -> dict:
    """Check one trace of about ``size`` observations; its size, verdict, search nodes and seconds."""
    run = simulate.random_run(BENCH, seed, max_steps=20 * size, crash_at=int(size * 0.9), max_observations=size)
    start = time.perf_counter()
    verdict = trace.check(run.observations, BENCH, max_nodes=max_nodes)
    return {"size": size, "seed": seed, "observations": run.size(), "status": verdict.status,
            "nodes": verdict.explored, "seconds": time.perf_counter() - start}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spark_check.trace_bench", description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100,300,1000", help="observations per trace, comma-separated")
    parser.add_argument("--seeds", type=int, default=3, help="traces per size")
    parser.add_argument("--max-nodes", type=int, default=2_000_000, help="search nodes before giving up")
    args = parser.parse_args(argv)
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        parser.error(f"--sizes must be whole numbers separated by commas, not {args.sizes!r}")
    if any(s < 1 for s in sizes) or args.seeds < 1:
        parser.error("sizes and --seeds must be at least 1")
    console = Console()
    table = Table(title="trace checker bench (" + BENCH.description + ")")
    for column in ("asked", "seed", "observations", "verdict", "search nodes", "seconds", "nodes/s"):
        table.add_column(column, justify="right")
    for size in sizes:
        for seed in range(1, args.seeds + 1):
            r = measure(size, seed, args.max_nodes)
            table.add_row(str(size), str(seed), str(r["observations"]), r["status"], f"{r['nodes']:,}",
                          f"{r['seconds']:.2f}", f"{r['nodes'] / max(r['seconds'], 1e-9):,.0f}")
            console.print(f"size {size} seed {seed}: {r['observations']} observations, {r['status']}, "
                          f"{r['nodes']:,} nodes, {r['seconds']:.2f} s")
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
