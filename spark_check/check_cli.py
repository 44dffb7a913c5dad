"""``rabbitproof check FILE``: answer the five delivery questions for the setup described in FILE.

Exit codes: 0 every question passes (cannot happen), 1 a question fails (can happen, or the search was
cut short before deciding it), 2 bad input: a mistake in the file, a bad flag or bound, an engine that
cannot start (one line on stderr, before any exploration).
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import NoReturn, Sequence

from rich.console import Console

from spec.configs import ConfigError

from .bundle import InputError
from .check import check_setup, prepare, setup_name
from .check_report import checked_json, print_checked, write_charts
from .cli import build_engine, check_output_options, output_console, parse_bounds, reductions_of
from .engine import ENGINES
from .report import ProgressDisplay
from .setup_file import SetupError, read_setup
from .whatif import try_changes

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
PROG = "rabbitproof"


class Parser(argparse.ArgumentParser):
    """Errors in one line on stderr, exit code 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{PROG}: error: {message}\n")
        raise SystemExit(EXIT_BAD_INPUT)


def build_parser() -> Parser:
    parser = Parser(prog=PROG, description="Answer delivery-guarantee questions about an AMQP 0-9-1 setup "
                                           "with the rabbitproof spec.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{check}", parser_class=Parser)
    check = commands.add_parser("check", help="answer the five questions for a setup file (TOML)")
    check.add_argument("file", help="the setup file (see examples/)")
    check.add_argument("--json", action="store_true", help="print the answers as JSON instead of the report")
    check.add_argument("--chart", metavar="DIR", help="write a message-sequence chart (SVG) per failing question")
    check.add_argument("--engine", default="local", help=f"engine: {', '.join(sorted(ENGINES))} (default local)")
    check.add_argument("--master", metavar="URL", help="spark engine: the Spark master (default local[*])")
    check.add_argument("--bound", action="extend", nargs="+", default=[], metavar="NAME=VALUE",
                       help="override a bound of the explored configuration (requeues, crashes, ...)")
    check.add_argument("--max-states", type=int, metavar="N", help="stop each exploration after N states")
    check.add_argument("--reduce", default="symmetry", metavar="NAMES",
                       help="state-space reductions: symmetry (the default: consumers with the same settings are "
                            "interchangeable, no answer changes) or none")
    check.add_argument("--no-advice", action="store_true", help="do not try the what-if changes")
    shown = check.add_mutually_exclusive_group()
    shown.add_argument("--progress", dest="progress", action="store_true", default=None,
                       help="show progress even when stderr is not a terminal")
    shown.add_argument("--no-progress", dest="progress", action="store_false", help="never show progress")
    return parser


def command_check(args: argparse.Namespace, out: Console) -> int:
    # Everything is checked before any exploration starts.
    setup = read_setup(args.file)
    check_output_options(args.max_states, args.chart)
    bounds = parse_bounds(args.bound)
    if "messages" in bounds:
        raise InputError("--bound messages: set each publisher's messages in the setup file")
    engine = build_engine(args.engine, master=args.master, reductions=reductions_of(args.reduce))
    try:
        prepare(setup, engine, bounds, args.max_states)
    except (ConfigError, ValueError) as e:
        raise InputError(str(e).splitlines()[0]) from None

    err = Console(stderr=True)
    show = err.is_terminal if args.progress is None else args.progress

    def progress(label: str) -> ProgressDisplay:
        return ProgressDisplay(err, label, show)

    try:
        with progress(setup_name(setup)) as display:
            checked = check_setup(setup, engine, bounds=bounds, max_states=args.max_states, progress=display.callback)
        tried = ()
        if not args.no_advice:
            tried = try_changes(checked, engine, bounds=bounds, max_states=args.max_states,
                                display_for=lambda change: progress(f"what if: {change.key}"))
    finally:
        engine.close()
    charts = write_charts(checked, args.chart) if args.chart else {}
    if args.json:
        out.file.write(json.dumps(checked_json(checked, tried, charts), indent=2) + "\n")
    else:
        print_checked(out, checked, tried, charts)
    return EXIT_FAILED if checked.failing else EXIT_OK


def main(argv: Sequence[str] | None = None, out: Console | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = build_parser().parse_args(argv)
    out = out or output_console()
    try:
        return command_check(args, out)
    except (InputError, SetupError) as e:
        sys.stderr.write(f"{PROG}: error: {e}\n")
        return EXIT_BAD_INPUT


def console_main() -> None:
    """The ``rabbitproof`` console script."""
    sys.exit(main())


if __name__ == "__main__":
    console_main()
