"""rabbitproof.check.disk_at_once: once no crash is left, writing the disk at once changes no answer.

Point (2) of its argument, checked on every reachable state of the full graph of setups with and
without a crash: taking every pending fsync first (D) commutes with every other step up to D, and only
enables confirms and commit-oks that waited for a write; point (3): the only question D can change in
a state is "lost", and only by finding it sooner."""
from __future__ import annotations

from collections import deque

import pytest

from rabbitproof.check.answers import prepare
from rabbitproof.check.disk_at_once import DiskAtOnce
from rabbitproof.check.questions import lost_messages, processed_at_most_once, publisher_waits, seen_in_publication_order
from rabbitproof.check.setup_file import read_setup
from rabbitproof.spark_check.engine import LocalEngine
from rabbitproof.spec import actions as A
from rabbitproof.spec.faults import pending_disk


def reachable(machine, config, cap: int) -> list:
    """A state of each state of the setup's full graph (no reduction; one per canonical form, delivery tags
    renumbered: a requeue loop comes back), breadth first."""
    start = list(machine.initial_states(config))
    seen = {machine.canonical(s): s for s in start}
    queue = deque(start)
    while queue:
        state = queue.popleft()
        for action in machine.enabled(state, config):
            succ = machine.step(state, action)[0]
            key = machine.canonical(succ)
            if key not in seen:
                seen[key] = succ
                queue.append(succ)
                assert len(seen) <= cap, "the setup is larger than this test means to walk"
    return list(seen.values())


@pytest.mark.parametrize("example", ["confirms-crash", "transactional", "safe-pipeline", "work-before-ack", "dead-letter",
                                     "requeue-on-failure", "polling-worker"])
def test_writing_the_disk_at_once_commutes_with_every_step_once_no_crash_is_left(example: str) -> None:
    setup = read_setup(f"examples/{example}.toml")
    prepared = prepare(setup, LocalEngine(), None, None)
    machine, config = prepared.machine, prepared.config
    disk = DiskAtOnce(machine, config)

    def settled(watched):
        return disk.settle(watched)[0]
    states = reachable(machine, config, 50_000)
    fused = 0
    for x in states:
        d = settled(x)
        if d == x:
            continue
        fused += 1
        assert x.spec.broker_up and x.spec.used.crashes == config.crashes and pending_disk(x.spec)
        assert not pending_disk(d.spec)
        before = set(machine.enabled(x, config))
        after = set(machine.enabled(d, config))
        for b in before:
            if type(b) is A.DiskFsync:
                continue
            assert b in after, (example, b)
            assert settled(machine.step(x, b)[0]) == settled(machine.step(d, b)[0]), (example, b)
        assert all(type(b) in (A.BrokerConfirm, A.BrokerCommitOk) for b in after - before), after - before
        # The questions: the same in x and D(x) but "lost", which D may only find sooner.
        assert processed_at_most_once(x) == processed_at_most_once(d)
        assert seen_in_publication_order(x) == seen_in_publication_order(d)
        assert publisher_waits(x) == publisher_waits(d)
        assert lost_messages(x) <= lost_messages(d)
    assert fused > 20, "the setup never had a write to fuse: the test checked nothing"
