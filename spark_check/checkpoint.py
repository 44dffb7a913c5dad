"""The Spark engine's level store, which is also its checkpoint.

Each BFS level is one Parquet directory ``levels/level=N`` of rows (fingerprint, parent fingerprint,
action index, and where the state lies: group and index), written by Spark: the parent links. Beside
them, files the executors write themselves (``spark_check.level_files``): ``states/level=N``, the
states found for level N, pickled in groups, and ``visited/part-P``, the fingerprints seen so far by
each deduplication partition. The frontier is the last level's rows with their groups; the states of
earlier levels, and the older visited files, are removed once the next level is recorded. After a level
is written, ``progress.json`` records what the driver knows (counts, coverage, decided properties,
deadlocks, the number of partitions) and the last complete level, replaced atomically. A run killed at
any moment resumes from the last level that ``progress.json`` names: whatever was written after it is
removed and written again. ``identity`` names the exploration (model, configuration and its bounds,
properties, reductions), and a resume refuses a directory written by another.

The directory must be a path the driver and every executor see (local mode, a single machine, or a
shared file system such as NFS mounted at the same path everywhere).
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

from .assembly import SearchOutcome, bounds_of

FORMAT = 3          # 3: states in group files, visited fingerprints per partition, written by executors
PROGRESS = "progress.json"


def identity(model: Any, config: Any, properties: Sequence[Any], reductions: Sequence[str]) -> dict[str, Any]:
    """What makes two explorations the same one, as JSON data."""
    name = getattr(model, "__name__", type(model).__name__)
    return {
        "model": name,
        "config": config.name,
        "bounds": bounds_of(config),
        "roles": repr(getattr(config, "roles", None)),
        "properties": [p.name for p in properties],
        "reductions": list(reductions),
    }


def _local(path: str) -> str | None:
    """The local path of ``path`` ("file:" URLs and plain paths); None for other file systems."""
    if path.startswith("file:"):
        return path[len("file:"):]
    return None if "://" in path else path


def check_writable(directory: str) -> None:
    """ValueError (one line) when ``directory`` cannot be created or written, or is no path of this
    machine's file system (executors write into it themselves)."""
    local = _local(directory)
    if local is None:
        raise ValueError(f"checkpoint directory {directory!r} must be a path every executor sees (local or NFS), "
                         "not a URL")
    try:
        os.makedirs(local, exist_ok=True)
        probe = os.path.join(local, ".write-test")
        with open(probe, "w") as f:
            f.write("ok")
        os.remove(probe)
    except OSError as e:
        raise ValueError(f"checkpoint directory {directory!r} cannot be written: {e.strerror or e}") from None


