"""``rabbitproof bench check``: `rabbitproof check` on the benchmark setup, timed, on each engine.

The setup: two publishers of confirmed persistent messages to a durable queue, two competing consumers
with prefetch 1, a broker crash and a lost connection; with one message per publisher, then two. Each
run is ``rabbitproof check FILE --json --no-advice --time-limit SECONDS`` in a process of its own (the
default reductions; the time limit is the target's, 300 s, by default), and the table gives its states,
depth, seconds, peak memory, whether it answered every question, and its answers. A run that stops at
the time limit still answers what it found (the questions left are "undecided"): the benchmark records
it, it does not fail.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

from rich.console import Console
from rich.table import Table

from rabbitproof.exits import FOUND, NOTHING_FOUND, UNDECIDED
from rabbitproof.options import OneLineParser, output_console

SETUP = """# the benchmark setup: two publishers x {messages} confirmed persistent message(s), two competing consumers
# with prefetch 1, a durable queue, one broker crash and one lost connection.
[queues.jobs]
durable = true

[[publishers]]
name = "p1"
queue = "jobs"
confirms = true
persistent = true
messages = {messages}

[[publishers]]
name = "p2"
queue = "jobs"
confirms = true
persistent = true
messages = {messages}

[[consumers]]
name = "w1"
queue = "jobs"
prefetch = 1

[[consumers]]
name = "w2"
queue = "jobs"
prefetch = 1

[faults]
broker_crash = true
connection_closed = true
"""
SHORT = {"can happen": "can", "cannot happen": "cannot", "undecided": "?"}


def run_check(messages: int, engine: str, time_limit: float) -> dict[str, Any]:
    """One `rabbitproof check` of the setup with ``messages`` per publisher, in a process of its own: its
    JSON answer, with the wall time and the process's peak resident memory (MB) added."""
    with tempfile.TemporaryDirectory() as tmp:
        setup = Path(tmp) / f"benchmark-{messages}.toml"
        setup.write_text(SETUP.format(messages=messages), encoding="utf-8")
        out = Path(tmp) / "answer.json"
        started = time.perf_counter()
        with open(out, "w") as stdout:
            child = subprocess.Popen([sys.executable, "-m", "rabbitproof", "check", str(setup), "--json",
                                      "--no-advice", "--no-progress", "--engine", engine,
                                      "--time-limit", f"{time_limit:g}"],
                                     stdout=stdout, stderr=subprocess.DEVNULL)
            _, status, usage = os.wait4(child.pid, 0)
            child.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - started
        text = out.read_text()
        if child.returncode not in (NOTHING_FOUND, FOUND, UNDECIDED) or not text:      # 2: bad input
            raise RuntimeError(f"check of the {messages}-message setup on {engine} failed (exit {child.returncode})")
        answer = json.loads(text)
    answer["wall"] = seconds
    answer["peak_mb"] = usage.ru_maxrss / 1024          # Linux: kilobytes
    return answer


def main(argv: Sequence[str] | None = None, console: Console | None = None) -> int:
    parser = OneLineParser(prog="rabbitproof bench check", description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, nargs="+", default=[1, 2], metavar="N",
                        help="messages per publisher, one run each (default 1 2)")
    parser.add_argument("--engine", nargs="+", default=["local", "spark"], choices=("local", "spark"),
                        help="engines, one run each (default local spark)")
    parser.add_argument("--time-limit", type=float, default=300.0, metavar="SECONDS",
                        help="stop each run after this long (default 300, the target)")
    args = parser.parse_args(argv)
    if args.time_limit <= 0 or any(n < 1 for n in args.messages):
        parser.error("--time-limit and --messages must be positive")
    console = console or output_console()
    table = Table(title=f"rabbitproof check on the benchmark setup (time limit {args.time_limit:g} s)")
    for column in ("messages", "engine", "states", "depth", "seconds", "peak MB", "complete", "answers"):
        table.add_column(column, justify="right" if column in ("states", "depth", "seconds", "peak MB") else "left")
    for messages in args.messages:
        for engine in args.engine:
            a = run_check(messages, engine, args.time_limit)
            answers = ", ".join(f"{x['key']} {SHORT.get(x['answer'], x['answer'])}" for x in a["answers"])
            table.add_row(str(messages), engine, f"{a['distinct_states']:,}", str(a["depth"]), f"{a['wall']:.1f}",
                          f"{a['peak_mb']:,.0f}", "yes" if a["complete"] else "no: " + (a["error"] or ""), answers)
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
