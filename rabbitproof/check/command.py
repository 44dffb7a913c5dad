"""``rabbitproof check FILE``: answer the five delivery questions for the setup described in FILE.

Exit codes (rabbitproof.exits): 0 every question passes (cannot happen, or harmless here), 1 a question
can happen, 2 bad input: a mistake in the file, a bad flag or bound, an engine that cannot start (one line
on stderr, before any exploration), 3 undecided: nothing can happen as far as the search went, but it
stopped (time limit, state cap, Ctrl-C) before deciding every question.
"""
from __future__ import annotations

import argparse

from rich.console import Console

from rabbitproof.spark_check.bundle import InputError
from rabbitproof.spark_check.engines import ENGINES
from rabbitproof.spec.configs import ConfigError

from rabbitproof.check.answers import DEFAULT_REDUCTIONS, prepare, setup_name
from rabbitproof.check.junit import check_junit_path, write_junit
from rabbitproof.check.methods import answer_setup, too_large
from rabbitproof.check.report import checked_json, exit_code, print_checked, verdict_detail, write_charts
from rabbitproof.check.setup_file import read_setup
from rabbitproof.check.whatif import try_changes
from rabbitproof.explore.report import ProgressDisplay
from rabbitproof.replay import command as replay
from rabbitproof.replay.report import print_replays
from rabbitproof.replay.saved import from_checked
from rabbitproof.output import print_json, verdict_line
from rabbitproof.options import (
    add_progress_arguments, build_engine, check_output_options, parse_bounds, reductions_of,
)

def add_arguments(check: argparse.ArgumentParser) -> None:
    """The options of `rabbitproof check`."""
    check.add_argument("file", help="the setup file (TOML; see examples/ and docs/reference/setup-file.md)")
    check.add_argument("--json", action="store_true", help="print the answers as JSON instead of the report")
    check.add_argument("--junit", metavar="FILE", help="also write the answers as a JUnit XML file (one case per "
                                                       "question) for CI")
    check.add_argument("--chart", metavar="DIR", help="write a message-sequence chart (SVG) per failing question")
    check.add_argument("--engine", default="local", help=f"engine: {', '.join(sorted(ENGINES))} (default local)")
    check.add_argument("--master", metavar="URL", help="spark engine: the Spark master (default local[*])")
    check.add_argument("--driver-core-edges", type=int, metavar="N",
                       help="spark engine: the search for fair cycles takes the graph to the driver once at most N "
                            "edges are left of it (default 2000000; 0: all in Spark)")
    check.add_argument("--bound", action="append", default=[], metavar="NAME=VALUE",
                       help="how often a fault of the setup file may happen, by its name there (repeatable; "
                            "NAME=VALUE,NAME=VALUE also works): broker_crash=2, channel_closed=2, ...; reconnects=N "
                            "for the clients' reconnections; what the programs do (requeue, poll) has no bound")
    check.add_argument("--max-states", type=int, metavar="N", help="stop each exploration after N states")
    check.add_argument("--time-limit", type=float, metavar="SECONDS",
                       help="stop each exploration after this long, and the smaller setups' explorations after "
                            "this long together (120 s without it); what they found stands, the rest is undecided")
    check.add_argument("--reduce", default=",".join(DEFAULT_REDUCTIONS), metavar="NAMES",
                       help="state-space reductions, none changes an answer (default por,symmetry,budgets): por "
                            "(a client's read of a reply that changes nothing is fused into the step before it), "
                            "symmetry (consumers with the same settings are interchangeable, and so are "
                            "publishers with the same settings, their messages renamed with them), budgets (a state "
                            "is skipped where the same state with fewer faults spent is explored), or none")
    check.add_argument("--no-advice", action="store_true", help="do not try the what-if changes")
    check.add_argument("--replay", metavar="URL",
                       help="act out each \"can happen\" answer on the broker at URL with real clients and real "
                            "faults, and judge the run by the spec (docs/how-to/replay.md)")
    replay.add_replay_options(check)
    add_progress_arguments(check)


def run(args: argparse.Namespace, out: Console) -> int:
    """`rabbitproof check`: the exit code; InputError or SetupError for bad input, before any work."""
    # Everything is checked before any exploration starts.
    setup = read_setup(args.file)
    check_output_options(args.max_states, args.chart, args.time_limit)
    if args.junit:
        check_junit_path(args.junit)
    bounds = parse_bounds(args.bound)
    if "messages" in bounds:
        raise InputError("--bound messages: set each publisher's messages in the setup file")
    engine = build_engine(args.engine, master=args.master, reductions=reductions_of(args.reduce),
                          driver_core_edges=args.driver_core_edges)
    try:
        if not too_large(setup):
            prepare(setup, engine, bounds, args.max_states)
    except (ConfigError, ValueError) as e:
        raise InputError(str(e).splitlines()[0]) from None
    if not args.replay:
        replay.options_need_replay(args)
    target = replay.target_of(args, args.replay) if args.replay else None

    err = Console(stderr=True)
    show = err.is_terminal if args.progress is None else args.progress

    def progress(label: str) -> ProgressDisplay:
        return ProgressDisplay(err, label, show)

    try:
        with progress(setup_name(setup)) as display:
            checked = answer_setup(setup, engine, bounds=bounds, max_states=args.max_states,
                                   progress=display.callback, time_limit=args.time_limit)
        tried = ()
        if not args.no_advice:
            tried = try_changes(checked, engine, bounds=bounds, max_states=args.max_states,
                                time_limit=args.time_limit,
                                display_for=lambda change: progress(f"what if: {change.key}"))
    finally:
        engine.close()
    charts = write_charts(checked, args.chart) if args.chart else {}
    replays, replayed = replay.after_check(setup, from_checked(checked), target, args.replay) if target else ([], {})
    code = exit_code(checked)
    if args.junit:
        write_junit(checked, args.junit)
    if args.json:
        print_json(out, "check", {**checked_json(checked, tried, charts), **({"replay": replayed} if target else {})},
                   code)
    else:
        print_checked(out, checked, tried, charts)
        if target:
            out.print()
            print_replays(out, setup.source, replayed["broker"], replays)
        verdict_line(out, "check", code, verdict_detail(checked))
    return code
