"""The invariants of ``spec.properties`` that the model's families can state, as Z3 formulas over ``model.state``,
with the same names, and the helper invariants their proofs need (each also registered in
``spec.properties``, so that exploration checks it too).

Each invariant is a quantifier-free predicate ``P(x, c, ch, s)`` of one channel (c, ch) and one publish
number s; the invariant is ``forall c, ch, s. P``. The proofs negate it at fresh (c0, ch0, s0), the
channel and number a counterexample then shows, and give Z3 the hypothesis's instance there too.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import z3

from rabbitproof.spec.frames import CONFIRM_SELECT, TX_SELECT
from rabbitproof.spec.state import (
    C_CLOSED, C_OPEN, C_OPENING, CH_CLOSED, CH_CLOSING, CH_OPEN, CONN_DOWN, CONN_GONE, CONN_UP, MODE_CONFIRM, MODE_NONE,
    MODE_TX,
)

from .state import Z3State


@dataclass(frozen=True)
class Invariant:
    """A Z3 invariant: its per-channel predicate, what of the spec property it covers, and its helpers."""

    name: str
    at: Callable[[Z3State, z3.ArithRef, z3.ArithRef, z3.ArithRef], z3.BoolRef]
    covers: str
    helpers: tuple[str, ...] = ()

    def holds(self, x: Z3State) -> z3.BoolRef:
        c, ch, s = z3.Ints("inv_c inv_ch inv_s")
        return z3.ForAll([c, ch, s], self.at(x, c, ch, s))


def _no_publish_numbers(x: Z3State, c, ch, s) -> z3.BoolRef:
    return z3.And(x.publish_seq[c, ch] == 0, z3.Not(x.unconfirmed[c, ch, s]), z3.Not(x.confirmed[c, ch, s]))


def _in_step(x: Z3State, c, ch) -> z3.BoolRef:
    """The client holds open the channel the broker holds open (spec.properties.client_in_step)."""
    return z3.And(x.channel_status[c, ch] == CH_OPEN, z3.Not(x.broker_end_closed[c]), x.view_status[c, ch] == C_OPEN)


def confirms_exactly_once(x: Z3State, c, ch, s) -> z3.BoolRef:
    """PC-1, PC-2, PC-3. The broker's side: publishes are numbered 1..seq, and each is either
    unconfirmed or confirmed, never both, never neither. The client's side, while it holds the channel
    open: what it saw confirmed the broker confirmed, and it numbered at least the broker's publishes."""
    return z3.And(x.publish_seq[c, ch] >= 0, z3.Not(z3.And(x.unconfirmed[c, ch, s], x.confirmed[c, ch, s])),
                  z3.And(1 <= s, s <= x.publish_seq[c, ch]) == z3.Or(x.unconfirmed[c, ch, s], x.confirmed[c, ch, s]),
                  z3.Implies(_in_step(x, c, ch), z3.And(z3.Implies(x.view_confirmed[c, ch, s], x.confirmed[c, ch, s]),
                                                        x.view_publish_count[c, ch] >= x.publish_seq[c, ch])))


def _numbered(x: Z3State, c, ch) -> z3.ArithRef:
    """The publishes in flight the broker's channel will number if it takes them while open
    (spec.properties.numbered_in_flight): all in confirm mode, in neither mode those behind the first
    select if it is confirm.select."""
    mode = x.channel_mode[c, ch]
    return z3.If(mode == MODE_CONFIRM, x.publishes_to_broker[c, ch],
                 z3.If(mode == MODE_NONE, x.publishes_behind_select[c, ch], 0))


def confirms_in_step(x: Z3State, c, ch, s) -> z3.BoolRef:
    """Helper (spec.properties.confirms_in_step): on an open channel every confirm of it in flight
    covers confirmed publishes only (a multiple one, each number up to it); while an open-ok is in
    flight the broker's channel numbered and confirmed nothing and is in neither mode; while the client
    holds the channel open its mode and the broker's agree (or the first select in flight makes them),
    and it numbered at least what the broker numbered plus the publishes in flight it will number. And
    what the fields are: a select only with frames in flight, counts never below 0."""
    mode, first_select = x.channel_mode[c, ch], x.first_select_to_broker[c, ch]
    behind_select, publishes = x.publishes_behind_select[c, ch], x.publishes_to_broker[c, ch]
    highest_multiple, view_mode = x.multiple_confirm_in_flight[c, ch], x.view_mode[c, ch]
    nnum = _numbered(x, c, ch)
    return z3.And(
        0 <= behind_select, behind_select <= publishes, highest_multiple >= 0,
        z3.Or(first_select == 0, first_select == CONFIRM_SELECT, first_select == TX_SELECT),
        z3.Implies(first_select != CONFIRM_SELECT, behind_select == 0),
        z3.Implies(z3.Not(x.other_frames_to_broker[c, ch]), z3.And(first_select == 0, publishes == 0)),
        z3.Implies(x.channel_status[c, ch] == CH_OPEN, z3.And(z3.Implies(x.single_confirms_in_flight[c, ch, s],
                                                                         x.confirmed[c, ch, s]),
                                                              z3.Implies(z3.And(1 <= s, s <= highest_multiple),
                                                                         x.confirmed[c, ch, s]))),
        z3.Implies(z3.And(z3.Not(x.broker_end_closed[c]), x.open_ok_to_client[c, ch]),
                   z3.And(x.publish_seq[c, ch] == 0, mode == MODE_NONE, z3.Not(x.unconfirmed[c, ch, s]),
                          z3.Not(x.confirmed[c, ch, s]),
                          z3.Not(x.single_confirms_in_flight[c, ch, s]), highest_multiple == 0)),
        z3.Implies(_in_step(x, c, ch), z3.And(
            x.view_publish_count[c, ch] >= x.publish_seq[c, ch] + nnum,
            z3.Implies(view_mode == MODE_NONE, z3.And(mode == MODE_NONE, first_select == 0, nnum == 0)),
            z3.Implies(view_mode == MODE_CONFIRM,
                       z3.Or(mode == MODE_CONFIRM, z3.And(mode == MODE_NONE, first_select == CONFIRM_SELECT))),
            z3.Implies(view_mode == MODE_TX,
                       z3.And(nnum == 0, z3.Or(mode == MODE_TX, z3.And(mode == MODE_NONE, first_select == TX_SELECT)))),
            z3.Or(view_mode == MODE_NONE, view_mode == MODE_CONFIRM, view_mode == MODE_TX))))


