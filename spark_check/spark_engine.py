"""``SparkEngine``: the local engine's level-synchronous BFS on Spark (DESIGN.md, spark_check).

Per level:
1. the frontier (the last level's Parquet directory: fingerprint and pickled state) is expanded on the
   executors by ``expand_level``, a top-level function running the same ``Expander.expand`` as the local
   engine on each state: properties decided, deadlock, successors (deduplicated within the task) and, as
   one extra row per task, the task's counts;
2. the driver collects only those count rows (one per task: coverage, transitions, deadlocks, the smallest
   deciding fingerprint of each property);
3. Spark deduplicates the successors by fingerprint and anti-joins them against the visited set (the
   ``fp`` column of every level written so far), both in the JVM on 64-bit longs, and writes the new
   states, with their parent fingerprint and action index, as the next level's Parquet directory.

States cross between processes twice: pickled once by the executor that found them (only those new to
its task), unpickled once by the executor that expands them. The visited set, the frontier and the
parent links never reach the driver; shortest traces are rebuilt by looking up the parents of the few
deciding states level by level (one small query per level) and replaying the model on the driver.

The level directories are the checkpoint (spark_check.checkpoint): ``--checkpoint DIR`` keeps them,
``--resume DIR`` continues a killed run. Without either they go to a temporary directory, removed at
the end (on a cluster of several machines, give a ``--checkpoint`` on storage every executor sees).
"""
from __future__ import annotations

import gc
import os
import pickle
import shutil
import tempfile
import time
from collections import Counter
from functools import partial
from typing import Any, Iterator, Sequence

from pyspark import TaskContext
from pyspark.accumulators import AccumulatorParam
from pyspark.sql import functions as F

from spec.properties_api import Property

from .assembly import SearchOutcome, assemble
from .checkpoint import LevelStore, check_same, check_writable, identity, outcome_from, read_progress
from .engine import Engine, Model, ProgressCallback, too_many_states
from .expansion import diagnose
from .portable import Portable, portable
from .reductions import reduction_named
from .results import ExplorationResult
from .spark_session import check_master, is_local, ship_code, spark_session

# A level's rows, and what an executor returns for a level (the successors new to its task).
LEVEL_SCHEMA = EXPANDED_SCHEMA = "fp long, parent long, action int, state binary"
BATCH_ROWS = 4096


class _TaskCounts(AccumulatorParam):
    """Per-task counts sent back with the task: {partition: counts}. Keyed by partition, so a task that
    Spark runs again replaces its earlier counts instead of adding to them."""

    def zero(self, value: dict) -> dict:
        return {}

    def addInPlace(self, a: dict, b: dict) -> dict:
        a.update(b)
        return a


def expand_level(job: tuple[Portable, tuple[int, ...], Any], batches: Iterator[Any]) -> Iterator[Any]:
    """Expand every frontier state in ``batches`` (Arrow batches of fp, state); yield the successors new
    to this task and add the task's counts to the job's accumulator. Runs on executors: top-level, and
    pure but for the counts."""
    import pyarrow as pa

    described, undecided, tally = job
    expander = described.expander()
    expander.set_undecided(undecided)
    expand = expander.expand
    fingerprint = expander.fingerprint
    dumps, loads = pickle.dumps, pickle.loads
    seen: set[int] = set()
    decided_at: dict[int, int] = {}
    types: Counter[type] = Counter()
    transitions = deadlocks = expanded = 0
    first_deadlock: int | None = None
    error: tuple[str, int] | None = None
    clock = time.perf_counter
    python = pickling = 0.0         # seconds in this function: all of it, and pickling successors
    task_started = clock()
    schema = pa.schema([("fp", pa.int64()), ("parent", pa.int64()), ("action", pa.int32()), ("state", pa.binary())])

    def successors_batch(fps: list, parents: list, actions: list, states: list) -> Any:
        nonlocal pickling
        started = clock()
        blobs = [dumps(s, 5) for s in states]
        pickling += clock() - started
        return pa.RecordBatch.from_arrays(
            [pa.array(fps, pa.int64()), pa.array(parents, pa.int64()), pa.array(actions, pa.int32()),
             pa.array(blobs, pa.binary())], schema=schema)

    collector_was_on = gc.isenabled()
    gc.disable()        # no collector passes over the states, as in the local engine (expansion.PausedCollector)
    try:
        for batch in batches:
            if error is not None:
                continue
            out_fp: list[int] = []
            out_parent: list[int] = []
            out_action: list[int] = []
            out_state: list[bytes] = []
            started = clock()
            for fp, blob in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
                state = loads(blob)
                seen.add(fp)
                expanded += 1
                try:
                    decided, actions, successors, deadlocked = expand(state)
                    for d in decided:
                        if d not in decided_at or fp < decided_at[d]:
                            decided_at[d] = fp
                    if not actions:
                        if deadlocked:
                            deadlocks += 1
                            first_deadlock = fp if first_deadlock is None else min(first_deadlock, fp)
                        continue
                    types.update(map(type, actions))
                    transitions += len(actions)
                    for i, succ in enumerate(successors):
                        h = fingerprint(succ)
                        if h in seen:
                            continue
                        seen.add(h)
                        out_fp.append(h)
                        out_parent.append(fp)
                        out_action.append(i)
                        out_state.append(succ)
                except Exception as e:  # noqa: BLE001 - reported as the driver's error, with the trace to ``state``
                    error = (diagnose(expander, state, e), fp)
                    break
                if len(out_fp) >= BATCH_ROWS:
                    python += clock() - started
                    yield successors_batch(out_fp, out_parent, out_action, out_state)
                    started = clock()
                    out_fp, out_parent, out_action, out_state = [], [], [], []
            python += clock() - started
            if out_fp:
                yield successors_batch(out_fp, out_parent, out_action, out_state)
    finally:
        gc.collect(0)
        if collector_was_on:
            gc.enable()
    counts = {
        "decided_at": decided_at, "deadlocks": deadlocks, "first_deadlock": first_deadlock,
        "coverage": {t.__name__: n for t, n in types.items()}, "transitions": transitions,
        "error": error, "expanded": expanded,
        "seconds": {"python: expand, check, unpickle": python, "python: pickle successors": pickling,
                    "python task (wall)": clock() - task_started},
    }
    tally.add({TaskContext.get().partitionId(): counts})


