"""Fair cycles on the graph the Spark engine holds (spark_check.liveness says what is looked for).

The executors that expand a level write each state's facts (fingerprint, level, fair classes enabled,
atoms, whether no fair class is enabled) and every edge out of it (source, target, fair class) beside the
level store (``LevelStore.graph_path``). Once the search is complete, for each liveness property, with
DataFrame operations (no GraphFrames) and the local engine's own code on executors:

1. **Restrict** to the states where ``stays`` holds and the edges between them.
2. **Trim**: repeatedly drop the states with no edge in or no edge out among those left. Every state of
   a graph without cycles goes, in about as many rounds as the graph is deep; what is left is the
   states on cycles and on paths between them. Trimming stops as soon as what is left is small (below),
   or when a round drops less than a tenth of the states (the labels of step 3 go four edges a round).
3. **Components**, in pieces no component crosses:

   - what is left is *one piece* when it has at most ``piece_edges`` states and edges (a million by
     default): it goes to one executor, where ``liveness.components`` (Tarjan's algorithm) splits it;
   - otherwise every state gets two labels (``_labels``): the least fingerprint of a state that reaches
     it and the least of a state it reaches, both spread ``HOPS`` edges a Spark job, to a fixed point.
     The states of a component have the same pair of labels, so the states sharing a pair are a piece
     and the edges between pieces can go. Pieces of at most ``piece_edges`` states and edges are
     split on executors, all at once (``split_pieces``: the pieces of a partition together); in each
     larger piece the state whose first label is its own (a root: nothing smaller reaches it) finds its
     component backwards, within the piece (Orzan; Fleischer, Hendrickson and Pinar). The rest, each
     piece on its own now, goes round again until nothing is left. A graph of many small components
     thus takes one labelling and one split; only a piece too big for an executor costs rounds.
4. **Judge** each component with aggregates: its internal edges' classes (``bit_or``), the classes
   enabled in all its states (``bit_and``), whether ``recurs`` holds somewhere, its first state in
   (level, fingerprint) order; fair accepting components are candidates, and so, with ``at_end``, are
   the states where no fair class is enabled.

Steps 2 to 4 stop at the first moment what is left has at most ``driver_core_edges`` edges (the
Spark engine's option and `check`'s ``--driver-core-edges``; two million by default, 0 for all in
Spark): that is taken to the driver and split into components by the local engine's code
(``liveness.components`` and ``fair_accepting``), which is faster than a Spark round for a graph that
fits. Either way the candidate chosen is the one holding the state first in (level, fingerprint) order,
as on the local engine; only its states and internal edges reach the driver, where
``liveness.cycle_through`` builds the repeated part exactly as the local engine does.
"""
from __future__ import annotations

import os
import time
from typing import Any, Iterator, Sequence

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
    redirects = paths("redirect")
    if redirects:           # the ``budgets`` reduction: an edge to a state left out goes to its covering twin
        redirect = spark.read.schema("fp long, to long").parquet(*redirects).distinct()
        edges = (edges.join(redirect, edges.dst == redirect.fp, "left")
                 .select("src", F.coalesce("to", "dst").alias("dst"), "cls"))
    return _fixed(states), _fixed(edges)


# Trimming stops after a round that drops less than one state in this many: the long thin tails it would
# take a round a state to drop cost the labels of step 3 a round every HOPS states, and form small pieces.
TRIM_GAIN = 10


