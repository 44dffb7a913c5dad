"""The spec's transition system over one bounded configuration, in Z3, for bounded model checking
(``proofs.bmc``): the "copies and frames" family.

The channel-modes family (``model.state``) is unbounded and leaves what it does not hold to oracles,
which is right for inductive proofs but lets a search invent executions (an oracle may say a frame is
a publish when the client sent a consume). A bounded search needs every fact its guards read, so this
family holds the spec state itself, field for field, over the sizes of one configuration: the frames
in flight (one fixed-capacity FIFO per channel and direction), queue q0's ready copies and consumer
ring, each channel's outstanding deliveries, consumers, prefetch, publish numbering, confirms and
held-back publishes, each client's view (held tags, confirms seen, last message read), the disk, the
copies' fates, and the budgets. Every field is a Z3 integer (booleans as 0/1), one constant per field
per step of the unrolling.

One relation per spec action, with the same name, its guard (the configuration's choice, as
``spec.machine.candidates`` makes it, and the spec's precondition) beside its effect. The family covers
a subset of the semantics (``SUBSET``): one queue q0 reached through the default exchange, no
mandatory or immediate publish, acks and rejects of single tags outside transactions, no error path
(an unknown tag, a mode switch, a closed channel), and no delivery to an automatic-mode consumer on a
channel with a global limit (the spec makes it two steps, ``Queue.sending``: no hazard's configuration
has one, ``proofs.bmc.HAZARD_CONFIGS``). Each guard also requires its step to stay inside
that subset, so the relation is an under-approximation of the spec: every execution Z3 finds is one
the spec has (``proofs.bmc`` replays it through ``spec.machine.step`` to show it), and a behaviour
outside the subset is missing rather than wrong. Actions with no relation here (``NOT_MODELLED``)
never fire in the search.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import z3

from spec import actions as A
from spec.machine import _act
from spec.frames import (
    BASIC_ACK, BASIC_CONSUME, BASIC_CONSUME_OK, BASIC_DELIVER, BASIC_PUBLISH, BASIC_QOS, BASIC_QOS_OK,
    BASIC_REJECT, CONFIRM_SELECT, CONFIRM_SELECT_OK, DEFAULT_EXCHANGE, MSG_STRIDE, TX_COMMIT, TX_COMMIT_OK,
    TX_SELECT, TX_SELECT_OK,
)
from spec.state import (
    C_CLOSED, C_OPEN, CH_CLOSED, CH_OPEN, CONN_DOWN, CONN_UP, FATE_ACKED, FATE_AUTO, FATE_LOST_AUTOACK,
    FATE_LOST_CRASH, MODE_CONFIRM, MODE_NONE, MODE_TX,
)

SUBSET = ("one queue (q0), reached through the default exchange; publishes neither mandatory nor immediate; "
          "acks and rejects of one tag outside transactions; no error path, channel close or reconnect; "
          "no delivery to an automatic-mode consumer on a channel with a global limit (two steps in the spec, "
          "broker.deliver)")
FATES = {FATE_ACKED: "acked", FATE_AUTO: "auto", FATE_LOST_CRASH: "lost_crash", FATE_LOST_AUTOACK: "lost_auto"}
W = 5                   # fields per frame slot: the method and four fields (``frame_slot``)
# Every field is a small bit-vector: the encoding's values (statuses, counts, tags, keys, message codes)
# are small non-negative numbers, and bit-vectors let Z3 decide the unrolling by SAT, far faster than
# integer arithmetic over the same If-chains. Signed comparison is exact below 2**(WIDTH-1).
WIDTH = 8
MSG_CODE_STRIDE = 16    # messages per connection a field can name (configurations publish at most 12)


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


def shape_of(config) -> Shape:
    """The encoding's sizes for ``config``; OutsideSubset when the configuration leaves the subset."""
    if len(config.queues) != 1 or config.bindings or not config.queues[0].declared or \
            config.queues[0].exclusive or config.queues[0].dead_letter >= 0:
        raise OutsideSubset(f"{config.name}: the bounded family holds one plain queue")
    for role in config.roles.values():
        if any(t != (DEFAULT_EXCHANGE, 0) for t in role.publish) or True in role.mandatory:
            raise OutsideSubset(f"{config.name}: a role publishes elsewhere than q0 or mandatory")
        if role.get or role.cancel or role.recover or role.nack or role.multiple or role.ack_all or role.bad_ack \
                or role.mode_errors or role.declare or role.bind or role.purge or role.delete or role.close \
                or role.close_connection or role.protocol_errors or role.exclusive or (role.tx and role.ack) \
                or any(q != 0 for q, _ in role.consume) or False in role.reject:
            raise OutsideSubset(f"{config.name}: a role takes actions outside the bounded family")
    if not config.channels_open or config.failures or config.closes or config.cancels or config.gets or \
            config.admin or config.bad or config.vanishes or config.channel_errors:
        raise OutsideSubset(f"{config.name}: budgets outside the bounded family")
    m = config.messages
    ctags = max([len(r.consume) for r in config.roles.values()] + [0])
    return Shape(conns=config.connections, chans=config.channels, keys=m, tags=m + config.requeues,
                 ctags=ctags, seqs=m, fifo=m + 2)


# ---------------------------------------------------------------- field names

def names(shape: Shape) -> list[str]:
    """Every field of the encoding, in a fixed order."""
    out = ["up", "q.exists", "q.durable", "q.enq", "u.requeues", "u.reconnects", "u.crashes", "u.qos", "ngroups"]
    out += _list("q.ready", shape.keys, 2) + _list("q.ring", shape.conns * shape.chans * max(shape.ctags, 1), 3)
    for k in range(1, shape.keys + 1):
        out += [f"k{k}.msg", f"k{k}.pers", f"disk{k}", f"deliv{k}", f"grp{k}"] + [f"fate{k}.{n}" for n in FATES.values()]
    for c in range(shape.conns):
        out += [f"c{c}.status", f"c{c}.bclosed", f"c{c}.published"] + _list(f"c{c}.auto", shape.keys, 3)
        for ch in range(shape.chans + 1):
            out += _list(f"c{c}.tb{ch}", shape.fifo, W) + _list(f"c{c}.tc{ch}", shape.fifo, W)
    for c, ch in shape.channels():
        b, v = f"b{c}.{ch}.", f"v{c}.{ch}."
        out += [b + n for n in ("status", "mode", "next_tag", "prefetch", "glimit", "volume", "qexcess", "pseq",
                                "cpending")]
        out += _list(b + "unacked", shape.keys, 4) + _list(b + "unconf", shape.seqs, 3) + _list(b + "txp", shape.keys, 2)
        for t in range(1, shape.ctags + 1):
            out += [f"{b}cons{t}", f"{b}noack{t}", f"{b}limit{t}", f"{v}cons{t}"]
        out += [f"{b}confd{s}" for s in range(1, shape.seqs + 1)] + [f"{b}committing{k}" for k in range(1, shape.keys + 1)]
        out += [v + n for n in ("status", "mode", "pubseq", "last_tag", "last_msg", "disorder", "tx_dirty")]
        out += _list(v + "held", shape.tags, 1) + [f"{v}conf{s}" for s in range(1, shape.seqs + 1)]
    return out


