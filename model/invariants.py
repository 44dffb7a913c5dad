"""The invariants of ``spec.properties`` that this family can state, as Z3 formulas over ``model.state``,
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

from spec.state import CH_CLOSED, CH_OPEN, MODE_CONFIRM, MODE_NONE, MODE_TX

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
    return z3.And(x.seq[c, ch] == 0, z3.Not(x.unconf[c, ch, s]), z3.Not(x.conf[c, ch, s]))


def confirms_exactly_once(x: Z3State, c, ch, s) -> z3.BoolRef:
    """PC-1, PC-2, PC-3 (the broker's side): publishes are numbered 1..seq, and each is either
    unconfirmed or confirmed, never both, never neither."""
    return z3.And(x.seq[c, ch] >= 0, z3.Not(z3.And(x.unconf[c, ch, s], x.conf[c, ch, s])),
                  z3.And(1 <= s, s <= x.seq[c, ch]) == z3.Or(x.unconf[c, ch, s], x.conf[c, ch, s]))


def confirm_and_tx_exclusive(x: Z3State, c, ch, s) -> z3.BoolRef:
    """PC-8, TX-1: a tx channel has no publish numbering; a confirm channel holds nothing back."""
    return z3.And(z3.Implies(x.mode[c, ch] == MODE_TX, _no_publish_numbers(x, c, ch, s)),
                  z3.Implies(x.mode[c, ch] == MODE_CONFIRM, z3.And(z3.Not(x.held[c, ch]), z3.Not(x.pending[c, ch]))))


def plain_channel_holds_nothing(x: Z3State, c, ch, s) -> z3.BoolRef:
    """Helper: a channel is in one of the three modes, and in neither confirm nor tx mode it numbers no
    publish and holds nothing back."""
    mode = x.mode[c, ch]
    return z3.And(z3.Or(mode == MODE_NONE, mode == MODE_CONFIRM, mode == MODE_TX),
                  z3.Implies(mode == MODE_NONE, z3.And(_no_publish_numbers(x, c, ch, s), z3.Not(x.held[c, ch]),
                                                       z3.Not(x.pending[c, ch]))))


INVARIANTS: dict[str, Invariant] = {
    "confirms_exactly_once": Invariant(
        "confirms_exactly_once", confirms_exactly_once,
        "the broker's conjuncts (numbering 1..n, each unconfirmed or confirmed once); the client's view of its "
        "confirms depends on frames in flight, outside this family"),
    "confirm_and_tx_exclusive": Invariant(
        "confirm_and_tx_exclusive", confirm_and_tx_exclusive, "all of it", helpers=("plain_channel_holds_nothing",)),
}
HELPERS: dict[str, Invariant] = {
    "plain_channel_holds_nothing": Invariant(
        "plain_channel_holds_nothing", plain_channel_holds_nothing, "all of it (helper)"),
}


def init(x: Z3State) -> z3.BoolRef:
    """Every initial state of every configuration (spec.machine.initial_states): the broker up, any
    number of connections, each with its broker end open, nothing in flight, and every channel clean,
    open or (for clients that open them) closed."""
    c, ch = z3.Ints("init_c init_ch")
    s = z3.Int("init_s")
    clean = z3.And(z3.Or(x.cstat[c, ch] == CH_OPEN, x.cstat[c, ch] == CH_CLOSED), x.mode[c, ch] == MODE_NONE,
                   x.seq[c, ch] == 0, z3.Not(x.held[c, ch]), z3.Not(x.pending[c, ch]), x.tb[c, ch] == 0,
                   z3.ForAll([s], z3.And(z3.Not(x.unconf[c, ch, s]), z3.Not(x.conf[c, ch, s]))))
    return z3.And(x.up, x.nch >= 1, z3.ForAll([c], z3.Not(x.bclosed[c])), z3.ForAll([c, ch], clean))
