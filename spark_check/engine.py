"""Exhaustive breadth-first exploration of a bounded configuration of a model.

A model is any object (in practice a module, ``spec.machine``) with four functions:

- ``initial_states(config) -> tuple[State, ...]``
- ``enabled(state, config) -> tuple[Action, ...]``, in a deterministic order
- ``step(state, action) -> tuple[State, tuple[Frame, ...]]``
- ``terminal_ok(state, config) -> bool``

States are canonical hashable values built of ints, bools, tuples and frozen dataclasses or NamedTuples
of those, so ``hash(state)`` is the same in every process and serves as the 64-bit fingerprint (as in
TLC): the engine keeps fingerprints, never states, for what it has seen. (CPython hashes -1 and -2
alike, so a state field that takes both values would collide; ``LocalEngine(exact=True)`` keeps the
states themselves and cross-checks the counts.) Every engine returns the same ``ExplorationResult`` for
the same model and configuration; ``LocalEngine`` is the single-process oracle.
"""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from spec.properties_api import Property

# A progress callback receives (distinct states, BFS level, states left to expand at that level, seconds).
ProgressCallback = Callable[[int, int, int, float], None]

# How many frontier states are expanded between two progress callbacks.
PROGRESS_EVERY = 4096


class Model(Protocol):
    """The four functions the engine calls: the spec's ``spec.machine`` or a test's toy model."""

    def initial_states(self, config: Any) -> tuple[Any, ...]: ...

    def enabled(self, state: Any, config: Any) -> tuple[Any, ...]: ...

    def step(self, state: Any, action: Any) -> tuple[Any, tuple[Any, ...]]: ...

    def terminal_ok(self, state: Any, config: Any) -> bool: ...


@dataclass(frozen=True)
class TraceStep:
    """One transition of a trace: who acted, what they did, and the frames that crossed the wire."""

    number: int
    actor: str
    action: str
    action_type: str
    frames: tuple[str, ...]

    def text(self) -> str:
        """The step in one line: ``2. [broker] delivers m0 | frames: broker -> consumer: basic.deliver m0``."""
        head = f"{self.number}. [{self.actor}] {self.action}"
        return f"{head} | frames: {'; '.join(self.frames)}" if self.frames else head


@dataclass(frozen=True)
class Trace:
    """A shortest path from an initial state to the state that decided a property (or deadlocked)."""

    steps: tuple[TraceStep, ...]
    final_state: str

    def lines(self) -> list[str]:
        """Readable numbered steps, one string each; step 0 is the initial state."""
        return ["0. initial state"] + [s.text() for s in self.steps]


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
        if self.kind == "always":
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


class Engine(ABC):
    """An exploration strategy. Every engine must report the same counts, depth and verdicts."""

    name: str = "abstract"

    @abstractmethod
    def explore(
        self,
        model: Model,
        config: Any,
        properties: Sequence[Property],
        *,
        max_states: int | None = None,
        stop_on_violation: bool = False,
        progress: ProgressCallback | None = None,
        action_types: Sequence[type] = (),
    ) -> ExplorationResult:
        """Explore every state of ``config`` reachable in ``model`` and decide ``properties``.

        ``max_states`` overrides ``config.max_states``; reaching it is an error in the result. With
        ``stop_on_violation`` the search stops at the first violated always or erroneous deadlock.
        ``action_types`` lists every action class, so that coverage can name those that never fired.
        """


def _diagnose(model: Model, config: Any, state: Any, properties: Sequence[Property], error: Exception) -> str:
    """Which call raised ``error`` while ``state`` was being expanded, as one line: the model is
    deterministic, so calling again what the engine called finds the culprit."""
    def describe(e: Exception) -> str:
        return f"{type(e).__name__}: {e}".splitlines()[0]

    if state is None:
        return f"error during exploration: {describe(error)}"
    try:
        actions = model.enabled(state, config)
    except Exception as e:  # noqa: BLE001
        return f"model error: enabled() raised {describe(e)}"
    for action in actions:
        try:
            succ = model.step(state, action)[0]
            hash(succ)
        except Exception as e:  # noqa: BLE001
            return f"model error: step() of {type(action).__name__} ({action}) raised {describe(e)}"
        for p in properties:
            try:
                p.holds(succ)
            except Exception as e:  # noqa: BLE001
                return f"property {p.name} raised {describe(e)} on the state after {type(action).__name__} ({action})"
    if not actions:
        try:
            model.terminal_ok(state, config)
        except Exception as e:  # noqa: BLE001
            return f"model error: terminal_ok() raised {describe(e)}"
    return f"error during exploration: {describe(error)}"


def _the_state(state: Any) -> Any:
    """The exact "fingerprint": the state itself (no collisions, much more memory)."""
    return state


