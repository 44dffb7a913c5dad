"""`rabbitproof verify` (``make verify``): every check, in order, and one summary table.

Parts: ``explore`` (rabbitproof.explore.standard over the standard configurations, counts against the
manifest; ``--update-manifest`` rewrites it), ``agreement`` (the Z3 model
against spec/ on a sample of reachable states), ``proofs`` (the inductive obligations, printed as a
table invariant x action), ``bmc`` (a bounded search for each hazard, replayed through the spec,
its length beside the explorer's: ``proofs.bmc``), ``crosshair`` (CrossHair over the contracts of the spec's pure functions,
``proofs.contracts``: one check per postcondition), ``setups`` (`check`'s answers by argument and from smaller
setups held to the exhaustive search on the examples, the mixed setups and setups drawn at random, and to
RabbitMQ's guide on the larger setups: rabbitproof.check.cross_checks). ``--part`` runs one. Every Z3 query is bounded by Z3's
resource budget (``model.budgets``), not by time, so the results do not depend on the machine's load; a
query still undecided after its retry is counted as unknown, neither passed nor failed. Exits 0 when
every check passed, 1 on any failure, 3 when none failed but some are unknown, 2 on bad input.

The parts run ``--jobs`` at a time (two with the local engine on a machine of two cores or more), each
in a process of its own, longest first; each part's output is kept until the parts before it have
printed theirs, so it reads as a run one part after another would.
"""
from __future__ import annotations

import argparse
import io
import multiprocessing
import os
import random
import signal
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from rabbitproof.model.actions import RELATIONS
from rabbitproof.model.agreement import Checker
from rabbitproof.proofs.bmc import FOUND, HAZARD_CONFIGS, check_hazard
from rabbitproof.proofs.bmc import UNKNOWN as BMC_UNKNOWN
from rabbitproof.proofs.contracts import check_all, print_outcomes
from rabbitproof.proofs.inductive import COUNTEREXAMPLE, PROVED, UNKNOWN, invariants_named, prove_all
from rabbitproof.proofs.ranking import OBLIGATIONS, obligations_named, prove_ranking
from rabbitproof.spark_check.bundle import InputError, load_spec
from rabbitproof.spark_check.engine import Engine
from rabbitproof.spark_check.reductions import build_reduction, parse_reductions, written_for
from rabbitproof.spec import configs, machine

from rabbitproof import compiled, exits
from rabbitproof.check.cross_checks import RANDOM_SETUPS, SEED, run_all
from rabbitproof.extras import MissingExtra, require
from rabbitproof.explore.standard import verify
from rabbitproof.options import add_engine_arguments, build_engine, fail
from rabbitproof.output import print_json, show, verdict_line

PARTS = ("explore", "agreement", "proofs", "bmc", "crosshair", "setups")
LONGEST_FIRST = ("explore", "setups", "proofs", "bmc", "agreement", "crosshair")  # measured: 128, 113, 67, 47, 43, 11 s


@dataclass
class PartResult:
    """One part's counts: an unknown (the solver undecided within its budget, retried) is neither
    passed nor failed."""

    part: str
    checks: int
    passed: int
    failed: int
    unknown: int
    seconds: float

    @property
    def ok(self) -> bool:
        return self.failed == 0 and self.checks > 0

    @property
    def exit_code(self) -> int:
        """exits.FOUND on a failure (or no check at all), UNDECIDED with unknowns, else NOTHING_FOUND."""
        if not self.ok:
            return exits.FOUND
        return exits.UNDECIDED if self.unknown else exits.NOTHING_FOUND

    @property
    def verdict(self) -> Text:
        if not self.ok:
            return Text("FAIL", "bold red")
        if self.unknown:
            return Text("UNKNOWN", "bold yellow")
        return Text("PASS", "bold green")


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
    checks = passed = unknown = 0
    for w in range(walks):
        config = configs.get(names[w % len(names)])
        state = machine.initial_states(config)[0]
        for _ in range(length):
            for verdict in checker.check_state(state, config):
                checks += 1
                if verdict.ok:
                    passed += 1
                elif verdict.undecided:
                    unknown += 1
                    console.print(Text(f"agreement: {config.name}: {verdict.action!r}: unknown (the solver "
                                       f"ran out of its budget twice)", "yellow"))
                else:
                    console.print(Text(f"agreement: {config.name}: {verdict.action!r}: {verdict.problem}", "red"))
            enabled = machine.enabled(state, config)
            if not enabled:
                break
            state = machine.step(state, rng.choice(enabled))[0]
    return PartResult("agreement", checks, passed, checks - passed - unknown, unknown, time.perf_counter() - started)


