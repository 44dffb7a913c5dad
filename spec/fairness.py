"""The spec's fairness: which kinds of step cannot stay possible for ever without happening (weak
fairness), the assumption under which the liveness properties (``spec.properties.LIVENESS``) are judged.
The machine's ``fairness(config)`` hook returns a ``Fairness``; the engines read it through
spark_check.expansion.fairness_of.

The weakly fair classes, each a promise that the part of the system behind it keeps working:

- the broker keeps taking the frames each client sends (``BrokerTakeFrame``), per connection and channel
  number (0: the connection's own frames);
- the broker keeps confirming the publishes of each confirm-mode channel (``BrokerConfirm``, PC-2), and
  keeps answering its commits and channel closes (``BrokerCommitOk``, ``BrokerCloseOk``), per channel;
- the broker keeps delivering from each queue to a consumer with room (``BrokerDeliver``), per queue;
- the disk keeps writing what is pending (``DiskFsync``), a crashed broker restarts (``BrokerRestart``),
  the broker notices a client that vanished (``BrokerDetect``, a heartbeat timeout), and the queues take
  a requeue that waited behind a resume (``BrokerRequeue``, spec.interleavings): one class each;
- the network delivers and the clients keep reading (``ClientReceive``), per connection and channel number.

Nothing else is fair. Faults (a crash, a lost or vanished connection, a queue refusing a message, a
channel error) happen at most as their budgets say (spec.budgets) and need never happen; what a client
application does (publish, consume, settle, close, select a mode) is its own choice and need never
happen either: the properties are about what the broker and the network owe the clients.

Interchangeable connections and channels (``spec.symmetry``) share their classes ("the broker keeps
taking frames from one of the twins"), as `rabbitproof check`'s fairness does: then every renaming maps
each class onto itself, so a fair cycle of the graph reduced by symmetry is one of the full graph and
conversely, and the verdicts are the same with the reduction and without.
"""
from __future__ import annotations

from typing import Any, NamedTuple

from . import actions as A
from .symmetry import automorphisms

UNFAIR = -1                     # the class of a step that need never happen (spark_check.liveness.UNFAIR)

# The fair kinds of step on one connection and channel: (the step, what it promises, whether channel 0 has it).
_PER_CHANNEL = (
    (A.BrokerTakeFrame, "the broker takes the frames of {who}", True),
    (A.BrokerConfirm, "the broker confirms the publishes of {who}", False),
    (A.BrokerCommitOk, "the broker answers the commits of {who}", False),
    (A.BrokerCloseOk, "the broker answers the channel close of {who}", False),
    (A.ClientReceive, "{who} reads the frames that reach it", True),
)
# The fair kinds of step of which there is one class in all.
_SINGLE = (
    (A.DiskFsync, "the disk writes what is pending"),
    (A.BrokerRestart, "the broker restarts after a crash"),
    (A.BrokerDetect, "the broker notices a client that vanished (a heartbeat timeout)"),
    (A.BrokerRequeue, "the queues take a requeue that waited behind a resume"),
)
ASSUMED = ("judged under weak fairness: the broker keeps taking frames, confirming, answering, delivering to "
           "consumers with room and writing to disk, the network delivers and the clients keep reading; faults "
           "happen at most as the budgets say, and nothing a client application does is assumed")


class Fairness(NamedTuple):
    """The fair classes of one configuration: ``classes`` their names (bit i of a mask is class i), and
    ``index`` the class of each fair step, keyed by its kind and what it acts on."""

    classes: tuple[str, ...]
    index: dict

    def class_of(self, action: Any) -> int:
        """The fair class of ``action``; UNFAIR when it need never happen."""
        kind = type(action)
        if kind in _PER_CHANNEL_KINDS:
            return self.index[(kind, action.conn, action.ch)]
        if kind is A.BrokerDeliver:
            return self.index[(kind, action.queue)]
        if kind in _SINGLE_KINDS:
            return self.index[(kind,)]
        return UNFAIR


_PER_CHANNEL_KINDS = frozenset(kind for kind, _, _ in _PER_CHANNEL)
_SINGLE_KINDS = frozenset(kind for kind, _ in _SINGLE)


def weakly_fair(config: Any, slots: int) -> Fairness:
    """The fair classes of ``config`` whose states hold ``slots`` connection slots (its connections, then
    the slots of vanished ones: spec.machine.stale_slots). Interchangeable channels share a class; the
    slots of vanished connections are never renamed (spec.symmetry), so each has classes of its own."""
    renamings = automorphisms(config)

    def orbit(c: int, ch: int) -> tuple[int, int]:
        if c >= config.connections:
            return (c, ch)
        return min([(c, ch)] + [(g.conns[c], g.channels[c][ch - 1] if ch else 0) for g in renamings])

    names: list[str] = []
    index: dict = {}
    for kind, text, own in _PER_CHANNEL:
        for c in range(slots):
            for ch in range(0 if own else 1, config.channels + 1):
                key = (kind,) + orbit(c, ch)
                if key not in index:
                    index[key] = len(names)
                    who = f"c{key[1]}" + (" (its connection)" if not ch else f" (channel {key[2]})")
                    names.append(text.format(who=who))
                index[(kind, c, ch)] = index[key]
    for q in range(len(config.queues)):
        index[(A.BrokerDeliver, q)] = len(names)
        names.append(f"the broker delivers from q{q} to a consumer with room")
    for kind, text in _SINGLE:
        index[(kind,)] = len(names)
        names.append(text)
    return Fairness(tuple(names), index)