def confirm_and_tx_exclusive(x: Z3State, c, ch, s) -> z3.BoolRef:
    """PC-8, TX-1: a tx channel has no publish numbering; a confirm channel holds nothing back."""
    return z3.And(z3.Implies(x.channel_mode[c, ch] == MODE_TX, _no_publish_numbers(x, c, ch, s)),
                  z3.Implies(x.channel_mode[c, ch] == MODE_CONFIRM,
                             z3.And(z3.Not(x.tx_holds_back[c, ch]), z3.Not(x.commit_pending[c, ch]))))


def plain_channel_holds_nothing(x: Z3State, c, ch, s) -> z3.BoolRef:
    """Helper: a channel is in one of the three modes, and in neither confirm nor tx mode it numbers no
    publish and holds nothing back."""
    mode = x.channel_mode[c, ch]
    return z3.And(z3.Or(mode == MODE_NONE, mode == MODE_CONFIRM, mode == MODE_TX),
                  z3.Implies(mode == MODE_NONE, z3.And(_no_publish_numbers(x, c, ch, s), z3.Not(x.tx_holds_back[c, ch]),
                                                       z3.Not(x.commit_pending[c, ch]))))


def delivery_tags_increase(x: Z3State, c, ch, t) -> z3.BoolRef:
    """DT-1, DT-2. The broker's side: every outstanding tag was issued, 1 <= tag < next_tag, and is
    outstanding once (a tag indexes the set). The client's side: on an open channel, every delivery of this
    channel in flight to the client (``deliveries_to_client``) has a tag that was issued; and while the client
    holds the channel open too (``client_in_step``), no open-ok is in flight, so every delivery in flight is
    in ``deliveries_to_client``, and each is above the last tag the client read, which is below the next tag.
    They travel in increasing tag order: each goes out with the next tag, above every tag in
    ``deliveries_to_client``, and the client reads the least (``model.actions.ClientReceive``)."""
    open_ = x.channel_status[c, ch] == CH_OPEN
    return z3.And(z3.Implies(x.outstanding[c, ch, t], z3.And(1 <= t, t < x.next_tag[c, ch])),
                  z3.Implies(z3.And(open_, x.deliveries_to_client[c, ch, t]), z3.And(1 <= t, t < x.next_tag[c, ch])),
                  z3.Implies(z3.And(open_, x.view_status[c, ch] == C_OPEN),
                             z3.And(z3.Not(x.open_ok_to_client[c, ch]), x.view_last_tag[c, ch] < x.next_tag[c, ch],
                                    z3.Implies(x.deliveries_to_client[c, ch, t], x.view_last_tag[c, ch] < t))))


def channel_lifecycle(x: Z3State, c, ch, t) -> z3.BoolRef:
    """Helper (spec.properties.channel_lifecycle): a connection the broker has closed has its channels
    closed; otherwise an open-ok in flight means the broker's channel open, the client waiting for it
    (view opening, or closed after an older channel.close) and nothing but close-ok and channel.open in
    flight to the broker; a channel.open the broker may open the channel for (its channel not open, or
    a frame other than close-ok ahead of it) means the client waiting, and nothing but those two behind
    it. And what the flags are: frames ahead of an open-ok only with one in flight; a frame ahead of or
    behind the first channel.open only with one in flight, and then exactly the frames other than
    close-ok and channel.open."""
    waiting = z3.Or(x.view_status[c, ch] == C_OPENING, x.view_status[c, ch] == C_CLOSED)
    opening, ahead, behind, other = (x.open_to_broker[c, ch], x.frame_ahead_of_open[c, ch], x.frame_behind_open[c, ch],
                                     x.other_frames_to_broker[c, ch])
    return z3.And(
        z3.Implies(x.older_frames_ahead[c, ch], x.open_ok_to_client[c, ch]),
        z3.Implies(z3.Not(opening), z3.And(z3.Not(ahead), z3.Not(behind))),
        z3.Implies(z3.Or(opening, x.open_ok_to_client[c, ch]), z3.And(1 <= ch, ch <= x.channels_per_connection)),
        z3.Implies(opening, other == z3.Or(ahead, behind)),
        z3.Implies(x.broker_end_closed[c], x.channel_status[c, ch] == CH_CLOSED),
        z3.Implies(z3.And(z3.Not(x.broker_end_closed[c]), x.open_ok_to_client[c, ch]),
                   z3.And(x.channel_status[c, ch] == CH_OPEN, waiting, z3.Not(other))),
        z3.Implies(z3.And(z3.Not(x.broker_end_closed[c]), opening, z3.Or(x.channel_status[c, ch] != CH_OPEN, ahead)),
                   z3.And(waiting, z3.Not(behind))))


def held_back_tags_issued(x: Z3State, c, ch, t) -> z3.BoolRef:
    """Helper: the next tag is at least 1, and a tag held back by an open transaction was issued and is
    not outstanding as well (a rollback makes it outstanding again, TX-3)."""
    return z3.And(x.next_tag[c, ch] >= 1,
                  z3.Implies(x.tx_settled[c, ch, t],
                             z3.And(1 <= t, t < x.next_tag[c, ch], z3.Not(x.outstanding[c, ch, t]))))


