"""``rabbitproof bench reductions``: explore configurations with and without a reduction and
check what its soundness argument (spec/por.py, spec/symmetry.py) predicts, in one table.

For each configuration both searches must complete, and:

- every property has the same verdict, and the same number of deadlocked states is reached (a
  deadlock has nothing enabled, so it is its own normal form: the reduced search reaches exactly
  the full search's deadlocks); under ``symmetry`` one per orbit: no more, and some iff some;
- every trace of the reduced search (witness, counterexample, deadlock) replays in the model, step by
  step, to a state that decides its property (or deadlocks); under ``por`` its number of BFS levels is
  at most the full search's shortest trace, which is at most its number of model steps; under
  ``symmetry`` alone it has exactly the full search's number of steps;
- the same action classes fire, and the reduced search keeps no more states than the full one;
- under ``symmetry``, the renamings commute with the model and the properties on every reachable state
  (``spark_check.equivariance``).

``rabbitproof bench`` (``make bench``) runs it over every standard configuration; tests/test_reductions.py over the
small ones.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Sequence

from rich.table import Table

from rabbitproof.spark_check.bundle import InputError, action_types_of, load_spec, properties_for
from rabbitproof.spark_check.engine import ExplorationResult, LocalEngine
from rabbitproof.spark_check.equivariance import equivariance_problems
from rabbitproof.spark_check.reductions import build_reduction
from rabbitproof.spark_check.results import Trace
from rabbitproof.spec.actions import BrokerTakeFrame, ClientAction, ClientReceive
from rabbitproof.spec.state import CH_OPEN, MODE_NONE
from rabbitproof.spec.symmetry import automorphisms

from rabbitproof.options import OneLineParser, output_console, reductions_of


@dataclass
class Comparison:
    """One configuration explored in full and reduced, and every way the two disagree with the argument."""

    config: str
    full: ExplorationResult
    reduced: ExplorationResult
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def levels(trace: Trace) -> int:
    """Edges of the reduced graph along ``trace``: its steps, fused ones not counted."""
    return trace.levels


def replay(model: Any, config: Any, trace: Trace) -> list[Any]:
    """The states ``trace`` can end in, replayed in the model step by step (each step is matched by its
    actor, its sentence and its action class; several enabled actions may read the same) and kept
    when their text is the trace's final state. Empty when some step is not enabled."""
    states = list(model.initial_states(config))
    for step in trace.steps:
        key = (step.actor, step.action, step.action_type)
        nxt = {}
        for state in states:
            for action in model.enabled(state, config):
                if (str(getattr(action, "actor", "?")), str(action), type(action).__name__) == key:
                    succ = model.step(state, action)[0]
                    nxt[succ] = None
        states = list(nxt)
        if not states:
            return []
    return [s for s in states if repr(s) == trace.final_state]


def decides(prop: Any, state: Any) -> bool:
    """Whether ``state`` decides ``prop``: a false predicate for always and hazard, true for sometimes."""
    holds = prop.holds(state)
    return holds if prop.kind == "sometimes" else not holds


