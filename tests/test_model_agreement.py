"""The Z3 model agrees with spec/ (model.agreement): on pairs (state, action) drawn by Hypothesis from
states reachable in the standard configurations (at least 2,500 enabled and 2,500 disabled here; `make
verify`'s agreement part draws 21,515 and more), each enabled action's relation holds for the successor
spec.machine.step computes and for no other state, and each disabled action's guard is false."""
from __future__ import annotations

import dataclasses
import time

import z3
from hypothesis import HealthCheck, given, settings, strategies as st

from rabbitproof.model import actions as M
from rabbitproof.model.agreement import Checker
from rabbitproof.model.state import abstract
from rabbitproof.spec import actions as A
from rabbitproof.spec import broker, client, configs, machine
from rabbitproof.spec.frames import (
    BASIC_ACK, BASIC_CONSUME, BASIC_DELIVER, BASIC_NACK, BASIC_PUBLISH, BASIC_QOS, BASIC_REJECT, CHANNEL_CLOSE,
    PRECONDITION_FAILED, QUEUE_DECLARE, QUEUE_DECLARE_OK, RESOURCE_LOCKED, TX_COMMIT, TX_ROLLBACK, make_frame,
)
from rabbitproof.spec.state import MODE_CONFIRM, MODE_TX
from tests.fixtures.model_plants import keeping, replacing, requeue_to_tail

SMALL = tuple(n for n in configs.STANDARD if configs.get(n).category != "medium")
PAIRS_WANTED = 2_500


def _walk(config, choices):
    """The states of one execution of ``config``, each next action chosen by ``choices``."""
    state = machine.initial_states(config)[0]
    yield state
    for pick in choices:
        enabled = machine.enabled(state, config)
        if not enabled:
            return
        state = machine.step(state, enabled[pick % len(enabled)])[0]
        yield state


def test_agreement_on_random_pairs():
    checker = Checker()
    seen = {"pairs": 0, "enabled": 0, "disabled": 0}
    problems = []

    @settings(max_examples=110, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(SMALL), st.lists(st.integers(0, 1 << 16), min_size=5, max_size=45))
    def check_execution(name, choices):
        config = configs.get(name)
        for state in _walk(config, choices):
            for verdict in checker.check_state(state, config):
                seen["pairs"] += 1
                seen["enabled" if verdict.enabled else "disabled"] += 1
                if not verdict.ok:
                    problems.append(f"{name}: {verdict.action!r}: {verdict.problem}")

    started = time.perf_counter()
    check_execution()
    print(f"\nagreement: {seen['pairs']:,} pairs ({seen['enabled']:,} enabled, {seen['disabled']:,} disabled) "
          f"in {time.perf_counter() - started:.1f} s")
    assert not problems, problems[:5]
    assert seen["enabled"] >= PAIRS_WANTED and seen["disabled"] >= PAIRS_WANTED


def _first_state(config, want):
    """A reachable state of ``config`` where some enabled action satisfies ``want`` (BFS)."""
    return _first_state_where(config, lambda state, a: want(a))


def test_a_wrong_effect_is_caught(monkeypatch):
    """PC-3: a confirm relation that forgets multiple=true disagrees with the spec."""
    def confirm_one(x, a, o):
        t = M.BrokerConfirm(x, a, o)
        a2 = M.Terms({**a, "multiple": z3.BoolVal(False)})
        return M.Transition(t.guard, M.BrokerConfirm(x, a2, o).after)
    config = configs.get("confirms")
    state, action = _first_state(config, lambda a: isinstance(a, A.BrokerConfirm) and a.multiple)
    assert Checker().check(state, action, True).ok
    monkeypatch.setitem(M.RELATIONS, A.BrokerConfirm, confirm_one)
    verdict = Checker().check(state, action, True)
    assert verdict.problem == "relation does not hold for the spec's successor"


def test_a_wrong_delivery_effect_is_caught(monkeypatch):
    """DT-1: a deliver relation that leaves the next tag where it was disagrees with the spec."""
    def deliver_same_tag(x, a, o):
        t = M.BrokerDeliver(x, a, o)
        return M.Transition(t.guard, t.after.replace(next_tag=x.next_tag))
    config = configs.get("ack_basics")
    state, action = _first_state(config, lambda a: isinstance(a, A.BrokerDeliver))
    _caught(monkeypatch, state, action, A.BrokerDeliver, deliver_same_tag)


def _caught(monkeypatch, state, action, cls, planted, problem="relation does not hold for the spec's successor"):
    """The relation of ``cls`` agrees with the spec on (state, action); ``planted`` in its place does not."""
    assert Checker().check(state, action, True).ok
    monkeypatch.setitem(M.RELATIONS, cls, planted)
    assert Checker().check(state, action, True).problem == problem


