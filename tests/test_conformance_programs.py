"""Generated client programs (rabbitproof/conformance/programs.py) run on three targets, and the spec judges
every recording: the impl core in process, the impl server over TCP, and a private RabbitMQ 3.10.8.
A rejected recording fails with the shrunk program (as Python and as numbered steps), the trace and the
first observation the spec cannot explain (rabbitproof/conformance/judge.py). Budgets are fixed (derandomized):
`make conformance` runs more programs. Focused programs (episodes of one rule family each) run in
process too: they are what catches most planted bugs (tests/test_conformance_mutants.py)."""
from __future__ import annotations

import pytest
from hypothesis import given

from rabbitproof.conformance import budget
from rabbitproof.conformance import programs as P
from rabbitproof.conformance.judge import assert_accepted
from rabbitproof.conformance.targets import InProcessTarget, TcpTarget, run_program
from tests.fixtures.patience import REPLY_PATIENCE


@budget(300)
@given(P.programs(crashes=True))
def test_in_process_core_runs_are_accepted_by_the_spec(program):
    target = InProcessTarget()
    try:
        run = run_program(program, target)
    finally:
        target.close()
    assert_accepted(run)


@budget(200)
@given(P.focused_programs())
def test_in_process_focused_runs_are_accepted_by_the_spec(program):
    """Episodes the general programs reach too rarely for their budget (programs.focused_programs):
    multiple settlements, settlements rolled back, confirms then a crash, a filled prefetch window, a
    global limit over outstanding deliveries, requeues, committed publishes, unroutable mandatory
    publishes in confirm and tx mode."""
    target = InProcessTarget()
    try:
        run = run_program(program, target)
    finally:
        target.close()
    assert_accepted(run)


# Found by the impl server runs: a durable queue declared in the write that closes the connection. impl's
# declare-ok waits for the disk, and its close-ok went out first, the declare-ok never; the spec (and
# RabbitMQ) answer the channel's methods before the connection.close (ER-1).
DECLARED_THEN_CLOSED = P.Program((P.QueueFlags(True, False), P.QueueFlags()), 1, (
    P.Step(0, (P.Declare(1, 0), P.Declare(1, 1))), P.Step(0, (P.Delete(1, 0),)),
    P.Step(0, (P.Publish(1, 1), P.Declare(2, 0), P.CloseConnection()))))


def test_a_reply_waiting_for_the_disk_goes_out_before_close_ok_ER_1(impl_target):
    in_process = InProcessTarget()
    try:
        assert_accepted(run_program(DECLARED_THEN_CLOSED, in_process))
    finally:
        in_process.close()
    assert_accepted(run_program(DECLARED_THEN_CLOSED, impl_target))


@pytest.fixture(scope="module")
def impl_target(impl_broker_module):
    return TcpTarget.of("impl over TCP", impl_broker_module, timeout=REPLY_PATIENCE)


@budget(40)
@given(program=P.programs())
def test_impl_server_runs_are_accepted_by_the_spec(impl_target, program):
    assert_accepted(run_program(program, impl_target))


@pytest.fixture(scope="module")
def rabbitmq_target(rabbitmq_node):
    return TcpTarget.of("rabbitmq", rabbitmq_node, timeout=REPLY_PATIENCE)


@budget(40)
@given(program=P.programs(rabbitmq_safe=True, errors=False))
def test_rabbitmq_runs_are_accepted_by_the_spec(rabbitmq_target, program):
    assert_accepted(run_program(program, rabbitmq_target))


# ---------------------------------------------------------------- what rabbitmq_safe changes

def writes(program):
    return [s.ops for s in program.steps]


def test_races_the_trace_checker_models_stay_in_the_programs_DT_1_ER_1():
    """A settlement written with the method that causes the delivery it names (DT-1) and a frame behind a
    channel.close-ok (ER-1): RabbitMQ's orders for both are modelled (spec/trace.py), so no write is cut."""
    program = P.Program(steps=(P.Step(0, (P.Declare(1, 0), P.Ack(1, 1), P.Consume(1, 0, "a"),
                                          P.Nack(1, 1), P.Reject(1, 2), P.Get(1, 0), P.Ack(2, 1))),
                               P.Step(0, (P.Get(1, 0), P.CloseOkChannel(1), P.Get(1, 0), P.Publish(1, 0)))))
    assert writes(P.safe_for_rabbitmq(program, errors=True)) == writes(program)


def test_a_cancel_of_a_consumer_of_the_write_starts_a_write_of_its_own():
    """RabbitMQ 3.10.8 crashes its channel on consume + cancel of that tag in one write (541)."""
    step = P.Step(0, (P.Consume(1, 0, "a"), P.Cancel(2, "a"), P.Cancel(1, "b"), P.Cancel(1, "a"), P.Get(1, 0)))
    assert writes(P.safe_for_rabbitmq(P.Program(steps=(step,)), errors=True)) == [
        (P.Consume(1, 0, "a"), P.Cancel(2, "a"), P.Cancel(1, "b")), (P.Cancel(1, "a"), P.Get(1, 0))]


def test_without_errors_a_write_also_ends_at_each_commit_TX_7():
    step = P.Step(0, (P.TxSelect(1), P.Publish(1, 0), P.TxCommit(1), P.Publish(1, 0), P.TxCommit(1)))
    assert writes(P.safe_for_rabbitmq(P.Program(steps=(step,)), errors=False)) == [
        (P.TxSelect(1), P.Publish(1, 0), P.TxCommit(1)), (P.Publish(1, 0), P.TxCommit(1))]
    assert writes(P.safe_for_rabbitmq(P.Program(steps=(step,)), errors=True)) == [step.ops]


def test_a_program_that_requeues_keeps_its_global_prefetch_RQ_1():
    """The global limit's resume before a requeue is modelled (spec/interleavings.py, `BrokerRequeue`)."""
    program = P.Program(steps=(P.Step(0, (P.Qos(1, 3, global_=True), P.Qos(2, 1))), P.Step(0, (P.Recover(1),))))
    assert writes(P.safe_for_rabbitmq(program)) == writes(program)


@pytest.mark.parametrize("op, error", [
    (P.Reject(1, 0, False), True),          # a reject names one delivery: tag 0 is never one (ACK-4)
    (P.Ack(1, 0, True), False),             # tag 0 with multiple: every outstanding delivery (ACK-2)
    (P.Nack(1, 0, True), False),
    (P.Nack(1, 0, False), True),
    (P.Ack(1, 65, False), True),
])
def test_the_families_of_a_settlement_with_tag_0_ER_1(op, error):
    program = P.Program((P.QueueFlags(False, False),) * P.QUEUES, 1, (P.Step(0, (op,)),))
    assert ("ER" in P.families(program)) is error and {"DT", "ACK"} <= P.families(program)
