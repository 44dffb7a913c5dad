"""`rabbitproof explore CONFIG` and `rabbitproof list`: explore one configuration of the spec (or of
any module with its interface, ``--model``), or list the configurations and properties.

Exit codes: 0 every check met its expectation, 1 some check failed (or the state cap was hit),
2 bad input (reported in one line on stderr before any exploration starts).
"""
from __future__ import annotations

import argparse
import json
import os
from typing import Any, Sequence

from rich.console import Console
from rich.table import Table

from rabbitproof.spark_check.bundle import InputError, SpecBundle, helpers_left_out, load_module, load_spec
from rabbitproof.spark_check.engine import Engine, ExplorationResult
from rabbitproof.spark_check.reductions import build_reduction

from rabbitproof.explore.chart import write_charts
from rabbitproof.explore.manifest import manifest_check
from rabbitproof.explore.report import ProgressDisplay, print_result, result_json
from rabbitproof.options import (
    EXIT_FAILED, EXIT_OK, add_engine_arguments, add_progress_arguments, build_engine, check_output_options,
    parse_bounds, reductions_of,
)

def add_model_argument(parser: argparse.ArgumentParser) -> None:
    """--model: a module with the spec's interface (model, CONFIGS and REGISTRY in one) instead of spec/."""
    parser.add_argument("--model", metavar="MODULE", default=None,
                        help="explore this module (model, CONFIGS and REGISTRY in one) instead of spec/")


def add_explore_arguments(explore: argparse.ArgumentParser) -> None:
    """The options of `rabbitproof explore`."""
    explore.add_argument("config", help="configuration name (see `rabbitproof list`)")
    add_model_argument(explore)
    add_engine_arguments(explore)
    explore.add_argument("--checkpoint", metavar="DIR",
                         help="spark engine: keep the level store (visited set, frontier, parent links) in DIR")
    explore.add_argument("--resume", metavar="DIR", help="spark engine: continue the run checkpointed in DIR")
    explore.add_argument("--driver-memory", metavar="SIZE",
                         help="spark engine: the driver's heap, e.g. 8g (default 2g in local mode, where the "
                              "executors share it)")
    explore.add_argument("--bound", action="append", default=[], metavar="NAME=VALUE",
                         help="override a bound (repeatable; NAME=VALUE,NAME=VALUE also works) of the configuration")
    explore.add_argument("--property", action="extend", nargs="+", default=[], metavar="NAME",
                         help="check these properties (liveness ones too) instead of the configuration's own")
    explore.add_argument("--json", metavar="FILE", help="also write the full result as JSON")
    explore.add_argument("--chart", metavar="DIR",
                         help="write each counterexample as a message-sequence chart (SVG) in DIR")
    explore.add_argument("--chart-witnesses", action="store_true",
                         help="with --chart, also chart the witness of each sometimes property")
    explore.add_argument("--max-states", type=int, metavar="N", help="state cap (default: the configuration's)")
    explore.add_argument("--time-limit", type=float, metavar="SECONDS",
                         help="stop after this long; what the search decided stands, the rest is undecided")
    explore.add_argument("--show-state", action="store_true", help="print the final state of each trace")
    explore.add_argument("--exact", action="store_true",
                         help="keep states, not 64-bit fingerprints (no collisions; more memory)")
    explore.add_argument("--stop-on-violation", action="store_true",
                         help="stop at the first violated invariant or erroneous deadlock")
    add_progress_arguments(explore)


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
    time_limit: float | None = None,
    liveness: Sequence[Any] = (),
) -> ExplorationResult:
    """Explore ``config``, with a live progress line on ``progress_console`` when one is given; the
    liveness properties ``liveness`` are judged on the graph once the search is complete."""
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
            time_limit=time_limit,
            liveness=liveness,
        )


def run_explore(args: argparse.Namespace, out: Console) -> int:
    """`rabbitproof explore`: the exit code."""
    # Every input is checked before any exploration starts.
    engine = build_engine(args.engine, master=args.master, exact=args.exact, checkpoint=args.checkpoint,
                          resume=args.resume, reductions=reductions_of(args.reduce),
                          driver_memory=args.driver_memory)
    check_output_options(args.max_states, args.chart, args.time_limit)
    if args.json:
        folder = os.path.dirname(os.path.abspath(args.json))
        if not os.path.isdir(folder):
            raise InputError(f"--json: no such directory {folder!r}")
    bounds = parse_bounds(args.bound)
    bundle = bundle_for(args.model)
    config = bundle.config(args.config, bounds)
    # A user's run checks the configuration's properties but the proof helpers (make verify checks those).
    properties = bundle.properties(config, args.property, helpers=False)
    # Liveness keeps the whole graph (a tenth more time, more memory): make verify judges it, a user names it.
    liveness = bundle.liveness_named(args.property) if args.property else ()
    left_out = helpers_left_out(config, bundle.registry, args.property)
    live_left_out = () if args.property else tuple(bundle.liveness)
    try:
        build_reduction(engine.reductions, bundle.model, config)
        engine.prepare(bundle.model, config, properties, liveness)
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
        time_limit=args.time_limit,
        liveness=liveness,
    )
    engine.close()
    print_result(out, result, args.show_state)
    if left_out:
        out.print(f"not checked: {len(left_out)} proof helpers ({', '.join(left_out)}); make verify checks them, "
                  "--property NAME checks one")
    if live_left_out:
        out.print(f"not checked: the liveness propert{'ies' if len(live_left_out) > 1 else 'y'} "
                  f"{', '.join(live_left_out)} (judged on the whole graph, which it keeps); make verify checks "
                  "it, --property NAME checks it")
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


def run_list(args: argparse.Namespace, out: Console) -> int:
    """`rabbitproof list`: the configurations (those `make verify` runs marked) and the properties."""
    bundle = bundle_for(args.model)
    standard = set(getattr(bundle.configs, "STANDARD", ()))
    configs = Table(title="Configurations (* = run by make verify)")
    for col in ("name", "description", "deadlock is error", "max states", "properties"):
        configs.add_column(col)
    for name, c in bundle.configs.CONFIGS.items():
        configs.add_row(("* " if name in standard else "  ") + name, c.description, str(c.deadlock_is_error),
                        f"{c.max_states:,}", ", ".join(c.properties) or "(all)")
    props = Table(title="Properties (helper: a proof helper, checked by make verify and when named, not by default)")
    for col in ("name", "kind", "helper", "rules", "meaning"):
        props.add_column(col)
    for name, p in sorted(bundle.registry.items()):
        props.add_row(name, p.kind, "helper" if p.helper else "", ", ".join(p.rules), p.doc)
    for name, live in sorted(bundle.liveness.items()):
        props.add_row(name, "liveness", "", ", ".join(live.rules), live.doc)
    out.print(configs)
    out.print(props)
    return EXIT_OK