def _first_state_where(config, want):
    """A reachable state of ``config`` and an enabled action with ``want(state, action)`` (BFS)."""
    frontier, seen = list(machine.initial_states(config)), set()
    while frontier:
        state = frontier.pop(0)
        if state in seen:
            continue
        seen.add(state)
        for a in machine.enabled(state, config):
            if want(state, a):
                return state, a
            frontier.append(machine.step(state, a)[0])
    raise AssertionError("no such state")


def _rollback_of_held_settlements(state, a):
    if not isinstance(a, A.BrokerTakeFrame) or not a.ch:
        return False
    conn = state.conns[a.conn]
    return conn.to_broker[a.ch][0].method == TX_ROLLBACK and bool(conn.channels[a.ch - 1].tx_settles)


def test_a_wrong_rollback_is_caught(monkeypatch):
    """TX-3: a rollback relation that forgets to make the held-back settlements outstanding again
    disagrees with the spec."""
    def rollback_forgets(x, a, o):
        t = M.BrokerTakeFrame(x, a, o)
        return M.Transition(t.guard,
                            t.after.replace(outstanding=z3.If(o.method == TX_ROLLBACK, x.outstanding,
                                                              t.after.outstanding)))
    state, action = _first_state_where(configs.get("tx_ack"), _rollback_of_held_settlements)
    _caught(monkeypatch, state, action, A.BrokerTakeFrame, rollback_forgets)


def test_a_wrong_consumer_effect_is_caught(monkeypatch):
    """A consume relation that does not record the consumer disagrees with the spec."""
    def consume_forgets(x, a, o):
        t = M.BrokerTakeFrame(x, a, o)
        return M.Transition(t.guard,
                            t.after.replace(consumers=z3.If(o.method == BASIC_CONSUME, x.consumers, t.after.consumers)))

    def takes_consume(state, a):
        return isinstance(a, A.BrokerTakeFrame) and a.ch and state.conns[a.conn].to_broker[a.ch][0][0] == BASIC_CONSUME
    state, action = _first_state_where(configs.get("ack_basics"), takes_consume)
    _caught(monkeypatch, state, action, A.BrokerTakeFrame, consume_forgets)


def test_a_weak_guard_is_caught(monkeypatch):
    """ER-1: a close-ok relation without its guard is enabled where the spec's is not."""
    config = configs.get("ack_basics")
    state = machine.initial_states(config)[0]
    action = A.BrokerCloseOk(0, 1)
    assert action not in machine.enabled(state, config)
    assert Checker().check(state, action, False).ok
    monkeypatch.setitem(M.RELATIONS, A.BrokerCloseOk,
                        lambda x, a, o: M.Transition(z3.BoolVal(True), M.BrokerCloseOk(x, a, o).after))
    assert Checker().check(state, action, False).problem.startswith("guard not false")


def test_a_nondeterministic_relation_is_caught(monkeypatch):
    """A relation that leaves a field free admits another successor: the uniqueness half fails."""
    def loose_restart(x, a, o):
        t = M.BrokerRestart(x, a, o)
        return M.Transition(t.guard,
                            t.after.replace(publish_seq=z3.Array("free", z3.IntSort(), z3.IntSort(), z3.IntSort())))
    config = configs.get("hazard_unconfirmed_lost")
    state, action = _first_state(config, lambda a: isinstance(a, A.BrokerRestart))
    monkeypatch.setitem(M.RELATIONS, A.BrokerRestart, loose_restart)
    assert Checker().check(state, action, True).problem == "relation admits another successor"


def test_every_action_has_a_relation_and_a_precondition():
    classes = M.action_classes()
    assert set(classes) == set(M.RELATIONS) == set(machine.PRECONDITIONS)
    for cls in classes:
        assert M.RELATIONS[cls].__name__ in (cls.__name__, "_client_writes"), cls
        assert {f.name for f in dataclasses.fields(cls)} == set(M.param_sorts(cls))


def test_a_wrong_declare_is_caught(monkeypatch):
    """DU-4: a declare relation that ignores exclusive=true (no owner) disagrees with the spec."""
    def declare_ignores_exclusive(x, a, o):
        return M.BrokerTakeFrame(x, a, M.Terms({**o, "exclusive": z3.BoolVal(False)}))

    def takes_exclusive_declare(state, a):
        if not isinstance(a, A.BrokerTakeFrame) or not a.ch:
            return False
        frame = state.conns[a.conn].to_broker[a.ch][0]
        return frame[0] == QUEUE_DECLARE and frame[4] and not state.queues[frame[2]].exists
    state, action = _first_state_where(configs.get("routing"), takes_exclusive_declare)
    _caught(monkeypatch, state, action, A.BrokerTakeFrame, declare_ignores_exclusive)



