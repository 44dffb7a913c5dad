"""The engines by name: ``local`` (spark_check.engine.LocalEngine) and ``spark``
(spark_check.spark_engine.SparkEngine).

The Spark engine's module is imported when it is first asked for, by name (``importlib``): pyspark is
heavy and the local engine needs none of it. Neither engine module imports this one.
"""
from __future__ import annotations

import importlib
from typing import Any, Callable

from rabbitproof.extras import require

from .engine import Engine, LocalEngine


def _spark_engine(**options: Any) -> Engine:
    """The Spark engine, loaded on first use (MissingExtra when the spark extra is not installed)."""
    require("spark", "the Spark engine (--engine spark)")
    return importlib.import_module("rabbitproof.spark_check.spark_engine").SparkEngine(**options)


ENGINES: dict[str, Callable[..., Engine]] = {"local": LocalEngine, "spark": _spark_engine}


def engine_named(name: str, **options: Any) -> Engine:
    """The engine registered under ``name``, built with ``options``; ValueError (one line) otherwise."""
    if name not in ENGINES:
        raise ValueError(f"unknown engine {name!r}; available: {', '.join(sorted(ENGINES))}")
    return ENGINES[name](**options)
