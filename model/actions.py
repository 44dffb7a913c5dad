"""One Z3 relation per spec action (``spec.actions``), with the same name: its guard, mirroring the
action's precondition (``spec.machine.PRECONDITIONS``), and its effect on the state
(``model.state``: the channel-modes and deliveries families), mirroring the spec's effect.

Each relation is a function ``(x, a, o) -> Transition``: ``x`` the state before, ``a`` the action's
fields as Z3 terms, ``o`` its oracles: the facts of the spec state outside this family that the guard
or the effect reads (which frame is taken, whether a tag is outstanding, whether the client's view
lets it send), declared per action in ``model.oracles``; the agreement check (``model.agreement``) reads
them from the concrete state, the proofs leave them free, so a proof holds whatever they are. The state
after is a function of (x, a, o): every relation is deterministic, as ``spec.machine.step`` is.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import z3

from rabbitproof.spec import actions as A
from rabbitproof.spec.frames import (
    BASIC_ACK, BASIC_CANCEL, BASIC_CONSUME, BASIC_DELIVER, BASIC_GET, BASIC_GET_OK, BASIC_NACK, BASIC_PUBLISH,
    BASIC_QOS, BASIC_RECOVER, BASIC_REJECT, CHANNEL_CLOSE, CHANNEL_CLOSE_OK, CHANNEL_OPEN, CHANNEL_OPEN_OK,
    CONFIRM_SELECT, CONNECTION_CLOSE, CONNECTION_CLOSE_OK, DEFAULT_EXCHANGE, FANOUT_EXCHANGE, QUEUE_BIND,
    QUEUE_DECLARE, QUEUE_DELETE, QUEUE_PURGE, TX_COMMIT, TX_ROLLBACK, TX_SELECT,
)
from rabbitproof.spec.state import (
    C_CLOSED, C_CLOSING, C_OPEN, C_OPENING, CH_CLOSED, CH_CLOSING, CH_ENDING, CH_OPEN, CONN_CLOSING, CONN_DOWN,
    CONN_GONE, CONN_UP, MODE_CONFIRM, MODE_NONE, MODE_TX, SETTLE_ACK, SETTLE_DROP, SETTLE_REQUEUE,
)

from . import oracles
from .oracles import CHANNEL_ERR, CONNECTION_ERR, OK
from .state import ARITY, BOOL, CONNECTION, DEFAULTS, FIELDS, INT, MESSAGE, Z3State



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


_Q = z3.Int("q_")


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
    next tag if it keeps any (``kept`` is then (keeps, tags): whether it keeps one, and which). Closing
    (any status but CH_OPEN), it leaves its consumers' round-robins, requeues every outstanding or
    held-back delivery it does not keep (RQ-4) and loses the automatic-mode delivery a queue was sending
    it (storage.lose_sent, AM-2); opening a closed channel discards nothing it could hold."""
    if kept is None:
        outstanding, next_tag = _no_tags(x.outstanding, c, ch), z3.Store(x.next_tag, c, ch, 1)
    else:
        keeps, tags = kept
        outstanding = _lam3(lambda i, j, k: z3.If(z3.And(i == c, j == ch),
                                                  z3.And(keeps, z3.Or(x.outstanding[i, j, k], x.tx_settled[i, j, k]),
                                                         tags[k]),
                                                  x.outstanding[i, j, k]))
        next_tag = z3.Store(x.next_tag, c, ch, z3.If(keeps, x.next_tag[c, ch], 1))
    y = x.replace(
        channel_status=z3.Store(x.channel_status, c, ch, status),
        channel_mode=z3.Store(x.channel_mode, c, ch, MODE_NONE),
        publish_seq=z3.Store(x.publish_seq, c, ch, 0),
        unconfirmed=_lam3(lambda i, j, k: z3.And(x.unconfirmed[i, j, k], z3.Or(i != c, j != ch))),
        confirmed=_lam3(lambda i, j, k: z3.And(x.confirmed[i, j, k], z3.Or(i != c, j != ch))),
        tx_holds_back=z3.Store(x.tx_holds_back, c, ch, False), commit_pending=z3.Store(x.commit_pending, c, ch, False),
        next_tag=next_tag, outstanding=outstanding, tx_settled=_no_tags(x.tx_settled, c, ch),
        delivered_to_consumer=_no_tags(x.delivered_to_consumer, c, ch),
        consumers=_no_tags(x.consumers, c, ch), tx_held_by_channel=_release(x.tx_held_by_channel, c, ch),
        tx_held_twice=_release_twice(x, c, ch),
        **_clear_counts(x, lambda i, j: z3.And(i == c, j == ch)),
        **_drop_pending(x, lambda i, j: z3.And(i == c, j == ch)))
    if status == CH_OPEN:
        return y
    keep = (lambda t: z3.And(kept[0], kept[1][t])) if kept is not None else (lambda t: z3.BoolVal(False))
    y = y.replace(in_round_robin=_lam3(lambda i, j, k: z3.And(x.in_round_robin[i, j, k],
                                                              z3.Not(z3.And(i == c, j == ch, x.consumers[i, j, k])))),
                  **_lose_sent(x, lambda q: z3.And(x.sending_connection[q] == c, x.sending_channel[q] == ch)))
    return _requeue(y,
                    _named_by(x, c, ch,
                              lambda t: z3.And(z3.Or(x.outstanding[c, ch, t], x.tx_settled[c, ch, t]),
                                               z3.Not(keep(t)))))


def _release(held_by: z3.ArrayRef, c, ch) -> z3.ArrayRef:
    """The messages channel (c, ch) held back are held back no more (TX-2: dropped, or committed)."""
    return _lam2(lambda i, n: z3.If(z3.And(i == c, held_by[i, n] == ch), 0, held_by[i, n]))


def _release_twice(x: Z3State, c, ch) -> z3.ArrayRef:
    """``tx_held_twice`` once channel (c, ch) holds nothing back. Exact while no message is held back twice
    (publishes_in_flight_fresh, proved): the spec reaches a second hold of one message only from a
    state with one, where this and the spec agree."""
    return _lam2(lambda i, n: z3.And(x.tx_held_twice[i, n], z3.Not(z3.And(i == c, x.tx_held_by_channel[i, n] == ch))))


def _lose_sent(x: Z3State, which: Callable) -> dict:
    """storage.lose_sent: the automatic-mode deliveries the queues ``which(q)`` names were sending
    (``sending_key``, PF-3) are lost on their way (AM-2: their fate is sure, so the ghost
    ``gone_this_life`` already has them); those queues send nothing now."""
    def lost(q):
        return z3.And(x.sending_key[q] != 0, which(q))
    return {name: z3.Lambda([_Q], z3.If(lost(_Q), DEFAULTS[name], getattr(x, name)[_Q])) for name in _SENDING}


def _drop_pending(x: Z3State, mine: Callable) -> dict:
    """The unconfirmed publishes of the channels ``mine(i, j)`` names are gone (PC-9: never confirmed):
    their messages have no publish left to ack, and no copy holds them up (a copy holds up its own
    message's publish, on its message's connection)."""
    def gone(i, n):
        return mine(i, x.unconfirmed_publish_channel[i, n])
    return {"unconfirmed_publish_channel": _lam2(lambda i, n: z3.If(gone(i, n), 0,
                                                                    x.unconfirmed_publish_channel[i, n])),
            "unconfirmed_publish_seq": _lam2(lambda i, n: z3.If(gone(i, n), 0, x.unconfirmed_publish_seq[i, n])),
            "holds_confirm": _lam_qk(lambda q, key: z3.And(x.holds_confirm[q, key],
                                                           z3.Not(gone(x.message_connection[q, key],
                                                                       x.message_number[q, key]))))}


def _no_tags(arr: z3.ArrayRef, c, ch) -> z3.ArrayRef:
    """A per-tag array with channel (c, ch) emptied."""
    return _lam3(lambda i, j, k: z3.And(arr[i, j, k], z3.Or(i != c, j != ch)))


# The delivery a queue is sending (model.state), cleared to "none" together.
_SENDING = ("sending_key", "sending_connection", "sending_channel", "sending_consumer")

_CHANNEL_COUNTS = ("prefetch", "global_limit", "volume", "qos_excess", "qos_uncounted", "consumer_outstanding",
                   "consumer_held_back")


def _clear_counts(x: Z3State, mine: Callable) -> dict:
    """The prefetch fields of the channels ``mine(i, j)`` names as a clean channel's: no limits, no
    counts, no consumer (spec.state.CLOSED_CHANNEL, NEW_CHANNEL)."""
    out = {name: _lam2(lambda i, j, arr=getattr(x, name): z3.If(mine(i, j), 0, arr[i, j])) for name in _CHANNEL_COUNTS}
    out["consumer_deliveries"] = _lam3(lambda i, j, k: z3.If(mine(i, j), 0, x.consumer_deliveries[i, j, k]))
    out["consumer_limit"] = _lam3(lambda i, j, k: z3.If(mine(i, j), 0, x.consumer_limit[i, j, k]))
    out["consumer_no_ack"] = _lam3(lambda i, j, k: z3.And(x.consumer_no_ack[i, j, k], z3.Not(mine(i, j))))
    return out


def _bounded(v, lo, hi):
    """``v`` kept within lo..hi (see ``_fewer``)."""
    return z3.If(v < lo, lo, z3.If(v > hi, hi, v))


def _fewer(x: Z3State, c, ch, dk) -> z3.ArrayRef:
    """Each consumer k of channel (c, ch) has ``dk[k]`` fewer deliveries (an oracle: how many of the
    settled ones were k's, a cardinality outside the array fragment). The oracle is taken within
    0..consumer_deliveries, which every settlement of the spec meets (agreement checks the counter after
    it), so the proofs know a settlement never raises a consumer's count nor takes it below 0."""
    return _lam3(lambda i, j, k: z3.If(z3.And(i == c, j == ch),
                                       x.consumer_deliveries[i, j, k] - _bounded(dk[k], 0,
                                                                                 x.consumer_deliveries[i, j, k]),
                                       x.consumer_deliveries[i, j, k]))


def _resumes_first(x: Z3State, c, ch, volume_after: z3.ArrayRef) -> z3.BoolRef:
    """spec.interleavings.resumes_first: channel (c, ch), outside tx mode, has a global limit
    that its volume reached before a settlement and is below after it (``volume_after``): the requeue
    reaches its queues behind the limiter's resume (PF-2, PF-3)."""
    limit = x.global_limit[c, ch]
    return z3.And(limit != 0, x.channel_mode[c, ch] != MODE_TX, x.volume[c, ch] >= limit,
                  volume_after[c, ch] < limit)


def _count_off(x: Z3State, c, ch, n):
    """broker.released with broker.count_off: a global limit's volume takes ``n`` consumer deliveries
    off, a volume of 0 stays 0 (PF-3); without a global limit nothing changes."""
    volume = x.volume[c, ch]
    return z3.Store(x.volume, c, ch, z3.If(x.global_limit[c, ch] != 0, z3.If(volume == 0, 0, volume - n), volume))


# The lifecycle flags of the frames in flight to the broker, and of both directions (model.state).
_TO_BROKER = ("open_to_broker", "frame_ahead_of_open", "frame_behind_open", "other_frames_to_broker")
_LIFECYCLE = ("open_ok_to_client", "older_frames_ahead") + _TO_BROKER
# The counts of the client's view and of the frames in flight that a reset sets to 0 (model.state).
_VIEW_COUNTS = ("view_mode", "view_publish_count", "multiple_confirm_in_flight", "first_select_to_broker",
                "publishes_behind_select", "publishes_to_broker")


def close_connection(x: Z3State, c) -> Z3State:
    """storage.close_connection: every channel of c that is not closed is closed (what a queue was
    sending one of them is lost: storage.lose_sent), the broker's end is closed, and frames in flight to
    the broker are dropped; then c's exclusive queues are deleted (what they were sending is lost too)."""
    def mine(i, j):
        return z3.And(i == c, x.channel_status[i, j] != CH_CLOSED)
    j, t = z3.Ints("j_ t_")

    def back(q, key):                   # RQ-4: what every channel closed here held is requeued
        return z3.Exists([j, t], z3.And(mine(c, j), z3.Or(x.outstanding[c, j, t], x.tx_settled[c, j, t]),
                                        x.tag_queue[c, j, t] == q,
                                        x.tag_key[c, j, t] == key))
    y = x.replace(
        in_round_robin=_lam3(lambda i, j, k: z3.And(x.in_round_robin[i, j, k],
                                                    z3.Not(z3.And(mine(i, j), x.consumers[i, j, k])))),
        channel_status=_lam2(lambda i, j: z3.If(mine(i, j), CH_CLOSED, x.channel_status[i, j])),
        channel_mode=_lam2(lambda i, j: z3.If(mine(i, j), MODE_NONE, x.channel_mode[i, j])),
        publish_seq=_lam2(lambda i, j: z3.If(mine(i, j), 0, x.publish_seq[i, j])),
        unconfirmed=_lam3(lambda i, j, k: z3.And(x.unconfirmed[i, j, k], z3.Not(mine(i, j)))),
        confirmed=_lam3(lambda i, j, k: z3.And(x.confirmed[i, j, k], z3.Not(mine(i, j)))),
        tx_holds_back=_lam2(lambda i, j: z3.And(x.tx_holds_back[i, j], z3.Not(mine(i, j)))),
        commit_pending=_lam2(lambda i, j: z3.And(x.commit_pending[i, j], z3.Not(mine(i, j)))),
        next_tag=_lam2(lambda i, j: z3.If(mine(i, j), 1, x.next_tag[i, j])),
        outstanding=_lam3(lambda i, j, k: z3.And(x.outstanding[i, j, k], z3.Not(mine(i, j)))),
        tx_settled=_lam3(lambda i, j, k: z3.And(x.tx_settled[i, j, k], z3.Not(mine(i, j)))),
        delivered_to_consumer=_lam3(lambda i, j, k: z3.And(x.delivered_to_consumer[i, j, k], z3.Not(mine(i, j)))),
        consumers=_lam3(lambda i, j, k: z3.And(x.consumers[i, j, k], z3.Not(mine(i, j)))),
        tx_held_by_channel=_lam2(lambda i, n: z3.If(mine(i, x.tx_held_by_channel[i, n]), 0,
                                                    x.tx_held_by_channel[i, n])),
        tx_held_twice=_lam2(lambda i, n: z3.And(x.tx_held_twice[i, n], z3.Not(mine(i, x.tx_held_by_channel[i, n])))),
        **_clear_counts(x, mine),
        **_drop_pending(x, mine),
        broker_end_closed=z3.Store(x.broker_end_closed, c, True),
        frames_to_broker=_lam2(lambda i, j: z3.If(i == c, 0, x.frames_to_broker[i, j])),
        publish_in_flight=_lam2(lambda i, n: z3.And(x.publish_in_flight[i, n], i != c)),
        **{name: _lam2(lambda i, j, arr=getattr(x, name): z3.And(arr[i, j], i != c)) for name in _TO_BROKER},
        **{name: _lam2(lambda i, j, arr=getattr(x, name): z3.If(i == c, 0,
                                                                arr[i, j])) for name in ("first_select_to_broker",
                                                                                         "publishes_behind_select",
                                                                                         "publishes_to_broker")},
        publish_in_flight_twice=_lam2(lambda i, n: z3.And(x.publish_in_flight_twice[i, n], i != c)),
        **_lose_sent(x, lambda q: z3.And(x.sending_connection[q] == c, mine(c, x.sending_channel[q]))))
    y = _requeue(y, back)
    return y.replace(**_delete_queues(y, lambda q: y.queue_owner[q] == c + 1))