class LocalEngine(Engine):
    """Level-synchronous BFS in this process; the reference the other engines are held to.

    With ``exact=True`` the visited set holds the states themselves instead of their 64-bit hashes:
    slower and far larger, but free of fingerprint collisions, to cross-check the counts.
    """

    name = "local"

    def __init__(self, exact: bool = False) -> None:
        self.exact = exact

    def explore(
        self,
        model: Model,
        config: Any,
        properties: Sequence[Property],
        *,
        max_states: int | None = None,
        stop_on_violation: bool = False,
        progress: ProgressCallback | None = None,
        action_types: Sequence[type] = (),
    ) -> ExplorationResult:
        started = time.perf_counter()
        cap = config.max_states if max_states is None else max_states
        deadlock_is_error = bool(config.deadlock_is_error)
        enabled = model.enabled
        step = model.step
        terminal_ok = model.terminal_ok
        fingerprint = _the_state if self.exact else hash

        # Fingerprint -> parent fingerprint; an initial state is its own parent. The keys are the visited
        # set: one hash table instead of two, so each new state costs one lookup and one insertion. The
        # action is not stored: replaying the parent's enabled actions in order finds it again.
        parent: dict[Any, Any] = {}
        # Decided property name -> fingerprint of the deciding state.
        decided_at: dict[str, Any] = {}
        # Undecided properties, split by what decides them: a false predicate (always, hazard) or a true
        # one (sometimes). Each list holds (name, predicate) and shrinks as properties are decided; the
        # *_preds lists hold the same predicates alone, for the per-state loop.
        on_false = [(p.name, p.holds) for p in properties if p.kind != "sometimes"]
        on_true = [(p.name, p.holds) for p in properties if p.kind == "sometimes"]
        false_preds = [f for _, f in on_false]
        true_preds = [f for _, f in on_true]
        always_names = {p.name for p in properties if p.kind == "always"}
        type_counts: Counter[type] = Counter()
        count_types = _count_elements
        deadlocks = 0
        first_deadlock: Any = None
        error: str | None = None
        error_fp: Any = None
        stopped = False
        transitions = 0

        def decide(state: Any, fp: Any) -> bool:
            """Record what ``state`` decides; True when the search should stop on a violation."""
            nonlocal on_false, on_true, false_preds, true_preds
            violated = False
            for n, f in on_false:
                if not f(state):
                    decided_at[n] = fp
                    violated = violated or n in always_names
            for n, f in on_true:
                if f(state):
                    decided_at[n] = fp
            on_false = [(n, f) for n, f in on_false if n not in decided_at]
            on_true = [(n, f) for n, f in on_true if n not in decided_at]
            false_preds = [f for _, f in on_false]
            true_preds = [f for _, f in on_true]
            return violated and stop_on_violation

        too_many = f"more than {cap:,} distinct states (max_states); raise it with --max-states"
        frontier: list[Any] = []
        frontier_fps: list[Any] = []
        for state in model.initial_states(config):
            fp = fingerprint(state)
            if fp in parent:
                continue
            parent[fp] = fp
            frontier.append(state)
            frontier_fps.append(fp)
            if decide(state, fp):
                stopped = True
        if len(parent) > cap:
            error = too_many

        depth = 1 if frontier else 0
        state = fp = None
        try:
            while frontier and error is None and not stopped:
                next_states: list[Any] = []
                next_fps: list[Any] = []
                push_state = next_states.append
                push_fp = next_fps.append
                limit = cap - len(parent)
                for i, (state, fp) in enumerate(zip(frontier, frontier_fps)):
                    actions = enabled(state, config)
                    if not actions:
                        if not terminal_ok(state, config):
                            deadlocks += 1
                            if first_deadlock is None:
                                first_deadlock = fp
                            if deadlock_is_error and stop_on_violation:
                                stopped = True
                                break
                        continue
                    count_types(type_counts, map(type, actions))
                    transitions += len(actions)
                    for action in actions:
                        succ = step(state, action)[0]
                        h = fingerprint(succ)
                        if h in parent:
                            continue
                        parent[h] = fp
                        push_state(succ)
                        push_fp(h)
                        # Inline checks (no call per state): fall through to decide() only when some
                        # undecided property is decided by this state.
                        for f in false_preds:
                            if not f(succ):
                                break
                        else:
                            for f in true_preds:
                                if f(succ):
                                    break
                            else:
                                continue
                        if decide(succ, h):
                            stopped = True
                            break
                    if stopped:
                        break
                    if len(next_states) > limit:
                        error = too_many
                        break
                    if progress is not None and not (i + 1) % PROGRESS_EVERY:
                        progress(len(parent), depth, len(frontier) - i, time.perf_counter() - started)
                if next_states and error is None:
                    depth += 1
                frontier = next_states
                frontier_fps = next_fps
                if progress is not None:
                    progress(len(parent), depth, len(frontier), time.perf_counter() - started)
        except KeyboardInterrupt:
            error = f"interrupted at depth {depth} after {len(parent):,} distinct states"
        except Exception as e:  # noqa: BLE001 - a bug in the model or a predicate, reported with its trace
            error = _diagnose(model, config, state, properties, e)
            error_fp = fp

        seconds = time.perf_counter() - started
        complete = error is None and not stopped
        traces = _TraceBuilder(model, config, parent, fingerprint)
        results = []
        for p in properties:
            fp = decided_at.get(p.name)
            found = fp is not None
            decided = found or complete
            results.append(
                PropertyResult(
                    name=p.name,
                    kind=p.kind,
                    rules=tuple(p.rules),
                    doc=p.doc,
                    found=found,
                    passed=decided and p.expectation_met(found),
                    decided=decided,
                    trace=traces.trace_to(fp) if found else None,
                )
            )
        coverage = _coverage(type_counts, action_types)
        return ExplorationResult(
            config=config.name,
            engine=self.name,
            distinct_states=len(parent),
            depth=depth,
            transitions=transitions,
            seconds=seconds,
            complete=complete,
            error=error,
            properties=tuple(results),
            deadlocks=deadlocks,
            deadlock_is_error=deadlock_is_error,
            deadlock_trace=traces.trace_to(first_deadlock) if first_deadlock is not None else None,
            coverage=coverage,
            never_fired=tuple(sorted(n for n, c in coverage.items() if c == 0)),
            stopped_early=stopped,
            bounds=_bounds_of(config),
            exact=self.exact,
            error_trace=traces.trace_to(error_fp) if error_fp is not None else None,
        )


