"""The Z3 model knows the delivery a queue is sending (spec.state.Queue.sending, broker.deliver: to an
automatic-mode consumer on a channel with a global limit a delivery is two steps, the limiter's yes and
the channel numbering it, PF-3, AM-2): the model's fields ``sending_*`` (model.state), BrokerDeliver's two
steps and every relation that loses, moves or numbers such a delivery agree with spec/ on every state of
small configurations where it happens (model.agreement), the invariants hold of those states, and a
relation that numbers at once, or a channel error or a crash that keeps the delivery on its way, is
caught (the crash by the proofs too); the bounded family (BMC) leaves such a delivery out."""
from __future__ import annotations

import dataclasses

import pytest
import z3

from rabbitproof.model import actions as M
from rabbitproof.model import bounded as B
from rabbitproof.model.agreement import Checker
from rabbitproof.model.invariants import HELPERS, INVARIANTS
from rabbitproof.model.state import abstract
from rabbitproof.proofs.bmc import _concrete
from rabbitproof.proofs.inductive import COUNTEREXAMPLE, PROVED, prove_step
from rabbitproof.spec import actions as A
from rabbitproof.spec import machine
from rabbitproof.spec.frames import CHANNEL_CLOSE, QUEUE_DELETE
from rabbitproof.spec.roles import QueueSpec, Role
from rabbitproof.spec.state import CH_CLOSED, CONN_GONE
from tests.fixtures.model_plants import disagreements, keeping
from tests.test_proofs_inductive import _parts, _value
from tests.test_spec_interleavings import reachable
from tests.test_spec_tracekit import cfg

Q0, Q1 = 0, 1
SENDING_FIELDS = ("sending_key", "sending_connection", "sending_channel", "sending_consumer")

# The race broker.deliver describes: one channel under qos(1, global), a manual consumer of q0 and an automatic-mode
# consumer of q1; one publisher sends a message to each queue. The automatic-mode delivery of q1 may be
# admitted, then q0's delivery fill the limit and be numbered first (1,113 states, 120 of them sending).
RACE = cfg(connections=1, channels=2, messages=2, requeues=0, bad=0, qos=1, queues=(QueueSpec(), QueueSpec()),
           roles={(0, 1): Role(publish=((0, Q0), (0, Q1))),
                  (0, 2): Role(consume=((Q0, False), (Q1, True)), qos=((1, True),), qos_first=True, ack=True)})

# A consumer connection with an automatic-mode consumer under qos(1, global), and what can happen to a
# delivery on its way: its channel closed by the client or with an error, the queue deleted (if-empty:
# numbered first, then refused or deleted), a crash (22,420 states, 252 sending); or its client lost
# or vanished, the broker noticing late (307 states, 20 sending). Not a crash and a vanish together: the
# model's crash leaves the slots that hold vanished connections down with their broker end open, where the
# spec keeps them free (gone, broker end closed), whatever a queue is sending; no standard configuration
# has both budgets, and that gap is one of its own.
_CONSUMER = {(0, 1): Role(publish=((0, Q0),), delete=((Q0, False, True),)),
             (1, 1): Role(consume=((Q0, True),), qos=((1, True),), qos_first=True, close=True)}
_ONE_QUEUE = dict(connections=2, channels=1, messages=1, requeues=0, bad=0, qos=1, queues=(QueueSpec(),),
                  reconnects=1, roles=_CONSUMER)
CLOSED = cfg(crashes=1, channel_errors=1, admin=1, closes=1, **_ONE_QUEUE)
VANISHED = cfg(vanishes=1, losses=1, **_ONE_QUEUE)


def _sending(state) -> bool:
    return any(queue.sending for queue in state.queues)


@pytest.fixture(scope="module")
def race_states():
    return reachable(RACE)


def test_the_race_is_two_steps_and_the_late_one_is_numbered_first(race_states):
    """A queue is sending in some states of RACE; from one of them the other queue's manual-mode delivery
    takes tag 1 and the automatic-mode one, admitted before it, tag 2 (PF-3: what RabbitMQ 3.10.8 did)."""
    sending = [s for s in race_states if _sending(s)]
    assert 100 <= len(sending) < len(race_states)
    late = [s for s in sending if s.queues[Q1].sending and s.conns[0].channels[1].unacked
            and s.conns[0].channels[1].unacked[0].tag == 1 and s.conns[0].channels[1].volume == 1]
    assert late
    after = machine.step(late[0], A.BrokerDeliver(Q1))[0]
    assert not after.queues[Q1].sending and after.conns[0].auto[0][:2] == (2, 2)    # channel 2, tag 2


