"""``python -m spark_check.bench`` (``make bench``): distinct states per second of the local engine.

Explores the configurations named ``medium`` and ``large`` (and any named on the command line) with
their properties, and a null model whose actions cost almost nothing, which measures the engine's own
per-state overhead: the ceiling no model can beat.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from rich.console import Console
from rich.table import Table

from spec.properties_api import Property

from .bundle import InputError, action_types_of, load_module, load_spec, properties_for
from .cli import OneLineParser, output_console
from .engine import Engine, ExplorationResult, LocalEngine, Model

DEFAULT_CONFIGS = ("medium", "large")


@dataclass(frozen=True)
class NullHop:
    """The null model's only action: go to child ``k`` of the current node."""

    k: int
    actor = "null"


class NullModel:
    """A complete ``fanout``-ary tree of ``n`` int states (heap numbering): n distinct states, each with
    ``fanout`` successors computed by one multiplication, so nearly all the time is the engine's."""

    def __init__(self, n: int, fanout: int = 4) -> None:
        self.n = n
        self.fanout = fanout
        self.actions = tuple(NullHop(k) for k in range(1, fanout + 1))

    def initial_states(self, config: Any) -> tuple[int, ...]:
        return (0,)

    def enabled(self, state: int, config: Any) -> tuple[NullHop, ...]:
        return self.actions

    def step(self, state: int, action: NullHop) -> tuple[int, tuple[()]]:
        return (state * self.fanout + action.k) % self.n, ()

    def terminal_ok(self, state: int, config: Any) -> bool:
        return True


@dataclass(frozen=True)
class NullConfig:
    """A configuration for the null model."""

    name: str = "null model (engine alone)"
    description: str = "engine overhead"
    deadlock_is_error: bool = True
    properties: tuple[str, ...] = ()
    max_states: int = 10**9


def bench(
    model: Model,
    configs: Sequence[Any],
    registry: Mapping[str, Property],
    *,
    engine: Engine | None = None,
    null_states: int = 1_000_000,
    with_properties: bool = True,
) -> list[ExplorationResult]:
    """Explore each configuration (with its properties unless told otherwise), then the null model."""
    engine = engine or LocalEngine()
    results = []
    types = action_types_of(model)
    for config in configs:
        props = properties_for(config, registry) if with_properties else ()
        results.append(engine.explore(model, config, props, action_types=types))
    if null_states:
        results.append(engine.explore(NullModel(null_states), NullConfig(), []))
    return results


def print_bench(console: Console, results: Sequence[ExplorationResult]) -> None:
    table = Table(title="spark_check bench (local engine)")
    for col in ("config", "distinct states", "depth", "transitions", "seconds", "states/s", "transitions/s"):
        table.add_column(col, justify="left" if col == "config" else "right")
    for r in results:
        table.add_row(r.config, f"{r.distinct_states:,}", str(r.depth), f"{r.transitions:,}", f"{r.seconds:.2f}",
                      f"{r.states_per_second:,.0f}", f"{r.transitions / r.seconds:,.0f}" if r.seconds else "-")
    console.print(table)


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m spark_check.bench", description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="*", metavar="CONFIG", help="also these configurations")
    parser.add_argument("--only", action="store_true", help="only the named configurations, not medium and large")
    parser.add_argument("--no-properties", action="store_true", help="explore without checking properties")
    parser.add_argument("--null-states", type=int, default=1_000_000, metavar="N",
                        help="size of the null model (0 to skip it)")
    parser.add_argument("--model", metavar="MODULE", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        bundle = load_module(args.model) if args.model else load_spec()
        names = list(dict.fromkeys((() if args.only else DEFAULT_CONFIGS) + tuple(args.configs)))
        configs = [bundle.config(n) for n in names]
        for c in configs:
            bundle.properties(c)
    except InputError as e:
        sys.stderr.write(f"spark_check.bench: error: {e}\n")
        return 2
    results = bench(bundle.model, configs, bundle.registry, null_states=args.null_states,
                    with_properties=not args.no_properties)
    print_bench(output_console(), results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
