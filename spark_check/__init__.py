"""Exhaustive exploration of bounded configurations of the specification (DESIGN.md, spark_check).

Command line::

    python -m spark_check list                                  # configurations and properties
    python -m spark_check explore CONFIG [--engine local|spark] [--master URL] [--reduce por|none]
                                 [--checkpoint DIR | --resume DIR]
                                 [--bound NAME=VALUE ...] [--property NAME ...] [--json FILE] [--chart DIR]
                                 [--chart-witnesses] [--max-states N] [--stop-on-violation] [--exact]
                                 [--show-state] [--progress | --no-progress]
    python -m rabbitproof.explore.standard [CONFIG ...] [--update-manifest] [--engine E] [--master URL] [--reduce R]  # make verify
    python -m rabbitproof.bench.engines [CONFIG ...] [--engines local,spark] [--master URL] [--reduce R]             # make bench
    python -m rabbitproof.bench.reductions [CONFIG ...] [--reduce por]   # full vs reduced: same verdicts (make bench)

Exit codes: 0 every expectation met, 1 some check failed, 2 bad input (one line on stderr).

From Python::

    from spark_check import LocalEngine
    result = LocalEngine().explore(spec.machine, spec.configs.get("ack_basics"), properties)
    result.distinct_states, result.depth, result.ok, result.properties[0].trace.lines()

``verify.verify(model, configs, registry, manifest_path, engine=...)`` and ``bench.bench(model, configs,
registry, engine=...)`` take any model with the ``spec.machine`` interface and either engine
(``engine_named("spark", master="local[2]")``); the tests run them on ``tests/toy_model.py``.
``LocalEngine(reductions=("por",))`` (or the same option of the Spark engine) explores under the
partial-order reduction of ``spark_check.reductions``, which changes no verdict.
"""
from .engine import Engine, ExplorationResult, LocalEngine, PropertyResult, Trace, TraceStep, disagreements
from .engines import ENGINES, engine_named

__all__ = [
    "ENGINES", "Engine", "ExplorationResult", "LocalEngine", "PropertyResult", "Trace", "TraceStep",
    "disagreements", "engine_named",
]
