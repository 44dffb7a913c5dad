"""The one table of AMQP methods (spec.frames.METHODS) and what is derived from it: frames read by name
that hash and count as the plain tuples they were, the client actions each way, pamqp's names, the
replies a synchronous method waits for, and the pure reads of `rabbitproof check`, each held to the code
that acts on the method."""
from __future__ import annotations

import pickle

import pytest
from pamqp import commands

from rabbitproof.check.pure_reads import PURE
from rabbitproof.conformance import coverage
from rabbitproof.conformance import programs as P
from rabbitproof.conformance.targets import REPLIES
from rabbitproof.recording.observations import BY_PAMQP_NAME, pamqp_name
from rabbitproof.spec import actions as A
from rabbitproof.spec import configs, machine, network
from rabbitproof.spec.frames import (
    BASIC_ACK, BASIC_GET_EMPTY, FIELDS, FRAME_CLASSES, METHODS, QUEUE_DECLARE_OK, TX_COMMIT_OK,
    as_frame, frame_text, make_frame,
)
from rabbitproof.spec.state import put, with_conn
from rabbitproof.spec.trace_text import parse_frame
from tests.test_spec_interleavings import reachable

# Small configurations that between them send most methods (20 or more: the test below counts them).
CONFIGS = ("channel_error", "hazard_tx_not_atomic", "hazard_late_detection", "tx_publish",
           "hazard_resume_before_requeue")
MODEL_ONLY = {"msg", "persistent", "reason", "detail"}     # from the content or the reply text, not a pamqp field


@pytest.fixture(scope="module")
def states() -> list:
    return [(configs.get(name), state) for name in CONFIGS for state in reachable(configs.get(name))]


def test_a_frame_reads_by_name_and_is_the_plain_tuple_of_its_values() -> None:
    frame = make_frame(BASIC_ACK, 1, 3, True)
    assert (frame.method, frame.channel, frame.delivery_tag, frame.multiple) == (BASIC_ACK, 1, 3, True)
    assert frame == (BASIC_ACK, 1, 3, True) and hash(frame) == hash((BASIC_ACK, 1, 3, True))
    assert pickle.loads(pickle.dumps(frame)) == frame and type(pickle.loads(pickle.dumps(frame))) is type(frame)
    assert as_frame((BASIC_ACK, 1, 3, True)) == frame and type(as_frame((BASIC_ACK, 1, 3, True))) is type(frame)
    assert frame._replace(delivery_tag=4).delivery_tag == 4
    for m in METHODS:
        assert FRAME_CLASSES[m.code]._fields == ("method", "channel") + m.fields


def test_a_frame_with_the_wrong_number_of_fields_is_refused_naming_them() -> None:
    with pytest.raises(TypeError, match=r"basic.ack carries 2 fields \(delivery_tag, multiple\), not 1"):
        make_frame(BASIC_ACK, 1, 3)


def test_every_frame_of_the_explored_states_is_of_its_methods_class(states) -> None:
    """No plain tuple leaks into a state: every step builds its frames from the table."""
    seen = set()
    for _, state in states:
        for conn in state.conns:
            for frame in [*network.all_frames(conn.to_client), *network.all_frames(conn.to_broker)]:
                assert type(frame) is FRAME_CLASSES[frame.method], frame
                seen.add(frame.method)
    assert {BASIC_ACK, TX_COMMIT_OK} <= seen and len(seen) >= 20, sorted(seen)


def test_client_actions_and_their_frames_are_one_vocabulary(states) -> None:
    """Each client action's fields are its method's (by name), and the trace checker's way back from a
    frame to the action gives the action again, for every client action the explored states enable."""
    writers = A.writes_method()
    for cls in writers.values():
        own = {name for name, _ in A._own_fields(cls)}
        assert own <= set(FIELDS.get(cls.METHOD, ())), cls
    for cls in writers.values():                     # every one, with every field set
        action = cls(1, 0 if cls is A.ClientConnectionClose else 2,
                     *(True if flag else 3 for _, flag in A._own_fields(cls)))
        assert A.action_of(1, A.frame_of(action, msg=5)) == action, action
    written_by = set()
    for config, state in states:
        for action in machine.enabled(state, config):
            if type(action) in writers.values():
                _, labels = machine.step(state, action)
                written = [w.frame for w in labels if w.to_broker]
                assert written[0].method == action.METHOD and A.action_of(action.conn, written[0]) == action
                written_by.add(type(action))
    assert len(written_by) >= 9, sorted(cls.__name__ for cls in written_by)


def test_a_plain_reply_read_by_the_client_changes_nothing_but_the_wire(states) -> None:
    """``plain`` (and so ``PURE``, the reads `check` fuses) is what spec.client.receive does: popping a
    plain reply leaves every other part of the state as it was; a reply that is not plain changes more."""
    assert PURE == {m.code for m in METHODS if m.plain} and QUEUE_DECLARE_OK in PURE
    read = set()
    for _, state in states:
        for c, conn in enumerate(state.conns):
            for ch, fifo in enumerate(conn.to_client):
                if not fifo or not network.can_move(conn.to_client, ch) or fifo[0].method not in PURE:
                    continue
                after, _ = machine.step(state, A.ClientReceive(c, ch))
                popped = with_conn(state, c, conn._replace(to_client=put(conn.to_client, ch, fifo[1:])))
                assert after == popped, frame_text(fifo[0])
                read.add(fifo[0].method)
    assert read, "no plain reply read in the configurations"
    assert BASIC_GET_EMPTY not in PURE      # a polling consumer waits for it
    assert TX_COMMIT_OK not in PURE         # the observer of `check` reads it


def test_pamqp_names_and_the_replies_a_runner_waits_for_come_from_the_table() -> None:
    for m in METHODS:
        cls_name, method_name = pamqp_name(m.name).split(".")
        pamqp_class = getattr(getattr(commands, cls_name), method_name)
        assert pamqp_class.name == pamqp_name(m.name)
        assert set(m.fields) - MODEL_ONLY <= set(pamqp_class().__slots__ if hasattr(pamqp_class(), "__slots__")
                                                 else vars(pamqp_class())), m.name
        assert BY_PAMQP_NAME[pamqp_name(m.name)] is m
    assert {"Basic.GetOk", "Basic.GetEmpty", "Tx.CommitOk", "Channel.CloseOk"} <= REPLIES
    assert "Basic.Deliver" not in REPLIES and "Basic.Ack" not in REPLIES


def test_the_conformance_ops_lead_to_the_action_that_writes_their_method() -> None:
    for op in P.Op.__args__:
        writer = A.writes_method()[op.METHOD]
        assert op in coverage.LEADS_TO[writer.__name__], op


def test_the_trace_language_reads_what_it_writes_for_every_method() -> None:
    for m in METHODS:
        values = [{"msg": 1 << 32 | 1, "queue": 1, "routing_key": 1, "exchange": 1}.get(f, 1) for f in m.fields]
        if "reason" in m.fields:
            values = [406, 1, 7]                    # PRECONDITION_FAILED - unknown delivery tag 7
        frame = make_frame(m.code, 1, *values)
        assert parse_frame(frame_text(frame)) == frame, frame_text(frame)
