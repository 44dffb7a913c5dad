"""`rabbitproof check`'s ``budgets`` reduction (rabbitproof.check.spent_budgets): a twin that spent less
can do everything the other can, with the same answers, checked on every reachable state of setups
with each fault; and the reduction changes no answer of two-publisher setups with each fault."""
from __future__ import annotations

import pytest

from rabbitproof.spark_check.engine import LocalEngine

from rabbitproof.check.answers import DEFAULT_REDUCTIONS, check_setup, config_for, machine_for
from rabbitproof.check.questions import LIVENESS, PROPERTIES, Watched
from rabbitproof.check.setup_file import parse_setup
from rabbitproof.check.spent_budgets import NOTHING_SPENT, SpentBudgets
from tests.test_reductions_symmetry import TWO_PUBLISHERS

ONE_OF_EACH = """
[queues.jobs]
durable = true

[[publishers]]
name = "web"
queue = "jobs"
confirms = true
persistent = true

[[consumers]]
name = "worker"
queue = "jobs"
{consumer}
[faults]
{faults}
"""

# (consumer settings, faults): every fault, and the programs' own closes.
FAULTS = [
    ("prefetch = 1", "broker_crash = true\nconnection_closed = true"),
    ("prefetch = 1", "host_vanished = true"),
    ('prefetch = 1\non_failure = "close-channel"', "channel_closed = true\nbroker_crash = true"),
    ('prefetch = 1\non_failure = "nack-requeue"', "channel_error = true\nconnection_closed = [\"worker\"]"),
    ("polls = true", "queue_refuses = true\nhost_vanished = [\"worker\"]"),
]


def reachable(machine, config):
    """Every state of the check machine reachable from the start, in the form the engines keep
    (``canonical``: delivery tags renumbered, so that a requeue loop closes), breadth first."""
    frontier = [machine.canonical(s) for s in machine.initial_states(config)]
    seen = set(frontier)
    while frontier:
        yield from frontier
        nxt = []
        for x in frontier:
            for a in machine.enabled(x, config):
                y = machine.canonical(machine.step(x, a)[0])
                if y not in seen:
                    seen.add(y)
                    nxt.append(y)
        frontier = nxt


def spent(watched: Watched) -> tuple:
    return SpentBudgets.split(watched)[1]


def less(a: tuple, b: tuple) -> tuple:
    return tuple(y - x for x, y in zip(a, b))


@pytest.mark.parametrize("consumer, faults", FAULTS)
def test_a_twin_with_nothing_spent_can_do_all_the_other_can_and_answers_alike(consumer, faults):
    """(1) of the module's argument, on every reachable state y with a budget spent and its twin x with
    none: each step y takes, x takes too, to twins that spent alike in that step; x's other steps are
    free never to happen (no fair class); the fair classes enabled, the questions and the liveness facts
    are the same."""
    setup = parse_setup(ONE_OF_EACH.format(consumer=consumer, faults=faults), "each.toml")
    machine, config = machine_for(setup), config_for(setup)
    fairness = machine.fairness(config)
    split = SpentBudgets.split
    checked = 0
    for y in reachable(machine, config):
        rest, used = split(y)
        if not any(used):
            continue
        x = Watched(y.spec._replace(used=NOTHING_SPENT), y.ghost)
        assert split(x) == (rest, tuple(NOTHING_SPENT))
        mine, twins = machine.enabled(y, config), machine.enabled(x, config)
        assert set(mine) <= set(twins)
        assert all(fairness.class_of(a) < 0 for a in set(twins) - set(mine))
        for a in mine:
            after_y, after_x = machine.step(y, a)[0], machine.step(x, a)[0]
            assert split(after_y)[0] == split(after_x)[0]
            assert less(spent(y), spent(after_y)) == less(spent(x), spent(after_x))
        assert [p.holds(x) for p in PROPERTIES] == [p.holds(y) for p in PROPERTIES]
        assert [(p.stays(x), p.recurs(x)) for p in LIVENESS] == [(p.stays(y), p.recurs(y)) for p in LIVENESS]
        checked += 1
    assert checked > 100


FAULT_LINES = ["broker_crash = true", "connection_closed = true", "host_vanished = true",
               "channel_error = true", "queue_refuses = true"]


@pytest.mark.parametrize("faults", FAULT_LINES)
def test_two_publishers_answer_the_same_with_the_reduction_and_without(faults):
    """Two confirmed publishers, a consumer with prefetch 1, each fault: the same answers with no
    reduction, with ``budgets`` alone and with the default; fewer states with ``budgets`` alone, where a
    fault can leave a state that another execution reaches without it."""
    setup = parse_setup(TWO_PUBLISHERS + f"\n[faults]\n{faults}\n", "two.toml")
    full = check_setup(setup, LocalEngine())
    alone = check_setup(setup, LocalEngine(reductions=("budgets",)))
    default = check_setup(setup, LocalEngine(reductions=DEFAULT_REDUCTIONS))
    assert [a.verdict for a in alone.answers] == [a.verdict for a in full.answers] == \
        [a.verdict for a in default.answers]
    assert alone.result.distinct_states <= full.result.distinct_states
    if faults != "queue_refuses = true":        # a refused publish leaves its message nowhere, as no execution without it does: no twin
        assert alone.result.distinct_states < full.result.distinct_states
    assert "budgets" in default.result.reductions
