"""The budgets: how many times a configuration lets each bounded kind of step happen (RQ-6: requeue
loops, reconnects and crashes would otherwise make tags, publish numbers and the state space grow
without end). Declared once, here: ``spec.configs.Config`` gets a field per budget (its default),
``spec.configs.BOUNDS`` the range a command line may set, and ``spec.state.Used`` a counter per budget
a run spends.
"""
from __future__ import annotations

from typing import NamedTuple


class Budget(NamedTuple):
    """One budget: its name, default, the largest value a command line may set, whether a run spends it
    step by step (a counter in ``State.used``), and what it counts."""

    name: str
    default: int
    most: int
    spent: bool
    doc: str


BUDGETS: tuple[Budget, ...] = (
    Budget("messages", 2, 12, False, "messages each publishing role sends in all"),
    Budget("requeues", 0, 6, True, "copies put back in a queue (nack or reject with requeue, recover, a channel "
                                   "or connection closing with deliveries outstanding: RQ-4, RQ-6)"),
    Budget("closes", 0, 3, True, "channel.close sent by clients"),
    Budget("reconnects", 0, 3, True, "connections opened again after a close or a loss"),
    Budget("losses", 0, 1, False, "1: connections may be lost with the socket closed, which the broker notices at "
                                  "once (NetworkLoss); each loss is spent as a reconnect"),
    Budget("vanishes", 0, 1, False, "1: a connection's client may vanish without closing its socket (a crashed host, "
                                    "a partition, a paused process), which the broker notices only later, at a "
                                    "heartbeat timeout (ClientVanish, then BrokerDetect); each is spent as a "
                                    "reconnect"),
    Budget("crashes", 0, 2, True, "broker crashes (each followed by a restart)"),
    Budget("channel_errors", 0, 2, True, "channels the broker closes with an error on its own (BrokerChannelError, "
                                         "ER-1)"),
    Budget("failures", 0, 3, True, "a queue failing to take a message (the publish is nacked: PC-6)"),
    Budget("bad", 0, 3, True, "protocol errors clients make on purpose (an unknown tag: ACK-4, ER-1)"),
    Budget("qos", 0, 3, True, "basic.qos sent by clients"),
    Budget("gets", 0, 6, True, "basic.get sent by clients"),
    Budget("cancels", 0, 2, True, "basic.cancel sent by clients"),
    Budget("admin", 0, 3, True, "queue.purge and queue.delete sent by clients"),
)

SPENT: tuple[str, ...] = tuple(b.name for b in BUDGETS if b.spent)
