"""Programs written to show one rule each: the suite runs them before any generated program, so a broker's
plain breaks of the catalogue (catalogue.py) are found even in a short run.

Each probe is a short program of the suite's vocabulary (programs.py) on one connection, with the rules it
is written to show. Nothing says what the broker must answer: the spec judges the recording, as for every
program; a probe only makes sure the situation arises (a requeue followed by a get, two rejects in a row,
a settlement of a tag never issued, a method behind the client's channel.close, ...).
"""
from __future__ import annotations

from typing import NamedTuple

from rabbitproof.conformance import programs as P

Q = (P.QueueFlags(), P.QueueFlags())
DECLARE = P.Step(0, (P.Declare(1, 0), P.Declare(1, 1)))


class Probe(NamedTuple):
    rules: tuple
    program: P.Program


def _program(*writes, queues=Q, connections: int = 1) -> P.Program:
    """Queues q0 and q1 declared, then each write: a tuple of ops (connection 0) or a Step."""
    steps = [DECLARE]
    for write in writes:
        steps.append(write if isinstance(write, P.Step) else P.Step(0, tuple(write)))
    return P.Program(queues, connections, tuple(steps))


pub, get, ack, nack, reject = P.Publish, P.Get, P.Ack, P.Nack, P.Reject

PROBES = (
    Probe(("DT-1", "AM-3", "ACK-1"), _program([pub(1, 0), pub(1, 0)], [get(1, 0)], [get(1, 0)], [ack(1, 2)],
                                              [ack(1, 1)])),
    Probe(("DT-1", "RQ-4"), _program([pub(1, 0), pub(1, 0)], [get(1, 0)], [P.CloseChannel(1)], [get(1, 0)],
                                     [get(1, 0)])),
    Probe(("DT-2", "RQ-2", "ACK-6"), _program([pub(1, 0)], [get(1, 0)], [reject(1, 1, True)], [get(1, 0)])),
    Probe(("DT-3",), _program([pub(1, 0)], [get(1, 0)], [ack(1, P.MAX_TAG)])),
    Probe(("AM-1", "AM-2"), _program([pub(1, 0), pub(1, 0)], [get(1, 0, True)], [get(1, 0)], [P.Recover(1)],
                                     [get(1, 0)], [get(1, 0)])),
    Probe(("ACK-2",), _program([pub(1, 0), pub(1, 0), pub(1, 0)], [get(1, 0)], [get(1, 0)], [get(1, 0)],
                               [ack(1, 2, True)], [P.Recover(1)], [get(1, 0)], [get(1, 0)])),
    Probe(("ACK-3",), _program([pub(1, 0), pub(1, 0)], [get(1, 0)], [get(1, 0)], [nack(1, 0, True, True)],
                               [get(1, 0)])),
    Probe(("ACK-4",), _program([ack(1, 5)], [get(1, 0)])),
    Probe(("ACK-4",), _program([ack(1, 5, True)], [get(1, 0)])),
    Probe(("ACK-4", "ACK-7"), _program([pub(1, 0)], [get(1, 0)], [ack(1, 1)], [ack(1, 1)], [get(1, 0)])),
    Probe(("ACK-5", "ACK-6"), _program([pub(1, 0), pub(1, 0)], [get(1, 0)], [get(1, 0)], [reject(1, 1, False)],
                                       [nack(1, 2, False, False)], [get(1, 0)])),
    Probe(("PF-1", "PF-3"), _program([P.Qos(1, 1)], [P.Consume(1, 0, "a")], [pub(1, 0), pub(1, 0)],
                                     [ack(1, 1)], [get(1, 1)])),
    Probe(("PF-2",), _program([pub(1, 0)], [get(1, 0)], [P.Qos(1, 1, True)], [P.Consume(1, 0, "g")],
                              [pub(1, 0)], [get(1, 1)])),
    Probe(("PF-4",), _program([P.Qos(1, 1)], [pub(1, 0), pub(1, 0)], [get(1, 0)], [get(1, 0)])),
    Probe(("PF-4",), _program([P.Qos(1, 1, True)], [pub(1, 0), pub(1, 0)], [get(1, 0)], [get(1, 0)])),
    Probe(("RQ-1",), _program([pub(1, 0), pub(1, 0), pub(1, 0)], [get(1, 0)], [get(1, 0)], [reject(1, 1, True)],
                              [reject(1, 2, True)], [get(1, 0)], [get(1, 0)])),
    Probe(("RQ-1", "RQ-2"), _program([pub(1, 0), pub(1, 0)], [P.Consume(1, 0, "a")], [nack(1, 2, True, True)],
                                     [get(1, 1)])),
    Probe(("RQ-5", "RQ-2"), _program([pub(1, 0)], [get(1, 0)], [P.Recover(1)], [get(1, 0)])),
    Probe(("DS-1",), _program([P.Consume(1, 0, "a", True)], [pub(1, 0), pub(1, 0)], [get(1, 1)])),
    Probe(("DS-2",), _program([pub(1, 0), pub(1, 0)], [get(1, 0)], [get(1, 0)], [get(1, 0)])),
    Probe(("PC-1", "PC-2", "PC-3"), _program([P.ConfirmSelect(1)], [pub(1, 0), pub(1, 0)], [get(1, 1)])),
    Probe(("PC-1",), _program([P.ConfirmSelect(1)], [pub(1, 0)], [get(1, 1)], [P.CloseChannel(1)], [pub(1, 0)],
                              [get(1, 1)])),
    Probe(("PC-4", "RT-3"), _program([P.ConfirmSelect(1)], [pub(1, P.QUEUES, mandatory=True)], [get(1, 1)])),
    Probe(("PC-8",), _program([P.ConfirmSelect(1)], [P.TxSelect(1)], [get(1, 0)])),
    Probe(("PC-9",), _program([pub(1, 0, "missing")], [pub(1, 0)], [get(1, 0)])),
    Probe(("PC-9", "RT-1"), _program([pub(1, 0)], [pub(1, 0, "missing")], [get(1, 0)], [get(1, 0)])),
    Probe(("TX-1", "TX-2", "TX-7"), _program([P.TxSelect(1)], [pub(1, 0)], [get(2, 0)], [P.TxCommit(1)],
                                             [get(2, 0)])),
    Probe(("TX-2",), _program([P.TxSelect(1)], [pub(1, 0)], [P.TxRollback(1)], [get(1, 0)])),
    Probe(("TX-3", "TX-4"), _program([pub(1, 0)], [P.TxSelect(1)], [get(1, 0)], [ack(1, 1)], [P.TxRollback(1)],
                                     [P.Recover(1)], [get(1, 0)])),
    Probe(("TX-5",), _program([P.TxSelect(1)], [ack(1, 3)], [get(1, 0)])),
    Probe(("TX-6",), _program([P.TxSelect(1)], [pub(1, P.QUEUES, mandatory=True)], [P.TxCommit(1)])),
    Probe(("TX-10",), _program([P.TxCommit(1)], [get(1, 0)])),
    Probe(("TX-11",), _program([P.TxSelect(1)], [P.Purge(1, 0)], [P.TxRollback(1)], [P.Delete(1, 1)],
                               [get(1, 1)])),
    Probe(("DS-1", "ER-3"), _program([P.Consume(1, 0, "a")], [P.Delete(1, 0)], [get(1, 1)])),
    Probe(("DU-4",), _program(P.Step(0, (P.Get(1, 0),)), P.Step(1, (P.Get(1, 0),)),
                              queues=(P.QueueFlags(exclusive=True), P.QueueFlags()), connections=2)),
    Probe(("ER-1",), _program([P.CloseChannel(1), P.Declare(1, 0)], [get(1, 0)])),
    Probe(("ER-1", "ER-2"), _program([get(1, P.QUEUES)], [get(1, 0)], [get(2, 0)])),
    Probe(("ER-2",), _program([P.Redeclare(1, 0, durable=True)], [get(1, 0)])),
    Probe(("ER-2",), _program([P.Redeclare(1, 0, exclusive=True)], [get(1, 0)])),
    Probe(("ER-2",), _program([P.Delete(1, P.QUEUES)], [get(1, 0)])),
    Probe(("RT-1", "RT-2"), _program([P.Bind(1, 0), P.Bind(1, 1)], [pub(1, 0, "amq.fanout")], [get(1, 0)],
                                     [get(1, 1)])),
    Probe(("RT-3",), _program([pub(1, P.QUEUES, mandatory=True)], [pub(1, 0, "amq.fanout", mandatory=True)],
                              [get(1, 0)])),
)


def probes_for(rule: str) -> list:
    return [probe for probe in PROBES if rule in probe.rules]
