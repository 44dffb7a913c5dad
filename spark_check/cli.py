"""``python -m spark_check``: explore one configuration, or list configurations and properties.

Exit codes: 0 every check met its expectation, 1 some check failed (or the state cap was hit),
2 bad input (reported in one line on stderr before any exploration starts).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, NoReturn, Sequence

from rich.console import Console
from rich.table import Table

from .bundle import InputError, SpecBundle, load_module, load_spec
from .engine import ENGINES, Engine, ExplorationResult, engine_named
from .chart import write_charts
from .checkpoint import check_writable
from .manifest import manifest_check
from .reductions import REDUCTIONS, build_reduction, parse_reductions
from .report import ProgressDisplay, print_result, result_json

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr and exit code 2 (no usage dump)."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"spark_check: error: {message}\n")
        raise SystemExit(EXIT_BAD_INPUT)


def parse_bounds(items: Sequence[str]) -> dict[str, str]:
    """``NAME=VALUE`` strings as a dict; InputError for one without ``=``."""
    bounds: dict[str, str] = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or not name.strip() or not value.strip():
            raise InputError(f"--bound expects NAME=VALUE, not {item!r}")
        bounds[name.strip()] = value.strip()
    return bounds


def add_engine_arguments(parser: argparse.ArgumentParser, reduce_default: str = "none") -> None:
    """--engine, --master and --reduce, shared by explore, verify and bench."""
    parser.add_argument("--engine", default="local", help=f"engine: {', '.join(sorted(ENGINES))} (default local)")
    parser.add_argument("--master", metavar="URL",
                        help="spark engine: Spark master (local[*] by default; spark://HOST:PORT, yarn, k8s://...)")
    default = "those written for the model: por,symmetry for the spec" if reduce_default == "written" else reduce_default
    parser.add_argument("--reduce", default=reduce_default, metavar="NAMES",
                        help=f"state-space reductions, comma-separated: {', '.join(REDUCTIONS)}, or none "
                             f"(default {default}; README, \"Reductions\")")


def reductions_of(text: str) -> tuple[str, ...]:
    """``--reduce`` as reduction names; InputError (one line) for an unknown one."""
    try:
        return parse_reductions(text)
    except ValueError as e:
        raise InputError(f"--reduce: {e}") from None


def check_output_options(max_states: int | None, chart: str | None) -> None:
    """--max-states and --chart, checked before any work: InputError (one line) if either is unusable."""
    if max_states is not None and max_states < 1:
        raise InputError(f"--max-states must be positive, not {max_states}")
    if chart:
        try:
            check_writable(chart)
        except ValueError as e:
            raise InputError(str(e).replace("checkpoint directory", "--chart directory")) from None


def build_engine(name: str, *, master: str | None = None, exact: bool = False, checkpoint: str | None = None,
                 resume: str | None = None, reductions: Sequence[str] = (), driver_memory: str | None = None) -> Engine:
    """The engine the command line asks for; InputError (one line) for options it cannot take, an
    unreachable master or a checkpoint directory that cannot be written, before any work starts."""
    options: dict[str, Any] = {"exact": exact, "reductions": tuple(reductions)}
    spark_only = {"--master": master, "--checkpoint": checkpoint, "--resume": resume, "--driver-memory": driver_memory}
    if name == "spark":
        options.update(master=master, checkpoint=checkpoint, resume=resume, driver_memory=driver_memory)
    else:
        given = [flag for flag, value in spark_only.items() if value]
        if given:
            raise InputError(f"{given[0]} is for the spark engine (add --engine spark)")
    try:
        return engine_named(name, **options)
    except ValueError as e:
        raise InputError(str(e).splitlines()[0]) from None


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog="python -m spark_check", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="{explore,list}")

    common = OneLineParser(add_help=False)
    common.add_argument("--model", metavar="MODULE", default=None,
                        help="explore this module (model, CONFIGS and REGISTRY in one) instead of spec/")

    explore = commands.add_parser("explore", parents=[common], help="explore one configuration")
    explore.add_argument("config", help="configuration name (see `list`)")
    add_engine_arguments(explore)
    explore.add_argument("--checkpoint", metavar="DIR",
                         help="spark engine: keep the level store (visited set, frontier, parent links) in DIR")
    explore.add_argument("--resume", metavar="DIR", help="spark engine: continue the run checkpointed in DIR")
    explore.add_argument("--driver-memory", metavar="SIZE",
                         help="spark engine: the driver's heap, e.g. 8g (default 2g in local mode, where the "
                              "executors share it)")
    explore.add_argument("--bound", action="extend", nargs="+", default=[], metavar="NAME=VALUE",
                         help="override a bound of the configuration")
    explore.add_argument("--property", action="extend", nargs="+", default=[], metavar="NAME",
                         help="check these properties instead of the configuration's own")
    explore.add_argument("--json", metavar="FILE", help="also write the full result as JSON")
    explore.add_argument("--chart", metavar="DIR",
                         help="write each counterexample as a message-sequence chart (SVG) in DIR")
    explore.add_argument("--chart-witnesses", action="store_true",
                         help="with --chart, also chart the witness of each sometimes property")
    explore.add_argument("--max-states", type=int, metavar="N", help="state cap (default: the configuration's)")
    explore.add_argument("--show-state", action="store_true", help="print the final state of each trace")
    explore.add_argument("--exact", action="store_true",
                         help="keep states, not 64-bit fingerprints (no collisions; more memory)")
    explore.add_argument("--stop-on-violation", action="store_true",
                         help="stop at the first violated invariant or erroneous deadlock")
    shown = explore.add_mutually_exclusive_group()
    shown.add_argument("--progress", dest="progress", action="store_true", default=None,
                       help="show progress even when stderr is not a terminal")
    shown.add_argument("--no-progress", dest="progress", action="store_false", help="never show progress")

    commands.add_parser("list", parents=[common], help="list configurations and properties")
    return parser


def output_console() -> Console:
    """Standard output; 120 columns wide when it is not a terminal (rich would assume 80)."""
    return Console() if sys.stdout.isatty() else Console(width=120)


def bundle_for(model: str | None) -> SpecBundle:
    return load_module(model) if model else load_spec()


def run_engine(
    engine: Engine,
    bundle: SpecBundle,
    config: Any,
    properties: Sequence[Any],
    *,
    max_states: int | None = None,
    stop_on_violation: bool = False,
    progress_console: Console | None = None,
) -> ExplorationResult:
    """Explore ``config``, with a live progress line on ``progress_console`` when one is given."""
    display = ProgressDisplay(progress_console or Console(stderr=True), config.name, progress_console is not None)
    with display:
        return engine.explore(
            bundle.model,
            config,
            properties,
            max_states=max_states,
            stop_on_violation=stop_on_violation,
            progress=display.callback,
            action_types=bundle.action_types(),
        )


def command_explore(args: argparse.Namespace, out: Console) -> int:
    # Every input is checked before any exploration starts.
    engine = build_engine(args.engine, master=args.master, exact=args.exact, checkpoint=args.checkpoint,
                          resume=args.resume, reductions=reductions_of(args.reduce),
                          driver_memory=args.driver_memory)
    check_output_options(args.max_states, args.chart)
    if args.json:
        folder = os.path.dirname(os.path.abspath(args.json))
        if not os.path.isdir(folder):
            raise InputError(f"--json: no such directory {folder!r}")
    bounds = parse_bounds(args.bound)
    bundle = bundle_for(args.model)
    config = bundle.config(args.config, bounds)
    properties = bundle.properties(config, args.property)
    try:
        build_reduction(engine.reductions, bundle.model, config)
        engine.prepare(bundle.model, config, properties)
    except ValueError as e:
        raise InputError(str(e).splitlines()[0]) from None

    err = Console(stderr=True)
    show = err.is_terminal if args.progress is None else args.progress
    result = run_engine(
        engine,
        bundle,
        config,
        properties,
        max_states=args.max_states,
        stop_on_violation=args.stop_on_violation,
        progress_console=err if show else None,
    )
    engine.close()
    print_result(out, result, args.show_state)
    if args.chart:
        for path in write_charts(result, args.chart, witnesses=args.chart_witnesses):
            out.print(f"chart: {path}")
    pinned = None if args.model or args.bound or args.property else manifest_check(result)
    if pinned:
        out.print(pinned, style="red" if "!=" in pinned else "green")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result_json(result), f, indent=2)
            f.write("\n")
    return EXIT_OK if result.ok else EXIT_FAILED


def command_list(args: argparse.Namespace, out: Console) -> int:
    bundle = bundle_for(args.model)
    standard = set(getattr(bundle.configs, "STANDARD", ()))
    configs = Table(title="Configurations (* = run by make verify)")
    for col in ("name", "description", "deadlock is error", "max states", "properties"):
        configs.add_column(col)
    for name, c in bundle.configs.CONFIGS.items():
        configs.add_row(("* " if name in standard else "  ") + name, c.description, str(c.deadlock_is_error),
                        f"{c.max_states:,}", ", ".join(c.properties) or "(all)")
    props = Table(title="Properties")
    for col in ("name", "kind", "rules", "meaning"):
        props.add_column(col)
    for name, p in sorted(bundle.registry.items()):
        props.add_row(name, p.kind, ", ".join(p.rules), p.doc)
    out.print(configs)
    out.print(props)
    return EXIT_OK


def main(argv: Sequence[str] | None = None, out: Console | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = build_parser().parse_args(argv)
    out = out or output_console()
    try:
        if args.command == "explore":
            return command_explore(args, out)
        return command_list(args, out)
    except InputError as e:
        sys.stderr.write(f"spark_check: error: {e}\n")
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
