"""How an exploration reads: a live progress line, summary tables, numbered traces and JSON."""
from __future__ import annotations

import time
from typing import Any

from rich import box
from rich.console import Console, Group
from rich.padding import Padding
from rich.live import Live
from rich.table import Table
from rich.text import Text

from rabbitproof.spark_check.engine import ExplorationResult, PropertyResult, Trace

from rabbitproof.explore.steps import harm_step, trace_object, unseen_delivery
from rabbitproof.output import show

VERDICT_STYLE = {
    "holds": "green",
    "witnessed": "green",
    "found": "green",
    "VIOLATED": "bold red",
    "NOT WITNESSED": "bold red",
    "NOT FOUND": "bold red",
    "UNDECIDED": "yellow",
}


class ProgressDisplay:
    """Progress (states, depth, states left to expand, states/s) on stderr while an engine runs.

    On a terminal it is one live line; elsewhere (``--progress`` into a file or pipe) a plain line every
    two seconds. Use as a context manager and pass ``callback`` to the engine: when disabled it is None
    and the engine skips its progress calls.
    """

    def __init__(self, console: Console, label: str, enabled: bool) -> None:
        self.console = console
        self.label = label
        self.enabled = enabled
        self._live: Live | None = None
        self._last = 0.0
        self._interval = 0.1 if console.is_terminal else 2.0
        self._level: tuple[int, int, float] | None = None    # (depth, states left, seconds) when the level began

    def __enter__(self) -> "ProgressDisplay":
        if self.enabled and self.console.is_terminal:
            self._live = Live(Text(f"{self.label}: starting"), console=self.console, refresh_per_second=8,
                              transient=True)
            self._live.__enter__()
        self._last = time.monotonic()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)
            self._live = None

    @property
    def callback(self) -> Any:
        return self.update if self.enabled else None

    def level_estimate(self, depth: int, frontier: int, seconds: float) -> str:
        """How long the current BFS level should still take, from how fast its frontier has shrunk so far
        ("" until that can be told). The search's own end cannot be estimated: the next level's size is
        not known before this one is expanded."""
        if self._level is None or self._level[0] != depth or frontier > self._level[1]:
            self._level = (depth, frontier, seconds)
            return ""
        _, left, since = self._level
        done, spent = left - frontier, seconds - since
        if done <= 0 or spent <= 0:
            return ""
        return f", level {depth} done in ~{frontier * spent / done:,.0f} s"

    def update(self, states: int, depth: int, frontier: int, seconds: float) -> None:
        """Redraw, at most every ``_interval`` seconds."""
        estimate = self.level_estimate(depth, frontier, seconds)
        now = time.monotonic()
        if now - self._last < self._interval:
            return
        self._last = now
        rate = states / seconds if seconds > 0 else 0.0
        line = Text.assemble(
            (f"{self.label}: ", "bold"),
            f"{states:,} distinct states, level {depth}, {frontier:,} of its states still to expand, ",
            (f"{rate:,.0f} states/s", "cyan"),
            f", {seconds:.1f} s{estimate}",
        )
        if self._live is not None:
            self._live.update(line)
        else:
            self.console.print(line, soft_wrap=True)


def verdict_text(p: PropertyResult) -> Text:
    """The verdict word, coloured, with pass or FAIL."""
    mark = "pass" if p.passed else "FAIL"
    return Text.assemble((p.verdict, VERDICT_STYLE.get(p.verdict, "")), f" ({mark})")


