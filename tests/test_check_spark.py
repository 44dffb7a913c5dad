"""`rabbitproof check --engine spark`: the observed setup machine ships to Spark executors as it is, and
the Spark engine answers every question as the local engine does, with equally short executions."""
from __future__ import annotations

from pathlib import Path

from spark_check.check import check_setup
from spark_check.engine import LocalEngine, disagreements
from spark_check.setup_file import read_setup
from spark_check.spark_engine import SparkEngine

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_spark_answers_as_the_local_engine_does():
    engine = SparkEngine("local[2]")
    try:
        for name in ("requeue-on-failure", "auto-ack"):
            setup = read_setup(EXAMPLES / f"{name}.toml")
            local, spark = check_setup(setup, LocalEngine()), check_setup(setup, engine)
            assert spark.result.engine == "spark"
            assert disagreements(local.result, spark.result) == []
            assert [a.verdict for a in spark.answers] == [a.verdict for a in local.answers]
            assert [len(a.trace.steps) if a.trace else None for a in spark.answers] == \
                   [len(a.trace.steps) if a.trace else None for a in local.answers]
    finally:
        engine.close()
