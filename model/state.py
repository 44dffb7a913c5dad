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

    broker_up: z3.BoolRef          # the broker is running
    channels_per_connection: z3.ArithRef        # channels per connection (rigid: a configuration constant)
    broker_end_closed: z3.ArrayRef    # c -> the broker has closed its end of connection c
    channel_status: z3.ArrayRef      # (c, ch) -> broker channel status CH_*
    channel_mode: z3.ArrayRef       # (c, ch) -> MODE_* (PC-8)
    publish_seq: z3.ArrayRef        # (c, ch) -> publish_seq (PC-1)
    unconfirmed: z3.ArrayRef     # (c, ch, s) -> publish s is unconfirmed (PC-2)
    confirmed: z3.ArrayRef       # (c, ch, s) -> publish s was confirmed (ghost, PC-2)
    tx_holds_back: z3.ArrayRef       # (c, ch) -> publishes or settlements held back by an open transaction (TX-2, TX-3)
    commit_pending: z3.ArrayRef    # (c, ch) -> a tx.commit waits for its commit-ok (TX-7)
    frames_to_broker: z3.ArrayRef         # (c, ch) -> frames in flight to the broker on channel ch (0: the connection's)
    next_tag: z3.ArrayRef       # (c, ch) -> next_tag (DT-1)
    outstanding: z3.ArrayRef        # (c, ch, t) -> tag t is outstanding (unacked, AM-3)
    tx_settled: z3.ArrayRef        # (c, ch, t) -> tag t is settled inside the open transaction, held back (TX-3)
    delivered_to_consumer: z3.ArrayRef     # (c, ch, t) -> delivery t (outstanding or held back) went to a consumer, not basic.get
    consumers: z3.ArrayRef       # (c, ch, k) -> consumer tag k is one of the channel's consumers
    client_connection_status: z3.ArrayRef        # c -> the connection's status as its client sees it (CONN_*)
    connection_close_to_client: z3.ArrayRef     # c -> a connection.close or close-ok is in flight to the client (ER-1)
    frames_to_client: z3.ArrayRef         # (c, ch) -> frames are in flight to the client on channel ch (0: the connection's)
    channel_close_to_client: z3.ArrayRef        # (c, ch) -> a channel.close is in flight to the client on channel ch (ER-1)
    sent_after_close: z3.ArrayRef        # (c, ch) -> a frame other than close-ok follows the last such channel.close
    view_status: z3.ArrayRef        # (c, ch) -> the status of the client's view of the channel (C_*)
    view_last_tag: z3.ArrayRef        # (c, ch) -> the last delivery tag the client read on it (DT-1)
    open_ok_to_client: z3.ArrayRef        # (c, ch) -> a channel.open-ok is in flight to the client
    older_frames_ahead: z3.ArrayRef        # (c, ch) -> frames are ahead of it (an older channel's)
    deliveries_to_client: z3.ArrayRef        # (c, ch, t) -> a delivery of tag t is in flight to the client behind the open-ok
    #                         (all of them without one: the deliveries of the broker's channel now)
    open_to_broker: z3.ArrayRef        # (c, ch) -> a channel.open is in flight to the broker
    frame_ahead_of_open: z3.ArrayRef        # (c, ch) -> a frame other than close-ok is ahead of the first one
    frame_behind_open: z3.ArrayRef       # (c, ch) -> a frame other than close-ok and channel.open is behind it
    other_frames_to_broker: z3.ArrayRef        # (c, ch) -> such a frame is in flight to the broker at all
    view_mode: z3.ArrayRef      # (c, ch) -> the mode the client asked for (MODE_*)
    view_publish_count: z3.ArrayRef        # (c, ch) -> the client's publish count in confirm mode (PC-1)
    view_confirmed: z3.ArrayRef        # (c, ch, s) -> the client saw publish s confirmed
    single_confirms_in_flight: z3.ArrayRef        # (c, ch, n) -> a confirm of n, not multiple, is in flight to the client behind the
    #                         open-ok (all of them without one: the broker's channel's)
    multiple_confirm_in_flight: z3.ArrayRef        # (c, ch) -> the highest number of a multiple one (0: none)
    first_select_to_broker: z3.ArrayRef       # (c, ch) -> the first confirm.select or tx.select in flight to the broker (0: none)
    publishes_behind_select: z3.ArrayRef        # (c, ch) -> the basic.publish frames behind it when it is confirm.select (else 0)
    publishes_to_broker: z3.ArrayRef        # (c, ch) -> the basic.publish frames in flight to the broker
    queue_exists: z3.ArrayRef        # q -> queue q exists
    queue_durable: z3.ArrayRef       # q -> queue q is durable (DU-1)
    queue_owner: z3.ArrayRef       # q -> its exclusive owner, connection index + 1; 0 when not exclusive (DU-4)
    in_round_robin: z3.ArrayRef       # (c, ch, k) -> consumer k of channel (c, ch) is in its queue's round-robin (DS-1)
    ready: z3.ArrayRef      # (q, key) -> the copy with enqueue position key is ready in queue q (RQ-1)
    ahead_in_queue: z3.ArrayRef      # (q, a, b) -> ready copies a and b of queue q, a ahead of b in the queue (RQ-1)
    redelivered: z3.ArrayRef      # (q, key) -> that ready copy is marked redelivered (RQ-2)
    ever_delivered: z3.ArrayRef        # (q, key) -> the copy was delivered at least once (ghost, RQ-2)
    enqueued: z3.ArrayRef        # q -> copies ever enqueued in q; the next key is enq + 1
    born: z3.ArrayRef       # q -> enq when q was last declared: keys up to it were a deleted queue's
    on_disk: z3.ArrayRef       # (q, key) -> the copy's record is on disk (PC-5, DU-2)
    tag_queue: z3.ArrayRef         # (c, ch, t) -> the queue of the copy outstanding or held back under tag t (-1: none)
    tag_key: z3.ArrayRef         # (c, ch, t) -> that copy's key (0: none)
    tx_settle_kind: z3.ArrayRef        # (c, ch, t) -> how a held-back settlement of tag t settles it (SETTLE_*; -1: none)
    named_by_connection: z3.ArrayRef         # (q, key) -> the connection of the live tag naming the copy (ghost; -1: none)
    named_by_channel: z3.ArrayRef        # (q, key) -> that tag's channel (ghost; -1: none)
    named_by_tag: z3.ArrayRef         # (q, key) -> that tag (ghost; 0: none): (oc, och, ot) is the inverse of (tq, tk)
    published: z3.ArrayRef       # c -> messages the client of connection c has published; (c, n) is its n-th
    publish_in_flight: z3.ArrayRef        # (c, n) -> a basic.publish of message (c, n) is in flight to the broker
    publish_in_flight_twice: z3.ArrayRef       # (c, n) -> two or more are
    tx_held_by_channel: z3.ArrayRef        # (c, n) -> the channel whose open transaction holds message (c, n) back (0: none, TX-2)
    tx_held_twice: z3.ArrayRef       # (c, n) -> open transactions hold message (c, n) back more than once
    taken_by_queue: z3.ArrayRef         # (c, n) -> some queue took a copy of message (c, n) (ghost: a copy carries it)
    prefetch: z3.ArrayRef         # (c, ch) -> the per-consumer limit of consumers started later (PF-2)
    global_limit: z3.ArrayRef       # (c, ch) -> the channel's global limit (0: none, PF-2)
    volume: z3.ArrayRef        # (c, ch) -> the deliveries the global limit counts (may go below 0, PF-3)
    qos_excess: z3.ArrayRef       # (c, ch) -> ghost qos_excess (PF-5)
    qos_uncounted: z3.ArrayRef       # (c, ch) -> ghost qos_uncounted (TX-3, PF-5)
    consumer_outstanding: z3.ArrayRef       # (c, ch) -> ghost counter: outstanding consumer deliveries (former consumers' too)
    consumer_held_back: z3.ArrayRef       # (c, ch) -> ghost counter: consumer deliveries held back by an open transaction
    consumer_deliveries: z3.ArrayRef       # (c, ch, k) -> ghost counter: consumer k's deliveries, outstanding or held back
    consumer_no_ack: z3.ArrayRef        # (c, ch, k) -> consumer k is in automatic mode (no_ack)
    consumer_limit: z3.ArrayRef       # (c, ch, k) -> consumer k's own limit (0: none, PF-2)
    message_connection: z3.ArrayRef         # (q, key) -> the connection of the copy's message (set at enqueue, never changed)
    message_number: z3.ArrayRef         # (q, key) -> n of the copy's message (c, n)
    persistent: z3.ArrayRef       # (q, key) -> the copy is persistent (PC-5, DU-2)
    holds_confirm: z3.ArrayRef       # (q, key) -> the copy holds up its own message's publish's confirm: not on disk (PC-5)
    message_acked: z3.ArrayRef      # (c, n) -> the broker confirmed message (c, n) with basic.ack (ghost, PC-10)
    unconfirmed_publish_channel: z3.ArrayRef        # (c, n) -> the channel of its unconfirmed publish that may still be acked (0: none
    #                         or nacked, PC-6); a message is published once, so this is a function
    unconfirmed_publish_seq: z3.ArrayRef         # (c, n) -> that publish's sequence number (0: none)
    dead_letter_target: z3.ArrayRef        # q -> queue q is some queue's dead-letter target (rigid: a configuration constant)
    lost_in_crash: z3.ArrayRef       # (q, key) -> a crash lost the copy: live and not on disk (ghost, PC-10, DU-2)
    auto_in_flight_on: z3.ArrayRef       # (q, key) -> the connection (index + 1) an automatic-mode delivery of the copy is in
    #                         flight on, not yet read (conn.auto, AM-2); 0: none
    gone_this_life: z3.ArrayRef      # (q, key) -> the copy is gone in this life: a fate since the last restart that
    #                         recovered it (not in ``revived``), or in flight in automatic mode (ghost, TX-3)

    def items(self) -> Iterator[tuple[str, z3.ExprRef]]:
        for f in fields(self):
            yield f.name, getattr(self, f.name)

    def replace(self, **changes: z3.ExprRef) -> "Z3State":
        values = dict(self.items())
        values.update(changes)
        return Z3State(**values)


