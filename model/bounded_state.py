"""The state of the bounded family (``model.bounded``), field by field, each field named once.

A state is a dict from a field's key to its value: an int in the abstraction (``model.bounded.project``),
a Z3 bit-vector in a relation; the key is also the Z3 constant's name (``proofs.bmc`` names a step's
copy ``key@t``). The keys are made here only, from the declarations below, and read and written through
named views: ``Fields(x, shape).channels[c, ch].global_limit``, ``.queue.ready.push(...)``. A misspelt
name is an AttributeError, never a new field, and a list's rows are NamedTuples read by column name.
``names`` lists every key of a shape, in the order the unrolling makes its constants.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple, Union

import z3

from rabbitproof.spec.state import FATE_ACKED, FATE_AUTO, FATE_LOST_AUTOACK, FATE_LOST_CRASH

# Every field is a small bit-vector: the encoding's values (statuses, counts, tags, keys, message codes)
# are small non-negative numbers, and bit-vectors let Z3 decide the unrolling by SAT, far faster than
# integer arithmetic over the same If-chains. Signed comparison is exact below 2**(WIDTH-1).
WIDTH = 8
Value = Union[int, z3.BitVecRef]


def bv(v) -> z3.BitVecRef:
    """A field's value as a Z3 term (a bool or an int as a bit-vector constant)."""
    return z3.BitVecVal(int(v), WIDTH) if isinstance(v, (bool, int)) else v


def var(name: str) -> z3.BitVecRef:
    """The field ``name`` as a fresh constant."""
    return z3.BitVec(name, WIDTH)


class OutsideSubset(ValueError):
    """A spec state or configuration this family cannot hold; the message says what."""


@dataclass(frozen=True)
class Shape:
    """The sizes of one configuration's encoding."""

    conns: int
    chans: int
    keys: int           # copies queue q0 can ever take (each publish routes one copy)
    tags: int           # delivery tags a channel can issue
    ctags: int          # consumer tags (a role's consume positions)
    seqs: int           # publish sequence numbers
    fifo: int           # frames in flight per channel and direction

    def channels(self):
        return [(c, ch) for c in range(self.conns) for ch in range(1, self.chans + 1)]


# ---------------------------------------------------------------- the rows of the fixed-capacity lists

class ReadyCopy(NamedTuple):
    """A ready copy of q0, in queue order (``Queue.ready``)."""

    key: Value
    redelivered: Value


class RingEntry(NamedTuple):
    """A consumer in q0's round-robin (``Queue.ring``)."""

    conn: Value
    ch: Value
    consumer_tag: Value


class AutoDelivery(NamedTuple):
    """An automatic-mode delivery in flight to the client (``Conn.auto``, AM-2)."""

    ch: Value
    tag: Value
    key: Value


class FrameSlot(NamedTuple):
    """A frame in flight: its method and four fields, whose meaning is the method's (``frame_slot``)."""

    method: Value
    f1: Value
    f2: Value
    f3: Value
    f4: Value


class Unacked(NamedTuple):
    """An outstanding delivery of a channel (``Channel.unacked``); ``consumer`` 0 for basic.get."""

    tag: Value
    key: Value
    redelivered: Value
    consumer: Value


class Unconfirmed(NamedTuple):
    """An unconfirmed publish of a channel (``Channel.unconfirmed``); ``waits``: the key of the copy it
    waits for on disk, 0 for none (PC-5)."""

    seq: Value
    msg: Value
    waits: Value


class HeldPublish(NamedTuple):
    """A publish an open transaction holds back (``Channel.tx_pubs``, TX-2)."""

    persistent: Value
    msg: Value


class HeldTag(NamedTuple):
    """A delivery tag the client holds, not yet settled."""

    tag: Value


W = len(FrameSlot._fields)      # fields per frame slot

# ---------------------------------------------------------------- the fields, declared once

# Each part's fields: the attribute the code reads, and the key (the Z3 constant's name, short, as it
# appears in every step of the unrolling).

