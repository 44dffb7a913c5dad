"""ER-1, what the broker sends after a channel.close (``spec.properties.closed_channel_is_silent``):
nothing but close-ok while it waits for the client's close-ok, which the model proves for every size;
a client that sends close-ok before it has read the channel.close (out of turn) ends the channel at
once, and then sees a new channel's frames after the old channel.close. Frames out of turn also part
the client's view of a channel from the broker's channel of that number, which the client-side
conjuncts of confirms_exactly_once and delivery_tags_increase allow for (``client_in_step``)."""
from __future__ import annotations

import z3

from rabbitproof.model import actions as M
from rabbitproof.model.agreement import Checker
from rabbitproof.model.invariants import INVARIANTS
from rabbitproof.model.state import project
from rabbitproof.proofs.inductive import COUNTEREXAMPLE, PROVED, prove_step
from rabbitproof.spark_check.engine import LocalEngine
from rabbitproof.spec import actions as A
from rabbitproof.spec import configs, machine
from rabbitproof.spec.configs import TO_Q0, Config
from rabbitproof.spec.frames import BASIC_CONSUME_OK, BASIC_DELIVER, CHANNEL_CLOSE, CHANNEL_OPEN_OK, MISSING_EXCHANGE
from rabbitproof.spec.properties import (
    REGISTRY, closed_channel_is_silent, confirms_exactly_once, delivery_tags_increase, sent_after_close,
)
from rabbitproof.spec.roles import Role
from rabbitproof.spec.state import C_OPENING, CH_CLOSING, CH_OPEN
from tests.fixtures.model_plants import disagreements, keeping

# Connection 0's client consumes q0 and, before any answer, sends channel.close-ok out of turn and
# channel.open; connection 1 takes q0 exclusively first, so the broker refuses connection 0's consume
# with a channel error (403), then takes the close-ok as its answer and opens a new channel.
OUT_OF_TURN = (A.ClientConsume(0, 1, 0, 1, False, False), A.ClientChannelCloseOk(0, 1), A.ClientChannelOpen(0, 1),
               A.ClientConsume(1, 1, 0, 1, False, True), A.BrokerTakeFrame(1, 1), A.BrokerTakeFrame(0, 1),
               A.BrokerTakeFrame(0, 1), A.BrokerTakeFrame(0, 1))


def _config(bad: int):
    return configs.get("protocol_errors").override({"bad": bad})


def _replay(config, actions) -> list:
    """The states of ``actions`` from the first initial state, each action enabled where it is taken."""
    states = [machine.initial_states(config)[0]]
    for a in actions:
        assert a in machine.enabled(states[-1], config), a
        states.append(machine.step(states[-1], a)[0])
    return states


def test_nothing_but_close_ok_while_the_broker_waits():
    states = _replay(_config(2), OUT_OF_TURN)
    refused = states[6]                                     # the consume refused: channel.close sent
    assert refused.conns[0].channels[0].status == CH_CLOSING
    assert [f[0] for f in refused.conns[0].to_client[1]] == [CHANNEL_CLOSE]
    assert all(closed_channel_is_silent(s) for s in states)


def test_a_close_ok_out_of_turn_lets_a_new_channel_follow_channel_close():
    """Two frames out of turn (close-ok, then channel.open of a channel the client still holds open)
    and the client has channel.open-ok in flight after channel.close: the broker's channel is a new
    one, open, and the spec's property (only while the broker waits) still holds. With one such frame,
    as in the standard configuration, the client cannot send the channel.open."""
    states = _replay(_config(2), OUT_OF_TURN)
    last = states[-1]
    fifo = last.conns[0].to_client[1]
    assert [f[0] for f in fifo] == [CHANNEL_CLOSE, CHANNEL_OPEN_OK]
    assert sent_after_close(fifo)
    assert last.conns[0].channels[0].status == CH_OPEN
    assert closed_channel_is_silent(last)
    assert [f[0] for f in last.conns[1].to_client[1]] == [BASIC_CONSUME_OK]
    one = _replay(_config(1), OUT_OF_TURN[:2])
    assert A.ClientChannelOpen(0, 1) not in machine.enabled(one[-1], _config(1))


def test_the_model_agrees_where_frames_follow_channel_close():
    """Agreement (model.agreement) on every candidate action of every state of the run above and of its
    successors: the fields ``channel_close_to_client`` and ``sent_after_close`` (a channel.close in flight, a
    frame other than close-ok after it) follow the spec, through the send that puts open-ok after the close
    and the client's read of the close."""
    config = _config(2)
    states = _replay(config, OUT_OF_TURN)
    states += [machine.step(states[-1], a)[0] for a in machine.enabled(states[-1], config)]
    problems, pairs = disagreements(states, config)
    assert problems == [] and pairs > 100
    flags = [project(s) for s in states]
    assert any(f["sent_after_close"].get((0, 1)) for f in flags)
    assert any(f["channel_close_to_client"].get((0, 1)) and not f["sent_after_close"].get((0, 1)) for f in flags)
    # the client read the close
    assert any(not f["channel_close_to_client"].get((0, 1)) for f in flags[len(OUT_OF_TURN) + 1:])


def test_a_send_that_forgets_the_close_before_it_is_caught(monkeypatch):
    config = _config(2)
    states = _replay(config, OUT_OF_TURN)
    take, read = OUT_OF_TURN[-1], A.ClientReceive(0, 1)
    assert Checker().check(states[-2], take, True).ok
    assert Checker().check(states[-1], read, True).ok
    monkeypatch.setitem(M.RELATIONS, A.BrokerTakeFrame, keeping(M.RELATIONS[A.BrokerTakeFrame], "sent_after_close"))
    monkeypatch.setitem(M.RELATIONS, A.ClientReceive, keeping(M.RELATIONS[A.ClientReceive], "channel_close_to_client"))
    assert Checker().check(states[-2], take, True).problem == "relation does not hold for the spec's successor"
    assert Checker().check(states[-1], read, True).problem == "relation does not hold for the spec's successor"