SORTS: dict[str, z3.SortRef] = {
    "broker_up": BOOL, "channels_per_connection": INT,
    "broker_end_closed": z3.ArraySort(INT, BOOL),
    "channel_status": z3.ArraySort(INT, INT, INT), "channel_mode": z3.ArraySort(INT, INT, INT), "publish_seq": z3.ArraySort(INT, INT, INT),
    "unconfirmed": z3.ArraySort(INT, INT, INT, BOOL), "confirmed": z3.ArraySort(INT, INT, INT, BOOL),
    "tx_holds_back": z3.ArraySort(INT, INT, BOOL), "commit_pending": z3.ArraySort(INT, INT, BOOL), "frames_to_broker": z3.ArraySort(INT, INT, INT),
    "next_tag": z3.ArraySort(INT, INT, INT), "outstanding": z3.ArraySort(INT, INT, INT, BOOL),
    "tx_settled": z3.ArraySort(INT, INT, INT, BOOL), "delivered_to_consumer": z3.ArraySort(INT, INT, INT, BOOL),
    "consumers": z3.ArraySort(INT, INT, INT, BOOL),
    "client_connection_status": z3.ArraySort(INT, INT), "connection_close_to_client": z3.ArraySort(INT, BOOL), "frames_to_client": z3.ArraySort(INT, INT, BOOL),
    "channel_close_to_client": z3.ArraySort(INT, INT, BOOL), "sent_after_close": z3.ArraySort(INT, INT, BOOL),
    "view_status": z3.ArraySort(INT, INT, INT), "view_last_tag": z3.ArraySort(INT, INT, INT),
    **{name: z3.ArraySort(INT, INT, BOOL) for name in ("open_ok_to_client", "older_frames_ahead", "open_to_broker", "frame_ahead_of_open", "frame_behind_open", "other_frames_to_broker")},
    "deliveries_to_client": z3.ArraySort(INT, INT, INT, BOOL),
    **{name: z3.ArraySort(INT, INT, INT) for name in ("view_mode", "view_publish_count", "multiple_confirm_in_flight", "first_select_to_broker", "publishes_behind_select", "publishes_to_broker")},
    "view_confirmed": z3.ArraySort(INT, INT, INT, BOOL), "single_confirms_in_flight": z3.ArraySort(INT, INT, INT, BOOL),
    "queue_exists": z3.ArraySort(INT, BOOL), "queue_durable": z3.ArraySort(INT, BOOL), "queue_owner": z3.ArraySort(INT, INT),
    "in_round_robin": z3.ArraySort(INT, INT, INT, BOOL), "ready": z3.ArraySort(INT, INT, BOOL),
    "ahead_in_queue": z3.ArraySort(INT, INT, INT, BOOL),
    "redelivered": z3.ArraySort(INT, INT, BOOL), "ever_delivered": z3.ArraySort(INT, INT, BOOL), "enqueued": z3.ArraySort(INT, INT),
    "born": z3.ArraySort(INT, INT), "on_disk": z3.ArraySort(INT, INT, BOOL), "tag_queue": z3.ArraySort(INT, INT, INT, INT),
    "tag_key": z3.ArraySort(INT, INT, INT, INT), "tx_settle_kind": z3.ArraySort(INT, INT, INT, INT),
    "named_by_connection": z3.ArraySort(INT, INT, INT), "named_by_channel": z3.ArraySort(INT, INT, INT), "named_by_tag": z3.ArraySort(INT, INT, INT),
    "published": z3.ArraySort(INT, INT), "publish_in_flight": z3.ArraySort(INT, INT, BOOL), "tx_held_by_channel": z3.ArraySort(INT, INT, INT),
    "publish_in_flight_twice": z3.ArraySort(INT, INT, BOOL), "tx_held_twice": z3.ArraySort(INT, INT, BOOL),
    "taken_by_queue": z3.ArraySort(INT, INT, BOOL),
    **{name: z3.ArraySort(INT, INT, INT) for name in ("prefetch", "global_limit", "volume", "qos_excess", "qos_uncounted", "consumer_outstanding", "consumer_held_back")},
    "consumer_deliveries": z3.ArraySort(INT, INT, INT, INT), "consumer_no_ack": z3.ArraySort(INT, INT, INT, BOOL),
    "consumer_limit": z3.ArraySort(INT, INT, INT, INT),
    "message_connection": z3.ArraySort(INT, INT, INT), "message_number": z3.ArraySort(INT, INT, INT), "persistent": z3.ArraySort(INT, INT, BOOL),
    "holds_confirm": z3.ArraySort(INT, INT, BOOL), "message_acked": z3.ArraySort(INT, INT, BOOL), "unconfirmed_publish_channel": z3.ArraySort(INT, INT, INT),
    "unconfirmed_publish_seq": z3.ArraySort(INT, INT, INT), "dead_letter_target": z3.ArraySort(INT, BOOL),
    "lost_in_crash": z3.ArraySort(INT, INT, BOOL), "gone_this_life": z3.ArraySort(INT, INT, BOOL),
    "auto_in_flight_on": z3.ArraySort(INT, INT, INT),
}

