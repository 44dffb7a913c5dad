"""`rabbitproof bench [--json] [PART [OPTIONS ...]]`: one benchmark, with its own options (`rabbitproof
bench PART --help`), or, without PART, every one in turn as ``make bench`` runs them. The report ends with
a verdict line; `--json` prints instead one JSON document on stdout (``schema("bench")``) with each part's
tables as rows, the part's report going to stderr. Exit code (rabbitproof.exits): 0 when every part ran
and met its own checks (a reduced search keeps every verdict, the broker answers every fuzzed frame as
AMQP 0-9-1 says, ...), 1 when one found a failure, 3 when one was undecided or the run was interrupted."""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from typing import Any, Callable, Iterator, Sequence

from rich.console import Console

from rabbitproof.bench import (broker, check, check_cost, compiled, conformance, engines, fuzz, recorded_trace,
                               reductions, replay, trace_checker)
from rabbitproof.bench.document import TableKeeper, table_json
from rabbitproof.exits import BAD_INPUT, FOUND, NOTHING_FOUND, UNDECIDED, worst
from rabbitproof.options import fail
from rabbitproof.output import VERDICT_WORDS, print_json, verdict_line

PARTS: dict[str, tuple[Callable[[Sequence[str], Console | None], int], str]] = {
    "engines": (engines.main, "distinct states per second of the local and Spark engines"),
    "compiled": (compiled.main, "the compiled spec (make fast) beside the pure-Python one: the same counts, faster"),
    "reductions": (reductions.main, "full against reduced searches: the same verdicts, fewer states"),
    "trace-checker": (trace_checker.main, "how long the trace checker takes on long spec-made traces"),
    "recorded-trace": (recorded_trace.main, "the trace checker on a long run recorded from a broker"),
    "broker": (broker.main, "our broker's throughput beside RabbitMQ 3.10.8's"),
    "conformance": (conformance.main, "conformance steps per second against each target"),
    "fuzz": (fuzz.main, "our broker fuzzed with bad frames, every answer judged; RabbitMQ 3.10.8's beside it"),
    "check": (check.main, "rabbitproof check on the benchmark setup (two publishers of 1 and 2 messages), each engine, timed"),
    "check-cost": (check_cost.main, "check's exhaustive search: microseconds a state here and in another checkout "
                                    "or compiled, measured alternately"),
    "replay": (replay.main, "every example's \"can happen\" answers replayed on our broker and RabbitMQ 3.10.8, with real crashes"),
}

# What ``rabbitproof bench`` runs without a part (``make bench``): each part with its arguments.
EVERYTHING: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("engines", ("--engines", "local,spark", "--master", "local[2]")),
    ("compiled", ()),
    ("reductions", ()),
    ("reductions", ("--reduce", "por,symmetry")),
    ("reductions", ("--reduce", "symmetry", "twin_consumers")),
    ("trace-checker", ()),
    ("recorded-trace", ("--messages", "250")),
    ("broker", ()),
    ("conformance", ("--programs", "60")),
    ("fuzz", ()),
    ("check-cost", ("--fast",)),
    ("replay", ()),
)


# What each part's exit code says, in the verdict line.
OUTCOMES = {NOTHING_FOUND: "met its checks", FOUND: "found a failure", BAD_INPUT: "bad input",
            UNDECIDED: "undecided"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `rabbitproof bench`: --json, a part and that part's own options."""
    lines = "; ".join(f"{name}: {doc}" for name, (_, doc) in PARTS.items())
    parser.add_argument("--json", action="store_true",
                        help="print one JSON document on stdout (each part's tables as rows) instead of the "
                             "report, which goes to stderr; before PART (the fuzz and replay parts also take "
                             "--json after PART, for their own fuller document)")
    parser.add_argument("part", nargs="?", choices=tuple(PARTS), metavar="PART",
                        help=f"one benchmark ({lines}); default: all of them, as make bench runs them")
    parser.add_argument("options", nargs=argparse.REMAINDER, metavar="...",
                        help="the part's own options (rabbitproof bench PART --help)")


def run(args: argparse.Namespace, out: Console) -> int:
    """Run one part, or all, then the verdict line (or the JSON document); the exit code."""
    if args.options and not args.part:
        return fail("rabbitproof bench", "name a part before its options")
    if args.json and "--json" in args.options:
        return fail("rabbitproof bench", "--json once: before PART for the bench's document, or after it for "
                                         "the part's own")
    runs = [(args.part, tuple(args.options))] if args.part else list(EVERYTHING)
    done: list[dict[str, Any]] = []
    interrupted = False
    try:
        for name, argv in runs:
            done.append(run_part(name, argv, out, args.json, announce=not args.part))
    except KeyboardInterrupt:
        interrupted = True
    code = UNDECIDED if interrupted else worst([part["exit_code"] for part in done])
    seconds = round(sum(part["seconds"] for part in done), 3)
    if args.json:
        print_json(out, "bench", {"parts": done, "seconds": seconds, "interrupted": interrupted}, code)
    else:
        outcomes = [f"{part['part']} {OUTCOMES.get(part['exit_code'], 'failed')}" for part in done]
        verdict_line(out, "bench", code, "; ".join(outcomes + (["interrupted"] if interrupted else [])))
    return code


def run_part(name: str, argv: Sequence[str], out: Console, as_json: bool, announce: bool) -> dict[str, Any]:
    """Run one part: its report on stdout as the part lays it out (some tables want more than 80 columns),
    or, for `--json`, on stderr with its tables kept (and any stray print sent to stderr too, so that stdout
    holds only the document). The part as the document shows it."""
    console = TableKeeper() if as_json else None
    if announce:
        (console or out).print(f"\n== rabbitproof bench {name} {' '.join(argv)}".rstrip(), markup=False,
                               highlight=False)
    started = time.monotonic()
    with stdout_to_stderr() if as_json else contextlib.nullcontext():
        code = PARTS[name][0](list(argv), console)
    part: dict[str, Any] = {"part": name, "arguments": list(argv), "exit_code": code,
                            "verdict": VERDICT_WORDS.get(code, "failed"), "seconds": round(time.monotonic() - started, 3)}
    if isinstance(console, TableKeeper):
        part["tables"] = [table_json(t) for t in console.tables]
    return part


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Standard output sent to stderr meanwhile, for Python's prints and for the processes a part starts
    (a Spark JVM writes to file descriptor 1): stdout is kept for the JSON document."""
    sys.stdout.flush()
    kept = os.dup(1)
    os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(kept, 1)
        os.close(kept)
