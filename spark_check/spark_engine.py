"""``SparkEngine``: the local engine's level-synchronous BFS on Spark (DESIGN.md, spark_check).

One Spark job per level, of three stages:
1. the level's rows (fingerprint, parent, action, and the group and index that hold the state) are
   grouped by group (a shuffle of rows, never of states);
2. each task expands its groups with ``expand_level``, a top-level function that reads each group from
   the file the task that found it wrote (``spark_check.level_files``) and runs the same
   ``Expander.expand`` as the local engine on each state: properties decided, deadlock, successors
   (deduplicated within the task, pickled ``GROUP_STATES`` to a pickle into the task's own group file)
   and, as counts sent with the task, coverage, transitions, deadlocks, the smallest deciding
   fingerprint of each property; it yields a row per successor;
3. the rows move to the partition of their fingerprint, where ``deduplicate_level`` keeps those the
   partition has never seen (a sorted numpy array of its fingerprints, in a file of its own, searched
   and merged in place of a hash join that would rebuild the visited set every level) and Spark writes
   them as the next level.

A state is pickled once, with others, by the executor that found it (only those new to its task), and
unpickled, with its group, by the executor that expands it; nothing but rows moves between tasks. The
visited set, the frontier and the parent links never reach the driver; shortest traces are rebuilt by
looking up the parents of the few deciding states level by level (one small query per level) and
replaying the model on the driver.

The level store is the checkpoint (spark_check.checkpoint): ``--checkpoint DIR`` keeps it, ``--resume
DIR`` continues a killed run. Without either it goes to a temporary directory, removed at the end (on
a cluster of several machines, give a ``--checkpoint`` on storage every executor sees at the same path).
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

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark import TaskContext
from pyspark.accumulators import AccumulatorParam
from pyspark.sql import functions as F

from rabbitproof.spec.properties_api import Property

from .assembly import SearchOutcome, assemble
from .checkpoint import LevelStore, check_same, check_writable, identity, outcome_from, read_progress
from .engine import Engine, Model, ProgressCallback, cut_short, interrupted, out_of_time, too_many_states
from .expansion import diagnose
from .level_files import GroupReader, GroupWriter, new_in_partition, visited_before, write_visited
from .portable import Portable, portable
from .reductions import reduction_named
from .results import ExplorationResult
from .spark_liveness import DRIVER_CORE_EDGES, PIECE_EDGES, spark_lassos
from .spark_session import check_master, is_local, ship_code, spark_session
from .subsumption import Twins, pack, unpack

# A level's rows: a state's fingerprint, its parent's and the action from it, and where its pickled
# state lies: member ``idx`` of group ``grp`` (spark_check.level_files). The expansion of a level yields
# such rows for the successors new to its task (candidates); the deduplication keeps those new to the run.
LEVEL_SCHEMA = "fp long, parent long, action int, grp long, idx int"
LEVEL_COLUMNS = ("fp", "parent", "action", "grp", "idx")
# Under the ``budgets`` reduction the candidates carry their twin key and spent counters too (packed:
# spark_check.subsumption), and move to the partition of their key, where all their twins are.
TWIN_SCHEMA = LEVEL_SCHEMA + ", key long, spent long"
TWIN_COLUMNS = LEVEL_COLUMNS + ("key", "spent")
BATCH_ROWS = 4096
GROUP_STATES = 128      # successors pickled together (rabbitproof.bench.engines: sharing makes each 3-4x cheaper)


class _TaskCounts(AccumulatorParam):
    """Per-task counts sent back with the task: {(stage, partition): counts}. Keyed by partition, so a task
    that Spark runs again replaces its earlier counts instead of adding to them."""

    def zero(self, value: dict) -> dict:
        return {}

    def addInPlace(self, a: dict, b: dict) -> dict:
        a.update(b)
        return a


def _columns(batches: Iterator[Any], names: Sequence[str]) -> list[Any]:
    """The named columns of every Arrow batch of a task, concatenated, as numpy arrays."""

    parts: list[list[Any]] = [[] for _ in names]
    for batch in batches:
        for i, name in enumerate(names):
            parts[i].append(batch.column(name).to_numpy(zero_copy_only=False))
    return [np.concatenate(p) if p else np.zeros(0, dtype=np.int64) for p in parts]


def expand_level(job: tuple[Portable, tuple[int, ...], Any, str, str, Any], batches: Iterator[Any]) -> Iterator[Any]:
    """Expand the frontier states in ``batches`` (Arrow batches of a level's rows, those of whole groups);
    yield a row per successor new to this task and write those successors, pickled in groups, to this
    task attempt's group file of the next level; add the task's counts to the job's accumulator. Runs on
    executors: top-level, and pure but for the counts and the file it writes.

    Successors are pickled ``GROUP_STATES`` at a time, in one ``pickle.dumps`` of a list: a successor
    shares most of its parts with its parent and its siblings, and one pickle writes each shared part
    once, where a pickle per state writes it again for every state (and unpickling then shares it too).

    With liveness properties (``graph``: the level and its two graph directories), the task also writes
    each state's facts and every edge out of it (spark_check.liveness), one Parquet file of each."""
    described, undecided, tally, states_in, states_out, graph = job
    expander = described.expander()
    expander.set_undecided(undecided)
    expand = expander.expand
    fingerprint = expander.fingerprint
    keyed = expander.keyed                  # the ``budgets`` reduction: rows carry key and spent
    spent_of = expander.spent_of if keyed is not None else None
    dumps, loads = pickle.dumps, pickle.loads
    context = TaskContext.get()
    part = context.partitionId()
    reader = GroupReader(states_in)
    writer = GroupWriter(states_out, part, context.attemptNumber())
    seen: set[int] = set()
    decided_at: dict[int, int] = {}
    types: Counter[type] = Counter()
    transitions = deadlocks = expanded = 0
    first_deadlock: int | None = None
    error: tuple[str, int] | None = None
    clock = time.perf_counter
    python = pickling = 0.0         # seconds in this function: all of it, and pickling successors
    task_started, task_cpu = clock(), time.process_time()
    row_types = [pa.int64(), pa.int64(), pa.int32(), pa.int64(), pa.int32()] + [pa.int64()] * (2 * (keyed is not None))
    names = TWIN_COLUMNS if keyed is not None else LEVEL_COLUMNS
    schema = pa.schema(list(zip(names, row_types)))
    out_key: list[Any] = []
    out_spent: list[Any] = []
    out_fp: list[Any] = []
    out_parent: list[Any] = []
    out_action: list[Any] = []
    out_grp: list[int] = []
    out_idx: list[Any] = []
    members: list[Any] = []         # the open group's successors (the last rows), given its id once closed
    open_group = -1
    facts = expander.facts if graph is not None else None
    g_fp: list[int] = []
    g_enabled: list[int] = []
    g_atoms: list[int] = []
    g_terminal: list[bool] = []
    e_src: list[int] = []
    e_dst: list[int] = []
    e_cls: list[int] = []

    def close_group() -> None:
        """Pickle the open group, and give its rows the group's id."""
        nonlocal pickling, members
        started = clock()
        grp = writer.add(dumps(members, 5))
        pickling += clock() - started
        for k in range(len(out_grp) - len(members), len(out_grp)):
            out_grp[k] = grp
        members = []

    def output(n: int) -> Any:
        """The first ``n`` rows, taken out (the open group's rows, last, wait for its id)."""
        columns = (out_fp, out_parent, out_action, out_grp, out_idx) + ((out_key, out_spent) if keyed is not None else ())
        batch = pa.RecordBatch.from_arrays([pa.array(c[:n], t) for c, t in zip(columns, row_types)], schema=schema)
        for column in columns:
            del column[:n]
        return batch

    collector_was_on = gc.isenabled()
    gc.disable()        # no collector passes over the states, as in the local engine (expansion.PausedCollector)
    try:
        started = clock()
        grp_col, idx_col, fp_col = _columns(batches, ("grp", "idx", "fp"))
        order = np.lexsort((idx_col, grp_col))
        grps, idxs, fps = grp_col[order].tolist(), idx_col[order].tolist(), fp_col[order].tolist()
        group: Any = None
        loaded = None
        for k in range(len(grps)):
            if grps[k] != loaded:
                loaded = grps[k]
                group = loads(reader.get(loaded))
            state, fp = group[idxs[k]], fps[k]
            seen.add(fp)
            expanded += 1
            try:
                decided, actions, successors, deadlocked = expand(state)
                for d in decided:
                    if d not in decided_at or fp < decided_at[d]:
                        decided_at[d] = fp
                if facts is not None:
                    enabled, atoms, classes = facts(state, actions)
                    g_fp.append(fp)
                    g_enabled.append(enabled)
                    g_atoms.append(atoms)
                    g_terminal.append(not enabled)     # no fair step left (spark_check.liveness)
                    if keyed is None:
                        e_src.extend([fp] * len(successors))
                        e_dst.extend(fingerprint(succ) for succ in successors)
                        e_cls.extend(classes)
                    else:                               # an edge that spends a budget is left out
                        spent = spent_of(state)
                        for succ, cls in zip(successors, classes):
                            twin = keyed(succ)
                            if twin[2] == spent:
                                e_src.append(fp)
                                e_dst.append(twin[0])
                                e_cls.append(cls)
                if not actions:
                    if deadlocked:
                        deadlocks += 1
                        first_deadlock = fp if first_deadlock is None else min(first_deadlock, fp)
                    continue
                types.update(map(type, actions))
                transitions += len(actions)
                for i, succ in enumerate(successors):
                    if keyed is None:
                        h = fingerprint(succ)
                    else:
                        h, key, spent_now = keyed(succ)
                    if h in seen:
                        continue
                    seen.add(h)
                    if keyed is not None:
                        out_key.append(key)
                        out_spent.append(pack(spent_now))
                    out_fp.append(h)
                    out_parent.append(fp)
                    out_action.append(i)
                    out_grp.append(open_group)
                    out_idx.append(len(members))
                    members.append(succ)
                    if len(members) >= GROUP_STATES:
                        close_group()
            except Exception as e:  # noqa: BLE001 - reported as the driver's error, with the trace to ``state``
                error = (diagnose(expander, state, e), fp)
                break
            if len(out_fp) - len(members) >= BATCH_ROWS:
                python += clock() - started
                yield output(len(out_fp) - len(members))
                started = clock()
        if members:
            close_group()
        writer.close()      # before the rows that name its groups leave the task
        if graph is not None:
            level, states_dir, edges_dir = graph
            name = f"part-{part}-{context.attemptNumber()}.parquet"
            _write_parquet(states_dir, name, {"fp": pa.array(g_fp, pa.int64()), "level": pa.array([level] * len(g_fp), pa.int32()),
                                              "enabled": pa.array(g_enabled, pa.int64()), "atoms": pa.array(g_atoms, pa.int64()),
                                              "terminal": pa.array(g_terminal, pa.bool_())})
            _write_parquet(edges_dir, name, {"src": pa.array(e_src, pa.int64()), "dst": pa.array(e_dst, pa.int64()),
                                             "cls": pa.array(e_cls, pa.int32())})
        python += clock() - started
        if out_fp:
            yield output(len(out_fp))
    finally:
        reader.close()
        gc.collect(0)
        if collector_was_on:
            gc.enable()
    counts = {
        "decided_at": decided_at, "deadlocks": deadlocks, "first_deadlock": first_deadlock,
        "coverage": {t.__name__: n for t, n in types.items()}, "transitions": transitions,
        "error": error, "expanded": expanded,
        "seconds": {"python: expand, check, unpickle": python, "python: pickle successors": pickling,
                    "python task (wall)": clock() - task_started,
                    "python task (CPU)": time.process_time() - task_cpu},
    }
    tally.add({("expand", part): counts})


def _write_parquet(directory: str, name: str, columns: dict[str, Any]) -> None:
    """One Parquet file of ``columns``, written whole or not at all (a task run again rewrites it)."""
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".{name}.tmp")
    pq.write_table(pa.table(columns), tmp)
    os.replace(tmp, os.path.join(directory, name))


