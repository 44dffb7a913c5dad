"""`rabbitproof verify` (``make verify``): every check, in order, and one summary table.

Parts: ``explore`` (rabbitproof.explore.standard over the standard configurations, counts against the
manifest; ``--update-manifest`` rewrites it), ``agreement`` (the Z3 model
against spec/ on a sample of reachable states), ``proofs`` (the inductive obligations, printed as a
table invariant x action), ``bmc`` (a bounded search for each hazard, replayed through the spec,
its length beside the explorer's: ``proofs.bmc``), ``crosshair`` (CrossHair over the contracts of the spec's pure functions,
``proofs.contracts``: one check per postcondition). ``--part`` runs one. Exits 1 on any failure or unknown, 2 on bad input.
"""
from __future__ import annotations

import argparse
import random
import time
from dataclasses import dataclass
from typing import Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from model.actions import RELATIONS
from model.agreement import Checker
from proofs.bmc import EXPECTED_UNKNOWN, FOUND, HAZARD_CONFIGS, check_hazard
from proofs.bmc import UNKNOWN as BMC_UNKNOWN
from proofs.contracts import check_all, print_outcomes
from proofs.inductive import COUNTEREXAMPLE, PROVED, UNKNOWN, invariants_named, prove_all
from spark_check.bundle import InputError, load_spec
from spark_check.engine import Engine
from spark_check.reductions import build_reduction, parse_reductions, written_for
from spec import configs, machine

from rabbitproof import compiled
from rabbitproof.explore.standard import verify
from rabbitproof.options import add_engine_arguments, build_engine, fail

PARTS = ("explore", "agreement", "proofs", "bmc", "crosshair")


@dataclass
class PartResult:
    """One part's counts."""

    part: str
    checks: int
    passed: int
    failed: int
    unknown: int
    seconds: float
    expected_unknown: int = 0           # unknowns listed with their reason (proofs.bmc.EXPECTED_UNKNOWN)

    @property
    def ok(self) -> bool:
        return self.failed == 0 and self.unknown == self.expected_unknown and self.checks > 0


def run_explore(console: Console, names: Sequence[str] = (), engine: Engine | None = None,
                update: bool = False, progress: bool = False) -> PartResult:
    """rabbitproof.explore.standard over spec.configs.STANDARD, or the configurations named (counts
    pinned in the manifest; ``update`` rewrites them)."""
    started = time.perf_counter()
    bundle = load_spec()
    chosen = [bundle.config(n) for n in (names or bundle.configs.STANDARD)]
    report = verify(bundle.model, chosen, bundle.registry, update=update, engine=engine, console=console,
                    progress=progress, liveness=bundle.liveness_named())
    passed = sum(o.ok for o in report.outcomes)
    return PartResult("explore", len(report.outcomes), passed, len(report.outcomes) - passed, 0,
                      time.perf_counter() - started)


def run_agreement(console: Console, walks: int = 60, length: int = 40, seed: int = 8) -> PartResult:
    """model.agreement on every candidate action of the states of ``walks`` random executions."""
    started = time.perf_counter()
    rng = random.Random(seed)
    names = [n for n in configs.STANDARD if configs.get(n).category != "medium"]
    checker = Checker()
    checks = passed = 0
    for w in range(walks):
        config = configs.get(names[w % len(names)])
        state = machine.initial_states(config)[0]
        for _ in range(length):
            for verdict in checker.check_state(state, config):
                checks += 1
                if verdict.ok:
                    passed += 1
                else:
                    console.print(Text(f"agreement: {config.name}: {verdict.action!r}: {verdict.problem}", "red"))
            enabled = machine.enabled(state, config)
            if not enabled:
                break
            state = machine.step(state, rng.choice(enabled))[0]
    return PartResult("agreement", checks, passed, checks - passed, 0, time.perf_counter() - started)