def _proof_names(names: Sequence[str]) -> tuple[list[str], list[str]]:
    """The names given to --invariant, split: invariants, and obligations of the ranking of a waiting
    publish (proofs.ranking). KeyError for an unknown name."""
    ranking = [n for n in names if n in OBLIGATIONS]
    plain = [n for n in names if n not in OBLIGATIONS]
    invariants_named(plain)
    return plain, ranking


def run_proofs(console: Console, invariants: Sequence[str] = (), actions: Sequence[str] = ()) -> PartResult:
    """The inductive obligations, one table row per invariant, one column per action; then the ranking
    obligations of a waiting publish (proofs.ranking), one row each."""
    started = time.perf_counter()
    by_name = {cls.__name__: cls for cls in RELATIONS}
    classes = [by_name[a] for a in actions] if actions else None
    plain, ranking = _proof_names(invariants)
    outcomes = prove_all(invariants_named(plain), classes) if plain or not invariants else []
    if ranking or not invariants:
        outcomes += prove_ranking(obligations_named(ranking), classes)
    table = Table(title="inductive proofs (Init and every action), and the ranking of a waiting publish "
                        "(every action)")
    table.add_column("invariant")
    for col in ("proved", "counterexample", "unknown", "seconds", "slowest obligation"):
        table.add_column(col, justify="right" if col != "slowest obligation" else "left")
    for name in dict.fromkeys(o.invariant for o in outcomes):
        mine = [o for o in outcomes if o.invariant == name]
        slow = max(mine, key=lambda o: o.seconds)
        table.add_row(name, str(sum(o.status == PROVED for o in mine)),
                      str(sum(o.status == COUNTEREXAMPLE for o in mine)), str(sum(o.status == UNKNOWN for o in mine)),
                      f"{sum(o.seconds for o in mine):.2f}", f"{slow.action} {slow.seconds:.2f} s")
    show(console, table)
    for o in outcomes:
        if o.status != PROVED:
            console.print(Text(f"{o.invariant} x {o.action}: {o.status} ({o.seconds:.2f} s)",
                               "bold red" if o.status == COUNTEREXAMPLE else "yellow"))
            for line in o.counterexample:
                console.print(f"  {line}")
    return PartResult("proofs", len(outcomes), sum(o.status == PROVED for o in outcomes),
                      sum(o.status == COUNTEREXAMPLE for o in outcomes), sum(o.status == UNKNOWN for o in outcomes),
                      time.perf_counter() - started)


def run_bmc(console: Console, hazards: Sequence[str] = ()) -> PartResult:
    """proofs.bmc for every hazard (or those named): a check passes when Z3 found an execution and
    the spec, replaying it, is enabled at every step and ends with the property false. A hazard the
    bounded model does not reach, or whose replay fails, fails; one the solver could not decide within its
    budget is unknown."""
    started = time.perf_counter()
    outcomes = [check_hazard(h) for h in (hazards or HAZARD_CONFIGS)]
    table = Table(title="bounded model checking of the hazards (Z3, replayed through spec.machine.step)")
    for col in ("hazard", "configuration", "BMC steps", "explorer steps", "seconds", "verdict"):
        table.add_column(col, justify="right" if col in ("BMC steps", "explorer steps", "seconds") else "left")
    notes = []
    for o in outcomes:
        if o.ok:
            verdict = Text("found, replayed" + ("; shorter undecided" if o.detail else ""), "bold green")
        elif o.status == BMC_UNKNOWN:
            verdict = Text("unknown", "yellow")
        else:
            verdict = Text(o.status, "bold red")
        if o.detail:
            notes.append(f"{o.hazard}: {o.detail}")
        table.add_row(o.hazard, o.config, "-" if o.length is None else str(o.length),
                      "-" if o.explorer_length is None else str(o.explorer_length), f"{o.seconds:.1f}", verdict)
    show(console, table)
    for note in notes:
        console.print(Text(note, "yellow"))
    for o in outcomes:
        if o.ok and o.explorer_length is not None and o.length != o.explorer_length:
            console.print(Text(f"{o.hazard}: BMC found {o.length} steps, the explorer {o.explorer_length}", "yellow"))
    unknown = sum(o.status == BMC_UNKNOWN for o in outcomes)
    passed = sum(o.status == FOUND for o in outcomes)
    return PartResult("bmc", len(outcomes), passed, len(outcomes) - passed - unknown, unknown,
                      time.perf_counter() - started)


