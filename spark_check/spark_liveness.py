"""Fair cycles on the graph the Spark engine holds (spark_check.liveness says what is looked for).

The executors that expand a level write each state's facts (fingerprint, level, fair classes enabled,
atoms, whether nothing is enabled) and every edge out of it (source, target, fair class) beside the
level store (``LevelStore.graph_path``). Once the search is complete, for each liveness property, with
DataFrame operations only (no GraphFrames):

1. **Restrict** to the states where ``stays`` holds and the edges between them.
2. **Trim**: repeatedly drop the states with no edge in or no edge out among those left. Every state of
   a graph without cycles goes, in about as many rounds as the graph is deep; what is left is the
   states on cycles and on paths between them.
3. **Components** by colouring (Orzan; Fleischer, Hendrickson and Pinar): each state takes the smallest
   fingerprint that reaches it (forward propagation of minima to a fixed point); a state whose colour is
   its own is a root, and the states of its colour that reach it backwards, within the colour, are its
   strongly connected component. Components found are removed, edges between colours dropped (no
   component spans two), and the colouring runs again on what is left until nothing is.
4. **Judge** each component with aggregates: its internal edges' classes (``bit_or``), the classes
   enabled in all its states (``bit_and``), whether ``recurs`` holds somewhere, its first state in
   (level, fingerprint) order; fair accepting components are candidates, and so, with ``at_end``, are
   the states where nothing is enabled.

Steps 2 to 4 stop at the first moment what is left has at most ``driver_core_edges`` edges (the
Spark engine's option; two million by default, 0 for all in Spark): that is taken to the driver and
split into components by the local engine's own code (``liveness.components`` and ``fair_accepting``),
which is faster than a Spark round for a graph that fits. Either way only the chosen component's
states and internal edges finally reach the driver, where ``liveness.cycle_through`` builds the
repeated part exactly as the local engine does.
"""
from __future__ import annotations

import os
import time
from typing import Any, Sequence

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .liveness import Lasso, components, cycle_through, fair_accepting, has_cycle, recurs_bit, stays_bit

STATES_SCHEMA = "fp long, level int, enabled long, atoms long, terminal boolean"
EDGES_SCHEMA = "src long, dst long, cls int"


def _fixed(df: DataFrame) -> DataFrame:
    """``df`` computed now and kept, its lineage cut (each round of a fixed point builds on the last)."""
    return df.localCheckpoint(eager=True)


def read_graph(spark: Any, store: Any, levels: int) -> tuple[DataFrame, DataFrame]:
    """The states' facts and the edges of levels 0..levels-1, without the duplicates a task run twice writes."""
    def paths(kind: str) -> list[str]:
        out = [store.graph_path(kind, n) for n in range(levels)]
        return [p for p in out if os.path.isdir(p) and any(not f.startswith(".") for f in os.listdir(p))]

    states = spark.read.schema(STATES_SCHEMA).parquet(*paths("states")).distinct()
    edges = spark.read.schema(EDGES_SCHEMA).parquet(*paths("edges")).distinct()
    return _fixed(states), _fixed(edges)


def _trim(states: DataFrame, edges: DataFrame, small: int) -> tuple[DataFrame, DataFrame, int]:
    """Step 2: the states left with an edge in and an edge out among themselves, those edges (with their
    class), and the rounds it took; it stops early once at most ``small`` edges are left. One Spark job
    a round: the states kept are checkpointed."""
    count = states.count()
    rounds = 0
    while edges.count() > small:
        rounds += 1
        alive_src = states.select(F.col("fp").alias("src"))
        alive_dst = states.select(F.col("fp").alias("dst"))
        outs = edges.join(alive_dst, "dst", "left_semi").select(F.col("src").alias("fp"))
        ins = edges.join(alive_src, "src", "left_semi").select(F.col("dst").alias("fp"))
        kept = _fixed(states.join(outs, "fp", "left_semi").join(ins, "fp", "left_semi"))
        left = kept.count()
        states = kept
        edges = _fixed(edges.join(states.select(F.col("fp").alias("src")), "src", "left_semi")
                       .join(states.select(F.col("fp").alias("dst")), "dst", "left_semi"))
        if left == count:
            break
        count = left
    inner = edges.join(states.select(F.col("fp").alias("src")), "src", "left_semi") \
                 .join(states.select(F.col("fp").alias("dst")), "dst", "left_semi")
    return states, _fixed(inner), rounds


