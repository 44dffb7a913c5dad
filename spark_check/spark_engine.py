"""``SparkEngine``: the local engine's level-synchronous BFS on Spark (DESIGN.md, spark_check).

Per level:
1. the frontier (the last level's rows, grouped by the pickled group that holds each state, joined with
   those groups) is expanded on the executors by ``expand_level``, a top-level function running the same
   ``Expander.expand`` as the local engine on each state: properties decided, deadlock, successors
   (deduplicated within the task, pickled ``GROUP_STATES`` to a pickle) and, as counts sent with the task,
   coverage, transitions, deadlocks, the smallest deciding fingerprint of each property;
2. the successors are written as the next level's candidates (rows and pickled groups);
3. Spark deduplicates the candidate rows by fingerprint and anti-joins them against the visited set (the
   ``fp`` column of every level written so far), both in the JVM on 64-bit longs, and writes the new
   rows (fingerprint, parent, action index, group and index) as the next level.

A state is pickled once, with others, by the executor that found it (only those new to its task), and
unpickled, with its group, by the executor that expands it; deduplication never moves a state, only its
row. The visited set, the frontier and the parent links never reach the driver; shortest traces are
rebuilt by looking up the parents of the few deciding states level by level (one small query per level)
and replaying the model on the driver.

The level directories are the checkpoint (spark_check.checkpoint): ``--checkpoint DIR`` keeps them,
``--resume DIR`` continues a killed run. Without either they go to a temporary directory, removed at
the end (on a cluster of several machines, give a ``--checkpoint`` on storage every executor sees).
"""
from __future__ import annotations

import gc
import os
import pickle
import re
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

# A level's rows: a state's fingerprint, its parent's and the action from it, and where its pickled
# state lies: member ``idx`` of group ``grp`` of the level's states directory. What an executor returns
# for a level: those rows for the successors new to its task, and one row per group of them with the
# group pickled (``blob``; the other columns null), so the two kinds travel in one output.
LEVEL_SCHEMA = "fp long, parent long, action int, grp long, idx int"
EXPANDED_SCHEMA = LEVEL_SCHEMA + ", blob binary"
LEVEL_COLUMNS = ("fp", "parent", "action", "grp", "idx")
BATCH_ROWS = 4096
GROUP_STATES = 128      # successors pickled together (spark_check.bench: sharing makes each 3-4x cheaper)


class _TaskCounts(AccumulatorParam):
    """Per-task counts sent back with the task: {partition: counts}. Keyed by partition, so a task that
    Spark runs again replaces its earlier counts instead of adding to them."""

    def zero(self, value: dict) -> dict:
        return {}

    def addInPlace(self, a: dict, b: dict) -> dict:
        a.update(b)
        return a


