"""One Z3 relation per spec action (``spec.actions``), with the same name: its guard, mirroring the
action's precondition (``spec.machine.PRECONDITIONS``), and its effect on the state
(``model.state``: the channel-modes and deliveries families), mirroring the spec's effect.

Each relation is a function ``(x, a, o) -> Transition``: ``x`` the state before, ``a`` the action's
fields as Z3 terms, ``o`` its oracles: the facts of the spec state outside this family that the guard
or the effect reads (which frame is taken, whether a tag is outstanding, whether the client's view
lets it send). ``ORACLES`` lists them per action; the agreement check (``model.agreement``) reads them
from the concrete state, the proofs leave them free, so a proof holds whatever they are. The state
after is a function of (x, a, o): every relation is deterministic, as ``spec.machine.step`` is.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import z3

from spec import actions as A
from spec.frames import (
    BASIC_ACK, BASIC_CANCEL, BASIC_CONSUME, BASIC_GET, BASIC_NACK, BASIC_PUBLISH, BASIC_QOS, BASIC_RECOVER,
    BASIC_REJECT, CHANNEL_CLOSE, CHANNEL_CLOSE_OK, CHANNEL_OPEN, CONFIRM_SELECT, CONNECTION_CLOSE,
    CONNECTION_CLOSE_OK, DEFAULT_EXCHANGE, FANOUT_EXCHANGE, QUEUE_BIND, QUEUE_DECLARE, QUEUE_DELETE,
    QUEUE_PURGE, TX_COMMIT, TX_ROLLBACK, TX_SELECT,
)
from spec.state import CH_CLOSED, CH_CLOSING, CH_ENDING, CH_OPEN, MODE_CONFIRM, MODE_NONE, MODE_TX

from .state import INT, BOOL, Z3State

# The broker's answer to a frame where it depends on state outside this family (ER-1).
OK, CHANNEL_ERR, CONNECTION_ERR = 0, 1, 2


@dataclass(frozen=True)
class Transition:
    """A relation in functional form: enabled when ``guard``; the state after is ``after``."""

    guard: z3.BoolRef
    after: Z3State


class Terms(dict):
    """Named Z3 terms (an action's fields, or its oracles), read as attributes."""

    def __getattr__(self, name: str) -> z3.ExprRef:
        return self[name]


# ---------------------------------------------------------------- helpers on the family's state

def _ite(cond: z3.BoolRef, a: Z3State, b: Z3State) -> Z3State:
    """Field by field: ``a`` where cond holds, else ``b``."""
    return Z3State(**{name: va if va.eq(vb) else z3.If(cond, va, vb)
                      for (name, va), (_, vb) in zip(a.items(), b.items())})


def _cases(default: Z3State, *branches: tuple[z3.BoolRef, Z3State]) -> Z3State:
    """The first branch whose condition holds, else ``default``."""
    out = default
    for cond, state in reversed(branches):
        out = _ite(cond, state, out)
    return out


def _lam2(fn: Callable) -> z3.ArrayRef:
    i, j = z3.Ints("c_ ch_")
    return z3.Lambda([i, j], fn(i, j))


def _lam3(fn: Callable) -> z3.ArrayRef:
    i, j, k = z3.Ints("c_ ch_ s_")
    return z3.Lambda([i, j, k], fn(i, j, k))


def reset_channel(x: Z3State, c, ch, status, kept=None) -> Z3State:
    """Channel (c, ch) replaced by a clean channel with ``status`` (storage.close_channel, NEW_CHANNEL).

    A channel that is only closing (CH_CLOSING, CH_ENDING) keeps the outstanding or held-back
    deliveries ``kept`` names (basic.get deliveries of queues it did not consume from, RQ-4), and its
    next tag if it keeps any (``kept`` is then (keeps, tags): whether it keeps one, and which)."""
    if kept is None:
        out, ntag = _no_tags(x.out, c, ch), z3.Store(x.ntag, c, ch, 1)
    else:
        keeps, tags = kept
        out = _lam3(lambda i, j, k: z3.If(z3.And(i == c, j == ch),
                                          z3.And(keeps, z3.Or(x.out[i, j, k], x.txs[i, j, k]), tags[k]),
                                          x.out[i, j, k]))
        ntag = z3.Store(x.ntag, c, ch, z3.If(keeps, x.ntag[c, ch], 1))
    return x.replace(
        cstat=z3.Store(x.cstat, c, ch, status), mode=z3.Store(x.mode, c, ch, MODE_NONE),
        seq=z3.Store(x.seq, c, ch, 0),
        unconf=_lam3(lambda i, j, k: z3.And(x.unconf[i, j, k], z3.Or(i != c, j != ch))),
        conf=_lam3(lambda i, j, k: z3.And(x.conf[i, j, k], z3.Or(i != c, j != ch))),
        held=z3.Store(x.held, c, ch, False), pending=z3.Store(x.pending, c, ch, False),
        ntag=ntag, out=out, txs=_no_tags(x.txs, c, ch), bycons=_no_tags(x.bycons, c, ch),
        cons=_no_tags(x.cons, c, ch))


def _no_tags(arr: z3.ArrayRef, c, ch) -> z3.ArrayRef:
    """A per-tag array with channel (c, ch) emptied."""
    return _lam3(lambda i, j, k: z3.And(arr[i, j, k], z3.Or(i != c, j != ch)))


def close_connection(x: Z3State, c) -> Z3State:
    """storage.close_connection: every channel of c that is not closed is closed, the broker's end is
    closed, and frames in flight to the broker are dropped."""
    def mine(i, j):
        return z3.And(i == c, x.cstat[i, j] != CH_CLOSED)
    return x.replace(
        cstat=_lam2(lambda i, j: z3.If(mine(i, j), CH_CLOSED, x.cstat[i, j])),
        mode=_lam2(lambda i, j: z3.If(mine(i, j), MODE_NONE, x.mode[i, j])),
        seq=_lam2(lambda i, j: z3.If(mine(i, j), 0, x.seq[i, j])),
        unconf=_lam3(lambda i, j, k: z3.And(x.unconf[i, j, k], z3.Not(mine(i, j)))),
        conf=_lam3(lambda i, j, k: z3.And(x.conf[i, j, k], z3.Not(mine(i, j)))),
        held=_lam2(lambda i, j: z3.And(x.held[i, j], z3.Not(mine(i, j)))),
        pending=_lam2(lambda i, j: z3.And(x.pending[i, j], z3.Not(mine(i, j)))),
        ntag=_lam2(lambda i, j: z3.If(mine(i, j), 1, x.ntag[i, j])),
        out=_lam3(lambda i, j, k: z3.And(x.out[i, j, k], z3.Not(mine(i, j)))),
        txs=_lam3(lambda i, j, k: z3.And(x.txs[i, j, k], z3.Not(mine(i, j)))),
        bycons=_lam3(lambda i, j, k: z3.And(x.bycons[i, j, k], z3.Not(mine(i, j)))),
        cons=_lam3(lambda i, j, k: z3.And(x.cons[i, j, k], z3.Not(mine(i, j)))),
        bclosed=z3.Store(x.bclosed, c, True),
        tb=_lam2(lambda i, j: z3.If(i == c, 0, x.tb[i, j])))


def reset_connection(x: Z3State, c, channels_open) -> Z3State:
    """faults.reset_connection: nothing in flight, the broker's end open, every channel of c clean,
    open (channels 1..nch) when ``channels_open`` else closed."""
    def chan(i, j):
        return i == c
    status = z3.If(channels_open, CH_OPEN, CH_CLOSED)
    return x.replace(
        cstat=_lam2(lambda i, j: z3.If(chan(i, j), z3.If(z3.And(1 <= j, j <= x.nch), status, CH_CLOSED),
                                       x.cstat[i, j])),
        mode=_lam2(lambda i, j: z3.If(chan(i, j), MODE_NONE, x.mode[i, j])),
        seq=_lam2(lambda i, j: z3.If(chan(i, j), 0, x.seq[i, j])),
        unconf=_lam3(lambda i, j, k: z3.And(x.unconf[i, j, k], i != c)),
        conf=_lam3(lambda i, j, k: z3.And(x.conf[i, j, k], i != c)),
        held=_lam2(lambda i, j: z3.And(x.held[i, j], i != c)),
        pending=_lam2(lambda i, j: z3.And(x.pending[i, j], i != c)),
        ntag=_lam2(lambda i, j: z3.If(chan(i, j), 1, x.ntag[i, j])),
        out=_lam3(lambda i, j, k: z3.And(x.out[i, j, k], i != c)),
        txs=_lam3(lambda i, j, k: z3.And(x.txs[i, j, k], i != c)),
        bycons=_lam3(lambda i, j, k: z3.And(x.bycons[i, j, k], i != c)),
        cons=_lam3(lambda i, j, k: z3.And(x.cons[i, j, k], i != c)),
        bclosed=z3.Store(x.bclosed, c, False),
        tb=_lam2(lambda i, j: z3.If(i == c, 0, x.tb[i, j])))


def _write(x: Z3State, c, ch) -> Z3State:
    """The client writes one frame on channel ch of connection c (client.write)."""
    return x.replace(tb=z3.Store(x.tb, c, ch, x.tb[c, ch] + 1))


def _broker_end_open(x: Z3State, c) -> z3.BoolRef:
    return z3.And(x.up, z3.Not(x.bclosed[c]))


def _channel_open(x: Z3State, c, ch) -> z3.BoolRef:
    return z3.And(_broker_end_open(x, c), 1 <= ch, ch <= x.nch, x.cstat[c, ch] == CH_OPEN)


# ---------------------------------------------------------------- broker actions (spec.broker)

def _settled(x: Z3State, c, ch, tag, multiple):
    """The outstanding tags a basic.ack / nack / reject settles (broker.settled_tags: ACK-1..3), as a
    predicate of the tag."""
    return lambda k: z3.And(x.out[c, ch, k], z3.If(multiple, z3.Or(tag == 0, k <= tag), k == tag))


def _hand_over(x: Z3State, c, ch, no_ack, by_consumer) -> Z3State:
    """A copy leaves its queue for channel (c, ch) with the channel's next tag (broker.hand_over, DT-1,
    DT-2): outstanding in manual mode (AM-3), in flight and gone in automatic mode (AM-2); a
    consumer's (``by_consumer``) or a basic.get's."""
    tag = x.ntag[c, ch]
    manual = z3.Not(no_ack)
    return x.replace(ntag=z3.Store(x.ntag, c, ch, tag + 1),
                     out=z3.Store(x.out, c, ch, tag, z3.Or(x.out[c, ch, tag], manual)),
                     bycons=z3.Store(x.bycons, c, ch, tag, z3.Or(x.bycons[c, ch, tag], z3.And(manual, by_consumer))))


def _drop_tags(arr: z3.ArrayRef, c, ch, gone: Callable) -> z3.ArrayRef:
    """A per-tag array without the tags of channel (c, ch) that ``gone`` names."""
    return _lam3(lambda i, j, t: z3.And(arr[i, j, t], z3.Not(z3.And(i == c, j == ch, gone(t)))))


def BrokerTakeFrame(x: Z3State, a: Terms, o: Terms) -> Transition:
    """The broker takes the oldest frame of channel ch (``o.method`` and its fields are oracles) and acts
    on it (broker.take_frame); errors that depend on queues or tags are ``o.verdict``. The frame's
    fields: ``o.tag``, ``o.multiple`` (a settlement), ``o.no_ack`` (basic.get); ``o.got``: a basic.get
    found a ready copy; ``o.keeps``, ``o.kept``: what a closing channel keeps (storage.close_channel);
    ``o.ctag``: the consumer tag of basic.consume or basic.cancel; ``o.cancelled``: the consumers
    (conn, ch, tag) a queue.delete cancels (the deleted queue's)."""
    c, ch, m = a.conn, a.ch, o.method
    k = z3.Int("k_")
    other_channels_quiet = z3.ForAll([k], z3.Implies(z3.And(1 <= k, k <= x.nch), x.tb[c, k] == 0))
    guard = z3.And(_broker_end_open(x, c), 0 <= ch, ch <= x.nch, x.tb[c, ch] > 0,
                   z3.Implies(ch == 0, other_channels_quiet),
                   z3.Implies(ch != 0, z3.Not(x.pending[c, ch])),
                   z3.Implies(ch == 0, m == CONNECTION_CLOSE))        # only connection.close travels on channel 0
    x = x.replace(tb=z3.Store(x.tb, c, ch, x.tb[c, ch] - 1))
    mode, status = x.mode[c, ch], x.cstat[c, ch]
    conn_err = close_connection(x, c)
    kept = (o.keeps, o.kept)
    ch_err = reset_channel(x, c, ch, CH_CLOSING, kept)
    settle = z3.Or(m == BASIC_ACK, m == BASIC_NACK, m == BASIC_REJECT)
    settled = _settled(x, c, ch, o.tag, z3.And(m != BASIC_REJECT, o.multiple))
    on_open = _cases(
        x,
        (z3.Or(m == CHANNEL_OPEN, m == CHANNEL_CLOSE_OK), conn_err),                     # ER-1
        (m == CHANNEL_CLOSE, reset_channel(x, c, ch, CH_ENDING, kept)),                  # RQ-4
        (z3.And(m == BASIC_PUBLISH, o.immediate), conn_err),
        (z3.And(m == BASIC_PUBLISH, o.exchange != DEFAULT_EXCHANGE, o.exchange != FANOUT_EXCHANGE), ch_err),  # PC-9
        (z3.And(m == BASIC_PUBLISH, mode == MODE_TX), x.replace(held=z3.Store(x.held, c, ch, True))),  # TX-2
        (z3.And(m == BASIC_PUBLISH, mode == MODE_CONFIRM), x.replace(                    # PC-1
            seq=z3.Store(x.seq, c, ch, x.seq[c, ch] + 1),
            unconf=z3.Store(x.unconf, c, ch, x.seq[c, ch] + 1, True))),
        (z3.And(settle, o.verdict == CHANNEL_ERR), ch_err),                              # ACK-4
        (z3.And(settle, mode == MODE_TX), x.replace(                                     # TX-3
            held=z3.Store(x.held, c, ch, z3.Or(x.held[c, ch], o.settled)),
            out=_lam3(lambda i, j, t: z3.And(x.out[i, j, t], z3.Not(z3.And(i == c, j == ch, settled(t))))),
            txs=_lam3(lambda i, j, t: z3.Or(x.txs[i, j, t], z3.And(i == c, j == ch, settled(t)))))),
        (settle, x.replace(                                                              # ACK-1..3
            out=_drop_tags(x.out, c, ch, settled), bycons=_drop_tags(x.bycons, c, ch, settled))),
        (z3.And(m == BASIC_QOS, o.size != 0), conn_err),
        (z3.And(m == BASIC_CONSUME, o.verdict == CONNECTION_ERR), conn_err),
        (z3.And(z3.Or(m == BASIC_CONSUME, m == BASIC_GET, m == QUEUE_BIND, m == QUEUE_PURGE,
                      m == QUEUE_DECLARE, m == QUEUE_DELETE), o.verdict == CHANNEL_ERR), ch_err),
        (m == BASIC_CONSUME, x.replace(cons=z3.Store(x.cons, c, ch, o.ctag, True))),      # DS-1
        (m == BASIC_CANCEL, x.replace(cons=z3.Store(x.cons, c, ch, o.ctag, False))),
        (m == QUEUE_DELETE, x.replace(cons=_lam3(lambda i, j, k: z3.And(x.cons[i, j, k],
                                                                        z3.Not(o.cancelled[i, j, k]))))),
        (z3.And(m == BASIC_GET, o.got), _hand_over(x, c, ch, o.no_ack, z3.BoolVal(False))),  # DS-1, DT-1
        (z3.And(m == BASIC_RECOVER, z3.Not(o.requeue)), conn_err),                       # RQ-5
        (m == BASIC_RECOVER, x.replace(out=_no_tags(x.out, c, ch),                        # RQ-5: all requeued
                                       bycons=_drop_tags(x.bycons, c, ch, lambda t: x.out[c, ch, t]))),
        (m == CONFIRM_SELECT, _ite(mode == MODE_TX, ch_err,                              # PC-8
                                   x.replace(mode=z3.Store(x.mode, c, ch, MODE_CONFIRM)))),
        (m == TX_SELECT, _ite(mode == MODE_CONFIRM, ch_err, x.replace(mode=z3.Store(x.mode, c, ch, MODE_TX)))),
        (m == TX_COMMIT, _ite(mode != MODE_TX, ch_err, x.replace(                         # TX-10, TX-7, TX-3
            held=z3.Store(x.held, c, ch, False), pending=z3.Store(x.pending, c, ch, o.waits),
            txs=_no_tags(x.txs, c, ch), bycons=_drop_tags(x.bycons, c, ch, lambda t: x.txs[c, ch, t])))),
        (m == TX_ROLLBACK, _ite(mode != MODE_TX, ch_err, x.replace(                       # TX-2, TX-3, TX-4
            held=z3.Store(x.held, c, ch, False), txs=_no_tags(x.txs, c, ch),
            out=_lam3(lambda i, j, t: z3.Or(x.out[i, j, t], z3.And(i == c, j == ch, x.txs[i, j, t])))))),
    )
    on_closed = _ite(m == CHANNEL_OPEN, reset_channel(x, c, ch, CH_OPEN), conn_err)      # ER-1
    on_closing = _cases(x, (m == CHANNEL_OPEN, conn_err),
                        (m == CHANNEL_CLOSE_OK, reset_channel(x, c, ch, CH_CLOSED)))              # ER-1
    after = _cases(on_closing, (m == CONNECTION_CLOSE, conn_err), (status == CH_OPEN, on_open),
                   (status == CH_CLOSED, on_closed))
    return Transition(guard, after)


def BrokerDeliver(x: Z3State, a: Terms, o: Terms) -> Transition:
    """The head of a queue to a consumer with room (``o.ready``: the queue has a copy and a consumer
    room, DS-1, PF-3); the consumer is on channel (``o.conn``, ``o.ch``), which is open
    (broker.next_consumer), in automatic mode when ``o.no_ack``; the copy takes the channel's next tag."""
    c, ch = o.conn, o.ch
    return Transition(z3.And(x.up, o.ready, _channel_open(x, c, ch)),
                      _hand_over(x, c, ch, o.no_ack, z3.BoolVal(True)))


def BrokerCloseOk(x: Z3State, a: Terms, o: Terms) -> Transition:
    """channel.close-ok for a channel the client closed: it is gone (ER-1)."""
    c, ch = a.conn, a.ch
    guard = z3.And(_broker_end_open(x, c), 1 <= ch, ch <= x.nch, x.cstat[c, ch] == CH_ENDING)
    return Transition(guard, reset_channel(x, c, ch, CH_CLOSED))


def BrokerConfirm(x: Z3State, a: Terms, o: Terms) -> Transition:
    """basic.ack/nack from the broker for publish ``seq``, or with multiple every unconfirmed one up to
    it (PC-2, PC-3); ``o.ready``: seq's queues took it and its return went out (PC-4, PC-5);
    ``o.prefix``: the longest ready run of one outcome (broker.confirm_prefix)."""
    c, ch, s = a.conn, a.ch, a.seq
    guard = z3.And(_channel_open(x, c, ch), z3.If(a.multiple, z3.And(s != 0, s == o.prefix),
                                                  z3.And(x.unconf[c, ch, s], o.ready)))

    def covered(i, j, k):
        return z3.And(i == c, j == ch, x.unconf[i, j, k], z3.If(a.multiple, k <= s, k == s))
    after = x.replace(unconf=_lam3(lambda i, j, k: z3.And(x.unconf[i, j, k], z3.Not(covered(i, j, k)))),
                      conf=_lam3(lambda i, j, k: z3.Or(x.conf[i, j, k], covered(i, j, k))))
    return Transition(guard, after)


def BrokerCommitOk(x: Z3State, a: Terms, o: Terms) -> Transition:
    """tx.commit-ok once the commit's copies are on disk (``o.written``), TX-7."""
    c, ch = a.conn, a.ch
    guard = z3.And(_channel_open(x, c, ch), x.pending[c, ch], o.written)
    return Transition(guard, x.replace(pending=z3.Store(x.pending, c, ch, False)))


def BrokerQueueFail(x: Z3State, a: Terms, o: Terms) -> Transition:
    """A queue fails to take unconfirmed publish ``seq`` (``o.failable``: a queue holds a copy), PC-6.
    It will be nacked: the confirm still comes, so nothing of this family changes."""
    c, ch = a.conn, a.ch
    return Transition(z3.And(_channel_open(x, c, ch), x.unconf[c, ch, a.seq], o.failable), x)


def BrokerCrash(x: Z3State, a: Terms, o: Terms) -> Transition:
    """The broker dies: every connection drops with its channels (DU-2, TX-9)."""
    i, j = z3.Ints("c_ ch_")
    k = z3.Int("s_")
    after = x.replace(up=z3.BoolVal(False), bclosed=z3.K(INT, z3.BoolVal(False)),
                      cstat=z3.Lambda([i, j], z3.IntVal(CH_CLOSED)), mode=z3.Lambda([i, j], z3.IntVal(MODE_NONE)),
                      seq=z3.Lambda([i, j], z3.IntVal(0)), unconf=z3.Lambda([i, j, k], z3.BoolVal(False)),
                      conf=z3.Lambda([i, j, k], z3.BoolVal(False)), held=z3.Lambda([i, j], z3.BoolVal(False)),
                      pending=z3.Lambda([i, j], z3.BoolVal(False)), tb=z3.Lambda([i, j], z3.IntVal(0)),
                      ntag=z3.Lambda([i, j], z3.IntVal(1)), out=z3.Lambda([i, j, k], z3.BoolVal(False)),
                      txs=z3.Lambda([i, j, k], z3.BoolVal(False)), bycons=z3.Lambda([i, j, k], z3.BoolVal(False)),
                      cons=z3.Lambda([i, j, k], z3.BoolVal(False)))
    return Transition(x.up, after)


def BrokerRestart(x: Z3State, a: Terms, o: Terms) -> Transition:
    """The broker starts again (DU-1)."""
    return Transition(z3.Not(x.up), x.replace(up=z3.BoolVal(True)))


def DiskFsync(x: Z3State, a: Terms, o: Terms) -> Transition:
    """One pending write or removal becomes durable (``o.pending``), PC-5; nothing of this family changes."""
    return Transition(z3.And(x.up, o.pending), x)


def NetworkLoss(x: Z3State, a: Terms, o: Terms) -> Transition:
    """Connection c is lost (``o.connected``: it is not down): the broker closes it, the slot is down."""
    c = a.conn
    return Transition(z3.And(x.up, o.connected), reset_connection(x, c, z3.BoolVal(False)))


# ---------------------------------------------------------------- client actions (spec.client)

def ClientConnect(x: Z3State, a: Terms, o: Terms) -> Transition:
    """A new connection in a slot that is down (``o.down``), to a broker that is up."""
    return Transition(z3.And(x.up, a.ch == 0, o.down), reset_connection(x, a.conn, a.channels_open))


def ClientReceive(x: Z3State, a: Terms, o: Terms) -> Transition:
    """The client reads the next frame (``o.readable``; ``o.method`` is the frame): a connection.close
    or close-ok ends the connection; a channel.close is answered with close-ok when ``answer``."""
    c, ch, m = a.conn, a.ch, o.method
    after = _cases(x, (z3.Or(m == CONNECTION_CLOSE, m == CONNECTION_CLOSE_OK),
                       reset_connection(x, c, z3.BoolVal(False))),
                   (z3.And(m == CHANNEL_CLOSE, a.answer), _write(x, c, ch)))
    return Transition(o.readable, after)


def _client_writes(x: Z3State, a: Terms, o: Terms) -> Transition:
    """A client method on a channel: ``o.may`` is its precondition (the client's own view: the
    connection is up and the channel open, spec.client), and it writes one frame."""
    return Transition(o.may, _write(x, a.conn, a.ch))


ClientPublish = ClientConsume = ClientCancel = ClientGet = ClientAck = ClientNack = ClientReject = \
    ClientQos = ClientRecover = ClientConfirmSelect = ClientTxSelect = ClientTxCommit = ClientTxRollback = \
    ClientDeclareQueue = ClientBindQueue = ClientPurgeQueue = ClientDeleteQueue = ClientChannelClose = \
    ClientChannelOpen = ClientChannelCloseOk = ClientConnectionClose = _client_writes


# ---------------------------------------------------------------- the table

_BROKER_FRAME_ORACLES = {"method": INT, "immediate": BOOL, "exchange": INT, "verdict": INT, "settled": BOOL,
                         "size": INT, "requeue": BOOL, "waits": BOOL, "tag": INT, "multiple": BOOL,
                         "no_ack": BOOL, "got": BOOL, "keeps": BOOL, "kept": z3.ArraySort(INT, BOOL),
                         "ctag": INT, "cancelled": z3.ArraySort(INT, INT, INT, BOOL)}

# Oracles per action: facts outside this family that its guard or effect reads.
ORACLES: dict[str, dict[str, z3.SortRef]] = {
    "BrokerTakeFrame": _BROKER_FRAME_ORACLES,
    "BrokerDeliver": {"ready": BOOL, "conn": INT, "ch": INT, "no_ack": BOOL},
    "BrokerCloseOk": {},
    "BrokerConfirm": {"ready": BOOL, "prefix": INT},
    "BrokerCommitOk": {"written": BOOL},
    "BrokerQueueFail": {"failable": BOOL},
    "BrokerCrash": {},
    "BrokerRestart": {},
    "DiskFsync": {"pending": BOOL},
    "NetworkLoss": {"connected": BOOL},
    "ClientConnect": {"down": BOOL},
    "ClientReceive": {"readable": BOOL, "method": INT},
}


def _sort_of(value) -> z3.SortRef:
    return BOOL if isinstance(value, bool) else INT


def action_classes() -> tuple[type, ...]:
    """Every concrete spec action class."""
    return tuple(cls for cls in vars(A).values() if isinstance(cls, type) and issubclass(cls, A.Action)
                 and cls not in (A.Action, A.ClientAction))


def param_sorts(cls: type) -> dict[str, z3.SortRef]:
    """The Z3 sorts of an action class's fields (ints and bools)."""
    import dataclasses
    out = {}
    for f in dataclasses.fields(cls):
        out[f.name] = BOOL if f.type in ("bool", bool) else INT
    return out


def oracle_sorts(cls: type) -> dict[str, z3.SortRef]:
    """The oracle inputs of an action class's relation."""
    return ORACLES.get(cls.__name__, {"may": BOOL})


RELATIONS: dict[type, Callable[[Z3State, Terms, Terms], Transition]] = {
    cls: globals()[cls.__name__] for cls in action_classes()
}


def symbolic(cls: type, prefix: str) -> tuple[Terms, Terms]:
    """Fresh Z3 constants for an action's fields and its oracles."""
    a = Terms({n: z3.Const(f"{prefix}.{n}", s) for n, s in param_sorts(cls).items()})
    o = Terms({n: z3.Const(f"{prefix}.o.{n}", s) for n, s in oracle_sorts(cls).items()})
    return a, o


def concrete(action) -> Terms:
    """A concrete action's fields as Z3 values."""
    import dataclasses
    return Terms({f.name: z3.BoolVal(v) if isinstance(v, bool) else z3.IntVal(v)
                  for f in dataclasses.fields(action) for v in (getattr(action, f.name),)})
