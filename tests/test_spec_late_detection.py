"""A client that vanishes and a broker noticing it late (RQ-3, RQ-4), and the broker's own channel error
(ER-1): the spec's steps, the recorded RabbitMQ run that needs them, and a relation of the Z3 model
that gets the move wrong."""
from __future__ import annotations

from dataclasses import replace

from pamqp import commands

from rabbitproof.model import actions as M
from rabbitproof.proofs.inductive import COUNTEREXAMPLE, HELPERS, INVARIANTS, PROVED, prove_step
from rabbitproof.spec import actions as A
from rabbitproof.spec import configs, faults, machine
from rabbitproof.recording import observations
from rabbitproof.spec.frames import BASIC_ACK, BASIC_DELIVER, CHANNEL_CLOSE
from rabbitproof.spec.properties import get
from rabbitproof.spec.state import CH_CLOSING, CONN_DOWN, CONN_GONE
from rabbitproof.spark_check.engine import LocalEngine

from rabbitproof.recording import scenarios

LATE = configs.get("hazard_late_detection")       # c0 publishes to q0, c1 consumes it (manual acks)


def run(config, state, *steps):
    """The state after ``steps``, each enabled where it is taken."""
    for action in steps:
        assert action in machine.enabled(state, config), f"{action!r} is not enabled"
        state = machine.step(state, action)[0]
    return state


def published_and_held():
    """Two messages in q0; c1 consumes and holds m0.1 (read), m0.2 ready."""
    state = machine.initial_states(LATE)[0]
    publish = A.ClientPublish(0, 1, 0, 0, False, False)
    state = run(LATE, state, publish, A.BrokerTakeFrame(0, 1), publish, A.BrokerTakeFrame(0, 1),
                A.ClientConsume(1, 1, 0, 1, False, False), A.BrokerTakeFrame(1, 1), A.BrokerDeliver(0),
                A.ClientReceive(1, 1, True), A.ClientReceive(1, 1, True))
    assert state.conns[1].clients[0].held == (1,)
    return state


def test_a_vanished_client_s_connection_is_held_by_the_broker_until_it_notices():
    state = run(LATE, published_and_held(), A.ClientVanish(1))
    client, held = state.conns[1], state.conns[2]           # slot 2: the configuration's stale slot
    assert client.status == CONN_DOWN and not any(client.to_client) and not client.channels[0].unacked
    assert held.status == CONN_GONE and not held.broker_closed
    assert [u.msg for u in held.channels[0].unacked] == [1]
    assert state.queues[0].ring == ((2, 1, 1),)             # its consumer, renamed with it
    # The client connects again and consumes; the old consumer is still in the round-robin, next in turn
    # and with room (no prefetch here): m0.2 goes to it, and no frame is written to the gone client.
    state = run(LATE, state, A.ClientConnect(1, 0, True), A.ClientConsume(1, 1, 0, 1, False, False),
                A.BrokerTakeFrame(1, 1))
    assert state.queues[0].ring == ((2, 1, 1), (1, 1, 1))
    to_old = run(LATE, state, A.BrokerDeliver(0))
    assert [u.msg for u in to_old.conns[2].channels[0].unacked] == [1, 2] and not any(to_old.conns[2].to_client)
    # The broker notices: m0.1 is back, redelivered, at its place (RQ-1, RQ-2, RQ-4); the slot is free.
    after = run(LATE, state, A.BrokerDetect(2))
    assert [(e.msg, e.redelivered) for e in after.queues[0].ready] == [(1, True), (2, False)]
    assert after.conns[2].broker_closed and faults.stale_slot(after) == 2


def test_only_a_late_detection_shows_a_reconnected_consumer_messages_out_of_order():
    """RQ-3: with a socket closed (NetworkLoss) the held message is requeued before the client connects
    again, so it comes first; only a vanish lets the later message overtake it."""
    prop = get("consumer_sees_publication_order")
    vanish = LocalEngine().explore(machine, LATE, [prop])
    closed = LocalEngine().explore(machine, replace(LATE, vanishes=0, losses=1), [prop])
    assert vanish.complete and closed.complete
    assert vanish.properties[0].found and not closed.properties[0].found
    steps = [s.action_type for s in vanish.properties[0].trace.steps]
    assert "ClientVanish" in steps and steps.index("BrokerDetect") > steps.index("ClientConnect")


