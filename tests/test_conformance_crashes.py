"""Generated programs with broker crashes over TCP, judged by the spec: the impl server is SIGKILLed and
started again on the same SQLite store, a private RabbitMQ 3.10.8 node has its beam process SIGKILLed
and is started again on the same Mnesia directory (neither flushes anything: what was not on disk is
lost, which the DU rules allow for what was never confirmed). The clients find their connections ended
and connect again; the recording shows the ended connections, from which the spec places the crash
(rabbitproof/recording/observations.py). Each program crashes at least once: restarts cost the impl server
a fraction of a second and RabbitMQ several seconds, so the budgets are small (`make bench` runs more, and
times the restarts). Each target here is a broker of its own, since the shared ones must not be killed.

Two kinds of program: general programs (programs.programs, with at least one crash at a drawn place)
and focused ones made of the episodes that end in a crash (programs.CRASH_EPISODES: confirmed
persistent publishes, a committed transaction, outstanding deliveries, then the crash); the impl server
runs eight of each, RabbitMQ three of both kinds together."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rabbitproof.brokers.impl_broker import ImplBroker
from rabbitproof.brokers.rabbitmq import RabbitMQNode
from rabbitproof.conformance import budget
from rabbitproof.conformance import programs as P
from rabbitproof.conformance.judge import assert_accepted
from rabbitproof.conformance.targets import InProcessTarget, TcpTarget, run_program
from tests.fixtures.patience import REPLY_PATIENCE


def crashed_and_accepted(program: P.Program, target) -> None:
    """Run the program, check that the broker crashed as often as the program says and that the
    recording shows it (connections ended without a close), then that the spec accepts the recording."""
    run = run_program(program, target)
    crashes = sum(isinstance(s, P.Crash) for s in program.steps)
    assert crashes >= 1 and run.crashes == crashes, (crashes, run.crashes)
    judgement = assert_accepted(run)
    assert judgement.recording.config.crashes >= 1, "the recording shows no connection ended by the crash"


@pytest.fixture(scope="module")
def impl_crashing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TcpTarget]:
    broker = ImplBroker(Path(tmp_path_factory.mktemp("impl-crashing")))
    broker.start()
    try:
        yield TcpTarget.of("impl over TCP", broker, timeout=REPLY_PATIENCE)
    finally:
        broker.close()


@budget(8)
@given(program=P.programs(crashes=True, min_crashes=1))
def test_impl_server_crash_runs_are_accepted_by_the_spec(impl_crashing, program):
    crashed_and_accepted(program, impl_crashing)


@budget(8)
@given(program=P.focused_programs(max_episodes=2, episodes=P.CRASH_EPISODES))
def test_impl_server_focused_crash_runs_are_accepted_by_the_spec(impl_crashing, program):
    crashed_and_accepted(program, impl_crashing)


@pytest.fixture(scope="module")
def rabbitmq_crashing() -> Iterator[TcpTarget]:
    node = RabbitMQNode()
    node.start()
    try:
        yield TcpTarget.of("rabbitmq", node, quiet=0.05, timeout=REPLY_PATIENCE)
    finally:
        node.close()


@budget(3)
@given(program=st.one_of(P.focused_programs(max_episodes=1, episodes=P.CRASH_EPISODES, rabbitmq_safe=True),
                         P.programs(crashes=True, min_crashes=1, rabbitmq_safe=True, errors=False)))
def test_rabbitmq_crash_runs_are_accepted_by_the_spec(rabbitmq_crashing, program):
    """Three programs of both kinds (a restart costs RabbitMQ several seconds; `make bench` runs more)."""
    crashed_and_accepted(program, rabbitmq_crashing)


# Found by the crash programs: impl sent queue.bind-ok of a durable queue to a durable exchange before the
# binding was on disk, and a crash right after lost it (in process every time, over TCP about one run in
# two); RabbitMQ 3.10.8 kept it. The spec keeps a durable queue's bindings with the queue (DU-1).
BOUND_THEN_CRASH = P.Program(queues=(P.QueueFlags(), P.QueueFlags(durable=True)), steps=(
    P.Step(0, (P.Declare(1, 0), P.Declare(1, 1))), P.Step(0, (P.Bind(1, 1),)), P.Crash(),
    P.Step(0, (P.Declare(1, 0), P.Declare(1, 1))),
    P.Step(0, (P.Publish(1, 2, "amq.fanout", mandatory=True), P.Get(1, 1)))))


def test_a_durable_binding_survives_a_crash_right_after_bind_ok_in_process():
    target = InProcessTarget()
    try:
        crashed_and_accepted(BOUND_THEN_CRASH, target)
    finally:
        target.close()


def test_a_durable_binding_survives_a_crash_right_after_bind_ok_on_the_impl_server(impl_crashing):
    crashed_and_accepted(BOUND_THEN_CRASH, impl_crashing)