def deduplicate_level(job: tuple[str, int, Any], batches: Iterator[Any]) -> Iterator[Any]:
    """Keep, of the candidate rows of one fingerprint partition (``batches``), the first of each fingerprint
    that partition has never seen; yield them as the next level's rows, and write the partition's visited
    fingerprints with them added. Runs on executors, on numpy arrays of fingerprints: no state moves."""
    visited_dir, level, tally = job
    started = time.perf_counter()
    part = TaskContext.get().partitionId()
    columns = _columns(batches, LEVEL_COLUMNS)
    keep, visited = new_in_partition(visited_before(visited_dir, part, level), columns[0])
    write_visited(visited_dir, part, level, visited)
    tally.add({("deduplicate", part): {"new": len(keep),
                                        "seconds": {"python: deduplicate": time.perf_counter() - started}}})
    yield from _level_rows(columns, keep)


def _level_rows(columns: Sequence[Any], keep: np.ndarray) -> Iterator[Any]:
    """The rows ``keep`` of a task's candidate ``columns`` (the level's first five), as Arrow batches of
    the next level."""
    types = (pa.int64(), pa.int64(), pa.int32(), pa.int64(), pa.int32())
    for begin in range(0, len(keep), 1 << 16):
        take = keep[begin:begin + (1 << 16)]
        yield pa.RecordBatch.from_arrays([pa.array(c[take], t) for c, t in zip(columns, types)],
                                         names=list(LEVEL_COLUMNS))