def run_crosshair(console: Console) -> PartResult:
    """proofs.contracts: every postcondition is a check; one with a counterexample fails, one CrossHair
    did not report on fails too (silence is not a pass); "not confirmed" (no counterexample within
    the budget of paths and Z3 resource units, the same under any load) passes, as a bounded search; a CrossHair that went wrong leaves its
    postconditions unknown."""
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


def run_setups(console: Console, random_count: int = RANDOM_SETUPS) -> PartResult:
    """rabbitproof.check.cross_checks: every answer `check` proves or finds held to the exhaustive search
    (the examples, the mixed setups, ``random_count`` setups drawn at random, and setups with a consumer that
    requeues beside one that never fails) or to RabbitMQ's guide (the larger setups); one check per answer
    compared, one row per kind of setup."""
    started = time.perf_counter()
    console.print(f"setups: {random_count} setups drawn at random (seed {SEED}; --random-setups N for more)")
    results = run_all(random_count)
    table = Table(title="check's answers by argument and from smaller setups, held to the search and to the guide")
    for col in ("setups", "held to", "count", "answers compared", "by the search itself", "failed", "unknown",
                "seconds", "slowest"):
        table.add_column(col, justify="left" if col in ("setups", "held to", "slowest") else "right")
    for kind, title, against in (("larger", "larger setups", "RabbitMQ's guide"),
                                 ("known", "examples and mixed setups", "the exhaustive search"),
                                 ("random", "drawn at random", "the exhaustive search"),
                                 ("round robin", "a requeuer beside a steady consumer", "the exhaustive search")):
        mine = [h for k, h in results if k == kind]
        slow = max(mine, key=lambda h: h.seconds, default=None)
        table.add_row(title, against, str(len(mine)), str(sum(h.checks for h in mine)),
                      str(sum(h.by_search for h in mine)), str(sum(len(h.failures) for h in mine)),
                      str(sum(len(h.unknown) for h in mine)), f"{sum(h.seconds for h in mine):.1f}",
                      f"{slow.name} {slow.seconds:.1f} s" if slow else "-")
    show(console, table)
    for _, held in results:
        for line in held.failures:
            console.print(Text(line, "bold red"))
        for line in held.unknown:
            console.print(Text(line, "yellow"))
    checks = sum(h.checks for _, h in results)
    failed = sum(len(h.failures) for _, h in results)
    unknown = sum(len(h.unknown) for _, h in results)
    return PartResult("setups", checks + unknown, checks - failed, failed, unknown, time.perf_counter() - started)