def _delete_queues(x: Z3State, which: Callable) -> dict:
    """storage.delete_queue for every existing queue q that ``which(q)`` names: it no longer exists,
    is not durable and has no owner (DU-4); a delivery it was still sending is lost (storage.lose_sent:
    a queue.delete has the channel number it first, ``BrokerTakeFrame``; the delete of a closing
    connection's exclusive queue does not)."""
    q = z3.Int("q_")

    def gone(i):
        return z3.And(x.queue_exists[i], which(i))
    return {"queue_exists": z3.Lambda([q], z3.And(x.queue_exists[q], z3.Not(gone(q)))),
            "queue_durable": z3.Lambda([q], z3.And(x.queue_durable[q], z3.Not(gone(q)))),
            "queue_owner": z3.Lambda([q], z3.If(gone(q), 0, x.queue_owner[q])),
            **_emptied(x, gone), "on_disk": _lam_qk(lambda i, key: z3.And(x.on_disk[i, key], z3.Not(gone(i)))),
            **_lose_sent(x, gone)}


# ---------------------------------------------------------------- copies (spec.storage)

def _lam_qk(fn: Callable) -> z3.ArrayRef:
    q, key = z3.Ints("q_ key_")
    return z3.Lambda([q, key], fn(q, key))


def _lam_qab(fn: Callable) -> z3.ArrayRef:
    q, a, b = z3.Ints("q_ a_ b_")
    return z3.Lambda([q, a, b], fn(q, a, b))


def _ahead_of_kept(x: Z3State, kept: Callable) -> z3.ArrayRef:
    """The order of a queue's ready copies once only those ``kept(q, key)`` names stay: removing a
    copy moves none of the others (broker.hand_over takes the head; a purge, a delete, a crash or a
    failing queue takes others too)."""
    return _lam_qab(lambda q, a, b: z3.And(x.ahead_in_queue[q, a, b], kept(q, a), kept(q, b)))


def is_head(x: Z3State, q, key) -> z3.BoolRef:
    """Copy ``key`` is the head of queue q: ready, and no ready copy is ahead of it (queue.ready[0])."""
    j = z3.Int("j_")
    return z3.And(x.ready[q, key], z3.ForAll([j], z3.Not(x.ahead_in_queue[q, j, key])))


def is_next(x: Z3State, q, key) -> z3.BoolRef:
    """Copy ``key`` is the one a delivery from queue q takes (storage.next_ready): ready and not away, and
    no ready copy that is not away is ahead of it; the head when no copy is away."""
    j = z3.Int("j_")
    return z3.And(x.ready[q, key], z3.Not(x.away[q, key]),
                  z3.ForAll([j], z3.Not(z3.And(x.ahead_in_queue[q, j, key], z3.Not(x.away[q, j])))))


def _emptied(x: Z3State, which: Callable, keep_away: bool = False) -> dict:
    """The ready copies of the queues ``which(q)`` names are gone (queue.purge, queue.delete); with
    ``keep_away``, but those away behind a resume, which reach the queue after (a purge: spec.interleavings)."""
    def gone(q, key):
        return z3.And(which(q), z3.Not(x.away[q, key])) if keep_away else which(q)
    return {"ready": _lam_qk(lambda q, key: z3.And(x.ready[q, key], z3.Not(gone(q, key)))),
            "ahead_in_queue": _lam_qab(lambda q, a, b: z3.And(x.ahead_in_queue[q, a, b], z3.Not(gone(q, a)),
                                                              z3.Not(gone(q, b)))),
            "redelivered": _lam_qk(lambda q, key: z3.And(x.redelivered[q, key], z3.Not(gone(q, key)))),
            "away": _lam_qk(lambda q, key: z3.And(x.away[q, key], z3.Not(gone(q, key)))),
            # they hold up no confirm any more (storage.forget_waits)
            "holds_confirm": _lam_qk(lambda q, key: z3.And(x.holds_confirm[q, key],
                                                           z3.Not(z3.And(x.ready[q, key], gone(q, key)))))}


def _named_by(x: Z3State, c, ch, which: Callable) -> Callable:
    """The copies the tags ``which(t)`` of channel (c, ch) name, as a predicate of (queue, key)."""
    t = z3.Int("t_")
    return lambda q, key: z3.Exists([t], z3.And(which(t), x.tag_queue[c, ch, t] == q, x.tag_key[c, ch, t] == key))


def _requeue(x: Z3State, back: Callable, away=False) -> Z3State:
    """storage.requeue: the copies ``back(q, key)`` names are ready again at their place, marked
    redelivered (RQ-1, RQ-2, RQ-6), and away when ``away`` holds (behind a resume: spec.interleavings); a
    copy whose queue no longer exists, or was deleted and declared again since (storage.orphaned: its key
    is not above ``born``), is gone instead."""
    def b(q, key):
        return z3.And(x.queue_exists[q], x.born[q] < key, back(q, key))

    def orphaned(q, key):       # gone with its queue: it holds up no confirm any more
        return z3.And(back(q, key), z3.Not(z3.And(x.queue_exists[q], x.born[q] < key)))

    def ready(q, key):
        return z3.Or(x.ready[q, key], b(q, key))

    def ahead(q, i, j):         # storage.requeue_position: a copy back goes after the lower keys, before the higher
        return z3.If(z3.And(x.ready[q, i], x.ready[q, j]), x.ahead_in_queue[q, i, j],
                     z3.And(ready(q, i), ready(q, j), i < j))
    return x.replace(ready=_lam_qk(ready), ahead_in_queue=_lam_qab(ahead),
                     redelivered=_lam_qk(lambda q, key: z3.Or(x.redelivered[q, key], b(q, key))),
                     away=_lam_qk(lambda q, key: z3.If(b(q, key), away, x.away[q, key])),
                     holds_confirm=_lam_qk(lambda q, key: z3.And(x.holds_confirm[q, key], z3.Not(orphaned(q, key)))))


def _new_copy(x: Z3State, added, q, key) -> z3.BoolRef:
    """Key ``key`` of queue q is one of the ``added[q]`` copies an enqueue adds (``_enqueue``)."""
    return z3.And(x.enqueued[q] < key, key <= x.enqueued[q] + z3.If(added[q] > 0, added[q], 0))


def _enqueue(x: Z3State, added, msg_c: Callable, msg_n: Callable, persistent: Callable, holds: Callable) -> Z3State:
    """storage.enqueue ``added[q]`` times into each queue q (publishes, a commit's publishes, copies
    dead-lettered into q): new copies at the tail, keys enqueued + 1 .. enqueued + added, not redelivered (RQ-1).
    Each new copy (q, key) carries message (msg_c, msg_n)(q, key), is persistent when ``persistent``
    and holds up its publish's confirm when ``holds`` (PC-5: a confirm-mode publish's persistent copy
    in a durable queue waits for the disk)."""
    def n(q):
        return z3.If(added[q] > 0, added[q], 0)

    def new(q, key):
        return _new_copy(x, added, q, key)
    q = z3.Int("q_")

    def put(arr, value):
        return _lam_qk(lambda q, key: z3.If(new(q, key), value(q, key), arr[q, key]))
    def ahead(q, i, j):         # at the tail: behind every ready copy, and behind the new ones of lower key
        return z3.Or(x.ahead_in_queue[q, i, j], z3.And(new(q, j), z3.Or(x.ready[q, i], z3.And(new(q, i), i < j))))
    return x.replace(ready=_lam_qk(lambda q, key: z3.Or(x.ready[q, key], new(q, key))), ahead_in_queue=_lam_qab(ahead),
                     redelivered=_lam_qk(lambda q, key: z3.And(x.redelivered[q, key], z3.Not(new(q, key)))),
                     away=_lam_qk(lambda q, key: z3.And(x.away[q, key], z3.Not(new(q, key)))),
                     enqueued=z3.Lambda([q], x.enqueued[q] + n(q)),
                     message_connection=put(x.message_connection, msg_c), message_number=put(x.message_number, msg_n),
                     persistent=put(x.persistent, persistent), holds_confirm=put(x.holds_confirm, holds))


def _forget(x: Z3State) -> Z3State:
    """A tag neither outstanding nor held back names no copy and no settlement (the spec drops the
    delivery with its tag), and a copy no live tag names has no ghost inverse."""
    def named(i, j, t):
        return z3.Or(x.outstanding[i, j, t], x.tx_settled[i, j, t])
    def back(q, key):                   # the tag the ghost inverse gives still names the copy
        c, ch, t = x.named_by_connection[q, key], x.named_by_channel[q, key], x.named_by_tag[q, key]
        return z3.And(named(c, ch, t), x.tag_queue[c, ch, t] == q, x.tag_key[c, ch, t] == key)
    return x.replace(tag_queue=_lam3(lambda i, j, t: z3.If(named(i, j, t), x.tag_queue[i, j, t], -1)),
                     tag_key=_lam3(lambda i, j, t: z3.If(named(i, j, t), x.tag_key[i, j, t], 0)),
                     tx_settle_kind=_lam3(lambda i, j, t: z3.If(x.tx_settled[i, j, t], x.tx_settle_kind[i, j, t], -1)),
                     named_by_connection=_lam_qk(lambda q, key: z3.If(back(q, key), x.named_by_connection[q, key], -1)),
                     named_by_channel=_lam_qk(lambda q, key: z3.If(back(q, key), x.named_by_channel[q, key], -1)),
                     named_by_tag=_lam_qk(lambda q, key: z3.If(back(q, key), x.named_by_tag[q, key], 0)))


def _connection_error(x: Z3State, c) -> Z3State:
    """broker.connection_error (and a connection.close taken): the connection closes, and
    connection.close (or its close-ok) goes out on channel 0."""
    x = close_connection(x, c)
    return x.replace(connection_close_to_client=z3.Store(x.connection_close_to_client, c, True),
                     frames_to_client=z3.Store(x.frames_to_client, c, 0, True))