class SparkEngine(Engine):
    """Level-synchronous BFS on Spark; must agree with ``LocalEngine`` state for state.

    ``master``: a Spark master URL (default ``local[*]``, or spark-submit's). ``checkpoint``: keep the
    level store in this directory. ``resume``: continue the run checkpointed in this directory.
    ``partitions``: files per level, hence tasks per level (default: twice the default parallelism).
    """

    name = "spark"

    def __init__(
        self,
        master: str | None = None,
        *,
        checkpoint: str | None = None,
        resume: str | None = None,
        partitions: int | None = None,
        reductions: Sequence[str] = (),
        exact: bool = False,
        driver_memory: str | None = None,
    ) -> None:
        if exact:
            raise ValueError("--exact keeps states in one process: it is for the local engine only")
        if checkpoint and resume and os.path.abspath(checkpoint) != os.path.abspath(resume):
            raise ValueError("give --checkpoint or --resume, not both (a resumed run keeps writing where it resumes)")
        if partitions is not None and partitions < 1:
            raise ValueError(f"partitions must be positive, not {partitions}")
        reduction_named(reductions)
        check_master(master)
        if checkpoint:
            check_writable(checkpoint)
        if resume:
            read_progress(resume)
        self.master = master
        self.checkpoint = checkpoint
        self.resume = resume
        self.partitions = partitions
        self.reductions = tuple(reductions)
        self.driver_memory = driver_memory
        self._session: Any = None

    def prepare(self, model: Model, config: Any, properties: Sequence[Property]) -> None:
        """Check, before any work, that the exploration can be sent to executors and that a resume
        directory holds this very exploration; ValueError (one line) otherwise."""
        portable(model, config, properties, self.reductions)
        if self.resume:
            check_same(self.resume, read_progress(self.resume), identity(model, config, properties, self.reductions))

    def session(self) -> Any:
        """The Spark session, started on first use and kept for the next exploration."""
        if self._session is None:
            self._session = spark_session(self.master, self.partitions or 8,
                                          self.driver_memory or ("2g" if is_local(self.master) else None))
            if self.partitions is None:
                parallelism = self._session.sparkContext.defaultParallelism
                self._session.conf.set("spark.sql.shuffle.partitions", str(max(2, 2 * parallelism)))
        return self._session

    def close(self) -> None:
        if self._session is not None:
            self._session.stop()
            self._session = None

    def explore(
        self,
        model: Model,
        config: Any,
        properties: Sequence[Property],
        *,
        max_states: int | None = None,
        stop_on_violation: bool = False,
        progress: ProgressCallback | None = None,
        action_types: Sequence[type] = (),
    ) -> ExplorationResult:
        self.prepare(model, config, properties)
        started = time.perf_counter()
        described = portable(model, config, properties, self.reductions)
        expander = described.expander()
        spark = self.session()
        session_seconds = time.perf_counter() - started
        ship_code(spark, described.modules())
        directory = self.resume or self.checkpoint
        temporary = directory is None
        if temporary:
            directory = tempfile.mkdtemp(prefix="rabbitproof-levels-")
        store = LevelStore(directory)
        try:
            run = _LevelRun(spark, store, described, expander, identity(model, config, properties, self.reductions),
                            properties, started)
            outcome = run.search(config, max_states, stop_on_violation, progress, resume=bool(self.resume))
            seconds = run.seconds()
            result = assemble(self.name, expander, outcome, run.parent_lookup(), seconds=seconds,
                              action_types=action_types, reductions=self.reductions)
            result.timings["session start (wall)"] = session_seconds
            result.timings["traces rebuilt (wall)"] = run.seconds() - seconds
            return result
        finally:
            if temporary:
                shutil.rmtree(directory, ignore_errors=True)