def closed_channel_is_silent(x: Z3State, c, ch, t) -> z3.BoolRef:
    """ER-1, RQ-4: a channel the broker is closing (it sent channel.close and waits for the close-ok)
    has nothing but close-ok in flight to the client after its channel.close; a channel that is not
    open has no consumer, no settlement held back and no consumer delivery outstanding (they were
    stopped and requeued); a closed one has no delivery outstanding at all (a closing one may keep
    basic.get deliveries)."""
    return z3.And(z3.Implies(x.channel_status[c, ch] == CH_CLOSING, z3.Not(x.sent_after_close[c, ch])),
                  z3.Implies(x.channel_status[c, ch] != CH_OPEN,
                             z3.And(z3.Not(x.consumers[c, ch, t]), z3.Not(x.tx_settled[c, ch, t]),
                                    z3.Implies(x.outstanding[c, ch, t],
                                               z3.And(z3.Not(x.delivered_to_consumer[c, ch, t]),
                                                      x.channel_status[c, ch] != CH_CLOSED)))))


def sent_to_open_channels(x: Z3State, c, ch, t) -> z3.BoolRef:
    """Helper: no queue is sending a delivery (``sending_key``, PF-3) to a channel that is not open, or
    of a connection whose broker end is closed: closing the channel or the connection loses it
    (storage.lose_sent), a vanish moves it with the channel, and a slot made new has none. What makes
    two of the model's choices exact: the numbering a queue.delete asks for writes its frame only while
    the channel is open (``model.actions._number``), and a slot reset loses what was on its way to it
    (``reset_connection``). (The third index is a queue.)"""
    sent_here = z3.And(x.sending_key[t] != 0, x.sending_connection[t] == c, x.sending_channel[t] == ch)
    return z3.Implies(sent_here, z3.And(x.channel_status[c, ch] == CH_OPEN, z3.Not(x.broker_end_closed[c])))


def exclusive_queue_has_owner(x: Z3State, c, ch, q) -> z3.BoolRef:
    """DU-4: an existing queue owned by connection c (owner c + 1) is not durable, and c is open: the
    broker has not closed its end and its client is not down. (``q`` ranges over queues.)"""
    return z3.Implies(z3.And(x.queue_exists[q], x.queue_owner[q] != 0, x.queue_owner[q] == c + 1),
                      z3.And(z3.Not(x.broker_end_closed[c]), x.client_connection_status[c] != CONN_DOWN,
                             z3.Not(x.queue_durable[q])))


def down_connection_is_silent(x: Z3State, c, ch, s) -> z3.BoolRef:
    """Helper: a connection whose client is down has nothing in flight either way and every channel
    closed at the broker (so the broker takes no frame of it and sends it nothing)."""
    return z3.Implies(x.client_connection_status[c] == CONN_DOWN,
                      z3.And(x.frames_to_broker[c, ch] == 0, z3.Not(x.frames_to_client[c, ch]),
                             x.channel_status[c, ch] == CH_CLOSED))


def close_sent_only_when_closed(x: Z3State, c, ch, s) -> z3.BoolRef:
    """Helper: a connection.close or close-ok is in flight to a client only once the broker has closed
    its end of that connection."""
    return z3.Implies(x.connection_close_to_client[c], x.broker_end_closed[c])


def redelivered_flag_set(x: Z3State, q, key, _) -> z3.BoolRef:
    """RQ-2, DT-2: a ready copy that was delivered before is marked redelivered. (The first two
    indices are a queue and a key.)"""
    return z3.Implies(z3.And(x.ready[q, key], z3.Not(x.redelivered[q, key])), z3.Not(x.ever_delivered[q, key]))


def queue_in_publication_order(x: Z3State, q, a, b) -> z3.BoolRef:
    """RQ-1 (requeued copies included, RQ-2): of two ready copies of queue q, the one ahead has the
    lower key, the earlier enqueue position. ``ahead_in_queue`` relates ready copies only (the abstraction
    reads it off the queue's list, so that part is true of every spec state; the proof needs it said).
    (The indices are a queue and two keys.)"""
    return z3.Implies(x.ahead_in_queue[q, a, b], z3.And(a < b, x.ready[q, a], x.ready[q, b]))


def copy_keys_issued(x: Z3State, q, key, _) -> z3.BoolRef:
    """Helper: a queue's keys are issued 1, 2, 3, ...: a ready, delivered or stored copy has a key
    between 1 and the number of copies the queue took, the one it is sending (a delivered one: the spec
    lists it in ``delivered``) too; only a ready copy has a redelivered flag."""
    sending = x.sending_key[q]
    return z3.And(x.enqueued[q] >= 0,
                  z3.Implies(z3.Or(x.ready[q, key], x.ever_delivered[q, key], x.on_disk[q, key]),
                             z3.And(1 <= key, key <= x.enqueued[q])),
                  z3.Implies(sending != 0, z3.And(1 <= sending, sending <= x.enqueued[q])),
                  z3.Implies(x.redelivered[q, key], x.ready[q, key]))


def outstanding_copies_were_delivered(x: Z3State, c, ch, t) -> z3.BoolRef:
    """Helper: the copy an outstanding or held-back tag names was delivered."""
    return z3.Implies(z3.Or(x.outstanding[c, ch, t], x.tx_settled[c, ch, t]),
                      x.ever_delivered[x.tag_queue[c, ch, t], x.tag_key[c, ch, t]])