def run_proofs(console: Console, invariants: Sequence[str] = (), actions: Sequence[str] = ()) -> PartResult:
    """The inductive obligations, one table row per invariant, one column per action."""
    started = time.perf_counter()
    by_name = {cls.__name__: cls for cls in RELATIONS}
    classes = [by_name[a] for a in actions] if actions else None
    outcomes = prove_all(invariants_named(invariants), classes)
    table = Table(title="inductive proofs (Init and every action)")
    table.add_column("invariant")
    for col in ("proved", "counterexample", "unknown", "seconds", "slowest obligation"):
        table.add_column(col, justify="right" if col != "slowest obligation" else "left")
    for name in dict.fromkeys(o.invariant for o in outcomes):
        mine = [o for o in outcomes if o.invariant == name]
        slow = max(mine, key=lambda o: o.seconds)
        table.add_row(name, str(sum(o.status == PROVED for o in mine)),
                      str(sum(o.status == COUNTEREXAMPLE for o in mine)), str(sum(o.status == UNKNOWN for o in mine)),
                      f"{sum(o.seconds for o in mine):.2f}", f"{slow.action} {slow.seconds:.2f} s")
    console.print(table)
    for o in outcomes:
        if o.status != PROVED:
            console.print(Text(f"{o.invariant} x {o.action}: {o.status} ({o.seconds:.2f} s)", "bold red"))
            for line in o.counterexample:
                console.print(f"  {line}")
    return PartResult("proofs", len(outcomes), sum(o.status == PROVED for o in outcomes),
                      sum(o.status == COUNTEREXAMPLE for o in outcomes), sum(o.status == UNKNOWN for o in outcomes),
                      time.perf_counter() - started)


def run_bmc(console: Console, hazards: Sequence[str] = ()) -> PartResult:
    """proofs.bmc for every hazard (or those named): a check passes when Z3 found an execution and
    the spec, replaying it, is enabled at every step and ends with the property false. A hazard the
    bounded model does not reach, or whose replay fails, fails; one the solver could not decide is unknown."""
    started = time.perf_counter()
    outcomes = [check_hazard(h) for h in (hazards or HAZARD_CONFIGS)]
    table = Table(title="bounded model checking of the hazards (Z3, replayed through spec.machine.step)")
    for col in ("hazard", "configuration", "BMC steps", "explorer steps", "seconds", "verdict"):
        table.add_column(col, justify="right" if col in ("BMC steps", "explorer steps", "seconds") else "left")
    notes = []
    for o in outcomes:
        if o.ok:
            verdict = Text("found, replayed" + ("; shorter undecided" if o.detail else ""), "bold green")
        elif o.status == BMC_UNKNOWN and o.hazard in EXPECTED_UNKNOWN:
            verdict = Text("unknown (listed)", "yellow")
        else:
            verdict = Text(o.status, "bold red")
        if o.detail or o.status == BMC_UNKNOWN and o.hazard in EXPECTED_UNKNOWN:
            notes.append(f"{o.hazard}: {o.detail}" + (f"; listed: {EXPECTED_UNKNOWN[o.hazard]}"
                                                       if o.hazard in EXPECTED_UNKNOWN and not o.ok else ""))
        table.add_row(o.hazard, o.config, "-" if o.length is None else str(o.length),
                      "-" if o.explorer_length is None else str(o.explorer_length), f"{o.seconds:.1f}", verdict)
    console.print(table)
    for note in notes:
        console.print(Text(note, "yellow"))
    for o in outcomes:
        if o.ok and o.explorer_length is not None and o.length != o.explorer_length:
            console.print(Text(f"{o.hazard}: BMC found {o.length} steps, the explorer {o.explorer_length}", "yellow"))
    unknown = sum(o.status == BMC_UNKNOWN for o in outcomes)
    passed = sum(o.status == FOUND for o in outcomes)
    expected = sum(o.status == BMC_UNKNOWN and o.hazard in EXPECTED_UNKNOWN for o in outcomes)
    return PartResult("bmc", len(outcomes), passed, len(outcomes) - passed - unknown, unknown,
                      time.perf_counter() - started, expected_unknown=expected)


def run_crosshair(console: Console) -> PartResult:
    """proofs.contracts: every postcondition is a check; one with a counterexample fails, one CrossHair
    did not report on fails too (silence is not a pass)."""
    started = time.perf_counter()
    outcomes = check_all()
    print_outcomes(console, outcomes)
    checks = passed = failed = unknown = 0
    for o in outcomes:
        checks += o.conditions
        failed += len(o.counterexamples)
        if o.other or o.returncode:                      # CrossHair itself went wrong: nothing else is known
            unknown += o.conditions - len(o.counterexamples)
        else:
            passed += o.confirmed + o.not_confirmed
            failed += max(0, o.conditions - o.reported)  # not reported on: silence is not a pass
    return PartResult("crosshair", checks, passed, failed, unknown, time.perf_counter() - started)


