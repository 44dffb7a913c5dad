"""The fingerprints of the states met lately, kept so that a state met again is not canonicalised again.

Under the symmetry reduction a fingerprint names a state's orbit: the state's clients are sorted and
the state rebuilt under the renaming (``spec.symmetry``, ``rabbitproof.check.interchangeable``), which
costs many times a hash. Most successors a search builds are states it has met before, reached by
another interleaving, and most of those are the very same state (not only one of its orbit), met a
few levels apart: 69% of the successors of the two-publisher benchmark setup of `rabbitproof check`, whose search
spent half its time fingerprinting. ``RecentFingerprints`` looks a state up among the ones it has
fingerprinted lately (a dict keyed by the state itself: hash and equality, exact) and computes the
fingerprint only when it is not there. The fingerprints are the ones computed without it, so every
count, verdict and trace is unchanged; it holds two generations of ``capacity`` states, so its memory
is bounded (the older generation is dropped when the newer one fills).
"""
from __future__ import annotations

from typing import Any, Callable

CAPACITY = 32_768       # states per generation: on the benchmark setup, 20,000 already found 96% of the repeats


class RecentFingerprints:
    """``fingerprint(state)`` remembered for the states met lately (module docstring).

    The generations are keyed by the state's hash and hold (state, fingerprint): a state is hashed once
    a call (hashing a state walks all of it, a dict keyed by the state would hash it again for each
    generation it looks in and for the insertion), and its fingerprint is used only when the state kept
    is equal to it, so two states whose hashes collide each get their own."""

    def __init__(self, fingerprint: Callable[[Any], Any], capacity: int = CAPACITY) -> None:
        if capacity < 1:
            raise ValueError("RecentFingerprints needs a capacity of at least 1")
        self.fingerprint = fingerprint
        self.capacity = capacity
        self.newer: dict[int, tuple[Any, Any]] = {}
        self.older: dict[int, tuple[Any, Any]] = {}
        self.computed = 0               # fingerprints computed (the others were remembered)

    def __call__(self, state: Any) -> Any:
        h = hash(state)
        met = self.newer.get(h)
        if met is not None and (met[0] is state or met[0] == state):
            return met[1]
        met = self.older.get(h)
        if met is None or not (met[0] is state or met[0] == state):
            met = (state, self.fingerprint(state))
            self.computed += 1
        newer = self.newer
        newer[h] = met
        if len(newer) >= self.capacity:
            self.older, self.newer = newer, {}
        return met[1]

    def remembered(self) -> tuple[dict[Any, Any], dict[Any, Any]]:
        """The older and the newer generation, each as {state: fingerprint}."""
        return ({s: fp for s, fp in self.older.values()}, {s: fp for s, fp in self.newer.values()})