def _list(prefix: str, cap: int, width: int) -> list[str]:
    return [f"{prefix}.len"] + [f"{prefix}.{i}.{j}" for i in range(cap) for j in range(width)]


# ---------------------------------------------------------------- the abstraction function

def project(state, shape: Shape) -> dict[str, int]:
    """A spec ``State`` as this family's values (the abstraction function); OutsideSubset when it
    holds something the family cannot (a frame outside the subset, more than a capacity allows)."""
    out: dict[str, int] = {n: 0 for n in names(shape)}
    queue = state.queues[0]
    if queue.sending:
        raise OutsideSubset("a delivery on its way to a channel with a global limit (Queue.sending)")
    out.update({"up": int(state.broker_up), "q.exists": int(queue.exists), "q.durable": int(queue.durable),
                "q.enq": queue.enqueued, "u.requeues": state.used.requeues, "u.reconnects": state.used.reconnects,
                "u.crashes": state.used.crashes, "u.qos": state.used.qos, "ngroups": len(state.tx_groups)})
    _put_list(out, "q.ready", shape.keys, [(e.key, int(e.redelivered)) for e in queue.ready])
    _put_list(out, "q.ring", shape.conns * shape.chans * max(shape.ctags, 1), list(queue.ring))
    copies = {}
    for e in queue.ready:
        copies[e.key] = (e.msg, e.persistent)
    for conn in state.conns:
        for a in conn.auto:
            copies[a[3]] = (a[4], a[5])
        for channel in conn.channels:
            for u in channel.unacked:
                copies[u.key] = (u.msg, u.persistent)
            if channel.tx_settles:
                raise OutsideSubset("held-back settlements")
            if channel.qos_uncounted:   # only held-back settlements make it, and it outlives them
                raise OutsideSubset("a global limit set over held-back settlements")
    for q, k, fate, msg, pers in state.fates:
        if fate not in FATES:
            raise OutsideSubset(f"fate {fate}")
        copies[k] = (msg, pers)
        out[f"fate{k}.{FATES[fate]}"] = 1
    for q, k, msg in state.disk:
        copies.setdefault(k, (msg, True))
        out[f"disk{k}"] = 1
    for k, (msg, pers) in copies.items():
        out[f"k{k}.msg"], out[f"k{k}.pers"] = msg_code(msg), int(pers)
    for q, k in state.delivered:
        out[f"deliv{k}"] = 1
    for gid, group in enumerate(state.tx_groups, start=1):
        for q, k in group:
            out[f"grp{k}"] = gid
    for c, conn in enumerate(state.conns):
        out.update({f"c{c}.status": conn.status, f"c{c}.bclosed": int(conn.broker_closed),
                    f"c{c}.published": conn.published})
        _put_list(out, f"c{c}.auto", shape.keys, [(a[0], a[1], a[3]) for a in conn.auto])
        for ch, fifo in enumerate(conn.to_broker):
            _put_list(out, f"c{c}.tb{ch}", shape.fifo, [frame_slot(f) for f in fifo])
        for ch, fifo in enumerate(conn.to_client):
            _put_list(out, f"c{c}.tc{ch}", shape.fifo, [frame_slot(f) for f in fifo])
        for ch, (channel, view) in enumerate(zip(conn.channels, conn.clients), start=1):
            b, v = f"b{c}.{ch}.", f"v{c}.{ch}."
            if channel.committing and not channel.commit_pending:
                raise OutsideSubset("a commit applied and not yet answered")
            out.update({b + "status": channel.status, b + "mode": channel.mode, b + "next_tag": channel.next_tag,
                        b + "prefetch": channel.prefetch, b + "glimit": channel.global_limit,
                        b + "volume": channel.volume, b + "qexcess": channel.qos_excess,
                        b + "pseq": channel.publish_seq, b + "cpending": int(channel.commit_pending)})
            _put_list(out, b + "unacked", shape.keys,
                      [(u.tag, u.key, int(u.redelivered), u.consumer) for u in channel.unacked])
            for p in channel.unconfirmed:
                if p.nack or len(p.waits) > 1:
                    raise OutsideSubset("a nacked or multi-queue publish")
            _put_list(out, b + "unconf", shape.seqs,
                      [(p.seq, msg_code(p.msg), p.waits[0][1] if p.waits else 0) for p in channel.unconfirmed])
            for ex, rk, mand, pers, msg in channel.tx_pubs:
                if (ex, rk, mand) != (DEFAULT_EXCHANGE, 0, False):
                    raise OutsideSubset("a held-back publish outside the subset")
            _put_list(out, b + "txp", shape.keys, [(int(p[3]), msg_code(p[4])) for p in channel.tx_pubs])
            for k in channel.consumers:
                out[f"{b}cons{k.tag}"], out[f"{b}noack{k.tag}"], out[f"{b}limit{k.tag}"] = 1, int(k.no_ack), k.limit
            for s in channel.confirmed:
                out[f"{b}confd{s}"] = 1
            for q, k in channel.committing:
                out[f"{b}committing{k}"] = 1
            if view.tx_held or view.setup:
                raise OutsideSubset("a client view outside the subset")
            out.update({v + "status": view.status, v + "mode": view.mode, v + "pubseq": view.pub_seq,
                        v + "last_tag": view.last_tag, v + "last_msg": msg_code(view.last_msg),
                        v + "disorder": int(view.disorder), v + "tx_dirty": int(view.tx_dirty)})
            _put_list(out, v + "held", shape.tags, [(t,) for t in view.held])
            for t in view.consumers:
                out[f"{v}cons{t}"] = 1
            for s in view.confirms:
                out[f"{v}conf{s}"] = 1
    unknown = set(out) - set(names(shape))
    if unknown:
        raise OutsideSubset(f"more than the shape holds: {sorted(unknown)[0]}")
    return out


def frame_slot(frame: tuple) -> tuple[int, ...]:
    """A spec frame as a slot: (method, four fields), for the methods of the subset."""
    m = frame[0]
    if m == BASIC_PUBLISH:
        _, _, ex, rk, mand, pers, msg, imm = frame
        if (ex, rk, mand, imm) != (DEFAULT_EXCHANGE, 0, False, False):
            raise OutsideSubset("a publish outside the subset")
        return (m, int(pers), msg_code(msg), 0, 0)
    if m == BASIC_CONSUME:
        if frame[2] != 0 or frame[5]:
            raise OutsideSubset("a consume outside the subset")
        return (m, frame[3], int(frame[4]), 0, 0)
    if m in (BASIC_ACK, BASIC_REJECT, BASIC_CONSUME_OK):
        return (m, *(int(f) for f in frame[2:]), *(0,) * (6 - len(frame)))
    if m == BASIC_QOS:
        return (m, frame[2], int(frame[3]), frame[4], 0)
    if m == BASIC_DELIVER:
        return (m, frame[2], frame[3], int(frame[4]), msg_code(frame[5]))
    if m in (CONFIRM_SELECT, CONFIRM_SELECT_OK, TX_SELECT, TX_SELECT_OK, TX_COMMIT, TX_COMMIT_OK, BASIC_QOS_OK):
        return (m, 0, 0, 0, 0)
    raise OutsideSubset(f"frame method {m}")


def _put_list(out: dict, prefix: str, cap: int, rows: list) -> None:
    if len(rows) > cap:
        raise OutsideSubset(f"{prefix}: {len(rows)} entries, capacity {cap}")
    out[f"{prefix}.len"] = len(rows)
    for i, row in enumerate(rows):
        for j, value in enumerate(row):
            out[f"{prefix}.{i}.{j}"] = int(value)


