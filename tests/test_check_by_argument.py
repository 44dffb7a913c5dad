"""The "cannot happen" answers proved for every size by argument (rabbitproof.check.by_argument): each
condition is needed (a small setup that breaks it, and only it among the argument's conditions, lets the
exhaustive search find the event), each covered setup is answered "cannot happen" by the search too, and
setups drawn at random (seeded) hold every method to the exhaustive search where both answer."""
from __future__ import annotations

import pytest

from rabbitproof.spark_check.engine import LocalEngine
from rabbitproof.spec import actions as A

from rabbitproof.check import cross_checks
from rabbitproof.check.answers import DEFAULT_REDUCTIONS, machine_for
from rabbitproof.check.by_argument import ARGUMENTS, argued, dead_letter_cycle
from rabbitproof.check.cross_checks import random_setups, round_robin_setup, setup_text
from rabbitproof.check.methods import answer_setup
from rabbitproof.check.questions import QUESTIONS, SetupMachine
from rabbitproof.check.setup_file import parse_setup
from tests.test_check import EXAMPLES, EXPECTED

CANNOT, CAN = "cannot happen", "can happen"


def searched(text: str, machine=None):
    """The exhaustive search's answers to the five questions, by key (it must finish)."""
    verdicts, stopped = cross_checks.searched(parse_setup(text, "shape.toml"), machine)
    assert stopped is None, stopped
    return verdicts


CONFIRMED = {"confirms": True, "persistent": True}
TWO = {**CONFIRMED, "messages": 2}
PREFETCH_1 = {"prefetch": 1}

# argument (its key: the question's, or its own name) -> (the covered setup, {condition: a setup breaking
# that condition alone})
TX = {"transactions": True}
TRANSIENT = {"jobs": {}}
DROPS = {
    "lost": (setup_text((TX,), ({},), TRANSIENT, ("connection_closed",)), {
        "confirmed_or_committed": setup_text(({},), ({},), TRANSIENT, ("connection_closed",)),
        "no_crash": setup_text((TX,), ({},), TRANSIENT, ("broker_crash",)),
        "shared_no_dead_letter": setup_text((TX,), ({},), {"jobs": {"exclusive": True}},
                                            ("connection_closed_consumers",)),
        "manual_never_drops": setup_text((TX,), ({"on_failure": "nack-drop"},), TRANSIENT, ("connection_closed",)),
    }),
    "loop": (setup_text((CONFIRMED,), ({},)), {
        "no_requeue_on_failure": setup_text((CONFIRMED,), ({"on_failure": "nack-requeue"},)),
        "no_close_on_failure": setup_text((CONFIRMED,), ({"on_failure": "close-channel"},)),
        "no_dead_letter_cycle": setup_text(
            (CONFIRMED,), ({"on_failure": "reject-drop"}, {"queue": "parked", "on_failure": "reject-drop"}),
            {"jobs": {"durable": True, "dead_letter": "parked"}, "parked": {"durable": True, "dead_letter": "jobs"}}),
    }),
    "loop-round-robin": (setup_text((CONFIRMED,), ({"on_failure": "nack-requeue"}, {})), {
        "steady_beside_each_requeuer": setup_text((CONFIRMED,), ({"on_failure": "nack-requeue"}, {"polls": True})),
        "requeuers_subscribe": setup_text((CONFIRMED,), ({"on_failure": "nack-requeue", "polls": True}, {})),
        "no_dead_letter_cycle": setup_text(
            (CONFIRMED,), ({"on_failure": "reject-drop"}, {"queue": "parked", "on_failure": "reject-drop"}),
            {"jobs": {"durable": True, "dead_letter": "parked"}, "parked": {"durable": True, "dead_letter": "jobs"}}),
    }),
    "twice": (setup_text((CONFIRMED,), ({},), faults=("channel_closed", "queue_refuses")), {
        "no_fault_loses_an_ack": setup_text((CONFIRMED,), ({},), faults=("connection_closed_consumers",)),
        "work_before_ack_never_returned": setup_text((CONFIRMED,), ({"work": "before-ack"},),
                                                     faults=("channel_closed",)),
        "no_republish": setup_text(({**CONFIRMED, "republish": 1},), ({},), faults=("connection_closed",)),
    }),
    "order": (setup_text((TWO,), (PREFETCH_1, PREFETCH_1), faults=("queue_refuses",)), {
        "no_republish": setup_text(({**TWO, "republish": 1},), ({},), faults=("queue_refuses",)),
        "no_requeue_at_all": setup_text((TWO,), ({"on_failure": "nack-requeue"},)),
        "no_dead_letter": setup_text(
            (TWO,), ({**PREFETCH_1, "on_failure": "nack-drop"}, {**PREFETCH_1, "on_failure": "nack-drop"},
                     {"queue": "parked"}),
            {"jobs": {"durable": True, "dead_letter": "parked"}, "parked": {"durable": True}}),
    }),
}