# The fates the family records per copy (spec.state.FATE_*), each a 0/1 field of the copy named so.
FATES = {FATE_ACKED: "acked", FATE_AUTO: "auto", FATE_LOST_CRASH: "lost_crash", FATE_LOST_AUTOACK: "lost_auto"}


@dataclass(frozen=True)
class ListOf:
    """A fixed-capacity list of a part: its key prefix, its capacity in a shape, and its row type."""

    prefix: str
    capacity: Callable[[Shape], int]
    row: type


@dataclass(frozen=True)
class Part:
    """One part of the state (the queue, a copy, a connection, a broker's channel, a client's view): its
    fields as attribute name -> key, each key a template of the part's indices (c: connection, ch:
    channel, k: copy key), its indexed fields (the template also takes ``i``, 1 .. the shape's size) and
    its lists."""

    scalars: dict[str, str]
    indexed: dict[str, tuple[str, Callable[[Shape], int]]]
    lists: dict[str, ListOf]


BROKER = Part({"up": "up", "tx_groups": "ngroups"}, {}, {})
QUEUE = Part({"exists": "q.exists", "durable": "q.durable", "enqueued": "q.enq"}, {},
             {"ready": ListOf("q.ready", lambda s: s.keys, ReadyCopy),
              "ring": ListOf("q.ring", lambda s: s.conns * s.chans * max(s.ctags, 1), RingEntry)})
USED = Part({"requeues": "u.requeues", "reconnects": "u.reconnects", "crashes": "u.crashes", "qos": "u.qos"}, {}, {})
COPY = Part({"msg": "k{k}.msg", "persistent": "k{k}.pers", "on_disk": "disk{k}", "delivered": "deliv{k}",
             "tx_group": "grp{k}", **{name: f"fate{{k}}.{name}" for name in FATES.values()}}, {}, {})
CONNECTION = Part({"status": "c{c}.status", "broker_closed": "c{c}.bclosed", "published": "c{c}.published"}, {},
                  {"auto": ListOf("c{c}.auto", lambda s: s.keys, AutoDelivery)})
TO_BROKER = ListOf("c{c}.tb{ch}", lambda s: s.fifo, FrameSlot)
TO_CLIENT = ListOf("c{c}.tc{ch}", lambda s: s.fifo, FrameSlot)
CHANNEL = Part({"status": "b{c}.{ch}.status", "mode": "b{c}.{ch}.mode", "next_tag": "b{c}.{ch}.next_tag",
                "prefetch": "b{c}.{ch}.prefetch", "global_limit": "b{c}.{ch}.glimit", "volume": "b{c}.{ch}.volume",
                "qos_excess": "b{c}.{ch}.qexcess", "publish_seq": "b{c}.{ch}.pseq",
                "commit_pending": "b{c}.{ch}.cpending"},
               {"consumer": ("b{c}.{ch}.cons{i}", lambda s: s.ctags),
                "no_ack": ("b{c}.{ch}.noack{i}", lambda s: s.ctags),
                "limit": ("b{c}.{ch}.limit{i}", lambda s: s.ctags),
                "confirmed": ("b{c}.{ch}.confd{i}", lambda s: s.seqs),
                "committing": ("b{c}.{ch}.committing{i}", lambda s: s.keys)},
               {"unacked": ListOf("b{c}.{ch}.unacked", lambda s: s.keys, Unacked),
                "unconfirmed": ListOf("b{c}.{ch}.unconf", lambda s: s.seqs, Unconfirmed),
                "tx_publishes": ListOf("b{c}.{ch}.txp", lambda s: s.keys, HeldPublish)})
VIEW = Part({"status": "v{c}.{ch}.status", "mode": "v{c}.{ch}.mode", "publish_seq": "v{c}.{ch}.pubseq",
             "last_tag": "v{c}.{ch}.last_tag", "last_msg": "v{c}.{ch}.last_msg", "disorder": "v{c}.{ch}.disorder",
             "tx_dirty": "v{c}.{ch}.tx_dirty"},
            {"consumer": ("v{c}.{ch}.cons{i}", lambda s: s.ctags),
             "confirmed": ("v{c}.{ch}.conf{i}", lambda s: s.seqs)},
            {"held": ListOf("v{c}.{ch}.held", lambda s: s.tags, HeldTag)})


