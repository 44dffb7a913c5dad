"""The local engine on the toy model, whose counts are computed by hand in tests/toy_model.py."""
from __future__ import annotations

import dataclasses
import gc
import os
import subprocess
import sys
import types
import weakref
from pathlib import Path

import pytest

from rabbitproof.spark_check.bundle import action_types_of
from rabbitproof.spark_check.engine import Engine, LocalEngine, disagreements
from rabbitproof.spark_check.engines import engine_named

from tests import toy_model as toy

ROOT = Path(__file__).resolve().parent.parent


def explore(config, names=None, **kw):
    props = [toy.REGISTRY[n] for n in (names if names is not None else config.properties)]
    return LocalEngine().explore(toy, config, props, action_types=toy.ACTIONS, **kw)


def prop(result, name):
    return next(p for p in result.properties if p.name == name)


@pytest.mark.parametrize(
    ("name", "bounds", "states", "depth"),
    [
        ("tiny", {}, 6, 6),  # 6^1 states, 5*1 + 1 levels
        ("nocrash", {}, 6**2, 11),  # 6^M, 5M + 1
        ("nocrash", {"messages": "3"}, 6**3, 16),
        ("manual", {}, 6**2 + 11**2, 14),  # 6^M + 11^M, 6M + 2
        ("manual", {"messages": "3"}, 6**3 + 11**3, 20),
        ("manual", {"messages": "1"}, 6 + 11, 8),
        ("autoack", {}, 4**2 + 5**2, 8),  # 4^M + 5^M, 3M + 2
        ("autoack", {"messages": "3"}, 4**3 + 5**3, 11),
    ],
)
def test_distinct_states_and_depth_match_the_hand_count(name, bounds, states, depth):
    result = explore(toy.get(name).override(bounds))
    assert (result.distinct_states, result.depth) == (states, depth)
    assert result.complete and result.error is None


def test_coverage_counts_every_firing_and_names_classes_that_never_fired():
    # nocrash, 2 messages: each of the 5 moves of a message fires once per place of the other message.
    result = explore(toy.get("nocrash"))
    assert result.transitions == 60
    assert result.coverage == {
        "BrokerDeliver": 12, "BrokerPurge": 0, "BrokerSettle": 12, "ConsumerAck": 12,
        "ConsumerCrash": 0, "ConsumerReceive": 12, "ProducerPublish": 12,
    }
    assert result.never_fired == ("BrokerPurge", "ConsumerCrash")


def test_found_hazard_has_the_exact_shortest_counterexample():
    result = explore(toy.get("autoack"))
    hazard = prop(result, "autoack_loses_messages")
    assert (hazard.verdict, hazard.passed) == ("found", True)
    assert hazard.trace.lines() == [
        "0. initial state",
        "1. [producer] producer publishes m0 | frames: producer -> broker: basic.publish m0",
        "2. [broker] broker delivers m0 to the consumer | frames: broker -> consumer: basic.deliver m0",
        "3. [consumer] consumer crashes",
    ]
    assert hazard.trace.final_state == "State(locs=(6, 0), redelivered=(False, False), crashes_left=0)"


def test_hazard_not_found_fails():
    result = explore(toy.get("manual"), ["autoack_loses_messages"])
    hazard = prop(result, "autoack_loses_messages")
    assert (hazard.verdict, hazard.passed, hazard.trace) == ("NOT FOUND", False, None)
    assert not result.ok


def test_violated_invariant_is_reported_with_its_shortest_trace():
    result = explore(toy.get("manual"), ["no_loss", "at_most_once"])
    assert (prop(result, "no_loss").verdict, prop(result, "no_loss").passed) == ("holds", True)
    violated = prop(result, "at_most_once")
    assert (violated.verdict, violated.passed) == ("VIOLATED", False)
    assert [s.action_type for s in violated.trace.steps] == ["ProducerPublish", "BrokerDeliver", "ConsumerCrash"]
    assert [s.actor for s in violated.trace.steps] == ["producer", "broker", "consumer"]
    assert violated.trace.steps[1].frames == ("broker -> consumer: basic.deliver m0",)
    assert not result.ok