def test_the_z3_model_agrees_on_every_state_of_the_race(race_states):
    """Agreement (model.agreement) on every candidate action of every state of RACE: both steps of the
    delivery, and every other action beside a delivery on its way."""
    problems, pairs = disagreements(race_states, RACE)
    assert not problems, problems[:5]
    assert pairs >= 15_000


@pytest.mark.parametrize("config", [CLOSED, VANISHED], ids=["closed", "vanished"])
def test_the_z3_model_agrees_where_a_delivery_on_its_way_is_lost_moved_or_numbered_first(config):
    """Agreement on every candidate action of every state where a queue is sending (of every state of the
    smaller VANISHED): a channel.close, a channel error or a crash loses the delivery (storage.lose_sent,
    FATE_LOST_AUTOACK), a queue.delete has the channel number it first, a vanish moves it with the
    connection (numbered there, it is lost), a loss or the broker's late notice closes the channel and
    loses it."""
    states = reachable(config)
    sending = [s for s in states if _sending(s)]
    if config is CLOSED:
        states = sending
    steps = {(type(a), _frame(s, a)) for s in sending for a in machine.enabled(s, config)}
    if config is CLOSED:
        assert {(A.BrokerTakeFrame, CHANNEL_CLOSE), (A.BrokerTakeFrame, QUEUE_DELETE), (A.BrokerChannelError, None),
                (A.BrokerCrash, None)} <= steps
    else:
        assert {(A.ClientVanish, None), (A.NetworkLoss, None), (A.BrokerDetect, None)} <= steps
        assert any(s.conns[s.queues[Q0].sending[0]].status == CONN_GONE for s in sending)    # moved
    problems, pairs = disagreements(states, config)
    assert not problems, problems[:5]
    assert pairs >= 4_000


def _frame(state, action):
    """The method of the frame a BrokerTakeFrame takes, else None."""
    if type(action) is A.BrokerTakeFrame and action.ch:
        return state.conns[action.conn].to_broker[action.ch][0][0]
    return None


def test_every_invariant_holds_where_a_queue_is_sending(race_states):
    """The Z3 invariants (helpers included) are true of the abstraction of states where a queue is
    sending: what they say of the delivery on its way (sending_copies_in_one_place,
    automatic_copies_in_one_place, copy_keys_issued, sent_to_open_channels) is so of the spec's states."""
    states = [s for s in race_states if _sending(s)][::6]
    assert len(states) >= 20
    for state in states:
        x = abstract(state)
        for inv in (*INVARIANTS.values(), *HELPERS.values()):
            solver = z3.Solver()
            solver.add(z3.Not(inv.holds(x)))
            assert solver.check() == z3.unsat, (inv.name, state)


def _first(config, want):
    """A state of ``config`` and an enabled action with ``want(state, action)``."""
    for state in reachable(config):
        for a in machine.enabled(state, config):
            if want(state, a):
                return state, a
    raise AssertionError("no such state")


def numbers_at_once(x, a, o):
    """BrokerDeliver as it was before the split (a planted bug): the head goes out numbered at once, to an
    automatic-mode consumer under a global limit too."""
    c, ch, k = o.conn, o.ch, o.consumer_tag
    guard = z3.And(x.broker_up, o.can_deliver, M._channel_open(x, c, ch), M.is_next(x, a.queue, o.copy_key),
                   x.consumers[c, ch, k], M.has_room(x, c, ch, k))
    return M.Transition(guard, M._send(M._hand_over(x, c, ch, x.consumer_no_ack[c, ch, k], z3.BoolVal(True), a.queue,
                                                    o.copy_key, k), c, ch))


