"""``rabbitproof bench engines`` (``make bench``): distinct states per second of the engines.

Explores the configurations named ``medium`` and ``large`` (and any named on the command line, or every
standard one with ``--standard``) with the properties a user's run checks (the configuration's own but the
proof helpers; ``--helpers`` adds them, as ``make verify`` checks them), and a null model whose actions cost almost nothing, which measures the engine's own
per-state overhead: the ceiling no model can beat. ``--engines local,spark`` runs each configuration with
each engine in this one run and reports each engine's states/s as a ratio to the first engine's.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any, Mapping, Sequence

from rich.console import Console
from rich.table import Table

from rabbitproof.spark_check.bundle import InputError, action_types_of, load_module, load_spec, properties_for
from rabbitproof.spark_check.engine import Engine, ExplorationResult, LocalEngine, Model
from rabbitproof.spec.properties_api import Property

from rabbitproof.bench.null_model import NullConfig, NullModel
from rabbitproof.options import OneLineParser, add_engine_arguments, build_engine, output_console, reductions_of

DEFAULT_CONFIGS = ("medium", "large")


def bench(
    model: Model,
    configs: Sequence[Any],
    registry: Mapping[str, Property],
    *,
    engine: Engine | None = None,
    null_states: int = 1_000_000,
    with_properties: bool = True,
    helpers: bool = False,
) -> list[ExplorationResult]:
    """Explore each configuration (with the properties a user's run checks, the proof helpers too with
    ``helpers``, none without ``with_properties``), then the null model (not under a reduction, which is
    written for one model)."""
    engine = engine or LocalEngine()
    results = []
    types = action_types_of(model)
    for config in configs:
        props = properties_for(config, registry, helpers=helpers) if with_properties else ()
        results.append(engine.explore(model, config, props, action_types=types))
    if null_states and not engine.reductions:
        results.append(engine.explore(NullModel(null_states), NullConfig(), []))
    return results


def print_bench(console: Console, results: Sequence[ExplorationResult]) -> None:
    """One row per exploration; with several engines, each engine's states/s over the first engine's on
    the same configuration."""
    engines = list(dict.fromkeys(r.engine for r in results))
    table = Table(title=f"spark_check bench ({', '.join(engines)} engine{'s' if len(engines) > 1 else ''})")
    columns = ["config", "engine", "distinct states", "depth", "transitions", "seconds", "states/s", "transitions/s"]
    if len(engines) > 1:
        columns.append(f"ratio to {engines[0]}")
    for col in columns:
        table.add_column(col, justify="left" if col in ("config", "engine") else "right")
    first = {r.config: r for r in results if r.engine == engines[0]}
    for r in results:
        engine = r.engine + (f", --reduce {'+'.join(r.reductions)}" if r.reductions else "")
        row = [r.config, engine, f"{r.distinct_states:,}", str(r.depth), f"{r.transitions:,}", f"{r.seconds:.2f}",
               f"{r.states_per_second:,.0f}", f"{r.transitions / r.seconds:,.0f}" if r.seconds else "-"]
        if len(engines) > 1:
            base = first.get(r.config)
            row.append(f"{r.states_per_second / base.states_per_second:.2f}" if base and base.seconds else "-")
        table.add_row(*row)
    console.print(table)
    for r in results:
        if r.timings:
            spent = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in r.timings.items())
            console.print(f"{r.config} ({r.engine}): {r.seconds:.1f} s in all; {spent} (task times summed over tasks)")


def main(argv: Sequence[str] | None = None, console: Console | None = None) -> int:
    parser = OneLineParser(prog="rabbitproof bench engines", description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="*", metavar="CONFIG", help="also these configurations")
    parser.add_argument("--only", action="store_true", help="only the named configurations, not medium and large")
    parser.add_argument("--standard", action="store_true", help="also every standard configuration (make verify's)")
    parser.add_argument("--no-properties", action="store_true", help="explore without checking properties")
    parser.add_argument("--helpers", action="store_true",
                        help="also check the proof helpers (make verify does; a user's run does not)")
    parser.add_argument("--null-states", type=int, default=1_000_000, metavar="N",
                        help="size of the null model (0 to skip it)")
    parser.add_argument("--model", metavar="MODULE", help=argparse.SUPPRESS)
    add_engine_arguments(parser)
    parser.add_argument("--engines", metavar="NAMES", help="several engines, comma-separated (e.g. local,spark)")
    args = parser.parse_args(argv)
    try:
        names_of_engines = args.engines.split(",") if args.engines else [args.engine]
        reductions = reductions_of(args.reduce)
        engines = [build_engine(n.strip(), master=args.master if n.strip() == "spark" else None,
                                reductions=reductions) for n in names_of_engines]
        bundle = load_module(args.model) if args.model else load_spec()
        standard = tuple(getattr(bundle.configs, "STANDARD", ())) if args.standard else ()
        names = list(dict.fromkeys((() if args.only else DEFAULT_CONFIGS) + tuple(args.configs) + standard))
        configs = [bundle.config(n) for n in names]
        for c in configs:
            bundle.properties(c)
    except InputError as e:
        sys.stderr.write(f"rabbitproof.bench.engines: error: {e}\n")
        return 2
    results = []
    for engine in engines:
        try:
            results += bench(bundle.model, configs, bundle.registry, engine=engine, null_states=args.null_states,
                             with_properties=not args.no_properties, helpers=args.helpers)
        finally:
            engine.close()
    print_bench(console or output_console(), results)
    return 0
