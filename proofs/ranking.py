"""The ranking obligations of a waiting publish (model.ranking), proved by Z3 for every size: each
obligation for each action of the model (or those it names), from any state where the invariants it
leans on (``LEANS_ON``, proved inductive by proofs.inductive) hold at the waiting publish's channel and
number, and publish (c, ch, s) is numbered on a channel open on both ends, for any fields and oracles of
the action. Only their instance at (c, ch, s) is assumed, not the invariants at every index: a weaker
hypothesis, so a stronger result, and with no quantifier to instantiate Z3 finds the counterexample of a
broken step at once instead of giving up (tests/test_proofs_ranking.py plants two).

Each (obligation, action) pair is decided as proofs.inductive decides a step: a solver of its own with
Z3's resource budget, split by the frame a relation reads, and tried with other seeds when the first
gives up; ``Outcome`` is the same, so `rabbitproof verify`'s proofs part shows both in one table.
"""
from __future__ import annotations

import time
from typing import Iterable

import z3

from rabbitproof.model import budgets
from rabbitproof.model.actions import RELATIONS
from rabbitproof.model.invariants import HELPERS, INVARIANTS
from rabbitproof.model.ranking import OBLIGATIONS, Obligation, in_step, numbered

from .inductive import PROVED, UNKNOWN, Outcome, _attempts, _decide, _METHODS, _transition

# The proved invariants every obligation assumes before the step: numbering and confirms exactly once
# (PC-1, PC-2, PC-3), and the client's view in step with the broker's channel.
LEANS_ON = ("confirms_exactly_once", "confirms_in_step", "channel_lifecycle")


def obligations_named(names: Iterable[str] = ()) -> list[Obligation]:
    """The ranking obligations to prove (all when ``names`` is empty); KeyError for an unknown one."""
    chosen = list(names) or list(OBLIGATIONS)
    unknown = [n for n in chosen if n not in OBLIGATIONS]
    if unknown:
        raise KeyError(f"unknown ranking obligation {unknown[0]!r}; known: {', '.join(OBLIGATIONS)}")
    return [OBLIGATIONS[n] for n in chosen]


class _AsInvariant:
    """What proofs.inductive's counterexample printing reads of an invariant: its name."""

    def __init__(self, name: str) -> None:
        self.name = name


def prove_obligation(ob: Obligation, cls: type, budget: int | None = None) -> Outcome:
    """``ob`` for the steps of ``cls``: split by the frame method the relation reads, as proofs.inductive."""
    budget = budget if budget is not None else budgets.BUDGETS["inductive"]
    o = _transition(cls)[2]
    started = time.perf_counter()
    cases = (None,) if "method" not in o else _METHODS + (0,)
    for m in cases:
        outcome = _prove_case(ob, cls, budget, m)
        if outcome.status != PROVED:
            if m is not None:
                outcome.counterexample.insert(0, f"case: frame method {m}")
            break
    outcome.seconds = time.perf_counter() - started
    return outcome


def _prove_case(ob: Obligation, cls: type, budget: int, method: int | None) -> Outcome:
    started = time.perf_counter()
    x, a, o, t = _transition(cls)
    c0, ch0, s0 = z3.Ints("c0 ch0 s0")
    leans = [({**INVARIANTS, **HELPERS})[n] for n in LEANS_ON]
    for seed, limit in _attempts(budget):
        solver = z3.Solver()
        solver.set("random_seed", seed)
        solver.add(*[i.at(x, c0, ch0, s0) for i in leans], t.guard,
                   in_step(x, c0, ch0), numbered(x, c0, ch0, s0), ob.when(x, a, o, c0, ch0, s0),
                   z3.Not(ob.then(x, t.after, c0, ch0, s0)))
        if method:
            solver.add(o.method == method)
        elif method == 0:
            solver.add(*[o.method != m for m in _METHODS])
        outcome = _decide(solver, _AsInvariant(ob.name), cls.__name__, x, t.after, c0, ch0, s0, started,
                          budget=limit)
        if outcome.status != UNKNOWN:
            break
    return outcome


def prove_ranking(obligations: Iterable[Obligation], actions: Iterable[type] | None = None,
                  budget: int | None = None) -> list[Outcome]:
    """Every (obligation, action) pair: each obligation for its own actions, or for every action of the
    model (``actions`` narrows either)."""
    wanted = None if actions is None else {cls.__name__ for cls in actions}
    out = []
    for ob in obligations:
        for cls in sorted(RELATIONS, key=lambda k: k.__name__):
            name = cls.__name__
            if (ob.actions and name not in ob.actions) or (wanted is not None and name not in wanted):
                continue
            out.append(prove_obligation(ob, cls, budget))
    return out