# ---------------------------------------------------------------- building effects

def _z(v) -> z3.BitVecRef:
    return z3.BitVecVal(int(v), WIDTH) if isinstance(v, (bool, int)) else v


def var(name: str) -> z3.BitVecRef:
    """The field ``name`` as a fresh constant."""
    return z3.BitVec(name, WIDTH)


def msg_code(msg: int) -> int:
    """A spec message id (connection * MSG_STRIDE + number) in the few bits of a field, order kept."""
    return (msg // MSG_STRIDE) * MSG_CODE_STRIDE + msg % MSG_STRIDE


def _b(v) -> z3.BoolRef:
    """An 0/1 field as a Z3 condition."""
    return v != 0


class Eff:
    """A state being rewritten by an effect: fields, plus the conditions the effect needs to stay inside
    the subset and its capacities (they join the relation's guard)."""

    def __init__(self, x: dict, shape: Shape):
        self.x, self.shape, self.req = dict(x), shape, []

    def __getitem__(self, k):
        return self.x[k]

    def __setitem__(self, k, v):
        if k not in self.x:
            raise KeyError(k)
        self.x[k] = _z(v)

    def need(self, *conds) -> None:
        self.req.extend(conds)

    def copy(self) -> "Eff":
        e = Eff(self.x, self.shape)
        e.req = list(self.req)
        return e

    # fixed-capacity lists: "prefix.len" and rows "prefix.i.j"
    def row(self, p: str, i: int, w: int) -> list:
        return [self.x[f"{p}.{i}.{j}"] for j in range(w)]

    def cap(self, p: str) -> int:
        n = 0
        while f"{p}.{n}.0" in self.x:
            n += 1
        return n

    def push(self, p: str, vals, when=True) -> None:
        """Append a row (when ``when``); it must fit."""
        n, cap, when = self.x[f"{p}.len"], self.cap(p), z3.BoolVal(when) if isinstance(when, bool) else when
        self.need(z3.Implies(when, n < cap))
        for i in range(cap):
            for j, v in enumerate(vals):
                self[f"{p}.{i}.{j}"] = z3.If(z3.And(when, n == i), _z(v), self.x[f"{p}.{i}.{j}"])
        self[f"{p}.len"] = z3.If(when, n + 1, n)

    def pop(self, p: str, w: int) -> None:
        """Drop the first row."""
        cap = self.cap(p)
        for i in range(cap):
            for j in range(w):
                self[f"{p}.{i}.{j}"] = self.x[f"{p}.{i + 1}.{j}"] if i + 1 < cap else _z(0)
        self[f"{p}.len"] = self.x[f"{p}.len"] - 1

    def live(self, p: str) -> list[tuple[z3.BoolRef, list]]:
        """(present, row) for each slot."""
        n = self.x[f"{p}.len"]
        w = sum(1 for j in range(8) if f"{p}.0.{j}" in self.x)
        return [(i < n, self.row(p, i, w)) for i in range(self.cap(p))]

    def remove(self, p: str, drop: Callable[[list], z3.BoolRef]) -> None:
        """Remove every row for which ``drop(row)`` holds, keeping the others in order."""
        rows = self.live(p)
        w = len(rows[0][1]) if rows else 0
        keep = [z3.And(present, z3.Not(drop(r))) for present, r in rows]
        rank = [z3.Sum([z3.If(k, _z(1), _z(0)) for k in keep[:j]] + [_z(0)]) for j in range(len(rows))]
        for i in range(len(rows)):
            for col in range(w):
                v = _z(0)
                for j in reversed(range(i, len(rows))):
                    v = z3.If(z3.And(keep[j], rank[j] == i), rows[j][1][col], v)
                self[f"{p}.{i}.{col}"] = v
        self[f"{p}.len"] = z3.Sum([z3.If(k, _z(1), _z(0)) for k in keep] + [_z(0)])

    def insert_sorted(self, p: str, vals, when=True) -> None:
        """Insert a row before the first row whose column 0 is greater (sorted lists, RQ-1)."""
        rows = self.live(p)
        cap, n, when = len(rows), self.x[f"{p}.len"], z3.BoolVal(when) if isinstance(when, bool) else when
        self.need(z3.Implies(when, n < cap))
        pos = z3.Sum([z3.If(z3.And(present, r[0] < _z(vals[0])), _z(1), _z(0)) for present, r in rows] + [_z(0)])
        for i in range(cap):
            for j, v in enumerate(vals):
                prev = rows[i - 1][1][j] if i else _z(0)
                new = z3.If(i < pos, rows[i][1][j], z3.If(pos == i, _z(v), prev))
                self[f"{p}.{i}.{j}"] = z3.If(when, new, rows[i][1][j])
        self[f"{p}.len"] = z3.If(when, n + 1, n)

    def count(self, p: str, pred: Callable[[list], z3.BoolRef]) -> z3.ArithRef:
        return z3.Sum([z3.If(z3.And(present, pred(r)), _z(1), _z(0)) for present, r in self.live(p)] + [_z(0)])

    def any(self, p: str, pred: Callable[[list], z3.BoolRef]) -> z3.BoolRef:
        return z3.Or([z3.And(present, pred(r)) for present, r in self.live(p)] + [z3.BoolVal(False)])


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


@dataclass(frozen=True)
class Transition:
    """A relation in functional form: enabled when ``guard``; the state after is ``after``."""

    guard: z3.BoolRef
    after: dict


# ---------------------------------------------------------------- shared pieces of the effects

def _send(e: Eff, c: int, ch, frame, when=True) -> None:
    """The broker appends a frame for the client (broker.send)."""
    e.push(f"c{c}.tc{ch}", tuple(frame) + (0,) * (W - len(frame)), when)


def _write(e: Eff, c: int, ch: int, frame) -> None:
    """The client writes a frame (client.write)."""
    e.push(f"c{c}.tb{ch}", tuple(frame) + (0,) * (W - len(frame)))


def _broker_end_open(e: Eff, c: int) -> z3.BoolRef:
    return z3.And(_b(e["up"]), z3.Not(_b(e[f"c{c}.bclosed"])))


def _channel_open(e: Eff, c: int, ch: int) -> z3.BoolRef:
    return z3.And(_broker_end_open(e, c), e[f"b{c}.{ch}.status"] == CH_OPEN)


def _live(e: Eff, k: int) -> z3.BoolRef:
    """Copy k is live (faults.live_copies): ready, or outstanding on some channel."""
    return z3.Or(e.any("q.ready", lambda r: r[0] == k),
                 *[e.any(f"b{c}.{ch}.unacked", lambda r: r[1] == k) for c, ch in e.shape.channels()])


def _forget_waits(e: Eff, k, when=True) -> None:
    """Copy k no longer holds up a confirm or a commit-ok (storage.forget_waits)."""
    when = z3.BoolVal(when) if isinstance(when, bool) else when
    for c, ch in e.shape.channels():
        b = f"b{c}.{ch}."
        for i in range(e.cap(b + "unconf")):
            e[f"{b}unconf.{i}.2"] = z3.If(z3.And(when, e[f"{b}unconf.{i}.2"] == k), 0, e[f"{b}unconf.{i}.2"])
        for kk in range(1, e.shape.keys + 1):
            e[f"{b}committing{kk}"] = z3.If(z3.And(when, _z(k) == kk), 0, e[f"{b}committing{kk}"])


def _enqueue(e: Eff, msg, pers, when=True) -> z3.ArithRef:
    """A new copy at the tail of q0 (storage.enqueue); its key is returned."""
    when = z3.BoolVal(when) if isinstance(when, bool) else when
    key = e["q.enq"] + 1
    e.need(z3.Implies(when, key <= e.shape.keys))
    for k in range(1, e.shape.keys + 1):
        at = z3.And(when, key == k)
        e[f"k{k}.msg"] = z3.If(at, _z(msg), e[f"k{k}.msg"])
        e[f"k{k}.pers"] = z3.If(at, _z(pers), e[f"k{k}.pers"])
    e.push("q.ready", (key, 0), when)
    e["q.enq"] = z3.If(when, key, e["q.enq"])
    return key


def _fate(e: Eff, k, name: str, when=True) -> None:
    when = z3.BoolVal(when) if isinstance(when, bool) else when
    for kk in range(1, e.shape.keys + 1):
        e[f"fate{kk}.{name}"] = z3.If(z3.And(when, _z(k) == kk), 1, e[f"fate{kk}.{name}"])


def _release(e: Eff, c: int, ch: int, settled_consumer) -> None:
    """broker.released for one settled delivery: the global limit counts a consumer delivery off
    (broker.count_off: a count of 0 stays 0)."""
    b = f"b{c}.{ch}."
    counted = z3.And(_b(e[b + "glimit"]), settled_consumer != 0)
    e[b + "volume"] = z3.If(z3.And(counted, e[b + "volume"] != 0), e[b + "volume"] - 1, e[b + "volume"])


def _reset_connection(e: Eff, c: int) -> None:
    """faults.reset_connection to CONN_DOWN: nothing in flight, every channel and view closed."""
    e[f"c{c}.status"], e[f"c{c}.bclosed"] = CONN_DOWN, 0
    clean = {n: 0 for n in names(e.shape) if n.startswith((f"c{c}.tb", f"c{c}.tc", f"c{c}.auto"))}
    for ch in range(1, e.shape.chans + 1):
        clean.update({n: 0 for n in names(e.shape) if n.startswith((f"b{c}.{ch}.", f"v{c}.{ch}."))})
        clean[f"b{c}.{ch}.status"], clean[f"b{c}.{ch}.next_tag"] = CH_CLOSED, 1
        clean[f"v{c}.{ch}.status"] = C_CLOSED
    for n, v in clean.items():
        e[n] = v


def _drop_consumers_of(e: Eff, c: int) -> None:
    """Connection c's consumers leave q0's ring (storage.drop_consumer)."""
    e.remove("q.ring", lambda r: r[0] == c)


# ---------------------------------------------------------------- the candidates of a configuration

def instances(config, shape: Shape) -> list:
    """Every action ``spec.machine.candidates`` can try in this configuration, in any state: the
    finite alphabet of the unrolling (each step picks one)."""
    out = []
    for c in range(shape.conns):
        for ch in range(shape.chans + 1):
            out.append(_act(A.BrokerTakeFrame, c, ch))
    out.append(_act(A.BrokerDeliver, 0))
    for c, ch in shape.channels():
        out.append(_act(A.BrokerCloseOk, c, ch))
        for s in range(1, shape.seqs + 1):
            out += [_act(A.BrokerConfirm, c, ch, s, False), _act(A.BrokerConfirm, c, ch, s, True)]
        out.append(_act(A.BrokerCommitOk, c, ch))
    msgs = [c * MSG_STRIDE + n for c in range(shape.conns) for n in range(1, config.messages + 1)]
    for k in range(1, shape.keys + 1):
        for msg in msgs:
            out += [_act(A.DiskFsync, 0, k, msg, True), _act(A.DiskFsync, 0, k, msg, False)]
    for c in range(shape.conns):
        for ch in range(shape.chans + 1):
            out.append(_act(A.ClientReceive, c, ch))
        out.append(_act(A.ClientConnect, c, 0, config.channels_open))
        for ch in range(1, shape.chans + 1):
            role = config.roles.get((c, ch))
            if role is None:
                continue
            for ex, rk in role.publish:
                for mand in role.mandatory:
                    for pers in role.persistent:
                        out.append(_act(A.ClientPublish, c, ch, ex, rk, mand, pers))
            for i, (q, no_ack) in enumerate(role.consume, start=1):
                out.append(_act(A.ClientConsume, c, ch, q, i, no_ack, role.exclusive))
            for tag in range(1, shape.tags + 1):
                if role.ack:
                    out.append(_act(A.ClientAck, c, ch, tag, False))
                for requeue in role.reject:
                    out.append(_act(A.ClientReject, c, ch, tag, requeue))
            for count, global_ in role.qos:
                out.append(_act(A.ClientQos, c, ch, count, global_))
            if role.confirm:
                out.append(_act(A.ClientConfirmSelect, c, ch))
            if role.tx:
                out += [_act(A.ClientTxSelect, c, ch), _act(A.ClientTxCommit, c, ch), _act(A.ClientTxRollback, c, ch)]
    if config.failures:
        out += [_act(A.BrokerQueueFail, c, ch, s) for c, ch in shape.channels() for s in range(1, shape.seqs + 1)]
    if config.reconnects and config.losses:
        out += [_act(A.NetworkLoss, c) for c in range(shape.conns)]
    if config.crashes:
        out.append(_act(A.BrokerCrash))
    out.append(_act(A.BrokerRestart))
    return list(dict.fromkeys(out))


# ---------------------------------------------------------------- client actions (spec.client)

def _client_may(e: Eff, a) -> z3.BoolRef:
    """The candidate condition every client channel action shares (machine.candidates) and its
    precondition (client.can_use_channel): the connection is up and the client holds the channel open."""
    return z3.And(e[f"c{a.conn}.status"] == CONN_UP, e[f"v{a.conn}.{a.ch}.status"] == C_OPEN)


def ClientPublish(e: Eff, a, config) -> Transition:
    """basic.publish of the connection's next message (client.publish); a candidate while messages are left."""
    c, ch, v = a.conn, a.ch, f"v{a.conn}.{a.ch}."
    published = z3.Sum([e[f"c{i}.published"] for i in range(e.shape.conns)])
    guard = z3.And(_client_may(e, a), published < config.messages,
                   z3.BoolVal((a.exchange, a.routing_key, a.mandatory, a.immediate) == (DEFAULT_EXCHANGE, 0, False, False)))
    msg = c * MSG_CODE_STRIDE + e[f"c{c}.published"] + 1
    e[f"c{c}.published"] = e[f"c{c}.published"] + 1
    e[v + "pubseq"] = z3.If(e[v + "mode"] == MODE_CONFIRM, e[v + "pubseq"] + 1, e[v + "pubseq"])
    e[v + "tx_dirty"] = z3.If(e[v + "mode"] == MODE_TX, 1, e[v + "tx_dirty"])
    _write(e, c, ch, (BASIC_PUBLISH, int(a.persistent), msg))
    return Transition(guard, e)


def ClientConsume(e: Eff, a, config) -> Transition:
    """basic.consume with the role's tag; a candidate while the client has no consumer of that tag."""
    c, ch, v = a.conn, a.ch, f"v{a.conn}.{a.ch}."
    guard = z3.And(_client_may(e, a), e[f"{v}cons{a.consumer_tag}"] == 0, z3.BoolVal(a.queue == 0 and not a.exclusive))
    e[f"{v}cons{a.consumer_tag}"] = 1
    _write(e, c, ch, (BASIC_CONSUME, a.consumer_tag, int(a.no_ack)))
    return Transition(guard, e)


def _held(e: Eff, c: int, ch: int, tag: int) -> z3.BoolRef:
    return e.any(f"v{c}.{ch}.held", lambda r: r[0] == tag)


def ClientAck(e: Eff, a, config) -> Transition:
    """basic.ack of one held tag (client.settle_frame), outside a transaction."""
    c, ch, v = a.conn, a.ch, f"v{a.conn}.{a.ch}."
    guard = z3.And(_client_may(e, a), _held(e, c, ch, a.tag), e[v + "mode"] != MODE_TX, z3.BoolVal(not a.multiple))
    e.remove(v + "held", lambda r: r[0] == a.tag)
    _write(e, c, ch, (BASIC_ACK, a.tag, 0))
    return Transition(guard, e)


def ClientReject(e: Eff, a, config) -> Transition:
    """basic.reject of one held tag; requeue=true only while the requeue budget lasts (RQ-6)."""
    c, ch, v = a.conn, a.ch, f"v{a.conn}.{a.ch}."
    budget = e["u.requeues"] < config.requeues if a.requeue else z3.BoolVal(True)
    guard = z3.And(_client_may(e, a), _held(e, c, ch, a.tag), e[v + "mode"] != MODE_TX, budget)
    if a.requeue:
        e["u.requeues"] = e["u.requeues"] + 1
    e.remove(v + "held", lambda r: r[0] == a.tag)
    _write(e, c, ch, (BASIC_REJECT, a.tag, int(a.requeue)))
    return Transition(guard, e)


def ClientQos(e: Eff, a, config) -> Transition:
    """basic.qos; a candidate while the qos budget lasts."""
    guard = z3.And(_client_may(e, a), e["u.qos"] < config.qos, z3.BoolVal(a.prefetch_size == 0))
    e["u.qos"] = e["u.qos"] + 1
    _write(e, a.conn, a.ch, (BASIC_QOS, a.prefetch_count, int(a.global_), 0))
    return Transition(guard, e)


def ClientConfirmSelect(e: Eff, a, config) -> Transition:
    """confirm.select, tried by a confirm role on a channel in no mode."""
    v = f"v{a.conn}.{a.ch}."
    guard = z3.And(_client_may(e, a), e[v + "mode"] == MODE_NONE)
    e[v + "mode"] = MODE_CONFIRM
    _write(e, a.conn, a.ch, (CONFIRM_SELECT,))
    return Transition(guard, e)


def ClientTxSelect(e: Eff, a, config) -> Transition:
    """tx.select, tried by a tx role on a channel in no mode."""
    v = f"v{a.conn}.{a.ch}."
    guard = z3.And(_client_may(e, a), e[v + "mode"] == MODE_NONE)
    e[v + "mode"] = MODE_TX
    _write(e, a.conn, a.ch, (TX_SELECT,))
    return Transition(guard, e)


def ClientTxCommit(e: Eff, a, config) -> Transition:
    """tx.commit, tried once something was published or settled since the last commit."""
    v = f"v{a.conn}.{a.ch}."
    guard = z3.And(_client_may(e, a), e[v + "mode"] == MODE_TX, e[v + "tx_dirty"] == 1)
    e[v + "tx_dirty"] = 0
    _write(e, a.conn, a.ch, (TX_COMMIT,))
    return Transition(guard, e)


def ClientReceive(e: Eff, a, config) -> Transition:
    """The client reads the oldest frame of channel ch (client.receive): a delivery is held (manual
    mode) or settles its automatic-mode copy (AM-2), and marks disorder when its message is older
    than the last one read (RQ-3); a confirm joins the confirms seen; the other replies change nothing."""
    c, ch = a.conn, a.ch
    if ch == 0:
        return Transition(z3.BoolVal(False), e)             # connection.close frames: outside the subset
    p, v = f"c{c}.tc{ch}", f"v{c}.{ch}."
    m, f1, f2, f3, f4 = e.row(p, 0, W)
    guard = z3.And(e[f"{p}.len"] > 0, z3.Or([m == x for x in (BASIC_DELIVER, BASIC_ACK, BASIC_CONSUME_OK,
                                                                CONFIRM_SELECT_OK, TX_SELECT_OK, BASIC_QOS_OK,
                                                                TX_COMMIT_OK)]))
    e.pop(p, W)
    deliver = e.copy()
    tag, msg = f2, f4
    ap = f"c{c}.auto"
    is_auto = deliver.any(ap, lambda r: z3.And(r[0] == ch, r[1] == tag))
    auto_key = z3.Sum([z3.If(z3.And(present, r[0] == ch, r[1] == tag), r[2], 0) for present, r in deliver.live(ap)]
                      + [_z(0)])
    deliver.remove(ap, lambda r: z3.And(r[0] == ch, r[1] == tag))
    _fate(deliver, auto_key, "auto", is_auto)
    deliver.push(v + "held", (tag,), z3.And(z3.Not(is_auto), deliver[v + "status"] == C_OPEN))
    deliver[v + "disorder"] = z3.If(z3.Or(_b(deliver[v + "disorder"]), msg < deliver[v + "last_msg"]), _z(1), _z(0))
    deliver[v + "last_tag"], deliver[v + "last_msg"] = tag, msg
    confirm = e.copy()
    for s in range(1, e.shape.seqs + 1):                    # multiple: 1..min(tag, pub_seq); else tag alone
        covered = z3.If(_b(f2), z3.And(s <= f1, s <= confirm[v + "pubseq"]), f1 == s)
        confirm[f"{v}conf{s}"] = z3.If(covered, 1, confirm[f"{v}conf{s}"])
    e.need(z3.Implies(m == BASIC_ACK, f1 <= e.shape.seqs))
    out = merge(m == BASIC_DELIVER, deliver, merge(m == BASIC_ACK, confirm, e))
    return Transition(guard, out)


# ---------------------------------------------------------------- broker actions (spec.broker)

def BrokerTakeFrame(e: Eff, a, config) -> Transition:
    """The broker takes the oldest frame of channel ch and acts on it (broker.take_frame) for the
    methods of the subset, on an open channel, taking no error path."""
    c, ch = a.conn, a.ch
    if ch == 0:
        return Transition(z3.BoolVal(False), e)             # connection.close: outside the subset
    p, b = f"c{c}.tb{ch}", f"b{c}.{ch}."
    m, f1, f2, f3, f4 = e.row(p, 0, W)
    guard = z3.And(_broker_end_open(e, c), e[f"{p}.len"] > 0, e[b + "cpending"] == 0,     # can_take_frame
                   e[b + "status"] == CH_OPEN)
    e.pop(p, W)
    mode = e[b + "mode"]
    cases = []

    # basic.publish: held back in tx mode (TX-2); else enqueued, numbered in confirm mode (PC-1, PC-5)
    pub = e.copy()
    pub.need(pub["q.exists"] == 1)
    tx = mode == MODE_TX
    pub.push(b + "txp", (f1, f2), tx)
    key = _enqueue(pub, f2, f1, z3.Not(tx))
    confirm = mode == MODE_CONFIRM
    seq = pub[b + "pseq"] + 1
    pub.need(z3.Implies(confirm, seq <= e.shape.seqs))
    waits = z3.If(z3.And(_b(f1), _b(pub["q.durable"])), key, 0)
    pub.push(b + "unconf", (seq, f2, waits), confirm)
    pub[b + "pseq"] = z3.If(confirm, seq, pub[b + "pseq"])
    cases.append((m == BASIC_PUBLISH, pub))

    # basic.consume: joins the ring with the channel's per-consumer limit (DS-1, PF-2)
    con = e.copy()
    con.need(con["q.exists"] == 1)
    for t in range(1, e.shape.ctags + 1):
        at = f1 == t
        con.need(z3.Implies(at, con[f"{b}cons{t}"] == 0))                  # a reused tag: outside the subset
        con[f"{b}cons{t}"] = z3.If(at, 1, con[f"{b}cons{t}"])
        con[f"{b}noack{t}"] = z3.If(at, f2, con[f"{b}noack{t}"])
        con[f"{b}limit{t}"] = z3.If(at, con[b + "prefetch"], con[f"{b}limit{t}"])
    con.need(z3.And(1 <= f1, f1 <= e.shape.ctags))
    con.push("q.ring", (c, ch, f1))
    _send(con, c, ch, (BASIC_CONSUME_OK, f1))
    cases.append((m == BASIC_CONSUME, con))

    # basic.ack / basic.reject of one outstanding tag, outside tx mode (ACK-1, ACK-5, RQ-1, RQ-2)
    for method in (BASIC_ACK, BASIC_REJECT):
        st = e.copy()
        up = b + "unacked"
        st.need(st.any(up, lambda r: r[0] == f1), mode != MODE_TX)
        if method == BASIC_ACK:
            st.need(f2 == 0)                                                  # multiple: outside the subset
        row = [z3.Sum([z3.If(z3.And(present, r[0] == f1), r[j], 0) for present, r in st.live(up)] + [_z(0)])
               for j in range(4)]
        st.remove(up, lambda r: r[0] == f1)
        _release(st, c, ch, row[3])
        if method == BASIC_ACK:
            _fate(st, row[1], "acked")
            _forget_waits(st, row[1])
        else:
            st.need(f2 == 1)                                                  # requeue=false: outside the subset
            st.need(st["q.exists"] == 1)
            st.insert_sorted("q.ready", (row[1], 1))
        cases.append((m == method, st))

    # basic.qos (PF-2), as RabbitMQ 3.10.8 does it
    qos = e.copy()
    qos.need(f3 == 0)
    outstanding = qos.count(b + "unacked", lambda r: r[3] != 0)
    total = qos[b + "unacked.len"]
    set_global = z3.And(_b(f2), f1 != 0)
    qos[b + "volume"] = z3.If(set_global, z3.If(_b(qos[b + "glimit"]), qos[b + "volume"], total), 0)
    qos[b + "qexcess"] = z3.If(set_global, z3.If(f1 < outstanding, outstanding, 0), 0)
    qos[b + "glimit"] = z3.If(set_global, f1, 0)
    qos[b + "prefetch"] = z3.If(z3.Not(_b(f2)), f1, qos[b + "prefetch"])
    _send(qos, c, ch, (BASIC_QOS_OK,))
    cases.append((m == BASIC_QOS, qos))

    # confirm.select (PC-1) and tx.select (TX-1), never switching modes (PC-8: outside the subset)
    for method, new, other, ok in ((CONFIRM_SELECT, MODE_CONFIRM, MODE_TX, CONFIRM_SELECT_OK),
                                   (TX_SELECT, MODE_TX, MODE_CONFIRM, TX_SELECT_OK)):
        sel = e.copy()
        sel.need(mode != other)
        sel[b + "mode"] = new
        _send(sel, c, ch, (ok,))
        cases.append((m == method, sel))

    # tx.commit: held-back publishes take effect; once copies are enqueued, commit-ok is a step of its own
    # and waits for them on disk (TX-2, TX-7, TX-9)
    com = e.copy()
    com.need(mode == MODE_TX, com["q.exists"] == 1)
    rows = com.live(b + "txp")
    base = com["q.enq"]
    waits = []
    for i, (present, r) in enumerate(rows):
        key = _enqueue(com, r[1], r[0], present)
        waits.append((z3.And(present, _b(r[0]), _b(com["q.durable"])), key))
    n = com[b + "txp.len"]
    gid = com["ngroups"] + 1
    for k in range(1, e.shape.keys + 1):
        in_group = z3.And(n >= 2, base < k, k <= base + n)
        com[f"grp{k}"] = z3.If(in_group, gid, com[f"grp{k}"])
        com[f"{b}committing{k}"] = z3.If(z3.Or([z3.And(w, key == k) for w, key in waits] + [z3.BoolVal(False)]), _z(1), _z(0))
    com["ngroups"] = z3.If(n >= 2, gid, com["ngroups"])
    for i in range(len(rows)):
        com[f"{b}txp.{i}.0"], com[f"{b}txp.{i}.1"] = 0, 0
    com[b + "txp.len"] = 0
    owed = z3.Or([present for present, _ in rows] + [z3.BoolVal(False)])     # a copy enqueued: commit-ok is a step
    com[b + "cpending"] = z3.If(owed, _z(1), _z(0))
    _send(com, c, ch, (TX_COMMIT_OK,), z3.Not(owed))
    cases.append((m == TX_COMMIT, com))

    out = e.copy()
    out.need(z3.BoolVal(False))                             # any other method: outside the subset
    for cond, case in reversed(cases):
        out = merge(cond, case, out)
    return Transition(guard, out)


def _room(e: Eff, c: int, ch: int, t: int) -> z3.BoolRef:
    """broker.has_room for consumer t of channel (c, ch) (PF-1, PF-2, PF-3)."""
    b = f"b{c}.{ch}."
    limit = e[f"{b}limit{t}"]
    mine = e.count(b + "unacked", lambda r: r[3] == t)
    blocked = z3.And(_b(e[b + "glimit"]), e[b + "volume"] >= e[b + "glimit"])
    return z3.And(z3.Not(blocked), z3.Or(_b(e[f"{b}noack{t}"]), limit == 0, mine < limit))


def _admits_in_two_steps(config, c: int, ch: int) -> bool:
    """Whether channel (c, ch) may have an automatic-mode consumer and a global limit at once (its role
    consumes with no_ack and sends basic.qos with global and a count), where broker.deliver takes two
    steps (``Queue.sending``): only then does the guard need to leave such a delivery out."""
    role = config.roles.get((c, ch))
    return role is not None and any(no_ack for _, no_ack in role.consume) and \
        any(count and global_ for count, global_ in role.qos)


def BrokerDeliver(e: Eff, a, config) -> Transition:
    """The head of q0 to the first consumer of the ring with room, which moves to the back (broker.deliver,
    DS-1); the copy is outstanding (manual mode, AM-3) or in flight in automatic mode (AM-2). Not to an
    automatic-mode consumer on a channel with a global limit: the spec takes two steps there
    (``Queue.sending``), outside the subset."""
    ring = e.live("q.ring")
    consumers = [(c, ch, t) for c, ch in e.shape.channels() for t in range(1, e.shape.ctags + 1)]

    def ok(c, ch, t):
        return z3.And(z3.Not(_b(e[f"c{c}.bclosed"])), e[f"b{c}.{ch}.status"] == CH_OPEN,
                      e[f"b{c}.{ch}.cons{t}"] == 1, _room(e, c, ch, t))
    ok_slot = [z3.And(present, z3.Or([z3.And(r[0] == c, r[1] == ch, r[2] == t, ok(c, ch, t)) for c, ch, t in consumers]
                                     + [z3.BoolVal(False)])) for present, r in ring]
    first = [z3.And(ok_slot[i], *[z3.Not(ok_slot[j]) for j in range(i)]) for i in range(len(ring))]
    chosen = {k: z3.Or([z3.And(first[i], r[0] == k[0], r[1] == k[1], r[2] == k[2]) for i, (_, r) in enumerate(ring)]
                       + [z3.BoolVal(False)]) for k in consumers}
    guard = z3.And(_b(e["up"]), e["q.ready.len"] > 0, z3.Or(list(chosen.values()) + [z3.BoolVal(False)]))
    key, red = e["q.ready.0.0"], e["q.ready.0.1"]
    out = e.copy()
    for c, ch, t in consumers:
        d = e.copy()
        b = f"b{c}.{ch}."
        d.pop("q.ready", 2)
        d.remove("q.ring", lambda r: z3.And(r[0] == c, r[1] == ch, r[2] == t))
        d.push("q.ring", (c, ch, t))
        tag = d[b + "next_tag"]
        d.need(tag <= e.shape.tags)
        d[b + "next_tag"] = tag + 1
        noack = _b(d[f"{b}noack{t}"])
        if _admits_in_two_steps(config, c, ch):                      # two steps in the spec: outside the subset
            d.need(z3.Not(z3.And(noack, _b(d[b + "glimit"]))))
        d.push(f"c{c}.auto", (ch, tag, key), noack)
        _forget_waits(d, key, noack)
        d.push(b + "unacked", (tag, key, red, t), z3.Not(noack))
        d[b + "volume"] = z3.If(z3.And(z3.Not(noack), _b(d[b + "glimit"])), d[b + "volume"] + 1, d[b + "volume"])
        for k in range(1, e.shape.keys + 1):
            d[f"deliv{k}"] = z3.If(key == k, 1, d[f"deliv{k}"])
        msg = z3.Sum([z3.If(key == k, d[f"k{k}.msg"], 0) for k in range(1, e.shape.keys + 1)])
        _send(d, c, ch, (BASIC_DELIVER, t, tag, red, msg))
        out = merge(chosen[(c, ch, t)], d, out)
    return Transition(guard, out)


def _in_ready_run(e: Eff, b: str, seq: z3.ArithRef) -> z3.BoolRef:
    """broker.can_confirm with multiple: ``seq`` is an unconfirmed publish, not the oldest, whose
    publishes up to it are all ready (no publish is nacked in the subset, so every ready run has one
    outcome)."""
    rows = e.live(b + "unconf")
    found, run = z3.BoolVal(False), z3.BoolVal(True)
    for i, (present, r) in enumerate(rows):
        run = z3.And(run, present, r[2] == 0)
        if i >= 1:
            found = z3.Or(found, z3.And(run, r[0] == seq))
    return found


def BrokerConfirm(e: Eff, a, config) -> Transition:
    """basic.ack for publish seq, or with multiple every unconfirmed one up to it (broker.confirm, PC-2,
    PC-3); enabled once it is ready (no copy waits for the disk, PC-5)."""
    c, ch, b = a.conn, a.ch, f"b{a.conn}.{a.ch}."
    up = b + "unconf"
    if a.multiple:
        ready = z3.And(e[up + ".len"] > 0, _in_ready_run(e, b, a.seq))
    else:
        ready = e.any(up, lambda r: z3.And(r[0] == a.seq, r[2] == 0))
    guard = z3.And(_channel_open(e, c, ch), ready)

    def covered(r):
        return r[0] <= a.seq if a.multiple else r[0] == a.seq
    for s in range(1, e.shape.seqs + 1):
        e[f"{b}confd{s}"] = z3.If(e.any(up, lambda r: z3.And(covered(r), r[0] == s)), 1, e[f"{b}confd{s}"])
    e.remove(up, covered)
    _send(e, c, ch, (BASIC_ACK, a.seq, int(a.multiple)))
    return Transition(guard, e)


def BrokerCommitOk(e: Eff, a, config) -> Transition:
    """tx.commit-ok once the commit's copies are on disk (broker.commit_ok, TX-7)."""
    c, ch, b = a.conn, a.ch, f"b{a.conn}.{a.ch}."
    waiting = z3.Or([e[f"{b}committing{k}"] == 1 for k in range(1, e.shape.keys + 1)])
    guard = z3.And(_channel_open(e, c, ch), e[b + "cpending"] == 1, z3.Not(waiting))
    e[b + "cpending"] = 0
    _send(e, c, ch, (TX_COMMIT_OK,))
    return Transition(guard, e)


def DiskFsync(e: Eff, a, config) -> Transition:
    """One pending write (a live persistent copy of a durable queue not on disk) or removal (a record
    whose copy is not live) becomes durable (faults.fsync, PC-5, TX-8)."""
    k = a.key
    live = _live(e, k)
    pending = z3.And(live, _b(e[f"k{k}.pers"]), _b(e["q.durable"]), e[f"disk{k}"] == 0) if a.write else \
        z3.And(e[f"disk{k}"] == 1, z3.Not(live))
    guard = z3.And(_b(e["up"]), e[f"k{k}.msg"] == msg_code(a.msg), pending, z3.BoolVal(a.queue == 0))
    e[f"disk{k}"] = int(a.write)
    if a.write:
        _forget_waits(e, k)
    return Transition(guard, e)


def BrokerCrash(e: Eff, a, config) -> Transition:
    """The broker dies (faults.crash): live copies not on disk are lost (DU-2, PC-10, TX-9), automatic
    deliveries in flight too; every connection drops; q0 survives only if durable."""
    guard = z3.And(_b(e["up"]), e["u.crashes"] < config.crashes)
    e["u.crashes"] = e["u.crashes"] + 1
    for k in range(1, e.shape.keys + 1):
        _fate(e, k, "lost_crash", z3.And(_live(e, k), e[f"disk{k}"] == 0))
    for c in range(e.shape.conns):
        for present, r in e.live(f"c{c}.auto"):
            _fate(e, r[2], "lost_auto", present)
    for c in range(e.shape.conns):
        _reset_connection(e, c)
    for i in range(e.cap("q.ready")):
        e[f"q.ready.{i}.0"], e[f"q.ready.{i}.1"] = 0, 0
    for i in range(e.cap("q.ring")):
        e[f"q.ring.{i}.0"], e[f"q.ring.{i}.1"], e[f"q.ring.{i}.2"] = 0, 0, 0
    e["q.ready.len"], e["q.ring.len"] = 0, 0
    e["q.exists"] = z3.If(z3.And(_b(e["q.exists"]), _b(e["q.durable"])), _z(1), _z(0))
    e["up"] = 0
    return Transition(guard, e)


def BrokerRestart(e: Eff, a, config) -> Transition:
    """The broker starts again; q0, if it exists, holds its disk records, ready and redelivered, in
    key order (faults.restart, DU-1..3)."""
    guard = z3.Not(_b(e["up"]))
    e["up"] = 1
    keys = range(1, e.shape.keys + 1)
    on = {k: z3.And(_b(e["q.exists"]), e[f"disk{k}"] == 1) for k in keys}
    pos = {k: z3.Sum([z3.If(on[j], _z(1), _z(0)) for j in keys if j < k] + [_z(0)]) for k in keys}
    for i in range(e.cap("q.ready")):
        key = _z(0)
        for k in keys:
            key = z3.If(z3.And(on[k], pos[k] == i), k, key)
        e[f"q.ready.{i}.0"], e[f"q.ready.{i}.1"] = key, z3.If(key != 0, _z(1), _z(0))
    e["q.ready.len"] = z3.Sum([z3.If(on[k], _z(1), _z(0)) for k in keys])
    return Transition(guard, e)


def NetworkLoss(e: Eff, a, config) -> Transition:
    """Connection c is lost (faults.lose_connection): its consumers stop, its automatic deliveries in flight
    are lost (AM-2), the slot is down. A connection holding outstanding deliveries or a transaction is
    outside the subset (their requeue is not modelled here)."""
    c = a.conn
    guard = z3.And(_b(e["up"]), e[f"c{c}.status"] != CONN_DOWN, e["u.reconnects"] < config.reconnects)
    for ch in range(1, e.shape.chans + 1):
        b = f"b{c}.{ch}."
        e.need(e[b + "unacked.len"] == 0, e[b + "txp.len"] == 0, e[b + "unconf.len"] == 0, e[b + "cpending"] == 0)
    e["u.reconnects"] = e["u.reconnects"] + 1
    _drop_consumers_of(e, c)
    for present, r in e.live(f"c{c}.auto"):
        _fate(e, r[2], "lost_auto", present)
    _reset_connection(e, c)
    return Transition(guard, e)


def _never(e: Eff, a, config) -> Transition:
    return Transition(z3.BoolVal(False), e)


# Actions the bounded family has no relation for (outside SUBSET): they never fire in a search.
NOT_MODELLED = ("ClientConnect", "ClientTxRollback", "BrokerCloseOk", "BrokerQueueFail", "ClientVanish", "BrokerDetect",
                "BrokerRequeue",
                "BrokerChannelError",
                "ClientCancel", "ClientGet", "ClientNack", "ClientRecover", "ClientDeclareQueue", "ClientBindQueue",
                "ClientPurgeQueue", "ClientDeleteQueue", "ClientChannelClose", "ClientChannelOpen",
                "ClientChannelCloseOk", "ClientConnectionClose")

RELATIONS: dict[str, Callable] = {name: globals().get(name, _never) if name not in NOT_MODELLED else _never
                                  for name in (
    "BrokerTakeFrame", "BrokerDeliver", "BrokerConfirm", "BrokerCommitOk", "DiskFsync", "BrokerCrash",
    "BrokerRestart", "NetworkLoss", "ClientPublish", "ClientConsume", "ClientAck", "ClientReject", "ClientQos",
    "ClientConfirmSelect", "ClientTxSelect", "ClientTxCommit", "ClientReceive", *NOT_MODELLED)}


def relation(shape: Shape, config, action, x: dict) -> Transition:
    """The relation of ``action`` (a spec action object) from state ``x`` (field -> Z3 term): its guard,
    with the subset's and the capacities' conditions, and the state after."""
    t = RELATIONS[type(action).__name__](Eff(x, shape), action, config)
    after = t.after
    guard = z3.And(t.guard, *after.req) if isinstance(after, Eff) and after.req else t.guard
    return Transition(guard, after.x if isinstance(after, Eff) else after)


# ---------------------------------------------------------------- the hazards' properties

def _views(shape: Shape):
    return [f"v{c}.{ch}." for c, ch in shape.channels()]


def auto_ack_never_loses(x: dict, shape: Shape) -> z3.BoolRef:
    """No copy was lost in flight in automatic mode (AM-2)."""
    return z3.And([x[f"fate{k}.lost_auto"] == 0 for k in range(1, shape.keys + 1)])


def persistent_never_lost(x: dict, shape: Shape) -> z3.BoolRef:
    """No persistent copy of durable q0 was lost in a crash (DU-2, PC-10)."""
    return z3.And([z3.Not(z3.And(x[f"fate{k}.lost_crash"] == 1, x[f"k{k}.pers"] == 1, x["q.durable"] == 1))
                   for k in range(1, shape.keys + 1)])


def acked_never_redelivered(x: dict, shape: Shape) -> z3.BoolRef:
    """No acknowledged copy is live again (TX-8, DU-3)."""
    e = Eff(x, shape)
    return z3.And([z3.Not(z3.And(x[f"fate{k}.acked"] == 1, _live(e, k))) for k in range(1, shape.keys + 1)])


def consumer_sees_publication_order(x: dict, shape: Shape) -> z3.BoolRef:
    """No client read a message after a later-published one (RQ-3)."""
    return z3.And([x[v + "disorder"] == 0 for v in _views(shape)])


def tx_commit_atomic(x: dict, shape: Shape) -> z3.BoolRef:
    """No committed group is partly lost in a crash (TX-9)."""
    keys = range(1, shape.keys + 1)
    out = []
    for g in range(1, shape.keys + 1):
        size = z3.Sum([z3.If(x[f"grp{k}"] == g, _z(1), _z(0)) for k in keys])
        gone = z3.Sum([z3.If(z3.And(x[f"grp{k}"] == g, x[f"fate{k}.lost_crash"] == 1), _z(1), _z(0)) for k in keys])
        out.append(z3.Not(z3.And(gone > 0, gone < size)))
    return z3.And(out)


def confirms_in_publish_order(x: dict, shape: Shape) -> z3.BoolRef:
    """Every publisher's confirms seen are 1..n (PC-7): the largest is their count."""
    out = []
    for v in _views(shape):
        seen = [x[f"{v}conf{s}"] == 1 for s in range(1, shape.seqs + 1)]
        count = z3.Sum([z3.If(s, _z(1), _z(0)) for s in seen])
        top = _z(0)
        for s, is_seen in enumerate(seen, start=1):
            top = z3.If(is_seen, s, top)
        out.append(top == count)
    return z3.And(out)


def outstanding_within_prefetch(x: dict, shape: Shape) -> z3.BoolRef:
    """No channel holds more consumer deliveries than its global prefetch (PF-5)."""
    e = Eff(x, shape)
    out = []
    for c, ch in shape.channels():
        b = f"b{c}.{ch}."
        n = e.count(b + "unacked", lambda r: r[3] != 0)
        out.append(z3.Not(z3.And(x[b + "glimit"] != 0, n > x[b + "glimit"])))
    return z3.And(out)


PROPERTIES: dict[str, Callable[[dict, Shape], z3.BoolRef]] = {
    f.__name__: f for f in (auto_ack_never_loses, persistent_never_lost, acked_never_redelivered,
                            consumer_sees_publication_order, tx_commit_atomic, confirms_in_publish_order,
                            outstanding_within_prefetch)
}