def compare_reduction(model: Any, config: Any, properties: Sequence[Any], reductions: Sequence[str] = ("por",),
                      action_types: Sequence[type] = ()) -> Comparison:
    """Explore ``config`` in full and under ``reductions`` and list every disagreement with the argument."""
    full = LocalEngine().explore(model, config, properties, action_types=action_types)
    reduced = LocalEngine(reductions=reductions).explore(model, config, properties, action_types=action_types)
    out = Comparison(config.name, full, reduced)
    problems = out.problems
    for name, r in (("full", full), ("reduced", reduced)):
        if not r.complete:
            problems.append(f"{name} search incomplete: {r.error or 'stopped'}")
    if problems:
        return out
    if reduced.distinct_states > full.distinct_states:
        problems.append(f"reduced keeps more states ({reduced.distinct_states:,} > {full.distinct_states:,})")
    by_name = {p.name: p for p in properties}
    for f, r in zip(full.properties, reduced.properties):
        if f.verdict != r.verdict:
            problems.append(f"{f.name}: {f.verdict} in full, {r.verdict} reduced")
            continue
        if f.trace is None or r.trace is None:
            continue
        problems += _trace_problems(model, config, f.name, f.trace, r.trace,
                                    lambda s, p=by_name[f.name]: decides(p, s), fused="por" in reductions)
    if "symmetry" in reductions:    # one deadlock per orbit: fewer, but none only where the full search has none
        if reduced.deadlocks > full.deadlocks or (reduced.deadlocks > 0) != (full.deadlocks > 0):
            problems.append(f"deadlocks: {full.deadlocks:,} in full, {reduced.deadlocks:,} reduced (orbits)")
    elif full.deadlocks != reduced.deadlocks:
        problems.append(f"deadlocks: {full.deadlocks:,} in full, {reduced.deadlocks:,} reduced")
    if not any(p.startswith("deadlocks") for p in problems) and full.deadlock_trace is not None \
            and reduced.deadlock_trace is not None:
        problems += _trace_problems(model, config, "deadlock", full.deadlock_trace, reduced.deadlock_trace,
                                    lambda s: not model.enabled(s, config) and not model.terminal_ok(s, config),
                                    fused="por" in reductions)
    if "symmetry" in reductions:
        if automorphisms(config):
            problems += equivariance_problems(model, config, properties)[1]
    fired_full = {n for n, c in full.coverage.items() if c}
    fired_reduced = {n for n, c in reduced.coverage.items() if c}
    if fired_full != fired_reduced:
        problems.append(f"action classes fired differ: {sorted(fired_full ^ fired_reduced)}")
    return out


def _trace_problems(model: Any, config: Any, name: str, full: Trace, reduced: Trace, decided: Any,
                    fused: bool = True) -> list[str]:
    """What is wrong with the reduced search's trace for ``name``: it must replay to a state that
    decides it, and levels(reduced) <= steps(full) <= steps(reduced) with fused takes (``por``), or
    exactly as many steps without them (a search over orbits keeps every shortest distance)."""
    out = []
    if fused and not levels(reduced) <= len(full.steps) <= len(reduced.steps):
        out.append(f"{name}: trace lengths break levels(reduced) {levels(reduced)} <= steps(full) "
                   f"{len(full.steps)} <= steps(reduced) {len(reduced.steps)}")
    if not fused and len(reduced.steps) != len(full.steps):
        out.append(f"{name}: {len(reduced.steps)} steps reduced, {len(full.steps)} in full")
    ends = replay(model, config, reduced)
    if not ends:
        out.append(f"{name}: the reduced trace does not replay in the model")
    elif not any(decided(s) for s in ends):
        out.append(f"{name}: the reduced trace replays to a state that does not decide it")
    return out


def premise_problems(model: Any, config: Any, properties: Sequence[Any], reductions: Sequence[str] = ("por",),
                     limit: int = 10, reduction: Any = None) -> tuple[int, list[str]]:
    """The premises of the ``por`` argument, checked on every state reachable in the full graph (exactly:
    states, not fingerprints): (1) a fusable take and every other enabled action leave each other
    enabled, the take stays fusable, and both orders reach the same state; (3) a client write on a
    channel the broker holds open in plain mode (what the argument removes) never makes a state decide
    a property the state before it did not. Returns the number of states checked and at most ``limit``
    problems. ``reduction`` replaces the one ``reductions`` names (a test's deliberately unsound one)."""
    reduction = reduction or build_reduction(reductions, model, config)
    enabled, step = model.enabled, model.step
    seen = set(model.initial_states(config))
    frontier = list(seen)
    problems: list[str] = []
    while frontier and len(problems) < limit:
        nxt = []
        for x in frontier:
            actions = enabled(x, config)
            for a in actions:
                succ = step(x, a)[0]
                if succ not in seen:
                    seen.add(succ)
                    nxt.append(succ)
            if reduction.quiet(x):
                for t in actions:
                    if type(t) is BrokerTakeFrame and t.ch and t.conn in reduction.connections \
                            and reduction.fusable(x, t.conn, t.ch):
                        problems += _commutes(model, config, reduction, x, t, actions)
            for w in actions:
                if isinstance(w, ClientAction) and w.ch and type(w) is not ClientReceive:
                    channel = x.conns[w.conn].channels[w.ch - 1]
                    if channel.status != CH_OPEN or channel.mode != MODE_NONE:
                        continue
                    after = step(x, w)[0]
                    for p in properties:
                        if decides(p, after) and not decides(p, x):
                            problems.append(f"(3): {type(w).__name__} {w} makes a state decide {p.name}")
        frontier = nxt
    return len(seen), problems[:limit]


