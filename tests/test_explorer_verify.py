"""rabbitproof.explore.standard and rabbitproof.bench.engines on the toy model, with a manifest of its own."""
from __future__ import annotations

import dataclasses
import json
import os

from rich.console import Console

from rabbitproof import cli
from rabbitproof.bench import engines as bench_module
from rabbitproof.explore.standard import read_manifest, verify

from tests import toy_model as toy

STANDARD = [toy.get(n) for n in toy.STANDARD]
PINS = {
    "tiny": {"distinct_states": 6, "depth": 6},
    "nocrash": {"distinct_states": 36, "depth": 11},
    "manual": {"distinct_states": 157, "depth": 14},
    "autoack_lenient": {"distinct_states": 41, "depth": 8},
}


def recording_console():
    return Console(width=200, record=True, file=open(os.devnull, "w"))


def test_update_manifest_pins_the_counts_then_verify_passes(tmp_path):
    manifest = tmp_path / "manifest.json"
    first = verify(toy, STANDARD, toy.REGISTRY, manifest)
    assert not first.ok  # no manifest entries yet
    assert all("no manifest entry" in o.failures[0] for o in first.outcomes)
    updated = verify(toy, STANDARD, toy.REGISTRY, manifest, update=True)
    assert updated.ok and read_manifest(manifest) == PINS
    assert verify(toy, STANDARD, toy.REGISTRY, manifest).ok


def test_a_changed_count_fails_and_says_which(tmp_path):
    manifest = tmp_path / "manifest.json"
    pins = {**PINS, "manual": {"distinct_states": 150, "depth": 14}}
    manifest.write_text(json.dumps({"configs": pins}))
    console = recording_console()
    report = verify(toy, STANDARD, toy.REGISTRY, manifest, console=console)
    assert not report.ok
    failing = {o.result.config: o.failures for o in report.outcomes if not o.ok}
    assert failing == {"manual": ["manifest distinct states 150 != 157"]}
    text = console.export_text()
    assert "manual: manifest distinct states 150 != 157" in text and "verify: FAIL" in text


def test_failed_checks_fail_verify_and_print_their_counterexamples(tmp_path):
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"configs": {"autoack": {"distinct_states": 41, "depth": 8},
                                                "manual": {"distinct_states": 157, "depth": 14}}}))
    broken = dataclasses.replace(toy.get("manual"), properties=("at_most_once", "autoack_loses_messages"))
    console = recording_console()
    report = verify(toy, [toy.get("autoack"), broken], toy.REGISTRY, manifest, console=console)
    failures = {o.result.config: o.failures for o in report.outcomes}
    assert failures == {
        "autoack": ["3 deadlocked states"],
        "manual": ["at_most_once VIOLATED", "autoack_loses_messages NOT FOUND"],
    }
    text = console.export_text()
    assert "autoack: deadlock: shortest trace, 5 steps" in text
    assert "manual: at_most_once VIOLATED: shortest trace, 3 steps" in text
    assert "  <-- here at_most_once fails" in text          # the step that does the harm, marked
    assert "manual: autoack_loses_messages NOT FOUND: no reachable state falsifies it" in text


def test_verify_pins_counts_in_the_manifest_it_is_given(tmp_path):
    manifest = tmp_path / "manifest.json"
    configs = [toy.get(n) for n in toy.STANDARD]
    assert not verify(toy, configs, toy.REGISTRY, manifest).ok            # nothing pinned yet
    assert verify(toy, configs, toy.REGISTRY, manifest, update=True).ok
    assert verify(toy, configs, toy.REGISTRY, manifest).ok


def test_verify_refuses_an_unknown_configuration_before_any_work(capsys):
    assert cli.main(["verify", "--part", "explore", "--config", "nope"]) == 2
    assert capsys.readouterr().err.splitlines()[-1].startswith("rabbitproof verify: error: unknown configuration")


def test_bench_reports_states_per_second():
    results = bench_module.bench(toy, [toy.get("manual")], toy.REGISTRY, null_states=5000)
    assert [r.distinct_states for r in results] == [157, 5000]
    assert all(r.states_per_second > 0 for r in results)


def test_a_configuration_without_properties_checks_every_property(tmp_path):
    everything = dataclasses.replace(toy.get("manual"), properties=())
    report = verify(toy, [everything], toy.REGISTRY, tmp_path / "manifest.json", update=True)
    assert [p.name for p in report.outcomes[0].result.properties] == list(toy.REGISTRY)
