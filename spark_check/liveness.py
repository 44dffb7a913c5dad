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
from itertools import accumulate
from dataclasses import dataclass
from typing import Any, Iterable, Sequence


UNFAIR = -1
MAX_FAIR_CLASSES = 62       # a class is a bit of a signed 64-bit mask, here and in Spark


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


# --- the local engine's analysis: flat arrays and Tarjan's algorithm, in plain Python ----------------
# (numpy is not needed: the search costs far more per state than this analysis, and the core install
# stays small; the Spark engine's code converts its arrays at the call.)

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
        src, dst, cls = self.src, self.dst, self.cls
        if len(self.fps) > n:           # a search cut short: only the expanded states and the edges between them
            inside = [k for k, t in enumerate(dst) if t < n]
            src, dst, cls = (array(a.typecode, (a[k] for k in inside)) for a in (src, dst, cls))
        return local_lassos(liveness, src, dst, cls, self.enabled, self.atoms, self.terminal, self.depth[:n],
                            self.fps[:n], cyclic)


def _adjacency(n: int, src: Sequence[int], dst: Sequence[int]) -> tuple[list[int], array]:
    """The edges as a compressed adjacency: the targets of state v are ``targets[start[v]:start[v + 1]]``."""
    counts = [0] * (n + 1)
    for s in src:
        counts[s + 1] += 1
    start = list(accumulate(counts))
    fill = start[:-1]
    targets = array("q", bytes(8 * len(src)))
    for s, d in zip(src, dst):
        targets[fill[s]] = d
        fill[s] += 1
    return start, targets


def components(n: int, src: Sequence[int], dst: Sequence[int], keep: Sequence[Any]) -> list[int]:
    """The strongly connected component of each state of the graph restricted to the states ``keep``
    (true or false by state), as the smallest state index in it; -1 for states not kept. Iterative
    Tarjan over a compressed adjacency, stepping over the states not kept."""
    comp = [v if keep[v] else -1 for v in range(n)]
    start, targets = _adjacency(n, src, dst)
    index = [-1] * n
    low = [0] * n
    on_stack = [False] * n
    stack: list[int] = []
    counter = 0
    for root in range(n):
        if not keep[root] or index[root] >= 0:
            continue
        work = [(root, start[root])]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        while work:
            v, i = work[-1]
            if i < start[v + 1]:
                work[-1] = (v, i + 1)
                w = targets[i]
                if not keep[w]:
                    continue
                if index[w] < 0:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack[w] = True
                    work.append((w, start[w]))
                elif on_stack[w] and index[w] < low[v]:
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
                    on_stack[w] = False
                    members.append(w)
                    if w == v:
                        break
                if len(members) > 1:            # a state alone is its own component already
                    smallest = min(members)
                    for w in members:
                        comp[w] = smallest
    return comp


def fair_accepting(comp: Sequence[int], src: Sequence[int], dst: Sequence[int], cls: Sequence[int],
                   enabled: Sequence[int], recurs: Sequence[Any]) -> list[int]:
    """The components (by their smallest state, in increasing order) that are fair accepting (module
    docstring): an edge inside, a state where ``recurs`` holds, and every fair class enabled throughout
    taken by an edge inside."""
    taken: dict[int, int] = {}
    for s, d, c in zip(src, dst, cls):
        k = comp[s]
        if k >= 0 and k == comp[d]:
            taken[k] = taken.get(k, 0) | ((1 << c) if c >= 0 else 0)
    if not taken:
        return []
    always = dict.fromkeys(taken, -1)
    seen = dict.fromkeys(taken, False)
    for v, k in enumerate(comp):
        if k in always:
            always[k] &= enabled[v]
            if recurs[v]:
                seen[k] = True
    return sorted(k for k in taken if seen[k] and (always[k] & ~taken[k]) == 0)


def has_cycle(comp: Sequence[int], src: Sequence[int], dst: Sequence[int]) -> bool:
    """Whether the graph split into components ``comp`` (``components``) holds a cycle: an edge inside one."""
    return any(comp[s] >= 0 and comp[s] == comp[d] for s, d in zip(src, dst))


def local_lassos(liveness: Sequence[Any], src: Sequence[int], dst: Sequence[int], cls: Sequence[int],
                 enabled: Sequence[int], atoms: Sequence[int], terminal: Sequence[Any], depth: Sequence[int],
                 fps: Sequence[Any], cyclic: set[int] | None = None) -> dict[int, Lasso]:
    """The counterexample of each liveness property the graph has (property index -> Lasso), states by index
    ``0..n-1`` (``fps``: their fingerprints, ``depth``: their BFS level, ``terminal``: no fair class enabled);
    ``cyclic`` (when given) gets the index of each property whose ``stays`` states hold a cycle, fair or not
    (what a reduction that may lose fair cycles needs to know: spark_check.reductions)."""
    n = len(fps)
    found: dict[int, Lasso] = {}
    for i, p in enumerate(liveness):
        stays_mask, recurs_mask = stays_bit(i), recurs_bit(i)
        stays = [bool(atoms[k] & stays_mask) for k in range(n)]
        recurs = [bool(atoms[k] & recurs_mask) for k in range(n)]
        candidates: list[tuple[int, Any, int, str]] = []      # (depth, fp, state, how)
        comp = components(n, src, dst, stays)
        if cyclic is not None and has_cycle(comp, src, dst):
            cyclic.add(i)
        roots = set(fair_accepting(comp, src, dst, cls, enabled, recurs))
        members_of: dict[int, list[int]] = {}
        for k in range(n):
            if comp[k] in roots:
                members_of.setdefault(comp[k], []).append(k)
        for members in members_of.values():
            first = min(members, key=lambda k: (depth[k], order_key(fps[k])))
            candidates.append((depth[first], fps[first], first, "cycle"))
        ends = [k for k in range(n) if stays[k] and terminal[k]] if p.at_end else []
        if ends:
            k = min(ends, key=lambda k: (depth[k], order_key(fps[k])))
            candidates.append((depth[k], fps[k], k, "end"))
        if not candidates:
            continue
        _, fp, state, how = min(candidates, key=lambda c: (c[0], order_key(c[1])))
        if how == "end":
            found[i] = Lasso(fp, (), ())
            continue
        root = comp[state]
        members = members_of[root]
        edges = [(fps[s], fps[t], c) for s, t, c in zip(src, dst, cls) if comp[s] == root and comp[t] == root]
        cycle, classes = cycle_through(fp, {fps[k] for k in members}, edges,
                                       {fps[k]: enabled[k] for k in members},
                                       {fps[k] for k in members if recurs[k]})
        found[i] = Lasso(fp, cycle, classes)
    return found
