"""model.budgets: a Z3 query bounded by Z3's resource limit (never by time) stops with unknown when its
budget is spent, is asked once more with budgets.RETRY times the budget, and its work is recorded."""
from __future__ import annotations

import z3

from rabbitproof.model import budgets


def _factoring() -> z3.Solver:
    """A query that takes Z3 some work: factor a 32-bit number."""
    x, y = z3.BitVecs("x y", 32)
    solver = z3.Solver()
    solver.add(x * y == 0x12345677, z3.UGT(x, 1), z3.UGT(y, 1), z3.ULT(x, 0x10000), z3.ULT(y, 0x10000000))
    return solver


def test_a_query_out_of_its_budget_is_unknown_and_retried_with_a_larger_one(monkeypatch):
    monkeypatch.setattr(budgets, "_largest", {})
    solver = _factoring()
    assert budgets.check(solver, "agreement", 1) == z3.unknown
    assert budgets.out_of_budget(solver)
    assert budgets.measured() == {}                       # a query cut off measures nothing
    assert budgets.check_twice(_factoring(), "agreement", 1) == z3.unknown      # 1, then 4 units
    assert budgets.check_twice(_factoring(), "agreement", 10_000_000) == z3.sat
    work = budgets.measured()["agreement"]
    assert 0 < work < 10_000_000
    solver = _factoring()
    assert budgets.check(solver, "agreement", work // 2) == z3.unknown
    solver = _factoring()
    assert budgets.check_twice(solver, "agreement", work // 2) == z3.sat        # retried with 4 times as much


def test_every_kind_has_a_budget_of_four_times_its_measured_work():
    assert set(budgets.BUDGETS) == set(budgets.MEASURED) == {"agreement", "inductive", "bmc", "commute"}
    for kind, largest in budgets.MEASURED.items():
        assert largest > 0 and budgets.BUDGETS[kind] == budgets.MARGIN * largest
        assert budgets.RETRY * budgets.BUDGETS[kind] < 2**32       # Z3 takes the limit as 32 bits
