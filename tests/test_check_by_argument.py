"""The "cannot happen" answers proved for every size by argument (rabbitproof.check.by_argument): each
condition is needed (a small setup that breaks it, and only it among the argument's conditions, lets the
exhaustive search find the event), each covered setup is answered "cannot happen" by the search too, and
setups drawn at random (seeded) hold every method to the exhaustive search where both answer."""
from __future__ import annotations

import os
import random

import pytest

from rabbitproof.spark_check.engine import LocalEngine
from rabbitproof.spec import actions as A

from rabbitproof.check.answers import DEFAULT_REDUCTIONS, Prepared, check_setup, config_for, machine_for
from rabbitproof.check.by_argument import ARGUMENTS, argued, dead_letter_cycle
from rabbitproof.check.cycles import SetupFairness
from rabbitproof.check.methods import answer_setup
from rabbitproof.check.questions import QUESTIONS, SetupMachine
from rabbitproof.check.setup_file import SetupError, parse_setup
from tests.test_check import EXAMPLES, EXPECTED

CANNOT, CAN = "cannot happen", "can happen"


def setup_text(publishers=({},), consumers=({},), queues=None, faults=()) -> str:
    """A setup: each publisher and consumer a table of its keys (queue "jobs" unless said), the queues
    (name -> keys; by default one durable "jobs"), these faults."""
    queues = queues or {"jobs": {"durable": True}}
    text = ""
    for name, keys in queues.items():
        text += f'[queues."{name}"]\n' + "".join(f"{k} = {_toml(v)}\n" for k, v in keys.items()) + "\n"
    for kind, tables in (("publishers", publishers), ("consumers", consumers)):
        for keys in tables:
            keys = {"queue": "jobs", **keys}
            text += f"[[{kind}]]\n" + "".join(f"{k} = {_toml(v)}\n" for k, v in keys.items()) + "\n"
    consumer_names = [keys.get("name", f"consumer {i + 1}") for i, keys in enumerate(consumers)]
    return text + "[faults]\n" + "".join(_fault_line(f, consumer_names) for f in faults)


def _fault_line(fault: str, consumers: list[str]) -> str:
    """A fault of these tests in the setup file's words: the consumer-only kinds name the consumers."""
    on_consumers = "[" + ", ".join(f'"{n}"' for n in consumers) + "]"
    return {"connection_closed_consumers": f"connection_closed = {on_consumers}\n",
            "host_vanished_consumers": f"host_vanished = {on_consumers}\n"}.get(fault, f"{fault} = true\n")


def _toml(value) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else \
        (f'"{value}"' if isinstance(value, str) else str(value))


def searched(text: str, machine=None):
    """The exhaustive search's answers to the five questions, by key."""
    setup = parse_setup(text, "shape.toml")
    prepared = Prepared(config_for(setup), machine or machine_for(setup, beliefs=True))
    checked = check_setup(setup, LocalEngine(reductions=DEFAULT_REDUCTIONS), prepared=prepared)
    assert checked.result.complete, checked.result.error
    return {a.key: a.verdict for a in checked.answers}


CONFIRMED = {"confirms": True, "persistent": True}
TWO = {**CONFIRMED, "messages": 2}
PREFETCH_1 = {"prefetch": 1}

# question -> (the covered setup, {condition: a setup breaking that condition alone})
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


@pytest.mark.parametrize("question", sorted(DROPS))
def test_a_covered_setup_is_argued_and_the_search_agrees(question):
    covered, _ = DROPS[question]
    setup = parse_setup(covered, "shape.toml")
    assert argued(setup, question) is not None
    assert searched(covered)[question] == CANNOT


# A cycle of dead-letter queues makes the search of even one message run on (ten minutes and more): that
# condition is shown needed by the argument alone (a message rejected without requeue in each queue goes
# round for ever), and its setup is checked to break it and be left uncovered.
SEARCHED = [(q, c) for q in sorted(DROPS) for c in DROPS[q][1] if c != "no_dead_letter_cycle"]


def test_a_dead_letter_cycle_leaves_the_loop_uncovered():
    setup = parse_setup(DROPS["loop"][1]["no_dead_letter_cycle"], "shape.toml")
    assert next(a for a in ARGUMENTS if a.question == "loop").failing(setup) == ("no_dead_letter_cycle",)
    assert argued(setup, "loop") is None


@pytest.mark.parametrize("question, condition", SEARCHED)
def test_each_condition_is_needed(question, condition):
    """Broken alone, among the argument's conditions, the condition leaves the setup uncovered, and the
    exhaustive search finds the event."""
    text = DROPS[question][1][condition]
    setup = parse_setup(text, "shape.toml")
    argument = next(a for a in ARGUMENTS if a.question == question)
    assert argument.failing(setup) == (condition,) or (condition == "no_republish" and condition in
                                                        argument.failing(setup))
    assert argued(setup, question) is None
    assert searched(text)[question] == CAN


