"""The files the Spark engine's executors write and read themselves, beside the Parquet level rows.

*State groups.* An executor that expands part of a level pickles the successors new to its task in groups
(``GROUP_STATES`` to one ``pickle.dumps``) and writes them, one after the other, to one file per task
attempt, ``states/level=N/part-P-A.pkl``, with their offsets in ``part-P-A.off``. A group's id says where
it lies: ``P << 40 | A << 32 | g``, the g-th group of attempt A of task P. The rows of a level name a
state by (group, index in the group); the executor that expands it reads just that group, at its
offset. A task run again writes files of its own attempt, and the rows that survive name only the
attempt Spark kept.

*Visited fingerprints.* The deduplication of a level runs in Spark partitions by fingerprint, always into
the same number of partitions, so a fingerprint always falls into the same one. Partition P keeps every
fingerprint it ever saw, sorted, in ``visited/part-P/level=N.parquet`` (one column of longs; N: the
level that made it); the
task deduplicating level N reads the newest file of a level before N and writes level N's. A task run
again reads the same file and writes the same result. A partition a level gave no row writes no file;
the next reads the newest one there is.

Every file is written under a temporary name and renamed, so a reader never sees half of one. The
directory must be one every executor and the driver see at the same path (local mode, or NFS).
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np

ATTEMPTS = 1 << 8               # attempts of one task told apart in a group id
GROUPS = 1 << 32                # groups of one task attempt


def group_id(part: int, attempt: int, g: int) -> int:
    """The id of the g-th group that attempt ``attempt`` of task ``part`` wrote."""
    if not (0 <= attempt < ATTEMPTS and 0 <= g < GROUPS and 0 <= part < (1 << 23)):
        raise ValueError(f"group {g} of attempt {attempt} of task {part} has no id")
    return part << 40 | attempt << 32 | g


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


class GroupWriter:
    """The pickled groups one task attempt writes for a level."""

    def __init__(self, states_dir: str, part: int, attempt: int) -> None:
        self.directory = Path(states_dir)
        self.part, self.attempt = part, attempt
        self.blobs: list[bytes] = []

    def add(self, blob: bytes) -> int:
        """Keep ``blob``; return its group id."""
        self.blobs.append(blob)
        return group_id(self.part, self.attempt, len(self.blobs) - 1)

    def close(self) -> None:
        """Write the groups and their offsets (nothing when there are none)."""
        if not self.blobs:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        name = f"part-{self.part}-{self.attempt}"
        offsets = np.zeros(len(self.blobs) + 1, dtype=np.int64)
        np.cumsum([len(b) for b in self.blobs], out=offsets[1:])
        _atomic_write(self.directory / f"{name}.pkl", b"".join(self.blobs))
        _atomic_write(self.directory / f"{name}.off", offsets.tobytes())
        self.blobs = []


class GroupReader:
    """Reads groups of one level by id, each file opened once."""

    def __init__(self, states_dir: str) -> None:
        self.directory = Path(states_dir)
        self.files: dict[int, tuple[int, np.ndarray]] = {}     # (part, attempt) key -> (fd, offsets)

    def get(self, grp: int) -> bytes:
        key = grp >> 32
        if key not in self.files:
            name = f"part-{key >> 8}-{key & (ATTEMPTS - 1)}"
            offsets = np.frombuffer((self.directory / f"{name}.off").read_bytes(), dtype=np.int64)
            self.files[key] = (os.open(self.directory / f"{name}.pkl", os.O_RDONLY), offsets)
        fd, offsets = self.files[key]
        g = grp & (GROUPS - 1)
        start, end = int(offsets[g]), int(offsets[g + 1])
        return os.pread(fd, end - start, start)

    def close(self) -> None:
        for fd, _ in self.files.values():
            os.close(fd)
        self.files = {}


_VISITED = re.compile(r"level=(\d+)\.parquet")


def _visited_levels(directory: Path) -> list[int]:
    if not directory.is_dir():
        return []
    return sorted(int(m.group(1)) for f in os.listdir(directory) if (m := _VISITED.fullmatch(f)))


def visited_before(visited_dir: str, part: int, level: int) -> np.ndarray:
    """The sorted fingerprints partition ``part`` had seen before ``level`` (empty at the start)."""
    directory = Path(visited_dir) / f"part-{part}"
    earlier = [n for n in _visited_levels(directory) if n < level]
    if not earlier:
        return np.zeros(0, dtype=np.int64)
    import pyarrow.parquet as pq

    return pq.read_table(directory / f"level={earlier[-1]}.parquet").column("fp").to_numpy()


def write_visited(visited_dir: str, part: int, level: int, fingerprints: np.ndarray) -> None:
    directory = Path(visited_dir) / f"part-{part}"
    directory.mkdir(parents=True, exist_ok=True)
    import pyarrow as pa
    import pyarrow.parquet as pq

    tmp = directory / f"level={level}.parquet.tmp"
    pq.write_table(pa.table({"fp": pa.array(fingerprints, pa.int64())}), tmp, compression="lz4")
    os.replace(tmp, directory / f"level={level}.parquet")


def new_in_partition(visited: np.ndarray, fps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Of the candidate fingerprints ``fps`` (any order, repeats), the positions of the first candidate of
    each fingerprint not in ``visited`` (sorted), and ``visited`` with those fingerprints added, sorted."""
    unique, first = np.unique(fps, return_index=True)
    if len(visited):
        at = np.searchsorted(visited, unique)
        known = visited[np.minimum(at, len(visited) - 1)] == unique
        fresh = ~known
        unique, first, at = unique[fresh], first[fresh], at[fresh]
        merged = np.insert(visited, at, unique)
    else:
        merged = unique
    return first, merged


def drop_visited_after(visited_dir: str, level: int) -> None:
    """Remove what a killed run wrote after ``level``, its last recorded one."""
    _drop_visited(visited_dir, lambda n, newest: n > level)


def drop_visited_before(visited_dir: str, level: int) -> None:
    """Keep, per partition, only its newest file up to ``level`` (all a later level reads)."""
    _drop_visited(visited_dir, lambda n, newest: n < newest)


def _drop_visited(visited_dir: str, drop: Any) -> None:
    root = Path(visited_dir)
    if not root.is_dir():
        return
    for part in root.iterdir():
        levels = _visited_levels(part)
        for n in levels:
            if drop(n, levels[-1]):
                (part / f"level={n}.parquet").unlink(missing_ok=True)
        for tmp in part.glob("*.tmp"):
            tmp.unlink(missing_ok=True)
