"""The rank of a publish waiting for its confirm, over ``model.state``, for any number of connections,
channels and publishes: what the ranking argument of PC-2 ("the publisher waits for ever: cannot
happen", rabbitproof.check.by_argument) measures, and the step obligations Z3 proves of it
(proofs.ranking).

A publish numbered ``s`` on channel (c, ch), while the client and the broker both hold that channel
open (``in_step``), is at one of four ranks:

- 3: numbered, yet neither waiting for its confirm nor confirmed: its answer was dropped (never reached);
- 2: waiting (``unconfirmed``, PC-2): the broker has not sent its basic.ack or basic.nack yet;
- 1: the broker sent its confirm (``confirmed``), the client has not read it yet;
- 0: the client has read it (``view_confirmed``): the publish is answered.

The argument needs three things of every step, for every size, and each is a Z3 obligation here:

- ``rank_never_rises``: no step, of any client, the broker or the disk, raises the rank of a numbered
  publish while its channel stays open on both ends, and none takes its number away: what one client
  does never undoes another's answer, however many clients, channels and messages there are;
- ``confirm_answers``: the broker's confirm that covers the publish (alone or with multiple) lowers its
  rank from 2;
- ``reading_answers``: the client's read of a confirm that covers it lowers its rank to 0.

A broker that may drop a confirm (the publish leaves ``unconfirmed`` without a confirm sent) breaks the
first, and a client that reads a confirm without taking it in breaks the third: tests/test_proofs_ranking.py
shows both. What the obligations leave to the argument: that the confirming and reading steps are
possible until taken (they read facts of the spec state outside these fields, the oracles of
``model.oracles``: which frame is next, whether the publish's queues took it), which is weak fairness of
their classes and the spec's own ``confirms_eventually_answered`` on its configurations.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import z3

from rabbitproof.spec.frames import BASIC_ACK, BASIC_NACK
from rabbitproof.spec.state import C_OPEN, CH_OPEN

from .state import Z3State


def in_step(x: Z3State, c, ch) -> z3.BoolRef:
    """The client holds open the channel the broker holds open."""
    return z3.And(x.channel_status[c, ch] == CH_OPEN, z3.Not(x.broker_end_closed[c]), x.view_status[c, ch] == C_OPEN)


def numbered(x: Z3State, c, ch, s) -> z3.BoolRef:
    """The broker's channel numbered publish ``s`` (PC-1)."""
    return z3.And(1 <= s, s <= x.publish_seq[c, ch])


def rank(x: Z3State, c, ch, s) -> z3.ArithRef:
    """The rank of publish ``s`` of channel (c, ch): 3 dropped, 2 waiting, 1 confirm on its way, 0 answered."""
    return z3.If(x.unconfirmed[c, ch, s], 2,
                 z3.If(x.confirmed[c, ch, s], z3.If(x.view_confirmed[c, ch, s], 0, 1), 3))


@dataclass(frozen=True)
class Obligation:
    """One step obligation of the ranking: for the steps of ``actions`` (all, when empty), from a state where
    publish (c, ch, s) is numbered on a channel in step, ``when`` the step is one that should answer it
    (given the action's fields), the state after satisfies ``then``."""

    name: str
    says: str
    when: Callable                  # (x, a, o, c, ch, s) -> BoolRef: a the action's fields, o its oracles
    then: Callable                  # (x, y, c, ch, s) -> BoolRef
    actions: tuple[str, ...] = ()


def _not_renewing(x: Z3State, a, o, c, ch, s) -> z3.BoolRef:
    """Any step but a new connection in the waiting channel's own slot: the model reads "the slot is down"
    as an oracle of ClientConnect (``down``), so it does not know that a connection in step is not down;
    in the spec a connect takes only a slot that is down, and a connection that went down ended every
    wait on it (the publisher knows, PC-9)."""
    return z3.Not(a.conn == c) if "channels_open" in a else z3.BoolVal(True)


def _never_rises(x: Z3State, y: Z3State, c, ch, s) -> z3.BoolRef:
    return z3.Implies(in_step(y, c, ch), z3.And(numbered(y, c, ch, s), rank(y, c, ch, s) <= rank(x, c, ch, s)))


def _confirm_covers(x: Z3State, a, o, c, ch, s) -> z3.BoolRef:
    return z3.And(a.conn == c, a.ch == ch, x.unconfirmed[c, ch, s], z3.If(a.multiple, s <= a.seq, s == a.seq))


def _lowered_from_waiting(x: Z3State, y: Z3State, c, ch, s) -> z3.BoolRef:
    return rank(y, c, ch, s) < 2


def _read_covers(x: Z3State, a, o, c, ch, s) -> z3.BoolRef:
    """The client reads a confirm of (c, ch) that covers ``s``: the frame (the relation's oracle ``method``)
    is a basic.ack or basic.nack of the broker's channel (no open-ok ahead of it), numbered ``s`` or, with
    multiple, at least ``s``, a publish the client made."""
    return z3.And(a.conn == c, a.ch == ch, z3.Or(o.method == BASIC_ACK, o.method == BASIC_NACK),
                  z3.Not(x.open_ok_to_client[c, ch]), s <= x.view_publish_count[c, ch],
                  z3.If(o.multiple, s <= o.tag, s == o.tag))


def _answered(x: Z3State, y: Z3State, c, ch, s) -> z3.BoolRef:
    return z3.Implies(in_step(y, c, ch), rank(y, c, ch, s) == 0)


OBLIGATIONS: dict[str, Obligation] = {
    "rank_never_rises": Obligation(
        "rank_never_rises", "no step raises a numbered publish's rank, or takes its number away, while its "
        "channel stays open on both ends", _not_renewing, _never_rises),
    "confirm_answers": Obligation(
        "confirm_answers", "the broker's confirm that covers a waiting publish lowers its rank from 2",
        _confirm_covers, _lowered_from_waiting, ("BrokerConfirm",)),
    "reading_answers": Obligation(
        "reading_answers", "the client's read of a confirm that covers a publish answers it (rank 0)",
        _read_covers, _answered, ("ClientReceive",)),
}