def test_a_closing_channel_that_sends_more_is_refuted(monkeypatch):
    """A broker that counts its close-ok on a closing channel as any other frame (it may follow the
    channel.close) breaks the invariant: the proof shows a closing channel with a frame after its close."""
    inv = INVARIANTS["closed_channel_is_silent"]
    assert prove_step(inv, A.BrokerTakeFrame, []).status == PROVED

    def answers_after_close(x, a, o):
        t = M.BrokerTakeFrame(x, a, o)
        c, ch = a.conn, a.ch
        sent = z3.Store(t.after.sent_after_close, c, ch,
                       z3.Or(t.after.sent_after_close[c, ch], z3.And(o.answered, x.channel_close_to_client[c, ch])))
        return M.Transition(t.guard, t.after.replace(sent_after_close=sent))
    monkeypatch.setitem(M.RELATIONS, A.BrokerTakeFrame, answers_after_close)
    outcome = prove_step(inv, A.BrokerTakeFrame, [])
    assert outcome.status == COUNTEREXAMPLE
    after = next(line for line in outcome.counterexample if line.startswith("after:"))
    assert f"channel_status={CH_CLOSING}" in after and "sent_after_close=True" in after


# A confirm channel whose client may send frames out of turn (and publish to a missing exchange).
CONFIRMS_OUT_OF_TURN = Config("confirms_out_of_turn", "confirm mode, frames out of turn", messages=2, bad=2,
                              roles={(0, 1): Role(publish=TO_Q0 + ((MISSING_EXCHANGE, 0),), confirm=True,
                                                  protocol_errors=True)})
# A consumer that acks a tag it does not hold (a channel error) and may send frames out of turn.
CONSUMER_OUT_OF_TURN = Config("consumer_out_of_turn", "a consumer with frames out of turn", channels=2,
                              messages=2, bad=3,
                              roles={(0, 1): Role(publish=TO_Q0),
                                     (0, 2): Role(consume=((0, False),), ack=True, bad_ack=True,
                                                  protocol_errors=True)})


def test_channel_open_out_of_turn_starts_a_view_of_a_channel_not_open_yet():
    """PC-1: after one confirm-mode publish, channel.open of the channel the client holds open resets
    its view (publish count 0) while the broker's channel has numbered one publish. Compared as they
    were before ``client_in_step``, the view is behind the broker."""
    confirm = (A.ClientConfirmSelect(0, 1), A.BrokerTakeFrame(0, 1), A.ClientPublish(0, 1, 0, 0, False, False, False),
               A.BrokerTakeFrame(0, 1), A.ClientChannelOpen(0, 1))
    last = _replay(CONFIRMS_OUT_OF_TURN, confirm)[-1]
    view, channel = last.conns[0].clients[0], last.conns[0].channels[0]
    assert channel.status == CH_OPEN and channel.publish_seq == 1
    assert view.status == C_OPENING and view.pub_seq == 0
    assert confirms_exactly_once(last)


def test_close_ok_out_of_turn_leaves_deliveries_of_the_old_channel_in_flight():
    """DT-1: a delivery of tag 1 is in flight when a bad ack closes the channel; the client's close-ok
    out of turn and channel.open make the broker open a new channel, whose next tag is 1 again. Compared
    as they were before ``client_in_step``, the tag in flight is not below the next tag."""
    steps = (A.ClientPublish(0, 1, 0, 0, False, False, False), A.BrokerTakeFrame(0, 1),
             A.ClientConsume(0, 2, 0, 1, False, False), A.BrokerTakeFrame(0, 2), A.BrokerDeliver(0),
             A.ClientAck(0, 2, 1000, False), A.BrokerTakeFrame(0, 2), A.ClientChannelCloseOk(0, 2),
             A.BrokerTakeFrame(0, 2), A.ClientChannelOpen(0, 2), A.BrokerTakeFrame(0, 2))
    last = _replay(CONSUMER_OUT_OF_TURN, steps)[-1]
    channel, view = last.conns[0].channels[1], last.conns[0].clients[1]
    fifo = last.conns[0].to_client[2]
    assert channel.status == CH_OPEN and channel.next_tag == 1
    assert [f[3] for f in fifo if f[0] == BASIC_DELIVER] == [1]
    assert [f[0] for f in fifo][-2:] == [CHANNEL_CLOSE, CHANNEL_OPEN_OK]
    assert view.status == C_OPENING
    assert delivery_tags_increase(last)


def test_the_client_conjuncts_hold_in_every_state_with_frames_out_of_turn():
    """Every reachable state of both configurations above keeps the three properties and the helpers
    channel_lifecycle and confirms_in_step. So does protocol_errors with two frames out of turn (825,431
    states under por and symmetry), and with three for the three properties (4,462,803 states): too
    long here."""
    chosen = [REGISTRY[n] for n in ("confirms_exactly_once", "delivery_tags_increase", "closed_channel_is_silent",
                                    "channel_lifecycle", "confirms_in_step")]
    for config in (CONFIRMS_OUT_OF_TURN, CONSUMER_OUT_OF_TURN):
        result = LocalEngine(reductions=("por",)).explore(machine, config, chosen)
        assert result.error is None and result.complete and result.distinct_states > 5_000
        assert [(r.name, r.verdict) for r in result.properties] == [(p.name, "holds") for p in chosen], config.name
