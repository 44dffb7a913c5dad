"""DT-1, ER-1: how channel.open and its open-ok travel (``spec.properties.channel_lifecycle``), the helper
that proves the client-side conjunct of delivery_tags_increase for every size. A client may send
frames out of turn (close-ok before it read channel.close, channel.open of a channel it holds open),
and the broker may then open a new channel while deliveries of the old one are still in flight; the
client's view is open again only once it has read them all, and the Z3 model tracks that with the
fields ``view_status``, ``view_last_tag``, ``open_ok_to_client``, ``older_frames_ahead``,
``deliveries_to_client`` and the flags of the frames in flight to the broker."""
from __future__ import annotations

import z3

from rabbitproof.model import actions as M
from rabbitproof.model.agreement import Checker
from rabbitproof.model.invariants import HELPERS, INVARIANTS
from rabbitproof.model.state import project
from rabbitproof.proofs.inductive import COUNTEREXAMPLE, PROVED, prove_step
from rabbitproof.spec import actions as A
from rabbitproof.spec import machine
from rabbitproof.spec.frames import BASIC_DELIVER, CHANNEL_CLOSE, CHANNEL_OPEN, CHANNEL_OPEN_OK, make_frame
from rabbitproof.spec.properties import channel_lifecycle, delivery_tags_increase
from rabbitproof.spec.state import C_OPEN, C_OPENING, CH_CLOSED
from tests.fixtures.model_plants import disagreements, keeping
from tests.test_closed_channel import CONSUMER_OUT_OF_TURN, _replay

# Channel 2 consumes a delivery of tag 1, acks a tag it never had (a channel error), and sends close-ok
# and channel.open out of turn right behind it: the broker opens a new channel, whose open-ok follows channel.close and
# the old delivery. The client then reads all three, and the new channel delivers tag 1 again.
REOPEN = (A.ClientPublish(0, 1, 0, 0, False, False, False), A.BrokerTakeFrame(0, 1),
          A.ClientConsume(0, 2, 0, 1, False, False), A.BrokerTakeFrame(0, 2), A.BrokerDeliver(0),
          A.ClientAck(0, 2, 1000, False), A.ClientChannelCloseOk(0, 2), A.ClientChannelOpen(0, 2),
          A.BrokerTakeFrame(0, 2), A.BrokerTakeFrame(0, 2), A.BrokerTakeFrame(0, 2))
READ_ALL = (A.ClientReceive(0, 2),) * 4       # consume-ok, the old delivery, channel.close, open-ok


def _run():
    return _replay(CONSUMER_OUT_OF_TURN, REOPEN + READ_ALL)


def test_the_old_deliveries_are_read_before_the_view_is_open_again():
    states = _run()
    reopened = states[len(REOPEN)]
    fifo = reopened.conns[0].to_client[2]
    assert [f.method for f in fifo][-3:] == [BASIC_DELIVER, CHANNEL_CLOSE, CHANNEL_OPEN_OK]
    flags = project(reopened)
    # the old delivery is ahead of the open-ok, and is no delivery of the new channel
    assert flags["open_ok_to_client"][(0, 2)] and flags["older_frames_ahead"][(0, 2)]
    assert not any(flags["deliveries_to_client"].values())
    assert reopened.conns[0].channels[1].next_tag == 1
    last = states[-1]
    assert last.conns[0].clients[1].status == C_OPEN and not last.conns[0].to_client[2]
    assert all(channel_lifecycle(s) and delivery_tags_increase(s) for s in states)


def test_channel_lifecycle_is_false_where_it_should_be():
    """The property can fail: a view open while the open-ok is in flight, a second open-ok, and
    deliveries behind the open-ok out of tag order each make it false."""
    reopened = _run()[len(REOPEN)]
    conn = reopened.conns[0]
    assert conn.clients[1].status == C_OPENING and channel_lifecycle(reopened)

    def with_conn(**changes):
        return reopened._replace(conns=(conn._replace(**changes),) + reopened.conns[1:])
    open_view = with_conn(clients=(conn.clients[0], conn.clients[1]._replace(status=C_OPEN)))
    assert not channel_lifecycle(open_view)
    fifo = conn.to_client[2]
    two_oks = with_conn(to_client=conn.to_client[:2] + (fifo + (make_frame(CHANNEL_OPEN_OK, 2),),) + conn.to_client[3:])
    assert not channel_lifecycle(two_oks)
    late = (make_frame(BASIC_DELIVER, 2, 1, 2, False, 1), make_frame(BASIC_DELIVER, 2, 1, 1, False, 2))
    unordered = with_conn(to_client=conn.to_client[:2] + (fifo + late,) + conn.to_client[3:])
    assert not channel_lifecycle(unordered)
    assert channel_lifecycle(with_conn(to_client=conn.to_client[:2] + (fifo + late[::-1],) + conn.to_client[3:]))


