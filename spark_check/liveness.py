"""Liveness on the explored graph: fair cycles, found the same way by every engine (DESIGN.md, "Liveness").

A liveness property (spec.properties_api.Liveness) fails when the explored graph holds a *fair accepting
cycle* reachable from the start: a cycle whose states all satisfy ``stays``, one of which satisfies
``recurs``, and which is weakly fair: every fair class of actions (the model's ``fairness`` hook) that
is enabled in every state of the cycle is taken on it. Such a cycle exists iff some strongly connected
component of the graph restricted to the ``stays`` states

- has an edge inside it (a single state counts only with an edge to itself),
- has a state where ``recurs`` holds, and
- for every fair class, either takes it on an edge inside the component or has a state where it is
  disabled

(a cycle through every state and every such edge of the component is then fair; conversely a fair
accepting cycle lies inside one component, which then satisfies all three). This is exact for weak
fairness; no unrolling, no bound on the cycle's length. With ``at_end``, a state where no fair class is
enabled and ``stays`` holds is a counterexample too: the execution may end there, for what is left (a
fault, an application's free choice) need never happen. That includes a state where nothing is enabled.

What the engines record, per state: ``enabled`` (a bit per fair class enabled in it) and ``atoms`` (bits
``2i`` and ``2i + 1``: ``stays`` and ``recurs`` of liveness property i); per edge, the fair class of its
action (-1: none). Both engines pick the same counterexample: among the candidate components (and end
states), the one holding the state first in (BFS depth, fingerprint) order; the cycle starts at that
state and is built by ``cycle_through`` from the component's edges alone, so the repeating part is
the same on every engine (the steps to it are a shortest path, of the same length on every engine).
"""
from __future__ import annotations

from array import array
from collections import deque
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

UNFAIR = -1
MAX_FAIR_CLASSES = 62       # a class is a bit of a signed 64-bit mask, in numpy and in Spark


def order_key(fp: Any) -> int:
    """How fingerprints are ordered to choose among equals: 64-bit ones as they are, exact ones (states)
    by their hash."""
    return fp if isinstance(fp, int) else hash(fp)


def stays_bit(i: int) -> int:
    return 1 << (2 * i)


def recurs_bit(i: int) -> int:
    return 1 << (2 * i + 1)


def atoms_of(liveness: Sequence[Any], state: Any) -> int:
    """The bits of ``state`` for each liveness property: ``stays`` and ``recurs``."""
    bits = 0
    for i, p in enumerate(liveness):
        if p.stays(state):
            bits |= stays_bit(i)
            if p.recurs(state):
                bits |= recurs_bit(i)
    return bits


@dataclass(frozen=True)
class Lasso:
    """A counterexample to a liveness property, as fingerprints: ``stem`` from the start to the first
    state of the cycle (both included), then ``cycle``: the fingerprints after each repeated step, the
    last being the first state of the cycle again (empty: the execution ends at the stem's last state),
    with the fair class each repeated step must belong to (UNFAIR: any)."""

    stem_target: Any
    cycle: tuple[Any, ...]
    classes: tuple[int, ...]


def cycle_through(start: Any, members: set, edges: Iterable[tuple[Any, Any, int]], enabled: dict,
                  recurs: set) -> tuple[tuple[Any, ...], tuple[int, ...]]:
    """A fair accepting cycle from ``start`` inside one component: ``members`` its states, ``edges`` its
    internal edges (source, target, class), ``enabled`` each member's mask of enabled fair classes,
    ``recurs`` the members where ``recurs`` holds. Greedy: go to the nearest state or edge that meets an
    obligation not met yet (a ``recurs`` state; for each fair class enabled all along so far, an edge of
    it or a state where it is disabled), then back to ``start``. Deterministic: successors in
    (target, class) order. Returns the targets of the steps and their classes."""
    out: dict[Any, list[tuple[Any, int]]] = {}
    for s, t, c in edges:
        out.setdefault(s, []).append((t, c))
    for s in out:
        out[s].sort(key=lambda e: (order_key(e[0]), e[1]))
    path: list[Any] = []
    classes: list[int] = []
    seen_recurs = start in recurs
    disabled = ~enabled[start]
    taken = 0
    here = start

    def owed() -> int:
        return ~(disabled | taken)

    def meets(edge_class: int, target: Any) -> bool:
        if not seen_recurs and target in recurs:
            return True
        gain = (1 << edge_class if edge_class >= 0 else 0) | ~enabled[target]
        return bool(gain & owed() & _all_classes(enabled))

    every = _all_classes(enabled)
    while not seen_recurs or owed() & every:
        step = _nearest(here, out, meets)
        if step is None:
            raise RuntimeError("liveness: a fair component has no fair cycle (a bug in the component's facts)")
        for target, edge_class in step:
            path.append(target)
            classes.append(edge_class)
            seen_recurs |= target in recurs
            disabled |= ~enabled[target]
            taken |= 1 << edge_class if edge_class >= 0 else 0
        here = path[-1]
    back = _nearest(here, out, lambda edge_class, target: target == start)
    if back is None:
        raise RuntimeError("liveness: a component's state cannot reach its start (a bug in the component)")
    for target, edge_class in back:
        path.append(target)
        classes.append(edge_class)
    return tuple(path), tuple(classes)