def _trim(states: DataFrame, edges: DataFrame, small: int) -> tuple[DataFrame, DataFrame, int]:
    """Step 2: the states left with an edge in and an edge out among themselves, those edges (with their
    class), and the rounds it took; it stops early once at most ``small`` edges are left, or after a
    round that dropped less than one state in ``TRIM_GAIN`` (step 3 copes with the rest). Two Spark jobs
    a round (the states kept, checkpointed, and their count; a third for the edges left when ``small``
    is not 0): each round reads the edges given, not those of the round before, so nothing else needs
    keeping."""
    count = states.count()
    rounds = 0
    inner = edges
    while small == 0 or inner.count() > small:
        rounds += 1
        kept = _fixed(states.join(inner.select(F.col("src").alias("fp")), "fp", "left_semi")
                      .join(inner.select(F.col("dst").alias("fp")), "fp", "left_semi"))
        left = kept.count()
        states, count, before = kept, left, count
        if before - left < max(1, before // TRIM_GAIN):
            break
        inner = _among(edges, states)
    return states, _fixed(_among(edges, states)), rounds


def _among(edges: DataFrame, states: DataFrame) -> DataFrame:
    """The edges of ``edges`` between states of ``states``."""
    return edges.join(states.select(F.col("fp").alias("src")), "src", "left_semi") \
                .join(states.select(F.col("fp").alias("dst")), "dst", "left_semi")


# Edges a label travels in one round of ``_labels``: a Spark job costs a fraction of a second whatever
# its size (and its checkpoint as much again), a hop more in the same job little on a small graph.
HOPS = 4


def _spread(edges: DataFrame, frontier: DataFrame, here: str, there: str, label: str) -> DataFrame:
    """(fp, label): the least label of ``frontier`` (fp, label) that reaches each state in 1 to ``HOPS``
    edges, following them from ``here`` to ``there`` (src to dst: forward)."""
    reached = []
    for _ in range(HOPS):
        frontier = edges.join(frontier.withColumnRenamed("fp", here), here) \
                        .groupBy(F.col(there).alias("fp")).agg(F.min(label).alias(label))
        reached.append(frontier)
    out = reached[0]
    for df in reached[1:]:
        out = out.unionByName(df)
    return out


def _labels(states: DataFrame, edges: DataFrame) -> tuple[DataFrame, int]:
    """(fp, fw, bw) for every state: ``fw`` the least fingerprint of a state that reaches it, ``bw`` the
    least of a state it reaches (itself included both ways), and the rounds. Both minima travel in the
    same round, ``HOPS`` edges further each, and only from the states whose label changed in the round
    before; two Spark jobs a round (the labels, checkpointed, and whether any changed)."""
    lab = _fixed(states.select("fp", F.col("fp").alias("fw"), F.col("fp").alias("bw"),
                               F.lit(True).alias("fwc"), F.lit(True).alias("bwc")))
    none = F.lit(None).cast("long")
    rounds = 0
    while True:
        rounds += 1
        old = lab.select("fp", "fw", "bw", F.col("fw").alias("was_fw"), F.col("bw").alias("was_bw"))
        ahead = _spread(edges, lab.where("fwc").select("fp", "fw"), "src", "dst", "fw") \
            .select("fp", "fw", none.alias("bw"), none.alias("was_fw"), none.alias("was_bw"))
        behind = _spread(edges, lab.where("bwc").select("fp", "bw"), "dst", "src", "bw") \
            .select("fp", none.alias("fw"), "bw", none.alias("was_fw"), none.alias("was_bw"))
        lab = _fixed(old.unionByName(ahead).unionByName(behind).groupBy("fp")
                     .agg(*(F.min(c).alias(c) for c in ("fw", "bw", "was_fw", "was_bw")))
                     .select("fp", "fw", "bw", (F.col("fw") < F.col("was_fw")).alias("fwc"),
                             (F.col("bw") < F.col("was_bw")).alias("bwc")))
        if lab.where("fwc OR bwc").isEmpty():
            return lab.select("fp", "fw", "bw"), rounds


def split_pieces(batches: Iterator[Any]) -> Iterator[Any]:
    """On an executor: whole pieces, as rows (fp, dst, edge): a state (``edge`` false) or an edge inside
    its piece (fp its source), split into strongly connected components by the local engine's code;
    (fp, comp) for every state of a component with an edge inside, comp its least fingerprint. The
    pieces of a partition are split together: no edge joins two."""
    import pyarrow as pa

    fps, srcs, dsts = [], [], []
    for batch in batches:
        is_edge = batch.column("edge").to_numpy(zero_copy_only=False)
        fp = batch.column("fp").to_numpy()
        fps.append(fp[~is_edge])
        srcs.append(fp[is_edge])
        dsts.append(batch.column("dst").to_numpy()[is_edge])
    if not fps:
        return
    states = np.sort(np.concatenate(fps))                     # index order is fingerprint order
    src = np.searchsorted(states, np.concatenate(srcs))
    dst = np.searchsorted(states, np.concatenate(dsts))
    comp = np.asarray(components(len(states), src.tolist(), dst.tolist(), [True] * len(states)), dtype=np.int64)
    inside = comp[src] == comp[dst]
    cyclic = np.isin(comp, comp[src[inside]])
    yield pa.RecordBatch.from_arrays([pa.array(states[cyclic], pa.int64()), pa.array(states[comp[cyclic]], pa.int64())],
                                     names=["fp", "comp"])


def _split(states: DataFrame, inner: DataFrame) -> DataFrame:
    """``split_pieces`` on every piece: ``states`` (fp, piece) and ``inner`` (src, dst, piece), the edges
    inside pieces; (fp, comp) as it gives them. One Spark job."""
    rows = states.select("piece", "fp", F.col("fp").alias("dst"), F.lit(False).alias("edge")).unionByName(
        inner.select("piece", F.col("src").alias("fp"), "dst", F.lit(True).alias("edge")))
    return _fixed(rows.repartition("piece").select("fp", "dst", "edge").mapInArrow(split_pieces, "fp long, comp long"))


def _components(states: DataFrame, edges: DataFrame, piece_edges: int) -> tuple[DataFrame, int, int]:
    """Step 3: (fp, comp) for every state of a component with an edge inside (comp its least fingerprint),
    the rounds, and the Spark jobs that split pieces on executors. What is left is one piece when it has
    at most ``piece_edges`` states and edges; otherwise it is cut into pieces by ``_labels`` (a component
    lies inside one), the small ones split on executors and each large one loses its root's component;
    what is left, each piece on its own, goes round again (a root is found in every piece then)."""
    found: list[DataFrame] = []
    rounds = splits = 0
    spark = states.sparkSession
    while True:
        count = states.count()
        if not count:
            break
        if count <= piece_edges and edges.count() <= piece_edges:
            found.append(_split(states.withColumn("piece", F.lit(0)), edges.withColumn("piece", F.lit(0))))
            splits += 1
            break
        lab, labelled = _labels(states, edges)
        rounds += labelled
        lab = lab.withColumn("piece", F.struct("fw", "bw"))
        ends = lab.select(F.col("fp").alias("dst"), F.col("piece").alias("piece2"))
        inner = _fixed(edges.join(lab.withColumnRenamed("fp", "src"), "src").join(ends, "dst")
                       .where(F.col("piece") == F.col("piece2")).select("src", "dst", "fw", "bw", "piece"))
        size = lab.groupBy("piece").count() \
                  .join(inner.groupBy("piece").agg(F.count("*").alias("edges")), "piece", "left")
        fits = F.greatest("count", F.coalesce("edges", F.lit(0))) <= piece_edges
        piece = _fixed(lab.join(size, "piece").select("fp", "fw", "bw", "piece", fits.alias("small")))
        small = piece.where("small")
        found.append(_split(small, inner.join(small.select(F.col("fp").alias("src")), "src", "left_semi")))
        splits += 1
        big = piece.where("NOT small")
        comp = _fixed(big.where(F.col("fp") == F.col("fw")).select("fp", "piece"))
        frontier = comp
        while not frontier.isEmpty():                           # backward from each root, within its piece
            rounds += 1
            back = inner.join(frontier.withColumnRenamed("fp", "dst"), ["dst", "piece"]) \
                        .select(F.col("src").alias("fp"), "piece")
            frontier = _fixed(back.distinct().join(comp, "fp", "left_anti"))
            comp = _fixed(comp.unionByName(frontier))
        found.append(comp.select("fp", F.col("piece.fw").alias("comp")))
        states = _fixed(big.join(comp, "fp", "left_anti").select("fp"))
        edges = _fixed(_among(inner, states).select("src", "dst"))
    if not found:
        return spark.createDataFrame([], "fp long, comp long"), rounds, splits
    union = found[0]
    for df in found[1:]:
        union = union.unionByName(df)
    return _fixed(union), rounds, splits


# What is left of the graph is taken to the driver once it has at most this many edges (before trimming,
# or after any round of it), and split into components there with the local engine's code; a larger
# core is cut into pieces in Spark. A Spark job costs a fraction of a second whatever its size; Tarjan's
# algorithm on the driver does about a million edges a second.
DRIVER_CORE_EDGES = 2_000_000
# A piece of the core (all of it, or its states sharing both labels of ``_labels``) with at most this many
# states and internal edges is split on an executor, with the others of its partition, by the local
# engine's code; a larger one loses its root's component in a round of its own and is labelled again.
PIECE_EDGES = 1_000_000


def spark_lassos(spark: Any, store: Any, levels: int, liveness: Sequence[Any], timings: dict[str, float],
                 driver_core_edges: int = DRIVER_CORE_EDGES,
                 cyclic: set[int] | None = None,
                 piece_edges: int = PIECE_EDGES) -> tuple[dict[int, Lasso], dict[int, int]]:
    """The counterexample of each liveness property (index -> Lasso) and the level of each lasso's first
    cycle state (for the parent lookup of its stem); ``cyclic`` (when given) gets the index of each
    property whose ``stays`` states hold a cycle (trimming leaves an edge: every state left has an edge
    in and one out among those left, so a cycle runs through them)."""
    started = time.perf_counter()
    all_states, all_edges = read_graph(spark, store, levels)
    found: dict[int, Lasso] = {}
    level_of: dict[int, int] = {}
    rounds = splits = 0
    for i, p in enumerate(liveness):
        stays = _fixed(all_states.where((F.col("atoms").bitwiseAND(stays_bit(i))) != 0)
                       .withColumn("recurs", (F.col("atoms").bitwiseAND(recurs_bit(i))) != 0))
        edges = all_edges.join(stays.select(F.col("fp").alias("src")), "src", "left_semi") \
                         .join(stays.select(F.col("fp").alias("dst")), "dst", "left_semi")
        core, core_edges, trimmed = _trim(stays.select("fp"), edges, max(driver_core_edges, piece_edges))
        rounds += trimmed
        candidates = []
        if core_edges.count() <= driver_core_edges:
            chosen, looped = _judge_on_driver(core.join(stays, "fp"), core_edges)
        else:                   # trimming may stop early (TRIM_GAIN): a cycle only where a component has an edge
            comps, coloured, split = _components(core, core_edges.select("src", "dst"), piece_edges)
            rounds += coloured
            splits += split
            chosen, looped = _judge(comps, stays, core_edges)
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
    timings["liveness: Spark jobs splitting pieces on executors"] = float(splits)
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
    src = [index[r["src"]] for r in rows]
    dst = [index[r["dst"]] for r in rows]
    cls = [r["cls"] for r in rows]
    enabled = [r["enabled"] for r in states]
    recurs = [bool(r["recurs"]) for r in states]
    comp = components(len(states), src, dst, [True] * len(states))
    looped = has_cycle(comp, src, dst)
    best = None
    for root in fair_accepting(comp, src, dst, cls, enabled, recurs):
        members = [k for k, c in enumerate(comp) if c == root]
        first = min(members, key=lambda k: (states[k]["level"], states[k]["fp"]))
        key = (states[first]["level"], states[first]["fp"])
        if best is None or key < best[0]:
            best = (key, root)
    if best is None:
        return None, looped
    (level, fp), root = best
    members = [(states[k]["fp"], states[k]["enabled"], states[k]["recurs"]) for k, c in enumerate(comp) if c == root]
    internal = [(rows[k]["src"], rows[k]["dst"], rows[k]["cls"]) for k in range(len(rows))
                if comp[src[k]] == root and comp[dst[k]] == root]
    return (level, fp, members, internal), looped


def _judge(comps: DataFrame, stays: DataFrame, edges: DataFrame) -> tuple[tuple | None, bool]:
    """Step 4, in Spark: the fair accepting component whose first state in (level, fingerprint) order
    comes first, as ``_judge_on_driver`` gives it (None if none), and whether any component has an edge
    inside it (a cycle, fair or not)."""
    with_comp = comps.join(stays, "fp")
    per_state = with_comp.groupBy("comp").agg(
        F.bit_and("enabled").alias("always"), F.max(F.col("recurs").cast("int")).alias("recurs"),
        F.min(F.struct("level", "fp")).alias("first_state"))
    ends = comps.select(F.col("fp").alias("dst"), F.col("comp").alias("c2"))
    inner = edges.join(comps.select(F.col("fp").alias("src"), "comp"), "src").join(ends, "dst") \
                 .where(F.col("comp") == F.col("c2"))
    bit = F.expr("CASE WHEN cls >= 0 THEN shiftleft(CAST(1 AS BIGINT), cls) ELSE CAST(0 AS BIGINT) END")  # -1: unfair
    per_edge = _fixed(inner.groupBy("comp").agg(F.bit_or(bit).alias("taken")))
    looped = per_edge.limit(1).count() > 0
    best = per_state.join(per_edge, "comp") \
        .where((F.col("recurs") == 1) & ((F.col("always").bitwiseAND(F.bitwise_not(F.col("taken")))) == 0)) \
        .select("comp", F.col("first_state.level").alias("level"), F.col("first_state.fp").alias("first")) \
        .orderBy("level", "first").first()
    if best is None:
        return None, looped
    mine = comps.where(F.col("comp") == best["comp"])
    members = [(r["fp"], r["enabled"], r["recurs"]) for r in mine.join(stays, "fp").select("fp", "enabled", "recurs").collect()]
    internal = [(r["src"], r["dst"], r["cls"]) for r in
                edges.join(mine.select(F.col("fp").alias("src")), "src", "left_semi")
                     .join(mine.select(F.col("fp").alias("dst")), "dst", "left_semi").collect()]
    return (best["level"], best["first"], members, internal), looped