class VisitedSet:
    """The visited fingerprints, cached on the executors in a few chunks, each hash-partitioned by
    fingerprint like the deduplicated successors: the anti-join then moves no visited fingerprint (no
    shuffle, and no broadcast through the driver). Every level adds a chunk; past ``MERGE_AT`` chunks they
    are merged into one (an LSM tree's merge, so each fingerprint is re-partitioned O(log) times)."""

    MERGE_AT = 8

    def __init__(self, spark: Any, partitions: int) -> None:
        self.spark = spark
        self.partitions = partitions
        self.chunks: list[Any] = []

    def add(self, level: Any) -> None:
        """Add a level's (or several levels') rows."""
        self.chunks.append(level.select("fp").repartition(self.partitions, "fp").persist())   # cached on first use
        if len(self.chunks) > self.MERGE_AT:
            merged = self.chunks[0]
            for c in self.chunks[1:]:
                merged = merged.union(c)
            merged = merged.repartition(self.partitions, "fp").persist()
            merged.count()
            self.release()
            self.chunks = [merged]

    def unseen(self, candidates: Any) -> Any:
        """The candidate rows whose fingerprint is in no chunk."""
        for chunk in self.chunks:
            candidates = candidates.join(chunk, "fp", "left_anti")
        return candidates

    def release(self) -> None:
        for chunk in self.chunks:
            chunk.unpersist()
        self.chunks = []


