"""`rabbitproof check`'s default reductions (rabbitproof.check.set_up_at_once, pure_reads, interchangeable,
spent_budgets) change no answer: every example (but the two largest, left out for time: checked by hand,
figures in docs/results.md), and eight setups that mix what the examples do not (``MIXED``), is checked
in full and reduced, with the same verdicts; each reduced execution replays step by step in the full
machine to a state that answers its question, and a safety question's is no shorter than the full
search's shortest nor longer in BFS levels."""
from __future__ import annotations

from pathlib import Path

import pytest

from rabbitproof.spark_check.engine import LocalEngine
from rabbitproof.spec import actions as A
from rabbitproof.spec.state import CH_OPEN
from rabbitproof.spec.frames import BASIC_CONSUME_OK, BASIC_GET_EMPTY, BASIC_QOS_OK, CHANNEL_OPEN_OK, CONFIRM_SELECT_OK

from rabbitproof.bench.reductions import decides, replay
from rabbitproof.check import cross_checks
from rabbitproof.check.answers import DEFAULT_REDUCTIONS, check_setup, config_for, machine_for
from rabbitproof.check.pure_reads import PURE, PureReads
from rabbitproof.check.questions import LIVENESS, PROPERTIES, QUESTIONS
from rabbitproof.check.set_up_at_once import SET_UP, SetUpAtOnce
from rabbitproof.check.setup_file import read_setup

from tests.test_check import EXAMPLES

LARGEST = ("two-workers", "batch-acks")
SMALLER = [p for p in sorted(EXAMPLES.glob("*.toml")) if p.stem not in LARGEST]


# Setups none of the examples is: publishers and consumers with their settings and faults drawn at random
# (seeded) and kept where the full search takes a few seconds: transactions, republishes, dead-lettering,
# automatic and manual consumers side by side, work before the ack, every kind of fault.
MIXED = sorted(cross_checks.MIXED.glob("*.toml"))


@pytest.mark.parametrize("path", SMALLER, ids=lambda p: p.stem)
def test_the_default_reductions_change_no_answer(path):
    assert_reductions_change_no_answer(path)


@pytest.mark.parametrize("path", MIXED, ids=lambda p: p.stem)
def test_the_default_reductions_change_no_answer_on_mixed_setups(path):
    assert_reductions_change_no_answer(path)


def test_the_mixed_setups_are_all_there():
    assert len(MIXED) == 8


def assert_reductions_change_no_answer(path: Path) -> None:
    """The setup at ``path`` checked in full and with the default reductions: the same verdicts, fewer
    states, and each reduced trace replays in the full machine (the module docstring)."""
    setup = read_setup(path)
    machine, config = machine_for(setup), config_for(setup)
    full = check_setup(setup, LocalEngine())
    reduced = check_setup(setup, LocalEngine(reductions=DEFAULT_REDUCTIONS))
    assert [a.verdict for a in reduced.answers] == [a.verdict for a in full.answers]
    assert reduced.result.distinct_states < full.result.distinct_states
    safety = {p.name: p for p in PROPERTIES}
    for question, f, r in zip(QUESTIONS, full.answers, reduced.answers):
        if r.trace is None:
            continue
        ends = replay(machine, config, r.trace)
        assert ends, f"{question.key}: the reduced execution does not replay in the full machine"
        if question.name in safety:
            assert any(decides(safety[question.name], s) for s in ends)
            assert r.trace.levels <= len(f.trace.steps) <= len(r.trace.steps)
        else:
            assert question.name in {p.name for p in LIVENESS}
            assert (f.trace.cycle_start is None) == (r.trace.cycle_start is None)


def test_pure_replies_are_read_at_once_and_no_other_frame_is():
    """The replies spec.client.receive only takes off the wire are read in the step that wrote them; a
    basic.get-empty (a polling consumer waits for it) and a channel.open-ok (it opens the view) are not."""
    setup = read_setup(EXAMPLES / "polling-worker.toml")
    machine, config = machine_for(setup), config_for(setup)
    pure = PureReads(machine, config)
    assert {BASIC_QOS_OK, BASIC_CONSUME_OK, CONFIRM_SELECT_OK} <= PURE
    assert not {BASIC_GET_EMPTY, CHANNEL_OPEN_OK} & PURE
    seen = {"read": 0, "kept": 0}
    frontier = list(machine.initial_states(config))
    for _ in range(12):
        nxt = []
        for x in frontier:
            for a in machine.enabled(x, config):
                y = machine.step(x, a)[0]
                settled, steps = pure.settle(y)
                heads = [f[0][0] for conn in y.spec.conns[:config.connections] for f in conn.to_client[1:] if f]
                if any(h in PURE for h in heads):
                    assert steps and all(type(s[0]) is A.ClientReceive for s in steps)
                    seen["read"] += 1
                else:
                    assert settled == y and steps == ()
                    seen["kept"] += bool(heads)
                after = [f[0][0] for conn in settled.spec.conns[:config.connections] for f in conn.to_client[1:] if f]
                assert not any(h in PURE for h in after)
                nxt.append(settled)
        frontier = list(dict.fromkeys(nxt))
    assert seen["read"] and seen["kept"]