def reset_connection(x: Z3State, c, channels_open, conn_status=CONN_DOWN) -> Z3State:
    """faults.reset_connection: nothing in flight either way, the broker's end open, the client's view
    ``status``, every channel of c clean, open (channels 1..channels_per_connection) when
    ``channels_open`` else closed. A delivery a queue was sending one of c's channels is lost with them
    (storage.lose_sent). In the spec none is left by then (c's channels were closed first, which lost
    it, or it moved with a vanished client; sent_to_open_channels), so this changes nothing there; it
    keeps the relation within that helper from any state (ClientConnect's oracle ``down`` says nothing
    of c's channels)."""
    def chan(i, j):
        return i == c
    status = z3.If(channels_open, CH_OPEN, CH_CLOSED)
    return x.replace(
        channel_status=_lam2(lambda i, j: z3.If(chan(i, j),
                                                z3.If(z3.And(1 <= j, j <= x.channels_per_connection), status,
                                                      CH_CLOSED),
                                                x.channel_status[i, j])),
        channel_mode=_lam2(lambda i, j: z3.If(chan(i, j), MODE_NONE, x.channel_mode[i, j])),
        publish_seq=_lam2(lambda i, j: z3.If(chan(i, j), 0, x.publish_seq[i, j])),
        unconfirmed=_lam3(lambda i, j, k: z3.And(x.unconfirmed[i, j, k], i != c)),
        confirmed=_lam3(lambda i, j, k: z3.And(x.confirmed[i, j, k], i != c)),
        tx_holds_back=_lam2(lambda i, j: z3.And(x.tx_holds_back[i, j], i != c)),
        commit_pending=_lam2(lambda i, j: z3.And(x.commit_pending[i, j], i != c)),
        next_tag=_lam2(lambda i, j: z3.If(chan(i, j), 1, x.next_tag[i, j])),
        outstanding=_lam3(lambda i, j, k: z3.And(x.outstanding[i, j, k], i != c)),
        tx_settled=_lam3(lambda i, j, k: z3.And(x.tx_settled[i, j, k], i != c)),
        delivered_to_consumer=_lam3(lambda i, j, k: z3.And(x.delivered_to_consumer[i, j, k], i != c)),
        consumers=_lam3(lambda i, j, k: z3.And(x.consumers[i, j, k], i != c)),
        tx_held_by_channel=_lam2(lambda i, n: z3.If(i == c, 0, x.tx_held_by_channel[i, n])),
        publish_in_flight=_lam2(lambda i, n: z3.And(x.publish_in_flight[i, n], i != c)),
        tx_held_twice=_lam2(lambda i, n: z3.And(x.tx_held_twice[i, n], i != c)),
        publish_in_flight_twice=_lam2(lambda i, n: z3.And(x.publish_in_flight_twice[i, n], i != c)),
        **_clear_counts(x, lambda i, j: i == c), **_drop_pending(x, lambda i, j: i == c),
        broker_end_closed=z3.Store(x.broker_end_closed, c, False),
        frames_to_broker=_lam2(lambda i, j: z3.If(i == c, 0, x.frames_to_broker[i, j])),
        client_connection_status=z3.Store(x.client_connection_status, c, conn_status),
        connection_close_to_client=z3.Store(x.connection_close_to_client, c, False),
        frames_to_client=_lam2(lambda i, j: z3.And(x.frames_to_client[i, j], i != c)),
        channel_close_to_client=_lam2(lambda i, j: z3.And(x.channel_close_to_client[i, j], i != c)),
        sent_after_close=_lam2(lambda i, j: z3.And(x.sent_after_close[i, j], i != c)),
        view_status=_lam2(lambda i, j: z3.If(chan(i, j),
                                             z3.If(z3.And(channels_open, 1 <= j, j <= x.channels_per_connection),
                                                   C_OPEN, C_CLOSED),
                                             x.view_status[i, j])),
        view_last_tag=_lam2(lambda i, j: z3.If(chan(i, j), 0, x.view_last_tag[i, j])),
        deliveries_to_client=_lam3(lambda i, j, t: z3.And(x.deliveries_to_client[i, j, t], i != c)),
        **{name: _lam2(lambda i, j, arr=getattr(x, name): z3.And(arr[i, j], i != c)) for name in _LIFECYCLE},
        **{name: _lam2(lambda i, j, arr=getattr(x, name): z3.If(i == c, 0, arr[i, j])) for name in _VIEW_COUNTS},
        view_confirmed=_lam3(lambda i, j, t: z3.And(x.view_confirmed[i, j, t], i != c)),
        single_confirms_in_flight=_lam3(lambda i, j, t: z3.And(x.single_confirms_in_flight[i, j, t], i != c)),
        auto_in_flight_on=_lam_qk(lambda q, key: z3.If(x.auto_in_flight_on[q, key] == c + 1, 0,
                                                       x.auto_in_flight_on[q, key])),   # lost in flight (AM-2)
        **_lose_sent(x, lambda q: x.sending_connection[q] == c))


# What a client writes, for the flags of the frames in flight to the broker (spec.properties.opens_in_flight).
CLOSE_OK_FRAME, OPEN_FRAME, OTHER_FRAME = "close-ok", "open", "other"


def _write(x: Z3State, c, ch, kind: str = CLOSE_OK_FRAME) -> Z3State:
    """The client writes one frame on channel ch of connection c (client.write): a channel.close-ok,
    a channel.open (the first one in flight has the frames in flight ahead of it), or another frame
    (behind the first channel.open in flight, if any)."""
    x = x.replace(frames_to_broker=z3.Store(x.frames_to_broker, c, ch, x.frames_to_broker[c, ch] + 1))
    opened = x.open_to_broker[c, ch]
    if kind == OPEN_FRAME:
        return x.replace(open_to_broker=z3.Store(x.open_to_broker, c, ch, True),
                         frame_ahead_of_open=z3.Store(x.frame_ahead_of_open, c, ch,
                                                      z3.If(opened, x.frame_ahead_of_open[c, ch],
                                                            x.other_frames_to_broker[c, ch])),
                         frame_behind_open=z3.Store(x.frame_behind_open, c, ch,
                                                    z3.And(opened, x.frame_behind_open[c, ch])))
    if kind == OTHER_FRAME:
        return x.replace(other_frames_to_broker=z3.Store(x.other_frames_to_broker, c, ch, True),
                         frame_behind_open=z3.Store(x.frame_behind_open, c, ch,
                                                    z3.Or(x.frame_behind_open[c, ch], opened)))
    return x


def _broker_end_open(x: Z3State, c) -> z3.BoolRef:
    return z3.And(x.broker_up, z3.Not(x.broker_end_closed[c]))


def _channel_open(x: Z3State, c, ch) -> z3.BoolRef:
    return z3.And(_broker_end_open(x, c), 1 <= ch, ch <= x.channels_per_connection, x.channel_status[c, ch] == CH_OPEN)


# ---------------------------------------------------------------- broker actions (spec.broker)

def _settled(x: Z3State, c, ch, tag, multiple):
    """The outstanding tags a basic.ack / nack / reject settles (broker.settled_tags: ACK-1..3), as a
    predicate of the tag."""
    return lambda k: z3.And(x.outstanding[c, ch, k], z3.If(multiple, z3.Or(tag == 0, k <= tag), k == tag))


def _hand_over(x: Z3State, c, ch, no_ack, by_consumer, q, key, ctag=0) -> Z3State:
    """The ready copy ``key`` of queue q leaves it for channel (c, ch) with the channel's next tag
    (broker.hand_over, DT-1, DT-2): outstanding in manual mode (AM-3), the tag naming the copy, in
    flight and gone in automatic mode (AM-2); a consumer's (``by_consumer``) or a basic.get's. The
    copy is marked delivered (RQ-2); in manual mode its ghost inverse names the tag. A manual-mode
    delivery to consumer ``ctag`` counts for it and for the channel, and the global limit counts it (PF-3)."""
    tag = x.next_tag[c, ch]
    manual = z3.Not(no_ack)
    out = z3.Not(_gone(x, c))            # to a vanished client: lost as it is sent (automatic: its fate)
    counted = z3.And(manual, by_consumer)
    one = z3.If(counted, 1, 0)
    return x.replace(consumer_outstanding=z3.Store(x.consumer_outstanding, c, ch, x.consumer_outstanding[c, ch] + one),
                     consumer_deliveries=z3.Store(x.consumer_deliveries, c, ch, ctag,
                                                  x.consumer_deliveries[c, ch, ctag] + one),
                     volume=z3.Store(x.volume, c, ch, x.volume[c, ch] + z3.If(x.global_limit[c, ch] != 0, one, 0)),
                     next_tag=z3.Store(x.next_tag, c, ch, tag + 1),
                     # basic.deliver or get-ok goes out
                     deliveries_to_client=z3.Store(x.deliveries_to_client, c, ch, tag,
                                                   z3.Or(x.deliveries_to_client[c, ch, tag], out)),
                     outstanding=z3.Store(x.outstanding, c, ch, tag, z3.Or(x.outstanding[c, ch, tag], manual)),
                     delivered_to_consumer=z3.Store(x.delivered_to_consumer, c, ch, tag,
                                                    z3.Or(x.delivered_to_consumer[c, ch, tag],
                                                          z3.And(manual, by_consumer))),
                     tag_queue=z3.Store(x.tag_queue, c, ch, tag, z3.If(manual, q, x.tag_queue[c, ch, tag])),
                     tag_key=z3.Store(x.tag_key, c, ch, tag, z3.If(manual, key, x.tag_key[c, ch, tag])),
                     named_by_connection=z3.Store(x.named_by_connection, q, key,
                                                  z3.If(manual, c, x.named_by_connection[q, key])),
                     named_by_channel=z3.Store(x.named_by_channel, q, key,
                                               z3.If(manual, ch, x.named_by_channel[q, key])),
                     named_by_tag=z3.Store(x.named_by_tag, q, key, z3.If(manual, tag, x.named_by_tag[q, key])),
                     ready=z3.Store(x.ready, q, key, False), redelivered=z3.Store(x.redelivered, q, key, False),
                     away=z3.Store(x.away, q, key, False),
                     ahead_in_queue=_ahead_of_kept(x, lambda i, j: z3.Not(z3.And(i == q, j == key))),
                     ever_delivered=z3.Store(x.ever_delivered, q, key, True),
                     auto_in_flight_on=z3.Store(x.auto_in_flight_on, q, key,
                                                z3.If(z3.Or(manual, z3.Not(out)), x.auto_in_flight_on[q, key],
                                                      c + 1)),   # in flight (AM-2)
                     holds_confirm=z3.Store(x.holds_confirm, q, key,
                                            z3.And(x.holds_confirm[q, key], manual)))   # automatic: gone


def _unhold(x: Z3State, gone: Callable) -> z3.ArrayRef:
    """The copies ``gone(q, key)`` names (acked, dropped or dead-lettered) hold up no confirm any more."""
    return _lam_qk(lambda q, key: z3.And(x.holds_confirm[q, key], z3.Not(gone(q, key))))


def _drop_tags(arr: z3.ArrayRef, c, ch, gone: Callable) -> z3.ArrayRef:
    """A per-tag array without the tags of channel (c, ch) that ``gone`` names."""
    return _lam3(lambda i, j, t: z3.And(arr[i, j, t], z3.Not(z3.And(i == c, j == ch, gone(t)))))


