"""Proof helpers (``Property.helper``): a user's run leaves them out, make verify and --property keep them."""
from __future__ import annotations

import os

from rich.console import Console

from rabbitproof.bench.engines import bench
from rabbitproof.cli import main
from rabbitproof.spark_check.bundle import helpers_left_out, load_spec, properties_for
from rabbitproof.spec import properties

SPEC = load_spec()


def run(argv):
    out = Console(width=400, record=True, file=open(os.devnull, "w"))
    code = main(argv, out=out)
    return code, out.export_text()


def test_the_helpers_are_the_invariants_written_for_the_proofs():
    assert len(properties.HELPERS) == 18
    assert {"channel_lifecycle", "confirms_in_step", "messages_numbered", "prefetch_counts_sane"} <= set(properties.HELPERS)
    assert all(properties.REGISTRY[n].kind == "always" for n in properties.HELPERS)
    assert not {"copies_conserved", "delivery_tags_increase", "prefetch_respected"} & set(properties.HELPERS)


def test_verify_checks_every_helper_and_a_users_run_none_unless_named():
    config = SPEC.config("medium")
    every = properties_for(config, SPEC.registry)                       # make verify (standard.py)
    users = SPEC.properties(config, helpers=False)                      # rabbitproof explore CONFIG
    assert {p.name for p in every} - {p.name for p in users} == set(properties.HELPERS)
    assert not any(p.helper for p in users)
    assert [p.name for p in SPEC.properties(config, ["channel_lifecycle"], helpers=False)] == ["channel_lifecycle"]
    assert helpers_left_out(config, SPEC.registry) == properties.HELPERS
    assert helpers_left_out(config, SPEC.registry, ["channel_lifecycle"]) == ()


def test_explore_says_which_helpers_it_left_out_and_checks_a_named_one():
    code, out = run(["explore", "ack_basics", "--no-progress"])
    assert code == 0
    assert "not checked: 18 proof helpers (live_copies_unfated, channel_lifecycle," in out
    assert "copies_conserved" in out and "│ channel_lifecycle" not in out
    code, out = run(["explore", "ack_basics", "--no-progress", "--property", "channel_lifecycle"])
    assert code == 0 and "channel_lifecycle" in out and "not checked" not in out


def test_list_marks_the_helpers():
    code, out = run(["list", "--properties"])
    assert code == 0
    line = next(line for line in out.splitlines() if "| channel_lifecycle " in line)
    assert "helper" in line
    line = next(line for line in out.splitlines() if "| copies_conserved " in line)
    assert "helper" not in line


def test_bench_checks_what_a_users_run_checks_and_the_helpers_when_asked():
    config = SPEC.config("ack_basics")
    users, = bench(SPEC.model, [config], SPEC.registry, null_states=0)
    every, = bench(SPEC.model, [config], SPEC.registry, null_states=0, helpers=True)
    assert {p.name for p in every.properties} - {p.name for p in users.properties} == set(properties.HELPERS)
    assert users.distinct_states == every.distinct_states == 12718
