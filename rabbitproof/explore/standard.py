"""The explore part of `rabbitproof verify` (``make verify``): explore every standard configuration.

For each configuration in ``spec.configs.STANDARD``: every invariant must hold, every hazard must be
found, every ``sometimes`` must be witnessed, every liveness property must hold (no fair cycle or end
state where it fails: spec.properties.LIVENESS), no deadlock the configuration counts as an error may be
reached, and the distinct-state count and depth must equal those pinned in ``manifest.json`` (a
regression test for free, as TLA+ projects keep). `rabbitproof verify --part explore --update-manifest`
rewrites the pins.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from rabbitproof.spark_check.bundle import action_types_of, properties_for
from rabbitproof.spark_check.engine import Engine, ExplorationResult, LocalEngine, Model
from rabbitproof.spark_check.reductions import written_for
from rabbitproof.spec.properties_api import Liveness, Property

from rabbitproof.explore.manifest import MANIFEST, compare, pinned_entry, read_manifest, write_manifest
from rabbitproof.explore.report import ProgressDisplay, harm_of, print_trace, verdict_title
from rabbitproof.output import show


@dataclass
class ConfigOutcome:
    """One configuration's exploration and what verify holds against it."""

    result: ExplorationResult
    manifest_differences: list[str] = field(default_factory=list)

    @property
    def failures(self) -> list[str]:
        """Why this configuration fails, one phrase each; empty when it passes."""
        r = self.result
        out = []
        if r.error:
            out.append(r.error)
        elif not r.complete:
            out.append("search incomplete")
        out += [f"{p.name} {p.verdict}" for p in r.properties if not p.passed]
        if r.deadlock_failed:
            out.append(f"{r.deadlocks:,} deadlocked states")
        return out + self.manifest_differences

    @property
    def ok(self) -> bool:
        return not self.failures


@dataclass
class VerifyReport:
    """Every configuration's outcome; ``ok`` when all pass."""

    outcomes: list[ConfigOutcome]
    manifest_path: Path
    manifest_updated: bool = False

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outcomes)


def verify(
    model: Model,
    configs: Sequence[Any],
    registry: Mapping[str, Property],
    manifest_path: Path = MANIFEST,
    *,
    update: bool = False,
    engine: Engine | None = None,
    console: Console | None = None,
    progress: bool = False,
    liveness: Sequence[Liveness] = (),
) -> VerifyReport:
    """Explore each configuration with its own properties and ``liveness``, compare with (or update) the
    manifest, and print the table and the counterexamples of every failed check on ``console`` when one is
    given.
    Without ``engine``, the local engine with the reductions written for ``model`` (``por`` and
    ``symmetry`` for the spec: they change no verdict, docs/explanation/reductions.md)."""
    engine = engine or LocalEngine(reductions=written_for(model))
    action_types = action_types_of(model)
    pinned = read_manifest(manifest_path)
    outcomes = []
    err = Console(stderr=True)
    for config in configs:
        properties = properties_for(config, registry)
        with ProgressDisplay(err, config.name, progress) as display:
            result = engine.explore(model, config, properties, progress=display.callback,
                                    action_types=action_types, liveness=liveness)
        differences = [] if update else compare(result, pinned.get(config.name))
        outcomes.append(ConfigOutcome(result, differences))
    report = VerifyReport(outcomes, manifest_path)
    if update:
        fresh = {o.result.config: pinned_entry(pinned.get(o.result.config), o.result)
                 for o in outcomes if o.result.complete}
        write_manifest(manifest_path, {**pinned, **fresh})
        report.manifest_updated = True
    if console is not None:
        print_report(console, report)
    return report


def counts(result: ExplorationResult, kind: str) -> str:
    """``met/total`` for one kind of property, or a dash when the configuration checks none."""
    ps = [p for p in result.properties if p.kind == kind]
    return f"{sum(p.passed for p in ps)}/{len(ps)}" if ps else "-"


def print_report(console: Console, report: VerifyReport) -> None:
    """One table for all configurations, then every counterexample of a failed check."""
    table = Table(title="spark_check verify")
    for col, just in (("config", "left"), ("distinct states", "right"), ("depth", "right"),
                      ("seconds", "right"), ("states/s", "right"), ("invariants held", "right"),
                      ("hazards found", "right"), ("sometimes witnessed", "right"), ("liveness held", "right"),
                      ("verdict", "left")):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for o in report.outcomes:
        r = o.result
        verdict = Text("PASS", "bold green") if o.ok else Text("FAIL", "bold red")
        table.add_row(r.config, f"{r.distinct_states:,}", str(r.depth), f"{r.seconds:.2f}",
                      f"{r.states_per_second:,.0f}", counts(r, "always"), counts(r, "hazard"),
                      counts(r, "sometimes"), counts(r, "liveness"), verdict)
    show(console, table)
    for o in report.outcomes:
        if not o.ok:
            console.print(Text(f"{o.result.config}: " + "; ".join(o.failures), "red"))
        for note in o.result.notes:
            console.print(Text(f"{o.result.config}: {note}", "yellow"))
    for o in report.outcomes:
        r = o.result
        for p in r.properties:
            if not p.passed:
                console.print()
                if p.trace is not None:
                    print_trace(console, f"{r.config}: {verdict_title(p)}", p.trace, harm=harm_of(p))
                else:
                    console.print(Text(f"{r.config}: {p.name} {p.verdict}: no reachable state "
                                       f"{'satisfies' if p.kind == 'sometimes' else 'falsifies'} it", "bold red"))
                    console.print(f"  {p.doc}")
        if r.deadlock_failed and r.deadlock_trace is not None:
            console.print()
            print_trace(console, f"{r.config}: deadlock", r.deadlock_trace)
        if r.error_trace is not None:
            console.print()
            print_trace(console, f"{r.config}: {r.error}; the state being expanded", r.error_trace)
    if report.manifest_updated:
        console.print(f"\nmanifest updated: {report.manifest_path}")
    console.print(Text("\nverify: PASS" if report.ok else "\nverify: FAIL", "bold green" if report.ok else "bold red"))