def summary(result: ExplorationResult, terminal: bool = True) -> Group:
    """The figures, the property verdicts and the action coverage of one exploration, as rich tables
    (drawn in ASCII when not for a ``terminal``)."""
    lines = box.HEAVY_HEAD if terminal else box.ASCII
    figures = Table(title=f"Exploration of {result.config} ({result.engine} engine)", show_header=False, box=lines)
    figures.add_column("figure", style="bold")
    figures.add_column("value", justify="right")
    figures.add_row("distinct states", f"{result.distinct_states:,}")
    figures.add_row("depth (BFS levels)", f"{result.depth}")
    figures.add_row("transitions", f"{result.transitions:,}")
    figures.add_row("seconds", f"{result.seconds:.2f}")
    figures.add_row("states/s", f"{result.states_per_second:,.0f}")
    if result.exact:
        figures.add_row("visited set", "exact (states, not fingerprints)")
    else:
        figures.add_row("fingerprint collision probability", f"{result.collision_probability:.2e}")
    dead = f"{result.deadlocks:,}" + (" (error)" if result.deadlock_failed else " (allowed)" if result.deadlocks else "")
    figures.add_row("deadlocks", Text(dead, "bold red" if result.deadlock_failed else ""))
    if result.error:
        figures.add_row("error", Text(result.error, "bold red"))
    elif result.stopped_early:
        figures.add_row("search", Text("stopped at the first violation", "yellow"))
    figures.add_row("result", Text("OK", "bold green") if result.ok else Text("FAILED", "bold red"))

    verdicts = Table(title="Properties", box=lines)
    verdicts.add_column("property", no_wrap=True)             # names and verdicts whole; the rules wrap
    verdicts.add_column("kind", no_wrap=True)
    verdicts.add_column("rules", ratio=1, min_width=6)
    verdicts.add_column("verdict", no_wrap=True)
    verdicts.add_column("trace", justify="right", no_wrap=True)
    for p in result.properties:
        steps = str(len(p.trace.steps)) if p.trace is not None else ""
        verdicts.add_row(p.name, p.kind, ", ".join(p.rules), verdict_text(p), steps)

    coverage = Table(title="Action coverage (transitions)", box=lines)
    coverage.add_column("action", no_wrap=True)
    coverage.add_column("fired", justify="right")
    for name, n in result.coverage.items():
        coverage.add_row(name, Text(f"{n:,}", "yellow" if n == 0 else ""))
    parts: list[Any] = [figures, verdicts, coverage]
    if result.never_fired:
        parts.append(Text(f"never fired: {', '.join(result.never_fired)}", "yellow"))
    parts.extend(Text(note, "yellow") for note in result.notes)
    return Group(*parts)


def verdict_title(p: PropertyResult) -> str:
    """A property's name and verdict, as a trace's title: a liveness counterexample that is no lasso says
    that its execution ends there."""
    ends = p.kind == "liveness" and p.trace is not None and p.trace.cycle_start is None
    return f"{p.name} {p.verdict}" + (", in an end state (nothing fair left to happen)" if ends else "")


def counterexamples(result: ExplorationResult) -> list[tuple[str, Trace]]:
    """The traces worth printing: violated invariants, found hazards (the documented counterexample) and
    an erroneous deadlock. Witnesses of ``sometimes`` properties stay in the JSON."""
    out = []
    for p in result.properties:
        if p.trace is not None and p.kind != "sometimes":
            out.append((verdict_title(p) + ("" if p.passed else " (FAIL)"), p.trace))
    if result.deadlock_trace is not None and result.deadlock_failed:
        out.append(("deadlock", result.deadlock_trace))
    if result.error_trace is not None:
        out.append((f"{result.error}; the state being expanded", result.error_trace))
    return out