SHELTER_SETUPS = {
    "confirms-crash": "",                      # a crash: the set-up steps absorbed
    "reconnecting-consumer": "",               # a lost connection, then a connect at once
    "flaky-hosts": "",                         # clients that may vanish: sheltered only once they cannot
    "channel-error": "",                       # a channel error: not sheltered until it has happened
    "republishing-publisher": "",
}


@pytest.mark.parametrize("name", sorted(SHELTER_SETUPS))
def test_set_up_steps_commute_with_every_other_step_and_faults_absorb_them(name):
    """rabbitproof.check.set_up_at_once, facts (1) and (2), on every reachable state of the full machine:
    each set-up step s it would take commutes with every other enabled step b (both orders reach the same
    state, tags renumbered), and a lost connection or a crash after s reaches the state it reaches
    without s."""
    setup = read_setup(EXAMPLES / f"{name}.toml")
    machine, config = machine_for(setup), config_for(setup)
    fuse = SetUpAtOnce(machine, config)
    canon = machine.canonical
    seen, frontier, checked = set(), list(machine.initial_states(config)), 0
    while frontier:
        nxt = []
        for x in frontier:
            actions = machine.enabled(x, config)
            for c in range(config.connections):
                s = fuse.next_step(x, c)
                conn = x.spec.conns[c]
                first = next((a for a in actions if type(a) in SET_UP and a.conn == c
                              and (not a.ch or conn.channels[a.ch - 1].status == CH_OPEN)), None)
                if fuse.wants(x, c) and fuse.sheltered(x.spec, c) and first is not None:
                    assert s == first, "next_step is the first set-up step enabled gives"
                if s is None:
                    continue
                after_s = machine.step(x, s)[0]
                then = machine.enabled(after_s, config)
                for b in actions:
                    if b == s:
                        continue
                    absorbs = type(b) is A.BrokerCrash or type(b) is A.NetworkLoss and b.conn == c
                    assert b in then, f"{s} disables {b}"
                    if absorbs:
                        assert canon(machine.step(after_s, b)[0]) == canon(machine.step(x, b)[0]), f"{b} after {s}"
                    else:
                        after_b = machine.step(x, b)[0]
                        assert s in machine.enabled(after_b, config), f"{b} disables {s}"
                        assert canon(machine.step(after_s, b)[0]) == canon(machine.step(after_b, s)[0]), \
                            f"{s} and {b} do not commute"
                    checked += 1
            for a in actions:
                y = canon(machine.step(x, a)[0])
                if y not in seen:
                    seen.add(y)
                    nxt.append(y)
        frontier = nxt
    assert checked > 100


@pytest.mark.parametrize("path", [EXAMPLES / f"{name}.toml" for name in sorted(SHELTER_SETUPS)] +
                         [p for p in MIXED if p.stem in ("crash-and-connection-lost-two-messages",
                                                         "republish-close-channel-channel-error-vanishing",
                                                         "two-publishers-reject-drop-consumer-vanishes")],
                         ids=lambda p: p.stem)
def test_a_remembered_run_of_fused_steps_is_the_run_itself(path):
    """SetUpAtOnce.set_up and PureReads.read work each distinct run of a connection's set-up steps, and of its
    pure reads, out once: on every successor of every state of the graph the search walks (the default
    fusions), the normal form each gives with its runs remembered is the one a fresh one (nothing
    remembered) gives, with the same steps."""
    setup = read_setup(path)
    machine, config = machine_for(setup), config_for(setup)
    set_up, pure, normal = SetUpAtOnce(machine, config), PureReads(machine, config), machine.fused_takes(config).settle
    seen, frontier = set(), [normal(s)[0] for s in machine.initial_states(config)]
    remembered = {"set up": 0, "pure reads": 0}
    while frontier:
        nxt = []
        for x in frontier:
            for a in machine.enabled(x, config):
                y = machine.step(x, a)[0]
                for name, part, fresh in (("set up", set_up, SetUpAtOnce), ("pure reads", pure, PureReads)):
                    known = len(part._done)
                    settled, steps = part.settle(y)
                    assert (settled, steps) == fresh(machine, config).settle(y), f"{name}: {a} from {x}"
                    remembered[name] += bool(steps) and len(part._done) == known
                    y = settled
                y = normal(y)[0]
                if machine.canonical(y) not in seen:
                    seen.add(machine.canonical(y))
                    nxt.append(y)
        frontier = nxt
        assert len(seen) < 60_000, "the setup is larger than this test means to walk"
    assert min(remembered.values()) > 10, f"a kind of run was never remembered: the test checked nothing {remembered}"