def copies_conserved(x: Z3State, c, ch, t) -> z3.BoolRef:
    """AM-2, AM-3, ACK-1, RQ-4, DU-2. The first half ("in at most one live place"): the copy an
    outstanding or held-back tag t of channel (c, ch) names is not ready, and its ghost inverse gives
    back this tag, so no two tags name one copy (one quantifier, where "no other tag names it" would
    nest a second); while the broker is down no tag is live (a restart makes disk copies ready); and a
    copy in flight in automatic mode is in no other live place (``automatic_copies_in_one_place``), nor
    one on its way to its channel (``sending_copies_in_one_place``). The second half
    (``copies_accounted_for``). (For those three the first two indices are a queue and a key.)"""
    return z3.And(copies_in_one_place(x, c, ch, t), automatic_copies_in_one_place(x, c, ch, t),
                  sending_copies_in_one_place(x, c, ch, t), copies_accounted_for(x, c, ch, t))


def automatic_copies_in_one_place(x: Z3State, q, key, _) -> z3.BoolRef:
    """copies_conserved's first half for the automatic-mode deliveries in flight (AM-2): such a copy
    is not ready, no live tag names it (the tag its ghost inverse gives does not: with the first half,
    then none does), and it is not the one its queue is sending (``sending_key``: that one is in flight
    only once its channel numbers it); it was delivered, and the broker is up (a crash loses them).
    (The indices are a queue and a key.)"""
    c, ch, t = x.named_by_connection[q, key], x.named_by_channel[q, key], x.named_by_tag[q, key]
    named = z3.And(z3.Or(x.outstanding[c, ch, t], x.tx_settled[c, ch, t]), x.tag_queue[c, ch, t] == q,
                   x.tag_key[c, ch, t] == key)
    return z3.Implies(x.auto_in_flight_on[q, key] != 0,
                      z3.And(x.broker_up, x.ever_delivered[q, key], z3.Not(x.ready[q, key]), z3.Not(named),
                             z3.Not(z3.And(key != 0, x.sending_key[q] == key))))


def sending_copies_in_one_place(x: Z3State, q, key, _) -> z3.BoolRef:
    """copies_conserved's first half for the delivery a queue is sending (``sending_key``, PF-3: the
    spec counts it as a live place, ``Queue.sending``): that copy is not ready and no live tag names it
    (the tag its ghost inverse gives does not; that it is not in flight in automatic mode too is
    ``automatic_copies_in_one_place``'s); it was delivered (``copy_keys_issued``: so its key was issued,
    and no copy enqueued later takes it), and the broker is up (a crash loses it). (The indices are a
    queue and a key: the copy is named by its index, guarded by ``sending_key``, so that a proof meets it
    where it meets the copy.)"""
    c, ch, t = x.named_by_connection[q, key], x.named_by_channel[q, key], x.named_by_tag[q, key]
    named = z3.And(z3.Or(x.outstanding[c, ch, t], x.tx_settled[c, ch, t]), x.tag_queue[c, ch, t] == q,
                   x.tag_key[c, ch, t] == key)
    return z3.Implies(z3.And(key != 0, x.sending_key[q] == key),
                      z3.And(x.broker_up, x.ever_delivered[q, key], z3.Not(x.ready[q, key]), z3.Not(named)))


def copies_in_one_place(x: Z3State, c, ch, t) -> z3.BoolRef:
    """copies_conserved's first half: the copy a live tag names is not ready, the broker is up, and
    the copy's ghost inverse gives back this tag."""
    q, key = x.tag_queue[c, ch, t], x.tag_key[c, ch, t]
    return z3.Implies(z3.Or(x.outstanding[c, ch, t], x.tx_settled[c, ch, t]),
                      z3.And(x.broker_up, z3.Not(x.ready[q, key]), x.named_by_connection[q, key] == c,
                             x.named_by_channel[q, key] == ch,
                             x.named_by_tag[q, key] == t))


def copies_accounted_for(x: Z3State, q, key, _) -> z3.BoolRef:
    """copies_conserved's second half: every copy its queue took (key 1..enq) is live (ready, or named
    by the tag its ghost inverse gives), gone with a fate (``gone_this_life``: in this life, or in flight in
    automatic mode, whose fate is sure; a copy a restart revived is live), or, while the broker is
    down, on disk."""
    c, ch, t = x.named_by_connection[q, key], x.named_by_channel[q, key], x.named_by_tag[q, key]
    live = z3.Or(x.ready[q, key],
                 z3.And(z3.Or(x.outstanding[c, ch, t], x.tx_settled[c, ch, t]), x.tag_queue[c, ch, t] == q,
                        x.tag_key[c, ch, t] == key))
    return z3.Implies(z3.And(1 <= key, key <= x.enqueued[q]),
                      z3.Or(live, x.gone_this_life[q, key], z3.And(z3.Not(x.broker_up), x.on_disk[q, key])))


def stored_copies_in_durable_queues(x: Z3State, q, key, _) -> z3.BoolRef:
    """Helper: a durable queue exists (a delete makes a queue not durable, a crash keeps durable ones),
    and a copy on disk is of a durable queue. (The indices are a queue and a key.)"""
    return z3.And(z3.Implies(x.queue_durable[q], x.queue_exists[q]), z3.Implies(x.on_disk[q, key], x.queue_durable[q]))


def down_broker_holds_only_disk(x: Z3State, c, ch, s) -> z3.BoolRef:
    """DU-1, DU-3: while the broker is down no copy is ready and no consumer in a round-robin, only
    durable queues exist, every connection is down with nothing in flight either way. (For the ready
    copies and the queues, the first index is a queue and the second a key.)"""
    return z3.Implies(z3.Not(x.broker_up), z3.And(z3.Not(x.ready[c, ch]), z3.Not(x.in_round_robin[c, ch, s]),
                                                  z3.Implies(x.queue_exists[c], x.queue_durable[c]),
                                                  x.client_connection_status[c] == CONN_DOWN,
                                                  z3.Not(x.frames_to_client[c, ch]), x.frames_to_broker[c, ch] == 0))


