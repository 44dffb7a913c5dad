"""Setups larger than the exhaustive search takes on (tests/fixtures/larger_setups, written from
RabbitMQ's guide, each with its expected answers in a comment): every answer with how it was obtained,
and each "can happen" found in a smaller setup replayed, step by step, in the larger setup's own machine."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from rabbitproof.spark_check.engine import LocalEngine

from rabbitproof.check.answers import DEFAULT_REDUCTIONS, machine_for
from rabbitproof.check.methods import answer_setup, too_large
from rabbitproof.check.questions import QUESTIONS
from rabbitproof.check.setup_file import parse_setup, read_setup
from rabbitproof.check.setup_model import to_config
from rabbitproof.check.smaller_setups import Smaller, replay, search_smaller, smaller_setups

from tests.test_check_larger_loops import assert_fair_loop

LARGER = Path(__file__).resolve().parent / "fixtures" / "larger_setups"
TITLES = {"lost": "lost", "twice": "twice", "order": "order", "loop": "loop", "waits": "waits"}
# The fixtures `make test` checks (seconds each); RABBITPROOF_LARGER_SETUPS=1 checks them all.
QUICK = ("fire-and-forget-web-servers", "web-servers-work-queue", "requeueing-workers")


def expected(path: Path) -> dict[str, str]:
    """The answers the fixture's comment gives, from RabbitMQ's guide: ``# Expected: lost cannot, ...``."""
    line = next(l for l in path.read_text().splitlines() if l.startswith("# Expected:"))
    return {key: ("can happen" if word == "can" else "cannot happen")
            for key, word in re.findall(r"(\w+) (can|cannot)\b", line)}


NAMES = sorted(p.stem for p in LARGER.glob("*.toml"))
CHOSEN = NAMES if os.environ.get("RABBITPROOF_LARGER_SETUPS") else list(QUICK)


@pytest.mark.parametrize("name", CHOSEN)
def test_a_larger_setup_gets_the_guide_s_answers_without_the_search(name):
    path = LARGER / f"{name}.toml"
    setup = read_setup(path)
    checked = answer_setup(setup, LocalEngine(reductions=DEFAULT_REDUCTIONS))
    assert checked.result is None                       # no exhaustive search ran
    want = expected(path)
    assert set(want) == {q.key for q in QUESTIONS}
    for a in checked.answers:
        assert a.verdict == want[a.key], (a.key, a.how)
        assert a.method == ("found" if a.happens else "proved")
        if a.method == "found" and a.key == "loop":         # a lasso, rebuilt and checked in this setup
            assert a.trace is not None and "checked there" in a.how
            assert_fair_loop(setup, a.trace)
        elif a.method == "found":
            assert a.trace is not None and "replayed in this one" in a.how
            assert_fails_in_full(setup, a.key, a.trace)


def test_the_fixtures_are_larger_than_the_search_takes_on_but_one():
    large = {name for name in NAMES if too_large(read_setup(LARGER / f"{name}.toml"))}
    assert large == set(NAMES) - {"two-publishers-crash-and-lost-connection"}


def assert_fails_in_full(setup, key: str, trace) -> None:
    """Step the trace in the setup's own machine, each step one it allows (matched by its text), and
    check the question's property fails at the end."""
    config, machine = to_config(setup), machine_for(setup, beliefs=True)
    (state,) = machine.initial_states(config)
    for step in trace.steps:
        taken = [after for a in machine.enabled(state, config) if str(a) == step.action
                 for after, frames in [machine.step(state, a)] if tuple(str(f) for f in frames) == step.frames]
        assert taken, f"step {step.number} ({step.action}) is not one the setup's machine allows"
        state = taken[0]
    prop = next(q.prop for q in QUESTIONS if q.key == key)
    assert not prop.holds(state)