def BrokerTakeFrame(x: Z3State, a: Terms, o: Terms) -> Transition:
    """The broker takes the oldest frame of channel ch and acts on it (broker.take_frame). The frame (its
    method and fields), the broker's answer where queues or tags decide it (``o.verdict``) and the counts
    a settlement or basic.qos takes off or sets are oracles (``model.oracles``). The guard ties the counts
    to the counters (a settlement settles at most the consumer deliveries outstanding), and the effects
    keep them within what the spec can do (``_fewer``, ``_count_off``)."""
    c, ch, m = a.conn, a.ch, o.method
    n, consumer, settled_count = o.message_number, o.consumer_tag, o.consumer_deliveries_settled
    k = z3.Int("k_")
    settle_frame = z3.Or(m == BASIC_ACK, m == BASIC_NACK, m == BASIC_REJECT)
    other_channels_quiet = z3.ForAll([k],
                                     z3.Implies(z3.And(1 <= k, k <= x.channels_per_connection),
                                                x.frames_to_broker[c, k] == 0))
    # Which steps enqueue into a queue that is no dead-letter target (RT-1, TX-2): a publish taken on an
    # open channel outside tx mode, its copies carrying the frame's message, and a commit, its copies
    # carrying messages the committing channel held back (``o.new_copy_message_connection``,
    # ``o.new_copy_message_number``). As for the counting oracles, the effect keeps ``o.copies_added`` and
    # ``o.new_copy_persistent`` within what the spec does: no copy into such a queue from any other step,
    # and a commit's copy there is persistent only if its message is one the channel held back
    # (agreement checks both on every step).
    pub = m == BASIC_PUBLISH
    taken = z3.And(x.channel_status[c, ch] == CH_OPEN, z3.Not(x.commit_pending[c, ch]))
    publishes = z3.And(taken, pub, z3.Not(o.immediate),
                       z3.Or(o.exchange == DEFAULT_EXCHANGE, o.exchange == FANOUT_EXCHANGE))
    confirm_pub = z3.And(publishes, x.channel_mode[c, ch] == MODE_CONFIRM)                     # PC-1, PC-5
    commits = z3.And(taken, m == TX_COMMIT, x.channel_mode[c, ch] == MODE_TX)
    enqueues = z3.Or(z3.And(publishes, x.channel_mode[c, ch] != MODE_TX), commits)
    nq = z3.Int("nq_")
    added = z3.Lambda([nq], z3.If(z3.Or(x.dead_letter_target[nq], enqueues), o.copies_added[nq], 0))

    def persistent(q, key):
        return z3.And(o.new_copy_persistent[q, key],
                      z3.Or(pub, x.dead_letter_target[q],
                            z3.And(o.new_copy_message_connection[q, key] == c,
                                   x.tx_held_by_channel[c, o.new_copy_message_number[q, key]] == ch)))
    guard = z3.And(_broker_end_open(x, c), 0 <= ch, ch <= x.channels_per_connection, x.frames_to_broker[c, ch] > 0,
                   z3.Implies(ch == 0, other_channels_quiet),
                   # a get, purge or delete behind the channel's own requeue waits for it (spec.interleavings)
                   z3.Not(z3.And(z3.Or(m == BASIC_GET, m == QUEUE_PURGE, m == QUEUE_DELETE), o.waits_for_requeue)),
                   z3.Implies(ch == 0, m == CONNECTION_CLOSE),        # only connection.close travels on channel 0
                   z3.Implies(z3.And(m == BASIC_GET, o.get_ok), is_next(x, o.queue, o.copy_key)),   # the head
                   # a publish carries a message in flight
                   z3.Implies(m == BASIC_PUBLISH, x.publish_in_flight[c, o.message_number]),
                   # What the counting oracles are (the frame's prefetch_count is unsigned; a settlement
                   # settles at most the consumer deliveries outstanding; basic.qos counts every one).
                   z3.Implies(m == BASIC_QOS, z3.And(o.prefetch_count >= 0,
                                                     o.outstanding_count >= x.consumer_outstanding[c, ch])),
                   z3.Implies(settle_frame, z3.And(0 <= settled_count, settled_count <= x.consumer_outstanding[c, ch])),
                   # DU-4, ER-2: a declare is answered from the queue's flags (broker._queue_declare)
                   z3.Implies(z3.And(m == QUEUE_DECLARE, taken),
                              o.verdict == z3.If(_declare_refused(x, c, o.queue, o.durable, o.exclusive),
                                                 CHANNEL_ERR, OK)),
                   _taken_in_turn(x, c, ch, m, o))
    x = x.replace(frames_to_broker=z3.Store(x.frames_to_broker, c, ch, x.frames_to_broker[c, ch] - 1),
                  **{name: z3.Store(getattr(x, name), c, ch, o[f"{name}_left"]) for name in _TO_BROKER},
                  first_select_to_broker=z3.Store(x.first_select_to_broker, c, ch, o.first_select_to_broker_left),
                  publishes_behind_select=z3.Store(x.publishes_behind_select, c, ch,
                                                   z3.If(z3.Or(m == CONFIRM_SELECT, m == TX_SELECT),
                                                         o.publishes_behind_select_left,
                                                         x.publishes_behind_select[c, ch])),
                  publishes_to_broker=z3.Store(x.publishes_to_broker, c, ch,
                                               x.publishes_to_broker[c, ch] - z3.If(m == BASIC_PUBLISH, 1, 0)),
                  # A publish taken: its message stays in flight if a second frame carried it (exact up to
                  # two frames; the spec reaches three only through two, which publishes_in_flight_fresh rules out).
                  publish_in_flight=z3.Store(x.publish_in_flight, c, n,
                                             z3.And(x.publish_in_flight[c, n],
                                                    z3.Or(m != BASIC_PUBLISH, x.publish_in_flight_twice[c, n]))),
                  publish_in_flight_twice=z3.Store(x.publish_in_flight_twice, c, n,
                                                   z3.And(x.publish_in_flight_twice[c, n], m != BASIC_PUBLISH)))
    # RT-1: queues take copies
    taken_by_queue = z3.Store(x.taken_by_queue, c, n, z3.Or(x.taken_by_queue[c, n], o.routed_messages[n]))
    mode, status = x.channel_mode[c, ch], x.channel_status[c, ch]
    conn_err = _connection_error(x, c)
    kept = (o.keeps_any, o.kept_tags)
    ch_err = reset_channel(x, c, ch, CH_CLOSING, kept)
    settle = z3.Or(m == BASIC_ACK, m == BASIC_NACK, m == BASIC_REJECT)
    settled = _settled(x, c, ch, o.tag, z3.And(m != BASIC_REJECT, o.multiple))
    kind = z3.If(m == BASIC_ACK, SETTLE_ACK, z3.If(o.requeue, SETTLE_REQUEUE, SETTLE_DROP))
    # queue.delete of a queue that is sending a delivery (PF-3): once the owner check passes, the channel
    # numbers it first, whatever the if-empty and if-unused checks then answer (broker._queue_delete).
    owner = x.queue_owner[o.queue]
    numbers = z3.And(x.queue_exists[o.queue], z3.Or(owner == 0, owner == c + 1), x.sending_key[o.queue] != 0)
    deleting = _ite(numbers, _number(x, o.queue), x)
    on_open = _cases(
        x,
        (z3.And(x.commit_pending[c, ch], m != CHANNEL_CLOSE), conn_err),                        # TX-7: 504
        (z3.Or(m == CHANNEL_OPEN, m == CHANNEL_CLOSE_OK), conn_err),                     # ER-1
        (m == CHANNEL_CLOSE, reset_channel(x, c, ch, CH_ENDING, kept)),                  # RQ-4
        (z3.And(m == BASIC_PUBLISH, o.immediate), conn_err),
        (z3.And(m == BASIC_PUBLISH, o.exchange != DEFAULT_EXCHANGE, o.exchange != FANOUT_EXCHANGE), ch_err),  # PC-9
        (z3.And(m == BASIC_PUBLISH, mode == MODE_TX), x.replace(                         # TX-2
            tx_holds_back=z3.Store(x.tx_holds_back, c, ch, True),
            tx_held_by_channel=z3.Store(x.tx_held_by_channel, c, n, ch),
            tx_held_twice=z3.Store(x.tx_held_twice, c, n,
                                   z3.Or(x.tx_held_twice[c, n], x.tx_held_by_channel[c, n] != 0)))),
        (z3.And(m == BASIC_PUBLISH, mode == MODE_CONFIRM), x.replace(                    # PC-1
            publish_seq=z3.Store(x.publish_seq, c, ch, x.publish_seq[c, ch] + 1),
            unconfirmed=z3.Store(x.unconfirmed, c, ch, x.publish_seq[c, ch] + 1, True), taken_by_queue=taken_by_queue,
            unconfirmed_publish_channel=z3.Store(x.unconfirmed_publish_channel, c, n, ch),
            unconfirmed_publish_seq=z3.Store(x.unconfirmed_publish_seq, c, n, x.publish_seq[c, ch] + 1))),
        (m == BASIC_PUBLISH, x.replace(taken_by_queue=taken_by_queue)),
        (z3.And(settle, o.verdict == CHANNEL_ERR), ch_err),                              # ACK-4
        (z3.And(settle, mode == MODE_TX), x.replace(                                     # TX-3
            tx_holds_back=z3.Store(x.tx_holds_back, c, ch, z3.Or(x.tx_holds_back[c, ch], o.settled)),
            # still counted (PF-3)
            consumer_outstanding=z3.Store(x.consumer_outstanding, c, ch, x.consumer_outstanding[c, ch] - settled_count),
            consumer_held_back=z3.Store(x.consumer_held_back, c, ch, x.consumer_held_back[c, ch] + settled_count),
            outstanding=_lam3(lambda i, j, t: z3.And(x.outstanding[i, j, t],
                                                     z3.Not(z3.And(i == c, j == ch, settled(t))))),
            tx_settled=_lam3(lambda i, j, t: z3.Or(x.tx_settled[i, j, t], z3.And(i == c, j == ch, settled(t)))),
            tx_settle_kind=_lam3(lambda i, j, t: z3.If(z3.And(i == c, j == ch, settled(t)), kind,
                                                       x.tx_settle_kind[i, j, t])))),
        (settle, _requeue(x.replace(                                                     # ACK-1..3, ACK-5
            outstanding=_drop_tags(x.outstanding, c, ch, settled),
            delivered_to_consumer=_drop_tags(x.delivered_to_consumer, c, ch, settled),
            holds_confirm=_unhold(x, _named_by(x, c, ch, lambda t: z3.And(settled(t), kind != SETTLE_REQUEUE))),
            consumer_outstanding=z3.Store(x.consumer_outstanding, c, ch, x.consumer_outstanding[c, ch] - settled_count),
            consumer_deliveries=_fewer(x, c, ch, o.settled_per_consumer),
            volume=_count_off(x, c, ch, settled_count)),                                 # PF-3
            _named_by(x, c, ch, lambda t: z3.And(settled(t), kind == SETTLE_REQUEUE)),
            _resumes_first(x, c, ch, _count_off(x, c, ch, settled_count)))),             # spec.interleavings
        (z3.And(m == BASIC_QOS, o.prefetch_size != 0), conn_err),
        (m == BASIC_QOS, _qos(x, c, ch, o.prefetch_count, o.global_, o.outstanding_count)),  # PF-2
        (z3.And(m == BASIC_CONSUME, x.consumers[c, ch, consumer]), conn_err),              # a reused consumer tag
        (z3.And(m == BASIC_CONSUME, o.verdict == CONNECTION_ERR), conn_err),
        (z3.And(m == QUEUE_DELETE, o.verdict == CHANNEL_ERR), reset_channel(deleting, c, ch, CH_CLOSING, kept)),
        (z3.And(z3.Or(m == BASIC_CONSUME, m == BASIC_GET, m == QUEUE_BIND, m == QUEUE_PURGE,
                      m == QUEUE_DECLARE, m == QUEUE_DELETE), o.verdict == CHANNEL_ERR), ch_err),
        (m == BASIC_CONSUME, x.replace(consumers=z3.Store(x.consumers, c, ch, consumer, True),        # DS-1
                                       in_round_robin=z3.Store(x.in_round_robin, c, ch, consumer, True),
                                       consumer_no_ack=z3.Store(x.consumer_no_ack, c, ch, consumer, o.no_ack),
                                       # PF-2: the limit now
                                       consumer_limit=z3.Store(x.consumer_limit, c, ch, consumer, x.prefetch[c, ch]))),
        (m == BASIC_CANCEL, x.replace(consumers=z3.Store(x.consumers, c, ch, consumer, False),
                                      # its deliveries become a former consumer's (-tag): no tag counts them
                                      consumer_deliveries=z3.Store(x.consumer_deliveries, c, ch, consumer, 0),
                                      consumer_no_ack=z3.Store(x.consumer_no_ack, c, ch, consumer, False),
                                      consumer_limit=z3.Store(x.consumer_limit, c, ch, consumer, 0),
                                      in_round_robin=z3.Store(x.in_round_robin, c, ch, consumer,
                                                              z3.And(x.in_round_robin[c, ch, consumer],
                                                                     z3.Not(x.consumers[c, ch, consumer]))))),
        (m == QUEUE_PURGE, x.replace(**_emptied(x, lambda q: q == o.queue, keep_away=True))),
        (m == QUEUE_DECLARE, _declare(x, c, o.queue, o.durable, o.exclusive)),          # DU-4
        (m == QUEUE_DELETE, _delete_queue(deleting, o.queue, o.cancelled_consumers)),
        (z3.And(m == BASIC_GET, o.get_ok), _hand_over(x, c, ch, o.no_ack, z3.BoolVal(False), o.queue, o.copy_key)),
        (z3.And(m == BASIC_RECOVER, z3.Not(o.requeue)), conn_err),                       # RQ-5
        (m == BASIC_RECOVER, _requeue(x.replace(outstanding=_no_tags(x.outstanding, c, ch),    # RQ-5: all requeued
                                                delivered_to_consumer=_drop_tags(x.delivered_to_consumer, c, ch,
                                                                                 lambda t: x.outstanding[c, ch, t]),
                                                consumer_outstanding=z3.Store(x.consumer_outstanding, c, ch, 0),
                                                consumer_deliveries=_fewer(x, c, ch, o.settled_per_consumer),
                                                volume=_count_off(x, c, ch, x.consumer_outstanding[c, ch])),
                                      _named_by(x, c, ch, lambda t: x.outstanding[c, ch, t]),
                                      _resumes_first(x, c, ch, _count_off(x, c, ch, x.consumer_outstanding[c, ch])))),
        (m == CONFIRM_SELECT, _ite(mode == MODE_TX, ch_err,                              # PC-8
                                   x.replace(channel_mode=z3.Store(x.channel_mode, c, ch, MODE_CONFIRM)))),
        (m == TX_SELECT,
         _ite(mode == MODE_CONFIRM, ch_err, x.replace(channel_mode=z3.Store(x.channel_mode, c, ch, MODE_TX)))),
        (m == TX_COMMIT, _ite(mode != MODE_TX, ch_err, _requeue(x.replace(                # TX-10, TX-7, TX-3
            tx_holds_back=z3.Store(x.tx_holds_back, c, ch, False),
            commit_pending=z3.Store(x.commit_pending, c, ch, o.commit_waits),
            tx_held_by_channel=_release(x.tx_held_by_channel, c, ch),
            tx_held_twice=_release_twice(x, c, ch),                   # TX-2: enqueued now
            taken_by_queue=_lam2(lambda i, n: z3.Or(x.taken_by_queue[i, n],
                                                    z3.And(i == c, x.tx_held_by_channel[i, n] == ch,
                                                           o.routed_messages[n]))),
            tx_settled=_no_tags(x.tx_settled, c, ch),
            delivered_to_consumer=_drop_tags(x.delivered_to_consumer, c, ch, lambda t: x.tx_settled[c, ch, t]),
            holds_confirm=_unhold(x,
                                  _named_by(x, c, ch,
                                            lambda t: z3.And(x.tx_settled[c, ch, t],
                                                             x.tx_settle_kind[c, ch, t] != SETTLE_REQUEUE))),
            # PF-3: the held-back ones are counted off, one run of a kind at a time (broker.commit_runs):
            # the volume after is an oracle, no lower than every run taking its whole count off.
            consumer_held_back=z3.Store(x.consumer_held_back, c, ch, 0),
            consumer_deliveries=_fewer(x, c, ch, o.settled_per_consumer),
            volume=z3.Store(x.volume, c, ch, z3.If(x.global_limit[c, ch] != 0,
                                                   _bounded(o.volume_after_commit,
                                                            x.volume[c, ch] - x.consumer_held_back[c, ch],
                                                            o.volume_after_commit), x.volume[c, ch]))),
            _named_by(x, c, ch, lambda t: z3.And(x.tx_settled[c, ch, t],
                                                 x.tx_settle_kind[c, ch, t] == SETTLE_REQUEUE))))),
        (m == TX_ROLLBACK, _ite(mode != MODE_TX, ch_err, x.replace(                       # TX-2, TX-3, TX-4
            tx_holds_back=z3.Store(x.tx_holds_back, c, ch, False), tx_settled=_no_tags(x.tx_settled, c, ch),
            tx_held_by_channel=_release(x.tx_held_by_channel, c, ch),
            tx_held_twice=_release_twice(x, c, ch),
            consumer_outstanding=z3.Store(x.consumer_outstanding, c, ch,
                                          x.consumer_outstanding[c, ch] + x.consumer_held_back[c, ch]),
            consumer_held_back=z3.Store(x.consumer_held_back, c, ch, 0),
            outstanding=_lam3(lambda i, j, t: z3.Or(x.outstanding[i, j, t],
                                                    z3.And(i == c, j == ch, x.tx_settled[i, j, t])))))),
    )
    on_closed = _ite(m == CHANNEL_OPEN, reset_channel(x, c, ch, CH_OPEN), conn_err)      # ER-1
    on_closing = _cases(x, (m == CHANNEL_OPEN, conn_err),
                        (m == CHANNEL_CLOSE_OK, reset_channel(x, c, ch, CH_CLOSED)))              # ER-1
    after = _cases(on_closing, (m == CONNECTION_CLOSE, conn_err), (status == CH_OPEN, on_open),
                   (status == CH_CLOSED, on_closed))
    after = _enqueue(after, added, lambda q, key: z3.If(pub, c, o.new_copy_message_connection[q, key]),  # RT-1, ACK-6
                     lambda q, key: z3.If(pub, n, o.new_copy_message_number[q, key]), persistent,
                     lambda q, key: z3.And(confirm_pub, o.new_copy_persistent[q, key], x.queue_durable[q]))
    # ER-1: what went out on this channel. A channel error sends channel.close (the channel was open
    # and is closing now); a channel that was closing answers only with close-ok; anything else follows
    # the last channel.close in flight, if there is one.
    sends_close = z3.And(status == CH_OPEN, after.channel_status[c, ch] == CH_CLOSING)
    other = z3.And(o.answered, status != CH_CLOSING, status != CH_ENDING)
    # A channel opened: its open-ok goes out behind whatever is in flight (an older channel's frames),
    # and no delivery in flight is of this channel.
    opens = z3.And(status == CH_CLOSED, m == CHANNEL_OPEN)
    after = after.replace(open_ok_to_client=z3.Store(after.open_ok_to_client, c, ch,
                                                     z3.Or(after.open_ok_to_client[c, ch], opens)),
                          older_frames_ahead=z3.Store(after.older_frames_ahead, c, ch,
                                                      z3.If(opens, x.frames_to_client[c, ch],
                                                            after.older_frames_ahead[c, ch])),
                          deliveries_to_client=z3.If(opens, _no_tags(after.deliveries_to_client, c, ch),
                                                     after.deliveries_to_client),
                          single_confirms_in_flight=z3.If(opens, _no_tags(after.single_confirms_in_flight, c, ch),
                                                          after.single_confirms_in_flight),
                          multiple_confirm_in_flight=z3.Store(after.multiple_confirm_in_flight, c, ch,
                                                              z3.If(opens, 0, after.multiple_confirm_in_flight[c, ch])))
    return Transition(guard, _forget(after.replace(
        frames_to_client=z3.Store(after.frames_to_client, c, ch, z3.Or(after.frames_to_client[c, ch], o.answered)),
        channel_close_to_client=z3.Store(after.channel_close_to_client, c, ch,
                                         z3.Or(after.channel_close_to_client[c, ch], sends_close)),
        sent_after_close=z3.Store(after.sent_after_close, c, ch, z3.If(
            sends_close, False,
            z3.Or(after.sent_after_close[c, ch], z3.And(other, after.channel_close_to_client[c, ch])))))))


