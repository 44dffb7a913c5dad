"""Z3's deterministic resource limit (``rlimit``) for every query of the model, the proofs and the
agreement check, and the work each kind of query was measured to take.

Z3 counts the work of a query in resource units (its statistic ``rlimit count``: steps of its
rewriters, its SAT solver and its theory solvers). A query given a budget of N units stops with
``unknown`` once it has spent N units more than when it started, whatever the machine and its load:
the same query, asked after the same queries, gets the same answer. A wall-clock time limit did not:
with other work running beside it an agreement query ran out of its 10 s and a bounded search out of
its 60 s, and the run failed on an answer the solver never gave.

Each budget below is 4 times the largest amount of work a query of its kind was measured to take over
a whole ``rabbitproof verify`` (the figures beside it); a query that runs out is asked once more with
``RETRY`` times its budget, and one still undecided after that is reported as unknown: neither a pass
nor a failure. The units are Z3's own (here 0.4 to 3.5 million a second, by kind of query, on a loaded
machine), so the budgets hold on a faster or slower machine alike; a new Z3 may count differently and the figures are
then to be measured again (``measured()`` after a run gives the largest per kind).
"""
from __future__ import annotations

import z3

MARGIN = 4      # each budget: this many times the largest work measured for its kind
RETRY = 4       # an unknown is asked once more with this many times the budget

# Each kind of query: the largest work one query of it took over a whole run of its part (Z3 5.4.1, the
# pure-Python spec, 2026-11-28: ``rabbitproof verify --part agreement``, ``proofs``, ``bmc``), every query
# decided, none cut off; the budget is MARGIN times it.
MEASURED = {
    # one (state, action) pair of the agreement check: 22,469 pairs, one query each
    "agreement": 297_783,
    # one case of an inductive obligation with one seed: 3,596 cases of 1,178 obligations, every one
    # decided by its first seed
    "inductive": 5_988_423,
    # one bound of a hazard's bounded search: 65 queries over 7 hazards, the largest one showing there is
    # no violation within a bound (the next largest 25,150,907)
    "bmc": 41_962_817,
    # one claim that two actions commute, for the canonical interleavings: 2,965 claims
    "commute": 253_582,
}
BUDGETS = {kind: MARGIN * largest for kind, largest in MEASURED.items()}

_MOST = 2**32 - 1        # Z3 takes the limit as an unsigned 32-bit number
_largest: dict[str, int] = {}
_probe: z3.Solver | None = None


def spent() -> int:
    """Z3's work counter for the main context so far (the ``rlimit count`` it reports): the difference
    between two readings is the work done between them."""
    global _probe
    if _probe is None:
        _probe = z3.Solver()
        _probe.check()                      # statistics report the counter once a solver has run
    return _probe.statistics().get_key_value("rlimit count")


def check(solver: z3.Solver, kind: str, budget: int | None = None) -> z3.CheckSatResult:
    """``solver.check()`` within ``budget`` units (the kind's budget by default), its work recorded
    under ``kind`` (``measured()``)."""
    solver.set("rlimit", min(_MOST, max(1, budget if budget is not None else BUDGETS[kind])))
    before = spent()
    result = solver.check()
    if result != z3.unknown or not out_of_budget(solver):       # a query cut off measures nothing
        _largest[kind] = max(_largest.get(kind, 0), spent() - before)
    return result


def check_twice(solver: z3.Solver, kind: str, budget: int | None = None) -> z3.CheckSatResult:
    """``check``, and once more with ``RETRY`` times the budget when the first ran out of it."""
    budget = budget if budget is not None else BUDGETS[kind]
    result = check(solver, kind, budget)
    if result == z3.unknown and out_of_budget(solver):
        result = check(solver, kind, RETRY * budget)
    return result


def out_of_budget(solver: z3.Solver) -> bool:
    """Whether the solver's last ``unknown`` was its resource limit (not, say, incomplete quantifiers)."""
    reason = solver.reason_unknown()
    return "resource limit" in reason or reason == "canceled"


def measured() -> dict[str, int]:
    """The largest work of a query of each kind decided in this process so far."""
    return dict(_largest)