def tx_effects_invisible(x: Z3State, c, n, t) -> z3.BoolRef:
    """TX-2 (held-back publishes): a message an open transaction holds back is one no queue ever took
    a copy of, so it is in no queue and has no fate. TX-3, TX-4 (held-back settlements): the copy a
    held-back tag names is not gone in this life (``gone_this_life``: no fate since a restart last recovered
    it). (For the publishes the first two indices are a message, connection and n; for the
    settlements they are a channel, and t is a tag.)"""
    return z3.And(held_back_publishes_unseen(x, c, n, t), held_back_settlements_unfated(x, c, n, t))


def held_back_publishes_unseen(x: Z3State, c, n, _) -> z3.BoolRef:
    """tx_effects_invisible's first half (TX-2): a held-back message is one no queue ever took."""
    return z3.Implies(x.tx_held_by_channel[c, n] != 0, z3.Not(x.taken_by_queue[c, n]))


def held_back_settlements_unfated(x: Z3State, c, ch, t) -> z3.BoolRef:
    """tx_effects_invisible's second half (TX-3, TX-4): a held-back tag's copy is not gone in this life."""
    return z3.Implies(x.tx_settled[c, ch, t], z3.Not(x.gone_this_life[x.tag_queue[c, ch, t], x.tag_key[c, ch, t]]))


def live_copies_unfated(x: Z3State, a, b, d) -> z3.BoolRef:
    """Helper: no live copy (ready, outstanding or held back) is gone in this life, and a copy gone
    in this life has a key that was issued (at most its queue's count), so no new copy is one. (Ready
    copies: a is a queue, b a key; tags: (a, b) is a channel, d a tag.)"""
    return z3.And(_live_copies(x, a, b, d, lambda q, key: z3.Not(x.gone_this_life[q, key])),
                  z3.Implies(x.gone_this_life[a, b], b <= x.enqueued[a]))


def publishes_in_flight_fresh(x: Z3State, c, n, _) -> z3.BoolRef:
    """Helper: a message whose basic.publish is in flight to the broker is numbered 1..published, held
    back by no transaction, and no queue took a copy of it: the broker taking it meets a new message.
    No two frames carry one message, and no message is held back twice."""
    return z3.And(z3.Not(x.publish_in_flight_twice[c, n]), z3.Not(x.tx_held_twice[c, n]),
                  z3.Implies(x.publish_in_flight[c, n],
                             z3.And(x.tx_held_by_channel[c, n] == 0, z3.Not(x.taken_by_queue[c, n]), 1 <= n,
                                    n <= x.published[c])))


def messages_numbered(x: Z3State, c, n, _) -> z3.BoolRef:
    """Helper: a message held back or taken by a queue is numbered 1..published: the client's next
    message (published + 1) is new."""
    return z3.And(x.published[c] >= 0,
                  z3.Implies(z3.Or(x.tx_held_by_channel[c, n] != 0, x.taken_by_queue[c, n]),
                             z3.And(1 <= n, n <= x.published[c])))


def prefetch_respected(x: Z3State, c, ch, k) -> z3.BoolRef:
    """PF-5, TX-3 (the index k is a consumer tag of channel (c, ch)): an automatic-mode consumer has no
    delivery outstanding or held back, a consumer with a limit holds no more than it, and a channel
    with a global limit holds no more consumer deliveries (outstanding or held back) than the limit
    plus ``qos_uncounted``, or than ``qos_excess``."""
    mine = x.consumer_deliveries[c, ch, k]
    total = x.consumer_outstanding[c, ch] + x.consumer_held_back[c, ch]
    bound = x.global_limit[c, ch] + x.qos_uncounted[c, ch]
    return z3.And(z3.Implies(z3.And(x.consumers[c, ch, k], x.consumer_no_ack[c, ch, k]), mine == 0),
                  z3.Implies(z3.And(x.consumers[c, ch, k], x.consumer_limit[c, ch, k] != 0),
                             mine <= x.consumer_limit[c, ch, k]),
                  z3.Implies(x.global_limit[c, ch] != 0,
                             total <= z3.If(bound >= x.qos_excess[c, ch], bound, x.qos_excess[c, ch])))


def prefetch_counts_sane(x: Z3State, c, ch, k) -> z3.BoolRef:
    """Helper: the counts are never below 0, the limits and qos_uncounted neither, and a consumer tag that is no
    consumer of the channel counts no delivery (a cancel marks its deliveries a former consumer's)."""
    return z3.And(x.consumer_outstanding[c, ch] >= 0, x.consumer_held_back[c, ch] >= 0,
                  x.consumer_deliveries[c, ch, k] >= 0, x.prefetch[c, ch] >= 0,
                  x.global_limit[c, ch] >= 0, x.qos_uncounted[c, ch] >= 0, x.consumer_limit[c, ch, k] >= 0,
                  z3.Implies(z3.Not(x.consumers[c, ch, k]), x.consumer_deliveries[c, ch, k] == 0))


def prefetch_volume_covers(x: Z3State, c, ch, k) -> z3.BoolRef:
    """Helper: under a global limit, the consumer deliveries outstanding or held back are no more than
    the limit's volume plus the held-back ones it left uncounted when it was set (so a delivery, which
    needs volume < limit, keeps the channel within limit + qos_uncounted)."""
    return z3.Implies(x.global_limit[c, ch] != 0,
                      x.consumer_outstanding[c, ch] + x.consumer_held_back[c, ch]
                      <= x.volume[c, ch] + x.qos_uncounted[c, ch])