def expand_level(job: tuple[Portable, tuple[int, ...], Any], batches: Iterator[Any]) -> Iterator[Any]:
    """Expand every frontier state in ``batches`` (Arrow batches of grp, blob, items: a pickled group and
    the (idx, fp) of its members that are in the frontier); yield the successors new to this task, pickled
    in groups, and add the task's counts to the job's accumulator. Runs on executors: top-level, and pure
    but for the counts.

    Successors are pickled ``GROUP_STATES`` at a time, in one ``pickle.dumps`` of a list: a successor
    shares most of its parts with its parent and its siblings, and one pickle writes each shared part
    once, where a pickle per state writes it again for every state (and unpickling then shares it too)."""
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
    schema = pa.schema([("fp", pa.int64()), ("parent", pa.int64()), ("action", pa.int32()), ("grp", pa.int64()),
                        ("idx", pa.int32()), ("blob", pa.binary())])
    group_base = TaskContext.get().partitionId() << 32     # group ids unique in the level, the same on a retry
    groups = 0
    out_fp: list[Any] = []
    out_parent: list[Any] = []
    out_action: list[Any] = []
    out_grp: list[int] = []
    out_idx: list[Any] = []
    out_blob: list[Any] = []
    members: list[Any] = []         # the open group's successors

    def close_group() -> None:
        """Pickle the open group and add its row."""
        nonlocal pickling, groups, members
        started = clock()
        blob = dumps(members, 5)
        pickling += clock() - started
        out_fp.append(None)
        out_parent.append(None)
        out_action.append(None)
        out_grp.append(group_base + groups)
        out_idx.append(None)
        out_blob.append(blob)
        groups += 1
        members = []

    def output() -> Any:
        batch = pa.RecordBatch.from_arrays(
            [pa.array(out_fp, pa.int64()), pa.array(out_parent, pa.int64()), pa.array(out_action, pa.int32()),
             pa.array(out_grp, pa.int64()), pa.array(out_idx, pa.int32()), pa.array(out_blob, pa.binary())],
            schema=schema)
        for column in (out_fp, out_parent, out_action, out_grp, out_idx, out_blob):
            column.clear()
        return batch

    collector_was_on = gc.isenabled()
    gc.disable()        # no collector passes over the states, as in the local engine (expansion.PausedCollector)
    try:
        for batch in batches:
            if error is not None:
                continue
            started = clock()
            items = batch.column(2)
            offsets = items.offsets.to_pylist()
            flat = items.flatten()
            member_idx = flat.field(0).to_pylist()
            member_fp = flat.field(1).to_pylist()
            for row, blob in enumerate(batch.column(1).to_pylist()):
                group = loads(blob)
                for k in range(offsets[row], offsets[row + 1]):
                    state, fp = group[member_idx[k]], member_fp[k]
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
                            out_grp.append(group_base + groups)
                            out_idx.append(len(members))
                            out_blob.append(None)
                            members.append(succ)
                            if len(members) >= GROUP_STATES:
                                close_group()
                    except Exception as e:  # noqa: BLE001 - reported as the driver's error, with the trace to ``state``
                        error = (diagnose(expander, state, e), fp)
                        break
                    if len(out_fp) >= BATCH_ROWS:
                        python += clock() - started
                        yield output()
                        started = clock()
                if error is not None:
                    break
            python += clock() - started
        if members:
            close_group()
        if out_fp:
            yield output()
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
        if driver_memory is not None and not re.fullmatch(r"[1-9][0-9]*[kmgt]?", driver_memory.lower()):
            raise ValueError(f"--driver-memory {driver_memory!r} is not a size such as 8g or 512m")
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


class _Clock:
    """Adds the seconds since the last lap to ``timings[name]`` (where a level's wall time goes)."""

    def __init__(self, timings: dict[str, float]) -> None:
        self.timings = timings
        self.last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.timings[name] = self.timings.get(name, 0.0) + now - self.last
        self.last = now