def _taken_in_turn(x: Z3State, c, ch, m, o: Terms) -> z3.BoolRef:
    """What the flags of the frames in flight to the broker (``open_to_broker``, ``frame_ahead_of_open``,
    ``frame_behind_open``, ``other_frames_to_broker``) say of the frame the broker takes, the oldest, and
    what they are after it (``o.open_to_broker_left`` and the others, spec.properties.opens_in_flight of
    the frames behind it): a channel.open taken is the first one, with nothing ahead; a frame other than
    it and close-ok is ahead of the first channel.open, if any; a close-ok changes none of them."""
    left = {name: o[f"{name}_left"] for name in _TO_BROKER}
    lifecycle = z3.Or(m == CHANNEL_OPEN, m == CHANNEL_CLOSE_OK)
    opening, ahead, behind, other = (x.open_to_broker[c, ch], x.frame_ahead_of_open[c, ch], x.frame_behind_open[c, ch],
                                     x.other_frames_to_broker[c, ch])
    none_behind = z3.Implies(z3.Not(left["open_to_broker"]),
                             z3.And(z3.Not(left["frame_ahead_of_open"]), z3.Not(left["frame_behind_open"])))
    select = z3.Or(m == CONFIRM_SELECT, m == TX_SELECT)
    return z3.And(
        # the first select in flight: the one taken if it is one (every publish is behind it), else the
        # same; after a select, the next one, with the publishes behind it if it is confirm.select; none
        # once only close-ok and channel.open are left
        z3.Implies(select, z3.And(x.first_select_to_broker[c, ch] == m,
                                  z3.Implies(m == CONFIRM_SELECT,
                                             x.publishes_behind_select[c, ch] == x.publishes_to_broker[c, ch]),
                                  0 <= o.publishes_behind_select_left,
                                  o.publishes_behind_select_left <= x.publishes_to_broker[c, ch],
                                  z3.Or(o.first_select_to_broker_left == 0,
                                        o.first_select_to_broker_left == CONFIRM_SELECT,
                                        o.first_select_to_broker_left == TX_SELECT),
                                  z3.Implies(o.first_select_to_broker_left != CONFIRM_SELECT,
                                             o.publishes_behind_select_left == 0))),
        z3.Implies(z3.Not(select), o.first_select_to_broker_left == x.first_select_to_broker[c, ch]),
        # a basic.publish taken is ahead of every select, so not among those behind the first
        z3.Implies(m == BASIC_PUBLISH, x.publishes_behind_select[c, ch] < x.publishes_to_broker[c, ch]),
        z3.Implies(z3.Not(left["other_frames_to_broker"]),
                   z3.And(o.first_select_to_broker_left == 0, o.publishes_behind_select_left == 0,
                          x.publishes_to_broker[c, ch] == z3.If(m == BASIC_PUBLISH, 1, 0))),
        z3.Implies(m == CHANNEL_OPEN, z3.And(
            opening, z3.Not(ahead), left["other_frames_to_broker"] == other, none_behind,
            # the frames behind it were behind the first channel.open: ahead of the next one, or behind it
            z3.Implies(z3.Not(behind), z3.And(z3.Not(left["frame_ahead_of_open"]), z3.Not(left["frame_behind_open"]))),
            z3.Implies(left["open_to_broker"],
                       other == z3.Or(left["frame_ahead_of_open"], left["frame_behind_open"])))),
        z3.Implies(m == CHANNEL_CLOSE_OK, z3.And([left[n] == v for n, v in
                                                  (("open_to_broker", opening), ("frame_ahead_of_open", ahead),
                                                   ("frame_behind_open", behind), ("other_frames_to_broker", other))])),
        z3.Implies(z3.And(ch >= 1, z3.Not(lifecycle)), z3.And(
            other, z3.Implies(opening, ahead), left["open_to_broker"] == opening, left["frame_behind_open"] == behind,
            z3.Implies(left["frame_ahead_of_open"], ahead),
            z3.Implies(opening, left["other_frames_to_broker"] == z3.Or(left["frame_ahead_of_open"], behind)),
            z3.Implies(z3.Not(opening), z3.Not(left["frame_ahead_of_open"])))))


def _qos(x: Z3State, c, ch, count, global_, nout) -> Z3State:
    """basic.qos (broker._qos, PF-2): global=true with a count limits the channel, its volume kept when
    it had a global limit, else starting at every outstanding delivery (``nout``, basic.get ones
    included, held-back ones not); ``qos_uncounted`` is then the held-back consumer deliveries, and
    ``qos_excess`` the consumer deliveries outstanding or held back if more than the count (PF-5).
    Otherwise the global limit goes; global=false also sets the limit of consumers started later."""
    had = x.global_limit[c, ch] != 0
    sets = z3.And(global_, count != 0)
    total = x.consumer_outstanding[c, ch] + x.consumer_held_back[c, ch]

    def put(arr, value):
        return z3.Store(arr, c, ch, z3.If(sets, value, 0))
    return x.replace(global_limit=put(x.global_limit, count), volume=put(x.volume, z3.If(had, x.volume[c, ch], nout)),
                     qos_uncounted=put(x.qos_uncounted,
                                       z3.If(had, x.qos_uncounted[c, ch], x.consumer_held_back[c, ch])),
                     qos_excess=put(x.qos_excess, z3.If(count < total, total, 0)),
                     prefetch=z3.Store(x.prefetch, c, ch, z3.If(global_, x.prefetch[c, ch], count)))


def _declare_refused(x: Z3State, c, q, durable, exclusive) -> z3.BoolRef:
    """A queue.declare of a queue that exists with other flags, refused as RabbitMQ 3.10.8 refuses it
    (broker._queue_declare): another connection's exclusive queue, or another exclusive flag (405); then,
    for a queue that is not exclusive, another durable flag (406)."""
    owner = x.queue_owner[q]
    return z3.And(x.queue_exists[q],
                  z3.Or(z3.And(owner != 0, owner != c + 1), z3.Xor(owner != 0, exclusive),
                        z3.And(owner == 0, z3.Xor(x.queue_durable[q], durable))))


def _declare(x: Z3State, c, q, durable, exclusive) -> Z3State:
    """queue.declare of a queue that does not exist creates it; an exclusive one belongs to connection
    c and is never durable (DU-4); it is a new queue, so the keys enqueued so far were another's
    (``born``). Declaring an existing queue changes nothing."""
    new = z3.Not(x.queue_exists[q])
    return x.replace(queue_exists=z3.Store(x.queue_exists, q, True),
                     born=z3.Store(x.born, q, z3.If(new, x.enqueued[q], x.born[q])),
                     queue_durable=z3.Store(x.queue_durable, q,
                                            z3.If(new, z3.And(durable, z3.Not(exclusive)), x.queue_durable[q])),
                     queue_owner=z3.Store(x.queue_owner, q, z3.If(new, z3.If(exclusive, c + 1, 0), x.queue_owner[q])))


def _delete_queue(x: Z3State, q, cancelled) -> Z3State:
    """queue.delete: the queue goes (if it exists); its consumers stop, each told with basic.cancel on
    its channel (``cancelled``: the queue's consumers)."""
    k = z3.Int("k_")

    def cancels(i, j):
        return z3.Exists([k], z3.And(cancelled[i, j, k], x.consumers[i, j, k]))
    told = _lam2(lambda i, j: z3.Or(x.frames_to_client[i, j], cancels(i, j)))
    after_close = _lam2(lambda i, j: z3.Or(x.sent_after_close[i, j],
                                           z3.And(x.channel_close_to_client[i, j], cancels(i, j))))
    return x.replace(consumers=_lam3(lambda i, j, t: z3.And(x.consumers[i, j, t], z3.Not(cancelled[i, j, t]))),
                     frames_to_client=told,
                     sent_after_close=after_close,
                     consumer_deliveries=_lam3(lambda i, j, t: z3.If(cancelled[i, j, t], 0,
                                                                     x.consumer_deliveries[i, j, t])),   # a former
                     consumer_limit=_lam3(lambda i, j, t: z3.If(cancelled[i, j, t], 0,
                                                                x.consumer_limit[i, j, t])),   # consumer's
                     consumer_no_ack=_lam3(lambda i, j, t: z3.And(x.consumer_no_ack[i, j, t],
                                                                  z3.Not(cancelled[i, j, t]))),
                     in_round_robin=_lam3(lambda i, j, t: z3.And(x.in_round_robin[i, j, t],
                                                                 z3.Not(cancelled[i, j, t]))),
                     **_delete_queues(x, lambda i: i == q))


def has_room(x: Z3State, c, ch, k) -> z3.BoolRef:
    """broker.has_room: the channel's global limit, if any, is not reached by its volume, and a
    manual-mode consumer with a limit has fewer deliveries outstanding or held back than it (PF-1..3, TX-3)."""
    return z3.And(z3.Or(x.global_limit[c, ch] == 0, x.volume[c, ch] < x.global_limit[c, ch]),
                  z3.Or(x.consumer_no_ack[c, ch, k], x.consumer_limit[c, ch, k] == 0,
                        x.consumer_deliveries[c, ch, k] < x.consumer_limit[c, ch, k]))


def BrokerDeliver(x: Z3State, a: Terms, o: Terms) -> Transition:
    """The head of a queue to a consumer with room (``o.can_deliver``: the queue has a copy and a consumer
    room, DS-1, PF-3); the consumer ``o.consumer_tag`` is on channel (``o.conn``, ``o.ch``), which is open
    (broker.next_consumer), and has room (``has_room``); the copy (``o.copy_key``, the queue's head: ready,
    no ready copy ahead of it) takes the channel's next tag.

    To an automatic-mode consumer on a channel with a global limit (of a client that has not vanished)
    it takes two of these steps (broker.deliver, PF-3): the first, the limiter's yes, takes the copy out
    of the queue onto its way to the channel (``_start_sending``: no tag yet, nothing written); the
    second, the queue's next step whatever else it holds, is the channel numbering it (``_number``),
    enabled while that channel is open at the broker (broker.can_deliver). The second reads no oracle:
    the delivery is the queue's ``sending_*`` fields."""
    q = a.queue
    c, ch, k = o.conn, o.ch, o.consumer_tag
    sending = x.sending_key[q] != 0
    starts = z3.And(x.broker_up, o.can_deliver, _channel_open(x, c, ch), is_next(x, q, o.copy_key),
                    x.consumers[c, ch, k], has_room(x, c, ch, k))
    admitted = z3.And(x.consumer_no_ack[c, ch, k], x.global_limit[c, ch] != 0, z3.Not(_gone(x, c)))
    delivers = _ite(admitted, _start_sending(x, q, o.copy_key, c, ch, k),
                    _send(_hand_over(x, c, ch, x.consumer_no_ack[c, ch, k], z3.BoolVal(True), q, o.copy_key, k), c, ch))
    return Transition(z3.If(sending, _channel_open(x, x.sending_connection[q], x.sending_channel[q]), starts),
                      _ite(sending, _number(x, q), delivers))