def _unsafe(x: Z3State, q, key) -> z3.BoolRef:
    """Copy (q, key), if live, is one PC-5 asks to be on disk once its message is confirmed and is not:
    persistent, in a durable queue that is no dead-letter target, not a deleted queue's (key above
    ``born``), and not on disk."""
    return z3.And(x.persistent[q, key], x.queue_durable[q], x.born[q] < key, z3.Not(x.dead_letter_target[q]),
                  z3.Not(x.on_disk[q, key]))


def _live_copies(x: Z3State, a, b, d, prop: Callable) -> z3.BoolRef:
    """``prop`` of every live copy, as two guarded formulas over the same three indices: a ready copy
    (queue a, key b), and the copy an outstanding or held-back tag d of channel (a, b) names."""
    q, key = x.tag_queue[a, b, d], x.tag_key[a, b, d]
    return z3.And(z3.Implies(x.ready[a, b], prop(a, b)),
                  z3.Implies(z3.Or(x.outstanding[a, b, d], x.tx_settled[a, b, d]), prop(q, key)))


def confirmed_only_when_on_disk(x: Z3State, a, b, d) -> z3.BoolRef:
    """PC-5, PC-4: a live copy (ready, outstanding or held back) of a message confirmed with basic.ack
    that is persistent, in a durable queue that is no dead-letter target, and not a deleted queue's,
    is on disk. (Ready copies: a is a queue, b a key; tags: (a, b) is a channel, d a tag.)"""
    return _live_copies(x, a, b, d, lambda q, key: z3.Not(z3.And(
        _unsafe(x, q, key), x.message_acked[x.message_connection[q, key], x.message_number[q, key]])))


def unwritten_copies_hold_their_confirm(x: Z3State, a, b, d) -> z3.BoolRef:
    """Helper: a live or stored copy's key was issued (at most the queue's count: a queue declared again is
    born above it), and a live copy as above that is not on disk carries a message not confirmed with
    basic.ack, numbered 1..published, in flight to no one and held back by no transaction, and either holds up
    its own message's publish's confirm (``holds_confirm``) or its message has no publish left to ack (plain,
    tx or nacked)."""
    def waits(q, key):
        c, n = x.message_connection[q, key], x.message_number[q, key]
        return z3.And(key <= x.enqueued[q], z3.Implies(
            _unsafe(x, q, key), z3.And(z3.Not(x.message_acked[c, n]), z3.Not(x.publish_in_flight[c, n]),
                                       x.tx_held_by_channel[c, n] == 0,
                                       n <= x.published[c],
                                       z3.Or(x.holds_confirm[q, key], x.unconfirmed_publish_channel[c, n] == 0))))
    return z3.And(_live_copies(x, a, b, d, waits), z3.Implies(x.on_disk[a, b], b <= x.enqueued[a]))


def pending_messages_numbered(x: Z3State, c, n, _) -> z3.BoolRef:
    """Helper: a message in flight to the broker or held back by a transaction is neither confirmed nor
    carried by an unconfirmed publish; one confirmed, or carried by an unconfirmed publish, is numbered
    1..published (so the client's next message is neither). (The indices are a message.)"""
    return z3.And(z3.Implies(z3.Or(x.publish_in_flight[c, n], x.tx_held_by_channel[c, n] != 0),
                             z3.And(z3.Not(x.message_acked[c, n]), x.unconfirmed_publish_channel[c, n] == 0)),
                  z3.Implies(z3.Or(x.message_acked[c, n], x.unconfirmed_publish_channel[c, n] != 0),
                             z3.And(1 <= n, n <= x.published[c])))


def _counted(x: Z3State, q, key) -> z3.BoolRef:
    """Copy (q, key), if lost in a crash, is one PC-10 counts: persistent, in a durable queue that is no
    dead-letter target, and not a deleted queue's (key above ``born``). The queue's durability and
    ``born`` are read now, as the spec's property reads them."""
    return z3.And(x.persistent[q, key], x.queue_durable[q], x.born[q] < key, z3.Not(x.dead_letter_target[q]))


def confirmed_survives_crash(x: Z3State, q, key, _) -> z3.BoolRef:
    """PC-10, DU-2: no copy a crash lost that is counted as above carries a message confirmed with
    basic.ack. (The first two indices are a queue and a key.)"""
    return z3.Not(z3.And(x.lost_in_crash[q, key], _counted(x, q, key),
                         x.message_acked[x.message_connection[q, key], x.message_number[q, key]]))


def lost_copies_stay_unconfirmed(x: Z3State, q, key, _) -> z3.BoolRef:
    """Helper: a copy a crash lost has a key that was issued (at most its queue's count: a queue
    declared again is born above it, and no later copy takes its key), and one counted as above
    carries a message not confirmed with basic.ack, with no publish left to ack, in flight to no one,
    held back by no transaction, and numbered 1..published (so no later publish carries it)."""
    c, n = x.message_connection[q, key], x.message_number[q, key]
    return z3.Implies(x.lost_in_crash[q, key], z3.And(
        key <= x.enqueued[q], z3.Implies(_counted(x, q, key), z3.And(
            z3.Not(x.message_acked[c, n]), x.unconfirmed_publish_channel[c, n] == 0, z3.Not(x.publish_in_flight[c, n]),
            x.tx_held_by_channel[c, n] == 0, n <= x.published[c]))))


