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
the same model and configuration; ``LocalEngine`` is the single-process oracle, ``SparkEngine``
(spark_check.spark_engine, registered as ``spark``) the same search on Spark. Both expand states with
``spark_check.expansion.Expander`` and assemble the result with ``spark_check.assembly.assemble``.
"""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections import Counter
from typing import Any, Callable, Protocol, Sequence

from rabbitproof.spec.properties_api import Liveness, Property

from .assembly import SearchOutcome, assemble
from .expansion import Expander, PausedCollector, diagnose
from .liveness import LocalGraph
from .reductions import reduction_named
from .subsumption import Twins
from .results import ExplorationResult, PropertyResult, Trace, TraceStep, disagreements

__all__ = [
    "Engine", "ExplorationResult", "LocalEngine", "Model", "PropertyResult", "Trace", "TraceStep", "disagreements",
]

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


class Engine(ABC):
    """An exploration strategy. Every engine must report the same counts, depth and verdicts."""

    name: str = "abstract"
    reductions: tuple[str, ...] = ()    # state-space reductions by name (spark_check.reductions)

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
        time_limit: float | None = None,
        liveness: Sequence[Liveness] = (),
    ) -> ExplorationResult:
        """Explore every state of ``config`` reachable in ``model`` and decide ``properties``.

        ``max_states`` overrides ``config.max_states``; reaching it is an error in the result, and so is
        running past ``time_limit`` seconds or an interruption (Ctrl-C): the result then holds what the
        search had decided. With
        ``stop_on_violation`` the search stops at the first violated always or erroneous deadlock.
        ``action_types`` lists every action class, so that coverage can name those that never fired.
        ``liveness`` lists liveness properties (spark_check.liveness): the engine then keeps the graph
        (every edge) and looks for a fair cycle of each once the search is complete.
        """

    def prepare(self, model: Model, config: Any, properties: Sequence[Property], liveness: Sequence[Liveness] = ()) -> None:
        """Check, before any work, what only this engine can refuse; ValueError (one line). Nothing by default."""

    def close(self) -> None:
        """Release what the engine holds between explorations (a Spark session); nothing by default."""


def too_many_states(cap: int) -> str:
    """The error of a search that reached its state cap."""
    return f"more than {cap:,} distinct states (max_states); raise it with --max-states"


def out_of_time(limit: float, depth: int, states: int) -> str:
    """The error of a search stopped by its time limit."""
    return f"time limit of {limit:g} s reached at depth {depth} after {states:,} distinct states"


def interrupted(depth: int, states: int) -> str:
    """The error of a search stopped by Ctrl-C."""
    return f"interrupted at depth {depth} after {states:,} distinct states"


def cut_short(error: str | None) -> bool:
    """Whether a search stopped by its state cap or its time limit (not by Ctrl-C, which wants out at
    once): what it expanded is still searched for fair cycles and ends, which are counterexamples
    whether the search finished or not (spark_check.liveness)."""
    return bool(error) and error.startswith(("more than ", "time limit of "))


def stopped_short(error: str | None) -> bool:
    """Whether an exploration's error only says it stopped before the end (a state cap, a time limit, an
    interruption), so that what it decided stands; not a failure of the model."""
    return bool(error) and error.startswith(("more than ", "time limit of ", "interrupted at depth "))


class LocalEngine(Engine):
    """Level-synchronous BFS in this process; the reference the other engines are held to.

    With ``exact=True`` the visited set holds the states themselves instead of their 64-bit hashes:
    slower and far larger, but free of fingerprint collisions, to cross-check the counts. ``reductions``
    names state-space reductions (spark_check.reductions: ``por``).
    """

    name = "local"

    def __init__(self, exact: bool = False, reductions: Sequence[str] = ()) -> None:
        self.exact = exact
        self.reductions = reduction_named(reductions)

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
        time_limit: float | None = None,
        liveness: Sequence[Liveness] = (),
    ) -> ExplorationResult:
        started = time.perf_counter()
        expander = Expander(model, config, properties, exact=self.exact, reductions=self.reductions,
                            liveness=liveness)
        graph = LocalGraph() if liveness else None
        outcome, parent = self._search(expander, config, properties, max_states, stop_on_violation, progress,
                                       started, time_limit, graph)
        if graph is not None and not outcome.stopped and (outcome.error is None or cut_short(outcome.error)):
            searched = time.perf_counter()
            outcome.lassos = graph.lassos(liveness, outcome.cyclic)
            outcome.liveness_decided = outcome.error is None      # cut short: only what it found counts
            outcome.timings["liveness: fair cycles (wall)"] = time.perf_counter() - searched
            outcome.timings["liveness: graph kept (MB)"] = graph.nbytes() / 1e6
        seconds = time.perf_counter() - started
        return assemble(self.name, expander, outcome, lambda fps: {f: parent[f] for f in fps}, seconds=seconds,
                        action_types=action_types, exact=self.exact, reductions=self.reductions)

    def _search(self, expander: Expander, config: Any, properties: Sequence[Property], max_states: int | None,
                stop_on_violation: bool, progress: ProgressCallback | None,
                started: float, time_limit: float | None = None,
                graph: LocalGraph | None = None) -> tuple[SearchOutcome, dict[Any, Any]]:
        """The BFS itself: what it established, and the parent map for trace replay (and, given a
        ``graph``, every state's liveness facts and every edge in it)."""
        cap = config.max_states if max_states is None else max_states
        deadlock_is_error = bool(config.deadlock_is_error)
        fingerprint = expander.fingerprint
        keyed = expander.keyed
        twins = Twins(self.exact) if keyed is not None else None     # ``budgets`` (spark_check.subsumption)
        level_twins: list[tuple[Any, Any, tuple]] = []      # this level's new states: (fingerprint, key, spent)
        pending: list[tuple] = []                           # with twins, graph facts wait for the level's end

        def dropped() -> int:
            """The states left out as covered by a twin: in the parent map, not among the states found."""
            return len(twins.redirect) if twins is not None else 0
        expand = expander.expand
        is_always = [p.kind == "always" for p in properties]
        watched = progress is not None or time_limit is not None     # anything to do every PROGRESS_EVERY states
        out = SearchOutcome()
        type_counts: Counter[type] = Counter()
        count_types = _count_elements
        # Fingerprint -> parent fingerprint; an initial state is its own parent. The keys are the visited
        # set: one hash table instead of two, so each new state costs one lookup and one insertion.
        parent: dict[Any, Any] = {}
        frontier: list[Any] = []
        frontier_fps: list[Any] = []
        for state in expander.initial_states():
            fp = fingerprint(state)
            if fp not in parent:
                parent[fp] = fp
                frontier.append(state)
                frontier_fps.append(fp)
                if twins is not None:
                    level_twins.append(keyed(state))
                elif graph is not None:
                    graph.found(fp, 1)
        if twins is not None:
            frontier, frontier_fps = self._settle_twins(twins, level_twins, frontier, frontier_fps, graph, pending, 1,
                                                        parent)
        if len(parent) > cap:
            out.error = too_many_states(cap)
        depth = 1 if frontier else 0
        state = fp = None
        transitions = 0
        with PausedCollector() as collector:      # no collector passes over the states (measured)
            try:
                while frontier and out.error is None and not out.stopped:
                    next_states: list[Any] = []
                    next_fps: list[Any] = []
                    push_state = next_states.append
                    push_fp = next_fps.append
                    push_twin = level_twins.append
                    limit = cap - len(parent)
                    for i, (state, fp) in enumerate(zip(frontier, frontier_fps)):
                        decided, actions, successors, deadlocked = expand(state)
                        if decided:
                            for d in decided:
                                out.decided_at[d] = fp
                            expander.retire(decided)
                            if stop_on_violation and any(is_always[d] for d in decided):
                                out.stopped = True
                                break
                        if graph is not None:
                            self._record(graph, expander, state, fp, actions, successors, parent, push_state,
                                         push_fp, depth + 1, twins, push_twin, pending)
                        if not actions:
                            if deadlocked:
                                out.deadlocks += 1
                                if out.first_deadlock is None:
                                    out.first_deadlock = fp
                                if deadlock_is_error and stop_on_violation:
                                    out.stopped = True
                                    break
                            continue
                        count_types(type_counts, map(type, actions))
                        transitions += len(actions)
                        if twins is None:
                            for succ in successors if graph is None else ():
                                h = fingerprint(succ)
                                if h in parent:
                                    continue
                                parent[h] = fp
                                push_state(succ)
                                push_fp(h)
                        else:
                            for succ in successors if graph is None else ():
                                twin = keyed(succ)
                                h = twin[0]
                                if h in parent:         # kept, or left out (twins.redirect): met before
                                    continue
                                parent[h] = fp
                                push_state(succ)
                                push_fp(h)
                                push_twin(twin)
                        if len(next_states) > limit:
                            out.error = too_many_states(cap)
                            break
                        if watched and not (i + 1) % PROGRESS_EVERY:
                            elapsed = time.perf_counter() - started
                            if time_limit is not None and elapsed > time_limit:
                                out.error = out_of_time(time_limit, depth, len(parent) - dropped())
                                break
                            if progress is not None:
                                progress(len(parent) - dropped(), depth, len(frontier) - i, elapsed)
                    if twins is not None:
                        next_states, next_fps = self._settle_twins(twins, level_twins, next_states, next_fps, graph,
                                                                   pending, depth + 1, parent)
                        if out.error is not None and out.error.startswith("time limit of "):    # the states kept
                            out.error = out_of_time(time_limit, depth, len(parent) - dropped())
                    if next_states and out.error is None and not out.stopped:
                        depth += 1
                    collector.level_done()
                    frontier = next_states
                    frontier_fps = next_fps
                    elapsed = time.perf_counter() - started
                    if progress is not None:
                        progress(len(parent) - dropped(), depth, len(frontier), elapsed)
                    if time_limit is not None and elapsed > time_limit and frontier and out.error is None:
                        out.error = out_of_time(time_limit, depth, len(parent) - dropped())
            except KeyboardInterrupt:
                out.error = interrupted(depth, len(parent) - dropped())
            except Exception as e:  # noqa: BLE001 - a bug in the model or a predicate, reported with its trace
                out.error = diagnose(expander, state, e)
                out.error_fp = fp
        out.distinct_states = len(parent) - dropped()
        out.depth = depth
        out.transitions = transitions
        out.coverage = {t.__name__: n for t, n in type_counts.items()}
        return out, parent

    @staticmethod
    def _record(graph: LocalGraph, expander: Expander, state: Any, fp: Any, actions: tuple, successors: list,
                parent: dict, push_state: Callable, push_fp: Callable, depth: int, twins: Twins | None = None,
                push_twin: Callable | None = None, pending: list | None = None) -> None:
        """Expand ``state``'s successors as the search does, keeping its facts and edges in ``graph``. With
        ``twins`` (the ``budgets`` reduction), an edge that spends a budget is left out of the graph, and
        the facts wait in ``pending`` for the level's end, where the states kept are known
        (spark_check.subsumption)."""
        enabled, atoms, classes = expander.facts(state, actions)
        if twins is not None:
            keyed = expander.keyed
            spent = expander.spent_of(state)
            targets, kept_classes = [], []
            for succ, cls in zip(successors, classes):
                twin = keyed(succ)
                h = twin[0]
                if twin[2] == spent:
                    targets.append(h)
                    kept_classes.append(cls)
                if h in parent:
                    continue
                parent[h] = fp
                push_state(succ)
                push_fp(h)
                push_twin(twin)
            pending.append((fp, enabled, atoms, kept_classes, targets))
            return
        fingerprint = expander.fingerprint
        targets = []
        for succ in successors:
            h = fingerprint(succ)
            targets.append(h)
            if h in parent:
                continue
            parent[h] = fp
            graph.found(h, depth)
            push_state(succ)
            push_fp(h)
        graph.expanded(fp, enabled, atoms, classes, targets)

    @staticmethod
    def _settle_twins(twins: Twins, level_twins: list, states: list, fps: list, graph: LocalGraph | None,
                      pending: list, depth: int, parent: dict) -> tuple[list, list]:
        """The ``budgets`` reduction at the end of a level (spark_check.subsumption): the level's new states
        a twin covers are left out (they stay in the parent map, so that they are not met as new again,
        and ``twins.redirect`` says where edges to them go); the graph learns the states kept, then the
        facts and edges of the states expanded at this level. Returns the states kept and their
        fingerprints, in the order found."""
        keep = twins.settle_level(level_twins, parent)      # every state found so far, this level's too
        level_twins.clear()
        if len(keep) < len(fps):
            chosen = [(s, h) for s, h in zip(states, fps) if h in keep]
            states, fps = [s for s, _ in chosen], [h for _, h in chosen]
        if graph is not None:
            for h in fps:
                graph.found(h, depth)
            target = twins.target
            for fp, enabled, atoms, classes, targets in pending:
                graph.expanded(fp, enabled, atoms, classes, [target(t) for t in targets])
            pending.clear()
        return states, fps


try:  # The C helper behind Counter.update, without update's Python-level dispatch.
    from _collections import _count_elements
except ImportError:  # pragma: no cover

    def _count_elements(mapping: Any, iterable: Any) -> None:
        """Count each element of ``iterable`` into ``mapping``."""
        for item in iterable:
            mapping[item] = mapping.get(item, 0) + 1