def test_an_inequivalent_redeclare_is_refused_by_both_DU_4_ER_2(monkeypatch):
    """DU-4, ER-2: the Z3 model answers a declare of an existing queue from its flags as the spec does
    (broker._queue_declare): each flag that differs is refused, the same flags are declare-ok; a model
    that answers every declare with declare-ok disagrees with the spec."""
    config = configs.get("routing")
    start = machine.initial_states(config)[0]
    transient = next(q for q, queue in enumerate(start.queues) if queue.exists and not queue.durable and
                     not queue.owner)
    answers = {}
    for durable, exclusive in ((False, False), (True, False), (False, True)):
        state = machine.step(start, A.ClientDeclareQueue(0, 1, transient, durable, exclusive))[0]
        action = A.BrokerTakeFrame(0, 1)
        assert Checker().check(state, action, True).ok
        answers[durable, exclusive] = machine.step(state, action)[0].conns[0].to_client[1][-1][:3]
    assert answers[False, False] == (QUEUE_DECLARE_OK, 1, transient)
    assert answers[True, False] == (CHANNEL_CLOSE, 1, PRECONDITION_FAILED)
    assert answers[False, True] == (CHANNEL_CLOSE, 1, RESOURCE_LOCKED)
    state = machine.step(start, A.ClientDeclareQueue(0, 1, transient, True, False))[0]

    def declare_always_ok(x, a, o):
        return M.BrokerTakeFrame(x, a, M.Terms({**o, "durable": x.queue_durable[o.queue]}))
    _caught(monkeypatch, state, A.BrokerTakeFrame(0, 1), A.BrokerTakeFrame, declare_always_ok,
            problem="relation does not hold for the spec's successor")


def test_a_wrong_requeue_is_caught(monkeypatch):
    """RQ-2: a settlement relation that requeues a copy without marking it redelivered disagrees with the spec."""
    def requeue_unmarked(x, a, o):
        t = M.BrokerTakeFrame(x, a, o)
        return M.Transition(t.guard, t.after.replace(redelivered=x.redelivered))

    def takes_requeue(state, a):
        if not isinstance(a, A.BrokerTakeFrame) or not a.ch:
            return False
        frame = state.conns[a.conn].to_broker[a.ch][0]
        return (frame[0] == BASIC_NACK and frame[4] or frame[0] == BASIC_REJECT and frame[3]) and \
            machine.step(state, a)[0].queues != state.queues
    state, action = _first_state_where(configs.get("requeue_order"), takes_requeue)
    _caught(monkeypatch, state, action, A.BrokerTakeFrame, requeue_unmarked)


def _requeue_ahead_of_a_ready_copy(state, a):
    """A settlement frame that requeues a copy ahead of a copy already ready in its queue (RQ-1)."""
    if not isinstance(a, A.BrokerTakeFrame) or not a.ch:
        return False
    frame = state.conns[a.conn].to_broker[a.ch][0]
    if not (frame[0] == BASIC_NACK and frame[4] or frame[0] == BASIC_REJECT and frame[3]):
        return False
    after = machine.step(state, a)[0]
    for before, queue in zip(state.queues, after.queues):
        old = {e.key for e in before.ready}
        back = [i for i, e in enumerate(queue.ready) if e.key not in old]
        if back and back[0] < len(queue.ready) - 1:
            return True
    return False


def test_a_requeue_to_the_tail_is_caught(monkeypatch):
    """RQ-1: a settlement relation that puts a requeued copy behind every ready copy, rather than back
    at its place among them, disagrees with the spec (the queue's order is the model's ``ahead_in_queue``)."""
    state, action = _first_state_where(configs.get("requeue_order"), _requeue_ahead_of_a_ready_copy)
    assert Checker().check(state, action, True).ok
    monkeypatch.setattr(M, "_requeue", requeue_to_tail(M._requeue))    # the relations are built at each check
    assert Checker().check(state, action, True).problem == "relation does not hold for the spec's successor"


