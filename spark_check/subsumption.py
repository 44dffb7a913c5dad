"""The ``budgets`` reduction in the engines: a state is not explored when a state that is the same but for
having spent less of its budgets is.

The model offers it through its ``subsumption(config)`` hook (spark_check.reductions), an object whose
``split(state)`` returns ``(rest, spent)``: the state with its budget counters cleared, and the counters,
a tuple of ints (and, if it likes, ``spent(state)``: the counters alone, which the engines then read
without fingerprinting the state). Two states with the same ``rest`` are *twins*; a twin whose ``spent`` is below another's
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
- **Edges.** An edge to a state left out goes to its first covering twin in lexicographic order of
  the counters, which is always kept (``redirect``). Such an edge is not a step of the model (the twin
  is not the step's target), so the graph kept for liveness leaves out every edge that spends a budget
  (``spent`` differs at its two ends): on a cycle of the remaining edges ``spent`` never grows, and a
  redirect would make it fall, so every cycle the liveness search can see is made of real steps, and
  every cycle of the model is there, as a budget only grows and no cycle of the model spends one. Traces follow the parents of kept
  states, each a real step.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Container, Iterable, Sequence


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


def fingerprint_of(key: Any, spent: tuple, exact: bool = False) -> Any:
    """The fingerprint of the twin of key ``key`` that spent ``spent`` (64 bits, or the pair itself when
    ``exact``): what ``keyed_fingerprint`` gives that state."""
    return (key, spent) if exact else hash((key, spent))


def keyed_fingerprint(fingerprint: Callable[[Any], Any], split: Callable[[Any], tuple[Any, tuple]],
                      exact: bool) -> Callable[[Any], tuple[Any, Any, tuple]]:
    """``state -> (fingerprint, twin key, spent)``: the key is ``fingerprint`` of the state with its budget
    counters cleared, and the state's own fingerprint is that of (key, spent) (``fingerprint_of``)."""
    interned: dict[tuple, tuple] = {}     # a search meets few distinct counters: one tuple each, shared

    def keyed(state: Any) -> tuple[Any, Any, tuple]:
        rest, spent = split(state)
        spent = interned.setdefault(spent, spent)
        key = fingerprint(rest)
        return fingerprint_of(key, spent, exact), key, spent
    return keyed


def lower(spent: tuple) -> tuple[tuple, ...]:
    """Every counter tuple below ``spent`` (no component larger, not equal), in lexicographic order."""
    return tuple(s for s in itertools.product(*(range(v + 1) for v in spent)) if s != spent)


class Twins:
    """Where the states a search left out went (``redirect``), and the settling of a level's new states.

    No table of twins is kept: a state's twins are found by their fingerprints, ``fingerprint_of(key, s)``
    for each ``s`` below its counters (few: most counters are 0 or 1), looked up among the fingerprints
    the search knows (every state found so far, kept or left out, and the level's new ones)."""

    def __init__(self, exact: bool = False) -> None:
        self.exact = exact
        self.redirect: dict[Any, Any] = {}                 # fingerprint left out -> the covering twin's
        self._lower: dict[tuple, tuple[tuple, ...]] = {}

    def settle_level(self, candidates: Iterable[tuple[Any, Any, tuple]], known: Container[Any]) -> set[Any]:
        """Of a level's new states (fingerprint, key, spent), the fingerprints to keep: those with no twin
        that spent less among ``known`` (the fingerprints found so far, this level's included). The
        others are left out, each redirected to the first such twin in lexicographic order of its
        counters, which is always kept (a twin covering it would come before it).

        The same as keeping the twins no twin kept before or found at this level covers: a state left out
        earlier that covers a new one is itself covered by a kept one, which covers the new one too. So
        the states kept do not depend on the order the level was found in."""
        keep: set[Any] = set()
        exact = self.exact
        for fp, key, spent in candidates:
            below = self._lower.get(spent)
            if below is None:
                below = self._lower[spent] = lower(spent)
            for s in below:
                twin = fingerprint_of(key, s, exact)
                if twin in known:
                    self.redirect[fp] = twin
                    break
            else:
                keep.add(fp)
        return keep

    def target(self, fp: Any) -> Any:
        """Where an edge to ``fp`` goes: ``fp``, or the covering twin kept in its place."""
        return self.redirect.get(fp, fp)
