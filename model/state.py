"""The Z3 state of the model: six families of fields over the same unbounded indices.

- *channel modes*: what each channel's mode, publish numbering, confirms and held-back transaction
  are, for any number of connections, channels and publishes;
- *deliveries*: each channel's next delivery tag, which tags are outstanding or held back by an
  open transaction and which of those went to a consumer, and the channel's consumer tags, for any
  number of deliveries and consumers (tags are their own index, like publish numbers);
- *connections and queues*: each connection's status as its client sees it, whether a
  connection.close is in flight to it, on which channels frames are and whether a channel.close is
  among them with something other than close-ok after it, each client's view of a channel (its status
  and the last tag it read), whether a channel.open-ok is in flight to it with an older channel's
  frames ahead, which deliveries of the broker's channel are in flight behind it, whether a
  channel.open is in flight to the broker with other frames ahead or behind
  (spec.properties.channel_lifecycle), the view's mode, publish count and confirms seen, the confirms
  of the broker's channel in flight to the client, the publishes and the first select in flight to
  the broker (spec.properties.confirms_in_step), and each queue's existence, durability and
  exclusive owner, for any number of connections and queues;
- *copies*: each queue's ready copies by enqueue position (key) with their redelivered flag and
  their order in the queue (which ready copy is ahead of which), the
  copies ever delivered (ghost), the copies on disk, how many each queue ever took, which consumers
  are in a queue's round-robin, the copy each outstanding or held-back tag names (with how a
  held-back settlement will settle it), and the copies in flight in automatic mode with the
  connection they travel on, for any number of copies, keys and requeues;
- *messages*: per connection how many messages its client published, and per message (connection,
  n) whether a basic.publish of it is in flight to the broker (and whether two are), which channel's
  open transaction holds it back (and whether it is held back twice), and whether any queue ever
  took a copy of it (ghost), for any number of messages;
- *confirms and disk*: per copy its message, its persistent flag and whether it holds up its
  publish's confirm (PC-5: not yet on disk), per message whether the broker acked it (ghost) and the
  channel and number of its unconfirmed publish still to be acked, and per queue whether it is a
  dead-letter target (confirmed_only_when_on_disk), and per copy whether a crash lost it (ghost: a
  ``FATE_LOST_CRASH`` record, confirmed_survives_crash) and whether it is gone in this life (ghost:
  a fate not of an earlier life, ``State.revived``, or in flight in automatic mode, whose fate is
  sure; tx_effects_invisible).

A spec ``State`` is projected (``abstract``) onto these fields; everything else of the spec state that
an action's guard or effect reads is an *oracle* input of that action (``model.actions``), fixed by the
concrete state when the model is checked against ``spec/`` and left free in the proofs.

Why arrays: every field is a Z3 array indexed by unbounded integers (connection, channel, publish
sequence number), updated with ``Store`` or ``Lambda``. The invariants are universally quantified over
those indices, each a guarded formula in the array property fragment (index comparisons only, no
arithmetic on array values under a quantifier), which Z3 decides by instantiation: no bound on
connections, channels or publishes enters the encoding, and the obligations stay decidable and fast.
Sequences would have kept order we do not need (publish numbers are their own order) and cost
quantifier alternations. The deliveries family follows the same pattern: a channel's outstanding
deliveries are a set of tags (a tag is its own index and its own order, as a publish number is), so
"tags are issued 1, 2, 3, ... and outstanding ones are below the next tag" is one guarded formula per
tag; a multiple ack is the set of outstanding tags <= its tag, a ``Lambda`` again.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Iterator

import z3

from spec.frames import BASIC_PUBLISH, CHANNEL_CLOSE, CONNECTION_CLOSE, CONNECTION_CLOSE_OK, MSG_STRIDE
from spec.properties import (
    confirms_in_flight, copy_messages, open_ok_in_flight, opens_in_flight, selects_in_flight, sent_after_close,
)
from spec.state import C_CLOSED, CH_CLOSED, CONN_DOWN, FATE_LOST_CRASH, MODE_NONE

INT = z3.IntSort()
BOOL = z3.BoolSort()


@dataclass(frozen=True)
class Z3State:
    """One state of the family as Z3 terms (symbolic, or concrete from ``abstract``)."""

    up: z3.BoolRef          # the broker is running
    nch: z3.ArithRef        # channels per connection (rigid: a configuration constant)
    bclosed: z3.ArrayRef    # c -> the broker has closed its end of connection c
    cstat: z3.ArrayRef      # (c, ch) -> broker channel status CH_*
    mode: z3.ArrayRef       # (c, ch) -> MODE_* (PC-8)
    seq: z3.ArrayRef        # (c, ch) -> publish_seq (PC-1)
    unconf: z3.ArrayRef     # (c, ch, s) -> publish s is unconfirmed (PC-2)
    conf: z3.ArrayRef       # (c, ch, s) -> publish s was confirmed (ghost, PC-2)
    held: z3.ArrayRef       # (c, ch) -> publishes or settlements held back by an open transaction (TX-2, TX-3)
    pending: z3.ArrayRef    # (c, ch) -> a tx.commit waits for its commit-ok (TX-7)
    tb: z3.ArrayRef         # (c, ch) -> frames in flight to the broker on channel ch (0: the connection's)
    ntag: z3.ArrayRef       # (c, ch) -> next_tag (DT-1)
    out: z3.ArrayRef        # (c, ch, t) -> tag t is outstanding (unacked, AM-3)
    txs: z3.ArrayRef        # (c, ch, t) -> tag t is settled inside the open transaction, held back (TX-3)
    bycons: z3.ArrayRef     # (c, ch, t) -> delivery t (outstanding or held back) went to a consumer, not basic.get
    cons: z3.ArrayRef       # (c, ch, k) -> consumer tag k is one of the channel's consumers
    cst: z3.ArrayRef        # c -> the connection's status as its client sees it (CONN_*)
    cclose: z3.ArrayRef     # c -> a connection.close or close-ok is in flight to the client (ER-1)
    tc: z3.ArrayRef         # (c, ch) -> frames are in flight to the client on channel ch (0: the connection's)
    ccl: z3.ArrayRef        # (c, ch) -> a channel.close is in flight to the client on channel ch (ER-1)
    aft: z3.ArrayRef        # (c, ch) -> a frame other than close-ok follows the last such channel.close
    vst: z3.ArrayRef        # (c, ch) -> the status of the client's view of the channel (C_*)
    vlt: z3.ArrayRef        # (c, ch) -> the last delivery tag the client read on it (DT-1)
    ook: z3.ArrayRef        # (c, ch) -> a channel.open-ok is in flight to the client
    old: z3.ArrayRef        # (c, ch) -> frames are ahead of it (an older channel's)
    dif: z3.ArrayRef        # (c, ch, t) -> a delivery of tag t is in flight to the client behind the open-ok
    #                         (all of them without one: the deliveries of the broker's channel now)
    tbo: z3.ArrayRef        # (c, ch) -> a channel.open is in flight to the broker
    pre: z3.ArrayRef        # (c, ch) -> a frame other than close-ok is ahead of the first one
    post: z3.ArrayRef       # (c, ch) -> a frame other than close-ok and channel.open is behind it
    tbx: z3.ArrayRef        # (c, ch) -> such a frame is in flight to the broker at all
    vmode: z3.ArrayRef      # (c, ch) -> the mode the client asked for (MODE_*)
    vps: z3.ArrayRef        # (c, ch) -> the client's publish count in confirm mode (PC-1)
    vcf: z3.ArrayRef        # (c, ch, s) -> the client saw publish s confirmed
    cif: z3.ArrayRef        # (c, ch, n) -> a confirm of n, not multiple, is in flight to the client behind the
    #                         open-ok (all of them without one: the broker's channel's)
    cmx: z3.ArrayRef        # (c, ch) -> the highest number of a multiple one (0: none)
    fsel: z3.ArrayRef       # (c, ch) -> the first confirm.select or tx.select in flight to the broker (0: none)
    nbh: z3.ArrayRef        # (c, ch) -> the basic.publish frames behind it when it is confirm.select (else 0)
    npb: z3.ArrayRef        # (c, ch) -> the basic.publish frames in flight to the broker
    qex: z3.ArrayRef        # q -> queue q exists
    qdur: z3.ArrayRef       # q -> queue q is durable (DU-1)
    qown: z3.ArrayRef       # q -> its exclusive owner, connection index + 1; 0 when not exclusive (DU-4)
    ring: z3.ArrayRef       # (c, ch, k) -> consumer k of channel (c, ch) is in its queue's round-robin (DS-1)
    ready: z3.ArrayRef      # (q, key) -> the copy with enqueue position key is ready in queue q (RQ-1)
    ahead: z3.ArrayRef      # (q, a, b) -> ready copies a and b of queue q, a ahead of b in the queue (RQ-1)
    redel: z3.ArrayRef      # (q, key) -> that ready copy is marked redelivered (RQ-2)
    dlv: z3.ArrayRef        # (q, key) -> the copy was delivered at least once (ghost, RQ-2)
    enq: z3.ArrayRef        # q -> copies ever enqueued in q; the next key is enq + 1
    born: z3.ArrayRef       # q -> enq when q was last declared: keys up to it were a deleted queue's
    disk: z3.ArrayRef       # (q, key) -> the copy's record is on disk (PC-5, DU-2)
    tq: z3.ArrayRef         # (c, ch, t) -> the queue of the copy outstanding or held back under tag t (-1: none)
    tk: z3.ArrayRef         # (c, ch, t) -> that copy's key (0: none)
    txk: z3.ArrayRef        # (c, ch, t) -> how a held-back settlement of tag t settles it (SETTLE_*; -1: none)
    oc: z3.ArrayRef         # (q, key) -> the connection of the live tag naming the copy (ghost; -1: none)
    och: z3.ArrayRef        # (q, key) -> that tag's channel (ghost; -1: none)
    ot: z3.ArrayRef         # (q, key) -> that tag (ghost; 0: none): (oc, och, ot) is the inverse of (tq, tk)
    pubd: z3.ArrayRef       # c -> messages the client of connection c has published; (c, n) is its n-th
    inf: z3.ArrayRef        # (c, n) -> a basic.publish of message (c, n) is in flight to the broker
    inf2: z3.ArrayRef       # (c, n) -> two or more are
    txm: z3.ArrayRef        # (c, n) -> the channel whose open transaction holds message (c, n) back (0: none, TX-2)
    txm2: z3.ArrayRef       # (c, n) -> open transactions hold message (c, n) back more than once
    em: z3.ArrayRef         # (c, n) -> some queue took a copy of message (c, n) (ghost: a copy carries it)
    pf: z3.ArrayRef         # (c, ch) -> the per-consumer limit of consumers started later (PF-2)
    glim: z3.ArrayRef       # (c, ch) -> the channel's global limit (0: none, PF-2)
    vol: z3.ArrayRef        # (c, ch) -> the deliveries the global limit counts (may go below 0, PF-3)
    qexc: z3.ArrayRef       # (c, ch) -> ghost qos_excess (PF-5)
    qunc: z3.ArrayRef       # (c, ch) -> ghost qos_uncounted (TX-3, PF-5)
    tout: z3.ArrayRef       # (c, ch) -> ghost counter: outstanding consumer deliveries (former consumers' too)
    thld: z3.ArrayRef       # (c, ch) -> ghost counter: consumer deliveries held back by an open transaction
    kcnt: z3.ArrayRef       # (c, ch, k) -> ghost counter: consumer k's deliveries, outstanding or held back
    kna: z3.ArrayRef        # (c, ch, k) -> consumer k is in automatic mode (no_ack)
    klim: z3.ArrayRef       # (c, ch, k) -> consumer k's own limit (0: none, PF-2)
    mc: z3.ArrayRef         # (q, key) -> the connection of the copy's message (set at enqueue, never changed)
    mn: z3.ArrayRef         # (q, key) -> n of the copy's message (c, n)
    pers: z3.ArrayRef       # (q, key) -> the copy is persistent (PC-5, DU-2)
    hold: z3.ArrayRef       # (q, key) -> the copy holds up its own message's publish's confirm: not on disk (PC-5)
    acked: z3.ArrayRef      # (c, n) -> the broker confirmed message (c, n) with basic.ack (ghost, PC-10)
    pch: z3.ArrayRef        # (c, n) -> the channel of its unconfirmed publish that may still be acked (0: none
    #                         or nacked, PC-6); a message is published once, so this is a function
    ps: z3.ArrayRef         # (c, n) -> that publish's sequence number (0: none)
    dlt: z3.ArrayRef        # q -> queue q is some queue's dead-letter target (rigid: a configuration constant)
    lost: z3.ArrayRef       # (q, key) -> a crash lost the copy: live and not on disk (ghost, PC-10, DU-2)
    auto: z3.ArrayRef       # (q, key) -> the connection (index + 1) an automatic-mode delivery of the copy is in
    #                         flight on, not yet read (conn.auto, AM-2); 0: none
    fated: z3.ArrayRef      # (q, key) -> the copy is gone in this life: a fate since the last restart that
    #                         recovered it (not in ``revived``), or in flight in automatic mode (ghost, TX-3)

    def items(self) -> Iterator[tuple[str, z3.ExprRef]]:
        for f in fields(self):
            yield f.name, getattr(self, f.name)

    def replace(self, **changes: z3.ExprRef) -> "Z3State":
        values = dict(self.items())
        values.update(changes)
        return Z3State(**values)


SORTS: dict[str, z3.SortRef] = {
    "up": BOOL, "nch": INT,
    "bclosed": z3.ArraySort(INT, BOOL),
    "cstat": z3.ArraySort(INT, INT, INT), "mode": z3.ArraySort(INT, INT, INT), "seq": z3.ArraySort(INT, INT, INT),
    "unconf": z3.ArraySort(INT, INT, INT, BOOL), "conf": z3.ArraySort(INT, INT, INT, BOOL),
    "held": z3.ArraySort(INT, INT, BOOL), "pending": z3.ArraySort(INT, INT, BOOL), "tb": z3.ArraySort(INT, INT, INT),
    "ntag": z3.ArraySort(INT, INT, INT), "out": z3.ArraySort(INT, INT, INT, BOOL),
    "txs": z3.ArraySort(INT, INT, INT, BOOL), "bycons": z3.ArraySort(INT, INT, INT, BOOL),
    "cons": z3.ArraySort(INT, INT, INT, BOOL),
    "cst": z3.ArraySort(INT, INT), "cclose": z3.ArraySort(INT, BOOL), "tc": z3.ArraySort(INT, INT, BOOL),
    "ccl": z3.ArraySort(INT, INT, BOOL), "aft": z3.ArraySort(INT, INT, BOOL),
    "vst": z3.ArraySort(INT, INT, INT), "vlt": z3.ArraySort(INT, INT, INT),
    **{name: z3.ArraySort(INT, INT, BOOL) for name in ("ook", "old", "tbo", "pre", "post", "tbx")},
    "dif": z3.ArraySort(INT, INT, INT, BOOL),
    **{name: z3.ArraySort(INT, INT, INT) for name in ("vmode", "vps", "cmx", "fsel", "nbh", "npb")},
    "vcf": z3.ArraySort(INT, INT, INT, BOOL), "cif": z3.ArraySort(INT, INT, INT, BOOL),
    "qex": z3.ArraySort(INT, BOOL), "qdur": z3.ArraySort(INT, BOOL), "qown": z3.ArraySort(INT, INT),
    "ring": z3.ArraySort(INT, INT, INT, BOOL), "ready": z3.ArraySort(INT, INT, BOOL),
    "ahead": z3.ArraySort(INT, INT, INT, BOOL),
    "redel": z3.ArraySort(INT, INT, BOOL), "dlv": z3.ArraySort(INT, INT, BOOL), "enq": z3.ArraySort(INT, INT),
    "born": z3.ArraySort(INT, INT), "disk": z3.ArraySort(INT, INT, BOOL), "tq": z3.ArraySort(INT, INT, INT, INT),
    "tk": z3.ArraySort(INT, INT, INT, INT), "txk": z3.ArraySort(INT, INT, INT, INT),
    "oc": z3.ArraySort(INT, INT, INT), "och": z3.ArraySort(INT, INT, INT), "ot": z3.ArraySort(INT, INT, INT),
    "pubd": z3.ArraySort(INT, INT), "inf": z3.ArraySort(INT, INT, BOOL), "txm": z3.ArraySort(INT, INT, INT),
    "inf2": z3.ArraySort(INT, INT, BOOL), "txm2": z3.ArraySort(INT, INT, BOOL),
    "em": z3.ArraySort(INT, INT, BOOL),
    **{name: z3.ArraySort(INT, INT, INT) for name in ("pf", "glim", "vol", "qexc", "qunc", "tout", "thld")},
    "kcnt": z3.ArraySort(INT, INT, INT, INT), "kna": z3.ArraySort(INT, INT, INT, BOOL),
    "klim": z3.ArraySort(INT, INT, INT, INT),
    "mc": z3.ArraySort(INT, INT, INT), "mn": z3.ArraySort(INT, INT, INT), "pers": z3.ArraySort(INT, INT, BOOL),
    "hold": z3.ArraySort(INT, INT, BOOL), "acked": z3.ArraySort(INT, INT, BOOL), "pch": z3.ArraySort(INT, INT, INT),
    "ps": z3.ArraySort(INT, INT, INT), "dlt": z3.ArraySort(INT, BOOL),
    "lost": z3.ArraySort(INT, INT, BOOL), "fated": z3.ArraySort(INT, INT, BOOL),
    "auto": z3.ArraySort(INT, INT, INT),
}

# What an index the spec state does not have maps to: a closed, clean channel (spec.state.CLOSED_CHANNEL).
DEFAULTS = {"bclosed": False, "cstat": CH_CLOSED, "mode": MODE_NONE, "seq": 0, "unconf": False, "conf": False,
            "held": False, "pending": False, "tb": 0, "ntag": 1, "out": False, "txs": False,
            "bycons": False, "cons": False, "cst": CONN_DOWN, "cclose": False, "tc": False, "ccl": False, "aft": False,
            "vst": C_CLOSED, "vlt": 0, "ook": False, "old": False, "dif": False, "tbo": False, "pre": False,
            "post": False, "tbx": False, "vmode": MODE_NONE, "vps": 0, "vcf": False, "cif": False, "cmx": 0,
            "fsel": 0, "nbh": 0, "npb": 0,
            "qex": False, "qdur": False, "qown": 0, "ring": False, "ready": False, "ahead": False, "redel": False,
            "dlv": False,
            "enq": 0, "born": 0, "disk": False, "tq": -1, "tk": 0, "txk": -1, "oc": -1, "och": -1, "ot": 0,
            "pubd": 0, "inf": False, "txm": 0, "inf2": False, "txm2": False,
            "em": False, "pf": 0, "glim": 0, "vol": 0, "qexc": 0, "qunc": 0,
            "tout": 0, "thld": 0, "kcnt": 0, "kna": False, "klim": 0,
            "mc": 0, "mn": 0, "pers": False, "hold": False, "acked": False, "pch": 0, "ps": 0, "dlt": False,
            "lost": False, "fated": False, "auto": 0}


def fresh(prefix: str) -> Z3State:
    """A symbolic state whose fields are new constants named ``prefix.field``."""
    return Z3State(**{name: z3.Const(f"{prefix}.{name}", sort) for name, sort in SORTS.items()})


def same(x: Z3State, y: Z3State) -> z3.BoolRef:
    """The two states are equal, field by field (arrays extensionally)."""
    return z3.And([a == b for (_, a), (_, b) in zip(x.items(), y.items())])


_CONST: dict = {}


def _const_array(name: str, arity: int) -> z3.ArrayRef:
    """The array of ``name`` that maps every index to its default (made once: terms are immutable)."""
    got = _CONST.get(name)
    if got is None:
        got = _CONST[name] = _make_const_array(name, arity)
    return got


def _make_const_array(name: str, arity: int) -> z3.ArrayRef:
    default = DEFAULTS[name]
    value = z3.BoolVal(default) if isinstance(default, bool) else z3.IntVal(default)
    idx = [z3.Int(f"i{k}") for k in range(arity)]
    return z3.Lambda(idx, value) if arity > 1 else z3.K(INT, value)


def _array(name: str, arity: int, entries: dict) -> z3.ArrayRef:
    """A concrete array: the default everywhere but at ``entries`` (index tuple -> value).

    Built with Z3's C API directly (``Z3_mk_store_n``) and cached numerals: the agreement check
    abstracts every state it visits, and ``z3.Store``'s Python-side sort checks cost most of that."""
    arr = _const_array(name, arity)
    default = DEFAULTS[name]
    ctx = arr.ctx
    ref = ctx.ref()
    idx = (z3.Ast * arity)()
    for index, value in sorted(entries.items()):
        if value != default:
            for k, i in enumerate(index):
                idx[k] = _numeral(i)
            # Wrapped at once: the wrapper holds a reference, so Z3 keeps the term alive.
            arr = z3.ArrayRef(z3.Z3_mk_store_n(ref, arr.as_ast(), arity, idx, _numeral(value)), ctx)
    return arr