def print_summary(console: Console, results: Sequence[PartResult]) -> None:
    table = Table(title="make verify")
    for col in ("part", "checks", "passed", "failed", "unknown", "seconds", "verdict"):
        table.add_column(col, justify="left" if col in ("part", "verdict") else "right")
    for r in results:
        table.add_row(r.part, f"{r.checks:,}", f"{r.passed:,}", f"{r.failed:,}", f"{r.unknown:,}",
                      f"{r.seconds:.1f}", r.verdict)
    show(console, table)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `rabbitproof verify`."""
    parser.add_argument("--part", action="append", default=[], metavar="PART",
                        help=f"run only this part (repeatable): {', '.join(PARTS)}")
    parser.add_argument("--invariant", action="append", default=[], metavar="NAME",
                        help="proofs: only this invariant, or obligation of the ranking of a waiting publish "
                             "(repeatable)")
    parser.add_argument("--action", action="append", default=[], metavar="NAME",
                        help="proofs: only this action class (repeatable)")
    parser.add_argument("--hazard", action="append", default=[], metavar="NAME",
                        help="bmc: only this hazard (repeatable)")
    parser.add_argument("--config", action="append", default=[], metavar="NAME",
                        help="explore: only this configuration (repeatable; default the standard ones)")
    parser.add_argument("--random-setups", type=int, default=RANDOM_SETUPS, metavar="N",
                        help=f"setups: how many setups drawn at random (seeded: the same ones every run) to hold "
                             f"to the exhaustive search (default {RANDOM_SETUPS})")
    parser.add_argument("--update-manifest", action="store_true",
                        help="explore: rewrite the pinned counts of the configurations explored")
    parser.add_argument("--no-progress", action="store_true", help="never show progress")
    parser.add_argument("--json", action="store_true", help="print each part's counts as JSON instead of the report")
    parser.add_argument("--jobs", type=int, metavar="N",
                        help="run the parts N at a time, each in a process of its own (default 2 with the local engine "
                             "on a machine with two cores or more, else 1); the output is the same, in the same order")
    add_engine_arguments(parser, reduce_default="written")


def jobs_of(args: argparse.Namespace) -> int:
    """How many parts run at a time: ``--jobs``, or two with the local engine where two cores are free
    (the Spark engine uses every core for the explore part itself). InputError for fewer than one."""
    if args.jobs is not None:
        if args.jobs < 1:
            raise InputError(f"--jobs must be 1 or more, not {args.jobs}")
        return args.jobs
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return min(2, cores) if args.engine == "local" else 1


def _reductions(args: argparse.Namespace, bundle) -> tuple[str, ...]:
    """The reductions the explore part runs with (InputError for a bad --reduce)."""
    try:
        return tuple(written_for(bundle.model) if args.reduce == "written" else parse_reductions(args.reduce))
    except ValueError as e:
        raise InputError(f"--reduce: {e}") from None


def _checked(args: argparse.Namespace) -> Engine:
    """Every name and option checked before any work: the engine the explore part runs on;
    InputError (one line) for a bad one."""
    for part in args.part:
        if part not in PARTS:
            raise InputError(f"unknown part {part!r}; known: {', '.join(PARTS)}")
    try:
        _proof_names(args.invariant)
    except KeyError as e:
        raise InputError(e.args[0]) from None
    names = sorted(cls.__name__ for cls in RELATIONS)
    for action in args.action:
        if action not in names:
            raise InputError(f"unknown action {action!r}; known: {', '.join(names)}")
    for hazard in args.hazard:
        if hazard not in HAZARD_CONFIGS:
            raise InputError(f"unknown hazard {hazard!r}; known: {', '.join(HAZARD_CONFIGS)}")
    if args.random_setups < 0:
        raise InputError(f"--random-setups must be 0 or more, not {args.random_setups}")
    jobs_of(args)
    bundle = load_spec()
    reductions = _reductions(args, bundle)
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
    """`rabbitproof verify`: the exit code (rabbitproof.exits: 0 every part passes, 1 one fails, 2 bad input,
    3 undecided: Ctrl-C, or a check a solver left unknown within its budget and nothing failed)."""
    try:
        engine = _checked(args)
    except InputError as e:
        return fail("rabbitproof verify", e)
    parts = args.part or PARTS
    if "crosshair" in parts:
        try:
            require("proofs", "verify's CrossHair part")
        except MissingExtra as e:
            engine.close()
            return fail("rabbitproof verify", f"{e}, or name the parts to run without crosshair (--part)")
    if "crosshair" in parts and compiled.in_use():
        engine.close()
        return fail("rabbitproof verify", f"CrossHair reads the spec's Python source, not the compiled spec: unset "
                                          f"{compiled.ENV} (it is for explore, check and bench), or name the parts "
                                          f"to run without crosshair (--part)")
    console = console or Console()
    report, console = console, (Console(file=io.StringIO(), width=console.width) if args.json else console)
    progress = Console(stderr=True).is_terminal and not args.no_progress
    jobs = min(jobs_of(args), len(parts))
    started = time.perf_counter()
    try:
        if jobs > 1:
            engine.close()          # each process builds its own
            results = _run_in_processes(args, parts, console, jobs, progress)
        else:
            try:
                results = [run_part(part, args, console, engine, progress) for part in parts]
            finally:
                engine.close()
    except KeyboardInterrupt:
        seconds = time.perf_counter() - started
        if args.json:
            print_json(report, "verify", {"parts": [], "seconds": round(seconds, 1), "interrupted": True}, exits.UNDECIDED)
        else:
            console.print(Text(f"verify: interrupted after {seconds:.0f} s; nothing is judged", "bold red"))
            verdict_line(console, "verify", exits.UNDECIDED, "interrupted")
        return exits.UNDECIDED
    code = exit_code(results)
    seconds = time.perf_counter() - started
    if args.json:
        print_json(report, "verify", {"parts": [parts_json(r) for r in results], "seconds": round(seconds, 1),
                                      "interrupted": False}, code)
        return code
    print_summary(console, results)
    took = f" in {seconds:.0f} s" + (f", {jobs} parts at a time" if jobs > 1 else "")
    word, style = {exits.NOTHING_FOUND: ("PASS", "bold green"), exits.UNDECIDED: ("UNKNOWN", "bold yellow")}.get(
        code, ("FAIL", "bold red"))
    console.print(Text(f"verify: {word}" + took + (f" ({sum(r.unknown for r in results)} unknown)"
                                                    if code == exits.UNDECIDED else ""), style))
    verdict_line(console, "verify", code, ", ".join(f"{r.part} {r.verdict.plain}" for r in results))
    return code


def exit_code(results: Sequence[PartResult]) -> int:
    """1 when a check failed (or a part ran none), else 3 when a check is unknown, else 0."""
    return exits.worst([r.exit_code for r in results])


def parts_json(r: PartResult) -> dict:
    """One part's counts as data."""
    return {"part": r.part, "checks": r.checks, "passed": r.passed, "failed": r.failed, "unknown": r.unknown,
            "seconds": round(r.seconds, 1), "ok": r.ok, "verdict": r.verdict.plain}


