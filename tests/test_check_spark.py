"""`rabbitproof check --engine spark`: the observed setup machine ships to Spark executors as it is, and
the Spark engine answers every question as the local engine does, with equally short executions, by the
same methods (the smaller setups searched as Spark jobs too)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from rabbitproof.spark_check.engine import LocalEngine, disagreements
from rabbitproof.spark_check.spark_engine import SparkEngine

from rabbitproof.check import cross_checks
from rabbitproof.check.answers import DEFAULT_REDUCTIONS, check_setup
from rabbitproof.check.cross_checks import setup_text
from rabbitproof.check.methods import answer_setup
from rabbitproof.check.setup_file import parse_setup, read_setup

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="module")
def engine():
    """One Spark session for the module (starting one costs about 20 s); each test sets its reductions."""
    spark = SparkEngine("local[2]")
    yield spark
    spark.close()


def test_spark_answers_as_the_local_engine_does(engine):
    engine.reductions = ()
    lassos = 0
    for name in ("requeue-on-failure", "auto-ack"):
        setup = read_setup(EXAMPLES / f"{name}.toml")
        local, spark = check_setup(setup, LocalEngine()), check_setup(setup, engine)
        assert spark.result.engine == "spark"
        assert disagreements(local.result, spark.result) == []
        assert [a.verdict for a in spark.answers] == [a.verdict for a in local.answers]
        assert [len(a.trace.steps) if a.trace else None for a in spark.answers] == \
               [len(a.trace.steps) if a.trace else None for a in local.answers]
        for mine, theirs in zip(local.answers, spark.answers):     # the same lasso: the same loop
            if mine.trace is not None and mine.trace.cycle_start is not None:
                assert theirs.trace.cycle_start == mine.trace.cycle_start
                assert [s.text() for s in theirs.trace.steps[theirs.trace.cycle_start:]] == \
                       [s.text() for s in mine.trace.steps[mine.trace.cycle_start:]]
                lassos += 1
    assert lassos == 1      # the requeue loop of requeue-on-failure.toml


def test_spark_answers_as_the_local_engine_does_under_symmetry(engine):
    """Two identical workers (the two-workers example with one message), with `check`'s default
    reductions: the setup machine's own symmetry (SetupMachine.symmetry), pure reads
    (rabbitproof.check.pure_reads) and spent budgets (rabbitproof.check.spent_budgets) are rebuilt on the
    executors, and both engines keep the same states."""
    from rabbitproof.check.setup_file import parse_setup

    text = (EXAMPLES / "two-workers.toml").read_text().replace("messages = 2", "messages = 1")
    setup = parse_setup(text, "two-workers.toml")
    engine.reductions = DEFAULT_REDUCTIONS
    try:
        local = check_setup(setup, LocalEngine(reductions=DEFAULT_REDUCTIONS))
        spark = check_setup(setup, engine)
    finally:
        engine.reductions = ()
    assert spark.result.reductions == DEFAULT_REDUCTIONS and disagreements(local.result, spark.result) == []
    assert spark.result.distinct_states < check_setup(setup, LocalEngine()).result.distinct_states
    # Twins that spent less of the faults' budgets left out by both engines alike (spark_check.subsumption).
    without = check_setup(setup, LocalEngine(reductions=("por", "symmetry"))).result.distinct_states
    assert spark.result.distinct_states < without
    assert [a.verdict for a in spark.answers] == [a.verdict for a in local.answers]


# One publisher of two confirmed persistent messages, a worker that requeues what fails and may lose its
# connection: "lost" and "waits" are proved, "twice" is found in a smaller setup, "order" and "loop" are
# left to the exhaustive search (the one method that answers a loop: can happen).
THREE_METHODS = setup_text(({"name": "web", "confirms": True, "persistent": True, "messages": 2},),
                           ({"name": "worker", "prefetch": 1, "on_failure": "nack-requeue"},),
                           faults=("connection_closed_consumers",))


def _explorations(engine, monkeypatch) -> list:
    """Each exploration ``engine`` runs from now on, as (configuration name, machine), in order."""
    ran = []
    explore = engine.explore

    def spy(model, config, *args, **kwargs):
        ran.append((config.name, model))
        return explore(model, config, *args, **kwargs)
    monkeypatch.setattr(engine, "explore", spy)
    return ran


def _without_time(how: str) -> str:
    """An answer's "how" without the seconds it took, which differ from one engine to the other."""
    return re.sub(r", [0-9.]+ s\)", ")", how)


