"""Generated client programs (tests/conformance/programs.py) run on three targets, and the spec judges
every recording: the impl core in process, the impl server over TCP, and a private RabbitMQ 3.10.8.
A rejected recording fails with the shrunk program (as Python and as numbered steps), the trace and the
first observation the spec cannot explain (tests/conformance/judge.py). Budgets are fixed (derandomized):
`make conformance` runs more programs. Focused programs (episodes of one rule family each) run in
process too: they are what catches most planted bugs (tests/test_conformance_mutants.py)."""
from __future__ import annotations

import pytest
from hypothesis import given

from tests.conformance import budget
from tests.conformance import programs as P
from tests.conformance.judge import assert_accepted
from tests.conformance.targets import InProcessTarget, TcpTarget, run_program


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


@pytest.fixture(scope="module")
def impl_target(impl_broker_module):
    return TcpTarget.of("impl over TCP", impl_broker_module)


@budget(40)
@given(program=P.programs())
def test_impl_server_runs_are_accepted_by_the_spec(impl_target, program):
    assert_accepted(run_program(program, impl_target))


@pytest.fixture(scope="module")
def rabbitmq_target(rabbitmq_node):
    return TcpTarget.of("rabbitmq", rabbitmq_node, quiet=0.05)


@budget(40)
@given(program=P.programs(rabbitmq_safe=True, errors=False))
def test_rabbitmq_runs_are_accepted_by_the_spec(rabbitmq_target, program):
    assert_accepted(run_program(program, rabbitmq_target))