def _all_classes(enabled: dict) -> int:
    mask = 0
    for m in enabled.values():
        mask |= m
    return mask


def _nearest(here: Any, out: dict, wanted) -> list[tuple[Any, int]] | None:
    """The shortest path (at least one step) from ``here`` to an edge that ``wanted(class, target)``
    accepts, as (target, class) steps; None when there is none."""
    parent: dict[Any, tuple[Any, int] | None] = {here: None}
    queue = deque([here])
    while queue:
        s = queue.popleft()
        for t, c in out.get(s, ()):
            if wanted(c, t):
                steps = [(t, c)]
                while s != here:
                    prev, pc = parent[s]
                    steps.append((s, pc))
                    s = prev
                return steps[::-1]
            if t not in parent:
                parent[t] = (s, c)
                queue.append(t)
    return None


# --- the local engine's analysis: numpy arrays and Tarjan's algorithm -------------------------------

class LocalGraph:
    """The explored graph as the local engine keeps it when a liveness property is asked (and only then):
    states by index in the order found (the order they are expanded in), their BFS level, fair classes
    enabled and atoms; edges as three flat arrays (source, target, class)."""

    def __init__(self) -> None:
        self.ids: dict[Any, int] = {}
        self.fps: list[Any] = []
        self.depth = array("i")
        self.enabled = array("q")
        self.atoms = array("q")
        self.terminal = bytearray()
        self.src = array("q")
        self.dst = array("q")
        self.cls = array("b")

    def found(self, fp: Any, depth: int) -> None:
        """A new state, at BFS level ``depth``."""
        self.ids[fp] = len(self.fps)
        self.fps.append(fp)
        self.depth.append(depth)

    def expanded(self, fp: Any, enabled: int, atoms: int, classes: list[int], targets: list[Any]) -> None:
        """The state ``fp`` expanded: its facts and its edges (every target is found by now)."""
        k = self.ids[fp]
        if k != len(self.enabled):
            raise RuntimeError("liveness: states expanded out of the order they were found")
        self.enabled.append(enabled)
        self.atoms.append(atoms)
        self.terminal.append(not enabled)       # no fair step left: the execution may stop here
        ids = self.ids
        self.src.extend([k] * len(targets))
        self.dst.extend([ids[t] for t in targets])
        self.cls.extend(classes)

    def nbytes(self) -> int:
        """Roughly what the graph holds, in bytes (the arrays, and the id map at ~100 bytes a state)."""
        arrays = (self.depth, self.enabled, self.atoms, self.src, self.dst, self.cls)
        return sum(a.itemsize * len(a) for a in arrays) + len(self.terminal) + 100 * len(self.ids)

    def lassos(self, liveness: Sequence[Any], cyclic: set[int] | None = None) -> dict[int, Lasso]:
        """The counterexample of each liveness property (index -> Lasso), on the whole explored graph;
        ``cyclic`` (when given) gets the index of each property whose ``stays`` states hold a cycle. On the
        graph of a search cut short, among the states expanded: a fair cycle or an end found there is one
        of the full graph (each of its states is expanded, its fair classes known), and finding none
        decides nothing."""
        n = len(self.enabled)
        src, dst = np.frombuffer(self.src, dtype=np.int64), np.frombuffer(self.dst, dtype=np.int64)
        cls = np.frombuffer(self.cls, dtype=np.int8).astype(np.int64)
        if len(self.fps) > n:           # a search cut short: only the expanded states and the edges between them
            inside = dst < n
            src, dst, cls = src[inside], dst[inside], cls[inside]
        return local_lassos(liveness, src, dst, cls,
                            np.frombuffer(self.enabled, dtype=np.int64), np.frombuffer(self.atoms, dtype=np.int64),
                            np.frombuffer(bytes(self.terminal), dtype=np.bool_),
                            np.frombuffer(self.depth, dtype=np.int32)[:n], self.fps[:n], cyclic)