class _LevelRun:
    """One exploration's driver loop over levels, with what the driver keeps between them (small:
    counts, and the level of each state a trace will lead to)."""

    def __init__(self, spark: Any, store: LevelStore, described: Portable, expander: Any, ident: dict,
                 properties: Sequence[Property], started: float) -> None:
        self.spark = spark
        self.store = store
        self.described = described
        self.expander = expander
        self.ident = ident
        self.is_always = [p.kind == "always" for p in properties]
        self.started = started
        self.earlier = 0.0                  # seconds spent by the run this one resumes
        self.level_sizes: list[int] = []
        self.level_of: dict[int, int] = {}  # fingerprint of a trace's target -> its level

    def seconds(self) -> float:
        return self.earlier + time.perf_counter() - self.started

    def search(self, config: Any, max_states: int | None, stop_on_violation: bool,
               progress: ProgressCallback | None, resume: bool) -> SearchOutcome:
        cap = config.max_states if max_states is None else max_states
        if resume:
            data = read_progress(self.store.directory)
            out = outcome_from(data)
            level = data["level"]
            self.level_sizes = list(data["level_sizes"])
            self.level_of = {int(k): v for k, v in data["level_of"].items()}
            self.earlier = data["seconds"]
            self.store.drop_levels_after(level)
            if data.get("finished"):
                return out
        else:
            out, level = self._write_initial_level(cap)
            if out.error is not None:
                return out
        spark = self.spark
        visited = VisitedSet(spark, int(spark.conf.get("spark.sql.shuffle.partitions")))
        visited.add(spark.read.schema(LEVEL_SCHEMA).parquet(*self.store.paths(range(level + 1))))
        try:
            while True:
                undecided = tuple(i for i in range(len(self.is_always)) if i not in out.decided_at)
                tally = spark.sparkContext.accumulator({}, _TaskCounts())
                frontier = spark.read.schema(LEVEL_SCHEMA).parquet(self.store.level_path(level)).select("fp", "state")
                expanded = frontier.mapInArrow(partial(expand_level, (self.described, undecided, tally)),
                                               EXPANDED_SCHEMA)
                fresh = visited.unseen(expanded.select("fp", "parent", "action", "state").dropDuplicates(["fp"]))
                job_started = time.perf_counter()
                fresh.write.mode("overwrite").parquet(self.store.level_path(level + 1))
                out.timings["level jobs (wall)"] = out.timings.get("level jobs (wall)", 0.0) + (
                    time.perf_counter() - job_started)
                self._merge(out, list(tally.value.values()), level)
                violated = any(self.is_always[i] for i in out.decided_at) or (config.deadlock_is_error and out.deadlocks)
                size = self.store.rows(level + 1, spark)
                if size == 0 or out.error is not None or (stop_on_violation and violated):
                    out.stopped = out.error is None and size > 0
                    self.store.drop_levels_after(level)
                    self._record(out, level, finished=True)
                    break
                level += 1
                visited.add(spark.read.schema(LEVEL_SCHEMA).parquet(self.store.level_path(level)))
                self.level_sizes.append(size)
                out.distinct_states += size
                out.depth = level + 1
                if out.distinct_states > cap:
                    out.error = too_many_states(cap)
                self._record(out, level, finished=out.error is not None)
                if progress is not None:
                    progress(out.distinct_states, out.depth, size, self.seconds())
                if out.error is not None:
                    break
        except KeyboardInterrupt:
            out.error = f"interrupted at depth {out.depth} after {out.distinct_states:,} distinct states"
        finally:
            visited.release()
        return out

    def _write_initial_level(self, cap: int) -> tuple[SearchOutcome, int]:
        """Level 0: the initial states, fingerprinted on the driver (they are few)."""
        fingerprint = self.expander.fingerprint
        rows: dict[int, Any] = {}
        for state in self.expander.initial_states():
            rows.setdefault(fingerprint(state), state)
        out = SearchOutcome(distinct_states=len(rows), depth=1 if rows else 0)
        self.level_sizes = [len(rows)]
        df = self.spark.createDataFrame(
            [(fp, fp, -1, pickle.dumps(s, 5)) for fp, s in rows.items()],
            LEVEL_SCHEMA)
        df.write.mode("overwrite").parquet(self.store.level_path(0))
        if len(rows) > cap:
            out.error = too_many_states(cap)
        self._record(out, 0, finished=out.error is not None)
        return out, 0

    def _merge(self, out: SearchOutcome, counts: list[dict], level: int) -> None:
        """Add one level's per-task counts to the outcome: the smallest fingerprint decides, so the
        result does not depend on how states fell into tasks."""
        for c in counts:
            for name, seconds in c["seconds"].items():
                out.timings[name] = out.timings.get(name, 0.0) + seconds
            out.transitions += c["transitions"]
            out.deadlocks += c["deadlocks"]
            for name, n in c["coverage"].items():
                out.coverage[name] = out.coverage.get(name, 0) + n
        for i in {i for c in counts for i in c["decided_at"]}:
            if i not in out.decided_at:
                out.decided_at[i] = fp = min(c["decided_at"][i] for c in counts if i in c["decided_at"])
                self.level_of[fp] = level
        deadlocked = [c["first_deadlock"] for c in counts if c["first_deadlock"] is not None]
        if deadlocked and out.first_deadlock is None:
            out.first_deadlock = min(deadlocked)
            self.level_of[out.first_deadlock] = level
        errors = sorted(c["error"] for c in counts if c["error"] is not None)
        if errors and out.error is None:
            out.error, out.error_fp = errors[0][0], errors[0][1]
            self.level_of[out.error_fp] = level

    def _record(self, out: SearchOutcome, level: int, finished: bool = False) -> None:
        """Record that ``level`` is written; ``finished`` when the search is over (a resume then only
        rebuilds the result: expanding the last level again would count its transitions twice)."""
        self.store.write_progress(self.ident, level, out, self.level_sizes,
                                  {str(k): v for k, v in self.level_of.items()}, self.seconds(), finished)

    def parent_lookup(self) -> Any:
        """A parent lookup for trace replay that reads, for each fingerprint, only its own level."""
        level_of = dict(self.level_of)
        spark, store = self.spark, self.store

        def parents(fps: set) -> dict[int, int]:
            by_level: dict[int, list[int]] = {}
            for fp in fps:
                by_level.setdefault(level_of[fp], []).append(fp)
            found: dict[int, int] = {}
            for level, wanted in by_level.items():
                rows = (spark.read.schema(LEVEL_SCHEMA).parquet(store.level_path(level)).where(F.col("fp").isin(wanted))
                        .select("fp", "parent").collect())
                for r in rows:
                    found[r.fp] = r.parent
                    if r.parent != r.fp:
                        level_of[r.parent] = level - 1
            return found

        return parents
