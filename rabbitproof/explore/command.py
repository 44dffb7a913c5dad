"""`rabbitproof explore CONFIG` and `rabbitproof list`: explore one configuration of the spec (or of
any module with its interface, ``--model``), or list the configurations and properties.

Exit codes (rabbitproof.exits): 0 every check met its expectation, 1 one did not (a property violated,
a hazard or witness not found, an erroneous deadlock), 2 bad input (one line on stderr before any
exploration starts), 3 undecided: the search stopped (state cap, time limit, Ctrl-C) before it failed
anything.
"""
from __future__ import annotations

import argparse
import json
import os
from typing import Any, Sequence

from rich.console import Console

from rabbitproof.spark_check.bundle import InputError, SpecBundle, helpers_left_out, load_module, load_spec
from rabbitproof.spark_check.engine import Engine, ExplorationResult, stopped_short
from rabbitproof.spark_check.reductions import build_reduction

from rabbitproof.explore.bounds import NAMES as BOUND_NAMES, spec_bounds
from rabbitproof.explore.chart import write_charts
from rabbitproof.explore.manifest import MANIFEST, manifest_check, read_manifest
from rabbitproof.explore.report import ProgressDisplay, print_result, result_json
from rabbitproof.exits import FOUND, NOTHING_FOUND, UNDECIDED, schema
from rabbitproof.output import VERDICT_WORDS, new_table, print_json, show, verdict_line
from rabbitproof.options import (
    add_engine_arguments, add_progress_arguments, build_engine, check_output_options,
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
                         help="override a bound of the configuration (repeatable; NAME=VALUE,NAME=VALUE also "
                              "works): a fault by its name in the setup file, the rest by the spec's: "
                              f"{', '.join(BOUND_NAMES)} (another --model: its own names)")
    explore.add_argument("--property", action="extend", nargs="+", default=[], metavar="NAME",
                         help="check these properties (liveness ones too) instead of the configuration's own")
    explore.add_argument("--json", action="store_true", help="print the full result as JSON instead of the report")
    explore.add_argument("--json-file", metavar="FILE", help="also write the full result as JSON to FILE")
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
    if args.json_file:
        folder = os.path.dirname(os.path.abspath(args.json_file))
        if not os.path.isdir(folder):
            raise InputError(f"--json-file: no such directory {folder!r}")
    bounds = parse_bounds(args.bound)
    bundle = bundle_for(args.model)
    config = bundle.config(args.config, bounds if args.model else spec_bounds(bounds))
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
    code = exit_code(result)
    left = []
    if left_out:
        left.append(f"{len(left_out)} proof helpers ({', '.join(left_out)}); make verify checks them, "
                    "--property NAME checks one")
    if live_left_out:
        left.append(f"the liveness propert{'ies' if len(live_left_out) > 1 else 'y'} {', '.join(live_left_out)} "
                    "(judged on the whole graph, which it keeps); make verify checks it, --property NAME checks it")
    charts = [str(p) for p in write_charts(result, args.chart, witnesses=args.chart_witnesses)] if args.chart else []
    pinned = None if args.model or args.bound or args.property else manifest_check(result)
    document = {**result_json(result), "not_checked": left, "charts": charts, "manifest": pinned}
    if args.json_file:
        with open(args.json_file, "w", encoding="utf-8") as f:
            json.dump({"schema": schema("explore"), "exit_code": code, "verdict": VERDICT_WORDS[code], **document},
                      f, indent=2)
            f.write("\n")
    if args.json:
        print_json(out, "explore", document, code)
        return code
    print_result(out, result, args.show_state)
    for line in left:
        out.print(f"not checked: {line}")
    for path in charts:
        out.print(f"chart: {path}")
    if pinned:
        out.print(pinned, style="red" if "!=" in pinned else "green")
    verdict_line(out, "explore", code, verdict_detail(result))
    return code


def exit_code(result: ExplorationResult) -> int:
    """1 when a property failed, an erroneous deadlock was reached or the model raised; else 3 when the
    search stopped before the end (state cap, time limit, Ctrl-C); else 0."""
    failed = [p for p in result.properties if p.decided and not p.passed]
    if failed or result.deadlock_failed or (result.error and not stopped_short(result.error)):
        return FOUND
    if not result.complete or result.error or any(not p.decided for p in result.properties):
        return UNDECIDED
    return NOTHING_FOUND