def test_a_spec_that_delivers_behind_the_head_is_caught(monkeypatch):
    """DS-1, RQ-1: were the spec to hand a consumer the last ready copy rather than the head, the
    model (whose delivery takes the copy no ready copy is ahead of) would disagree with it."""
    def has_two_ready(state, a):
        return isinstance(a, A.BrokerDeliver) and len(state.queues[a.queue].ready) >= 2
    state, action = _first_state_where(configs.get("requeue_order"), has_two_ready)
    assert Checker().check(state, action, True).ok

    def deliver_last(state, q):         # broker.deliver, taking the tail of the queue instead of its head
        c, ch, consumer = broker.next_consumer(state, q)
        queue = state.queues[q]
        entry = queue.ready[-1]
        ring = tuple(r for r in queue.ring if r != (c, ch, consumer.tag)) + ((c, ch, consumer.tag),)
        state = broker.with_queue(state, q, queue._replace(ready=queue.ready[:-1], ring=ring))
        tag = state.conns[c].channels[ch - 1].next_tag
        state = broker.hand_over(state, c, ch, q, entry, consumer.no_ack, consumer.tag)
        return broker.send(state, c, make_frame(BASIC_DELIVER, ch, consumer.tag, tag, entry.redelivered, entry.msg))
    monkeypatch.setattr(broker, "deliver", deliver_last)
    assert Checker().check(state, action, True).problem == "relation does not hold for the spec's successor"


def test_a_loss_that_keeps_automatic_deliveries_in_flight_is_caught(monkeypatch):
    """AM-2: a lost connection loses the automatic-mode deliveries in flight on it (the model's
    ``auto_in_flight_on``); a NetworkLoss relation that kept them disagrees with the spec."""
    def loss_with_auto_in_flight(state, a):
        return isinstance(a, A.NetworkLoss) and bool(state.conns[a.conn].auto)
    state, action = _first_state_where(configs.get("hazard_auto_ack_loss"), loss_with_auto_in_flight)
    _caught(monkeypatch, state, action, A.NetworkLoss, keeping(M.NetworkLoss, "auto_in_flight_on"))


def test_a_read_that_leaves_an_automatic_delivery_in_flight_is_caught(monkeypatch):
    """AM-2: the client reading an automatic-mode delivery takes it out of flight; a ClientReceive
    relation that left it there disagrees with the spec."""
    def reads_auto(state, a):
        if not isinstance(a, A.ClientReceive) or not client.can_receive(state, a):
            return False
        frame = state.conns[a.conn].to_client[a.ch][0]
        return frame[0] == BASIC_DELIVER and any(d[0] == a.ch and d[1] == frame[3] for d in state.conns[a.conn].auto)
    state, action = _first_state_where(configs.get("auto_ack"), reads_auto)
    _caught(monkeypatch, state, action, A.ClientReceive, keeping(M.ClientReceive, "auto_in_flight_on"))


def test_a_delivery_that_forgets_it_was_delivered_is_caught(monkeypatch):
    """RQ-2: a deliver relation that does not record the copy as delivered disagrees with the spec."""
    def deliver_unrecorded(x, a, o):
        t = M.BrokerDeliver(x, a, o)
        return M.Transition(t.guard, t.after.replace(ever_delivered=x.ever_delivered))
    state, action = _first_state(configs.get("ack_basics"), lambda a: isinstance(a, A.BrokerDeliver))
    _caught(monkeypatch, state, action, A.BrokerDeliver, deliver_unrecorded)


def _manual_delivery(state, a):
    if not isinstance(a, A.BrokerDeliver):
        return False
    after = machine.step(state, a)[0]
    return any(channel.unacked for conn in after.conns for channel in conn.channels)


def test_a_delivery_without_its_ghost_inverse_is_caught(monkeypatch):
    """AM-3: the ghost inverse (copy -> the tag naming it) is part of the abstraction, so a deliver
    relation that does not record it disagrees with the spec."""
    def deliver_no_inverse(x, a, o):
        t = M.BrokerDeliver(x, a, o)
        return M.Transition(t.guard,
                            t.after.replace(named_by_connection=x.named_by_connection,
                                            named_by_channel=x.named_by_channel, named_by_tag=x.named_by_tag))
    state, action = _first_state_where(configs.get("ack_basics"), _manual_delivery)
    _caught(monkeypatch, state, action, A.BrokerDeliver, deliver_no_inverse)


def test_an_ack_that_keeps_the_ghost_inverse_is_caught(monkeypatch):
    """The ghost inverse is reset when its tag no longer names the copy (model.actions._forget): an
    ack relation that keeps it disagrees with the spec."""
    def ack_keeps_inverse(x, a, o):
        t = M.BrokerTakeFrame(x, a, o)
        return M.Transition(t.guard,
                            t.after.replace(named_by_connection=x.named_by_connection,
                                            named_by_channel=x.named_by_channel, named_by_tag=x.named_by_tag))

    def ack_of_outstanding(state, a):
        if not isinstance(a, A.BrokerTakeFrame) or not a.ch:
            return False
        conn = state.conns[a.conn]
        return conn.to_broker[a.ch][0][0] == BASIC_ACK and bool(conn.channels[a.ch - 1].unacked)
    state, action = _first_state_where(configs.get("ack_basics"), ack_of_outstanding)
    _caught(monkeypatch, state, action, A.BrokerTakeFrame, ack_keeps_inverse)


