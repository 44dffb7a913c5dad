"""What the subcommands of `rabbitproof` share: one-line errors, the engine options, bounds, the console.

Every input is checked before any work starts; a mistake is one line on stderr and exit code 2.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn, Sequence

from rich.console import Console

from rabbitproof.output import stdout_console
from rabbitproof.spark_check.bundle import InputError
from rabbitproof.spark_check.checkpoint import check_writable
from rabbitproof.spark_check.engines import ENGINES, Engine, engine_named
from rabbitproof.spark_check.reductions import REDUCTIONS, parse_reductions

from rabbitproof.exits import BAD_INPUT as EXIT_BAD_INPUT, FOUND as EXIT_FAILED, NOTHING_FOUND as EXIT_OK


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr and exit code 2 (no usage dump)."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(EXIT_BAD_INPUT)


def fail(prog: str, error: Exception | str) -> int:
    """Report a bad input in one line on stderr; the exit code 2."""
    text = str(error)
    sys.stderr.write(f"{prog}: error: {text.splitlines()[0] if text else repr(error)}\n")
    return EXIT_BAD_INPUT


def int_in(low: int, high: int | None = None):
    """An argparse type: an integer from ``low`` to ``high`` (no upper end when ``high`` is None), else a
    one-line error naming the range: ``0 is out of range (1 or more)``."""
    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {value!r}") from None
        if number < low or (high is not None and number > high):
            raise argparse.ArgumentTypeError(f"{number} is out of range ({_range_words(low, high)})")
        return number
    return parse


def seconds_in(low: float, high: float | None = None, *, above: bool = False):
    """An argparse type: a number of seconds from ``low`` to ``high`` (more than ``low`` when ``above``; no
    upper end when ``high`` is None), else a one-line error in int_in's words:
    ``-1 is out of range (more than 0 seconds)``."""
    def parse(value: str) -> float:
        try:
            number = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number of seconds: {value!r}") from None
        too_low = number <= low if above else number < low
        if too_low or (high is not None and number > high) or number != number:
            words = (f"more than {low:g}" + ("" if high is None else f", at most {high:g}") if above
                     else _range_words(low, high))
            raise argparse.ArgumentTypeError(f"{number:g} is out of range ({words} seconds)")
        return number
    return parse


def _range_words(low: float, high: float | None) -> str:
    return f"{low:g} or more" if high is None else f"{low:g} to {high:g}"


def names_in(allowed: Sequence[str], what: str):
    """An argparse type: a comma-separated list of names, each one of ``allowed`` (repeats dropped, order
    kept), else a one-line error: ``'activemq' is not a broker; choose from impl, rabbitmq``."""
    def parse(text: str) -> tuple[str, ...]:
        names = tuple(n for n in (part.strip() for part in text.split(",")) if n)
        unknown = [n for n in names if n not in allowed]
        if not names or unknown:
            raise argparse.ArgumentTypeError(f"{unknown[0] if unknown else text!r} is not {what}; "
                                             f"choose from {', '.join(allowed)}")
        return tuple(dict.fromkeys(names))
    return parse


def parse_bounds(items: Sequence[str]) -> dict[str, str]:
    """``NAME=VALUE`` strings (each may hold several, comma-separated) as a dict; InputError for one
    without ``=``."""
    bounds: dict[str, str] = {}
    for item in (part for given in items for part in given.split(",")):
        name, eq, value = item.partition("=")
        if not eq or not name.strip() or not value.strip():
            raise InputError(f"--bound expects NAME=VALUE, not {item!r}")
        bounds[name.strip()] = value.strip()
    return bounds


def add_engine_arguments(parser: argparse.ArgumentParser, reduce_default: str = "none") -> None:
    """--engine, --master and --reduce, shared by explore, check, verify and bench."""
    parser.add_argument("--engine", default="local", help=f"engine: {', '.join(sorted(ENGINES))} (default local)")
    parser.add_argument("--master", metavar="URL",
                        help="spark engine: Spark master (local[*] by default; spark://HOST:PORT, yarn, k8s://...)")
    default = "those written for the model: por,symmetry for the spec" if reduce_default == "written" else reduce_default
    parser.add_argument("--reduce", default=reduce_default, metavar="NAMES",
                        help=f"state-space reductions, comma-separated: {', '.join(REDUCTIONS)}, or none "
                             f"(default {default}; docs/explanation/reductions.md)")


def add_progress_arguments(parser: argparse.ArgumentParser) -> None:
    """--progress / --no-progress: the live progress line on stderr (shown on a terminal by default)."""
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--progress", dest="progress", action="store_true", default=None,
                       help="show progress even when stderr is not a terminal")
    shown.add_argument("--no-progress", dest="progress", action="store_false", help="never show progress")


def reductions_of(text: str) -> tuple[str, ...]:
    """``--reduce`` as reduction names; InputError (one line) for an unknown one."""
    try:
        return parse_reductions(text)
    except ValueError as e:
        raise InputError(f"--reduce: {e}") from None


def check_output_options(max_states: int | None, chart: str | None, time_limit: float | None = None) -> None:
    """--max-states, --time-limit and --chart, checked before any work: InputError (one line) if one is
    unusable."""
    if max_states is not None and max_states < 1:
        raise InputError(f"--max-states must be positive, not {max_states}")
    if time_limit is not None and not time_limit > 0:
        raise InputError(f"--time-limit must be a positive number of seconds, not {time_limit:g}")
    if chart:
        try:
            check_writable(chart)
        except ValueError as e:
            raise InputError(str(e).replace("checkpoint directory", "--chart directory")) from None


def build_engine(name: str, *, master: str | None = None, exact: bool = False, checkpoint: str | None = None,
                 resume: str | None = None, reductions: Sequence[str] = (), driver_memory: str | None = None,
                 driver_core_edges: int | None = None) -> Engine:
    """The engine the command line asks for; InputError (one line) for options it cannot take, an
    unreachable master or a checkpoint directory that cannot be written, before any work starts."""
    options: dict[str, Any] = {"exact": exact, "reductions": tuple(reductions)}
    spark_only = {"--master": master, "--checkpoint": checkpoint, "--resume": resume, "--driver-memory": driver_memory,
                  "--driver-core-edges": driver_core_edges}
    if driver_core_edges is not None and driver_core_edges < 0:
        raise InputError(f"--driver-core-edges must be 0 or more, not {driver_core_edges}")
    if name == "spark":
        options.update(master=master, checkpoint=checkpoint, resume=resume, driver_memory=driver_memory)
        if driver_core_edges is not None:
            options["driver_core_edges"] = driver_core_edges
    else:
        given = [flag for flag, value in spark_only.items() if value not in (None, "")]
        if given:
            raise InputError(f"{given[0]} is for the spark engine (add --engine spark)")
    try:
        return engine_named(name, **options)
    except ValueError as e:
        raise InputError(str(e).splitlines()[0]) from None


def output_console() -> Console:
    """Standard output: as wide as ``COLUMNS`` or the terminal, plain text when piped
    (rabbitproof.output.stdout_console)."""
    return stdout_console()
