"""Exhaustive exploration of bounded configurations of the specification (DESIGN.md, spark_check).

The engines (engine.py: the local one; spark_engine.py: Spark) and what they share (expansion.py,
assembly.py, results.py, the reductions' hooks in reductions.py). They know nothing of the spec's
meaning: a model gives initial states, enabled actions, steps, properties, and optionally the hooks of
its reductions. The command line is `rabbitproof explore` (rabbitproof/explore/command.py).

From Python::

    from rabbitproof.spark_check import LocalEngine
    result = LocalEngine().explore(spec.machine, spec.configs.get("ack_basics"), properties)
    result.distinct_states, result.depth, result.ok, result.properties[0].trace.lines()

Either engine (``engine_named("spark", master="local[2]")``) explores any model with the
``spec.machine`` interface; the tests run them on ``tests/toy_model.py``. ``LocalEngine(reductions=("por",))``
(or the same option of the Spark engine) explores under the reduction the model offers through its
``fused_takes`` hook (spec.por for the spec), which changes no verdict.
"""
from .engine import Engine, ExplorationResult, LocalEngine, PropertyResult, Trace, TraceStep, disagreements
from .engines import ENGINES, engine_named

__all__ = [
    "ENGINES", "Engine", "ExplorationResult", "LocalEngine", "PropertyResult", "Trace", "TraceStep",
    "disagreements", "engine_named",
]