def test_a_tx_publish_that_does_not_hold_its_message_back_is_caught(monkeypatch):
    """TX-2: the messages family (which message each transaction holds back) is part of the
    abstraction, so a relation that takes a publish on a tx channel without holding its message back
    disagrees with the spec."""
    def publish_not_held(x, a, o):
        t = M.BrokerTakeFrame(x, a, o)
        return M.Transition(t.guard, t.after.replace(tx_held_by_channel=x.tx_held_by_channel))
    state, action = _first_state_where(configs.get("tx_publish"), _takes_tx_publish)
    _caught(monkeypatch, state, action, A.BrokerTakeFrame, publish_not_held)


def _takes_tx_publish(state, a) -> bool:
    """``a`` is the broker taking a basic.publish on a channel in tx mode."""
    if not isinstance(a, A.BrokerTakeFrame) or not a.ch:
        return False
    conn = state.conns[a.conn]
    return conn.to_broker[a.ch][0][0] == BASIC_PUBLISH and conn.channels[a.ch - 1].mode == MODE_TX


def test_a_publish_that_reuses_a_message_name_is_caught(monkeypatch):
    """The client's next message is (c, published + 1): a ClientPublish relation that names it
    (c, published) and does not count it disagrees with the spec."""
    def publish_reuses_name(x, a, o):
        t = M.ClientPublish(x, a, o)
        return M.Transition(t.guard, t.after.replace(published=x.published,
                                                     publish_in_flight=z3.Store(x.publish_in_flight, a.conn,
                                                                                x.published[a.conn], True)))
    state, action = _first_state(configs.get("tx_publish"), lambda a: isinstance(a, A.ClientPublish))
    _caught(monkeypatch, state, action, A.ClientPublish, publish_reuses_name)


def test_a_second_frame_or_hold_where_the_spec_has_one_is_caught(monkeypatch):
    """``publish_in_flight_twice`` and ``tx_held_twice`` (two frames carry a message, a message held back
    twice) are part of the abstraction: a publish that marks its message as carried twice, and a tx publish
    taken that marks its message as held back twice, disagree with the spec, which has one of each."""
    def publish_twice(x, a, o):
        t = M.ClientPublish(x, a, o)
        return M.Transition(t.guard,
                            t.after.replace(publish_in_flight_twice=z3.Store(x.publish_in_flight_twice, a.conn,
                                                                             x.published[a.conn] + 1, True)))

    def held_twice(x, a, o):
        t = M.BrokerTakeFrame(x, a, o)
        return M.Transition(t.guard,
                            t.after.replace(tx_held_twice=z3.Lambda([c, n], t.after.tx_held_by_channel[c, n] != 0)))
    c, n = z3.Ints("c n")
    state, action = _first_state(configs.get("tx_publish"), lambda a: isinstance(a, A.ClientPublish))
    _caught(monkeypatch, state, action, A.ClientPublish, publish_twice)
    state, action = _first_state_where(configs.get("tx_publish"), _takes_tx_publish)
    _caught(monkeypatch, state, action, A.BrokerTakeFrame, held_twice)


# Prefetch (PF-2, PF-3, TX-3): no standard configuration has a global limit on a transactional
# channel, so the counters' commit and qos cases are checked on tx_ack with one qos(1, global) allowed.

def _tx_ack_global():
    from tests.test_spec_prefetch_tx import tx_ack_with_global_limit
    return tx_ack_with_global_limit()


def _frame_on(state, a, method) -> bool:
    return isinstance(a, A.BrokerTakeFrame) and a.ch > 0 and state.conns[a.conn].to_broker[a.ch][0][0] == method


def _held_consumer_delivery(channel) -> bool:
    return any(u.consumer for _, u in channel.tx_settles)


def _commit_under_global_limit(state, a) -> bool:
    channel = state.conns[a.conn].channels[a.ch - 1] if _frame_on(state, a, TX_COMMIT) else None
    return bool(channel and channel.global_limit and _held_consumer_delivery(channel))


def test_agreement_on_a_global_limit_with_transactions():
    """Random executions of tx_ack with a global limit: every pair agrees, commits that count held-back
    settlements off the global volume (broker.commit_runs) among them."""
    import random
    config, checker, rng = _tx_ack_global(), Checker(), random.Random(8)
    pairs, commits, problems = 0, 0, []
    for _ in range(8):
        for state in _walk(config, [rng.randrange(1 << 16) for _ in range(45)]):
            for verdict in checker.check_state(state, config):
                pairs += 1
                commits += verdict.enabled and _commit_under_global_limit(state, verdict.action)
                if not verdict.ok:
                    problems.append(f"{verdict.action!r}: {verdict.problem}")
    assert not problems, problems[:5]
    assert pairs >= 2_000 and commits >= 1