def verdict_detail(result: ExplorationResult) -> str:
    """Why the exit code is what it is, in a few words."""
    failed = [f"{p.name} {p.verdict}" for p in result.properties if p.decided and not p.passed]
    if result.deadlock_failed:
        failed.append(f"{result.deadlocks:,} deadlocks")
    if result.error and not stopped_short(result.error):
        failed.append(result.error)
    if failed:
        return f"{result.config}: " + ", ".join(failed)
    if exit_code(result) == UNDECIDED:
        undecided = sum(not p.decided for p in result.properties)
        return f"{result.config}: the search stopped ({result.error or 'incomplete'}); {undecided} properties undecided"
    return f"{result.config}: {len(result.properties)} properties met their expectation in {result.distinct_states:,} states"


def add_list_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `rabbitproof list`."""
    add_model_argument(parser)
    parser.add_argument("--properties", action="store_true",
                        help="the long form: every configuration's settings and properties, and every property")
    parser.add_argument("--json", action="store_true", help="print the configurations and properties as JSON")


def configurations(bundle: SpecBundle) -> list[dict[str, Any]]:
    """Each configuration as data: its name, whether make verify runs it, its distinct states and depth as
    pinned in the manifest (None where none are pinned), what it exhibits, its cap and its properties."""
    standard = set(getattr(bundle.configs, "STANDARD", ()))
    pins = read_manifest(MANIFEST) if bundle.configs is load_spec().configs else {}
    out = []
    for name, c in bundle.configs.CONFIGS.items():
        pin = pins.get(name, {})
        out.append({"name": name, "standard": name in standard, "distinct_states": pin.get("distinct_states"),
                    "depth": pin.get("depth"), "exhibits": c.description, "deadlock_is_error": c.deadlock_is_error,
                    "max_states": c.max_states, "properties": list(c.properties)})
    return out


def properties_of(bundle: SpecBundle) -> list[dict[str, Any]]:
    """Each property (safety and liveness) as data: name, kind, whether it is a proof helper, rules, meaning."""
    out = [{"name": name, "kind": p.kind, "helper": p.helper, "rules": list(p.rules), "meaning": p.doc}
           for name, p in sorted(bundle.registry.items())]
    out += [{"name": name, "kind": "liveness", "helper": False, "rules": list(live.rules), "meaning": live.doc}
            for name, live in sorted(bundle.liveness.items())]
    return out


def run_list(args: argparse.Namespace, out: Console) -> int:
    """`rabbitproof list`: the configurations as a table (those `make verify` runs marked), with their
    pinned state counts; ``--properties`` adds each one's properties and the table of properties."""
    bundle = bundle_for(args.model)
    configs, props = configurations(bundle), properties_of(bundle)
    if args.json:
        print_json(out, "list", {"configurations": configs, "properties": props}, NOTHING_FOUND)
        return NOTHING_FOUND
    table = new_table(out, "name", "states", "depth", "what it exhibits",
                      title="Configurations (* = run by make verify; states and depth as pinned)",
                      right=("states", "depth"), whole=("name",))
    for c in configs:
        table.add_row(("* " if c["standard"] else "") + c["name"],
                      "-" if c["distinct_states"] is None else f"{c['distinct_states']:,}",
                      "-" if c["depth"] is None else str(c["depth"]), c["exhibits"])
    show(out, table)
    if args.properties:
        long = new_table(out, "name", "deadlock is error", "max states", "properties", title="Their settings",
                         right=("max states",), whole=("name", "deadlock is error"))
        for c in configs:
            long.add_row(c["name"], str(c["deadlock_is_error"]), f"{c['max_states']:,}",
                         ", ".join(c["properties"]) or "(all)")
        show(out, long)
        table = new_table(out, "name", "kind", "helper", "rules", "meaning",
                          title="Properties (helper: a proof helper, checked by make verify and when named)",
                          whole=("name", "kind", "helper"))
        for p in props:
            table.add_row(p["name"], p["kind"], "helper" if p["helper"] else "", ", ".join(p["rules"]), p["meaning"])
        show(out, table)
    verdict_line(out, "list", NOTHING_FOUND, words="listed", detail=f"{len(configs)} configurations, {len(props)} properties"
                 + ("" if args.properties else " (--properties lists them)"))
    return NOTHING_FOUND
