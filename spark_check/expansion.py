"""What exploration does to one state, the same code in every engine.

An engine only moves states around (a Python list for ``LocalEngine``, Spark partitions for
``SparkEngine``); what happens to each state is ``Expander.expand``: the properties the state decides,
the actions enabled in it, its successors, and whether it is a deadlock. It depends on the state alone
(and on which properties are still undecided, which the engine tells it between levels), so an executor
computes exactly what the driver would.
"""
from __future__ import annotations

import gc
from itertools import repeat
from operator import call
from typing import Any, Callable, NamedTuple, Sequence

from rabbitproof.spec.properties_api import Property

from .liveness import MAX_FAIR_CLASSES, atoms_of
from .recent_fingerprints import RecentFingerprints
from .reductions import build_reduction, build_subsumption, build_symmetry
from .subsumption import keyed_fingerprint


class Expansion(NamedTuple):
    """One state expanded: undecided properties it decides (indices), enabled actions, successors (one per
    edge, in the model's order), and whether nothing is enabled where something should be."""

    decided: tuple[int, ...]
    actions: tuple[Any, ...]
    successors: list[Any]
    deadlocked: bool


class Edge(NamedTuple):
    """One edge of the explored graph, for trace replay: the model steps it takes (action, frames) and
    where it leads. An edge is one step of the model, or, under a reduction, a step and the takes fused
    after it."""

    steps: tuple[tuple[Any, tuple[Any, ...]], ...]
    target: Any


def the_state(state: Any) -> Any:
    """The exact "fingerprint": the state itself (no collisions, much more memory)."""
    return state