def test_a_delivery_numbered_at_once_is_caught(monkeypatch):
    """PF-3: a deliver relation that numbers the automatic-mode delivery in the limiter's step disagrees
    with the spec, where the copy leaves the queue with no tag."""
    state, action = _first(RACE, lambda s, a: type(a) is A.BrokerDeliver and a.queue == Q1 and not _sending(s))
    assert machine.step(state, action)[0].queues[Q1].sending
    assert Checker().check(state, action, True).ok
    monkeypatch.setitem(M.RELATIONS, A.BrokerDeliver, M.gone_in_this_life(numbers_at_once))
    assert Checker().check(state, action, True).problem == "relation does not hold for the spec's successor"


def test_a_channel_error_that_keeps_the_delivery_on_its_way_is_caught(monkeypatch):
    """AM-2: a channel error that leaves the delivery on its way to the closing channel disagrees with the
    spec, which loses it (storage.lose_sent)."""
    state, action = _first(CLOSED, lambda s, a: type(a) is A.BrokerChannelError and s.queues[Q0].sending
                           and s.queues[Q0].sending[:2] == (a.conn, a.ch))
    assert Checker().check(state, action, True).ok
    monkeypatch.setitem(M.RELATIONS, A.BrokerChannelError, keeping(M.RELATIONS[A.BrokerChannelError], *SENDING_FIELDS))
    assert Checker().check(state, action, True).problem == "relation does not hold for the spec's successor"


def test_a_crash_that_keeps_the_delivery_on_its_way_is_caught(monkeypatch):
    """AM-2: a crash that leaves a delivery on its way disagrees with the spec, which loses it, and breaks
    sent_to_open_channels for every size: the proof shows a queue still sending to a channel the crash
    closed."""
    state, action = _first(CLOSED, lambda s, a: type(a) is A.BrokerCrash and _sending(s))
    inv = HELPERS["sent_to_open_channels"]
    helpers = [HELPERS[h] for h in inv.helpers]
    assert Checker().check(state, action, True).ok
    assert prove_step(inv, A.BrokerCrash, helpers).status == PROVED
    monkeypatch.setitem(M.RELATIONS, A.BrokerCrash, keeping(M.RELATIONS[A.BrokerCrash], *SENDING_FIELDS))
    assert Checker().check(state, action, True).problem == "relation does not hold for the spec's successor"
    outcome = prove_step(inv, A.BrokerCrash, helpers)
    assert outcome.status == COUNTEREXAMPLE
    queue = int(outcome.counterexample[0].split("index ")[1])          # the invariant's third index: a queue
    after = _parts(next(line for line in outcome.counterexample if line.startswith("after:")))
    channel = next(text for heading, text in after.items() if heading.startswith("channel ("))
    assert _value(channel, "channel_status") == str(CH_CLOSED)
    assert _value(after[f"queue {queue}"], "sending_key") != "0"


def test_the_bounded_family_leaves_the_first_of_two_steps_out():
    """model.bounded (BMC) has no ``Queue.sending``: a delivery to an automatic-mode consumer under a global
    limit is outside its subset, so its BrokerDeliver's guard is false where the spec takes the first of
    the two steps (a manual-mode delivery under the same limit stays in), and a state where a queue is
    sending is refused by its projection."""
    one = cfg(connections=1, channels=2, messages=1, requeues=0, bad=0, qos=1, queues=(QueueSpec(),),
              roles={(0, 1): Role(publish=((0, Q0),)), (0, 2): Role(consume=((Q0, True),), qos=((1, True),),
                                                                      qos_first=True)})
    shape = B.shape_of(one)
    state, action = _first(one, lambda s, a: type(a) is A.BrokerDeliver and not _sending(s))
    after = machine.step(state, action)[0]
    assert after.queues[Q0].sending
    guard = B.relation(shape, one, action, _concrete(B.project(state, shape))).guard
    assert z3.is_false(z3.simplify(guard))
    with pytest.raises(B.OutsideSubset, match="Queue.sending"):
        B.project(after, shape)
    manual = dataclasses.replace(one, roles={**one.roles, (0, 2): dataclasses.replace(one.roles[(0, 2)],
                                                                                      consume=((Q0, False),))})
    state, action = _first(manual, lambda s, a: type(a) is A.BrokerDeliver)
    guard = B.relation(B.shape_of(manual), manual, action, _concrete(B.project(state, B.shape_of(manual)))).guard
    assert z3.is_true(z3.simplify(guard))