def print_summary(console: Console, results: Sequence[PartResult]) -> None:
    table = Table(title="make verify")
    for col in ("part", "checks", "passed", "failed", "unknown", "seconds", "verdict"):
        table.add_column(col, justify="left" if col in ("part", "verdict") else "right")
    for r in results:
        table.add_row(r.part, f"{r.checks:,}", f"{r.passed:,}", f"{r.failed:,}", f"{r.unknown:,}",
                      f"{r.seconds:.1f}", Text("PASS" + (f" ({r.unknown} listed unknown)" if r.unknown else ""), "bold green")
                      if r.ok else Text("FAIL", "bold red"))
    console.print(table)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `rabbitproof verify`."""
    parser.add_argument("--part", action="append", default=[], metavar="PART",
                        help=f"run only this part (repeatable): {', '.join(PARTS)}")
    parser.add_argument("--invariant", action="append", default=[], metavar="NAME",
                        help="proofs: only this invariant (repeatable)")
    parser.add_argument("--action", action="append", default=[], metavar="NAME",
                        help="proofs: only this action class (repeatable)")
    parser.add_argument("--hazard", action="append", default=[], metavar="NAME",
                        help="bmc: only this hazard (repeatable)")
    parser.add_argument("--config", action="append", default=[], metavar="NAME",
                        help="explore: only this configuration (repeatable; default the standard ones)")
    parser.add_argument("--update-manifest", action="store_true",
                        help="explore: rewrite the pinned counts of the configurations explored")
    parser.add_argument("--no-progress", action="store_true", help="explore: never show progress")
    add_engine_arguments(parser, reduce_default="written")


def _checked(args: argparse.Namespace) -> Engine:
    """Every name and option checked before any work: the engine the explore part runs on;
    InputError (one line) for a bad one."""
    for part in args.part:
        if part not in PARTS:
            raise InputError(f"unknown part {part!r}; known: {', '.join(PARTS)}")
    try:
        invariants_named(args.invariant)
    except KeyError as e:
        raise InputError(e.args[0]) from None
    names = sorted(cls.__name__ for cls in RELATIONS)
    for action in args.action:
        if action not in names:
            raise InputError(f"unknown action {action!r}; known: {', '.join(names)}")
    for hazard in args.hazard:
        if hazard not in HAZARD_CONFIGS:
            raise InputError(f"unknown hazard {hazard!r}; known: {', '.join(HAZARD_CONFIGS)}")
    bundle = load_spec()
    try:
        reductions = written_for(bundle.model) if args.reduce == "written" else parse_reductions(args.reduce)
    except ValueError as e:
        raise InputError(f"--reduce: {e}") from None
    engine = build_engine(args.engine, master=args.master, reductions=reductions)
    try:
        for name in args.config or bundle.configs.STANDARD:
            config = bundle.config(name)
            build_reduction(reductions, bundle.model, config)
            engine.prepare(bundle.model, config, bundle.properties(config), bundle.liveness_named())
    except ValueError as e:
        raise InputError(str(e).splitlines()[0]) from None
    return engine


def run(args: argparse.Namespace, console: Console | None = None) -> int:
    """`rabbitproof verify`: the exit code (0 every part passes, 1 one fails, 2 bad input)."""
    try:
        engine = _checked(args)
    except InputError as e:
        return fail("rabbitproof verify", e)
    if "crosshair" in (args.part or PARTS) and compiled.in_use():
        engine.close()
        return fail("rabbitproof verify", f"CrossHair reads the spec's Python source, not the compiled spec: unset "
                                          f"{compiled.ENV} (it is for explore, check and bench), or name the parts "
                                          f"to run without crosshair (--part)")
    console = console or Console()
    results = []
    try:
        for part in args.part or PARTS:
            if part == "explore":
                results.append(run_explore(console, args.config, engine, args.update_manifest,
                                           Console(stderr=True).is_terminal and not args.no_progress))
            elif part == "agreement":
                results.append(run_agreement(console))
            elif part == "crosshair":
                results.append(run_crosshair(console))
            elif part == "bmc":
                results.append(run_bmc(console, args.hazard))
            else:
                results.append(run_proofs(console, args.invariant, args.action))
    finally:
        engine.close()
    print_summary(console, results)
    ok = all(r.ok for r in results)
    console.print(Text("verify: PASS" if ok else "verify: FAIL", "bold green" if ok else "bold red"))
    return 0 if ok else 1