class VisitedSet:
    """The visited fingerprints, cached on the executors in a few chunks, each hash-partitioned by
    fingerprint like the deduplicated successors: the anti-join then moves no visited fingerprint (no
    shuffle, and no broadcast through the driver). Every level adds a chunk; past ``MERGE_AT`` chunks they
    are merged into one (an LSM tree's merge, so each fingerprint is re-partitioned O(log) times)."""

    MERGE_AT = 8

    def __init__(self, spark: Any, partitions: int) -> None:
        self.spark = spark
        self.partitions = partitions
        self.chunks: list[Any] = []     # fingerprint frames to join against
        self.cached: list[Any] = []     # the frames cached for them (to release)

    def add(self, level: Any, partitioned: bool = False) -> None:
        """Add a level's (or several levels') rows; ``partitioned``: they are already hash-partitioned by
        fingerprint into as many partitions (the anti-join's output is) and cached, so they are a chunk
        as they are, with no shuffle."""
        if not partitioned:
            level = level.select("fp").repartition(self.partitions, "fp").persist()   # cached on first use
        self.cached.append(level)
        self.chunks.append(level.select("fp"))
        if len(self.chunks) > self.MERGE_AT:
            merged = self.chunks[0]
            for c in self.chunks[1:]:
                merged = merged.union(c)
            merged = merged.repartition(self.partitions, "fp").persist()
            merged.count()
            self.release()
            self.cached, self.chunks = [merged], [merged]

    def unseen(self, candidates: Any) -> Any:
        """The candidate rows whose fingerprint is in no chunk."""
        for chunk in self.chunks:
            candidates = candidates.join(chunk, "fp", "left_anti")
        return candidates

    def release(self) -> None:
        for frame in self.cached:
            frame.unpersist()
        self.cached, self.chunks = [], []


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
                expanded = self._frontier(level).mapInArrow(
                    partial(expand_level, (self.described, undecided, tally)), EXPANDED_SCHEMA)
                clock = _Clock(out.timings)
                expanded.write.mode("overwrite").parquet(self.store.states_path(level + 1))
                clock.lap("level jobs: expand, write candidates (wall)")
                candidates = (spark.read.schema(EXPANDED_SCHEMA).parquet(self.store.states_path(level + 1))
                              .where(F.col("fp").isNotNull()).select(*LEVEL_COLUMNS))
                # Computed once and kept on the executors with a short plan (a local checkpoint): hash-
                # partitioned by fp like the visited chunks, it is written, then becomes the next chunk.
                fresh = visited.unseen(candidates.dropDuplicates(["fp"])).localCheckpoint(eager=True)
                fresh.write.mode("overwrite").parquet(self.store.level_path(level + 1))
                clock.lap("level jobs: deduplicate, write level (wall)")
                self._merge(out, list(tally.value.values()), level)
                violated = any(self.is_always[i] for i in out.decided_at) or (config.deadlock_is_error and out.deadlocks)
                size = self.store.rows(level + 1, spark)
                if size == 0 or out.error is not None or (stop_on_violation and violated):
                    out.stopped = out.error is None and size > 0
                    self.store.drop_levels_after(level)
                    self._record(out, level, finished=True)
                    break
                level += 1
                visited.add(fresh, partitioned=True)
                self.level_sizes.append(size)
                out.distinct_states += size
                out.depth = level + 1
                if out.distinct_states > cap:
                    out.error = too_many_states(cap)
                self._record(out, level, finished=out.error is not None)
                self.store.drop_states_before(level)        # recorded: only this level's states are read again
                clock.lap("level bookkeeping: count, record (wall)")
                if progress is not None:
                    progress(out.distinct_states, out.depth, size, self.seconds())
                if out.error is not None:
                    break
        except KeyboardInterrupt:
            out.error = f"interrupted at depth {out.depth} after {out.distinct_states:,} distinct states"
        finally:
            visited.release()
        return out

    def _frontier(self, level: int) -> Any:
        """The states of ``level`` to expand: one row per pickled group that holds any of them (grp, blob)
        with the (idx, fp) of those members (items). Only groups move, never a state alone."""
        spark = self.spark
        members = (spark.read.schema(LEVEL_SCHEMA).parquet(self.store.level_path(level))
                   .groupBy("grp").agg(F.collect_list(F.struct("idx", "fp")).alias("items")))
        groups = (spark.read.schema(EXPANDED_SCHEMA).parquet(self.store.states_path(level))
                  .where(F.col("blob").isNotNull()).select("grp", "blob"))
        return groups.join(members, "grp").select("grp", "blob", "items")

    def _write_initial_level(self, cap: int) -> tuple[SearchOutcome, int]:
        """Level 0: the initial states, fingerprinted on the driver (they are few), as one group."""
        fingerprint = self.expander.fingerprint
        rows: dict[int, Any] = {}
        for state in self.expander.initial_states():
            rows.setdefault(fingerprint(state), state)
        out = SearchOutcome(distinct_states=len(rows), depth=1 if rows else 0)
        self.level_sizes = [len(rows)]
        spark = self.spark
        spark.createDataFrame([(None, None, None, 0, None, pickle.dumps(list(rows.values()), 5))],
                              EXPANDED_SCHEMA).write.mode("overwrite").parquet(self.store.states_path(0))
        spark.createDataFrame([(fp, fp, -1, 0, i) for i, fp in enumerate(rows)],
                              LEVEL_SCHEMA).write.mode("overwrite").parquet(self.store.level_path(0))
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