def test_spark_answers_by_the_same_methods_from_the_same_smaller_setups(engine, monkeypatch):
    """`check`'s three methods on each engine: every answer, how it was obtained (the smaller setup it
    came from and that setup's states, the argument, the search) and its execution the same, the
    smaller setups searched one by one on the engine given (Spark jobs on Spark)."""
    setup = parse_setup(THREE_METHODS, "three-methods.toml")
    engine.reductions = DEFAULT_REDUCTIONS
    local_engine = LocalEngine(reductions=DEFAULT_REDUCTIONS)
    on_local, on_spark = _explorations(local_engine, monkeypatch), _explorations(engine, monkeypatch)
    try:        # time enough for every search on a loaded machine: what each engine answers is then the same
        local = answer_setup(setup, local_engine, time_limit=3600)
        spark = answer_setup(setup, engine, time_limit=3600)
    finally:
        engine.reductions = ()
    assert spark.result.engine == "spark" and disagreements(local.result, spark.result) == []
    assert [a.method for a in spark.answers] == ["proved", "found", "exhaustive", "exhaustive", "proved"]
    for mine, theirs in zip(local.answers, spark.answers):
        assert (theirs.key, theirs.verdict, theirs.method, theirs.rules, theirs.invariants) == \
               (mine.key, mine.verdict, mine.method, mine.rules, mine.invariants)
        assert _without_time(theirs.how) == _without_time(mine.how)
        assert (theirs.trace is None) == (mine.trace is None)
        if mine.trace is not None:
            assert [s.text() for s in theirs.trace.steps] == [s.text() for s in mine.trace.steps]
    found = next(a for a in spark.answers if a.method == "found")
    assert "found in the smaller setup publisher 'web' with 1 message, consumer 'worker'; faults: connection " \
           "closed (91 states" in found.how
    # The same smaller setups, in the same order, each explored by the engine given, then the setup itself.
    assert on_spark == on_local
    assert [name for name, _ in on_spark].count("smaller") >= 3 and on_spark[-1][0] == "three-methods"


def test_spark_finds_the_same_requeue_loop_beyond_the_search_s_bounds(engine, monkeypatch):
    """A loop in a setup beyond the exhaustive search's bounds is searched for in its smaller setups on the
    engine given (Spark jobs on Spark): the same smaller setup, the same lasso rebuilt in the full setup."""
    from rabbitproof.check.larger_loops import check_lasso, search_loop

    setup = read_setup(cross_checks.LARGER / "requeueing-workers.toml")
    engine.reductions = DEFAULT_REDUCTIONS
    local_engine = LocalEngine(reductions=DEFAULT_REDUCTIONS)
    on_local, on_spark = _explorations(local_engine, monkeypatch), _explorations(engine, monkeypatch)
    try:
        local = search_loop(setup, 3600, engine=local_engine)
        spark = search_loop(setup, 3600, engine=engine)
    finally:
        engine.reductions = ()
    assert local.found is not None and spark.found is not None
    assert spark.found.smaller.text() == local.found.smaller.text() and spark.found.states == local.found.states
    assert [s.text() for s in spark.found.trace.steps] == [s.text() for s in local.found.trace.steps]
    assert spark.found.trace.cycle_start == local.found.trace.cycle_start
    assert check_lasso(setup, spark.found.trace) == ""
    assert on_spark == on_local and on_spark and all(name == "smaller" for name, _ in on_spark)
