"""`rabbitproof bench [PART [OPTIONS ...]]`: one benchmark, with its own options (`rabbitproof bench
PART --help`), or, without PART, every one in turn as ``make bench`` runs them. Exit code 0 when every
benchmark ran and met its own checks (a reduced search must keep every verdict), else the first
nonzero code."""
from __future__ import annotations

import argparse
from typing import Callable, Sequence

from rabbitproof.bench import (broker, check, check_cost, compiled, conformance, engines, fuzz, recorded_trace,
                               reductions, replay, trace_checker)
from rabbitproof.options import fail

PARTS: dict[str, tuple[Callable[[Sequence[str]], int], str]] = {
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `rabbitproof bench`: a part and that part's own options."""
    lines = "; ".join(f"{name}: {doc}" for name, (_, doc) in PARTS.items())
    parser.add_argument("part", nargs="?", choices=tuple(PARTS), metavar="PART",
                        help=f"one benchmark ({lines}); default: all of them, as make bench runs them")
    parser.add_argument("options", nargs=argparse.REMAINDER, metavar="...",
                        help="the part's own options (rabbitproof bench PART --help)")


def run(args: argparse.Namespace) -> int:
    """Run one part, or all; the exit code."""
    if args.part:
        return PARTS[args.part][0](list(args.options))
    if args.options:
        return fail("rabbitproof bench", "name a part before its options")
    worst = 0
    for name, argv in EVERYTHING:
        print(f"\n== rabbitproof bench {name} {' '.join(argv)}".rstrip(), flush=True)
        code = PARTS[name][0](list(argv))
        worst = worst or code
    return worst
