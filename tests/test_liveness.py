"""Liveness on the explored graph (spark_check.liveness): fair cycles under weak fairness, lassos, ends,
and the graph kept only when asked; on the toy model of tests/toy_liveness.py, whose answers are known
by hand, and on the pieces of the search."""
from __future__ import annotations

import random

import pytest

from rabbitproof.spark_check.engine import LocalEngine
from rabbitproof.spark_check.liveness import components, cycle_through, fair_accepting

from tests.toy_liveness import JOB_DONE, JobConfig, JobModel, UnsureJobModel


def job(**config) -> object:
    result = LocalEngine().explore(JobModel(), JobConfig(**config), [], liveness=[JOB_DONE])
    (verdict,) = result.properties
    assert verdict.kind == "liveness" and verdict.decided
    return verdict


def test_a_cycle_that_never_takes_an_always_enabled_fair_step_is_no_counterexample():
    verdict = job()
    assert verdict.verdict == "holds" and verdict.trace is None


def test_without_fairness_the_cycle_is_a_lasso():
    trace = job(finish_fair=False).trace
    assert trace.cycle_start == 0
    assert [s.action for s in trace.steps] == ["flip the flag", "flip the flag"]
    assert trace.lines()[1] == "-- from here, steps 1 to 2 repeat for ever --"


def test_weak_fairness_does_not_force_a_step_disabled_somewhere_on_the_cycle():
    trace = job(finish_needs_flag=True).trace
    assert [s.action for s in trace.steps[trace.cycle_start:]] == ["flip the flag", "flip the flag"]


def test_an_end_where_the_property_stays_false_is_a_counterexample_without_a_cycle():
    trace = job(stuck=True).trace
    assert trace.cycle_start is None and trace.steps == ()


def test_an_end_is_where_no_fair_step_is_left_not_only_where_nothing_is_enabled():
    trace = job(idle=True, finish_fair=False).trace
    assert trace.cycle_start is None and trace.steps == ()
    assert job(idle=True).verdict == "holds"


def test_the_graph_is_kept_only_when_a_liveness_property_is_asked():
    asked = LocalEngine().explore(JobModel(), JobConfig(), [], liveness=[JOB_DONE])
    plain = LocalEngine().explore(JobModel(), JobConfig(), [])
    assert "liveness: graph kept (MB)" in asked.timings and not any("liveness" in k for k in plain.timings)
    assert plain.properties == ()


def test_a_search_cut_short_leaves_liveness_undecided():
    result = LocalEngine().explore(JobModel(), JobConfig(finish_fair=False), [], liveness=[JOB_DONE], max_states=1)
    assert result.properties[0].verdict == "UNDECIDED"


def test_a_fair_cycle_among_the_states_a_search_cut_short_expanded_is_a_counterexample():
    """Cut short at 3 states, the search has expanded (False, 0) and (False, 1), between which Flip goes
    round: a fair cycle of the full graph whatever lies beyond, so the property fails."""
    result = LocalEngine().explore(JobModel(), JobConfig(finish_fair=False), [], liveness=[JOB_DONE], max_states=3)
    assert not result.complete and result.error.startswith("more than 3 distinct states")
    (verdict,) = result.properties
    assert verdict.verdict == "VIOLATED" and verdict.trace.cycle_start == 0
    assert [s.action for s in verdict.trace.steps] == ["flip the flag", "flip the flag"]


def test_components_peel_what_lies_on_no_cycle():
    # 0 -> 1 <-> 2 -> 3, and 3 -> 3: components {1, 2} and {3}; 0 is alone.
    src, dst = [0, 1, 2, 2, 3], [1, 2, 1, 3, 3]
    comp = components(4, src, dst, [True] * 4)
    assert comp == [0, 1, 1, 3]
    # Restricted to {0, 1, 3}: no cycle but the loop on 3.
    assert components(4, src, dst, [True, True, False, True]) == [0, 1, -1, 3]