_NUMERALS: dict = {}


def _numeral(value) -> z3.Ast:
    """The Z3 term of an int or a bool, made once (the Python object is kept so the term stays alive)."""
    key = (type(value) is bool, value)
    got = _NUMERALS.get(key)
    if got is None:
        got = _NUMERALS[key] = z3.BoolVal(value) if isinstance(value, bool) else z3.IntVal(value)
    return got.as_ast()


def message(msg: int) -> tuple[int, int]:
    """A spec message id as the model's pair (connection, n): the n-th message published on that
    connection (spec.frames names it c * MSG_STRIDE + n). A pair keeps "a connection's next message is
    new" linear and free of the stride, which the spec needs only to keep ids apart below 2**32."""
    return divmod(msg, MSG_STRIDE)


def project(state) -> dict:
    """The family's fields of a spec ``State`` as plain Python values (index tuple -> value dicts)."""
    out: dict = {name: {} for name in DEFAULTS}
    nch = len(state.conns[0].channels) if state.conns else 0
    for c, conn in enumerate(state.conns):
        out["bclosed"][(c,)] = conn.broker_closed
        out["cst"][(c,)] = conn.status
        out["cclose"][(c,)] = any(f[0] in (CONNECTION_CLOSE, CONNECTION_CLOSE_OK) for f in conn.to_client[0])
        for ch, fifo in enumerate(conn.to_client):
            out["tc"][(c, ch)] = bool(fifo)
            out["ccl"][(c, ch)] = any(f[0] == CHANNEL_CLOSE for f in fifo)
            out["aft"][(c, ch)] = sent_after_close(fifo)
        for ch, fifo in enumerate(conn.to_broker):
            out["tb"][(c, ch)] = len(fifo)
            out["tbo"][(c, ch)], out["pre"][(c, ch)], out["post"][(c, ch)], out["tbx"][(c, ch)] = opens_in_flight(fifo)
        for ch, fifo in enumerate(conn.to_client):
            out["ook"][(c, ch)], out["old"][(c, ch)], tags = open_ok_in_flight(fifo)
            for t in tags:
                out["dif"][(c, ch, t)] = True
            single, out["cmx"][(c, ch)] = confirms_in_flight(fifo)
            for n in single:
                out["cif"][(c, ch, n)] = True
        for ch, view in enumerate(conn.clients, start=1):
            out["vst"][(c, ch)], out["vlt"][(c, ch)] = view.status, view.last_tag
            out["vmode"][(c, ch)], out["vps"][(c, ch)] = view.mode, view.pub_seq
            for s in view.confirms:
                out["vcf"][(c, ch, s)] = True
            out["fsel"][(c, ch)], out["nbh"][(c, ch)], out["npb"][(c, ch)] = selects_in_flight(conn.to_broker[ch])
        for ch, channel in enumerate(conn.channels, start=1):
            out["cstat"][(c, ch)] = channel.status
            out["mode"][(c, ch)] = channel.mode
            out["seq"][(c, ch)] = channel.publish_seq
            for p in channel.unconfirmed:
                out["unconf"][(c, ch, p.seq)] = True
            for s in channel.confirmed:
                out["conf"][(c, ch, s)] = True
            out["held"][(c, ch)] = bool(channel.tx_pubs or channel.tx_settles)
            out["pending"][(c, ch)] = channel.commit_pending
            out["ntag"][(c, ch)] = channel.next_tag
            for u in channel.unacked:
                out["out"][(c, ch, u.tag)] = True
                out["tq"][(c, ch, u.tag)], out["tk"][(c, ch, u.tag)] = u.queue, u.key
            for kind, u in channel.tx_settles:
                out["txs"][(c, ch, u.tag)] = True
                out["tq"][(c, ch, u.tag)], out["tk"][(c, ch, u.tag)] = u.queue, u.key
                out["txk"][(c, ch, u.tag)] = kind
            for u in channel.unacked + tuple(u for _, u in channel.tx_settles):
                # The ghost inverse: the tag naming each copy (were two to name one copy, the last
                # would win, and copies_conserved would be false of the abstraction, as of the state).
                out["oc"][(u.queue, u.key)], out["och"][(u.queue, u.key)] = c, ch
                out["ot"][(u.queue, u.key)] = u.tag
                if u.consumer:
                    out["bycons"][(c, ch, u.tag)] = True
            for k in channel.consumers:
                out["cons"][(c, ch, k.tag)] = True
                out["kna"][(c, ch, k.tag)], out["klim"][(c, ch, k.tag)] = k.no_ack, k.limit
            out["pf"][(c, ch)], out["glim"][(c, ch)], out["vol"][(c, ch)] = \
                channel.prefetch, channel.global_limit, channel.volume
            out["qexc"][(c, ch)], out["qunc"][(c, ch)] = channel.qos_excess, channel.qos_uncounted
            # The ghost counters (prefetch_respected's counts): consumer deliveries outstanding, held
            # back, and per consumer tag (a former consumer's are marked -tag and counted by no tag).
            out["tout"][(c, ch)] = sum(1 for u in channel.unacked if u.consumer)
            out["thld"][(c, ch)] = sum(1 for _, u in channel.tx_settles if u.consumer)
            for u in channel.unacked + tuple(u for _, u in channel.tx_settles):
                if u.consumer > 0:
                    out["kcnt"][(c, ch, u.consumer)] = out["kcnt"].get((c, ch, u.consumer), 0) + 1
    for q, queue in enumerate(state.queues):
        out["qex"][(q,)] = queue.exists
        out["qdur"][(q,)] = queue.durable
        out["qown"][(q,)] = queue.owner
        out["enq"][(q,)] = queue.enqueued
        out["born"][(q,)] = queue.born
        for i, e in enumerate(queue.ready):
            out["ready"][(q, e.key)] = True
            out["redel"][(q, e.key)] = e.redelivered
            for later in queue.ready[i + 1:]:
                out["ahead"][(q, e.key, later.key)] = True
        for c, ch, k in queue.ring:
            out["ring"][(c, ch, k)] = True
    for q, key in state.delivered:
        out["dlv"][(q, key)] = True
    for q, key, _ in state.disk:
        out["disk"][(q, key)] = True
    for c, conn in enumerate(state.conns):
        out["pubd"][(c,)] = conn.published
        for fifo in conn.to_broker:
            for frame in fifo:
                if frame[0] == BASIC_PUBLISH:
                    msg = message(frame[6])
                    out["inf2"][msg] = out["inf"].get(msg, False)
                    out["inf"][msg] = True
        for ch, channel in enumerate(conn.channels, start=1):
            for pub in channel.tx_pubs:
                out["txm2"][message(pub[4])] = message(pub[4]) in out["txm"]
                out["txm"][message(pub[4])] = ch
    for msg in copy_messages(state):
        out["em"][message(msg)] = True
    # Each copy's message and persistent flag, wherever it is now (a copy that left records a fate, so
    # every copy ever enqueued is somewhere below; a disk record is of a persistent copy).
    carried = [(f[0], f[1], f[3], f[4]) for f in state.fates]
    carried += [(q, key, msg, True) for q, key, msg in state.disk]
    for conn in state.conns:
        carried += [(d[2], d[3], d[4], d[5]) for d in conn.auto]
        for channel in conn.channels:
            carried += [(u.queue, u.key, u.msg, u.persistent) for u in channel.unacked]
            carried += [(u.queue, u.key, u.msg, u.persistent) for _, u in channel.tx_settles]
    for q, queue in enumerate(state.queues):
        carried += [(q, e.key, e.msg, e.persistent) for e in queue.ready]
        if queue.dead_letter:
            out["dlt"][(queue.dead_letter - 1,)] = True
    for q, key, msg, persistent in carried:
        out["mc"][(q, key)], out["mn"][(q, key)] = message(msg)
        out["pers"][(q, key)] = bool(persistent)
    for msg in state.confirmed_msgs:
        out["acked"][message(msg)] = True
    for c, conn in enumerate(state.conns):
        for ch, channel in enumerate(conn.channels, start=1):
            for p in channel.unconfirmed:
                for w in p.waits:
                    # a copy holds up its own message's publish (a copy of another message in the
                    # waits would not count: unwritten_copies_hold_their_confirm asks for its own)
                    if (out["mc"].get(w), out["mn"].get(w)) == message(p.msg):
                        out["hold"][w] = True
                if not p.nack:
                    out["pch"][message(p.msg)], out["ps"][message(p.msg)] = ch, p.seq
    for f in state.fates:
        if f[2] == FATE_LOST_CRASH:
            out["lost"][(f[0], f[1])] = True
    revived = set(state.revived)
    for f in state.fates:
        if (f[0], f[1]) not in revived:
            out["fated"][(f[0], f[1])] = True
    for c, conn in enumerate(state.conns):
        for d in conn.auto:
            out["fated"][(d[2], d[3])] = True
            out["auto"][(d[2], d[3])] = c + 1
    out["up"] = state.broker_up
    out["nch"] = nch
    return out