# What an index the spec state does not have maps to: a closed, clean channel (spec.state.CLOSED_CHANNEL).
DEFAULTS = {"broker_end_closed": False, "channel_status": CH_CLOSED, "channel_mode": MODE_NONE, "publish_seq": 0, "unconfirmed": False, "confirmed": False,
            "tx_holds_back": False, "commit_pending": False, "frames_to_broker": 0, "next_tag": 1, "outstanding": False, "tx_settled": False,
            "delivered_to_consumer": False, "consumers": False, "client_connection_status": CONN_DOWN, "connection_close_to_client": False, "frames_to_client": False, "channel_close_to_client": False, "sent_after_close": False,
            "view_status": C_CLOSED, "view_last_tag": 0, "open_ok_to_client": False, "older_frames_ahead": False, "deliveries_to_client": False, "open_to_broker": False, "frame_ahead_of_open": False,
            "frame_behind_open": False, "other_frames_to_broker": False, "view_mode": MODE_NONE, "view_publish_count": 0, "view_confirmed": False, "single_confirms_in_flight": False, "multiple_confirm_in_flight": 0,
            "first_select_to_broker": 0, "publishes_behind_select": 0, "publishes_to_broker": 0,
            "queue_exists": False, "queue_durable": False, "queue_owner": 0, "in_round_robin": False, "ready": False, "ahead_in_queue": False, "redelivered": False,
            "ever_delivered": False,
            "enqueued": 0, "born": 0, "on_disk": False, "tag_queue": -1, "tag_key": 0, "tx_settle_kind": -1, "named_by_connection": -1, "named_by_channel": -1, "named_by_tag": 0,
            "published": 0, "publish_in_flight": False, "tx_held_by_channel": 0, "publish_in_flight_twice": False, "tx_held_twice": False,
            "taken_by_queue": False, "prefetch": 0, "global_limit": 0, "volume": 0, "qos_excess": 0, "qos_uncounted": 0,
            "consumer_outstanding": 0, "consumer_held_back": 0, "consumer_deliveries": 0, "consumer_no_ack": False, "consumer_limit": 0,
            "message_connection": 0, "message_number": 0, "persistent": False, "holds_confirm": False, "message_acked": False, "unconfirmed_publish_channel": 0, "unconfirmed_publish_seq": 0, "dead_letter_target": False,
            "lost_in_crash": False, "gone_this_life": False, "auto_in_flight_on": 0}


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
        out["broker_end_closed"][(c,)] = conn.broker_closed
        out["client_connection_status"][(c,)] = conn.status
        out["connection_close_to_client"][(c,)] = any(f[0] in (CONNECTION_CLOSE, CONNECTION_CLOSE_OK) for f in conn.to_client[0])
        for ch, fifo in enumerate(conn.to_client):
            out["frames_to_client"][(c, ch)] = bool(fifo)
            out["channel_close_to_client"][(c, ch)] = any(f[0] == CHANNEL_CLOSE for f in fifo)
            out["sent_after_close"][(c, ch)] = sent_after_close(fifo)
        for ch, fifo in enumerate(conn.to_broker):
            out["frames_to_broker"][(c, ch)] = len(fifo)
            out["open_to_broker"][(c, ch)], out["frame_ahead_of_open"][(c, ch)], out["frame_behind_open"][(c, ch)], out["other_frames_to_broker"][(c, ch)] = opens_in_flight(fifo)
        for ch, fifo in enumerate(conn.to_client):
            out["open_ok_to_client"][(c, ch)], out["older_frames_ahead"][(c, ch)], tags = open_ok_in_flight(fifo)
            for t in tags:
                out["deliveries_to_client"][(c, ch, t)] = True
            single, out["multiple_confirm_in_flight"][(c, ch)] = confirms_in_flight(fifo)
            for n in single:
                out["single_confirms_in_flight"][(c, ch, n)] = True
        for ch, view in enumerate(conn.clients, start=1):
            out["view_status"][(c, ch)], out["view_last_tag"][(c, ch)] = view.status, view.last_tag
            out["view_mode"][(c, ch)], out["view_publish_count"][(c, ch)] = view.mode, view.pub_seq
            for s in view.confirms:
                out["view_confirmed"][(c, ch, s)] = True
            out["first_select_to_broker"][(c, ch)], out["publishes_behind_select"][(c, ch)], out["publishes_to_broker"][(c, ch)] = selects_in_flight(conn.to_broker[ch])
        for ch, channel in enumerate(conn.channels, start=1):
            out["channel_status"][(c, ch)] = channel.status
            out["channel_mode"][(c, ch)] = channel.mode
            out["publish_seq"][(c, ch)] = channel.publish_seq
            for p in channel.unconfirmed:
                out["unconfirmed"][(c, ch, p.seq)] = True
            for s in channel.confirmed:
                out["confirmed"][(c, ch, s)] = True
            out["tx_holds_back"][(c, ch)] = bool(channel.tx_pubs or channel.tx_settles)
            out["commit_pending"][(c, ch)] = channel.commit_pending
            out["next_tag"][(c, ch)] = channel.next_tag
            for u in channel.unacked:
                out["outstanding"][(c, ch, u.tag)] = True
                out["tag_queue"][(c, ch, u.tag)], out["tag_key"][(c, ch, u.tag)] = u.queue, u.key
            for kind, u in channel.tx_settles:
                out["tx_settled"][(c, ch, u.tag)] = True
                out["tag_queue"][(c, ch, u.tag)], out["tag_key"][(c, ch, u.tag)] = u.queue, u.key
                out["tx_settle_kind"][(c, ch, u.tag)] = kind
            for u in channel.unacked + tuple(u for _, u in channel.tx_settles):
                # The ghost inverse: the tag naming each copy (were two to name one copy, the last
                # would win, and copies_conserved would be false of the abstraction, as of the state).
                out["named_by_connection"][(u.queue, u.key)], out["named_by_channel"][(u.queue, u.key)] = c, ch
                out["named_by_tag"][(u.queue, u.key)] = u.tag
                if u.consumer:
                    out["delivered_to_consumer"][(c, ch, u.tag)] = True
            for k in channel.consumers:
                out["consumers"][(c, ch, k.tag)] = True
                out["consumer_no_ack"][(c, ch, k.tag)], out["consumer_limit"][(c, ch, k.tag)] = k.no_ack, k.limit
            out["prefetch"][(c, ch)], out["global_limit"][(c, ch)], out["volume"][(c, ch)] = \
                channel.prefetch, channel.global_limit, channel.volume
            out["qos_excess"][(c, ch)], out["qos_uncounted"][(c, ch)] = channel.qos_excess, channel.qos_uncounted
            # The ghost counters (prefetch_respected's counts): consumer deliveries outstanding, held
            # back, and per consumer tag (a former consumer's are marked -tag and counted by no tag).
            out["consumer_outstanding"][(c, ch)] = sum(1 for u in channel.unacked if u.consumer)
            out["consumer_held_back"][(c, ch)] = sum(1 for _, u in channel.tx_settles if u.consumer)
            for u in channel.unacked + tuple(u for _, u in channel.tx_settles):
                if u.consumer > 0:
                    out["consumer_deliveries"][(c, ch, u.consumer)] = out["consumer_deliveries"].get((c, ch, u.consumer), 0) + 1
    for q, queue in enumerate(state.queues):
        out["queue_exists"][(q,)] = queue.exists
        out["queue_durable"][(q,)] = queue.durable
        out["queue_owner"][(q,)] = queue.owner
        out["enqueued"][(q,)] = queue.enqueued
        out["born"][(q,)] = queue.born
        for i, e in enumerate(queue.ready):
            out["ready"][(q, e.key)] = True
            out["redelivered"][(q, e.key)] = e.redelivered
            for later in queue.ready[i + 1:]:
                out["ahead_in_queue"][(q, e.key, later.key)] = True
        for c, ch, k in queue.ring:
            out["in_round_robin"][(c, ch, k)] = True
    for q, key in state.delivered:
        out["ever_delivered"][(q, key)] = True
    for q, key, _ in state.disk:
        out["on_disk"][(q, key)] = True
    for c, conn in enumerate(state.conns):
        out["published"][(c,)] = conn.published
        for fifo in conn.to_broker:
            for frame in fifo:
                if frame[0] == BASIC_PUBLISH:
                    msg = message(frame[6])
                    out["publish_in_flight_twice"][msg] = out["publish_in_flight"].get(msg, False)
                    out["publish_in_flight"][msg] = True
        for ch, channel in enumerate(conn.channels, start=1):
            for pub in channel.tx_pubs:
                out["tx_held_twice"][message(pub[4])] = message(pub[4]) in out["tx_held_by_channel"]
                out["tx_held_by_channel"][message(pub[4])] = ch
    for msg in copy_messages(state):
        out["taken_by_queue"][message(msg)] = True
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
            out["dead_letter_target"][(queue.dead_letter - 1,)] = True
    for q, key, msg, persistent in carried:
        out["message_connection"][(q, key)], out["message_number"][(q, key)] = message(msg)
        out["persistent"][(q, key)] = bool(persistent)
    for msg in state.confirmed_msgs:
        out["message_acked"][message(msg)] = True
    for c, conn in enumerate(state.conns):
        for ch, channel in enumerate(conn.channels, start=1):
            for p in channel.unconfirmed:
                for w in p.waits:
                    # a copy holds up its own message's publish (a copy of another message in the
                    # waits would not count: unwritten_copies_hold_their_confirm asks for its own)
                    if (out["message_connection"].get(w), out["message_number"].get(w)) == message(p.msg):
                        out["holds_confirm"][w] = True
                if not p.nack:
                    out["unconfirmed_publish_channel"][message(p.msg)], out["unconfirmed_publish_seq"][message(p.msg)] = ch, p.seq
    for f in state.fates:
        if f[2] == FATE_LOST_CRASH:
            out["lost_in_crash"][(f[0], f[1])] = True
    revived = set(state.revived)
    for f in state.fates:
        if (f[0], f[1]) not in revived:
            out["gone_this_life"][(f[0], f[1])] = True
    for c, conn in enumerate(state.conns):
        for d in conn.auto:
            out["gone_this_life"][(d[2], d[3])] = True
            out["auto_in_flight_on"][(d[2], d[3])] = c + 1
    out["broker_up"] = state.broker_up
    out["channels_per_connection"] = nch
    return out