class Expander:
    """Expands states of one model and configuration, checking the still undecided ``properties``.

    ``fingerprint`` names a state in the visited set: ``hash`` (64 bits, the same in every process since
    states hold no strings), or ``the_state`` for an exact visited set. ``reductions`` names reductions
    (spark_check.reductions): with ``por``, each successor is replaced by its normal form under fused
    takes, and an edge carries every model step that led there; with ``symmetry``, the fingerprint names
    the state's orbit under the configuration's renamings (spec.symmetry), so one real state of
    each orbit is kept.

    A model may name what its states hold that nothing depends on (``canonical(state)``: `rabbitproof
    check`'s machine renumbers delivery tags): the fingerprint is then that of the canonical form, so
    states equal but for such names are one state of the search, and a loop of the system closes into
    a cycle of the graph. ``liveness`` lists the liveness properties (spark_check.liveness) whose
    facts ``facts`` computes; their fairness comes from the model's ``fairness(config)`` hook.
    """

    def __init__(
        self,
        model: Any,
        config: Any,
        properties: Sequence[Property],
        *,
        exact: bool = False,
        reductions: Sequence[str] = (),
        liveness: Sequence[Any] = (),
    ) -> None:
        self.model = model
        self.reduction = build_reduction(reductions, model, config)
        self._settle = self.reduction.settle if self.reduction is not None else None
        self._initial_steps: dict = {}
        self.config = config
        self.properties = tuple(properties)
        self._enabled = model.enabled
        self._step = model.step
        self._terminal_ok = model.terminal_ok
        self.symmetry = build_symmetry(reductions, model, config)
        self.fingerprint: Callable[[Any], Any] = the_state if exact else hash
        if self.symmetry is not None and self.symmetry.renamings:
            self.fingerprint = self.symmetry.fingerprint_of(exact)
        canonical = getattr(model, "canonical", None)
        if callable(canonical):
            named = self.fingerprint
            self.fingerprint = lambda state: named(canonical(state))
        # With ``budgets``, ``keyed(state)`` is (fingerprint, twin key, spent): spark_check.subsumption.
        self.subsumption = build_subsumption(reductions, model, config)
        self.keyed: Callable[[Any], tuple[Any, Any, tuple]] | None = None
        if self.subsumption is not None:
            keyed = RecentFingerprints(keyed_fingerprint(self.fingerprint, self.subsumption.split, exact))
            self.keyed = keyed
            # A state's counters: the model's ``spent(state)`` where it offers one (they are ``split``'s, read
            # without hashing the state), else those ``keyed`` gives.
            self.spent_of: Callable[[Any], tuple] = getattr(self.subsumption, "spent", None) or \
                (lambda state: keyed(state)[2])
            self.fingerprint = lambda state: keyed(state)[0]
        elif self.fingerprint is not hash and self.fingerprint is not the_state:
            self.fingerprint = RecentFingerprints(self.fingerprint)    # a state met again is not canonicalised again
        self.liveness = tuple(liveness)
        self.fairness = fairness_of(model, config) if self.liveness else None
        self.undecided: list[int] = list(range(len(self.properties)))
        self._refresh()

    @property
    def keeps_fair_cycles(self) -> bool:
        """Whether every reduction in use keeps fair cycles (spark_check.reductions): then the reduced graph
        has a fair accepting cycle exactly when the full one has; else only a fair one it finds is sure."""
        return all(getattr(r, "keeps_fair_cycles", False) for r in (self.reduction, self.symmetry, self.subsumption)
                   if r is not None)

    def _refresh(self) -> None:
        """Rebuild the predicate lists of the per-state check from ``undecided``."""
        props = self.properties
        self._on_false = [(i, props[i].holds) for i in self.undecided if props[i].kind != "sometimes"]
        self._on_true = [(i, props[i].holds) for i in self.undecided if props[i].kind == "sometimes"]
        self._false_preds = [f for _, f in self._on_false]
        self._true_preds = [f for _, f in self._on_true]

    def set_undecided(self, undecided: Sequence[int]) -> None:
        """Check exactly these properties from now on (an executor learns it from the driver each level)."""
        if list(undecided) != self.undecided:
            self.undecided = list(undecided)
            self._refresh()

    def retire(self, decided: Sequence[int]) -> None:
        """Stop checking properties already decided."""
        gone = set(decided)
        if gone & set(self.undecided):
            self.undecided = [i for i in self.undecided if i not in gone]
            self._refresh()

    def decides(self, state: Any) -> tuple[int, ...]:
        """The undecided properties ``state`` decides: always and hazard by a false predicate, sometimes by
        a true one. The common case (none) costs one call per predicate."""
        # all/any over map: the loop runs in C, each stops at the first predicate that decides.
        if all(map(call, self._false_preds, repeat(state))) and not any(map(call, self._true_preds, repeat(state))):
            return ()
        return tuple(sorted([i for i, f in self._on_false if not f(state)] + [i for i, f in self._on_true if f(state)]))

    def successors(self, state: Any, actions: tuple[Any, ...]) -> list[Any]:
        """The successor along each edge out of ``state``."""
        step = self._step
        settle = self._settle
        if settle is None:
            return [step(state, a)[0] for a in actions]
        return [settle(step(state, a)[0])[0] for a in actions]

    def expand(self, state: Any) -> Expansion:
        """Everything exploration learns from ``state``."""
        decided = self.decides(state)
        actions = self._enabled(state, self.config)
        if not actions:
            return Expansion(decided, actions, [], not self._terminal_ok(state, self.config))
        return Expansion(decided, actions, self.successors(state, actions), False)

    def facts(self, state: Any, actions: tuple[Any, ...]) -> tuple[int, int, list[int]]:
        """What liveness needs of an expanded state: the mask of fair classes enabled in it, its atoms
        (spark_check.liveness.atoms_of) and the fair class of each edge out of it (UNFAIR: none)."""
        class_of = self.fairness.class_of
        classes = [class_of(a) for a in actions]
        enabled = 0
        for c in classes:
            if c >= 0:
                enabled |= 1 << c
        return enabled, atoms_of(self.liveness, state), classes

    def edges(self, state: Any) -> list[Edge]:
        """The edges out of ``state`` with the steps each takes, in the order of ``expand``'s successors."""
        actions = self._enabled(state, self.config)
        out = []
        for a in actions:
            succ, frames = self._step(state, a)
            fused: tuple = ()
            if self._settle is not None:
                succ, fused = self._settle(succ)
            out.append(Edge(((a, frames),) + fused, succ))
        return out

    def initial_states(self) -> tuple[Any, ...]:
        """The states exploration starts from: the model's, each in its normal form under a reduction that
        fuses steps (the spec's start has nothing to fuse; `check`'s clients set up at once). The steps
        fused into a start are kept for traces (``initial_steps``)."""
        states = tuple(self.model.initial_states(self.config))
        if self._settle is None:
            return states
        settled = []
        for s in states:
            s, steps = self._settle(s)
            if steps:
                self._initial_steps[s] = steps
            settled.append(s)
        return tuple(settled)

    def initial_steps(self, state: Any) -> tuple:
        """The (action, frames) steps fused into the start ``state`` (``initial_states``): a trace from it
        begins with them."""
        return self._initial_steps.get(state, ())


