"""What an exploration establishes, the same for every engine: figures, verdicts, traces, coverage."""
from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Sequence


@dataclass(frozen=True)
class TraceStep:
    """One transition of a trace: who acted, what they did, and the frames that crossed the wire."""

    number: int
    actor: str
    action: str
    action_type: str
    frames: tuple[str, ...]
    fused: bool = False             # taken in the same edge as the step before it (a reduction, ``por``)
    # What the step, with the steps fused after it, changed in the state: (where, before, after), e.g.
    # ("queues[0].ready", "(1,)", "()"); on the first step of each explored edge, empty on those fused.
    changes: tuple[tuple[str, str, str], ...] = field(default=(), compare=False)

    @classmethod
    def of(cls, number: int, action: Any, frames: Sequence[Any], fused: bool = False,
           changes: tuple[tuple[str, str, str], ...] = ()) -> "TraceStep":
        """The step ``action`` took, writing ``frames``, in words: its actor, text, type and frames."""
        return cls(number, str(getattr(action, "actor", "?")), str(action), type(action).__name__,
                   tuple(str(f) for f in frames), fused, changes)

    def text(self) -> str:
        """The step in one line: ``2. [broker] delivers m0 | frames: broker -> consumer: basic.deliver m0``."""
        head = f"{self.number}. [{self.actor}] {self.action}"
        return f"{head} | frames: {'; '.join(self.frames)}" if self.frames else head


def state_changes(before: Any, after: Any, where: str = "") -> list[tuple[str, str, str]]:
    """Where ``after`` differs from ``before``, field by field through named tuples and dataclasses and
    position by position through tuples of the same length: (where, before, after) for each smallest part
    that differs (``conns[1].channels[0].unacked``), its values as their repr."""
    if before == after:
        return []
    if type(before) is type(after) and hasattr(before, "_fields"):
        return [c for name in before._fields
                for c in state_changes(getattr(before, name), getattr(after, name), f"{where}.{name}" if where else name)]
    if type(before) is type(after) and is_dataclass(before) and not isinstance(before, type):
        return [c for f in fields(before)
                for c in state_changes(getattr(before, f.name), getattr(after, f.name),
                                       f"{where}.{f.name}" if where else f.name)]
    if isinstance(before, tuple) and isinstance(after, tuple) and len(before) == len(after):
        return [c for i, (b, a) in enumerate(zip(before, after)) for c in state_changes(b, a, f"{where}[{i}]")]
    return [(where, repr(before), repr(after))]


@dataclass(frozen=True)
class Trace:
    """A shortest path from an initial state to the state that decided a property (or deadlocked); for
    a liveness property, a lasso: ``steps[cycle_start:]`` repeat for ever (the state after the last is
    the state before ``steps[cycle_start]``, up to what the model calls naming, such as delivery tag
    numbers); ``cycle_start`` None for a path that simply ends."""

    steps: tuple[TraceStep, ...]
    final_state: str
    cycle_start: int | None = None

    @property
    def levels(self) -> int:
        """Edges of the explored graph along the trace: its steps, those fused by a reduction not counted."""
        return sum(1 for s in self.steps if not s.fused)

    def lines(self) -> list[str]:
        """Readable numbered steps, one string each; step 0 is the initial state. In a lasso, a line
        before the first repeated step and one after the last say so."""
        lines = ["0. initial state"] + [s.text() for s in self.steps]
        if self.cycle_start is None:
            return lines
        first, last = self.cycle_start + 1, len(self.steps)
        return (lines[:first] + [f"-- from here, steps {first} to {last} repeat for ever --"] + lines[first:]
                + [f"-- back to the state before step {first}: steps {first} to {last} again, for ever --"])


@dataclass(frozen=True)
class PropertyResult:
    """What exploration found out about one property.

    ``found`` is Property.expectation_met's argument: for always and hazard, a reachable state where the
    predicate is false; for sometimes, one where it is true. ``trace`` leads to that state.
    """

    name: str
    kind: str
    rules: tuple[str, ...]
    doc: str
    found: bool
    passed: bool
    decided: bool
    trace: Trace | None

    @property
    def verdict(self) -> str:
        """holds / VIOLATED, witnessed / NOT WITNESSED, found / NOT FOUND, or UNDECIDED (search cut short)."""
        if not self.decided:
            return "UNDECIDED"
        if self.kind in ("always", "liveness"):
            return "VIOLATED" if self.found else "holds"
        if self.kind == "sometimes":
            return "witnessed" if self.found else "NOT WITNESSED"
        return "found" if self.found else "NOT FOUND"


@dataclass(frozen=True)
class ExplorationResult:
    """Everything one exploration of one configuration established, the same for every engine."""

    config: str
    engine: str
    distinct_states: int
    depth: int
    transitions: int
    seconds: float
    complete: bool
    error: str | None
    properties: tuple[PropertyResult, ...]
    deadlocks: int
    deadlock_is_error: bool
    deadlock_trace: Trace | None
    coverage: dict[str, int]
    never_fired: tuple[str, ...]
    stopped_early: bool = False
    bounds: dict[str, Any] = field(default_factory=dict)
    exact: bool = False
    error_trace: Trace | None = None
    reductions: tuple[str, ...] = ()
    timings: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()                 # what a reader must know about a verdict (why it is undecided)

    @property
    def states_per_second(self) -> float:
        """Distinct states found per second of wall-clock time."""
        return self.distinct_states / self.seconds if self.seconds > 0 else float("inf")

    @property
    def collision_probability(self) -> float:
        """TLC's optimistic estimate that two distinct states shared a 64-bit fingerprint: n^2 / 2^65
        (0 when the visited set held the states themselves)."""
        if self.exact:
            return 0.0
        n = self.distinct_states
        return n * n / 2.0**65

    @property
    def deadlock_failed(self) -> bool:
        """Whether a deadlock was reached that the configuration counts as an error."""
        return self.deadlock_is_error and self.deadlocks > 0

    @property
    def ok(self) -> bool:
        """Every property met its expectation, no erroneous deadlock, and the search ran to the end."""
        return (
            self.error is None
            and self.complete
            and not self.deadlock_failed
            and all(p.passed for p in self.properties)
        )


def disagreements(a: ExplorationResult, b: ExplorationResult) -> list[str]:
    """Where two explorations of one configuration (say by two engines) differ, one phrase each.

    Engines must agree on counts, depth, deadlocks and every verdict, and their traces must be equally
    short in BFS levels (model steps, but for steps fused by a reduction: two traces of one level may
    fuse different numbers of takes); the traces themselves may differ when several shortest ones exist.
    """
    out = []
    for figure in ("distinct_states", "depth", "transitions", "deadlocks", "complete"):
        if getattr(a, figure) != getattr(b, figure):
            out.append(f"{figure}: {getattr(a, figure)} != {getattr(b, figure)}")
    if a.coverage != b.coverage:
        out.append("action coverage differs")
    mine = {p.name: p for p in a.properties}
    theirs = {p.name: p for p in b.properties}
    for name in sorted(mine.keys() | theirs.keys()):
        p, q = mine.get(name), theirs.get(name)
        if p is None or q is None:
            out.append(f"{name}: checked by one exploration only")
        elif p.verdict != q.verdict:
            out.append(f"{name}: {p.verdict} != {q.verdict}")
        elif p.trace is not None and q.trace is not None and p.trace.levels != q.trace.levels:
            out.append(f"{name}: trace of {p.trace.levels} levels != {q.trace.levels}")
    return out