def test_a_crash_counts_only_where_it_restores_messages():
    """A crash brings back only persistent messages of durable queues (DU-2, DU-3): with transient
    messages it loses them, and "twice" stays covered; the search agrees."""
    text = setup_text(({"persistent": False},), ({"acks": "automatic"},), {"jobs": {"durable": True}},
                      ("broker_crash",))
    assert argued(parse_setup(text, "shape.toml"), "twice") is not None and searched(text)["twice"] == CANNOT
    restoring = text.replace("persistent = false", "persistent = true")
    assert argued(parse_setup(restoring, "shape.toml"), "twice") is None and searched(restoring)["twice"] == CAN


def test_every_condition_of_every_argument_is_held_to_a_setup_that_breaks_it():
    named = {c.name for a in ARGUMENTS if a.question in DROPS for c in a.conditions}
    assert named == {c for q in DROPS for c in DROPS[q][1]}


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

FAULT_CHOICES = ("channel_closed", "channel_error", "connection_closed_consumers", "host_vanished_consumers",
                 "connection_closed", "host_vanished", "broker_crash", "queue_refuses")


def random_setup(rng: random.Random, small: bool = False) -> str:
    """One or two publishers of one or two messages in all, one or two consumers (three clients at most),
    one queue (a dead-letter queue sometimes), at most one fault: small enough to search in full in
    seconds."""
    publishers = []
    for n in range(1 if small else rng.choice((1, 1, 2))):
        mode = rng.choice(("confirms", "confirms", "transactions", "none"))
        keys = {"persistent": rng.random() < 0.7}
        if mode != "none":
            keys[mode] = True
            if rng.random() < 0.2:
                keys["republish"] = 1
        publishers.append(keys)
    if len(publishers) == 1 and rng.random() < 0.5:
        publishers[0]["messages"] = 2
    consumers = []
    for n in range(rng.choice((1, 1, 2)) if len(publishers) == 1 and not small else 1):
        keys = {"acks": rng.choice(("manual", "manual", "manual", "automatic"))}
        if keys["acks"] == "manual":
            keys["on_failure"] = rng.choice(("none", "none", "nack-requeue", "reject-drop", "close-channel"))
            if rng.random() < 0.2:
                keys["work"] = "before-ack"
        if rng.random() < 0.5:
            keys["prefetch"] = 1
        consumers.append(keys)
    queues = {"jobs": {"durable": rng.random() < 0.7}}
    if rng.random() < 0.2:
        queues = {"jobs": {**queues["jobs"], "dead_letter": "parked"}, "parked": {"durable": True}}
    faults = (rng.choice(FAULT_CHOICES),) if rng.random() < 0.8 else ()
    return setup_text(tuple(publishers), tuple(consumers), queues, faults)


def held_to_the_search(text: str) -> None:
    """Every answer of the three methods (`check`'s road) is the exhaustive search's, where it finished."""
    setup = parse_setup(text, "random.toml")
    road = {a.key: a for a in answer_setup(setup, LocalEngine(reductions=DEFAULT_REDUCTIONS), smaller_seconds=60).answers}
    truth = searched(text)
    for key, a in road.items():
        if a.method in ("proved", "found"):
            assert a.verdict == truth[key], (key, a.method, a.how, text)


SEED = 36


def random_setups(count: int, small: bool = False) -> list[str]:
    """``count`` valid setups drawn with the seed (the same each run); ``small``: one publisher and one
    consumer each."""
    rng = random.Random(SEED)
    out = []
    while len(out) < count:
        text = random_setup(rng, small)
        try:
            parse_setup(text, "random.toml")
        except SetupError:
            continue
        out.append(text)
    return out


@pytest.mark.parametrize("n", range(5))
def test_small_setups_drawn_at_random_get_the_search_s_answers(n):
    """One publisher and one consumer each, in `make test`."""
    held_to_the_search(random_setups(n + 1, small=True)[n])


@pytest.mark.parametrize("n", range(int(os.environ.get("RABBITPROOF_RANDOM_SETUPS", "0"))))
def test_setups_drawn_at_random_get_the_search_s_answers(n):
    """Up to three clients each: RABBITPROOF_RANDOM_SETUPS=40 runs forty (seeded, so the same ones each
    time), some of which take minutes to search."""
    held_to_the_search(random_setups(n + 1)[n])


# --- the examples and the mixed setups ------------------------------------------------------------

MIXED = sorted((EXAMPLES.parent / "tests" / "fixtures" / "mixed_setups").glob("*.toml"))
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


ALL = [EXAMPLES / f"{name}.toml" for name in sorted(EXPECTED)] + MIXED


@pytest.mark.parametrize("path", ALL if os.environ.get("RABBITPROOF_ALL_SETUPS") else MIXED[:2],
                         ids=lambda p: p.stem)
def test_check_s_road_gives_the_search_s_answers(path):
    """`check`'s three methods give every example and mixed setup the answers the exhaustive search gives
    (two mixed setups in `make test`; RABBITPROOF_ALL_SETUPS=1 runs them all)."""
    text = path.read_text()
    setup = parse_setup(text, path.name)
    road = answer_setup(setup, LocalEngine(reductions=DEFAULT_REDUCTIONS), smaller_seconds=60)
    truth = searched(text)
    assert [a.verdict for a in road.answers] == [truth[k] for k in KEYS]