def _start_sending(x: Z3State, q, key, c, ch, k) -> Z3State:
    """broker.deliver's first step to automatic-mode consumer k of channel (c, ch) under its global
    limit (PF-3): the ready copy ``key`` leaves queue q (as in ``_hand_over``: delivered, RQ-2) and is on
    its way to the channel (``sending_*``); it holds up no confirm any more (storage.forget_waits). It has
    no tag yet, and nothing is written; it is no longer live, so ``gone_in_this_life`` marks it gone
    (its fate is sure: AM-2)."""
    return x.replace(ready=z3.Store(x.ready, q, key, False), redelivered=z3.Store(x.redelivered, q, key, False),
                     away=z3.Store(x.away, q, key, False),
                     ahead_in_queue=_ahead_of_kept(x, lambda i, j: z3.Not(z3.And(i == q, j == key))),
                     ever_delivered=z3.Store(x.ever_delivered, q, key, True),
                     holds_confirm=z3.Store(x.holds_confirm, q, key, False),
                     sending_key=z3.Store(x.sending_key, q, key),
                     sending_connection=z3.Store(x.sending_connection, q, c),
                     sending_channel=z3.Store(x.sending_channel, q, ch),
                     sending_consumer=z3.Store(x.sending_consumer, q, k))


def _number(x: Z3State, q) -> Z3State:
    """broker.number, broker.deliver's second step: the channel numbers the delivery queue q was sending
    it with its next tag and writes basic.deliver (DT-1), whether or not the consumer was cancelled
    since; the copy is in flight in automatic mode (AM-2), or lost as it is written to a vanished client
    (``_hand_over`` in automatic mode, but for what the first step did already: the copy left the queue,
    was marked delivered and holds up no confirm). The queue sends nothing after. The frame is written
    while the channel is open, which it always is (sent_to_open_channels, proved): so a queue.delete's
    numbering, which no guard asks it of, keeps closed_channel_is_silent and down_connection_is_silent
    without them."""
    c, ch, key = x.sending_connection[q], x.sending_channel[q], x.sending_key[q]
    tag = x.next_tag[c, ch]
    out = z3.Not(_gone(x, c))
    y = x.replace(**{name: z3.Store(getattr(x, name), q, DEFAULTS[name]) for name in _SENDING},
                  next_tag=z3.Store(x.next_tag, c, ch, tag + 1),
                  deliveries_to_client=z3.Store(x.deliveries_to_client, c, ch, tag,
                                                z3.Or(x.deliveries_to_client[c, ch, tag], out)),
                  auto_in_flight_on=z3.Store(x.auto_in_flight_on, q, key,
                                             z3.If(out, c + 1, x.auto_in_flight_on[q, key])))
    return _ite(x.channel_status[c, ch] == CH_OPEN, _send(y, c, ch), y)


def _send(x: Z3State, c, ch, close_ok: bool = False) -> Z3State:
    """broker.send: a frame goes out to the client on channel ch of connection c; unless it is a
    channel.close-ok, it follows the last channel.close in flight there, if any (ER-1). A frame to a
    client that vanished is lost as it is written (faults.vanish)."""
    out = z3.Not(_gone(x, c))
    if close_ok:
        return x.replace(frames_to_client=z3.Store(x.frames_to_client, c, ch, z3.Or(x.frames_to_client[c, ch], out)))
    return x.replace(frames_to_client=z3.Store(x.frames_to_client, c, ch, z3.Or(x.frames_to_client[c, ch], out)),
                     sent_after_close=z3.Store(x.sent_after_close, c, ch,
                                               z3.Or(x.sent_after_close[c, ch],
                                                     z3.And(out, x.channel_close_to_client[c, ch]))))


def _gone(x: Z3State, c) -> z3.BoolRef:
    """Slot c holds a connection whose client vanished (faults.vanish), or is free to hold one."""
    return x.client_connection_status[c] == CONN_GONE


def BrokerCloseOk(x: Z3State, a: Terms, o: Terms) -> Transition:
    """channel.close-ok for a channel the client closed: it is gone (ER-1)."""
    c, ch = a.conn, a.ch
    guard = z3.And(_broker_end_open(x, c), 1 <= ch, ch <= x.channels_per_connection,
                   x.channel_status[c, ch] == CH_ENDING)
    return Transition(guard, _forget(_send(reset_channel(x, c, ch, CH_CLOSED), c, ch, close_ok=True)))


def BrokerRequeue(x: Z3State, a: Terms, o: Terms) -> Transition:
    """The queues take the requeue that waited behind a resume (spec.interleavings): no copy is away."""
    q, key = z3.Ints("q_ key_")
    return Transition(z3.And(x.broker_up, z3.Exists([q, key], x.away[q, key])),
                      x.replace(away=_lam_qk(lambda q, key: z3.BoolVal(False))))


def BrokerConfirm(x: Z3State, a: Terms, o: Terms) -> Transition:
    """basic.ack/nack from the broker for publish ``seq``, or with multiple every unconfirmed one up to
    it (PC-2, PC-3); ``o.ready_to_confirm``: seq's queues took it and its return went out (PC-4, PC-5);
    ``o.confirm_prefix``: the end of the longest ready run of one outcome (broker.confirm_prefix);
    ``o.unconfirmed_below``: an unconfirmed publish of the channel is below seq (a multiple one covers two
    or more of the run); ``o.oldest_batched``: seq is the oldest, confirmed alone with multiple in a batch
    with a later one (broker.oldest_batched)."""
    c, ch, s = a.conn, a.ch, a.seq

    def covered(i, j, k):
        return z3.And(i == c, j == ch, x.unconfirmed[i, j, k], z3.If(a.multiple, k <= s, k == s))

    def acks(i, n):                     # message (i, n)'s publish is covered and not to be nacked (PC-6)
        return z3.And(x.unconfirmed_publish_channel[i, n] != 0,
                      covered(i, x.unconfirmed_publish_channel[i, n], x.unconfirmed_publish_seq[i, n]))
    q, key = z3.Ints("q_ key_")
    # PC-5: no copy holds up a covered publish (a copy holds up its own message's publish).
    none_waits = z3.ForAll([q, key],
                           z3.Not(z3.And(x.holds_confirm[q, key],
                                         acks(x.message_connection[q, key], x.message_number[q, key]))))
    multiple = z3.Or(z3.And(s <= o.confirm_prefix, o.unconfirmed_below),
                     z3.And(o.oldest_batched, z3.Not(o.unconfirmed_below)))
    guard = z3.And(_channel_open(x, c, ch), z3.If(a.multiple, z3.And(s != 0, multiple, x.unconfirmed[c, ch, s]),
                                                  z3.And(x.unconfirmed[c, ch, s], o.ready_to_confirm)), none_waits)
    after = x.replace(unconfirmed=_lam3(lambda i, j, k: z3.And(x.unconfirmed[i, j, k], z3.Not(covered(i, j, k)))),
                      confirmed=_lam3(lambda i, j, k: z3.Or(x.confirmed[i, j, k], covered(i, j, k))),
                      message_acked=_lam2(lambda i, n: z3.Or(x.message_acked[i, n], acks(i, n))),
                      unconfirmed_publish_channel=_lam2(lambda i, n: z3.If(acks(i, n), 0,
                                                                           x.unconfirmed_publish_channel[i, n])),
                      unconfirmed_publish_seq=_lam2(lambda i, n: z3.If(acks(i, n), 0, x.unconfirmed_publish_seq[i, n])),
                      # the confirm in flight to the client: its number, multiple or not
                      single_confirms_in_flight=z3.Store(x.single_confirms_in_flight, c, ch, s,
                                                         z3.Or(x.single_confirms_in_flight[c, ch, s],
                                                               z3.Not(a.multiple))),
                      multiple_confirm_in_flight=z3.Store(
                          x.multiple_confirm_in_flight, c, ch,
                          z3.If(z3.And(a.multiple, s > x.multiple_confirm_in_flight[c, ch]), s,
                                x.multiple_confirm_in_flight[c, ch])))
    return Transition(guard, _send(after, c, ch))


def BrokerCommitOk(x: Z3State, a: Terms, o: Terms) -> Transition:
    """tx.commit-ok once the commit's copies are on disk (``o.written``), TX-7."""
    c, ch = a.conn, a.ch
    guard = z3.And(_channel_open(x, c, ch), x.commit_pending[c, ch], o.written)
    return Transition(guard, _send(x.replace(commit_pending=z3.Store(x.commit_pending, c, ch, False)), c, ch))


def BrokerQueueFail(x: Z3State, a: Terms, o: Terms) -> Transition:
    """A queue fails to take unconfirmed publish ``seq`` (``o.failable``: a queue holds a copy), PC-6:
    the ready copies of its message (``o.failed_copies``) are gone. It will be nacked: the confirm still comes."""
    c, ch = a.conn, a.ch
    gone = _lam_qk(lambda q, key: z3.And(x.ready[q, key], z3.Not(o.failed_copies[q, key])))

    def nacked(i, n):                   # the publish's message: it will be nacked, nothing waits for it
        return z3.And(i == c, x.unconfirmed_publish_channel[i, n] == ch, x.unconfirmed_publish_seq[i, n] == a.seq)
    after = x.replace(ready=gone, ahead_in_queue=_ahead_of_kept(x, lambda q, key: z3.Not(o.failed_copies[q, key])),
                      redelivered=_lam_qk(lambda q, key: z3.And(x.redelivered[q, key],
                                                                z3.Not(o.failed_copies[q, key]))),
                      unconfirmed_publish_channel=_lam2(lambda i, n: z3.If(nacked(i, n), 0,
                                                                           x.unconfirmed_publish_channel[i, n])),
                      unconfirmed_publish_seq=_lam2(lambda i, n: z3.If(nacked(i, n), 0,
                                                                       x.unconfirmed_publish_seq[i, n])),
                      holds_confirm=_lam_qk(lambda q, key: z3.And(x.holds_confirm[q, key],
                                                                  z3.Not(nacked(x.message_connection[q, key],
                                                                                x.message_number[q, key])))))
    return Transition(z3.And(_channel_open(x, c, ch), x.unconfirmed[c, ch, a.seq], o.failable), after)


def BrokerCrash(x: Z3State, a: Terms, o: Terms) -> Transition:
    """The broker dies: every connection drops with its channels (DU-2, TX-9); every live copy not on
    disk is lost (the ghost ``lost_in_crash``, faults.lost_in_crash): a ready one, or the one an outstanding or
    held-back tag names, found through the ghost inverse (``named_by_connection``, ``named_by_channel``,
    ``named_by_tag``), as copies_conserved makes it the only tag that can name the copy."""
    i, j = z3.Ints("c_ ch_")
    k = z3.Int("s_")

    def named(q, key):
        c, ch, t = x.named_by_connection[q, key], x.named_by_channel[q, key], x.named_by_tag[q, key]
        return z3.And(z3.Or(x.outstanding[c, ch, t], x.tx_settled[c, ch, t]), x.tag_queue[c, ch, t] == q,
                      x.tag_key[c, ch, t] == key)
    def gone(q, key):
        return z3.And(z3.Or(x.ready[q, key], named(q, key)), z3.Not(x.on_disk[q, key]))
    lost = _lam_qk(lambda q, key: z3.Or(x.lost_in_crash[q, key], gone(q, key)))
    gone_now = _lam_qk(lambda q, key: z3.Or(x.gone_this_life[q, key], gone(q, key)))
    after = x.replace(broker_up=z3.BoolVal(False), broker_end_closed=z3.K(INT, z3.BoolVal(False)),
                      channel_status=z3.Lambda([i, j], z3.IntVal(CH_CLOSED)),
                      channel_mode=z3.Lambda([i, j], z3.IntVal(MODE_NONE)),
                      publish_seq=z3.Lambda([i, j], z3.IntVal(0)), unconfirmed=z3.Lambda([i, j, k], z3.BoolVal(False)),
                      confirmed=z3.Lambda([i, j, k], z3.BoolVal(False)),
                      tx_holds_back=z3.Lambda([i, j], z3.BoolVal(False)),
                      commit_pending=z3.Lambda([i, j], z3.BoolVal(False)),
                      frames_to_broker=z3.Lambda([i, j], z3.IntVal(0)),
                      next_tag=z3.Lambda([i, j], z3.IntVal(1)), outstanding=z3.Lambda([i, j, k], z3.BoolVal(False)),
                      tx_settled=z3.Lambda([i, j, k], z3.BoolVal(False)),
                      delivered_to_consumer=z3.Lambda([i, j, k], z3.BoolVal(False)),
                      consumers=z3.Lambda([i, j, k], z3.BoolVal(False)),
                      client_connection_status=z3.K(INT, z3.IntVal(CONN_DOWN)),
                      connection_close_to_client=z3.K(INT, z3.BoolVal(False)),
                      frames_to_client=z3.Lambda([i, j], z3.BoolVal(False)),
                      channel_close_to_client=z3.Lambda([i, j], z3.BoolVal(False)),
                      sent_after_close=z3.Lambda([i, j], z3.BoolVal(False)),
                      view_status=z3.Lambda([i, j], z3.IntVal(C_CLOSED)), view_last_tag=z3.Lambda([i, j], z3.IntVal(0)),
                      deliveries_to_client=z3.Lambda([i, j, k], z3.BoolVal(False)),
                      **{name: z3.Lambda([i, j], z3.BoolVal(False)) for name in _LIFECYCLE},
                      **{name: z3.Lambda([i, j], z3.IntVal(0)) for name in _VIEW_COUNTS},
                      view_confirmed=z3.Lambda([i, j, k], z3.BoolVal(False)),
                      single_confirms_in_flight=z3.Lambda([i, j, k], z3.BoolVal(False)),
                      queue_exists=z3.Lambda([k], z3.And(x.queue_exists[k], x.queue_durable[k])),
                      queue_owner=z3.K(INT, z3.IntVal(0)),
                      in_round_robin=z3.Lambda([i, j, k], z3.BoolVal(False)),
                      ready=z3.Lambda([i, j], z3.BoolVal(False)),
                      ahead_in_queue=z3.Lambda([i, j, k], z3.BoolVal(False)),
                      redelivered=z3.Lambda([i, j], z3.BoolVal(False)), away=z3.Lambda([i, j], z3.BoolVal(False)),
                      tag_queue=z3.Lambda([i, j, k], z3.IntVal(-1)),
                      tag_key=z3.Lambda([i, j, k], z3.IntVal(0)), tx_settle_kind=z3.Lambda([i, j, k], z3.IntVal(-1)),
                      named_by_connection=z3.Lambda([i, j], z3.IntVal(-1)),
                      named_by_channel=z3.Lambda([i, j], z3.IntVal(-1)),
                      named_by_tag=z3.Lambda([i, j], z3.IntVal(0)),
                      publish_in_flight=z3.Lambda([i, j], z3.BoolVal(False)),
                      publish_in_flight_twice=z3.Lambda([i, j], z3.BoolVal(False)),
                      tx_held_twice=z3.Lambda([i, j], z3.BoolVal(False)),
                      tx_held_by_channel=z3.Lambda([i, j], z3.IntVal(0)),
                      **{name: z3.Lambda([i, j], z3.IntVal(0)) for name in _CHANNEL_COUNTS},
                      consumer_deliveries=z3.Lambda([i, j, k], z3.IntVal(0)),
                      consumer_limit=z3.Lambda([i, j, k], z3.IntVal(0)),
                      consumer_no_ack=z3.Lambda([i, j, k], z3.BoolVal(False)),
                      holds_confirm=z3.Lambda([i, j], z3.BoolVal(False)),
                      unconfirmed_publish_channel=z3.Lambda([i, j], z3.IntVal(0)),
                      unconfirmed_publish_seq=z3.Lambda([i, j], z3.IntVal(0)), lost_in_crash=lost,
                      auto_in_flight_on=z3.Lambda([i, j], z3.IntVal(0)),
                      gone_this_life=gone_now,
                      # lost on their way (AM-2): their fate is sure, gone in this life already
                      **{name: z3.K(INT, z3.IntVal(DEFAULTS[name])) for name in _SENDING})
    return Transition(x.broker_up, after)