def names(shape: Shape) -> list[str]:
    """Every field of the encoding, in a fixed order."""
    s = Fields({}, shape)
    out = [s.broker.key("up"), *s.queue.scalar_keys(), *s.used.scalar_keys(), s.broker.key("tx_groups")]
    out += s.queue.ready.keys() + s.queue.ring.keys()
    for k in range(1, shape.keys + 1):
        out += s.copies[k].scalar_keys()
    for c in range(shape.conns):
        conn = s.connections[c]
        out += conn.scalar_keys() + conn.auto.keys()
        for ch in range(shape.chans + 1):
            out += s.to_broker[c, ch].keys() + s.to_client[c, ch].keys()
    for c, ch in shape.channels():
        b, v = s.channels[c, ch], s.views[c, ch]
        out += b.scalar_keys() + b.unacked.keys() + b.unconfirmed.keys() + b.tx_publishes.keys()
        for t in range(1, shape.ctags + 1):
            out += [b.consumer.key(t), b.no_ack.key(t), b.limit.key(t), v.consumer.key(t)]
        out += b.confirmed.keys() + b.committing.keys()
        out += v.scalar_keys() + v.held.keys() + v.confirmed.keys()
    return out


def fifo_keys(shape: Shape) -> set[str]:
    """The fields of the frames in flight, either way."""
    s = Fields({}, shape)
    return {key for c in range(shape.conns) for ch in range(shape.chans + 1)
            for fifo in (s.to_broker[c, ch], s.to_client[c, ch]) for key in fifo.keys()}


# ---------------------------------------------------------------- reading and writing by name

class Fields:
    """A state of the family (``x``: key -> value) over ``shape``, read and written through named views;
    writing a key the shape does not have is a KeyError."""

    def __init__(self, x: dict, shape: Shape):
        self.x, self.shape = x, shape

    def __getitem__(self, key: str):
        return self.x[key]

    def __setitem__(self, key: str, value) -> None:
        if key not in self.x:
            raise KeyError(key)
        self.x[key] = value

    @property
    def broker(self) -> "View":
        """Whether the broker is up, and the committed groups of copies so far (TX-9)."""
        return View(self, BROKER, {})

    @property
    def queue(self) -> "View":
        """Queue q0: whether it exists and is durable, the keys it took, its ready copies and ring."""
        return View(self, QUEUE, {})

    @property
    def used(self) -> "View":
        """The budgets used so far."""
        return View(self, USED, {})

    @property
    def copies(self) -> "_Each":
        """``copies[k]``: copy k's message, persistent flag, disk record, delivered flag, group and fates."""
        return _Each(self, COPY, ("k",))

    @property
    def connections(self) -> "_Each":
        """``connections[c]``: its status, whether the broker closed it, its publishes, its automatic deliveries."""
        return _Each(self, CONNECTION, ("c",))

    @property
    def channels(self) -> "_Each":
        """``channels[c, ch]``: the broker's channel."""
        return _Each(self, CHANNEL, ("c", "ch"))

    @property
    def views(self) -> "_Each":
        """``views[c, ch]``: the client's view of the channel."""
        return _Each(self, VIEW, ("c", "ch"))

    @property
    def to_broker(self) -> "_Each":
        """``to_broker[c, ch]``: the frames in flight to the broker on channel ch (0: the connection's)."""
        return _Each(self, TO_BROKER, ("c", "ch"))

    @property
    def to_client(self) -> "_Each":
        """``to_client[c, ch]``: the frames in flight to the client."""
        return _Each(self, TO_CLIENT, ("c", "ch"))


class _Each:
    """The parts (or lists) of one kind, by their indices."""

    def __init__(self, state: Fields, kind, indices: tuple[str, ...]):
        self.state, self.kind, self.indices = state, kind, indices

    def __getitem__(self, at):
        at = dict(zip(self.indices, at if isinstance(at, tuple) else (at,)))
        if isinstance(self.kind, ListOf):
            return FixedList(self.state, self.kind, at)
        return View(self.state, self.kind, at)


