"""`rabbitproof check --engine spark`: the observed setup machine ships to Spark executors as it is, and
the Spark engine answers every question as the local engine does, with equally short executions."""
from __future__ import annotations

from pathlib import Path

import pytest

from rabbitproof.spark_check.engine import LocalEngine, disagreements
from rabbitproof.spark_check.spark_engine import SparkEngine

from rabbitproof.check.answers import DEFAULT_REDUCTIONS, check_setup
from rabbitproof.check.setup_file import read_setup

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
