"""Exhaustive exploration of bounded configurations of the specification (DESIGN.md, spark_check)."""
from .engine import ENGINES, Engine, ExplorationResult, LocalEngine, PropertyResult, Trace, TraceStep, engine_named

__all__ = ["ENGINES", "Engine", "ExplorationResult", "LocalEngine", "PropertyResult", "Trace", "TraceStep", "engine_named"]