def deduplicate_twins(job: tuple[str, str | None, int, int, Any], batches: Iterator[Any]) -> Iterator[Any]:
    """``deduplicate_level`` under the ``budgets`` reduction, on the candidate rows of one key partition
    (all twins of a key meet there): the first row of each fingerprint the partition has never seen is a
    new state, and of those, the ones with no twin that spent less among the partition's fingerprints
    (this level's included) are kept (``Twins.settle_level``, as the local engine settles a level, so
    both keep the same states). Every new fingerprint joins the visited ones, so a state left out is not
    new again; where an edge to a state left out goes is written for liveness (``redirect_dir``, when the
    graph is kept)."""
    visited_dir, redirect_dir, level, counters, tally = job
    started = time.perf_counter()
    context = TaskContext.get()
    part = context.partitionId()
    columns = _columns(batches, TWIN_COLUMNS)
    first, visited = new_in_partition(visited_before(visited_dir, part, level), columns[0])
    write_visited(visited_dir, part, level, visited)
    fps, keys, spent = columns[0][first], columns[5][first], columns[6][first]
    twins = Twins()
    keep = twins.settle_level(((f, k, unpack(sp, counters)) for f, k, sp in zip(fps.tolist(), keys.tolist(),
                                                                               spent.tolist())),
                              SortedFingerprints(visited))
    kept = first[np.array([f in keep for f in fps.tolist()], dtype=bool)]
    if redirect_dir is not None and twins.redirect:
        _write_parquet(redirect_dir, f"part-{part}-{context.attemptNumber()}.parquet",
                       {"fp": pa.array(list(twins.redirect), pa.int64()),
                        "to": pa.array(list(twins.redirect.values()), pa.int64())})
    tally.add({("deduplicate", part): {"new": len(kept), "left out": len(first) - len(kept),
                                        "seconds": {"python: deduplicate": time.perf_counter() - started}}})
    yield from _level_rows(columns, kept)