def test_a_commit_that_does_not_count_off_is_caught(monkeypatch):
    """TX-3, PF-3: a commit relation that leaves the global volume as it was disagrees with the spec."""
    def commit_keeps_volume(x, a, o):
        t = M.BrokerTakeFrame(x, a, o)
        return M.Transition(t.guard, t.after.replace(volume=z3.If(o.method == TX_COMMIT, x.volume, t.after.volume)))
    state, action = _first_state_where(_tx_ack_global(), _commit_under_global_limit)
    _caught(monkeypatch, state, action, A.BrokerTakeFrame, commit_keeps_volume)


def _global_qos_over_held_back(state, a) -> bool:
    if not _frame_on(state, a, BASIC_QOS):
        return False
    frame = state.conns[a.conn].to_broker[a.ch][0]
    channel = state.conns[a.conn].channels[a.ch - 1]
    return bool(frame[3]) and not channel.global_limit and _held_consumer_delivery(channel)


def test_a_qos_that_counts_every_held_delivery_is_caught(monkeypatch):
    """PF-2, TX-3: a global basic.qos set from none that leaves qos_uncounted at 0 (as if the volume
    counted the held-back deliveries) disagrees with the spec."""
    def qos_counts_all(x, a, o):
        t = M.BrokerTakeFrame(x, a, o)
        return M.Transition(t.guard,
                            t.after.replace(qos_uncounted=z3.If(o.method == BASIC_QOS, x.qos_uncounted,
                                                                t.after.qos_uncounted)))
    state, action = _first_state_where(_tx_ack_global(), _global_qos_over_held_back)
    _caught(monkeypatch, state, action, A.BrokerTakeFrame, qos_counts_all)


def test_a_delivery_that_counts_for_no_consumer_is_caught(monkeypatch):
    """PF-1: a deliver relation that does not count the delivery for its consumer disagrees with the spec."""
    def deliver_uncounted(x, a, o):
        t = M.BrokerDeliver(x, a, o)
        return M.Transition(t.guard, t.after.replace(consumer_deliveries=x.consumer_deliveries))
    config = configs.get("prefetch")
    state, action = _first_state(config, lambda a: isinstance(a, A.BrokerDeliver))
    _caught(monkeypatch, state, action, A.BrokerDeliver, deliver_uncounted)


# confirmed_only_when_on_disk (PC-5): which copy holds up which confirm, and which messages were acked.

def _confirm_publish_that_waits(state, a) -> bool:
    """A basic.publish taken on a confirm channel whose copy must reach the disk before its confirm."""
    if not _frame_on(state, a, BASIC_PUBLISH) or state.conns[a.conn].channels[a.ch - 1].mode != MODE_CONFIRM:
        return False
    after = machine.step(state, a)[0].conns[a.conn].channels[a.ch - 1]
    return any(p.waits for p in after.unconfirmed)


def test_a_confirm_publish_whose_copies_hold_nothing_up_is_caught(monkeypatch):
    """PC-5: a persistent copy in a durable queue holds its publish's confirm up until it is on disk;
    a publish relation whose new copies hold nothing up disagrees with the spec."""
    def holds_nothing(x, a, o):
        t = M.BrokerTakeFrame(x, a, o)
        return M.Transition(t.guard, t.after.replace(holds_confirm=x.holds_confirm))
    state, action = _first_state_where(configs.get("confirms"), _confirm_publish_that_waits)
    _caught(monkeypatch, state, action, A.BrokerTakeFrame, holds_nothing)


def test_a_write_that_keeps_holding_the_confirm_up_is_caught(monkeypatch):
    """PC-5: a copy written to disk no longer holds up its confirm (storage.forget_waits)."""
    def write_keeps_hold(x, a, o):
        t = M.DiskFsync(x, a, o)
        return M.Transition(t.guard, t.after.replace(holds_confirm=x.holds_confirm))

    def write_of_a_waiting_copy(state, a):
        return isinstance(a, A.DiskFsync) and a.write and any(
            (a.queue, a.key) in p.waits for conn in state.conns for ch in conn.channels for p in ch.unconfirmed)
    state, action = _first_state_where(configs.get("confirms"), write_of_a_waiting_copy)
    _caught(monkeypatch, state, action, A.DiskFsync, write_keeps_hold)


def test_a_confirm_that_does_not_record_the_ack_is_caught(monkeypatch):
    """PC-10's ghost: a basic.ack from the broker adds its publishes' messages to the confirmed ones;
    a confirm relation that forgets them disagrees with the spec."""
    def forgets_ack(x, a, o):
        t = M.BrokerConfirm(x, a, o)
        return M.Transition(t.guard, t.after.replace(message_acked=x.message_acked))
    state, action = _first_state(configs.get("confirms"), lambda a: isinstance(a, A.BrokerConfirm))
    _caught(monkeypatch, state, action, A.BrokerConfirm, forgets_ack)


