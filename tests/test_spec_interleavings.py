"""RabbitMQ 3.10.8's interleavings as steps of the one machine (spec.interleavings): the queue takes its
limiter's resume before a channel's requeue (RQ-1, PF-2). What the trace checker accepted as an outcome of
its own before is now explored, checked by `rabbitproof check`, mirrored by the Z3 model and accepted
by the trace checker from the same steps."""
from __future__ import annotations

from pathlib import Path

import pytest

from rabbitproof.check.answers import check_setup
from rabbitproof.check.questions import QUESTIONS
from rabbitproof.check.setup_file import read_setup
from rabbitproof.spark_check.engine import LocalEngine
from rabbitproof.spec import actions as A
from rabbitproof.spec import configs, faults, interleavings, machine
from rabbitproof.spec.frames import BASIC_GET, BASIC_GET_OK, QUEUE_DELETE, QUEUE_DELETE_OK, QUEUE_PURGE, QUEUE_PURGE_OK
from rabbitproof.spec.properties import get
from rabbitproof.spec.roles import QueueSpec, Role
from rabbitproof.spec.symmetry import Renaming, rename
from tests.fixtures.model_plants import disagreements
from tests.test_spec_trace_methods import get as get_line
from tests.test_spec_trace_prefetch_global import window_race
from tests.test_spec_trace_queue import deliver
from tests.test_spec_tracekit import accepted, cfg, rejected_at

HAZARD = configs.get("hazard_resume_before_requeue")


def reachable(config) -> list:
    """Every state of ``config`` (depth first; the configurations here are small)."""
    start = list(machine.initial_states(config))
    seen, stack = set(start), list(start)
    out = []
    while stack:
        state = stack.pop()
        out.append(state)
        for action in machine.enabled(state, config):
            nxt = machine.step(state, action)[0]
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return out


def test_the_hazard_needs_the_resume_before_the_requeue_RQ_1_PF_2(monkeypatch):
    """One consumer under a channel-wide limit of 1 that requeues sees m0.2 before m0.1 only through the
    new step: were the requeue to reach the queue before the resume, it would see them in order."""
    order = get("consumer_sees_publication_order")
    states = reachable(HAZARD)
    assert any(not order.holds(s) for s in states)
    assert any(s.queues[0].away for s in states)
    monkeypatch.setattr(interleavings, "resumes_first", lambda before, after: False)
    states = reachable(HAZARD)
    assert all(order.holds(s) for s in states)
    assert not any(s.queues[0].away for s in states)


def test_copies_away_are_at_their_places_and_taken_by_no_delivery_RQ_1():
    """The requeued copy is ready at its place (the queue stays in publication order) but away: the
    delivery takes the copy behind it; once the queue takes the requeue, the copy is the head again."""
    state = next(s for s in reachable(HAZARD) if s.queues[0].away and len(s.queues[0].ready) == 2)
    queue = state.queues[0]
    assert [e.key for e in queue.ready] == [1, 2] and [k for k, _, _ in queue.away] == [1]
    assert get("queue_in_publication_order").holds(state)
    delivered = machine.step(state, A.BrokerDeliver(0))[0]
    assert [e.key for e in delivered.queues[0].ready] == [1]
    back = machine.step(state, A.BrokerRequeue())[0]
    assert back.queues[0].away == () and back.queues[0].ready == queue.ready
    assert A.BrokerRequeue() in machine.enabled(state, HAZARD) and A.BrokerRequeue() not in machine.enabled(back, HAZARD)


def test_a_renaming_and_a_vanish_move_the_channel_a_copy_away_waits_for():
    """Copies away name the channel whose requeue they wait for: a renaming of channels (spec.symmetry)
    renames it, and a vanish moves it with its connection to the slot (faults.rename_connection), so that
    the channel's own basic.get still waits for its requeue (``frame_waits``)."""
    state = next(s for s in reachable(HAZARD) if s.queues[0].away)
    assert [(c, ch) for _, c, ch in state.queues[0].away] == [(0, 2)]
    swapped = rename(state, Renaming((0,), ((2, 1),)))
    assert [(c, ch) for _, c, ch in swapped.queues[0].away] == [(0, 1)]
    moved = faults.rename_connection(state, 0, 1)
    assert [(c, ch) for _, c, ch in moved.queues[0].away] == [(1, 2)]


# A consumer under a channel-wide limit of 1 on channel 2 requeues m0.1 while m0.2 waits and may get from
# the queue itself; channel 3 gets from the queue, purges it or deletes it.
BUSY = cfg(connections=1, channels=3, messages=2, requeues=1, qos=1, gets=1, admin=1, queues=(QueueSpec(),),
           roles={(0, 1): Role(publish=((0, 0),)),
                  (0, 2): Role(consume=((0, False),), qos=((1, True),), qos_first=True, ack=True, nack=(True,),
                               get=((0, False),)),
                  (0, 3): Role(get=((0, False),), purge=(0,), delete=((0, False, False),))})