def read_progress(directory: str) -> dict[str, Any]:
    """The progress record of a checkpoint; ValueError (one line) when there is none."""
    local = _local(directory)
    if local is None:
        raise ValueError(f"--resume needs a local directory, not {directory!r}")
    path = Path(local) / PROGRESS
    if not path.is_file():
        raise ValueError(f"resume directory {directory!r} holds no checkpoint ({PROGRESS} is missing)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"resume directory {directory!r}: {PROGRESS} cannot be read: {e}") from None
    if data.get("format") != FORMAT:
        raise ValueError(f"resume directory {directory!r} was written by another version (format {data.get('format')})")
    return data


def check_same(directory: str, data: dict[str, Any], wanted: dict[str, Any]) -> None:
    """ValueError naming the first difference between the checkpoint's exploration and this one."""
    had = data["identity"]
    for key in ("model", "config", "bounds", "roles", "properties", "reductions"):
        if had.get(key) != wanted[key]:
            if key == "bounds":
                diff = sorted(k for k in wanted[key] if had[key].get(k) != wanted[key][k])
                what = ", ".join(f"{k}={had[key].get(k)} (now {wanted[key][k]})" for k in diff)
            else:
                what = f"{had.get(key)!r}, not {wanted[key]!r}"
            raise ValueError(f"resume directory {directory!r} holds another exploration: {key} {what}")


class LevelStore:
    """The Parquet directories of one exploration, and its progress record."""

    def __init__(self, directory: str) -> None:
        self.directory = directory.rstrip("/")
        local = _local(self.directory)
        if local is None:
            raise ValueError(f"level store {directory!r} must be a path every executor sees (local or NFS), not a URL")
        self.local = local

    def level_path(self, level: int) -> str:
        return f"{self.directory}/levels/level={level}"

    def states_path(self, level: int) -> str:
        """The states of the candidates for ``level``, found by expanding the level before, in group files
        (the rows of ``level_path(level)`` point into these groups)."""
        return f"{self.local}/states/level={level}"

    def graph_path(self, kind: str, level: int) -> str:
        """What liveness needs of ``level`` (spark_check.liveness), written by the executors that expand
        it: ``graph-states`` (each state's facts) and ``graph-edges`` (every edge out of it); and, under
        the ``budgets`` reduction, by the deduplication: ``graph-redirect`` (where an edge to a state left
        out goes, spark_check.subsumption)."""
        return f"{self.local}/graph-{kind}/level={level}"

    def visited_path(self) -> str:
        """The visited fingerprints of each deduplication partition (spark_check.level_files)."""
        return f"{self.local}/visited"

    def paths(self, levels: range | Sequence[int]) -> list[str]:
        return [self.level_path(n) for n in levels]

    def drop_levels_after(self, level: int) -> None:
        """Remove levels (and their states and graph) a killed run wrote beyond its last recorded one. The
        graph of ``level`` stays: a resume expands ``level`` again and writes the same facts and edges
        (read back without duplicates)."""
        from .level_files import drop_visited_after      # the Spark engine's files: numpy, which only Spark brings
        self._drop(lambda n: n > level, ("levels", "states", "graph-states", "graph-edges", "graph-redirect"))
        drop_visited_after(self.visited_path(), level)

    def drop_states_before(self, level: int) -> None:
        """Remove the states of levels before ``level``, and visited files a later level no longer reads:
        once a level is recorded, only its own states are read again (the parent links, in ``levels``,
        stay)."""
        from .level_files import drop_visited_before
        self._drop(lambda n: n < level, ("states",))
        drop_visited_before(self.visited_path(), level)

    def _drop(self, which: Any, kinds: Sequence[str]) -> None:
        local = _local(self.directory)
        if local is None:
            return
        for kind in kinds:
            root = Path(local) / kind
            if root.is_dir():
                for child in root.iterdir():
                    if child.name.startswith("level=") and which(int(child.name[len("level="):])):
                        shutil.rmtree(child, ignore_errors=True)

    def write_progress(self, ident: dict[str, Any], level: int, outcome: SearchOutcome, levels: list[int],
                       level_of: dict[str, int], seconds: float, finished: bool = False,
                       partitions: int = 1) -> None:
        """Record, atomically, that ``level`` is complete and what the driver knows so far."""
        local = _local(self.directory)
        if local is None:
            return
        data = {
            "format": FORMAT,
            "identity": ident,
            "level": level,
            "finished": finished,
            "partitions": partitions,
            "level_sizes": levels,
            "level_of": level_of,
            "seconds": seconds,
            "outcome": {k: ({str(i): f for i, f in v.items()} if k == "decided_at" else sorted(v) if k == "cyclic"
                            else v) for k, v in asdict(outcome).items()},
        }
        tmp = Path(local) / (PROGRESS + ".tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, Path(local) / PROGRESS)


def outcome_from(data: dict[str, Any]) -> SearchOutcome:
    """The ``SearchOutcome`` a progress record holds."""
    raw = dict(data["outcome"])
    raw["decided_at"] = {int(i): f for i, f in raw["decided_at"].items()}
    raw["cyclic"] = set(raw.get("cyclic", ()))
    return SearchOutcome(**raw)
