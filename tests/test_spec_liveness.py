"""The spec's own liveness properties (spec.properties.LIVENESS) under its fairness (spec.fairness):
``confirms_eventually_answered`` (PC-2) holds on standard configurations, with the reductions and
without; a broker with a planted bug that forgets a publish fails it at an end state, one whose confirm
does nothing fails it with a lasso; an unfair stall is no counterexample, and under ``por`` (which may
lose fair cycles: spec.por) it leaves the verdict undecided, with a note, rather than passing it."""
from __future__ import annotations

import dataclasses
import json
import os
import re
from dataclasses import dataclass

import pytest
from rich.console import Console

from rabbitproof.spark_check.bundle import load_spec, properties_for
from rabbitproof.spark_check.engine import LocalEngine
from rabbitproof.spec import actions as A
from rabbitproof.spec import machine
from rabbitproof.spec.fairness import UNFAIR
from rabbitproof.spec.properties import LIVENESS, waiting_for_confirm
from rabbitproof.spec.state import with_conn

from rabbitproof.cli import main
from rabbitproof.explore.manifest import MANIFEST, read_manifest
from rabbitproof.explore.standard import verify

SPEC = load_spec()
ANSWERED = LIVENESS["confirms_eventually_answered"]


def judged(model, name: str, reductions=(), properties=()):
    """The verdict on ``confirms_eventually_answered`` of ``model`` on configuration ``name``, and the result."""
    result = LocalEngine(reductions=reductions).explore(model, SPEC.config(name), properties, liveness=[ANSWERED])
    (verdict,) = [p for p in result.properties if p.kind == "liveness"]
    return verdict, result


@pytest.mark.parametrize("name", ["confirms", "channel_error", "crash", "hazard_unconfirmed_lost",
                                  "hazard_confirm_order"])
def test_every_confirm_mode_publish_is_eventually_answered_PC_2(name):
    """On a few small standard configurations; `make verify` judges it on all of them."""
    reductions = ("por", "symmetry")
    config = SPEC.config(name)
    verdict, result = judged(machine, name, reductions, properties_for(config, SPEC.registry))
    assert result.ok and verdict.verdict == "holds" and result.notes == ()


def test_the_verdict_is_the_same_without_reductions_PC_2():
    """The full search, every state of it (the count pinned in the manifest for the full search)."""
    verdict, result = judged(machine, "confirms")
    assert verdict.verdict == "holds" and result.distinct_states == read_manifest(MANIFEST)["confirms"]["distinct_states"]


def test_clients_do_wait_for_confirms_in_reachable_states_PC_2():
    """Not vacuous: some reachable state of ``confirms`` has a client waiting for a confirm."""
    config = SPEC.config("confirms")
    seen, frontier = set(), list(machine.initial_states(config))
    while frontier and not any(map(waiting_for_confirm, frontier)):
        seen.update(frontier)
        frontier = list({machine.step(x, a)[0] for x in frontier for a in machine.enabled(x, config)} - seen)
    assert frontier


# --- planted bugs: the property must fail on them ---------------------------------------------------

def _forget_publish(state, c: int, ch: int, seq: int):
    conn = state.conns[c]
    channel = conn.channels[ch - 1]
    kept = tuple(p for p in channel.unconfirmed if p.seq != seq)
    channels = conn.channels[:ch - 1] + (channel._replace(unconfirmed=kept),) + conn.channels[ch:]
    return with_conn(state, c, conn._replace(channels=channels))


class _Spec:
    """The spec's machine with every hook, so that a planted bug overrides one function only."""

    def __getattr__(self, name):
        return getattr(machine, name)


@dataclass(frozen=True)
class ForgetsFirstPublish(_Spec):
    """Planted bug: the broker takes publish 1 of a confirm channel and forgets it (it will never confirm
    it). Nothing is owed any more in the broker's eyes, so ``terminal_ok`` is fooled: no deadlock."""

    def step(self, state, action):
        after, frames = machine.step(state, action)
        if type(action) is A.BrokerTakeFrame and action.ch:
            after = _forget_publish(after, action.conn, action.ch, 1)
        return after, frames


@dataclass(frozen=True)
class ConfirmOfFirstDoesNothing(_Spec):
    """Planted bug: a confirm that covers publish 1 changes nothing (the broker means to send it and never
    does): the step loops on its state for ever, the fair step of confirming taken every time."""

    def step(self, state, action):
        if type(action) is A.BrokerConfirm and (action.seq == 1 or action.multiple):
            return state, ()
        return machine.step(state, action)


def test_a_broker_that_forgets_a_publish_fails_at_an_end_state_PC_2():
    verdict, result = judged(ForgetsFirstPublish(), "confirms")
    assert verdict.verdict == "VIOLATED" and verdict.trace.cycle_start is None
    assert result.deadlocks == 0                    # only the liveness property sees it
    steps = verdict.trace.steps
    assert any("basic.publish" in f for s in steps for f in s.frames)
    assert not any("basic.ack" in f or "basic.nack" in f for s in steps for f in s.frames)


@pytest.mark.parametrize("reductions", [(), ("por", "symmetry")])
def test_a_confirm_that_never_arrives_fails_with_a_lasso_PC_2(reductions):
    verdict, result = judged(ConfirmOfFirstDoesNothing(), "confirms", reductions)
    trace = verdict.trace
    assert verdict.verdict == "VIOLATED" and trace.cycle_start is not None
    repeated = trace.steps[trace.cycle_start:]
    assert repeated and all(s.action_type == "BrokerConfirm" for s in repeated)
    assert any("basic.publish" in f for s in trace.steps[:trace.cycle_start] for f in s.frames)