def print_trace(console: Console, title: str, trace: Trace, show_state: bool = False, same_state: str = "",
                harm: str = "") -> None:
    """A trace as numbered steps: actor, action, then each frame that crossed, with its direction; the
    final state (long for the real spec) only when asked (it is always in the JSON). A lasso's repeated
    steps are marked ↻; ``same_state`` says in what sense its loop comes back to the same state. The step
    that does the harm (rabbitproof.explore.steps.harm_step) is marked ``<-- here`` with ``harm``, what
    happens there."""
    harm_at = harm_step(trace) if harm else None
    fused = sum(s.fused for s in trace.steps)
    at_start = next((i for i, s in enumerate(trace.steps) if not s.fused), len(trace.steps))  # fused into the start
    shortest = "shortest trace" if not fused else \
        f"trace of {len(trace.steps) - fused} levels (reduced: {fused} steps fused into the one before" \
        f"{' or into the start' if at_start else ''})"
    loop = trace.cycle_start
    if loop is None:
        console.print(Text(f"{title}: {shortest}, {len(trace.steps)} steps", style="bold"))
    else:
        console.print(Text(f"{title}: a lasso, {loop} steps to a loop, then {len(trace.steps) - loop} steps "
                           "that repeat for ever", style="bold"))
    console.print("  0. initial state")
    first, last = (loop + 1, len(trace.steps)) if loop is not None else (None, None)
    for s in trace.steps:
        if s.number == first:
            console.print(Text(f"  ↻ from here, steps {first} to {last} repeat for ever:", style="bold magenta"))
        line = Text(f"{s.number}. " if loop is None or s.number < first else f"↻ {s.number}. ")
        line.append(f"[{s.actor}]", style="cyan")
        line.append(f" {s.action}")
        if s.fused:
            line.append(" (fused into the start)" if s.number <= at_start else " (fused)", style="dim")
        if s.number == harm_at:
            line.append(f"  <-- here {harm}", style="bold red")
        console.print(Padding(line, (0, 0, 0, 2), expand=False))          # a long line wraps under its own indent
        for frame in s.frames:
            console.print(Padding(Text(frame, style="dim"), (0, 0, 0, 7), expand=False))
        if (unseen := unseen_delivery(s)) is not None:      # to a connection no client reads any more
            console.print(Padding(Text(f"{unseen[0]} broker->client {unseen[1]}, never read: its client is gone",
                                       style="dim"), (0, 0, 0, 7), expand=False))
    if loop is not None:
        console.print(Text(f"  ↻ back to the state before step {first}{same_state}: steps {first} to {last} again, "
                           "for ever", style="bold magenta"))
    if show_state:
        console.print(Text(f"  final state: {trace.final_state}", style="dim"), overflow="fold")


def harm_of(p: PropertyResult) -> str:
    """What a property's counterexample shows at its harm step, in words: ``autoack_loses_messages
    happens`` (a found hazard), ``no_lost_messages fails`` (a violated invariant); "" for a witness."""
    if p.kind == "sometimes" or p.trace is None:
        return ""
    return f"{p.name} {'happens' if p.kind == 'hazard' else 'fails'}"


def print_result(console: Console, result: ExplorationResult, show_state: bool = False) -> None:
    """The summary tables, then every counterexample."""
    for part in summary(result, console.is_terminal).renderables:
        if isinstance(part, Table):
            show(console, part)             # listed row by row where it would not fit
        else:
            console.print(part)
    harms = {id(p.trace): harm_of(p) for p in result.properties if p.trace is not None}
    for title, trace in counterexamples(result):
        console.print()
        print_trace(console, title, trace, show_state, harm=harms.get(id(trace), ""))


def result_json(result: ExplorationResult) -> dict[str, Any]:
    """Every figure, verdict and trace of ``result`` as plain JSON data (traces as objects whose steps are
    objects: rabbitproof.explore.steps.trace_object)."""
    return {
        "config": result.config,
        "engine": result.engine,
        "bounds": result.bounds,
        "ok": result.ok,
        "complete": result.complete,
        "stopped_early": result.stopped_early,
        "error": result.error,
        "distinct_states": result.distinct_states,
        "depth": result.depth,
        "transitions": result.transitions,
        "seconds": round(result.seconds, 6),
        "states_per_second": round(result.states_per_second, 1) if result.seconds > 0 else None,
        "collision_probability": result.collision_probability,
        "exact": result.exact,
        "deadlocks": {
            "count": result.deadlocks,
            "is_error": result.deadlock_is_error,
            "failed": result.deadlock_failed,
            "trace": trace_object(result.deadlock_trace),
        },
        "properties": [
            {
                "name": p.name,
                "kind": p.kind,
                "rules": list(p.rules),
                "doc": p.doc,
                "verdict": p.verdict,
                "found": p.found,
                "passed": p.passed,
                "trace": trace_object(p.trace, harm_of(p)),
            }
            for p in result.properties
        ],
        "error_trace": trace_object(result.error_trace),
        "coverage": result.coverage,
        "never_fired": list(result.never_fired),
        "notes": list(result.notes),
    }
