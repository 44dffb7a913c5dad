"""Answers that hold for every size (rabbitproof.check.for_every_size): the invariants named are proved
ones, the shape they cover agrees with every pinned example, each condition of the shape is needed (drop
one and a crash loses a message), and the report and its JSON say which answers reach further than the
bounds."""
from __future__ import annotations

import json

import pytest

from rabbitproof.model.invariants import HELPERS, INVARIANTS
from rabbitproof.spark_check.engine import LocalEngine

from rabbitproof.check.answers import Prepared, check_setup, config_for, keeps_beliefs, machine_for
from rabbitproof.check.for_every_size import IMPLIED, proved_for
from rabbitproof.check.setup_file import parse_setup, read_setup
from tests.test_check import CANNOT, EXAMPLES, EXPECTED, run

COVERED = """
[queues.payments]
durable = true

[[publishers]]
name = "gateway"
queue = "payments"
confirms = true
persistent = true

[[consumers]]
name = "settler"
queue = "payments"
acks = "manual"
on_failure = "nack-requeue"

[faults]
broker_crash = true
connection_closed = ["settler"]
"""


def test_the_invariants_named_are_proved_ones_not_helpers():
    for implied in IMPLIED:
        assert implied.invariants and all(name in INVARIANTS and name not in HELPERS for name in implied.invariants)


def test_every_covered_example_answers_cannot_happen_and_the_unsafe_ones_are_not_covered():
    covered = {name for name in EXPECTED if proved_for(read_setup(EXAMPLES / f"{name}.toml"), "lost")}
    assert all(EXPECTED[name][0] == CANNOT for name in covered)
    assert {"safe-pipeline", "confirms-crash", "republishing-publisher"} <= covered
    assert not covered & {"fire-and-forget", "auto-ack", "reply-queue", "transactional", "dead-letter"}


def searched(setup, beliefs: bool | None = None):
    """``setup`` checked in full, the observer keeping beliefs or not (default: as `check` does)."""
    prepared = Prepared(config_for(setup), machine_for(setup, beliefs))
    checked = check_setup(setup, LocalEngine(reductions=("por", "symmetry")), prepared=prepared)
    assert checked.result.complete
    return checked


def lost(text: str) -> str:
    """The search's own answer to "lost", beliefs kept even where the proof covers the setup."""
    return searched(parse_setup(text, "shape.toml"), beliefs=True).answers[0].verdict


COVERED_EXAMPLES = sorted(name for name in EXPECTED if not keeps_beliefs(read_setup(EXAMPLES / f"{name}.toml")))


def test_most_examples_leave_lost_to_the_proof():
    assert {"safe-pipeline", "confirms-crash", "two-workers", "batch-acks"} <= set(COVERED_EXAMPLES)


@pytest.mark.parametrize("name", COVERED_EXAMPLES)
def test_a_covered_example_searched_with_beliefs_finds_no_loss_and_the_same_other_answers(name):
    """Where the proof covers "lost", `check` keeps no beliefs (answers.keeps_beliefs) and leaves "lost" to
    the proof. Searched with them kept, the example finds no lost message either (the proof's
    implication held to the search), and every other answer is the same, in as many states or more."""
    setup = read_setup(EXAMPLES / f"{name}.toml")
    assert proved_for(setup, "lost") and not keeps_beliefs(setup)
    kept, default = searched(setup, beliefs=True), searched(setup)
    assert kept.answers[0].verdict == CANNOT and kept.machine.beliefs and not default.machine.beliefs
    assert [a.verdict for a in kept.answers] == [a.verdict for a in default.answers]
    assert kept.result.distinct_states >= default.result.distinct_states


def test_without_beliefs_states_that_differed_only_by_them_are_one():
    setup = read_setup(EXAMPLES / "confirms-crash.toml")
    assert searched(setup, beliefs=True).result.distinct_states > searched(setup).result.distinct_states


def test_beliefs_are_kept_where_lost_is_not_proved_or_a_publisher_republishes():
    assert keeps_beliefs(read_setup(EXAMPLES / "auto-ack.toml"))
    republishing = read_setup(EXAMPLES / "republishing-publisher.toml")
    assert proved_for(republishing, "lost") and keeps_beliefs(republishing)