def test_sometimes_witnessed_and_not_witnessed():
    witnessed = prop(explore(toy.get("manual"), ["redelivery_happens"]), "redelivery_happens")
    assert (witnessed.verdict, witnessed.passed, len(witnessed.trace.steps)) == ("witnessed", True, 3)
    unwitnessed = prop(explore(toy.get("nocrash"), ["redelivery_happens"]), "redelivery_happens")
    assert (unwitnessed.verdict, unwitnessed.passed, unwitnessed.trace) == ("NOT WITNESSED", False, None)
    # The witness of "every message settled" is the shortest way to settle both: 5 moves each.
    done = prop(explore(toy.get("nocrash"), ["all_done"]), "all_done")
    assert len(done.trace.steps) == 10


def test_property_decided_in_the_initial_state_has_an_empty_trace():
    never = dataclasses.replace(toy.REGISTRY["no_loss"], name="false_at_start", holds=lambda s: False)
    result = LocalEngine().explore(toy, toy.get("tiny"), [never])
    assert result.properties[0].verdict == "VIOLATED"
    assert result.properties[0].trace.lines() == ["0. initial state"]


def test_deadlock_is_an_error_only_when_the_configuration_says_so():
    strict = explore(toy.get("autoack"))
    # Every message DONE or LOST, some LOST: 2^2 - 1 states.
    assert (strict.deadlocks, strict.deadlock_failed, strict.ok) == (3, True, False)
    assert [s.action for s in strict.deadlock_trace.steps] == [
        "producer publishes m0", "broker delivers m0 to the consumer",
        "producer publishes m1", "broker delivers m1 to the consumer", "consumer crashes",
    ]
    lenient = explore(toy.get("autoack_lenient"))
    assert (lenient.deadlocks, lenient.deadlock_failed, lenient.ok) == (3, False, True)
    # Final states where everything is settled are not deadlocks.
    assert explore(toy.get("manual")).deadlocks == 0


def test_exceeding_max_states_is_an_error_not_a_truncation():
    result = explore(toy.get("manual"), max_states=50)
    assert result.error is not None and "50" in result.error
    assert not result.complete and not result.ok
    assert prop(result, "no_loss").verdict == "UNDECIDED"
    assert prop(result, "redelivery_happens").verdict == "witnessed"  # decided before the cap


def test_config_max_states_is_the_default_cap():
    result = explore(dataclasses.replace(toy.get("manual"), max_states=157))
    assert result.complete and result.distinct_states == 157
    assert explore(dataclasses.replace(toy.get("manual"), max_states=156)).error is not None


def test_stop_on_violation_stops_at_the_first_violated_invariant():
    result = explore(toy.get("manual"), ["no_loss", "at_most_once"], stop_on_violation=True)
    assert result.stopped_early and not result.complete
    assert prop(result, "at_most_once").verdict == "VIOLATED"
    assert prop(result, "no_loss").verdict == "UNDECIDED"
    assert result.distinct_states < 157


def test_progress_callback_sees_the_final_count():
    seen = []
    explore(toy.get("manual"), progress=lambda *a: seen.append(a))
    assert seen[-1][0] == 157 and seen[-1][1] == 14


def test_collision_probability_is_n_squared_over_two_to_the_65():
    result = explore(toy.get("manual"))
    assert result.collision_probability == pytest.approx(157**2 / 2**65)


def test_fingerprints_are_the_same_in_every_process():
    state = toy.step(toy.initial_states(toy.get("manual"))[0], toy.ProducerPublish(1))[0]
    code = "from tests import toy_model as t; print(hash(t.step(t.initial_states(t.get('manual'))[0], t.ProducerPublish(1))[0]))"
    for seed in ("0", "12345"):
        out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)})
        assert int(out.stdout) == hash(state)


def test_engine_interface():
    assert isinstance(engine_named("local"), Engine)
    with pytest.raises(ValueError, match="unknown engine 'warp'; available: local, spark"):
        engine_named("warp")


def test_unknown_reductions_are_refused_by_both_engines():
    with pytest.raises(ValueError, match="unknown reduction 'sym'; available: por, symmetry, budgets"):
        LocalEngine(reductions=["sym"])
    with pytest.raises(ValueError, match="unknown reduction 'symmetric'"):
        engine_named("spark", reductions=["symmetric"])


def test_action_classes_are_found_without_an_actions_list():
    @dataclasses.dataclass(frozen=True)
    class Action:
        actor = "x"

    @dataclasses.dataclass(frozen=True)
    class Ping(Action):
        pass

    @dataclasses.dataclass(frozen=True)
    class Pong(Action):
        pass

    module = types.ModuleType("fake_machine")
    module.Action = Action  # only the base is named; the leaves are found as its subclasses
    assert action_types_of(module) == (Ping, Pong)
    assert action_types_of(toy) == toy.ACTIONS


