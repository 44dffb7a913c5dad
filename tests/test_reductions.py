"""The partial-order reduction ``por`` (spark_check.reductions): on the spec's small standard
configurations it changes no verdict, its traces replay to deciding states with
levels(reduced) <= steps(full) <= steps(reduced), it reaches exactly the full search's deadlocks and
fires the same action classes; the premises of its soundness argument hold on every reachable state;
and the premise check does catch an unsound fusion. (Every standard configuration, medium included,
is compared by ``make bench``: python -m rabbitproof.bench.reductions.)"""
from __future__ import annotations

import pytest

from rabbitproof.spark_check.bundle import load_spec
from rabbitproof.spark_check.engine import LocalEngine
from rabbitproof.spark_check.expansion import Expander
from rabbitproof.spark_check.reductions import build_reduction, parse_reductions, written_for
from rabbitproof.spec.por import FusedTakes

from rabbitproof import cli
from rabbitproof.bench.reductions import compare_reduction, levels, premise_problems
from rabbitproof.explore.manifest import MANIFEST, compare, entry_for, pinned_entry, read_manifest

from tests import toy_model as toy

SPEC = load_spec()
# Small standard configurations (full searches under 15,000 states; confirms, the other one, is in make bench).
SMALL = ["ack_basics", "crash", "tx_ack", "tx_publish"] + \
    [n for n in SPEC.configs.STANDARD if n.startswith("hazard_")]


def props(name):
    config = SPEC.config(name)
    return config, SPEC.properties(config)


@pytest.mark.parametrize("name", SMALL)
def test_verdicts_traces_deadlocks_and_coverage_agree_with_the_full_search(name):
    config, properties = props(name)
    comparison = compare_reduction(SPEC.model, config, properties, ("por",), SPEC.action_types())
    assert comparison.problems == []
    full, reduced = comparison.full, comparison.reduced
    assert reduced.reductions == ("por",) and full.reductions == ()
    assert [(p.name, p.verdict) for p in reduced.properties] == [(p.name, p.verdict) for p in full.properties]
    assert reduced.distinct_states <= full.distinct_states and reduced.deadlocks == full.deadlocks
    for f, r in zip(full.properties, reduced.properties):
        if f.trace is not None:
            assert levels(r.trace) <= len(f.trace.steps) <= len(r.trace.steps)


def test_the_reduction_cuts_states_and_its_traces_show_the_fused_takes():
    config, properties = props("hazard_consumer_order")
    full = LocalEngine().explore(SPEC.model, config, properties)
    reduced = LocalEngine(reductions=("por",)).explore(SPEC.model, config, properties)
    assert reduced.distinct_states < full.distinct_states and reduced.transitions < full.transitions
    fused = [s for p in reduced.properties if p.trace for s in p.trace.steps if s.fused]
    assert fused and all(s.action_type == "BrokerTakeFrame" for s in fused)


@pytest.mark.parametrize("name", ["ack_basics", "hazard_consumer_order", "hazard_prefetch_exceeded"])
def test_the_premises_of_the_argument_hold_on_every_reachable_state(name):
    config, properties = props(name)
    checked, problems = premise_problems(SPEC.model, config, properties)
    assert problems == []
    assert checked == read_manifest(MANIFEST)[name]["distinct_states"]     # every reachable state


class _FusesRequeues(FusedTakes):
    """Unsound on purpose: also fuses nack with requeue, which does not commute with a delivery (the
    requeued copy may become the head of the queue)."""

    def _nack(self, state, channel, frame):
        return self._settles_plainly(state, channel, frame[2], frame[3], False)


def test_the_premise_check_catches_a_fusion_that_does_not_commute():
    config, properties = props("ack_basics")
    _, problems = premise_problems(SPEC.model, config, properties, reduction=_FusesRequeues(config, SPEC.model.step, SPEC.model._act), limit=3)
    assert problems and all(p.startswith("(1):") for p in problems)
    assert any("BrokerDeliver" in p for p in problems)


def test_configurations_whose_queues_or_connections_can_change_under_it_fuse_nothing():
    for name in ("routing", "queue_admin"):
        reduction = build_reduction(("por",), SPEC.model, SPEC.config(name))
        assert reduction.channels == () and reduction.publisher is None
    protocol = build_reduction(("por",), SPEC.model, SPEC.config("protocol_errors"))
    assert 0 not in protocol.connections and protocol.publisher is None


def test_names_are_checked_and_por_is_for_models_that_offer_it():
    assert parse_reductions("por") == ("por",) and parse_reductions("none") == () and parse_reductions("") == ()
    with pytest.raises(ValueError, match="unknown reduction 'symmetric'"):
        parse_reductions("symmetric")
    with pytest.raises(ValueError, match="named twice"):
        parse_reductions("por,por")
    with pytest.raises(ValueError, match=r"reduction 'por' is not written for this model \(it offers: none\)"):
        Expander(toy, toy.get("manual"), [], reductions=("por",))
    assert written_for(SPEC.model) == ("por", "symmetry") and written_for(toy) == ()


def test_the_command_lines_refuse_a_bad_reduction_in_one_line(capsys):
    assert cli.main(["explore", "ack_basics", "--reduce", "sym", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "rabbitproof explore: error: --reduce: unknown reduction 'sym'; available: por, symmetry, budgets"
    assert cli.main(["verify", "--part", "explore", "--config", "ack_basics", "--reduce", "sym"]) == 2
    assert "unknown reduction 'sym'" in capsys.readouterr().err


def test_the_manifest_pins_reduced_counts_beside_the_full_ones():
    config, properties = props("hazard_consumer_order")
    full = LocalEngine().explore(SPEC.model, config, properties)
    reduced = LocalEngine(reductions=("por",)).explore(SPEC.model, config, properties)
    entry = pinned_entry(pinned_entry(None, full), reduced)
    assert entry_for(full, entry) == {"distinct_states": full.distinct_states, "depth": full.depth}
    assert entry_for(reduced, entry) == {"distinct_states": reduced.distinct_states, "depth": reduced.depth}
    assert compare(full, entry) == [] and compare(reduced, entry) == []
    assert compare(reduced, pinned_entry(None, full)) == [
        "no manifest entry for --reduce por (run with --update-manifest)"]