def test_a_channel_error_ignores_the_ack_on_its_way():
    """ER-1: the broker closes the consumer's channel while its ack is in flight; the ack is dropped when
    it arrives and the message comes back (RQ-4). The client's own close would have let it count."""
    config = configs.get("channel_error")
    state = machine.initial_states(config)[0]
    state = run(config, state, A.ClientPublish(0, 1, 0, 0, False, False), A.BrokerTakeFrame(0, 1),
                A.ClientConsume(0, 2, 0, 1, False, False), A.BrokerTakeFrame(0, 2), A.BrokerDeliver(0),
                A.ClientReceive(0, 2, True), A.ClientReceive(0, 2, True), A.ClientAck(0, 2, 1, False),
                A.BrokerChannelError(0, 2))
    assert state.conns[0].channels[1].status == CH_CLOSING
    assert state.conns[0].to_client[2][-1][0] == CHANNEL_CLOSE
    assert [(e.msg, e.redelivered) for e in state.queues[0].ready] == [(1, True)]
    assert state.conns[0].to_broker[2][0][0] == BASIC_ACK
    after = run(config, state, A.BrokerTakeFrame(0, 2))                 # taken and ignored
    assert [(e.msg, e.redelivered) for e in after.queues[0].ready] == [(1, True)] and not after.fates


def test_rabbitmq_serves_the_reconnected_consumer_first_and_gives_the_held_message_back_late(rabbitmq_node,
                                                                                            queue_name):
    """The recorded run: s2 and s3 reach the new connection before s1 comes back, redelivered. The spec
    accepts it; with the loss noticed at once (no stale slot to hold the old connection) it does not.

    The new connection has about four seconds (two heartbeats of 2 s) to take s2 and s3 before RabbitMQ
    notices the silent one; a machine loaded enough to stall the client longer sees s1 come back first,
    which the spec accepts as well. So the run is made up to three times, each judged by the spec, until
    the late order shows."""
    for attempt in range(3):
        slots = scenarios.silent_consumer_replaced(rabbitmq_node, f"{queue_name}-{attempt}")
        new = slots[0][1]
        got = [(bytes(e.body), e.method.redelivered) for e in new if isinstance(e.method, commands.Basic.Deliver)]
        assert slots[0][0][-1].kind == "eof"                 # the broker closed the silent connection
        run_ = observations.from_recording(slots)
        assert run_.config.vanishes == 1 and run_.check().ok
        if got[0] == (b"s2", False):
            break
    assert got == [(b"s2", False), (b"s3", False), (b"s1", True)]
    at_once = replace(run_, config=replace(run_.config, vanishes=0))
    verdict = at_once.check()
    assert not verdict.ok and "redelivered=True" in verdict.explain()


def test_a_vanish_that_leaves_the_exclusive_queue_with_the_client_is_refuted(monkeypatch):
    """DU-4: a ClientVanish relation that does not hand the connection's exclusive queues to the slot
    holding it leaves a queue owned by a connection that is down; the proof shows it."""
    def vanish_keeps_owner(x, a, o):
        t = M.ClientVanish(x, a, o)
        return M.Transition(t.guard, t.after.replace(queue_owner=x.queue_owner))
    inv = INVARIANTS["exclusive_queue_has_owner"]
    helpers = [HELPERS[h] for h in inv.helpers]
    assert prove_step(inv, A.ClientVanish, helpers).status == PROVED
    monkeypatch.setitem(M.RELATIONS, A.ClientVanish, vanish_keeps_owner)
    assert prove_step(inv, A.ClientVanish, helpers).status == COUNTEREXAMPLE


def test_at_the_end_of_a_program_the_broker_has_noticed_a_dropped_connection():
    """Quiescence (spec/trace.py, ``quiescent``): a client drops its connection holding a delivery; the
    other client consumes the queue and marks the end. The held message must have come back to it: a
    broker that keeps a dropped connection's deliveries for ever is rejected at the quiet mark."""
    from rabbitproof.spec import trace
    from rabbitproof.spec.frames import BASIC_CONSUME, BASIC_CONSUME_OK, BASIC_PUBLISH
    consume = ("sent", (BASIC_CONSUME, 1, 0, 1, False, False))
    consume_ok = ("received", (BASIC_CONSUME_OK, 1, 1))
    holder = [consume, consume_ok, ("received", (BASIC_DELIVER, 1, 1, 1, False, 1)), ("lost",)]
    publish = ("sent", (BASIC_PUBLISH, 1, 0, 0, False, False, 1, False))
    never_back = [publish, consume, consume_ok, ("quiet",)]
    back = [publish, consume, consume_ok, ("received", (BASIC_DELIVER, 1, 1, 1, True, 1)), ("quiet",)]
    order = [1, 1, 0, 1, 1, 0, 0]
    verdict = trace.check({0: never_back, 1: holder}, LATE, order=order + [0])
    assert not verdict.ok and verdict.observation == ("quiet",), verdict.explain()
    assert trace.check({0: back, 1: holder}, LATE, order=order + [0, 0]).ok