def _components(states: DataFrame, edges: DataFrame) -> tuple[DataFrame, int]:
    """Step 3: (fp, comp) for every state of ``states``, comp the root's fingerprint; and the rounds."""
    found: list[DataFrame] = []
    rounds = 0
    spark = states.sparkSession
    while states.count():
        colour = states.select("fp", F.col("fp").alias("colour"))
        while True:                                             # forward: the least fingerprint that reaches
            rounds += 1
            reached = edges.join(colour.withColumnRenamed("fp", "src"), "src") \
                           .select(F.col("dst").alias("fp"), "colour")
            nxt = _fixed(colour.unionByName(reached).groupBy("fp").agg(F.min("colour").alias("colour")))
            changed = nxt.join(colour.withColumnRenamed("colour", "was"), "fp").where(F.col("colour") != F.col("was")).count()
            colour = nxt
            if not changed:
                break
        inner = _fixed(edges.join(colour.withColumnRenamed("fp", "src").withColumnRenamed("colour", "c1"), "src")
                       .join(colour.withColumnRenamed("fp", "dst").withColumnRenamed("colour", "c2"), "dst")
                       .where(F.col("c1") == F.col("c2")).select("src", "dst", F.col("c1").alias("colour")))
        comp = _fixed(colour.where(F.col("fp") == F.col("colour")))
        while True:                                             # backward from each root, within its colour
            rounds += 1
            back = inner.join(comp.withColumnRenamed("fp", "dst"), ["dst", "colour"]) \
                        .select(F.col("src").alias("fp"), "colour")
            grown = _fixed(comp.unionByName(back).distinct())
            more = grown.count() - comp.count()
            comp = grown
            if not more:
                break
        found.append(comp.withColumnRenamed("colour", "comp"))
        states = _fixed(states.join(comp, "fp", "left_anti"))
        edges = _fixed(inner.join(comp.withColumnRenamed("fp", "src"), "src", "left_anti")
                       .join(comp.withColumnRenamed("fp", "dst"), "dst", "left_anti").select("src", "dst"))
    if not found:
        return spark.createDataFrame([], "fp long, comp long"), rounds
    union = found[0]
    for df in found[1:]:
        union = union.unionByName(df)
    return _fixed(union), rounds


# What is left of the graph is taken to the driver once it has at most this many edges (before trimming,
# or after any round of it), and split into components there with the local engine's code; a larger
# core is coloured in Spark. A Spark round costs about a second whatever its size; Tarjan's algorithm
# on the driver does about a million edges a second.
DRIVER_CORE_EDGES = 2_000_000


def spark_lassos(spark: Any, store: Any, levels: int, liveness: Sequence[Any], timings: dict[str, float],
                 driver_core_edges: int = DRIVER_CORE_EDGES,
                 cyclic: set[int] | None = None) -> tuple[dict[int, Lasso], dict[int, int]]:
    """The counterexample of each liveness property (index -> Lasso) and the level of each lasso's first
    cycle state (for the parent lookup of its stem); ``cyclic`` (when given) gets the index of each
    property whose ``stays`` states hold a cycle (trimming leaves an edge: every state left has an edge
    in and one out among those left, so a cycle runs through them)."""
    started = time.perf_counter()
    all_states, all_edges = read_graph(spark, store, levels)
    found: dict[int, Lasso] = {}
    level_of: dict[int, int] = {}
    rounds = 0
    for i, p in enumerate(liveness):
        stays = _fixed(all_states.where((F.col("atoms").bitwiseAND(stays_bit(i))) != 0)
                       .withColumn("recurs", (F.col("atoms").bitwiseAND(recurs_bit(i))) != 0))
        edges = all_edges.join(stays.select(F.col("fp").alias("src")), "src", "left_semi") \
                         .join(stays.select(F.col("fp").alias("dst")), "dst", "left_semi")
        core, core_edges, trimmed = _trim(stays.select("fp"), edges, driver_core_edges)
        rounds += trimmed
        candidates = []
        if core_edges.count() <= driver_core_edges:
            chosen, looped = _judge_on_driver(core.join(stays, "fp"), core_edges)
        else:                   # trimmed to its fixed point, and edges are left: a cycle
            comps, coloured = _components(core, core_edges.select("src", "dst"))
            rounds += coloured
            chosen, looped = _judge(comps, stays, core_edges), True
        if looped and cyclic is not None:
            cyclic.add(i)
        if chosen is not None:
            candidates.append(chosen + ("cycle",))
        if p.at_end:
            end = stays.where("terminal").orderBy("level", "fp").first()
            if end is not None:
                candidates.append((end["level"], end["fp"], None, None, "end"))
        if not candidates:
            continue
        level, fp, members, internal, how = min(candidates, key=lambda c: (c[0], c[1]))
        level_of[fp] = level
        if how == "end":
            found[i] = Lasso(fp, (), ())
            continue
        cycle, classes = cycle_through(fp, {m[0] for m in members}, internal, {m[0]: m[1] for m in members},
                                       {m[0] for m in members if m[2]})
        found[i] = Lasso(fp, cycle, classes)
    timings["liveness: fair cycles (wall)"] = time.perf_counter() - started
    timings["liveness: graph kept (MB)"] = sum(
        os.path.getsize(os.path.join(root, f)) for kind in ("states", "edges")
        for root, _, files in os.walk(os.path.dirname(store.graph_path(kind, 0))) for f in files) / 1e6
    timings["liveness: Spark rounds of trimming and colouring"] = float(rounds)
    return found, level_of