class View:
    """One part of a state: its fields as attributes, its indexed fields as ``Indexed`` and its lists as
    ``FixedList``; an unknown name is an AttributeError."""

    __slots__ = ("_state", "_part", "_at")

    def __init__(self, state: Fields, part: Part, at: dict):
        object.__setattr__(self, "_state", state)
        object.__setattr__(self, "_part", part)
        object.__setattr__(self, "_at", at)

    def key(self, name: str) -> str:
        return self._part.scalars[name].format(**self._at)

    def scalar_keys(self) -> list[str]:
        return [template.format(**self._at) for template in self._part.scalars.values()]

    def all_keys(self) -> list[str]:
        """Every key of the part: its fields, its indexed fields and its lists."""
        return self.scalar_keys() + [k for name in self._part.indexed for k in getattr(self, name).keys()] + \
            [k for name in self._part.lists for k in getattr(self, name).keys()]

    def __getattr__(self, name: str):
        part = self._part
        if name in part.scalars:
            return self._state[self.key(name)]
        if name in part.indexed:
            template, size = part.indexed[name]
            return Indexed(self._state, template, self._at, size(self._state.shape))
        if name in part.lists:
            return FixedList(self._state, part.lists[name], self._at)
        raise AttributeError(name)

    def __setattr__(self, name: str, value) -> None:
        if name not in self._part.scalars:
            raise AttributeError(name)
        self._state[self.key(name)] = value


class Indexed:
    """A field per index 1 .. size (a consumer tag, a publish number, a copy key), read and written as
    ``field[i]``."""

    def __init__(self, state: Fields, template: str, at: dict, size: int):
        self.state, self.template, self.at, self.size = state, template, at, size

    def key(self, i) -> str:
        return self.template.format(**self.at, i=i)

    def keys(self) -> list[str]:
        return [self.key(i) for i in range(1, self.size + 1)]

    def __getitem__(self, i):
        return self.state[self.key(i)]

    def __setitem__(self, i, value) -> None:
        self.state[self.key(i)] = value


