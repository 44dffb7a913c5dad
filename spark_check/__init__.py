"""Exhaustive exploration of bounded configurations of the specification (DESIGN.md, spark_check)."""
from .engine import ENGINES, disagreements, Engine, ExplorationResult, LocalEngine, PropertyResult, Trace, TraceStep, engine_named

__all__ = ["ENGINES", "disagreements", "Engine", "ExplorationResult", "LocalEngine", "PropertyResult", "Trace", "TraceStep", "engine_named"]
