"""rabbitproof.check.after_crash: the state after a crash, remembered by what survives it, is the one the
machine's step computes, on every reachable state of setups with a crash (transactions, confirms, fire and
forget, republishes, a vanished client the broker has not noticed yet, two publishers and a lost connection)."""
from __future__ import annotations

import pytest

from rabbitproof.check import after_crash
from rabbitproof.check.answers import prepare
from rabbitproof.check.setup_file import parse_setup, read_setup
from rabbitproof.spark_check.engine import LocalEngine
from rabbitproof.spec import actions as A
from rabbitproof.spec.state import CONN_GONE

from tests.test_check import EXAMPLES
from tests.test_check_disk_at_once import reachable
from tests.test_check_reductions import MIXED

VANISHED_AND_CRASH = """
[queues.jobs]
durable = true

[[publishers]]
name = "p"
queue = "jobs"
confirms = true
persistent = true
messages = 1
republish = 1

[[consumers]]
name = "w"
queue = "jobs"
prefetch = 1

[faults]
broker_crash = true
host_vanished = ["w"]
"""


@pytest.mark.parametrize("source", ["confirms-crash", "transactional", "fire-and-forget",
                                    "crash-and-connection-lost-two-messages", "vanished and crash"])
def test_the_state_after_a_crash_is_a_function_of_what_survives_it(source: str) -> None:
    paths = [EXAMPLES / f"{source}.toml"] + [p for p in MIXED if p.stem == source]
    setup = parse_setup(VANISHED_AND_CRASH, "vanished-and-crash.toml") if source == "vanished and crash" \
        else read_setup(next(p for p in paths if p.exists()))
    prepared = prepare(setup, LocalEngine(), None, None)
    machine, config = prepared.machine, prepared.config
    after_crash._AFTER.clear()
    crashes, remembered, gone = 0, 0, 0
    for x in reachable(machine, config, 60_000):
        if not x.spec.broker_up or x.spec.used.crashes >= config.crashes:
            continue
        crash = A.BrokerCrash()
        assert crash in machine.enabled(x, config)
        crashes += 1
        remembered += after_crash.survivors(x) in after_crash._AFTER
        gone += any(conn.status == CONN_GONE for conn in x.spec.conns)
        assert machine.step(x, crash) == machine.step_itself(x, crash), source
    assert crashes > 20 and remembered > crashes // 2, (crashes, remembered)
    if source == "vanished and crash":
        assert gone > 0, "no crash met a vanished connection the broker still held"
