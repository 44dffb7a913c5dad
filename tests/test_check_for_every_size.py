"""Answers that hold for every size (rabbitproof.check.for_every_size): the invariants named are proved
ones, the shape they cover agrees with every pinned example, each condition of the shape is needed (drop
one and a crash loses a message), and the report and its JSON say which answers reach further than the
bounds."""
from __future__ import annotations

import json

import pytest

from model.invariants import HELPERS, INVARIANTS
from spark_check.engine import LocalEngine

from rabbitproof.check.answers import check_setup
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
consumer_connection_lost = true
"""


def test_the_invariants_named_are_proved_ones_not_helpers():
    for implied in IMPLIED:
        assert implied.invariants and all(name in INVARIANTS and name not in HELPERS for name in implied.invariants)


def test_every_covered_example_answers_cannot_happen_and_the_unsafe_ones_are_not_covered():
    covered = {name for name in EXPECTED if proved_for(read_setup(EXAMPLES / f"{name}.toml"), "lost")}
    assert all(EXPECTED[name][0] == CANNOT for name in covered)
    assert {"safe-pipeline", "confirms-crash", "republishing-publisher"} <= covered
    assert not covered & {"fire-and-forget", "auto-ack", "reply-queue", "transactional", "dead-letter"}


def lost(text: str) -> str:
    checked = check_setup(parse_setup(text, "shape.toml"), LocalEngine(reductions=("por", "symmetry")))
    assert checked.result.complete
    return checked.answers[0].verdict


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
    assert "\"lost: cannot happen\" holds for any number of messages too" in flat
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
    code, out = run("check", str(EXAMPLES / "confirms-crash.toml"), "--no-progress", "--no-advice", "--json",
                    "--max-states", "60")
    answers = json.loads(out)["answers"]
    assert answers[0]["answer"] == CANNOT and answers[0]["for_every_size"] == ["copies_conserved",
                                                                                "confirmed_survives_crash"]