def test_a_component_is_fair_when_each_class_is_taken_in_it_or_disabled_somewhere():
    src, dst = [0, 1], [1, 0]
    comp = components(2, src, dst, [True] * 2)
    recurs = [True, False]
    taken_0 = [0, 0]
    assert fair_accepting(comp, src, dst, taken_0, [0b11, 0b11], recurs) == []   # class 1 owed
    assert fair_accepting(comp, src, dst, taken_0, [0b11, 0b01], recurs) == [0]  # 1 disabled at 1
    assert fair_accepting(comp, src, dst, taken_0, [0b1, 0b1], [False, False]) == []


def _reach(n: int, edges: list[tuple[int, int]]) -> list[set[int]]:
    """Each state's reachable states (itself included) by brute force."""
    out = [set() for _ in range(n)]
    for s, d in edges:
        out[s].add(d)
    reach = []
    for v in range(n):
        seen, todo = {v}, [v]
        while todo:
            for w in out[todo.pop()]:
                if w not in seen:
                    seen.add(w)
                    todo.append(w)
        reach.append(seen)
    return reach


def test_components_are_the_strongly_connected_components_on_random_graphs():
    """Two states share a component exactly when each reaches the other through kept states; a component
    is named by its smallest state (held against brute-force reachability on 300 seeded random graphs)."""
    rng = random.Random(5)
    for _ in range(300):
        n = rng.randint(1, 12)
        edges = [(rng.randrange(n), rng.randrange(n)) for _ in range(rng.randint(0, 3 * n))]
        keep = [rng.random() < 0.8 for _ in range(n)]
        comp = components(n, [s for s, _ in edges], [d for _, d in edges], keep)
        reach = _reach(n, [(s, d) for s, d in edges if keep[s] and keep[d]])
        for v in range(n):
            if not keep[v]:
                assert comp[v] == -1
                continue
            same = [w for w in range(n) if keep[w] and w in reach[v] and v in reach[w]]
            assert comp[v] == min(same), (n, edges, keep, v)


def test_the_cycle_meets_every_obligation_then_comes_back():
    # From a: a -> b (class 0), b -> a (class 1), a -> c (unfair), c -> a (unfair); c is where recurs holds.
    edges = [("a", "b", 0), ("b", "a", 1), ("a", "c", -1), ("c", "a", -1)]
    enabled = {"a": 0b11, "b": 0b11, "c": 0b11}
    path, classes = cycle_through("a", {"a", "b", "c"}, edges, enabled, {"c"})
    assert path[-1] == "a" and "c" in path and set(classes) >= {0, 1}
    with pytest.raises(RuntimeError):
        cycle_through("a", {"a", "b"}, [("a", "b", 0)], {"a": 1, "b": 1}, {"a"})


def test_a_reduction_that_may_lose_fair_cycles_leaves_unfair_cycles_undecided_and_says_so():
    """spark_check.reductions: the Flip cycle is unfair, but a reduction that may lose fair cycles cannot
    tell; a fair cycle it finds, or an end, still decides."""
    unsure = LocalEngine(reductions=("symmetry",))
    result = unsure.explore(UnsureJobModel(), JobConfig(), [], liveness=[JOB_DONE])
    assert result.properties[0].verdict == "UNDECIDED" and not result.ok
    assert result.notes == ("job_done undecided: the graph reduced by symmetry has cycles where it could fail, none "
                            "of them fair, and this reduction may lose fair cycles (spark_check.reductions); "
                            "explore without it (--reduce) to decide it",)
    for config in (JobConfig(finish_fair=False), JobConfig(stuck=True)):
        result = unsure.explore(UnsureJobModel(), config, [], liveness=[JOB_DONE])
        assert result.properties[0].verdict == "VIOLATED" and result.notes == ()
    full = LocalEngine().explore(UnsureJobModel(), JobConfig(), [], liveness=[JOB_DONE])
    assert full.properties[0].verdict == "holds"