def components(n: int, src: np.ndarray, dst: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """The strongly connected component of each state of the graph restricted to the states ``keep``
    (a boolean array), as the smallest state index in it; -1 for states not kept. Iterative Tarjan over
    a CSR adjacency; the states first peeled of those with no way in or out among the kept ones (every
    state of a DAG-like graph goes there, in a few vectorised passes)."""
    alive = keep.copy()
    inner = alive[src] & alive[dst]
    s, d = src[inner], dst[inner]
    while True:                                       # peel: a state on a cycle has an edge in and out
        has_out = np.zeros(n, bool)
        has_out[s] = True
        has_in = np.zeros(n, bool)
        has_in[d] = True
        now = alive & has_out & has_in
        if now.sum() == alive.sum():
            break
        alive = now
        inner = alive[s] & alive[d]
        s, d = s[inner], d[inner]
    comp = np.full(n, -1, dtype=np.int64)
    comp[keep] = np.flatnonzero(keep)                 # a kept state off every cycle is its own component
    if not len(s):
        return comp
    order = np.argsort(s, kind="stable")
    s, d = s[order], d[order]
    starts = np.searchsorted(s, np.arange(n + 1))
    targets = d.tolist()
    begin = starts.tolist()
    index = {}
    low = {}
    stack: list[int] = []
    on_stack: set[int] = set()
    counter = 0
    for root in np.flatnonzero(alive).tolist():
        if root in index:
            continue
        work = [(root, begin[root])]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, i = work[-1]
            if i < begin[v + 1]:
                work[-1] = (v, i + 1)
                w = targets[i]
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, begin[w]))
                elif w in on_stack and index[w] < low[v]:
                    low[v] = index[w]
                continue
            work.pop()
            if work:
                u = work[-1][0]
                if low[v] < low[u]:
                    low[u] = low[v]
            if low[v] == index[v]:
                members = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    members.append(w)
                    if w == v:
                        break
                smallest = min(members)
                for w in members:
                    comp[w] = smallest
    return comp


def fair_accepting(comp: np.ndarray, src: np.ndarray, dst: np.ndarray, cls: np.ndarray, enabled: np.ndarray,
                   recurs: np.ndarray) -> np.ndarray:
    """The components (by their smallest state) that are fair accepting (module docstring)."""
    inner = (comp[src] >= 0) & (comp[src] == comp[dst])
    if not inner.any():
        return np.zeros(0, dtype=np.int64)
    ids = comp[src[inner]]
    names, slot = np.unique(ids, return_inverse=True)
    taken = np.zeros(len(names), dtype=np.int64)
    fair_cls = cls[inner]
    bits = np.where(fair_cls >= 0, np.left_shift(np.int64(1), np.maximum(fair_cls, 0).astype(np.int64)), 0)
    np.bitwise_or.at(taken, slot, bits)
    members = np.flatnonzero(np.isin(comp, names))
    where = np.searchsorted(names, comp[members])
    always = np.full(len(names), -1, dtype=np.int64)
    np.bitwise_and.at(always, where, enabled[members])
    seen = np.zeros(len(names), dtype=bool)
    np.logical_or.at(seen, where, recurs[members])
    good = seen & ((always & ~taken) == 0)
    return names[good]


def has_cycle(comp: np.ndarray, src: np.ndarray, dst: np.ndarray) -> bool:
    """Whether the graph split into components ``comp`` (``components``) holds a cycle: an edge inside one."""
    return bool(((comp[src] >= 0) & (comp[src] == comp[dst])).any())


def local_lassos(liveness: Sequence[Any], src: np.ndarray, dst: np.ndarray, cls: np.ndarray, enabled: np.ndarray,
                 atoms: np.ndarray, terminal: np.ndarray, depth: np.ndarray, fps: Sequence[Any],
                 cyclic: set[int] | None = None) -> dict[int, Lasso]:
    """The counterexample of each liveness property the graph has (property index -> Lasso), states by index
    ``0..n-1`` (``fps``: their fingerprints, ``depth``: their BFS level, ``terminal``: no fair class enabled);
    ``cyclic`` (when given) gets the index of each property whose ``stays`` states hold a cycle, fair or not
    (what a reduction that may lose fair cycles needs to know: spark_check.reductions)."""
    n = len(fps)
    found: dict[int, Lasso] = {}
    for i, p in enumerate(liveness):
        stays = (atoms & stays_bit(i)) != 0
        recurs = (atoms & recurs_bit(i)) != 0
        candidates: list[tuple[int, Any, int, str]] = []      # (depth, fp, state, how)
        comp = components(n, src, dst, stays)
        if cyclic is not None and has_cycle(comp, src, dst):
            cyclic.add(i)
        for root in fair_accepting(comp, src, dst, cls, enabled, recurs).tolist():
            members = np.flatnonzero(comp == root)
            first = min(members.tolist(), key=lambda k: (int(depth[k]), order_key(fps[k])))
            candidates.append((int(depth[first]), fps[first], first, "cycle"))
        ends = np.flatnonzero(stays & terminal).tolist() if p.at_end else []
        if ends:
            k = min(ends, key=lambda k: (int(depth[k]), order_key(fps[k])))
            candidates.append((int(depth[k]), fps[k], k, "end"))
        if not candidates:
            continue
        _, fp, state, how = min(candidates, key=lambda c: (c[0], order_key(c[1])))
        if how == "end":
            found[i] = Lasso(fp, (), ())
            continue
        inside = np.flatnonzero((comp[src] == comp[state]) & (comp[dst] == comp[state]))
        members = np.flatnonzero(comp == comp[state]).tolist()
        edges = [(fps[s], fps[t], int(c)) for s, t, c in zip(src[inside].tolist(), dst[inside].tolist(),
                                                             cls[inside].tolist())]
        cycle, classes = cycle_through(fp, {fps[k] for k in members}, edges,
                                       {fps[k]: int(enabled[k]) for k in members},
                                       {fps[k] for k in members if recurs[k]})
        found[i] = Lasso(fp, cycle, classes)
    return found
