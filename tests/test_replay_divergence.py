"""A broker with a planted divergence (tests/fixtures/mutants.py, served with RABBITPROOF_IMPL): the replay
of the requeue loop says "diverged", not "not reproduced": the trace checker rejects the real run (a requeued
message handed out again without its redelivered flag, RQ-2), and the execution is shrunk to a shorter
prefix that still diverges."""
from __future__ import annotations

from rabbitproof.brokers.impl_broker import ImplBroker
from rabbitproof.substitute import IMPL_ENV

from tests.fixtures.mutants import ALL_MUTANTS, make_copy
from tests.test_replay import executions, target
from rabbitproof.replay.tries import replay_answer


def test_a_planted_divergence_is_diverged_and_shrunk(tmp_path, monkeypatch):
    mutant = next(m for m in ALL_MUTANTS if m.name == "requeued_message_not_marked_redelivered")
    monkeypatch.setenv(IMPL_ENV, str(make_copy(mutant, tmp_path / "mutant") / "impl"))
    setup, found = executions("requeue-on-failure")
    with ImplBroker(tmp_path / "data") as broker:
        replayed = replay_answer(found["loop"], setup, target(broker, tmp_path), "requeue-on-failure")
    assert replayed.status == "diverged", (replayed.why, replayed.ways)
    assert replayed.tries == 1
    assert replayed.why.startswith("rejected: connection c1") and "redelivered=True" in replayed.why
    assert 0 < len(replayed.shrunk_steps) < len(found["loop"].steps)
