"""The manifest: distinct states and depth pinned per configuration (spark_check/manifest.json), a
regression test for free, as TLA+ projects keep."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping

from .results import ExplorationResult

MANIFEST = Path(__file__).with_name("manifest.json")


def read_manifest(path: Path) -> dict[str, dict[str, int]]:
    """The pinned counts per configuration (empty when there is no manifest yet)."""
    if not path.exists():
        return {}
    return json.loads(path.read_text(encoding="utf-8")).get("configs", {})


def write_manifest(path: Path, pins: Mapping[str, Mapping[str, int]]) -> None:
    data = {
        "about": "Distinct states and depth (BFS levels) per configuration, pinned by "
                 "`python -m spark_check.verify --update-manifest`; verify fails when they change.",
        "configs": {name: dict(pins[name]) for name in sorted(pins)},
    }
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def pins_of(result: ExplorationResult) -> dict[str, int]:
    return {"distinct_states": result.distinct_states, "depth": result.depth}


def compare(result: ExplorationResult, pinned: Mapping[str, int] | None) -> list[str]:
    """How ``result`` differs from its manifest entry, one phrase per figure."""
    if pinned is None:
        return ["no manifest entry (run with --update-manifest)"]
    out = []
    for key, value in pins_of(result).items():
        if pinned.get(key) != value:
            out.append(f"manifest {key.replace('_', ' ')} {pinned.get(key)} != {value}")
    return out


def manifest_check(result: ExplorationResult, path: Path = MANIFEST) -> str | None:
    """One line comparing a complete, unreduced exploration with its manifest entry; None when the
    configuration has no entry or the result cannot be compared (cut short, or reduced)."""
    pinned = read_manifest(path).get(result.config)
    if pinned is None or not result.complete or result.reductions:
        return None
    differences = compare(result, pinned)
    if differences:
        return "manifest: " + "; ".join(differences)
    return (f"manifest: {result.distinct_states:,} distinct states and depth {result.depth} "
            f"as pinned for {result.config}")
