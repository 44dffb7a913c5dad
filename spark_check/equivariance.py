"""The symmetry reduction's three facts, checked on a model: for every renaming of its ``symmetry``
hook and every state reachable in the full graph, the initial states are fixed, the steps commute with
the renaming, and every property has the same value (spec.symmetry states them and why they suffice).
``make bench`` (rabbitproof.bench.reductions) and the tests run it on the spec and on `rabbitproof check`'s
machine.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from .reductions import build_symmetry


def equivariance_problems(model: Any, config: Any, properties: Any, renamings: tuple | None = None,
                          limit: int = 10) -> tuple[int, list[str]]:
    """Facts (1) to (3) of spec.symmetry, checked for every renaming on every state reachable in
    the full graph (exactly: states, not fingerprints). Returns the number of states checked and at most
    ``limit`` problems. ``renamings`` replaces the model's own (a test's wrong one). A model with a
    ``canonical`` form (spark_check.expansion) has its states counted by that form, as the engines count
    them, and the form must commute with every renaming (4)."""
    symmetry = build_symmetry(("symmetry",), model, config)
    renamings = symmetry.renamings if renamings is None else tuple(renamings)
    rename = symmetry.rename
    enabled, step = model.enabled, model.step
    initial = set(model.initial_states(config))
    problems: list[str] = []
    for g in renamings:
        if {rename(s, g) for s in initial} != initial:
            problems.append(f"(1): renaming {tuple(g)} moves an initial state")
    canonical = getattr(model, "canonical", None) or (lambda state: state)
    seen = {canonical(s) for s in initial}
    frontier = list(initial)
    while frontier and len(problems) < limit:
        nxt = []
        for x in frontier:
            succ = [step(x, a)[0] for a in enabled(x, config)]
            for y in succ:
                form = canonical(y)
                if form not in seen:
                    seen.add(form)
                    nxt.append(y)
            for g in renamings:
                gx = rename(x, g)
                if canonical(gx) != rename(canonical(x), g):
                    problems.append(f"(4): renaming {tuple(g)} does not commute with the canonical form")
                if Counter(rename(y, g) for y in succ) != Counter(step(gx, a)[0] for a in enabled(gx, config)):
                    problems.append(f"(2): renaming {tuple(g)} does not commute with the steps out of a state "
                                    f"at {len(seen):,} states")
                elif not succ and model.terminal_ok(x, config) != model.terminal_ok(gx, config):
                    problems.append(f"(2): renaming {tuple(g)} changes terminal_ok")
                for p in properties:
                    if p.holds(x) != p.holds(gx):
                        problems.append(f"(3): renaming {tuple(g)} changes {p.name}")
        frontier = nxt
    return len(seen), problems[:limit]