def fairness_of(model: Any, config: Any) -> Any:
    """The model's fairness (its ``fairness(config)`` hook: ``class_of(action)``, a bit index or UNFAIR,
    and ``classes``, their names); ValueError (one line) when the model has none or too many classes."""
    hook = getattr(model, "fairness", None)
    if not callable(hook):
        raise ValueError("liveness properties need the model's fairness (a fairness(config) hook); this model has none")
    fairness = hook(config)
    if len(fairness.classes) > MAX_FAIR_CLASSES:
        raise ValueError(f"{len(fairness.classes)} fair classes of actions: at most {MAX_FAIR_CLASSES} fit the "
                         "graph's masks")
    return fairness



class PausedCollector:
    """The cyclic garbage collector off while states are expanded (``with PausedCollector() as gc_:``),
    and each level's new objects frozen at its end (``gc_.level_done()``), so that no collector pass
    ever scans them.

    Why: expansion allocates millions of tuples that reference counting frees or the search keeps, and
    no cycles (states are trees of tuples); the collector's passes over them cost 20 to 40% of a search
    (docs/explanation/design.md, "Garbage collection", measured with and without on ``medium``). A
    young-generation collection per level, which this did before, found no garbage in a whole search of
    ``medium`` (0 objects in 26 collections) and still took 5% of it, so each level is frozen instead
    (``gc.freeze``: no pass over anything). Frozen objects are freed by reference counting as any other;
    only a cycle a model made would wait: ``__exit__`` unfreezes everything, and the collector, on
    again, frees such cycles after the search. What exists before (model, configuration) is frozen too."""

    def __enter__(self) -> "PausedCollector":
        self._was_enabled = gc.isenabled()
        gc.freeze()
        gc.disable()
        return self

    def level_done(self) -> None:
        gc.freeze()

    def __exit__(self, *exc: Any) -> None:
        gc.unfreeze()
        if self._was_enabled:
            gc.enable()


# The end of a diagnosis that names the expanded state; the engine replaces it by the step that led there.
ON_EXPANDED_STATE = " on the state being expanded"


def diagnose(expander: Expander, state: Any, error: Exception) -> str:
    """Which call raised ``error`` while ``state`` was being expanded, as one line: the model is
    deterministic, so calling again what the engine called finds the culprit."""
    def describe(e: Exception) -> str:
        return f"{type(e).__name__}: {e}".splitlines()[0]

    if state is None:
        return f"error during exploration: {describe(error)}"
    model, config, properties = expander.model, expander.config, expander.properties
    for p in properties:
        try:
            p.holds(state)
        except Exception as e:  # noqa: BLE001
            return f"property {p.name} raised {describe(e)}{ON_EXPANDED_STATE}"
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