def test_the_model_agrees_through_the_reopen():
    """Agreement on every candidate action of every state of the run and its last successors: the
    view, the open-ok and what is ahead of it, the deliveries of the new channel, and the flags of the
    frames in flight to the broker follow the spec."""
    states = _run()
    states += [machine.step(states[-1], a)[0] for a in machine.enabled(states[-1], CONSUMER_OUT_OF_TURN)]
    problems, pairs = disagreements(states, CONSUMER_OUT_OF_TURN)
    assert problems == [] and pairs > 100
    flags = [project(s) for s in states]
    # channel.open behind the bad ack
    assert any(f["open_to_broker"].get((0, 2)) and f["frame_ahead_of_open"].get((0, 2)) for f in flags)


def test_a_reopen_that_keeps_the_old_deliveries_or_a_read_that_keeps_the_open_ok_is_caught(monkeypatch):
    states = _run()
    take, read = REOPEN[-1], READ_ALL[-1]
    before_open, before_read = states[len(REOPEN) - 1], states[-2]
    assert before_open.conns[0].channels[1].status == CH_CLOSED
    assert before_read.conns[0].to_client[2][0][0] == CHANNEL_OPEN_OK
    assert Checker().check(before_open, take, True).ok and Checker().check(before_read, read, True).ok

    def opens_keeping_deliveries(x, a, o):
        t = M.BrokerTakeFrame(x, a, o)
        opens = z3.And(x.channel_status[a.conn, a.ch] == CH_CLOSED, o.method == CHANNEL_OPEN)
        return M.Transition(t.guard,
                            t.after.replace(deliveries_to_client=z3.If(opens, x.deliveries_to_client,
                                                                       t.after.deliveries_to_client)))
    monkeypatch.setitem(M.RELATIONS, A.BrokerTakeFrame, M.gone_in_this_life(opens_keeping_deliveries))
    monkeypatch.setitem(M.RELATIONS, A.ClientReceive, keeping(M.RELATIONS[A.ClientReceive], "open_ok_to_client"))
    assert Checker().check(before_open, take, True).problem == "relation does not hold for the spec's successor"
    assert Checker().check(before_read, read, True).problem == "relation does not hold for the spec's successor"


def test_delivery_tags_increase_needs_channel_lifecycle():
    """Without channel_lifecycle the client's conjunct is not inductive: nothing stops the broker from
    opening a new channel (next tag 1) while the client holds the channel open. With it, proved."""
    inv = INVARIANTS["delivery_tags_increase"]
    tags_only = [HELPERS["held_back_tags_issued"]]
    assert prove_step(inv, A.BrokerTakeFrame, tags_only).status == COUNTEREXAMPLE
    assert prove_step(inv, A.BrokerTakeFrame, [HELPERS[h] for h in inv.helpers]).status == PROVED
    assert prove_step(inv, A.ClientReceive, [HELPERS[h] for h in inv.helpers]).status == PROVED


def test_a_channel_open_that_leaves_the_view_open_is_refuted(monkeypatch):
    """A client whose channel.open (out of turn) leaves its view open: the broker could open a channel
    the client already holds open, and the proof of channel_lifecycle shows it."""
    inv = HELPERS["channel_lifecycle"]
    assert prove_step(inv, A.ClientChannelOpen, []).status == PROVED
    monkeypatch.setitem(M.RELATIONS, A.ClientChannelOpen,
                        M.gone_in_this_life(keeping(M.ClientChannelOpen, "view_status")))
    outcome = prove_step(inv, A.ClientChannelOpen, [])
    assert outcome.status == COUNTEREXAMPLE
    after = next(line for line in outcome.counterexample if line.startswith("after:"))
    assert f"view_status={C_OPEN}" in after and "open_to_broker=True" in after