def BrokerRestart(x: Z3State, a: Terms, o: Terms) -> Transition:
    """The broker starts again (DU-1): each existing (durable) queue's ready copies are those on disk,
    marked redelivered (DU-2, DU-3); a recovered copy that had a fate lives again (the spec's ghost
    ``revived``): it is not gone in this life (``gone_this_life``)."""
    def recovered(q, key):
        return z3.If(x.queue_exists[q], x.on_disk[q, key], x.ready[q, key])
    def ahead(q, i, j):         # in enqueue order (faults.restart sorts them by key)
        return z3.If(x.queue_exists[q], z3.And(x.on_disk[q, i], x.on_disk[q, j], i < j), x.ahead_in_queue[q, i, j])
    return Transition(z3.Not(x.broker_up), x.replace(
        broker_up=z3.BoolVal(True), ready=_lam_qk(recovered), ahead_in_queue=_lam_qab(ahead),
        gone_this_life=_lam_qk(lambda q, key: z3.And(x.gone_this_life[q, key], z3.Not(recovered(q, key)))),
        redelivered=_lam_qk(lambda q, key: z3.If(x.queue_exists[q], x.on_disk[q, key], x.redelivered[q, key]))))


def DiskFsync(x: Z3State, a: Terms, o: Terms) -> Transition:
    """One pending write or removal becomes durable (``o.pending``: it differs from the disk and the
    copy is persistent in a durable queue), PC-5: a write is of a live copy, ready or named by an
    outstanding or held-back tag, and not of a deleted queue's (faults.pending_disk)."""
    q, key = a.queue, a.key
    i, j, t = z3.Ints("c_ ch_ t_")
    named = z3.Exists([i, j, t], z3.And(z3.Or(x.outstanding[i, j, t], x.tx_settled[i, j, t]), x.tag_queue[i, j, t] == q,
                                        x.tag_key[i, j, t] == key))
    live = z3.Or(x.ready[q, key], named)
    guard = z3.And(x.broker_up, o.pending,
                   z3.If(a.write, z3.And(live, x.queue_durable[q], x.born[q] < key), z3.Not(live)))
    return Transition(guard, x.replace(on_disk=z3.Store(x.on_disk, q, key, a.write),           # a written copy
                                       holds_confirm=z3.Store(x.holds_confirm, q, key,
                                                              z3.And(x.holds_confirm[q, key], z3.Not(a.write)))))


def NetworkLoss(x: Z3State, a: Terms, o: Terms) -> Transition:
    """Connection c is lost (``o.connected``: it is not down): the broker closes it unless it has
    already (RQ-4; its exclusive queues go, DU-4), the slot is down."""
    c = a.conn
    x2 = _ite(x.broker_end_closed[c], x, close_connection(x, c))
    return Transition(z3.And(x.broker_up, o.connected), _forget(reset_connection(x2, c, z3.BoolVal(False))))


def ClientVanish(x: Z3State, a: Terms, o: Terms) -> Transition:
    """The client of connection c vanishes (faults.vanish): its client is up or closing, the broker holds
    c open, and slot ``o.free_slot`` is free to hold it (a vanished connection's slot that the broker
    closed). What the broker holds of c moves to that slot (``_held_elsewhere``); c is down, nothing in
    flight."""
    c, d = a.conn, o.free_slot
    status = x.client_connection_status
    guard = z3.And(x.broker_up, z3.Or(status[c] == CONN_UP, status[c] == CONN_CLOSING),
                   z3.Not(x.broker_end_closed[c]), c >= 0, d >= 0, status[d] == CONN_GONE, x.broker_end_closed[d])
    return Transition(guard, _forget(reset_connection(_held_elsewhere(x, c, d), c, z3.BoolVal(False))))


def _held_elsewhere(x: Z3State, c, d) -> Z3State:
    """faults.vanish's move: the broker's channels of c, as ``faults.abandoned`` leaves them (an open
    transaction rolled back: its held-back settlements outstanding again, TX-3; no publish numbered,
    no confirm, commit-ok or frame in flight), are slot d's; the queues' round-robins, exclusive owners,
    the deliveries they are sending (faults.rename_connection) and the copies' ghost inverses name d for
    c. Slot d's client is gone and its broker end open; everything else of d is a clean channel's (what a
    free slot holds: ``free_slots_clean``)."""
    def at_d(arr: z3.ArrayRef, arity: int, value: Callable) -> z3.ArrayRef:
        if arity == 2:
            return _lam2(lambda i, j: z3.If(i == d, value(j), arr[i, j]))
        return _lam3(lambda i, j, k: z3.If(i == d, value(j, k), arr[i, j, k]))

    def clean(name: str) -> z3.ArrayRef:
        arr, default = getattr(x, name), DEFAULTS[name]
        return at_d(arr, ARITY[name], lambda *_: default)
    copied = ("channel_status", "channel_mode", "next_tag", "prefetch", "global_limit", "volume",
              "qos_excess", "qos_uncounted")
    copied3 = ("delivered_to_consumer", "consumers", "in_round_robin", "tag_queue", "tag_key", "consumer_deliveries",
               "consumer_no_ack", "consumer_limit")
    cleaned = [f.name for f in FIELDS if f.indices[:1] == (CONNECTION,) and len(f.indices) > 1
               and f.indices[1] != MESSAGE and f.name not in copied + copied3 + ("outstanding", "consumer_outstanding")]
    y = x.replace(
        **{name: clean(name) for name in cleaned},
        **{name: at_d(getattr(x, name), 2, lambda j, arr=getattr(x, name): arr[c, j]) for name in copied},
        **{name: at_d(getattr(x, name), 3, lambda j, k, arr=getattr(x, name): arr[c, j, k]) for name in copied3},
        outstanding=at_d(x.outstanding, 3, lambda j, k: z3.Or(x.outstanding[c, j, k], x.tx_settled[c, j, k])),
        consumer_outstanding=at_d(x.consumer_outstanding, 2,
                                  lambda j: x.consumer_outstanding[c, j] + x.consumer_held_back[c, j]),
        client_connection_status=z3.Store(x.client_connection_status, d, CONN_GONE),
        broker_end_closed=z3.Store(x.broker_end_closed, d, False),
        connection_close_to_client=z3.Store(x.connection_close_to_client, d, False),
        queue_owner=z3.Lambda([_Q], z3.If(x.queue_owner[_Q] == c + 1, d + 1, x.queue_owner[_Q])),
        named_by_connection=_lam_qk(lambda q, key: z3.If(x.named_by_connection[q, key] == c, d,
                                                         x.named_by_connection[q, key])),
        sending_connection=z3.Lambda([_Q], z3.If(x.sending_connection[_Q] == c, d, x.sending_connection[_Q])))
    # c's consumers are d's now: none is left in a round-robin under c.
    return y.replace(in_round_robin=_lam3(lambda i, j, k: z3.And(y.in_round_robin[i, j, k], i != c)))


def BrokerDetect(x: Z3State, a: Terms, o: Terms) -> Transition:
    """The broker notices that the client of the connection held in slot d vanished (faults.detect) and
    closes it as it closes any connection (RQ-4, DU-4)."""
    d = a.conn
    guard = z3.And(x.broker_up, _gone(x, d), z3.Not(x.broker_end_closed[d]))
    return Transition(guard, _forget(close_connection(x, d)))


def BrokerChannelError(x: Z3State, a: Terms, o: Terms) -> Transition:
    """The broker closes open channel (c, ch) of a client's connection with a channel error
    (faults.channel_error, broker.channel_error, ER-1): the channel is closing, keeping the basic.get
    deliveries ``o.kept_tags`` names (``o.keeps_any``: it keeps some) until close-ok and requeueing the rest
    (RQ-4); channel.close goes out, with nothing behind it."""
    c, ch = a.conn, a.ch
    guard = z3.And(_channel_open(x, c, ch), z3.Not(_gone(x, c)), x.view_status[c, ch] == C_OPEN,
                   z3.Not(x.open_to_broker[c, ch]))
    y = reset_channel(x, c, ch, CH_CLOSING, (o.keeps_any, o.kept_tags))
    return Transition(guard, _forget(y.replace(
        frames_to_client=z3.Store(y.frames_to_client, c, ch, True),
        channel_close_to_client=z3.Store(y.channel_close_to_client, c, ch, True),
        sent_after_close=z3.Store(y.sent_after_close, c, ch, False))))


# ---------------------------------------------------------------- client actions (spec.client)

def ClientConnect(x: Z3State, a: Terms, o: Terms) -> Transition:
    """A new connection in a slot that is down (``o.down``), to a broker that is up."""
    return Transition(z3.And(x.broker_up, a.ch == 0, o.down),
                      _forget(reset_connection(x, a.conn, a.channels_open, CONN_UP)))