WORK_QUEUE = """
[queues.jobs]
durable = true

[[publishers]]
name = "web-1"
queue = "jobs"
confirms = true
persistent = true
messages = 2

[[publishers]]
name = "web-2"
queue = "jobs"
confirms = true
persistent = true
messages = 2

[[consumers]]
name = "a"
queue = "jobs"
prefetch = 1

[[consumers]]
name = "b"
queue = "jobs"
prefetch = 1

[faults]
connection_closed = ["a", "b"]
"""


def test_a_trace_replays_only_as_what_it_shows():
    """The replay checks the question's property, not only the steps: the execution that shows a
    message processed twice does not pass for one out of order."""
    setup = parse_setup(WORK_QUEUE, "work.toml")
    searched = search_smaller(setup, ("twice",), 60)
    found = searched.found["twice"]
    assert found.smaller.size < (4, 2, 1, 2)
    assert_fails_in_full(setup, "twice", found.trace)
    small = found.smaller
    assert replay(small, trace_in_smaller(small, "twice"), "twice") is not None
    assert replay(small, trace_in_smaller(small, "twice"), "order") is None


def trace_in_smaller(small: Smaller, key: str):
    """The smaller setup's own execution for ``key``, as its search gives it."""
    from rabbitproof.check.answers import ACTION_TYPES
    from rabbitproof.check.questions import PROPERTIES
    from rabbitproof.check.setup_model import publishes
    from rabbitproof.spark_check.reductions import build_reduction

    config = to_config(small.setup, prefetch_for=publishes(small.full))
    machine = machine_for(small.setup, beliefs=True)
    engine = LocalEngine(reductions=DEFAULT_REDUCTIONS)
    build_reduction(engine.reductions, machine, config)
    result = engine.explore(machine, config, PROPERTIES, action_types=ACTION_TYPES)
    name = next(q.prop.name for q in QUESTIONS if q.key == key)
    return next(p.trace for p in result.properties if p.name == name)


def test_smaller_setups_come_smallest_first_once_each_and_keep_an_exclusive_queue_s_consumer():
    setup = parse_setup(WORK_QUEUE, "work.toml")
    smaller = smaller_setups(setup)
    sizes = [s.size for s in smaller]
    assert sizes == sorted(sizes) and sizes[0] == (1, 0, 0, 1)
    # The two publishers are alike, and so are the two consumers: each choice once.
    assert len({(tuple(n for _, n in s.publishers), len(s.consumers), s.faults) for s in smaller}) == len(smaller)
    assert all(s.publishers[0][0] == 0 and s.consumers in ((), (0,), (0, 1)) for s in smaller)
    exclusive = WORK_QUEUE.replace("[queues.jobs]\ndurable = true", "[queues.jobs]\ndurable = true\n\n"
                                   "[queues.replies]\nexclusive = true") + \
        '\n[[consumers]]\nname = "caller"\nqueue = "replies"\n'
    setup = parse_setup(exclusive.replace('[faults]\nconnection_closed = ["a", "b"]\n', "")
                        + '[faults]\nconnection_closed = ["a", "b"]\n', "x.toml")
    assert all(2 in s.consumers for s in smaller_setups(setup))


def test_the_file_takes_ten_publishers_ten_consumers_and_fifty_messages():
    text = "[queues.jobs]\n" + "".join(f'[[publishers]]\nname = "p{i}"\nqueue = "jobs"\nmessages = 5\n'
                                        for i in range(10)) + \
        "".join(f'[[consumers]]\nname = "c{i}"\nqueue = "jobs"\n' for i in range(10))
    setup = parse_setup(text, "big.toml")
    assert sum(p.messages for p in setup.publishers) == 50 and too_large(setup).startswith("20 clients")
    with pytest.raises(Exception, match="11 publishers: at most 10 can be checked"):
        parse_setup(text + '[[publishers]]\nname = "p10"\nqueue = "jobs"\n', "big.toml")
    with pytest.raises(Exception, match="at most 50 can be checked"):
        parse_setup(text.replace("messages = 5", "messages = 6", 1), "big.toml")