def argument_named(key: str):
    return next(a for a in ARGUMENTS if a.key == key)


@pytest.mark.parametrize("key", sorted(DROPS))
def test_a_covered_setup_is_argued_and_the_search_agrees(key):
    covered, _ = DROPS[key]
    setup = parse_setup(covered, "shape.toml")
    question = argument_named(key).question
    assert argument_named(key).covers(setup) and argued(setup, question) is not None
    assert searched(covered)[question] == CANNOT


# A cycle of dead-letter queues makes the search of even one message run on (ten minutes and more): that
# condition is shown needed by the argument alone (a message rejected without requeue in each queue goes
# round for ever), and its setup is checked to break it and be left uncovered.
SEARCHED = [(q, c) for q in sorted(DROPS) for c in DROPS[q][1] if c != "no_dead_letter_cycle"]


def test_a_dead_letter_cycle_leaves_the_loop_uncovered():
    for key in ("loop", "loop-round-robin"):
        setup = parse_setup(DROPS[key][1]["no_dead_letter_cycle"], "shape.toml")
        assert argument_named(key).failing(setup) == ("no_dead_letter_cycle",)
        assert argued(setup, "loop") is None


@pytest.mark.parametrize("key, condition", SEARCHED)
def test_each_condition_is_needed(key, condition):
    """Broken alone, among the argument's conditions, the condition leaves the setup uncovered, and the
    exhaustive search finds the event."""
    text = DROPS[key][1][condition]
    setup = parse_setup(text, "shape.toml")
    argument = argument_named(key)
    assert argument.failing(setup) == (condition,) or (condition == "no_republish" and condition in
                                                        argument.failing(setup))
    assert argued(setup, argument.question) is None
    assert searched(text)[argument.question] == CAN


def test_a_crash_counts_only_where_it_restores_messages():
    """A crash brings back only persistent messages of durable queues (DU-2, DU-3): with transient
    messages it loses them, and "twice" stays covered; the search agrees."""
    text = setup_text(({"persistent": False},), ({"acks": "automatic"},), {"jobs": {"durable": True}},
                      ("broker_crash",))
    assert argued(parse_setup(text, "shape.toml"), "twice") is not None and searched(text)["twice"] == CANNOT
    restoring = text.replace("persistent = false", "persistent = true")
    assert argued(parse_setup(restoring, "shape.toml"), "twice") is None and searched(restoring)["twice"] == CAN


def test_every_condition_of_every_argument_is_held_to_a_setup_that_breaks_it():
    assert {a.key for a in ARGUMENTS} - {"waits"} == set(DROPS)
    for key, (_, breaking) in DROPS.items():
        assert {c.name for c in argument_named(key).conditions} == set(breaking)


def test_without_fair_confirms_a_publisher_can_wait_for_ever():
    """The waits argument rests on fairness: with the broker's confirms left out of the fair classes (free
    never to happen), the search finds a publisher waiting for ever, in a setup the argument covers."""
    text = setup_text((CONFIRMED,), ())
    setup = parse_setup(text, "shape.toml")
    assert argued(setup, "waits") is not None and searched(text)["waits"] == CANNOT

    class Unfair(SetupMachine):
        def fairness(self, config):
            fair = super().fairness(config)
            return fair._replace(kinds={k: v for k, v in fair.kinds.items() if k is not A.BrokerConfirm})

    base = machine_for(setup, beliefs=True)
    unfair = Unfair(**{f: getattr(base, f) for f in base.__dataclass_fields__})
    assert searched(text, unfair)["waits"] == CAN