ARITY = {"broker_end_closed": 1, "channel_status": 2, "channel_mode": 2, "publish_seq": 2, "unconfirmed": 3, "confirmed": 3, "tx_holds_back": 2, "commit_pending": 2, "frames_to_broker": 2,
         "next_tag": 2, "outstanding": 3, "tx_settled": 3, "delivered_to_consumer": 3, "consumers": 3, "client_connection_status": 1, "connection_close_to_client": 1, "frames_to_client": 2, "channel_close_to_client": 2, "sent_after_close": 2,
         "view_status": 2, "view_last_tag": 2, "open_ok_to_client": 2, "older_frames_ahead": 2, "deliveries_to_client": 3, "open_to_broker": 2, "frame_ahead_of_open": 2, "frame_behind_open": 2, "other_frames_to_broker": 2, "view_mode": 2,
         "view_publish_count": 2, "view_confirmed": 3, "single_confirms_in_flight": 3, "multiple_confirm_in_flight": 2, "first_select_to_broker": 2, "publishes_behind_select": 2,
         "publishes_to_broker": 2, "queue_exists": 1,
         "queue_durable": 1, "queue_owner": 1, "in_round_robin": 3, "ready": 2, "ahead_in_queue": 3, "redelivered": 2, "ever_delivered": 2, "enqueued": 1, "born": 1, "on_disk": 2,
         "tag_queue": 3, "tag_key": 3,
         "tx_settle_kind": 3, "named_by_connection": 2, "named_by_channel": 2, "named_by_tag": 2, "published": 1, "publish_in_flight": 2, "tx_held_by_channel": 2, "publish_in_flight_twice": 2, "tx_held_twice": 2, "taken_by_queue": 2,
         "prefetch": 2, "global_limit": 2, "volume": 2, "qos_excess": 2, "qos_uncounted": 2, "consumer_outstanding": 2, "consumer_held_back": 2, "consumer_deliveries": 3, "consumer_no_ack": 3, "consumer_limit": 3,
         "message_connection": 2, "message_number": 2, "persistent": 2, "holds_confirm": 2, "message_acked": 2, "unconfirmed_publish_channel": 2, "unconfirmed_publish_seq": 2, "dead_letter_target": 1, "lost_in_crash": 2, "gone_this_life": 2,
         "auto_in_flight_on": 2}


def abstract(state) -> Z3State:
    """The abstraction function: a spec ``State`` as a concrete Z3 state of this family."""
    values = project(state)
    return Z3State(broker_up=z3.BoolVal(values["broker_up"]), channels_per_connection=z3.IntVal(values["channels_per_connection"]),
                   **{name: _array(name, ARITY[name], values[name]) for name in ARITY})