try:  # The C helper behind Counter.update, without update's Python-level dispatch.
    from _collections import _count_elements
except ImportError:  # pragma: no cover

    def _count_elements(mapping: Any, iterable: Any) -> None:
        """Count each element of ``iterable`` into ``mapping``."""
        for item in iterable:
            mapping[item] = mapping.get(item, 0) + 1


def _coverage(type_counts: Counter[type], action_types: Sequence[type]) -> dict[str, int]:
    """Firings per action class name, including every known class that never fired (count 0)."""
    coverage: dict[str, int] = {t.__name__: 0 for t in action_types}
    for t, n in type_counts.items():
        coverage[t.__name__] = coverage.get(t.__name__, 0) + n
    return dict(sorted(coverage.items()))


def _bounds_of(config: Any) -> dict[str, Any]:
    """The configuration's plain fields (ints, bools, strings), for the JSON report."""
    fields = getattr(config, "__dataclass_fields__", None)
    names = list(fields) if fields else [n for n in vars(config) if not n.startswith("_")]
    out: dict[str, Any] = {}
    for n in names:
        v = getattr(config, n, None)
        if isinstance(v, (int, bool, str, float)):
            out[n] = v
        elif isinstance(v, tuple) and all(isinstance(x, (int, bool, str)) for x in v):
            out[n] = list(v)
    return out


class _TraceBuilder:
    """Rebuilds a shortest trace from the parent map by replaying the model from an initial state."""

    def __init__(self, model: Model, config: Any, parent: dict[Any, Any], fingerprint: Callable[[Any], Any]) -> None:
        self.model = model
        self.config = config
        self.parent = parent
        self.fingerprint = fingerprint

    def trace_to(self, fp: Any) -> Trace:
        """The trace BFS found first to the state with fingerprint ``fp``.

        Walk parent fingerprints back to an initial state, then replay forward: at each state the first
        enabled action (in the model's order) whose successor has the next fingerprint is the one BFS
        took, since BFS expands actions in that order and keeps the first parent it sees.
        """
        chain = [fp]
        while self.parent[chain[-1]] != chain[-1]:
            chain.append(self.parent[chain[-1]])
        chain.reverse()
        model, config, fingerprint = self.model, self.config, self.fingerprint
        state = next((s for s in model.initial_states(config) if fingerprint(s) == chain[0]), None)
        if state is None:
            raise RuntimeError("trace replay: no initial state has the recorded fingerprint")
        steps = []
        for number, target in enumerate(chain[1:], start=1):
            for action in model.enabled(state, config):
                succ, frames = model.step(state, action)
                if fingerprint(succ) == target:
                    steps.append(
                        TraceStep(
                            number=number,
                            actor=str(getattr(action, "actor", "?")),
                            action=str(action),
                            action_type=type(action).__name__,
                            frames=tuple(str(f) for f in frames),
                        )
                    )
                    state = succ
                    break
            else:
                raise RuntimeError(f"trace replay: step {number} reaches no recorded state")
        return Trace(steps=tuple(steps), final_state=repr(state))


def disagreements(a: ExplorationResult, b: ExplorationResult) -> list[str]:
    """Where two explorations of one configuration (say by two engines) differ, one phrase each.

    Engines must agree on counts, depth, deadlocks and every verdict, and their traces must be equally
    short; the traces themselves may differ when several shortest ones exist.
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
        elif p.trace is not None and q.trace is not None and len(p.trace.steps) != len(q.trace.steps):
            out.append(f"{name}: trace of {len(p.trace.steps)} steps != {len(q.trace.steps)}")
    return out


ENGINES: dict[str, type[Engine]] = {"local": LocalEngine}


def engine_named(name: str, **options: Any) -> Engine:
    """The engine registered under ``name``, built with ``options``; ValueError (one line) otherwise."""
    if name not in ENGINES:
        raise ValueError(f"unknown engine {name!r}; available: {', '.join(sorted(ENGINES))}")
    return ENGINES[name](**options)