def test_a_dead_letter_cycle_is_seen():
    cyclic = parse_setup(DROPS["loop"][1]["no_dead_letter_cycle"], "shape.toml")
    assert dead_letter_cycle(cyclic)
    assert not dead_letter_cycle(parse_setup(DROPS["order"][1]["no_dead_letter"], "shape.toml"))


# --- setups drawn at random ------------------------------------------------------------------------

def assert_held_to_the_search(setup, name: str) -> None:
    """Every answer `check` proves or finds for ``setup`` is the exhaustive search's, and there is one."""
    held = cross_checks.held_to_the_search(setup, name)
    assert held.failures == [] and held.unknown == []
    assert held.checks > 0 and held.checks + held.by_search == len(QUESTIONS)


@pytest.mark.parametrize("n", range(5))
def test_small_setups_drawn_at_random_get_the_search_s_answers(n):
    """One publisher and one consumer each, in `make test`; `rabbitproof verify --part setups` holds larger
    ones (up to three clients) to the search."""
    assert_held_to_the_search(parse_setup(random_setups(n + 1, small=True)[n], "random.toml"), f"random {n}")


@pytest.mark.parametrize("n", range(4))
def test_a_requeuer_beside_a_steady_consumer_drawn_at_random_gets_the_search_s_answers(n):
    """A consumer that requeues on failure beside one that never does, one message, settings and a fault
    drawn at random: the loop's round-robin argument covers each, and every answer is the search's
    (`rabbitproof verify --part setups` holds larger ones)."""
    setup = parse_setup(random_setups(n + 1, small=True, draw=round_robin_setup)[n], "round-robin.toml")
    assert argument_named("loop-round-robin").covers(setup)
    assert_held_to_the_search(setup, f"round robin {n}")


def test_an_answer_that_is_not_the_search_s_fails_the_comparison(monkeypatch):
    """The comparison can fail: against a search that answered every question the other way, each answer
    proved or found is a failure, named with its method."""
    setup = parse_setup(random_setups(1, small=True)[0], "random.toml")
    real = cross_checks.searched

    def the_other_way(setup, machine=None):
        verdicts, stopped = real(setup, machine)
        return {k: CAN if v == CANNOT else CANNOT for k, v in verdicts.items()}, stopped
    monkeypatch.setattr(cross_checks, "searched", the_other_way)
    held = cross_checks.held_to_the_search(setup, "flipped")
    assert held.checks > 0 and len(held.failures) == held.checks
    assert all(("(proved" in line or "(found" in line) and "the search:" in line for line in held.failures)


def test_setups_drawn_at_random_are_the_same_every_run():
    assert random_setups(12) == random_setups(12) and len(set(random_setups(12))) == 12
    assert random_setups(3) == random_setups(12)[:3]


# --- the examples and the mixed setups ------------------------------------------------------------

MIXED = sorted(cross_checks.MIXED.glob("*.toml"))
KEYS = [q.key for q in QUESTIONS]


def test_every_argued_answer_of_an_example_is_the_pinned_one():
    argued_any = 0
    for name, answers in EXPECTED.items():
        setup = parse_setup((EXAMPLES / f"{name}.toml").read_text(), f"{name}.toml")
        for key, verdict in zip(KEYS, answers):
            if argued(setup, key) is not None:
                argued_any += 1
                assert verdict == CANNOT, (name, key)
    assert argued_any > len(EXPECTED)           # most examples have several answers argued


@pytest.mark.parametrize("path", MIXED[:2], ids=lambda p: p.stem)
def test_check_s_road_gives_the_search_s_answers(path):
    """`check`'s three methods give a mixed setup the answers the exhaustive search gives (two in `make
    test`; `rabbitproof verify --part setups` holds every example and mixed setup to the search)."""
    text = path.read_text()
    setup = parse_setup(text, path.name)
    road = answer_setup(setup, LocalEngine(reductions=DEFAULT_REDUCTIONS), smaller_seconds=60)
    truth = searched(text)
    assert [a.verdict for a in road.answers] == [truth[k] for k in KEYS]
    assert_held_to_the_search(setup, path.stem)