class FixedList:
    """A list of at most ``capacity`` rows: its length (key ``prefix.len``) and each row's columns
    (``prefix.i.j``), named by the list's row type. The operations that rewrite it symbolically add to
    the effect's conditions (``Eff.need``) that it stays within its capacity."""

    def __init__(self, state: Fields, of: ListOf, at: dict):
        self.state, self.row_type = state, of.row
        self.prefix = of.prefix.format(**at)
        self.capacity = of.capacity(state.shape)
        self.width = len(of.row._fields)

    def _key(self, i: int, j: int) -> str:
        return f"{self.prefix}.{i}.{j}"

    def keys(self) -> list[str]:
        return [f"{self.prefix}.len"] + [self._key(i, j) for i in range(self.capacity) for j in range(self.width)]

    @property
    def length(self):
        return self.state[f"{self.prefix}.len"]

    @length.setter
    def length(self, value) -> None:
        self.state[f"{self.prefix}.len"] = value

    def row(self, i: int):
        return self.row_type(*[self.state[self._key(i, j)] for j in range(self.width)])

    def set_row(self, i: int, values) -> None:
        for j, value in enumerate(values):
            self.state[self._key(i, j)] = value

    def put(self, rows: list) -> None:
        """The rows of a concrete state (``model.bounded.project``); more than the capacity is outside the
        family."""
        if len(rows) > self.capacity:
            raise OutsideSubset(f"{self.prefix}: {len(rows)} entries, capacity {self.capacity}")
        self.length = len(rows)
        for i, row in enumerate(rows):
            self.set_row(i, [int(value) for value in row])

    def clear(self) -> None:
        """No rows, every slot 0."""
        for i in range(self.capacity):
            self.set_row(i, [0] * self.width)
        self.length = 0

    # symbolic operations (on an ``Eff``)
    def live(self) -> list[tuple[z3.BoolRef, NamedTuple]]:
        """(present, row) for each slot."""
        n = self.length
        return [(i < n, self.row(i)) for i in range(self.capacity)]

    def push(self, vals, when=True) -> None:
        """Append a row (when ``when``); it must fit."""
        n, cap, when = self.length, self.capacity, z3.BoolVal(when) if isinstance(when, bool) else when
        self.state.need(z3.Implies(when, n < cap))
        for i in range(cap):
            for j, v in enumerate(vals):
                self.state[self._key(i, j)] = z3.If(z3.And(when, n == i), bv(v), self.state[self._key(i, j)])
        self.length = z3.If(when, n + 1, n)

    def pop(self) -> None:
        """Drop the first row."""
        cap = self.capacity
        for i in range(cap):
            for j in range(self.width):
                self.state[self._key(i, j)] = self.state[self._key(i + 1, j)] if i + 1 < cap else bv(0)
        self.length = self.length - 1

    def remove(self, drop: Callable[[NamedTuple], z3.BoolRef]) -> None:
        """Remove every row for which ``drop(row)`` holds, keeping the others in order."""
        rows = self.live()
        w = len(rows[0][1]) if rows else 0
        keep = [z3.And(present, z3.Not(drop(r))) for present, r in rows]
        rank = [z3.Sum([z3.If(k, bv(1), bv(0)) for k in keep[:j]] + [bv(0)]) for j in range(len(rows))]
        for i in range(len(rows)):
            for col in range(w):
                v = bv(0)
                for j in reversed(range(i, len(rows))):
                    v = z3.If(z3.And(keep[j], rank[j] == i), rows[j][1][col], v)
                self.state[self._key(i, col)] = v
        self.length = z3.Sum([z3.If(k, bv(1), bv(0)) for k in keep] + [bv(0)])

    def insert_sorted(self, vals, when=True) -> None:
        """Insert a row before the first row whose first column is greater (sorted lists, RQ-1)."""
        rows = self.live()
        cap, n, when = len(rows), self.length, z3.BoolVal(when) if isinstance(when, bool) else when
        self.state.need(z3.Implies(when, n < cap))
        pos = z3.Sum([z3.If(z3.And(present, r[0] < bv(vals[0])), bv(1), bv(0)) for present, r in rows] + [bv(0)])
        for i in range(cap):
            for j, v in enumerate(vals):
                prev = rows[i - 1][1][j] if i else bv(0)
                new = z3.If(i < pos, rows[i][1][j], z3.If(pos == i, bv(v), prev))
                self.state[self._key(i, j)] = z3.If(when, new, rows[i][1][j])
        self.length = z3.If(when, n + 1, n)

    def count(self, pred: Callable[[NamedTuple], z3.BoolRef]) -> z3.ArithRef:
        return z3.Sum([z3.If(z3.And(present, pred(r)), bv(1), bv(0)) for present, r in self.live()] + [bv(0)])

    def any(self, pred: Callable[[NamedTuple], z3.BoolRef]) -> z3.BoolRef:
        return z3.Or([z3.And(present, pred(r)) for present, r in self.live()] + [z3.BoolVal(False)])


# ---------------------------------------------------------------- effects

class Eff(Fields):
    """A state being rewritten by an effect: fields, plus the conditions the effect needs to stay inside
    the subset and its capacities (they join the relation's guard)."""

    def __init__(self, x: dict, shape: Shape):
        super().__init__(dict(x), shape)
        self.req = []

    def __setitem__(self, key: str, value) -> None:
        super().__setitem__(key, bv(value))

    def need(self, *conds) -> None:
        self.req.extend(conds)

    def copy(self) -> "Eff":
        e = Eff(self.x, self.shape)
        e.req = list(self.req)
        return e


def merge(cond: z3.BoolRef, a: Eff, b: Eff) -> Eff:
    """``a`` where cond holds, else ``b``, field by field."""
    out = Eff(b.x, b.shape)
    for k, va in a.x.items():
        vb = b.x[k]
        if not va.eq(vb):
            out.x[k] = z3.If(cond, va, vb)
    out.req = [z3.Implies(cond, z3.And(a.req + [z3.BoolVal(True)])),
               z3.Implies(z3.Not(cond), z3.And(b.req + [z3.BoolVal(True)]))]
    return out