@pytest.fixture(scope="module")
def away_states():
    """The states of BUSY (27,240) in which copies are away."""
    return [s for s in reachable(BUSY) if s.queues[0].away]


def _away_msgs(state) -> set:
    keys = {k for k, _, _ in state.queues[0].away}
    return {e.msg for e in state.queues[0].ready if e.key in keys}


def test_other_channels_reach_the_queue_before_the_requeue_its_own_wait_for_it(away_states):
    """A basic.get, purge or delete of another channel may be taken while copies are away (it reached the
    queue first: the copies are not counted); the requeueing channel's own get waits for the requeue."""
    others = [s for s in away_states if s.conns[0].to_broker[3]]
    assert others and all(A.BrokerTakeFrame(0, 3) in machine.enabled(s, BUSY) for s in others)
    own = [s for s in away_states if interleavings.frame_waits(s, 0, 2)]
    assert own and all(A.BrokerTakeFrame(0, 2) not in machine.enabled(s, BUSY) for s in own)
    seen = set()
    for state in others:
        method = state.conns[0].to_broker[3][0][0]
        answer = machine.step(state, A.BrokerTakeFrame(0, 3))[0].conns[0].to_client[3][-1]
        present = len(state.queues[0].ready) - len(state.queues[0].away)
        if method == BASIC_GET and answer[0] == BASIC_GET_OK:
            assert answer[4] not in _away_msgs(state) and answer[5] == present - 1
        elif method == QUEUE_PURGE:
            assert answer == (QUEUE_PURGE_OK, 3, present)
        elif method == QUEUE_DELETE:
            assert answer == (QUEUE_DELETE_OK, 3, present)
        seen.add(method)
    assert seen == {BASIC_GET, QUEUE_PURGE, QUEUE_DELETE}


def test_the_z3_model_agrees_where_copies_are_away(away_states):
    """Agreement (model.agreement) on every candidate action of every state of BUSY with copies away:
    deliveries behind them, another channel's get, purge and delete, the waiting get, the requeue."""
    problems, pairs = disagreements(away_states, BUSY)
    assert not problems, problems[:5]
    assert pairs >= 5_000


def test_the_trace_checker_accepts_the_race_from_the_machines_steps_RQ_1_PF_2():
    """The recorded race is accepted, and its explanation takes the machine's step (no outcome of the
    trace checker's own); a broker that loses the requeued message, or sends it back first under a
    per-consumer limit only, is still rejected (tests/test_spec_trace_prefetch_global.py has those)."""
    verdict = accepted(window_race(global_=True))
    assert A.BrokerRequeue() in verdict.path


def test_the_requeueing_channels_get_finds_its_copy_back_RQ_1():
    """The channel's own basic.get behind its requeue reaches the queue after it: it gets m0.1 back
    (RabbitMQ's channel sends both to the queue in order), never m0.2 ahead of it."""
    race = window_race(global_=True)
    head = race[:race.index(deliver(2, "m0.2"))]               # up to the nack
    base = cfg(queues=(QueueSpec(durable=True),))
    accepted(head + f"{get_line(2, 2, 'm0.1', 1, redelivered=True)}\n", base)
    rejected_at(head + f"{get_line(2, 2, 'm0.2', 1)}  # REJECTED\n", config=base)


def test_check_answers_out_of_order_for_one_consumer_with_a_channel_wide_limit(tmp_path: Path):
    """The setup that found the gap: one worker, prefetch 1 for its channel, nack with requeue on failure,
    two confirmed persistent messages. RabbitMQ can give it 1, 2, 1: out of order can happen, by the step
    of the queue taking the requeue late; with a per-consumer limit it cannot."""
    setup = tmp_path / "global-requeue.toml"
    example = (Path(__file__).resolve().parents[1] / "examples" / "requeue-on-failure.toml").read_text()
    assert "prefetch = 2\n" in example and 'on_failure = "nack-requeue"' in example
    text = example.replace("prefetch = 2\n", 'prefetch = 1\nprefetch_scope = "SCOPE"\n')
    setup.write_text(text.replace("SCOPE", "channel"))
    result = check_setup(read_setup(setup), LocalEngine(reductions=("symmetry",)))
    verdicts = {q.key: a for q, a in zip(QUESTIONS, result.answers)}
    assert verdicts["order"].verdict == "can happen"
    assert any(step.action_type == "BrokerRequeue" for step in verdicts["order"].trace.steps)
    assert verdicts["lost"].verdict == verdicts["waits"].verdict == "cannot happen"
    setup.write_text(text.replace("SCOPE", "consumer"))
    result = check_setup(read_setup(setup), LocalEngine(reductions=("symmetry",)))
    assert {q.key: a.verdict for q, a in zip(QUESTIONS, result.answers)}["order"] == "cannot happen"