def test_the_confirm_guard_waits_for_the_disk_on_concrete_arrays():
    """PC-5: the confirm's guard asks that no copy hold it up, a universal over copies that Z3 decides on
    the concrete arrays of the abstraction: after a confirm-mode publish whose copy is not on disk yet,
    the confirm is disabled in the spec, and the model's guard is false even with the oracle that says
    "ready to confirm" set to true."""
    config = configs.get("confirms")
    before, publish = _first_state_where(config, _confirm_publish_that_waits)
    state = machine.step(before, publish)[0]
    channel = state.conns[publish.conn].channels[publish.ch - 1]
    pending = next(p for p in channel.unconfirmed if p.waits)
    action = A.BrokerConfirm(publish.conn, publish.ch, pending.seq, False)
    assert action not in machine.enabled(state, config)
    assert Checker().check(state, action, False).ok
    t = M.BrokerConfirm(abstract(state), M.concrete(action), M.Terms(ready_to_confirm=z3.BoolVal(True),
                                                                     confirm_prefix=z3.IntVal(0),
                                                                     unconfirmed_below=z3.BoolVal(False),
                                                                     oldest_batched=z3.BoolVal(False)))
    solver = z3.Solver()
    solver.add(t.guard)
    assert solver.check() == z3.unsat


def _oldest_alone_with_multiple(state, a):
    if not isinstance(a, A.BrokerConfirm) or not a.multiple:
        return False
    return a.seq == state.conns[a.conn].channels[a.ch - 1].unconfirmed[0].seq


def test_the_oldest_publish_confirmed_alone_with_multiple_agrees_PC_3(monkeypatch):
    """RabbitMQ's batched confirm (spec.broker.oldest_batched) is a step of the model too: where the spec
    confirms the oldest publish alone with multiple, the model's guard holds with the oracle that says so,
    and a model that ignores that oracle is caught."""
    state, action = _first_state_where(configs.get("confirms"), _oldest_alone_with_multiple)
    assert broker.oldest_batched(state.conns[action.conn].channels[action.ch - 1])
    original = M.BrokerConfirm

    def ignores_batches(x, a, o):
        return original(x, a, M.Terms({**o, "oldest_batched": z3.BoolVal(False)}))
    _caught(monkeypatch, state, action, A.BrokerConfirm, ignores_batches)


# confirmed_survives_crash (PC-10, DU-2): the ghost of the copies a crash lost.

def _crash_where(want):
    """A reachable state of the crash configuration where BrokerCrash is enabled and ``want(state)``."""
    return _first_state_where(configs.get("crash"), lambda state, a: isinstance(a, A.BrokerCrash) and want(state))


def _outstanding_unwritten(state) -> bool:
    """A copy an outstanding tag names is not on disk: the crash loses it."""
    on_disk = {(r[0], r[1]) for r in state.disk}
    return any((u.queue, u.key) not in on_disk for conn in state.conns for ch in conn.channels for u in ch.unacked)


def _planted_crash(lost):
    return replacing(M.BrokerCrash, lost_in_crash=lost)


def test_a_crash_that_records_no_loss_is_caught(monkeypatch):
    """PC-10: a crash records every live copy not on disk as lost; one that records none disagrees."""
    state, action = _crash_where(_outstanding_unwritten)
    _caught(monkeypatch, state, action, A.BrokerCrash, _planted_crash(lambda x, y: x.lost_in_crash))


def test_a_crash_that_loses_only_ready_copies_is_caught(monkeypatch):
    """PC-10: the copy an outstanding tag names is live too (found through the ghost inverse); a crash
    that records only the ready copies not on disk disagrees with the spec."""
    def ready_only(x, y):
        q, key = z3.Ints("q_ key_")
        return z3.Lambda([q, key], z3.Or(x.lost_in_crash[q, key], z3.And(x.ready[q, key], z3.Not(x.on_disk[q, key]))))
    state, action = _crash_where(_outstanding_unwritten)
    _caught(monkeypatch, state, action, A.BrokerCrash, _planted_crash(ready_only))


def test_a_crash_that_loses_copies_on_disk_is_caught(monkeypatch):
    """DU-2: a live copy on disk survives the crash; a crash that records it lost disagrees."""
    def loses_written(x, y):
        q, key = z3.Ints("q_ key_")
        return z3.Lambda([q, key], z3.Or(y.lost_in_crash[q, key], x.ready[q, key]))
    state, action = _crash_where(lambda s: any((q, e.key) in {(r[0], r[1]) for r in s.disk}
                                               for q, queue in enumerate(s.queues) for e in queue.ready))
    _caught(monkeypatch, state, action, A.BrokerCrash, _planted_crash(loses_written))