def run_part(part: str, args: argparse.Namespace, console: Console, engine: Engine | None,
             progress: bool) -> PartResult:
    """One part, its tables and findings printed on ``console`` (``engine``: the explore part's)."""
    if part == "explore":
        return run_explore(console, args.config, engine, args.update_manifest, progress)
    if part == "agreement":
        return run_agreement(console)
    if part == "crosshair":
        return run_crosshair(console)
    if part == "bmc":
        return run_bmc(console, args.hazard)
    if part == "setups":
        return run_setups(console, args.random_setups)
    return run_proofs(console, args.invariant, args.action)


def part_in_process(part: str, args: argparse.Namespace, width: int, terminal: bool,
                    color: str | None) -> tuple[PartResult, str]:
    """``run_part`` in a worker process: its result, and its output as the main console would print it."""
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=terminal, color_system=color)
    engine = build_engine(args.engine, master=args.master, reductions=_reductions(args, load_spec())) \
        if part == "explore" else None
    try:
        return run_part(part, args, console, engine, False), out.getvalue()
    finally:
        if engine is not None:
            engine.close()


def _run_in_processes(args: argparse.Namespace, parts: Sequence[str], console: Console, jobs: int,
                      progress: bool) -> list[PartResult]:
    """``parts`` ``jobs`` at a time, longest first; each one's output printed once those before it in
    ``parts`` have printed theirs. A part that raises raises here once those before it have printed, as
    it would in this process; the parts still running are stopped."""
    results: list[PartResult | None] = [None] * len(parts)
    outputs: list[str | None] = [None] * len(parts)
    failed: list[BaseException | None] = [None] * len(parts)
    printed = 0
    started = time.perf_counter()
    # The status line takes over sys.stdout while it shows (rich's Live), printing what is written there
    # above itself, on stderr: the right place only when the output goes to the terminal too.
    out = console.file

    def write(text: str) -> None:
        target = sys.stdout if progress and console.is_terminal else out
        target.write(text)
        target.flush()              # a report is seen when its part is done, in a log file too
    status = Console(stderr=True).status("verify") if progress else nullcontext()
    # Leaving the pool stops its workers; they leave Ctrl-C to this process, which stops them so.
    with multiprocessing.get_context("spawn").Pool(jobs, initializer=signal.signal,
                                                    initargs=(signal.SIGINT, signal.SIG_IGN)) as pool, status:
        running = {i: pool.apply_async(part_in_process, (parts[i], args, console.width, console.is_terminal,
                                                         console.color_system))
                   for i in sorted(range(len(parts)), key=lambda i: LONGEST_FIRST.index(parts[i]))}
        while printed < len(parts):
            for i, job in list(running.items()):
                if job.ready():
                    del running[i]
                    try:
                        results[i], outputs[i] = job.get()
                    except Exception as e:  # noqa: BLE001 - raised below, in its turn
                        failed[i] = e
            while printed < len(parts) and (outputs[printed] is not None or failed[printed] is not None):
                if failed[printed] is not None:
                    raise failed[printed]
                write(outputs[printed] or "")
                printed += 1
            if printed < len(parts):
                if progress:
                    done = [p for p, r in zip(parts, results) if r is not None]
                    status.update(f"verify: {len(done)} of {len(parts)} parts done{': ' if done else ''}"
                                  f"{', '.join(done)} ({time.perf_counter() - started:.0f} s)")
                time.sleep(0.2)
    return [r for r in results if r is not None]