def ClientReceive(x: Z3State, a: Terms, o: Terms) -> Transition:
    """The client reads the next frame (``o.readable``; ``o.method`` is the frame, ``o.more``: another
    one follows it on that channel): a connection.close or close-ok ends the connection; a
    channel.close is answered with close-ok when ``answer`` (``o.close_left``: another channel.close
    is still in flight on that channel after it); an automatic-mode delivery read
    (``o.auto``: of copy (``o.auto_queue``, ``o.auto_key``), in flight on this connection) is in flight no more."""
    c, ch, m = a.conn, a.ch, o.method
    closes = z3.Or(m == CONNECTION_CLOSE, m == CONNECTION_CLOSE_OK)
    reads_ok = m == CHANNEL_OPEN_OK
    delivery = z3.Or(m == BASIC_DELIVER, m == BASIC_GET_OK)
    # A delivery read while no open-ok is in flight is the broker's channel's (``deliveries_to_client``):
    # the one of least tag, as they travel in tag order (each goes out with the next tag, above every tag
    # in ``deliveries_to_client``: delivery_tags_increase). While an open-ok is in flight, what the client
    # reads ahead of it is an older channel's.
    current = z3.And(delivery, z3.Not(x.open_ok_to_client[c, ch]))
    t = z3.Int("t_")
    least = z3.ForAll([t], z3.Implies(t < o.tag, z3.Not(x.deliveries_to_client[c, ch, t])))
    # A confirm read while no open-ok is in flight is one the broker's channel sent
    # (``single_confirms_in_flight``, ``multiple_confirm_in_flight``); ``o.multiple_confirm_in_flight_left``:
    # the highest multiple one left, lower only after reading one.
    confirm = z3.Or(m == BASIC_ACK, m == BASIC_NACK)
    ours = z3.And(confirm, z3.Not(x.open_ok_to_client[c, ch]))
    highest_multiple = x.multiple_confirm_in_flight[c, ch]
    guard = z3.And(o.readable, x.frames_to_client[c, ch], z3.Implies(closes, x.connection_close_to_client[c]),
                   z3.Implies(m == CHANNEL_CLOSE, x.channel_close_to_client[c, ch]), z3.Implies(o.close_left, o.more),
                   z3.Implies(o.auto, z3.And(delivery, x.auto_in_flight_on[o.auto_queue, o.auto_key] == c + 1)),
                   z3.Implies(reads_ok, z3.And(x.open_ok_to_client[c, ch], z3.Not(x.older_frames_ahead[c, ch]))),
                   z3.Implies(o.older_frames_ahead_left, z3.And(x.older_frames_ahead[c, ch], o.more)),
                   z3.Implies(current, z3.And(x.deliveries_to_client[c, ch, o.tag], least)),
                   z3.Implies(ours,
                              z3.If(o.multiple, z3.And(1 <= o.tag, o.tag <= highest_multiple),
                                    x.single_confirms_in_flight[c, ch, o.tag])),
                   0 <= o.multiple_confirm_in_flight_left, o.multiple_confirm_in_flight_left <= highest_multiple,
                   z3.Implies(z3.Not(o.more), o.multiple_confirm_in_flight_left == 0),
                   z3.Implies(z3.Not(z3.And(ours, o.multiple)),
                              z3.Or(o.multiple_confirm_in_flight_left == highest_multiple, z3.Not(o.more))))
    reads_close = m == CHANNEL_CLOSE
    # client.receive: channel.close (and the close-ok of the client's own channel.close) leave the view
    # closed, channel.open-ok makes it a new open one; a delivery is the last tag read.
    ends = z3.Or(reads_close, z3.And(m == CHANNEL_CLOSE_OK, x.view_status[c, ch] == C_CLOSING))
    x = x.replace(frames_to_client=z3.Store(x.frames_to_client, c, ch, o.more),
                  channel_close_to_client=z3.Store(x.channel_close_to_client, c, ch,
                                                   z3.If(reads_close, o.close_left, x.channel_close_to_client[c, ch])),
                  sent_after_close=z3.Store(x.sent_after_close, c, ch,
                                            z3.And(x.sent_after_close[c, ch], z3.Implies(reads_close, o.close_left))),
                  auto_in_flight_on=z3.If(o.auto, z3.Store(x.auto_in_flight_on, o.auto_queue, o.auto_key, 0),
                                          x.auto_in_flight_on),
                  open_ok_to_client=z3.Store(x.open_ok_to_client, c, ch,
                                             z3.And(x.open_ok_to_client[c, ch], z3.Not(reads_ok), o.more)),
                  older_frames_ahead=z3.Store(x.older_frames_ahead, c, ch, o.older_frames_ahead_left),
                  deliveries_to_client=_lam3(lambda i, j, k: z3.And(x.deliveries_to_client[i, j, k], z3.Not(z3.And(
                      i == c, j == ch, z3.Or(z3.Not(o.more), z3.And(current, k == o.tag)))))),
                  single_confirms_in_flight=_lam3(lambda i, j, k: z3.And(
                      x.single_confirms_in_flight[i, j, k],
                      z3.Not(z3.And(i == c, j == ch,
                                    z3.Or(z3.Not(o.more), z3.And(ours, z3.Not(o.multiple), k == o.tag)))))),
                  multiple_confirm_in_flight=z3.Store(x.multiple_confirm_in_flight, c, ch,
                                                      o.multiple_confirm_in_flight_left),
                  view_status=z3.Store(x.view_status, c, ch,
                                       z3.If(reads_ok, C_OPEN, z3.If(ends, C_CLOSED, x.view_status[c, ch]))),
                  view_last_tag=z3.Store(x.view_last_tag, c, ch,
                                         z3.If(delivery, o.tag,
                                               z3.If(z3.Or(reads_ok, ends), 0, x.view_last_tag[c, ch]))))
    # client.receive: a confirm adds its number, or with multiple every number up to it that the client
    # has published; a view made new (open-ok) or closed has none, and publishes nothing in no mode.
    publish_count = x.view_publish_count[c, ch]
    upto = z3.If(o.tag < publish_count, o.tag, publish_count)
    fresh_view = z3.Or(reads_ok, ends)
    def seen(k):
        covered = z3.If(o.multiple, z3.And(1 <= k, k <= upto), k == o.tag)
        return z3.And(z3.Not(fresh_view), z3.Or(x.view_confirmed[c, ch, k], z3.And(confirm, covered)))
    x = x.replace(view_confirmed=_lam3(lambda i, j, k: z3.If(z3.And(i == c, j == ch), seen(k),
                                                             x.view_confirmed[i, j, k])),
                  view_publish_count=z3.Store(x.view_publish_count, c, ch, z3.If(fresh_view, 0, publish_count)),
                  view_mode=z3.Store(x.view_mode, c, ch, z3.If(fresh_view, MODE_NONE, x.view_mode[c, ch])))
    after = _cases(x, (closes, reset_connection(x, c, z3.BoolVal(False))),
                   (z3.And(m == CHANNEL_CLOSE, a.answer), _write(x, c, ch)))
    return Transition(guard, _forget(after))


def _client_writes(x: Z3State, a: Terms, o: Terms, views=(C_OPEN,), kind: str = OTHER_FRAME) -> Transition:
    """A client method on a channel: its precondition is the connection up (``client_connection_status``),
    the client's view of the channel in one of ``views`` (open, for every method but channel.open and
    close-ok: spec.client), and ``o.may_send``, the rest of the view (a consumer it started); it writes one frame."""
    c, ch = a.conn, a.ch
    view = x.view_status[c, ch]
    guard = z3.And(x.client_connection_status[c] == CONN_UP, o.may_send, 1 <= ch, ch <= x.channels_per_connection,
                   z3.Or([view == v for v in views]))
    return Transition(guard, _write(x, c, ch, kind))


def _view_now(t: Transition, a: Terms, status) -> Transition:
    """``t`` with the client's view of the channel left with ``status`` (a fresh view: no tag read, no
    mode, nothing published or seen confirmed)."""
    y = t.after
    c, ch = a.conn, a.ch
    return Transition(t.guard, y.replace(view_status=z3.Store(y.view_status, c, ch, status),
                                         view_last_tag=z3.Store(y.view_last_tag, c, ch, 0),
                                         view_mode=z3.Store(y.view_mode, c, ch, MODE_NONE),
                                         view_publish_count=z3.Store(y.view_publish_count, c, ch, 0),
                                         view_confirmed=_lam3(lambda i, j, k: z3.And(y.view_confirmed[i, j, k],
                                                                                     z3.Or(i != c, j != ch)))))


def ClientPublish(x: Z3State, a: Terms, o: Terms) -> Transition:
    """basic.publish of the connection's next message (client.publish): message (c, published + 1) is
    in flight to the broker."""
    c = a.conn
    t = _client_writes(x, a, o)
    n = x.published[c] + 1
    ch = a.ch
    return Transition(t.guard, t.after.replace(published=z3.Store(x.published, c, n),
                                               publish_in_flight=z3.Store(x.publish_in_flight, c, n, True),
                                               publish_in_flight_twice=z3.Store(x.publish_in_flight_twice, c, n,
                                                                                z3.Or(x.publish_in_flight_twice[c, n],
                                                                                      x.publish_in_flight[c, n])),
                                               # PC-1: numbered by the client in confirm mode; one more
                                               # publish in flight, behind the first select
                                               view_publish_count=z3.Store(
                                                   x.view_publish_count, c, ch,
                                                   x.view_publish_count[c, ch] + z3.If(
                                                       x.view_mode[c, ch] == MODE_CONFIRM, 1, 0)),
                                               publishes_to_broker=z3.Store(x.publishes_to_broker, c, ch,
                                                                            x.publishes_to_broker[c, ch] + 1),
                                               publishes_behind_select=z3.Store(
                                                   x.publishes_behind_select, c, ch,
                                                   x.publishes_behind_select[c, ch] + z3.If(
                                                       x.first_select_to_broker[c, ch] == CONFIRM_SELECT, 1, 0))))


ClientConsume = ClientCancel = ClientGet = ClientAck = ClientNack = ClientReject = \
    ClientQos = ClientRecover = ClientTxCommit = ClientTxRollback = \
    ClientDeclareQueue = ClientBindQueue = ClientPurgeQueue = ClientDeleteQueue = _client_writes


def _select(x: Z3State, a: Terms, o: Terms, mode: int, select: int, other: int) -> Transition:
    """confirm.select or tx.select: the view takes ``mode`` unless it is in the ``other`` one (PC-8: the
    broker refuses it then), and the frame is the first select in flight if none is."""
    t = _client_writes(x, a, o)
    c, ch = a.conn, a.ch
    y = t.after
    return Transition(t.guard, y.replace(
        view_mode=z3.Store(y.view_mode, c, ch, z3.If(x.view_mode[c, ch] == other, other, mode)),
        first_select_to_broker=z3.Store(y.first_select_to_broker, c, ch,
                                        z3.If(x.first_select_to_broker[c, ch] == 0, select,
                                              x.first_select_to_broker[c, ch]))))


def ClientConfirmSelect(x: Z3State, a: Terms, o: Terms) -> Transition:
    """confirm.select: the client numbers its publishes from now on (PC-1), unless in tx mode."""
    return _select(x, a, o, MODE_CONFIRM, CONFIRM_SELECT, MODE_TX)


def ClientTxSelect(x: Z3State, a: Terms, o: Terms) -> Transition:
    """tx.select: the client is in tx mode, unless in confirm mode."""
    return _select(x, a, o, MODE_TX, TX_SELECT, MODE_CONFIRM)


def ClientChannelClose(x: Z3State, a: Terms, o: Terms) -> Transition:
    """channel.close from the client: its view is closing."""
    return _view_now(_client_writes(x, a, o), a, C_CLOSING)


def ClientChannelOpen(x: Z3State, a: Terms, o: Terms) -> Transition:
    """channel.open, of a closed channel or (out of turn) of an open one: the view waits for the open-ok."""
    return _view_now(_client_writes(x, a, o, (C_CLOSED, C_OPEN), OPEN_FRAME), a, C_OPENING)


def ClientChannelCloseOk(x: Z3State, a: Terms, o: Terms) -> Transition:
    """channel.close-ok: after the client's own channel.close its view is closed; otherwise (answering a
    channel.close it read, or out of turn) the view stays as it is."""
    t = _client_writes(x, a, o, (C_CLOSED, C_OPEN, C_CLOSING), CLOSE_OK_FRAME)
    closing = x.view_status[a.conn, a.ch] == C_CLOSING
    return Transition(t.guard, _ite(closing, _view_now(t, a, C_CLOSED).after, t.after))


def ClientConnectionClose(x: Z3State, a: Terms, o: Terms) -> Transition:
    """connection.close from the client (``o.may_send``: the connection is up): it is closing, one frame on
    channel 0."""
    c = a.conn
    t = Transition(z3.And(x.client_connection_status[c] == CONN_UP, o.may_send, a.ch == 0),
                   _write(x, c, a.ch, OTHER_FRAME))
    return Transition(t.guard,
                      t.after.replace(client_connection_status=z3.Store(x.client_connection_status, c, CONN_CLOSING)))


# ---------------------------------------------------------------- the table

def action_classes() -> tuple[type, ...]:
    """Every concrete spec action class (``spec.actions.all_actions``, where they are listed)."""
    return A.all_actions()


def param_sorts(cls: type) -> dict[str, z3.SortRef]:
    """The Z3 sorts of an action class's fields (ints and bools)."""
    import dataclasses
    out = {}
    for f in dataclasses.fields(cls):
        out[f.name] = BOOL if f.type in ("bool", bool) else INT
    return out


def _live(x: Z3State, q, key) -> z3.BoolRef:
    """Copy (q, key) is live: ready, or named by the outstanding or held-back tag its ghost inverse
    gives (copies_conserved makes that the only tag that can name it). A copy in automatic mode, in
    flight or on its way to its channel (``sending_key``), is not: the spec counts it as a live place
    (copies_conserved) whose fate is sure, gone in this life (live_copies_unfated)."""
    c, ch, t = x.named_by_connection[q, key], x.named_by_channel[q, key], x.named_by_tag[q, key]
    return z3.Or(x.ready[q, key],
                 z3.And(z3.Or(x.outstanding[c, ch, t], x.tx_settled[c, ch, t]), x.tag_queue[c, ch, t] == q,
                        x.tag_key[c, ch, t] == key))


def gone_in_this_life(relation: Callable[[Z3State, Terms, Terms], Transition]) -> Callable:
    """``relation`` with the ghost ``gone_this_life``: every live copy that is live no more is gone in this life.
    Outside a crash (which keeps the copies on disk for the restart: ``BrokerCrash``) and the restart
    (``BrokerRestart``), the spec records a fate (``storage.add_fates``) for every copy that stops being
    live (ack, reject or nack without requeue, dead-lettering, purge, queue.delete, a requeue into a
    deleted queue, a queue failure), or hands it over in automatic mode, or admits it for an
    automatic-mode consumer under a global limit (on its way to the channel: ``sending_key``; its fate is
    sure either way: AM-2), and for no other copy but those already in flight or on their way in
    automatic mode."""
    def with_fates(x: Z3State, a: Terms, o: Terms) -> Transition:
        t = relation(x, a, o)
        y = t.after
        gone = _lam_qk(lambda q, key: z3.Or(x.gone_this_life[q, key],
                                            z3.And(_live(x, q, key), z3.Not(_live(y, q, key)))))
        return Transition(t.guard, y.replace(gone_this_life=gone))
    with_fates.__name__ = relation.__name__
    with_fates.__doc__ = relation.__doc__
    return with_fates


RELATIONS: dict[type, Callable[[Z3State, Terms, Terms], Transition]] = {
    cls: (globals()[cls.__name__] if cls in (A.BrokerCrash, A.BrokerRestart)
          else gone_in_this_life(globals()[cls.__name__])) for cls in action_classes()
}


def symbolic(cls: type, prefix: str) -> tuple[Terms, Terms]:
    """Fresh Z3 constants for an action's fields and its oracles."""
    a = Terms({n: z3.Const(f"{prefix}.{n}", s) for n, s in param_sorts(cls).items()})
    o = Terms({n: z3.Const(f"{prefix}.o.{n}", s) for n, s in oracles.sorts(cls).items()})
    return a, o


def concrete(action) -> Terms:
    """A concrete action's fields as Z3 values."""
    import dataclasses
    return Terms({f.name: z3.BoolVal(v) if isinstance(v, bool) else z3.IntVal(v)
                  for f in dataclasses.fields(action) for v in (getattr(action, f.name),)})