# tx_effects_invisible (TX-3, TX-4): the ghost of the copies gone in this life (``gone_this_life``).

def _takes(method, tx=None):
    """An enabled BrokerTakeFrame of a settlement ``method`` of an outstanding tag, on a channel in tx
    mode (``tx``) or not."""
    def want(state, a):
        if not isinstance(a, A.BrokerTakeFrame) or not a.ch:
            return False
        conn = state.conns[a.conn]
        frame, channel = conn.to_broker[a.ch][0], conn.channels[a.ch - 1]
        return frame[0] == method and (tx is None or (channel.mode == MODE_TX) == tx) and \
            any(u.tag == frame[2] for u in channel.unacked)     # it settles an outstanding delivery
    return want


def test_an_ack_that_records_no_fate_is_caught(monkeypatch):
    """ACK-1: basic.ack outside a transaction gives the copy its fate; a relation without the ghost
    ``gone_this_life`` (the copy stops being live and is not gone) disagrees with the spec."""
    state, action = _first_state_where(configs.get("ack_basics"), _takes(BASIC_ACK, tx=False))
    _caught(monkeypatch, state, action, A.BrokerTakeFrame, M.BrokerTakeFrame)


def test_a_tx_ack_that_records_a_fate_is_caught(monkeypatch):
    """TX-3: basic.ack in a transaction is held back, the copy stays live with no fate; a relation
    that records it gone at once disagrees with the spec."""
    def eager(x, a, o):
        t = M.gone_in_this_life(M.BrokerTakeFrame)(x, a, o)
        gone = M._named_by(x, a.conn, a.ch, lambda t_: x.outstanding[a.conn, a.ch, t_])
        return M.Transition(t.guard, t.after.replace(gone_this_life=M._lam_qk(
            lambda q, key: z3.Or(t.after.gone_this_life[q, key], gone(q, key)))))
    state, action = _first_state_where(configs.get("tx_ack"), _takes(BASIC_ACK, tx=True))
    _caught(monkeypatch, state, action, A.BrokerTakeFrame, eager)


def test_an_automatic_mode_delivery_not_gone_is_caught(monkeypatch):
    """AM-2: a copy handed over in automatic mode is gone in this life (its fate is sure); a delivery
    relation without the ghost disagrees with the spec."""
    def auto(state, a):
        return isinstance(a, A.BrokerDeliver) and any(
            k.no_ack for conn in state.conns for ch in conn.channels for k in ch.consumers)
    state, action = _first_state_where(configs.get("auto_ack"), auto)
    _caught(monkeypatch, state, action, A.BrokerDeliver, M.BrokerDeliver)


def test_a_crash_that_records_no_fate_is_caught(monkeypatch):
    """PC-10: a crash loses every live copy not on disk; one that leaves them not gone disagrees."""
    state, action = _crash_where(_outstanding_unwritten)
    _caught(monkeypatch, state, action, A.BrokerCrash, _planted_crash_fated(lambda x, y: x.gone_this_life))


def _planted_crash_fated(gone):
    return replacing(M.BrokerCrash, gone_this_life=gone)


def test_a_restart_that_keeps_revived_copies_gone_is_caught(monkeypatch):
    """TX-8: a restart recovers a copy acknowledged before its removal reached the disk; it lives
    again (the spec's ``revived``), so it is not gone in this life; a restart that keeps it gone
    disagrees with the spec."""
    def revives(state, a):
        fated = {(f[0], f[1]) for f in state.fates}
        return isinstance(a, A.BrokerRestart) and any((r[0], r[1]) in fated for r in state.disk)
    state, action = _first_state_where(configs.get("crash"), revives)

    def keeps(x, a, o):
        t = M.BrokerRestart(x, a, o)
        return M.Transition(t.guard, t.after.replace(gone_this_life=x.gone_this_life))
    _caught(monkeypatch, state, action, A.BrokerRestart, keeps)


def test_a_pair_the_solver_does_not_decide_within_its_budget_is_neither_agreement_nor_a_problem():
    """With a budget of one unit of Z3's work (retried with budgets.RETRY units) the solver decides
    nothing: the verdict is undecided, with no problem and not ok; with the usual budget the same pair
    agrees."""
    config = configs.get("confirms")
    state, action = _first_state(config, lambda a: isinstance(a, A.BrokerConfirm) and a.multiple)
    verdict = Checker(budget=1).check(state, action, True)
    assert verdict.undecided and verdict.problem == "" and not verdict.ok
    assert Checker().check(state, action, True).ok