def _commutes(model: Any, config: Any, reduction: Any, x: Any, t: Any, actions: Sequence[Any]) -> list[str]:
    """Premise (1) for the fusable take ``t`` in ``x`` against every other enabled action."""
    out = []
    tx = model.step(x, t)[0]
    after_t = set(model.enabled(tx, config))
    for b in actions:
        if b == t:
            continue
        bx = model.step(x, b)[0]
        if b not in after_t:
            out.append(f"(1): {t} disables {type(b).__name__} {b}")
        elif t not in set(model.enabled(bx, config)) or not reduction.quiet(bx) or \
                not reduction.fusable(bx, t.conn, t.ch):
            out.append(f"(1): {type(b).__name__} {b} leaves {t} not fusable")
        elif model.step(bx, t)[0] != model.step(tx, b)[0]:
            out.append(f"(1): {t} and {type(b).__name__} {b} do not commute")
    return out


def print_comparisons(console: Any, comparisons: Sequence[Comparison]) -> None:
    table = Table(title="full and reduced searches (--reduce " + "+".join(comparisons[0].reduced.reductions) + ")"
                  if comparisons else "full and reduced searches")
    for col in ("config", "full states", "reduced states", "reduced/full", "full depth", "reduced depth",
                "full s", "reduced s", "verdicts", "argument"):
        table.add_column(col, justify="left" if col in ("config", "verdicts", "argument") else "right",
                         no_wrap=col == "config")
    for c in comparisons:
        f, r = c.full, c.reduced
        same = all(a.verdict == b.verdict for a, b in zip(f.properties, r.properties))
        table.add_row(c.config, f"{f.distinct_states:,}", f"{r.distinct_states:,}",
                      f"{r.distinct_states / f.distinct_states:.2f}" if f.distinct_states else "-",
                      str(f.depth), str(r.depth), f"{f.seconds:.1f}", f"{r.seconds:.1f}",
                      f"{len(f.properties)} same" if same else "DIFFER", "holds" if c.ok else "BROKEN")
    console.print(table)
    for c in comparisons:
        for p in c.problems:
            console.print(f"{c.config}: {p}", style="red")


def main(argv: Sequence[str] | None = None, console: Any = None) -> int:
    parser = OneLineParser(prog="rabbitproof bench reductions", description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="*", metavar="CONFIG", help="only these (default: every standard one)")
    parser.add_argument("--reduce", default="por", metavar="NAMES", help="the reductions to check (default por)")
    args = parser.parse_args(argv)
    try:
        reductions = reductions_of(args.reduce)
        if not reductions:
            raise InputError("--reduce: name a reduction to check")
        bundle = load_spec()
        configs = [bundle.config(n) for n in (args.configs or bundle.configs.STANDARD)]
    except InputError as e:
        sys.stderr.write(f"rabbitproof.bench.reductions: error: {e}\n")
        return 2
    console = console or output_console()
    types = action_types_of(bundle.model)
    comparisons = []
    for config in configs:
        comparisons.append(compare_reduction(bundle.model, config, properties_for(config, bundle.registry),
                                             reductions, types))
    print_comparisons(console, comparisons)
    ok = all(c.ok for c in comparisons)
    console.print("reduction check: " + ("every verdict unchanged, argument holds" if ok else "FAILED"),
                  style="bold green" if ok else "bold red")
    return 0 if ok else 1
