"""The result of an exploration, assembled the same way by every engine: what an engine hands over
(``SearchOutcome``: counts, the deciding states' fingerprints, a way to look up parents) becomes an
``ExplorationResult`` with readable shortest traces rebuilt by replaying the model.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from .expansion import ON_EXPANDED_STATE, Expander
from .liveness import UNFAIR, Lasso
from .results import ExplorationResult, PropertyResult, Trace, TraceStep, state_changes

# Looks up the parent fingerprint of each given fingerprint (an initial state is its own parent).
ParentLookup = Callable[[set], Mapping[Any, Any]]


@dataclass
class SearchOutcome:
    """What a search established, before traces are rebuilt: the same fields for every engine."""

    distinct_states: int = 0
    depth: int = 0
    transitions: int = 0
    deadlocks: int = 0
    first_deadlock: Any = None
    decided_at: dict[int, Any] = field(default_factory=dict)      # property index -> deciding fingerprint
    coverage: dict[str, int] = field(default_factory=dict)        # action class name -> firings
    error: str | None = None
    error_fp: Any = None
    stopped: bool = False
    timings: dict[str, float] = field(default_factory=dict)       # where the time went (engine-specific)
    lassos: dict[int, Lasso] = field(default_factory=dict)        # liveness property index -> its counterexample
    liveness_decided: bool = False                                # the graph was searched for fair cycles
    cyclic: set[int] = field(default_factory=set)                 # liveness properties with a cycle of stays states


class TraceBuilder:
    """Rebuilds shortest traces: walk parent fingerprints back to an initial state, then replay forward,
    following at each state the first edge (in the model's order) whose target has the next fingerprint."""

    def __init__(self, expander: Expander, parents: ParentLookup) -> None:
        self.expander = expander
        self.parents = parents

    def chains(self, targets: Iterable[Any]) -> dict[Any, list[Any]]:
        """The fingerprint chain from an initial state to each target, all walked back together (one
        parent lookup per level, which is one query for the Spark engine)."""
        chains = {t: [t] for t in targets}
        open_ = {t for t in chains}
        while open_:
            heads = {chains[t][-1] for t in open_}
            parent = self.parents(heads)
            for t in list(open_):
                head = chains[t][-1]
                up = parent[head]
                if up == head:
                    open_.discard(t)
                else:
                    chains[t].append(up)
        return {t: list(reversed(c)) for t, c in chains.items()}

    def replay(self, chain: Sequence[Any], cycle: Sequence[Any] = (), classes: Sequence[int] = ()) -> Trace:
        """The trace along ``chain`` (fingerprints from an initial state to the target), then, for a lasso,
        along ``cycle`` (fingerprints of the repeated steps' targets), each step of it of the fair class
        ``classes`` gives (UNFAIR: any), its first step numbered ``cycle_start``."""
        fingerprint = self.expander.fingerprint
        state = next((s for s in self.expander.initial_states() if fingerprint(s) == chain[0]), None)
        if state is None:
            raise RuntimeError("trace replay: no initial state has the recorded fingerprint")
        class_of = self.expander.fairness.class_of if cycle else None
        steps: list[TraceStep] = [
            TraceStep.of(n, action, frames, fused=True)
            for n, (action, frames) in enumerate(self.expander.initial_steps(state), start=1)]
        wanted = [(t, UNFAIR) for t in chain[1:]] + list(zip(cycle, classes))
        stem = len(chain) - 1
        cycle_start = None
        for n, (target, fair_class) in enumerate(wanted):
            if n == stem:
                cycle_start = len(steps)
            for edge in self.expander.edges(state):
                if fingerprint(edge.target) == target and (fair_class == UNFAIR or class_of(edge.steps[0][0]) == fair_class):
                    changes = tuple(state_changes(state, edge.target))
                    for i, (action, frames) in enumerate(edge.steps):
                        steps.append(TraceStep.of(len(steps) + 1, action, frames, fused=i > 0,
                                                  changes=changes if i == 0 else ()))
                    state = edge.target
                    break
            else:
                raise RuntimeError(f"trace replay: step {len(steps) + 1} reaches no recorded state")
        return Trace(steps=tuple(steps), final_state=repr(state), cycle_start=cycle_start if cycle else None)

    def lassos(self, found: Mapping[int, Lasso]) -> dict[int, Trace]:
        """The trace of each lasso: a shortest path to its cycle's first state, then the cycle."""
        chains = self.chains({lasso.stem_target for lasso in found.values()})
        return {i: self.replay(chains[lasso.stem_target], lasso.cycle, lasso.classes) for i, lasso in found.items()}

    def traces_to(self, targets: Iterable[Any]) -> dict[Any, Trace]:
        """A trace to each target fingerprint."""
        return {t: self.replay(c) for t, c in self.chains(set(targets)).items()}


def coverage_of(counts: Mapping[str, int], action_types: Sequence[type]) -> dict[str, int]:
    """Firings per action class name, including every known class that never fired (count 0)."""
    coverage: dict[str, int] = {t.__name__: 0 for t in action_types}
    for name, n in counts.items():
        coverage[name] = coverage.get(name, 0) + n
    return dict(sorted(coverage.items()))


def bounds_of(config: Any) -> dict[str, Any]:
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


def assemble(
    engine: str,
    expander: Expander,
    outcome: SearchOutcome,
    parents: ParentLookup,
    *,
    seconds: float,
    action_types: Sequence[type],
    exact: bool = False,
    reductions: Sequence[str] = (),
) -> ExplorationResult:
    """The ``ExplorationResult`` of a search: verdicts, shortest traces, coverage and figures."""
    config = expander.config
    complete = outcome.error is None and not outcome.stopped
    wanted = set(outcome.decided_at.values())
    if outcome.first_deadlock is not None:
        wanted.add(outcome.first_deadlock)
    if outcome.error_fp is not None:
        wanted.add(outcome.error_fp)
    traces = TraceBuilder(expander, parents).traces_to(wanted)
    results = []
    for i, p in enumerate(expander.properties):
        fp = outcome.decided_at.get(i)
        found = fp is not None
        decided = found or complete
        results.append(PropertyResult(
            name=p.name, kind=p.kind, rules=tuple(p.rules), doc=p.doc, found=found,
            passed=decided and p.expectation_met(found), decided=decided,
            trace=traces[fp] if found else None,
        ))
    lasso_traces = TraceBuilder(expander, parents).lassos(outcome.lassos) if outcome.lassos else {}
    notes = []
    for i, p in enumerate(expander.liveness):
        found = i in outcome.lassos
        decided = found or (complete and outcome.liveness_decided)
        if decided and not found and i in outcome.cyclic and not expander.keeps_fair_cycles:
            decided = False         # the reduced graph has cycles, none fair: the full one may have a fair one
            notes.append(f"{p.name} undecided: the graph reduced by {'+'.join(reductions)} has cycles where it "
                         "could fail, none of them fair, and this reduction may lose fair cycles "
                         "(spark_check.reductions); explore without it (--reduce) to decide it")
        results.append(PropertyResult(
            name=p.name, kind="liveness", rules=tuple(p.rules), doc=p.doc, found=found,
            passed=decided and not found, decided=decided, trace=lasso_traces.get(i),
        ))
    error = outcome.error
    error_trace = traces.get(outcome.error_fp) if outcome.error_fp is not None else None
    if error is not None and error.endswith(ON_EXPANDED_STATE):
        last = error_trace.steps[-1] if error_trace is not None and error_trace.steps else None
        where = f" on the state after {last.action_type} ({last.action})" if last else " on an initial state"
        error = error[: -len(ON_EXPANDED_STATE)] + where
    coverage = coverage_of(outcome.coverage, action_types)
    return ExplorationResult(
        config=config.name,
        engine=engine,
        distinct_states=outcome.distinct_states,
        depth=outcome.depth,
        transitions=outcome.transitions,
        seconds=seconds,
        complete=complete,
        error=error,
        properties=tuple(results),
        deadlocks=outcome.deadlocks,
        deadlock_is_error=bool(config.deadlock_is_error),
        deadlock_trace=traces.get(outcome.first_deadlock) if outcome.first_deadlock is not None else None,
        coverage=coverage,
        never_fired=tuple(sorted(n for n, c in coverage.items() if c == 0)),
        stopped_early=outcome.stopped,
        bounds=bounds_of(config),
        exact=exact,
        error_trace=error_trace,
        reductions=tuple(reductions),
        timings=dict(outcome.timings),
        notes=tuple(notes),
    )