def _judge_on_driver(core: DataFrame, core_edges: DataFrame) -> tuple[tuple | None, bool]:
    """The fair accepting component of a small core, split on the driver (liveness.components): its first
    state's level and fingerprint, its members (fp, enabled, recurs) and internal edges; None if none.
    And whether the core holds a cycle at all, fair or not."""
    states = core.select("fp", "level", "enabled", "recurs").collect()
    if not states:
        return None, False
    index = {r["fp"]: k for k, r in enumerate(states)}
    rows = core_edges.select("src", "dst", "cls").collect()
    src = np.array([index[r["src"]] for r in rows], dtype=np.int64)
    dst = np.array([index[r["dst"]] for r in rows], dtype=np.int64)
    cls = np.array([r["cls"] for r in rows], dtype=np.int64)
    enabled = np.array([r["enabled"] for r in states], dtype=np.int64)
    recurs = np.array([r["recurs"] for r in states], dtype=bool)
    comp = components(len(states), src, dst, np.ones(len(states), bool))
    looped = has_cycle(comp, src, dst)
    best = None
    for root in fair_accepting(comp, src, dst, cls, enabled, recurs).tolist():
        members = np.flatnonzero(comp == root).tolist()
        first = min(members, key=lambda k: (states[k]["level"], states[k]["fp"]))
        key = (states[first]["level"], states[first]["fp"])
        if best is None or key < best[0]:
            best = (key, root)
    if best is None:
        return None, looped
    (level, fp), root = best
    members = [(states[k]["fp"], states[k]["enabled"], states[k]["recurs"]) for k in np.flatnonzero(comp == root).tolist()]
    inside = (comp[src] == root) & (comp[dst] == root)
    internal = [(rows[k]["src"], rows[k]["dst"], rows[k]["cls"]) for k in np.flatnonzero(inside).tolist()]
    return (level, fp, members, internal), looped


def _judge(comps: DataFrame, stays: DataFrame, edges: DataFrame) -> tuple | None:
    """Step 4, in Spark: the fair accepting component whose first state in (level, fingerprint) order
    comes first, as ``_judge_on_driver`` gives it; None if none."""
    with_comp = comps.join(stays, "fp")
    per_state = with_comp.groupBy("comp").agg(
        F.bit_and("enabled").alias("always"), F.max(F.col("recurs").cast("int")).alias("recurs"),
        F.min(F.struct("level", "fp")).alias("first_state"))
    ends = comps.select(F.col("fp").alias("dst"), F.col("comp").alias("c2"))
    inner = edges.join(comps.select(F.col("fp").alias("src"), "comp"), "src").join(ends, "dst") \
                 .where(F.col("comp") == F.col("c2"))
    bit = F.expr("CASE WHEN cls >= 0 THEN shiftleft(CAST(1 AS BIGINT), cls) ELSE CAST(0 AS BIGINT) END")  # -1: unfair
    per_edge = inner.groupBy("comp").agg(F.bit_or(bit).alias("taken"))
    best = per_state.join(per_edge, "comp") \
        .where((F.col("recurs") == 1) & ((F.col("always").bitwiseAND(F.bitwise_not(F.col("taken")))) == 0)) \
        .select("comp", F.col("first_state.level").alias("level"), F.col("first_state.fp").alias("first")) \
        .orderBy("level", "first").first()
    if best is None:
        return None
    mine = comps.where(F.col("comp") == best["comp"])
    members = [(r["fp"], r["enabled"], r["recurs"]) for r in mine.join(stays, "fp").select("fp", "enabled", "recurs").collect()]
    internal = [(r["src"], r["dst"], r["cls"]) for r in
                edges.join(mine.select(F.col("fp").alias("src")), "src", "left_semi")
                     .join(mine.select(F.col("fp").alias("dst")), "dst", "left_semi").collect()]
    return best["level"], best["first"], members, internal

