"""The `rabbitproof` command: one console script, one subcommand per job.

    rabbitproof check FILE          can my setup lose, duplicate or reorder a message, loop, or wait for ever?
    rabbitproof explore CONFIG      explore one configuration of the spec, exhaustively (local or Spark)
    rabbitproof list                the configurations and the properties
    rabbitproof verify              every check of `make verify`: explore, agreement, proofs, BMC, CrossHair
    rabbitproof trace FILE          the spec's verdict on a recorded run
    rabbitproof replay FILE URL     act out check's answers on a real broker, with real faults
    rabbitproof conformance URL     judge any AMQP 0-9-1 broker by the spec
    rabbitproof broker              run the reference broker
    rabbitproof bench [PART]        the benchmarks of `make bench`
    rabbitproof rules [ID]          the rules the answers cite, and where each is modelled, proved, tested

Exit codes, for every subcommand (rabbitproof.exits): 0 nothing found, 1 something found (can happen,
rejected, violated), 2 bad input (one line on stderr naming what is wrong, before any work starts),
3 undecided (a time limit, a state cap, Ctrl-C). docs/reference/cli.md lists every option.
"""
from __future__ import annotations

import argparse
import sys
from typing import Callable, Sequence

from rich.console import Console

from rabbitproof.spark_check.bundle import InputError

from rabbitproof import __version__, broker, rules, verify
from rabbitproof.exits import UNDECIDED
from rabbitproof.bench import command as bench
from rabbitproof.check import command as check
from rabbitproof.check.setup_file import SetupError
from rabbitproof.conformance import command as conformance
from rabbitproof.explore import command as explore
from rabbitproof.extras import MissingExtra
from rabbitproof.options import OneLineParser, fail, output_console
from rabbitproof.recording import command as trace
from rabbitproof.replay import command as replay


class Subcommand:
    """One subcommand: its one-line help, how it adds its options, and how it runs."""

    def __init__(self, summary: str, add: Callable[[argparse.ArgumentParser], None],
                 run: Callable[[argparse.Namespace, Console], int]) -> None:
        self.summary, self.add, self.run = summary, add, run


SUBCOMMANDS: dict[str, Subcommand] = {
    "check": Subcommand("answer the delivery questions for a setup file (TOML)", check.add_arguments, check.run),
    "explore": Subcommand("explore one configuration of the spec exhaustively", explore.add_explore_arguments,
                          explore.run_explore),
    "list": Subcommand("list the configurations and the properties", explore.add_list_arguments, explore.run_list),
    "verify": Subcommand("explore every standard configuration, check the Z3 model against the spec, prove "
                         "the invariants, find the hazards, run CrossHair, hold check's answers to the search",
                         verify.add_arguments, verify.run),
    "trace": Subcommand("judge a recorded run (JSON recording or .trace text) by the spec", trace.add_arguments,
                        trace.run),
    "replay": Subcommand("act out the \"can happen\" answers of `check --json` on a broker, with real faults, "
                         "and judge the runs by the spec", replay.add_arguments, replay.run),
    "conformance": Subcommand("run generated programs against an AMQP 0-9-1 broker and judge them by the spec",
                              conformance.add_arguments, lambda args, out: conformance.run_command(args)),
    "broker": Subcommand("run the reference AMQP 0-9-1 broker", broker.add_arguments, broker.run),
    "bench": Subcommand("run the benchmarks (one part, or all of them)", bench.add_arguments,
                        bench.run),
    "rules": Subcommand("list the rules the answers cite (ACK-2, RQ-4, ...), or show one in full", rules.add_arguments,
                        rules.run),
}


def build_parser() -> OneLineParser:
    """The command line: `rabbitproof SUBCOMMAND ...`, each subcommand with its own --help."""
    parser = OneLineParser(prog="rabbitproof", description=__doc__.splitlines()[0],
                           epilog="`rabbitproof SUBCOMMAND --help` lists a subcommand's options.")
    parser.add_argument("--version", action="version", version=f"rabbitproof {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="SUBCOMMAND",
                                     parser_class=OneLineParser)
    for name, sub in SUBCOMMANDS.items():
        sub.add(commands.add_parser(name, help=sub.summary, description=sub.summary))
    return parser


def main(argv: Sequence[str] | None = None, out: Console | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        return SUBCOMMANDS[args.command].run(args, out or output_console())
    except (InputError, SetupError, MissingExtra) as e:
        return fail(f"rabbitproof {args.command}", e)
    except KeyboardInterrupt:
        sys.stderr.write(f"rabbitproof {args.command}: interrupted: undecided (exit {UNDECIDED})\n")
        return UNDECIDED


def console_main() -> None:
    """The ``rabbitproof`` console script."""
    sys.exit(main())