class SortedFingerprints:
    """``fp in ...`` for a sorted int64 array of fingerprints (a partition's visited ones)."""

    def __init__(self, fps: np.ndarray) -> None:
        self.fps = fps

    def __contains__(self, fp: object) -> bool:
        fps = self.fps
        at = int(np.searchsorted(fps, fp))
        return at < len(fps) and int(fps[at]) == fp


class SparkEngine(Engine):
    """Level-synchronous BFS on Spark; must agree with ``LocalEngine`` state for state.

    ``master``: a Spark master URL (default ``local[*]``, or spark-submit's). ``checkpoint``: keep the
    level store in this directory. ``resume``: continue the run checkpointed in this directory.
    ``partitions``: files per level, hence tasks per level (default: twice the default parallelism).
    ``driver_core_edges``: liveness takes what is left of the graph to the driver once it has at most
    this many edges (spark_check.spark_liveness; 0: trim and colour all of it in Spark). ``piece_edges``:
    in Spark, a piece of the graph no component crosses is split on an executor once it has at most this
    many states and edges (0: never, round after round in Spark; for the tests).
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
        driver_core_edges: int = DRIVER_CORE_EDGES,
        piece_edges: int = PIECE_EDGES,
    ) -> None:
        if exact:
            raise ValueError("--exact keeps states in one process: it is for the local engine only")
        if checkpoint and resume and os.path.abspath(checkpoint) != os.path.abspath(resume):
            raise ValueError("give --checkpoint or --resume, not both (a resumed run keeps writing where it resumes)")
        if driver_memory is not None and not re.fullmatch(r"[1-9][0-9]*[kmgt]?", driver_memory.lower()):
            raise ValueError(f"--driver-memory {driver_memory!r} is not a size such as 8g or 512m")
        if partitions is not None and partitions < 1:
            raise ValueError(f"partitions must be positive, not {partitions}")
        reductions = reduction_named(reductions)
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
        self.driver_core_edges = driver_core_edges
        self.piece_edges = piece_edges
        self._session: Any = None

    def prepare(self, model: Model, config: Any, properties: Sequence[Property], liveness: Sequence[Any] = ()) -> None:
        """Check, before any work, that the exploration can be sent to executors and that a resume
        directory holds this very exploration; ValueError (one line) otherwise."""
        portable(model, config, properties, self.reductions, liveness)
        if self.resume:
            check_same(self.resume, read_progress(self.resume),
                       identity(model, config, list(properties) + list(liveness), self.reductions))

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
        time_limit: float | None = None,
        liveness: Sequence[Any] = (),
    ) -> ExplorationResult:
        self.prepare(model, config, properties, liveness)
        started = time.perf_counter()
        described = portable(model, config, properties, self.reductions, liveness)
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
            run = _LevelRun(spark, store, described, expander,
                            identity(model, config, list(properties) + list(liveness), self.reductions),
                            properties, started)
            outcome = run.search(config, max_states, stop_on_violation, progress, resume=bool(self.resume),
                                 time_limit=time_limit)
            if liveness and not outcome.stopped and (outcome.error is None or cut_short(outcome.error)):
                outcome.lassos, stems = spark_lassos(spark, store, len(run.level_sizes), liveness, outcome.timings,
                                                     self.driver_core_edges, outcome.cyclic, self.piece_edges)
                outcome.liveness_decided = outcome.error is None      # cut short: only what it found counts
                run.level_of.update(stems)
            seconds = run.seconds()
            result = assemble(self.name, expander, outcome, run.parent_lookup(), seconds=seconds,
                              action_types=action_types, reductions=self.reductions)
            result.timings["session start (wall)"] = session_seconds
            result.timings["traces rebuilt (wall)"] = run.seconds() - seconds
            return result
        finally:
            if temporary:
                shutil.rmtree(directory, ignore_errors=True)


def next_level_seconds(took: float, expanded: int, size: int) -> float:
    """How long expanding a level of ``size`` states should take, at the pace of the level of ``expanded``
    states that took ``took`` seconds: a level is checked against the time limit before it starts, not
    only after (a deep level takes minutes, and a search asked to stop at 300 s should not run to 600)."""
    return took * size / max(expanded, 1)


class _Clock:
    """Adds the seconds since the last lap to ``timings[name]`` (where a level's wall time goes)."""

    def __init__(self, timings: dict[str, float]) -> None:
        self.timings = timings
        self.last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.timings[name] = self.timings.get(name, 0.0) + now - self.last
        self.last = now


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
        # Deduplication partitions: fixed for the whole run (a fingerprint's partition keeps its visited
        # file), so a resumed run takes the number its checkpoint recorded.
        self.partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
        # Under the ``budgets`` reduction, how many spent counters a state has (spark_check.subsumption).
        self.counters: int | None = None
        if expander.keyed is not None:
            self.counters = len(expander.keyed(expander.initial_states()[0])[2])

    def seconds(self) -> float:
        return self.earlier + time.perf_counter() - self.started

    def search(self, config: Any, max_states: int | None, stop_on_violation: bool,
               progress: ProgressCallback | None, resume: bool, time_limit: float | None = None) -> SearchOutcome:
        cap = config.max_states if max_states is None else max_states
        spark, store = self.spark, self.store
        if resume:
            data = read_progress(store.directory)
            out = outcome_from(data)
            level = data["level"]
            self.partitions = data["partitions"]
            self.level_sizes = list(data["level_sizes"])
            self.level_of = {int(k): v for k, v in data["level_of"].items()}
            self.earlier = data["seconds"]
            store.drop_levels_after(level)
            if data.get("finished"):
                return out
        else:
            out, level = self._write_initial_level(cap)
            if out.error is not None:
                return out
        try:
            while True:
                began, expanding = self.seconds(), self.level_sizes[level]
                undecided = tuple(i for i in range(len(self.is_always)) if i not in out.decided_at)
                tally = spark.sparkContext.accumulator({}, _TaskCounts())
                clock = _Clock(out.timings)
                # One Spark job a level: the level's rows, grouped by the group that holds their states, are
                # expanded where the groups are read; the candidates move, as rows only, to the partition of
                # their fingerprint, which keeps the new ones and writes them as the next level.
                rows = spark.read.schema(LEVEL_SCHEMA).parquet(store.level_path(level)).select("grp", "idx", "fp")
                graph = (level, store.graph_path("states", level), store.graph_path("edges", level)) \
                    if self.described.liveness else None
                candidates = rows.repartition(self.partitions, "grp").mapInArrow(
                    partial(expand_level, (self.described, undecided, tally, store.states_path(level),
                                           store.states_path(level + 1), graph)),
                    LEVEL_SCHEMA if self.counters is None else TWIN_SCHEMA)
                self._deduplicate(candidates, level + 1, tally).write.mode("overwrite").parquet(
                    store.level_path(level + 1))
                clock.lap("level jobs: expand, deduplicate, write level (wall)")
                counts = tally.value
                self._merge(out, [c for (stage, _), c in counts.items() if stage == "expand"], level)
                size = 0
                for (stage, _), c in counts.items():
                    if stage == "deduplicate":
                        size += c["new"]
                        for name, seconds in c["seconds"].items():
                            out.timings[name] = out.timings.get(name, 0.0) + seconds
                violated = any(self.is_always[i] for i in out.decided_at) or (config.deadlock_is_error and out.deadlocks)
                if size == 0 or out.error is not None or (stop_on_violation and violated):
                    out.stopped = out.error is None and size > 0
                    store.drop_levels_after(level)
                    self._record(out, level, finished=True)
                    break
                level += 1
                self.level_sizes.append(size)
                out.distinct_states += size
                out.depth = level + 1
                if out.distinct_states > cap:
                    out.error = too_many_states(cap)
                elif time_limit is not None and self.seconds() > time_limit:
                    out.error = out_of_time(time_limit, out.depth, out.distinct_states)
                elif time_limit is not None and (ahead := next_level_seconds(self.seconds() - began, expanding, size)) \
                        + self.seconds() > time_limit:
                    out.error = out_of_time(time_limit, out.depth, out.distinct_states) + \
                        f" (the next level, of {size:,} states, would end past it: about {ahead:.0f} s at this pace)"
                self._record(out, level, finished=out.error is not None)
                store.drop_states_before(level)        # recorded: only this level's states are read again
                clock.lap("level bookkeeping: record (wall)")
                if progress is not None:
                    progress(out.distinct_states, out.depth, size, self.seconds())
                if out.error is not None:
                    break
        except KeyboardInterrupt:
            out.error = interrupted(out.depth, out.distinct_states)
        return out

    def _deduplicate(self, candidates: Any, level: int, tally: Any) -> Any:
        """The rows of ``level``'s new states, of ``candidates``: those of fingerprints never seen
        (``deduplicate_level``) or, under the ``budgets`` reduction, of those the twins no other covers
        (``deduplicate_twins``), in the partition of their fingerprint or key."""
        store = self.store
        if self.counters is None:
            return candidates.repartition(self.partitions, "fp").mapInArrow(
                partial(deduplicate_level, (store.visited_path(), level, tally)), LEVEL_SCHEMA)
        redirect = store.graph_path("redirect", level) if self.described.liveness else None
        return candidates.repartition(self.partitions, "key").mapInArrow(
            partial(deduplicate_twins, (store.visited_path(), redirect, level, self.counters, tally)), LEVEL_SCHEMA)

    def _write_initial_level(self, cap: int) -> tuple[SearchOutcome, int]:
        """Level 0: the initial states, fingerprinted on the driver (they are few), as one group; their rows
        go through the deduplication like every level's, which starts the visited files."""
        fingerprint = self.expander.fingerprint
        rows: dict[int, Any] = {}
        for state in self.expander.initial_states():
            rows.setdefault(fingerprint(state), state)
        out = SearchOutcome(distinct_states=len(rows), depth=1 if rows else 0)
        self.level_sizes = [len(rows)]
        store = self.store
        writer = GroupWriter(store.states_path(0), 0, 0)
        grp = writer.add(pickle.dumps(list(rows.values()), 5))
        writer.close()
        tally = self.spark.sparkContext.accumulator({}, _TaskCounts())
        if self.counters is None:
            first = self.spark.createDataFrame([(fp, fp, -1, grp, i) for i, fp in enumerate(rows)], LEVEL_SCHEMA)
        else:
            keyed = self.expander.keyed
            first = self.spark.createDataFrame(
                [(fp, fp, -1, grp, i, key, pack(spent)) for i, (fp, state) in enumerate(rows.items())
                 for _, key, spent in (keyed(state),)],
                TWIN_SCHEMA)
        self._deduplicate(first, 0, tally).write.mode("overwrite").parquet(store.level_path(0))
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
                                  {str(k): v for k, v in self.level_of.items()}, self.seconds(), finished,
                                  self.partitions)

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