# --- fairness, and a reduction that may lose fair cycles ----------------------------------------------

@dataclass(frozen=True)
class BrokerStall(A.Action):
    """A step that changes nothing, possible while a publish waits: need never happen (not fair)."""

    actor = "broker"

    def __str__(self) -> str:
        return "stall"


@dataclass(frozen=True)
class StallingBroker(_Spec):
    """The spec with a broker that may stall (an unfair step) while a publish of channel 1 waits."""

    def enabled(self, state, config):
        waits = any(channel.unconfirmed for conn in state.conns for channel in conn.channels)
        return machine.enabled(state, config) + ((BrokerStall(),) if waits else ())

    def step(self, state, action):
        return (state, ()) if type(action) is BrokerStall else machine.step(state, action)


def test_a_broker_that_may_stall_for_ever_is_no_counterexample_under_fairness_PC_2():
    """Stalling for ever leaves a fair step (a take, a confirm, a write to disk) possible all along and
    never taken: not a fair execution."""
    assert machine.fairness(SPEC.config("confirms")).class_of(BrokerStall()) == UNFAIR
    for reductions in ((), ("symmetry",)):          # symmetry keeps fair cycles (spec.symmetry)
        verdict, result = judged(StallingBroker(), "confirms", reductions)
        assert verdict.verdict == "holds" and result.notes == ()


def test_por_leaves_a_verdict_with_unfair_cycles_undecided_and_says_why():
    """spec.por: por may lose fair cycles, so cycles it finds, none fair, decide nothing."""
    verdict, result = judged(StallingBroker(), "confirms", ("por",))
    assert verdict.verdict == "UNDECIDED" and not result.ok
    (note,) = result.notes
    assert note.startswith("confirms_eventually_answered undecided: the graph reduced by por has cycles")


def test_fused_takes_change_nothing_the_property_reads():
    """spec.por, Liveness: the property reads only the clients' side, which a fused take never writes;
    checked on every reachable state of configurations where takes are fused."""
    for name in ("confirms", "hazard_confirm_order"):
        config = SPEC.config(name)
        settle = machine.fused_takes(config).settle
        state = machine.initial_states(config)[0]
        seen, frontier, fused = {state}, [state], 0
        while frontier:
            nxt = []
            for x in frontier:
                for a in machine.enabled(x, config):
                    y = machine.step(x, a)[0]
                    normal, steps = settle(y)
                    fused += bool(steps)
                    assert waiting_for_confirm(normal) == waiting_for_confirm(y)
                    if y not in seen:
                        seen.add(y)
                        nxt.append(y)
            frontier = nxt
        assert fused or name != "confirms"


def test_interchangeable_channels_share_their_fair_classes():
    """spec.fairness: a renaming maps each class onto itself (what keeps symmetry exact for liveness)."""
    fairness = machine.fairness(SPEC.config("twin_consumers"))
    for kind in (A.BrokerTakeFrame, A.ClientReceive, A.BrokerConfirm):
        assert fairness.class_of(kind(1, 1, *(() if kind is not A.BrokerConfirm else (1, False)))) == \
            fairness.class_of(kind(2, 1, *(() if kind is not A.BrokerConfirm else (1, False))))
    assert fairness.class_of(A.BrokerTakeFrame(0, 1)) != fairness.class_of(A.BrokerTakeFrame(1, 1))
    assert fairness.class_of(A.BrokerCrash()) == UNFAIR


# --- what rabbitproof explore, list and verify show ----------------------------------------------------

def _console():
    return Console(width=200, record=True, file=open(os.devnull, "w"))


def test_explore_judges_the_liveness_properties_and_names_them_in_json(tmp_path, capsys):
    path = tmp_path / "out.json"
    out = _console()
    code = main(["explore", "hazard_unconfirmed_lost", "--property", "confirms_eventually_answered", "--no-progress",
                 "--json-file", str(path)], out=out)
    assert code == 0
    (verdict,) = json.loads(path.read_text())["properties"]
    assert (verdict["name"], verdict["kind"], verdict["verdict"], verdict["trace"]) == (
        "confirms_eventually_answered", "liveness", "holds", None)
    assert "confirms_eventually_answered | liveness | PC-2, PC-3, PC-6" in out.export_text()   # plain: not a terminal
    out = _console()
    assert main(["list", "--properties"], out=out) == 0
    assert re.search(r"confirms_eventually_answered +\| liveness +\| +\| PC-2, PC-3, PC-6", out.export_text())


@pytest.mark.parametrize("bug, how", [(ConfirmOfFirstDoesNothing, ": a lasso, "),
                                      (ForgetsFirstPublish, ", in an end state (nothing fair left to happen): ")])
def test_verify_fails_on_a_planted_bug_and_prints_the_counterexample(tmp_path, bug, how):
    console = _console()
    config = dataclasses.replace(SPEC.config("confirms"), properties=("delivery_tags_increase",))  # the bug keeps it
    report = verify(bug(), [config], SPEC.registry, tmp_path / "manifest.json", update=True, console=console,
                    liveness=SPEC.liveness_named())
    (outcome,) = report.outcomes
    assert not report.ok and outcome.failures == ["confirms_eventually_answered VIOLATED"]
    text = console.export_text()
    assert f"confirms: confirms_eventually_answered VIOLATED{how}" in text
    assert ("↻" in text) == (bug is ConfirmOfFirstDoesNothing)
