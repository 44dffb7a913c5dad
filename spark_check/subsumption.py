"""The ``budgets`` reduction in the engines: a state is not explored when a state that is the same but for
having spent less of its budgets is.

The model offers it through its ``subsumption(config)`` hook (spark_check.reductions), an object whose
``split(state)`` returns ``(rest, spent)``: the state with its budget counters cleared, and the counters,
a tuple of ints. Two states with the same ``rest`` are *twins*; a twin whose ``spent`` is below another's
in every component (and not equal) *covers* it. The model vouches, with its argument
(`rabbitproof check`'s: rabbitproof.check.spent_budgets), that a covering twin can do everything the
covered one can and reach the same verdicts, that only steps no fairness asks for spend a budget, and
that nothing else reads the counters.

What the engines do with it, the same way in each, so that they keep the same states:

- **Which states are kept.** A level's new states are settled together once the level is expanded: a
  new state is left out when a twin found at this level or an earlier one covers it. Of the states of a
  level and the ones kept before, exactly the minimal twins are kept, whatever the order in which the
  level was expanded (``settle_level``). A state left out is never expanded; a later successor equal
  to it is left out again.
- **Edges.** An edge to a state left out goes to the covering twin kept with the smallest ``spent``
  (``redirect``). Such an edge is not a step of the model (the twin is not the step's target), so the
  graph kept for liveness leaves out every edge that spends a budget (``spent`` differs at its two
  ends): on a cycle of the remaining edges ``spent`` never grows, and a redirect would make it fall, so
  every cycle the liveness search can see is made of real steps, and every cycle of the model is
  there, as a budget only grows and no cycle of the model spends one. Traces follow the parents of kept
  states, each a real step.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence


def below(low: Sequence[int], high: Sequence[int]) -> bool:
    """Whether ``low`` covers ``high``: no component larger, and not the same."""
    return low != high and all(a <= b for a, b in zip(low, high))


SPENT_BITS = 5          # the Spark engine packs ``spent`` into a 64-bit int: 5 bits a counter, 12 counters


def pack(spent: Sequence[int]) -> int:
    """``spent`` as one int (the Spark engine's column); ValueError when it does not fit."""
    if len(spent) * SPENT_BITS > 60 or any(not 0 <= v < 1 << SPENT_BITS for v in spent):
        raise ValueError(f"budgets reduction: spent {tuple(spent)} does not fit in 64 bits "
                         f"(at most {60 // SPENT_BITS} counters below {1 << SPENT_BITS})")
    packed = 0
    for i, v in enumerate(spent):
        packed |= v << (SPENT_BITS * i)
    return packed


def unpack(packed: int, n: int) -> tuple[int, ...]:
    """The ``n`` counters of ``pack``'s int."""
    mask = (1 << SPENT_BITS) - 1
    return tuple((packed >> (SPENT_BITS * i)) & mask for i in range(n))


def keyed_fingerprint(fingerprint: Callable[[Any], Any], split: Callable[[Any], tuple[Any, tuple]],
                      exact: bool) -> Callable[[Any], tuple[Any, Any, tuple]]:
    """``state -> (fingerprint, twin key, spent)``: the key is ``fingerprint`` of the state with its budget
    counters cleared, and the state's own fingerprint is that of (key, spent) (64 bits, or the pair itself
    when ``exact``)."""
    interned: dict[tuple, tuple] = {}     # a search meets few distinct counters: one tuple each, shared

    def keyed(state: Any) -> tuple[Any, Any, tuple]:
        rest, spent = split(state)
        spent = interned.setdefault(spent, spent)
        key = fingerprint(rest)
        return ((key, spent) if exact else hash((key, spent))), key, spent
    return keyed


class Twins:
    """What the local engine knows of the twins it has kept, and where the states it left out went."""

    def __init__(self) -> None:
        # twin key -> (spent, fingerprint, spent, fingerprint, ...) of the twins kept: one flat tuple a key
        # (most keys have one twin), the spent tuples shared (``keyed_fingerprint``).
        self.kept: dict[Any, tuple] = {}
        self.redirect: dict[Any, Any] = {}                     # fingerprint left out -> the covering twin's

    def settle_level(self, candidates: Iterable[tuple[Any, Any, tuple]]) -> set[Any]:
        """Of a level's new states (fingerprint, key, spent), the fingerprints to keep: those no twin of
        this level or a kept one covers; the others are left out, each redirected to its covering twin
        kept with the smallest ``spent``."""
        by_key: dict[Any, list[tuple[tuple, Any]]] = {}
        for fp, key, spent in candidates:
            by_key.setdefault(key, []).append((spent, fp))
        keep: set[Any] = set()
        for key, new in by_key.items():
            flat = self.kept.get(key, ())
            old = list(zip(flat[::2], flat[1::2]))
            every = old + new
            kept_here = [(spent, fp) for spent, fp in new if not any(below(s, spent) for s, _ in every)]
            if len(kept_here) < len(new):
                covering = old + kept_here
                for spent, fp in new:
                    if any(below(s, spent) for s, _ in every):
                        self.redirect[fp] = min((s, f) for s, f in covering if below(s, spent))[1]
            if kept_here:
                self.kept[key] = flat + tuple(x for pair in kept_here for x in pair)
            keep.update(fp for _, fp in kept_here)
        return keep

    def target(self, fp: Any) -> Any:
        """Where an edge to ``fp`` goes: ``fp``, or the covering twin kept in its place."""
        return self.redirect.get(fp, fp)
