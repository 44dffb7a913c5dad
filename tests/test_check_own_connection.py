"""rabbitproof.check.own_connection: a step that reads and changes only its own connection, the budgets and
the observer's record, remembered by those, is the step the machine computes, on every successor of every
state the search walks of setups with every kind of client (manual and automatic acks, requeues, drops,
polling, transactions, work before the ack, republishes) and fault (crashes, lost connections, vanished
clients, channel errors)."""
from __future__ import annotations

import pytest

from rabbitproof.check import own_connection
from rabbitproof.check.answers import config_for, machine_for
from rabbitproof.check.setup_file import read_setup

from tests.test_check import EXAMPLES
from tests.test_check_reductions import MIXED

SETUPS = [EXAMPLES / f"{name}.toml" for name in ("requeue-on-failure", "auto-ack", "channel-error", "confirms-crash",
                                                   "work-before-ack", "flaky-hosts", "polling-worker",
                                                   "transactional", "republishing-publisher")] + \
         [p for p in MIXED if p.stem in ("republish-nack-drop-channel-lost",
                                         "requeue-and-automatic-consumers-channel-lost",
                                         "tx-work-before-ack-channel-error",
                                         "two-publishers-reject-drop-consumer-vanishes")]


@pytest.mark.parametrize("path", SETUPS, ids=lambda p: p.stem)
def test_a_remembered_step_of_its_own_connection_is_the_step_itself(path):
    assert len(SETUPS) == 13, "a setup of the list is missing"
    setup = read_setup(path)
    machine, config = machine_for(setup), config_for(setup)
    normal = machine.fused_takes(config).settle
    own_connection._DONE.clear()
    seen, frontier, steps, remembered = set(), [normal(s)[0] for s in machine.initial_states(config)], 0, 0
    while frontier:
        nxt = []
        for x in frontier:
            for a in machine.enabled(x, config):
                if type(a) in own_connection.OWN:
                    steps += 1
                    remembered += (a, x.spec.conns[a.conn], x.spec.used, x.ghost) in own_connection._DONE
                    assert machine.step(x, a) == machine.step_itself(x, a), f"{a} from {x}"
                y = normal(machine.step(x, a)[0])[0]
                if machine.canonical(y) not in seen:
                    seen.add(machine.canonical(y))
                    nxt.append(y)
        frontier = nxt
        assert len(seen) < 60_000, "the setup is larger than this test means to walk"
    assert steps > 20 and remembered > steps // 4, (steps, remembered)