@pytest.mark.parametrize("name", ["manual", "autoack", "nocrash"])
def test_exact_visited_set_agrees_with_fingerprints(name):
    config = toy.get(name)
    props = [toy.REGISTRY[n] for n in toy.REGISTRY]
    by_hash = LocalEngine().explore(toy, config, props)
    exact = LocalEngine(exact=True).explore(toy, config, props)
    assert (exact.distinct_states, exact.depth, exact.deadlocks) == (by_hash.distinct_states, by_hash.depth, by_hash.deadlocks)
    assert [(p.verdict, p.trace) for p in exact.properties] == [(p.verdict, p.trace) for p in by_hash.properties]
    assert exact.collision_probability == 0.0
    assert disagreements(by_hash, exact) == []


def test_disagreements_name_what_differs():
    full = explore(toy.get("manual"), ["at_most_once"])
    cut = explore(toy.get("manual"), ["at_most_once"], max_states=100)
    fewer = explore(toy.get("manual").override({"messages": "1"}), ["at_most_once"])
    assert "complete: True != False" in disagreements(full, cut)
    assert "depth: 14 != 8" in disagreements(full, fewer)


def test_a_model_error_is_reported_with_the_trace_to_the_failing_state():
    broken = types.SimpleNamespace(
        initial_states=toy.initial_states, enabled=toy.enabled, terminal_ok=toy.terminal_ok,
        step=lambda s, a: (_ for _ in ()).throw(ValueError("no settling")) if type(a) is toy.BrokerSettle else toy.step(s, a),
    )
    result = LocalEngine().explore(broken, toy.get("tiny"), [toy.REGISTRY["no_loss"]])
    assert result.error == "model error: step() of BrokerSettle (broker settles m0) raised ValueError: no settling"
    assert not result.ok and not result.complete
    assert [s.action_type for s in result.error_trace.steps] == [
        "ProducerPublish", "BrokerDeliver", "ConsumerReceive", "ConsumerAck"]
    assert prop(result, "no_loss").verdict == "UNDECIDED"


def test_a_predicate_error_names_the_property():
    bad = dataclasses.replace(toy.REGISTRY["no_loss"], name="fragile", holds=lambda s: 1 / (3 - s.locs[0]) > 0)
    result = LocalEngine().explore(toy, toy.get("tiny"), [bad])
    assert result.error.startswith("property fragile raised ZeroDivisionError")
    assert "after ConsumerReceive (consumer receives m0)" in result.error


def test_a_time_limit_stops_the_search_and_keeps_what_it_decided():
    config = toy.get("manual")
    full = explore(config)
    cut = explore(config, time_limit=1e-9)          # spent before the first level is done
    assert cut.error.startswith("time limit of 1e-09 s reached at depth 2 after ")     # after level 1
    assert not cut.complete and cut.distinct_states < full.distinct_states
    for p in cut.properties:                        # nothing is decided that the full search decides otherwise
        if p.decided:
            assert p.passed == prop(full, p.name).passed


def test_the_collector_is_back_after_a_search_and_frees_a_cycle_a_model_made():
    """The engine pauses the cyclic collector and freezes each level's objects (spark_check.expansion,
    PausedCollector): after the search the collector is on again, nothing stays frozen, and a cycle the
    model made during the search is freed by the next collection."""
    class Node:
        pass

    made: list = []

    model = types.SimpleNamespace(**{name: getattr(toy, name) for name in ("initial_states", "enabled", "terminal_ok")})

    def step(state, action):
        node = Node()
        node.me = node                  # a cycle: only the collector frees it
        made.append(weakref.ref(node))
        return toy.step(state, action)

    model.step = step
    config = toy.CONFIGS["nocrash"]
    was_on, frozen = gc.isenabled(), gc.get_freeze_count()
    result = LocalEngine().explore(model, config, [toy.REGISTRY[n] for n in config.properties])
    assert result.error is None and result.distinct_states == 6**2
    assert gc.isenabled() == was_on and gc.get_freeze_count() == frozen
    assert made and any(ref() is not None for ref in made)     # reference counting alone frees none
    gc.collect()
    assert all(ref() is None for ref in made)