INVARIANTS: dict[str, Invariant] = {
    "confirms_exactly_once": Invariant(
        "confirms_exactly_once", confirms_exactly_once,
        "all of it: numbering 1..n, each unconfirmed or confirmed once; while the client holds the channel open, "
        "what it saw confirmed was confirmed and it numbered at least the broker's publishes",
        helpers=("confirms_in_step", "channel_lifecycle")),
    "confirm_and_tx_exclusive": Invariant(
        "confirm_and_tx_exclusive", confirm_and_tx_exclusive, "all of it", helpers=("plain_channel_holds_nothing",)),
    "delivery_tags_increase": Invariant(
        "delivery_tags_increase", delivery_tags_increase,
        "all of it: outstanding tags issued, below the next tag, each once; while the client holds the channel "
        "open, every delivery in flight to it is above the last tag it read and below the next tag, in tag order",
        helpers=("held_back_tags_issued", "channel_lifecycle")),
    "closed_channel_is_silent": Invariant(
        "closed_channel_is_silent", closed_channel_is_silent,
        "all of it: nothing but close-ok after the channel.close of a channel the broker is closing "
        "(the whole first half for clients that send close-ok only in answer: the spec's docstring), "
        "and what a channel that is not open holds"),
    "exclusive_queue_has_owner": Invariant(
        "exclusive_queue_has_owner", exclusive_queue_has_owner, "all of it",
        helpers=("down_connection_is_silent", "close_sent_only_when_closed")),
    "redelivered_flag_set": Invariant(
        "redelivered_flag_set", redelivered_flag_set, "all of it", helpers=("copy_keys_issued",)),
    "queue_in_publication_order": Invariant(
        "queue_in_publication_order", queue_in_publication_order,
        "all of it: of two ready copies of a queue, the one ahead has the lower key (the order is the "
        "field `ahead_in_queue`, read off the queue's list)",
        helpers=("copy_keys_issued", "outstanding_copies_were_delivered")),
    "copies_conserved": Invariant(
        "copies_conserved", copies_conserved,
        "all of it: every copy a queue took is live, gone with a fate, or on disk while the broker is down; "
        "no copy is in two live places (ready, outstanding or held back, in flight in automatic mode, on its way "
        "to its channel in automatic mode)",
        helpers=("held_back_tags_issued", "outstanding_copies_were_delivered", "copy_keys_issued",
                 "stored_copies_in_durable_queues", "down_broker_holds_only_disk", "live_copies_unfated")),
    "down_broker_holds_only_disk": Invariant(
        "down_broker_holds_only_disk", down_broker_holds_only_disk, "all of it"),
    "tx_effects_invisible": Invariant(
        "tx_effects_invisible", tx_effects_invisible,
        "all of it: a held-back publish's message is in no queue and has no fate (no queue ever took it), and "
        "a held-back settlement's copy has no fate in this life (the ghost `gone_this_life`, agreement checks it)",
        helpers=("publishes_in_flight_fresh", "live_copies_unfated", "copies_conserved", "copy_keys_issued",
                 "outstanding_copies_were_delivered", "held_back_tags_issued")),
    "prefetch_respected": Invariant(
        "prefetch_respected", prefetch_respected, "all of it (the counts are ghost counters, agreement checks them)",
        helpers=("prefetch_counts_sane", "prefetch_volume_covers")),
    "confirmed_only_when_on_disk": Invariant(
        "confirmed_only_when_on_disk", confirmed_only_when_on_disk, "all of it",
        helpers=("unwritten_copies_hold_their_confirm", "pending_messages_numbered")),
    "confirmed_survives_crash": Invariant(
        "confirmed_survives_crash", confirmed_survives_crash, "all of it",
        helpers=("lost_copies_stay_unconfirmed", "confirmed_only_when_on_disk")),
}
HELPERS: dict[str, Invariant] = {
    "channel_lifecycle": Invariant("channel_lifecycle", channel_lifecycle, "all of it (helper)"),
    "confirms_in_step": Invariant("confirms_in_step", confirms_in_step, "all of it (helper)",
                                  helpers=("confirms_exactly_once", "channel_lifecycle")),
    "live_copies_unfated": Invariant(
        "live_copies_unfated", live_copies_unfated, "all of it (helper)",
        helpers=("copies_conserved", "copy_keys_issued", "outstanding_copies_were_delivered",
                 "held_back_tags_issued")),
    "lost_copies_stay_unconfirmed": Invariant(
        "lost_copies_stay_unconfirmed", lost_copies_stay_unconfirmed, "all of it (helper)",
        helpers=("unwritten_copies_hold_their_confirm",)),
    "unwritten_copies_hold_their_confirm": Invariant(
        "unwritten_copies_hold_their_confirm", unwritten_copies_hold_their_confirm, "all of it (helper)",
        helpers=("copies_conserved", "held_back_tags_issued", "pending_messages_numbered", "publishes_in_flight_fresh",
                 "messages_numbered")),
    "pending_messages_numbered": Invariant(
        "pending_messages_numbered", pending_messages_numbered, "all of it (helper)",
        helpers=("publishes_in_flight_fresh",)),
    "prefetch_counts_sane": Invariant("prefetch_counts_sane", prefetch_counts_sane, "all of it (helper)"),
    "prefetch_volume_covers": Invariant(
        "prefetch_volume_covers", prefetch_volume_covers, "all of it (helper)", helpers=("prefetch_counts_sane",)),
    "plain_channel_holds_nothing": Invariant(
        "plain_channel_holds_nothing", plain_channel_holds_nothing, "all of it (helper)"),
    "held_back_tags_issued": Invariant(
        "held_back_tags_issued", held_back_tags_issued, "all of it (helper)", helpers=("delivery_tags_increase",)),
    "down_connection_is_silent": Invariant(
        "down_connection_is_silent", down_connection_is_silent, "all of it (helper)",
        helpers=("closed_channel_is_silent",)),
    "sent_to_open_channels": Invariant("sent_to_open_channels", sent_to_open_channels, "all of it (helper)"),
    "close_sent_only_when_closed": Invariant(
        "close_sent_only_when_closed", close_sent_only_when_closed, "all of it (helper)"),
    "stored_copies_in_durable_queues": Invariant(
        "stored_copies_in_durable_queues", stored_copies_in_durable_queues, "all of it (helper)"),
    "copy_keys_issued": Invariant(
        "copy_keys_issued", copy_keys_issued, "all of it (helper)", helpers=("outstanding_copies_were_delivered",)),
    "outstanding_copies_were_delivered": Invariant(
        "outstanding_copies_were_delivered", outstanding_copies_were_delivered, "all of it (helper)"),
    "publishes_in_flight_fresh": Invariant(
        "publishes_in_flight_fresh", publishes_in_flight_fresh,
        "all of it (helper)",
        helpers=("messages_numbered",)),
    "messages_numbered": Invariant(
        "messages_numbered", messages_numbered, "all of it (helper)", helpers=("publishes_in_flight_fresh",)),
}