ARITY = {"bclosed": 1, "cstat": 2, "mode": 2, "seq": 2, "unconf": 3, "conf": 3, "held": 2, "pending": 2, "tb": 2,
         "ntag": 2, "out": 3, "txs": 3, "bycons": 3, "cons": 3, "cst": 1, "cclose": 1, "tc": 2, "ccl": 2, "aft": 2,
         "vst": 2, "vlt": 2, "ook": 2, "old": 2, "dif": 3, "tbo": 2, "pre": 2, "post": 2, "tbx": 2, "vmode": 2,
         "vps": 2, "vcf": 3, "cif": 3, "cmx": 2, "fsel": 2, "nbh": 2,
         "npb": 2, "qex": 1,
         "qdur": 1, "qown": 1, "ring": 3, "ready": 2, "ahead": 3, "redel": 2, "dlv": 2, "enq": 1, "born": 1, "disk": 2,
         "tq": 3, "tk": 3,
         "txk": 3, "oc": 2, "och": 2, "ot": 2, "pubd": 1, "inf": 2, "txm": 2, "inf2": 2, "txm2": 2, "em": 2,
         "pf": 2, "glim": 2, "vol": 2, "qexc": 2, "qunc": 2, "tout": 2, "thld": 2, "kcnt": 3, "kna": 3, "klim": 3,
         "mc": 2, "mn": 2, "pers": 2, "hold": 2, "acked": 2, "pch": 2, "ps": 2, "dlt": 1, "lost": 2, "fated": 2,
         "auto": 2}


def abstract(state) -> Z3State:
    """The abstraction function: a spec ``State`` as a concrete Z3 state of this family."""
    values = project(state)
    return Z3State(up=z3.BoolVal(values["up"]), nch=z3.IntVal(values["nch"]),
                   **{name: _array(name, ARITY[name], values[name]) for name in ARITY})