@pytest.mark.parametrize("change", [
    ("persistent = true", "persistent = false"),
    ("confirms = true\n", ""),
    ("durable = true", "durable = false"),
    ('acks = "manual"\non_failure = "nack-requeue"', 'acks = "automatic"'),
    ('on_failure = "nack-requeue"', 'on_failure = "nack-drop"'),
    ("durable = true", "durable = true\nexclusive = true"),
])
def test_each_condition_of_the_shape_is_needed(change):
    """The covered setup answers "cannot happen"; without any one condition, it is no longer covered and
    a message can be lost (the exploration finds how)."""
    setup = parse_setup(COVERED, "shape.toml")
    assert proved_for(setup, "lost") and lost(COVERED) == CANNOT
    changed = COVERED.replace(*change)
    assert changed != COVERED and proved_for(parse_setup(changed, "shape.toml"), "lost") is None
    assert lost(changed) == "can happen"


def test_a_dead_letter_queue_leaves_the_shape():
    """Dead-lettering is at most once (PC-10 leaves dead-letter targets out): a setup with one is not
    covered, even though this one drops nothing."""
    text = COVERED.replace("durable = true", 'durable = true\ndead_letter = "parked"') + \
        "\n[queues.parked]\ndurable = true\n"
    assert proved_for(parse_setup(text, "shape.toml"), "lost") is None


def test_the_report_and_the_json_say_which_answers_hold_for_every_size():
    code, text = run("check", str(EXAMPLES / "confirms-crash.toml"), "--no-progress", "--no-advice")
    flat = " ".join(text.split())
    assert "\"lost: cannot happen\" is proved for any number of messages, so the search did not look for it" in flat
    assert "copies_conserved and confirmed_survives_crash" in flat
    code, out = run("check", str(EXAMPLES / "confirms-crash.toml"), "--no-progress", "--no-advice", "--json")
    answers = json.loads(out)["answers"]
    assert answers[0]["for_every_size"] == ["copies_conserved", "confirmed_survives_crash"]
    assert all(a["for_every_size"] is None for a in answers[1:])
    code, text = run("check", str(EXAMPLES / "auto-ack.toml"), "--no-progress", "--no-advice")
    assert "No invariant proved for every size implies these answers" in " ".join(text.split())


def test_a_search_cut_short_still_answers_what_the_proof_implies():
    """A search stopped before it decided "lost" answers it "cannot happen" where the proved invariants
    imply it for the setup (they hold in every reachable state), says why, and leaves it undecided
    elsewhere; what the search found stands."""
    setup = parse_setup(COVERED, "shape.toml")
    checked = check_setup(setup, LocalEngine(reductions=("por", "symmetry")),
                          max_states=60)
    assert not checked.result.complete
    first = checked.answers[0]
    # An incomplete search never decides "cannot happen" itself: this one is the proof's.
    assert first.key == "lost" and first.verdict == CANNOT and proved_for(setup, "lost")
    assert all(a.verdict == "undecided" for a in checked.answers[2:])
    unsafe = COVERED.replace("persistent = true", "persistent = false")
    unsafe_setup = parse_setup(unsafe, "shape.toml")
    cut = check_setup(unsafe_setup, LocalEngine(reductions=("por", "symmetry")), max_states=60)
    assert not cut.result.complete and cut.answers[0].verdict != CANNOT and proved_for(unsafe_setup, "lost") is None
    code, text = run("check", str(EXAMPLES / "confirms-crash.toml"), "--no-progress", "--no-advice",
                     "--max-states", "60")
    flat = " ".join(text.split())
    assert "The search stopped at" in flat and "\"lost: cannot happen\" is proved for any number of messages" in flat
    report, verdict = flat.rsplit(" check: ", 1)
    assert (verdict.startswith("undecided: confirms-crash: ") and verdict.endswith("(exit 3)")
            or verdict.startswith("found: confirms-crash: ") and verdict.endswith("(exit 1)")), verdict
    assert ("A smaller setup answers sooner: fewer publishers, consumers, messages or faults, the same "
                         "settings otherwise; a message lost, processed twice or seen out of order there can be here "
                         "too (docs/tutorial/check-your-setup.md, \"When a setup is too large\").") in report
    code, out = run("check", str(EXAMPLES / "confirms-crash.toml"), "--no-progress", "--no-advice", "--json",
                    "--max-states", "60")
    answers = json.loads(out)["answers"]
    assert answers[0]["answer"] == CANNOT and answers[0]["for_every_size"] == ["copies_conserved",
                                                                                "confirmed_survives_crash"]