def init(x: Z3State) -> z3.BoolRef:
    """Every initial state of every configuration (spec.machine.initial_states): the broker up, any
    number of connections, each with its broker end open, nothing in flight, and every channel clean,
    open or (for clients that open them) closed; and any number of free slots for vanished connections
    (client gone, broker end closed, every channel closed: spec.machine.stale_slots)."""
    c, ch = z3.Ints("init_c init_ch")
    s = z3.Int("init_s")
    # Two flat quantifiers (per channel, per channel and index) rather than one nested in the other:
    # each is instantiated at once at a counterexample's indices (nested, E-matching could miss it).
    clean = z3.And(z3.Or(x.channel_status[c, ch] == CH_OPEN, x.channel_status[c, ch] == CH_CLOSED),
                   x.channel_mode[c, ch] == MODE_NONE,
                   x.publish_seq[c, ch] == 0, z3.Not(x.tx_holds_back[c, ch]), z3.Not(x.commit_pending[c, ch]),
                   x.frames_to_broker[c, ch] == 0,
                   x.next_tag[c, ch] == 1, z3.Not(x.frames_to_client[c, ch]), z3.Not(x.channel_close_to_client[c, ch]),
                   z3.Not(x.sent_after_close[c, ch]),
                   # the client's view: open with the broker's channel, else closed; nothing read or in flight
                   z3.If(x.channel_status[c, ch] == CH_OPEN, x.view_status[c, ch] == C_OPEN,
                         x.view_status[c, ch] == C_CLOSED), x.view_last_tag[c, ch] == 0,
                   *[arr[c, ch] == 0 for arr in (x.view_mode, x.view_publish_count, x.multiple_confirm_in_flight,
                                                 x.first_select_to_broker, x.publishes_behind_select,
                                                 x.publishes_to_broker)],
                   *[z3.Not(arr[c, ch]) for arr in (x.open_ok_to_client, x.older_frames_ahead, x.open_to_broker,
                                                    x.frame_ahead_of_open, x.frame_behind_open,
                                                    x.other_frames_to_broker)],
                   z3.Or(z3.And(x.client_connection_status[c] == CONN_UP, z3.Not(x.broker_end_closed[c])),
                         z3.And(x.client_connection_status[c] == CONN_DOWN, z3.Not(x.broker_end_closed[c]),
                                x.channel_status[c, ch] == CH_CLOSED),
                         z3.And(x.client_connection_status[c] == CONN_GONE, x.broker_end_closed[c],
                                x.channel_status[c, ch] == CH_CLOSED)),
                   *[z3.Not(arr[c, ch]) for arr in (x.ready, x.redelivered, x.ever_delivered,
                                                    x.on_disk)],  # (queue, key): no copy
                   z3.Not(x.publish_in_flight[c, ch]), x.tx_held_by_channel[c, ch] == 0,
                   z3.Not(x.taken_by_queue[c, ch]),         # (conn, n): no message
                   z3.Not(x.publish_in_flight_twice[c, ch]), z3.Not(x.tx_held_twice[c, ch]),
                   z3.Not(x.message_acked[c, ch]), x.unconfirmed_publish_channel[c, ch] == 0,
                   z3.Not(x.lost_in_crash[c, ch]), z3.Not(x.gone_this_life[c, ch]),
                   x.auto_in_flight_on[c, ch] == 0,
                   *[arr[c, ch] == 0 for arr in (x.prefetch, x.global_limit, x.volume, x.qos_excess, x.qos_uncounted,
                                                 x.consumer_outstanding, x.consumer_held_back)])
    empty = z3.And([z3.Not(arr[c, ch, s]) for arr in (x.unconfirmed, x.confirmed, x.outstanding, x.tx_settled,
                                                      x.delivered_to_consumer, x.consumers, x.in_round_robin,
                                                      x.consumer_no_ack, x.ahead_in_queue, x.deliveries_to_client,
                                                      x.view_confirmed, x.single_confirms_in_flight)]
                   + [x.consumer_deliveries[c, ch, s] == 0, x.consumer_limit[c, ch, s] == 0])
    per_index = z3.And(z3.Or(z3.Not(x.broker_end_closed[c]), x.client_connection_status[c] == CONN_GONE),
                       z3.Not(x.connection_close_to_client[c]), x.queue_owner[c] == 0,
                       x.sending_key[c] == 0,                       # (a queue): sending nothing
                       x.enqueued[c] == 0, x.born[c] == 0,
                       x.published[c] == 0, z3.Implies(x.queue_durable[c], x.queue_exists[c]))
    return z3.And(x.broker_up, x.channels_per_connection >= 1, z3.ForAll([c], per_index), z3.ForAll([c, ch], clean),
                  z3.ForAll([c, ch, s], empty))
