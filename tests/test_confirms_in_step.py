"""PC-1, PC-2: the client's view of its confirms (``confirms_exactly_once`` while the client holds the
channel open), proved for every size with the helper ``spec.properties.confirms_in_step``: every
confirm of the broker's channel in flight covers confirmed publishes only, and the client numbered at
least what the broker numbered plus the publishes in flight the broker will number. The Z3 model
tracks it with the view's mode, publish count and confirms seen (``view_mode``, ``view_publish_count``,
``view_confirmed``), the confirms in flight (``single_confirms_in_flight``, ``multiple_confirm_in_flight``)
and the publishes and selects in flight (``publishes_to_broker``, ``first_select_to_broker``,
``publishes_behind_select``)."""
from __future__ import annotations

from rabbitproof.model import actions as M
from rabbitproof.model.agreement import Checker
from rabbitproof.model.state import project
from rabbitproof.spec import actions as A
from rabbitproof.spec import machine
from rabbitproof.spec.frames import BASIC_ACK, make_frame
from rabbitproof.spec.properties import confirms_exactly_once, confirms_in_step
from rabbitproof.spec.state import MODE_CONFIRM
from tests.fixtures.model_plants import disagreements, keeping
from tests.test_closed_channel import CONFIRMS_OUT_OF_TURN, _replay

PUBLISH = A.ClientPublish(0, 1, 0, 0, False, False, False)
# confirm.select, two publishes numbered 1 and 2, a multiple ack of both, read (confirm.select-ok,
# then the ack); then channel.open of the channel the client holds open (out of turn), refused by the
# broker with a connection error.
RUN = (A.ClientConfirmSelect(0, 1), A.BrokerTakeFrame(0, 1), PUBLISH, PUBLISH, A.BrokerTakeFrame(0, 1),
       A.BrokerTakeFrame(0, 1), A.BrokerConfirm(0, 1, 2, True), A.ClientReceive(0, 1), A.ClientReceive(0, 1),
       A.ClientChannelOpen(0, 1), A.BrokerTakeFrame(0, 1))


def _with_channel_view(state, **changes):
    conn = state.conns[0]
    view = conn.clients[0]._replace(**changes)
    return state._replace(conns=(conn._replace(clients=(view,) + conn.clients[1:]),) + state.conns[1:])


def test_the_client_sees_what_the_broker_confirmed():
    states = _replay(CONFIRMS_OUT_OF_TURN, RUN)
    read = states[9]
    view, channel = read.conns[0].clients[0], read.conns[0].channels[0]
    assert view.mode == MODE_CONFIRM and view.confirms == (1, 2) and set(channel.confirmed) == {1, 2}
    flags = project(states[4])                          # both publishes in flight, to be numbered
    assert flags["publishes_to_broker"][(0, 1)] == 2 and flags["view_publish_count"][(0, 1)] == 2
    assert flags["first_select_to_broker"][(0, 1)] == 0
    assert project(states[7])["multiple_confirm_in_flight"][(0, 1)] == 2       # the multiple ack in flight
    assert all(confirms_exactly_once(s) and confirms_in_step(s) for s in states)


def test_confirms_in_step_is_what_the_induction_needs():
    """Two states where confirms_exactly_once holds and its helper does not, each one step from a state
    where confirms_exactly_once is false: a client that numbered fewer publishes than the broker will
    (the broker's next take numbers one more), and a confirm in flight of a publish the broker has not
    confirmed (the client's read sees it confirmed)."""
    states = _replay(CONFIRMS_OUT_OF_TURN, RUN[:3])       # publish 1 in flight, both in confirm mode
    behind = _with_channel_view(states[-1], pub_seq=0)
    assert confirms_exactly_once(behind) and not confirms_in_step(behind)
    assert not confirms_exactly_once(machine.step(behind, A.BrokerTakeFrame(0, 1))[0])
    taken = _replay(CONFIRMS_OUT_OF_TURN, RUN[:5])[-1]    # publish 1 numbered, not confirmed
    conn = taken.conns[0]
    early = taken._replace(conns=(conn._replace(
        to_client=(conn.to_client[0], conn.to_client[1] + (make_frame(BASIC_ACK, 1, 1, False),)) + conn.to_client[2:]),))
    assert confirms_exactly_once(early) and not confirms_in_step(early)
    for _ in early.conns[0].to_client[1]:
        early = machine.step(early, A.ClientReceive(0, 1))[0]
    assert early.conns[0].clients[0].confirms == (1,) and not confirms_exactly_once(early)


def test_the_model_agrees_along_the_run():
    states = _replay(CONFIRMS_OUT_OF_TURN, RUN)
    states += [machine.step(states[-1], a)[0] for a in machine.enabled(states[-1], CONFIRMS_OUT_OF_TURN)]
    problems, pairs = disagreements(states, CONFIRMS_OUT_OF_TURN)
    assert problems == [] and pairs > 100


def test_a_view_or_confirm_the_model_forgets_is_caught(monkeypatch):
    """Planted faults in the new fields fail agreement on the step that sets them: a publish the client
    does not count, a confirm the broker sends without recording it in flight, a read that forgets
    what the client saw confirmed. (The proofs do not refute them within their time limit: Z3 gives
    up looking for a counterexample, which is harder for it than a proof here.)"""
    states = _replay(CONFIRMS_OUT_OF_TURN, RUN)
    pairs = ((states[2], RUN[2]), (states[6], RUN[6]), (states[8], RUN[8]))
    assert all(Checker().check(s, a, True).ok for s, a in pairs)
    monkeypatch.setitem(M.RELATIONS, A.ClientPublish, keeping(M.RELATIONS[A.ClientPublish], "view_publish_count"))
    monkeypatch.setitem(M.RELATIONS, A.BrokerConfirm,
                        keeping(M.RELATIONS[A.BrokerConfirm], "multiple_confirm_in_flight"))
    monkeypatch.setitem(M.RELATIONS, A.ClientReceive, keeping(M.RELATIONS[A.ClientReceive], "view_confirmed"))
    for s, a in pairs:
        assert Checker().check(s, a, True).problem == "relation does not hold for the spec's successor", a
