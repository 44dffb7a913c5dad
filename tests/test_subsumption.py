"""The ``budgets`` reduction in the engines (spark_check.subsumption), on a toy whose graph is known by
hand, and the settling of a level's twins, whatever the order they were found in."""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import NamedTuple

import pytest

from rabbitproof.spark_check.engine import LocalEngine
from rabbitproof.spark_check.subsumption import Twins, fingerprint_of, lower, pack, unpack
from rabbitproof.spec.properties_api import Liveness


class Spot(NamedTuple):
    phase: int      # 0, 1 or 2
    used: int       # faults spent


@dataclass(frozen=True)
class Go:
    """Fair: phase 0 to phase 1."""


@dataclass(frozen=True)
class Fault:
    """Free never to happen, spends the budget: phase 1 back to phase 0."""


@dataclass(frozen=True)
class Up:
    """Free never to happen: phase 1 to 2 (with ``loops``)."""


@dataclass(frozen=True)
class Down:
    """Free never to happen: phase 2 to 1 (with ``loops``)."""


@dataclass(frozen=True)
class SpotConfig:
    name: str = "spot"
    loops: bool = False             # phases 1 and 2 form a cycle (no fair step in it)
    max_states: int = 100
    deadlock_is_error: bool = False


class SpotFairness(NamedTuple):
    classes: tuple[str, ...] = ("go",)

    def class_of(self, action) -> int:
        return 0 if type(action) is Go else -1


class Split(NamedTuple):
    keeps_fair_cycles: bool = True

    @staticmethod
    def split(state: Spot) -> tuple:
        return Spot(state.phase, 0), (state.used,)


@dataclass(frozen=True)
class SpotModel:
    """(0, 0) -Go-> (1, 0) -Fault-> (0, 1) -Go-> (1, 1), the budget then spent. (0, 1) is covered by
    (0, 0): left out, and the edge to it would close a cycle (0, 0) -> (1, 0) -> (0, 0) that no execution
    takes (the fault cannot happen twice). With ``loops``, phases 1 and 2 cycle: a fair cycle, at every
    budget."""

    def initial_states(self, config: SpotConfig) -> tuple[Spot, ...]:
        return (Spot(0, 0),)

    def enabled(self, state: Spot, config: SpotConfig) -> tuple:
        if state.phase == 0:
            return (Go(),)
        if state.phase == 2:
            return (Down(),)
        return ((Fault(),) if state.used < 1 else ()) + ((Up(),) if config.loops else ())

    def step(self, state: Spot, action) -> tuple[Spot, tuple]:
        kind = type(action)
        if kind is Go or kind is Down:
            return Spot(1, state.used), ()
        if kind is Up:
            return Spot(2, state.used), ()
        return Spot(0, state.used + 1), ()

    def terminal_ok(self, state: Spot, config: SpotConfig) -> bool:
        return True

    def fairness(self, config: SpotConfig) -> SpotFairness:
        return SpotFairness()

    def subsumption(self, config: SpotConfig) -> Split:
        return Split()


def always(state: Spot) -> bool:
    return True


NEVER_STILL = Liveness("never_still", ("T-1",), "No fair execution goes round for ever.", always, always)


@pytest.mark.parametrize("exact", [False, True])
def test_a_covered_twin_is_left_out_and_no_cycle_is_made_of_the_edge_to_it(exact):
    full = LocalEngine(exact=exact).explore(SpotModel(), SpotConfig(), [], liveness=[NEVER_STILL])
    reduced = LocalEngine(exact=exact, reductions=("budgets",)).explore(SpotModel(), SpotConfig(), [],
                                                                          liveness=[NEVER_STILL])
    assert (full.distinct_states, reduced.distinct_states) == (4, 2)
    assert full.properties[0].verdict == reduced.properties[0].verdict == "holds"


def test_a_cycle_of_a_covered_twin_is_found_from_the_twin_that_covers_it():
    full = LocalEngine().explore(SpotModel(), SpotConfig(loops=True), [], liveness=[NEVER_STILL])
    reduced = LocalEngine(reductions=("budgets",)).explore(SpotModel(), SpotConfig(loops=True), [],
                                                           liveness=[NEVER_STILL])
    assert reduced.distinct_states < full.distinct_states
    assert full.properties[0].verdict == reduced.properties[0].verdict == "VIOLATED"
    trace = reduced.properties[0].trace
    assert trace.steps and trace.cycle_start is not None
    assert {s.action for s in trace.steps[trace.cycle_start:]} <= {str(Up()), str(Down())}


def test_a_model_without_the_hook_is_refused():
    class Plain(SpotModel):
        subsumption = None
    with pytest.raises(ValueError, match="reduction 'budgets' is not written for this model"):
        LocalEngine(reductions=("budgets",)).explore(Plain(), SpotConfig(), [])


def test_the_twins_kept_do_not_depend_on_the_order_they_were_found_in():
    """A level of twins of three keys, spent (i, j) for i < 3, j < 2, beside states found before with
    (1, 1): the twins with (0, 0) are kept, every other one goes to its first covering twin in
    lexicographic order, which is kept, whatever the order of the level."""
    older = [(fingerprint_of(k, (1, 1)), k, (1, 1)) for k in range(2)]
    level = [(fingerprint_of(k, (i, j)), k, (i, j)) for k in range(3) for i in range(3) for j in range(2)]
    level = [c for c in level if c[0] not in {o[0] for o in older}]
    results = []
    for seed in range(5):
        twins = Twins()
        known = {fp for fp, _, _ in older + level}
        shuffled = level[:]
        random.Random(seed).shuffle(shuffled)
        results.append((twins.settle_level(shuffled, known), dict(twins.redirect)))
    assert all(r == results[0] for r in results)
    keep, redirect = results[0]
    assert keep == {fingerprint_of(k, (0, 0)) for k in range(3)}
    assert redirect[fingerprint_of(2, (2, 1))] == fingerprint_of(2, (0, 0))
    assert all(target in keep for target in redirect.values())
    assert lower((1, 2)) == ((0, 0), (0, 1), (0, 2), (1, 0), (1, 1))


def test_a_twin_is_found_by_its_fingerprint_exact_or_hashed():
    assert fingerprint_of("k", (0, 1), exact=True) == ("k", (0, 1))
    assert fingerprint_of(7, (0, 1)) == hash((7, (0, 1)))


def test_the_counters_the_spark_engine_packs_come_back_whole_and_too_large_ones_are_refused():
    spent = (0, 1, 0, 2, 0, 0, 0, 0, 0, 0, 31)
    assert unpack(pack(spent), len(spent)) == spent
    with pytest.raises(ValueError, match="does not fit in 64 bits"):
        pack((32,))
    with pytest.raises(ValueError, match="does not fit in 64 bits"):
        pack((0,) * 13)
