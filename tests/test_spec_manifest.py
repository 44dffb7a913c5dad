"""The pinned numbers of the spec: distinct states and depth of the fast standard configurations
against rabbitproof/explore/manifest.json, and the exact shortest counterexample of hazards (STYLE.md,
stateright: tests pin the numbers; a failing configuration asserts its exact counterexample).
The slower configurations are checked by `make verify`."""
import json

import pytest

from rabbitproof.spark_check.engine import LocalEngine
from rabbitproof.spec import configs, machine, properties

from rabbitproof.explore.manifest import MANIFEST as MANIFEST_PATH

MANIFEST = json.loads(MANIFEST_PATH.read_text())["configs"]
FAST = [name for name in configs.STANDARD if MANIFEST[name]["distinct_states"] <= 30_000]


def explore(name: str, props=None):
    config = configs.get(name)
    chosen = tuple(properties.REGISTRY[p] for p in (props or config.properties))
    return LocalEngine().explore(machine, config, chosen)


@pytest.mark.parametrize("name", FAST)
def test_fast_configuration_matches_manifest_and_passes(name):
    result = explore(name)
    assert (result.distinct_states, result.depth) == (MANIFEST[name]["distinct_states"], MANIFEST[name]["depth"])
    failed = [p.name for p in result.properties if not p.passed]
    assert failed == [], f"{name}: {failed}"
    assert not result.deadlocks


def test_every_hazard_has_its_configuration_DU_2_TX_9_PC_7():
    hazards = {name for name, p in properties.REGISTRY.items() if p.kind == "hazard"}
    shown = {p for name in configs.STANDARD if configs.get(name).category == "hazard"
             for p in configs.EXPECT[name] if p in hazards}
    assert shown == hazards


def steps(result, prop):
    [found] = [p for p in result.properties if p.name == prop]
    assert found.found and found.passed
    return [f"[{s.actor}] {s.action}" for s in found.trace.steps]


def test_unconfirmed_persistent_message_lost_in_crash_exact_trace_PC_10_DU_2():
    result = explore("hazard_unconfirmed_lost", ("persistent_never_lost", "confirmed_survives_crash"))
    assert steps(result, "persistent_never_lost") == [
        "[client c0.ch1] publish to exchange '' key q0 persistent",
        "[broker] take the next frame from c0.ch1",
        "[broker] CRASH",
    ]
    assert [p.verdict for p in result.properties] == ["found", "holds"]


def test_auto_ack_delivery_lost_with_its_connection_exact_trace_AM_2():
    result = explore("hazard_auto_ack_loss", ("auto_ack_never_loses",))
    assert steps(result, "auto_ack_never_loses") == [
        "[client c0.ch1] publish to exchange '' key q0",
        "[broker] take the next frame from c0.ch1",
        "[client c1.ch1] consume q0 as ctag 1 (automatic ack)",
        "[broker] take the next frame from c1.ch1",
        "[broker] deliver the head of q0",
        "[network] connection c1 LOST",
    ]


def test_acknowledged_message_resurrected_after_crash_exact_length_TX_8():
    result = explore("hazard_ack_resurrected", ("acked_never_redelivered",))
    trace = steps(result, "acked_never_redelivered")
    assert trace[-2:] == ["[broker] CRASH", "[broker] restart and recover from disk"]
    assert "[client c0.ch2] ack tag 1" in trace and any(s.startswith("[disk] fsync: write") for s in trace)
