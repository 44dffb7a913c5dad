"""The manifest: distinct states and depth pinned per configuration (rabbitproof/explore/manifest.json), a
regression test for free, as TLA+ projects keep."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping

from rabbitproof.spark_check.results import ExplorationResult

MANIFEST = Path(__file__).with_name("manifest.json")


def read_manifest(path: Path) -> dict[str, dict]:
    """The pinned counts per configuration (empty when there is no manifest yet). An entry holds the
    full search's counts, and under ``reduced`` those of each reduction (by its names joined with +)."""
    if not path.exists():
        return {}
    return json.loads(path.read_text(encoding="utf-8")).get("configs", {})


def write_manifest(path: Path, pins: Mapping[str, Mapping[str, int]]) -> None:
    data = {
        "about": "Distinct states and depth (BFS levels) per configuration, full and under each reduction "
                 "(reduced), pinned by `rabbitproof verify --part explore --update-manifest [--reduce ...]`; "
                 "verify fails when they change.",
        "configs": {name: dict(pins[name]) for name in sorted(pins)},
    }
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def pins_of(result: ExplorationResult) -> dict[str, int]:
    return {"distinct_states": result.distinct_states, "depth": result.depth}


def reduction_key(reductions: tuple[str, ...]) -> str:
    return "+".join(reductions)


def entry_for(result: ExplorationResult, entry: Mapping | None) -> Mapping[str, int] | None:
    """The pins ``result`` is held to within a configuration's entry: the full counts, or those of its
    reductions."""
    if entry is None:
        return None
    if not result.reductions:
        return {k: v for k, v in entry.items() if k != "reduced"}
    return entry.get("reduced", {}).get(reduction_key(result.reductions))


def pinned_entry(entry: Mapping | None, result: ExplorationResult) -> dict:
    """A configuration's entry with ``result``'s counts pinned (the other searches' pins kept)."""
    entry = dict(entry or {})
    if not result.reductions:
        entry.update(pins_of(result))
    else:
        reduced = dict(entry.get("reduced", {}))
        reduced[reduction_key(result.reductions)] = pins_of(result)
        entry["reduced"] = reduced
    return entry


def compare(result: ExplorationResult, entry: Mapping | None) -> list[str]:
    """How ``result`` differs from its manifest entry (the configuration's), one phrase per figure."""
    pinned = entry_for(result, entry)
    if pinned is None:
        what = f" for --reduce {reduction_key(result.reductions)}" if result.reductions else ""
        return [f"no manifest entry{what} (run with --update-manifest)"]
    out = []
    for key, value in pins_of(result).items():
        if pinned.get(key) != value:
            out.append(f"manifest {key.replace('_', ' ')} {pinned.get(key)} != {value}")
    return out


def manifest_check(result: ExplorationResult, path: Path = MANIFEST) -> str | None:
    """One line comparing a complete exploration with its manifest entry (full, or under the same
    reductions); None when there is no such entry or the search was cut short."""
    entry = read_manifest(path).get(result.config)
    if entry_for(result, entry) is None or not result.complete:
        return None
    differences = compare(result, entry)
    if differences:
        return "manifest: " + "; ".join(differences)
    reduced = f" under --reduce {reduction_key(result.reductions)}" if result.reductions else ""
    return (f"manifest: {result.distinct_states:,} distinct states and depth {result.depth} "
            f"as pinned for {result.config}{reduced}")
