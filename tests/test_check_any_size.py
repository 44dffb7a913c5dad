"""Setups larger than the exhaustive search takes on (setups/larger/, written from
RabbitMQ's guide, each with its expected answers in a comment): every answer with how it was obtained,
and each "can happen" found in a smaller setup replayed, step by step, in the larger setup's own machine."""
from __future__ import annotations

import re

import pytest

from rabbitproof.spark_check.engine import LocalEngine

from rabbitproof.check.answers import DEFAULT_REDUCTIONS, machine_for
from rabbitproof.check.cross_checks import LARGER, fails_in_full, held_to_the_guide
from rabbitproof.check.methods import answer_setup, too_large
from rabbitproof.check.questions import QUESTIONS
from rabbitproof.check.setup_file import parse_setup, read_setup
from rabbitproof.check.setup_model import to_config
from rabbitproof.check.smaller_setups import Smaller, replay, search_smaller, smaller_setups

# The fixtures `make test` checks (seconds each); `rabbitproof verify --part setups` checks them all.
QUICK = ("fire-and-forget-web-servers", "web-servers-work-queue", "requeueing-workers")
NAMES = sorted(p.stem for p in LARGER.glob("*.toml"))


@pytest.mark.parametrize("name", QUICK)
def test_a_larger_setup_gets_the_guide_s_answers_without_the_search(name):
    """Each answer the guide's, proved or found (no exhaustive search), each found one replayed."""
    held = held_to_the_guide(LARGER / f"{name}.toml")
    assert held.failures == [] and held.checks == len(QUESTIONS)


def test_an_answer_that_is_not_the_guide_s_fails(tmp_path):
    """The comparison with the guide can fail: a comment expecting "twice cannot" where `check` finds an
    execution, or expecting nothing of a question."""
    text = (LARGER / "web-servers-work-queue.toml").read_text()
    assert re.search(r"twice can\b", text)
    wrong = tmp_path / "wrong.toml"
    wrong.write_text(re.sub(r"twice can\b", "twice cannot", text))
    held = held_to_the_guide(wrong)
    assert held.checks == len(QUESTIONS) and len(held.failures) == 1 and "wrong: twice: can happen (found" in \
        held.failures[0] and held.failures[0].endswith("the guide: cannot happen")
    silent = tmp_path / "silent.toml"
    silent.write_text("\n".join(l for l in text.splitlines() if not l.startswith("# Expected:")))
    assert "does not answer every question" in held_to_the_guide(silent).failures[0]


def test_the_fixtures_are_larger_than_the_search_takes_on_but_one():
    large = {name for name in NAMES if too_large(read_setup(LARGER / f"{name}.toml"))}
    assert large == set(NAMES) - {"two-publishers-crash-and-lost-connection"}


def assert_fails_in_full(setup, key: str, trace) -> None:
    """The trace is an execution of the setup's own machine that ends with the question's property false."""
    assert fails_in_full(setup, key, trace) == ""


def test_a_trace_that_is_not_the_setup_s_does_not_replay():
    setup = parse_setup(WORK_QUEUE, "work.toml")
    found = search_smaller(setup, ("twice",), 60).found["twice"]
    assert "is not one the setup's machine allows" in fails_in_full(setup, "twice", replace_step(found.trace))
    assert fails_in_full(setup, "order", found.trace) == \
        "the question's property still holds where the execution ends"


def replace_step(trace):
    """``trace`` with its first step's action renamed to one no machine takes."""
    from dataclasses import replace
    first = replace(trace.steps[0], action="do what no client does")
    return replace(trace, steps=(first,) + trace.steps[1:])


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


def test_smaller_setups_that_ran_out_of_time_say_so_and_what_gives_them_more():
    """A limit no search meets (1e-9 s): nothing is found, and the reason says the time ran out, not that
    no smaller setup shows the event."""
    setup = parse_setup(WORK_QUEUE, "work.toml")
    searched = search_smaller(setup, ("twice", "order"), 1e-9)
    assert searched.found == {} and searched.setups == 0
    assert searched.said == ["the smaller setups' searches took their 1e-09 s before the larger ones were searched "
                             "(--time-limit gives them more)"]


def test_an_answer_left_undecided_for_lack_of_time_says_so():
    setup = read_setup(LARGER / "web-servers-work-queue.toml")
    checked = answer_setup(setup, LocalEngine(reductions=DEFAULT_REDUCTIONS), time_limit=1e-9)
    by_key = {a.key: a for a in checked.answers}
    assert [by_key[k].method for k in ("lost", "loop", "waits")] == ["proved"] * 3
    for key in ("twice", "order"):
        assert by_key[key].method == "undecided" and "no smaller setup searched showed it; the smaller setups' " \
            "searches took their 1e-09 s before the larger ones were searched (--time-limit gives them more); " \
            "to try: run the search longer (--time-limit)" in by_key[key].how


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
