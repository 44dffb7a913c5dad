"""A requeue loop of a smaller setup, rebuilt in the user's larger setup (rabbitproof.check.larger_loops):
each lasso it answers with is stepped again here in the larger setup's own machine and its fairness
checked by this file's own count, the smaller setup's lasso run as it is in the larger one is refused as
unfair (the clients it lacks would have to keep acting), and a broken lasso is refused."""
from __future__ import annotations

from dataclasses import replace

from rabbitproof.spark_check.engine import LocalEngine
from rabbitproof.spark_check.results import Trace, TraceStep

from rabbitproof.check import cross_checks
from rabbitproof.check.answers import DEFAULT_REDUCTIONS, check_setup, machine_for
from rabbitproof.check.larger_loops import _loop_question, check_lasso, full_lasso, search_loop
from rabbitproof.check.methods import answer_setup, too_large
from rabbitproof.check.setup_file import parse_setup, read_setup
from rabbitproof.check.setup_model import publishes, to_config
from rabbitproof.check.smaller_setups import _mapped, step_as

WORKERS = cross_checks.LARGER / "requeueing-workers.toml"


def assert_fair_loop(setup, trace: Trace) -> None:
    """Step ``trace`` in ``setup``'s machine from its initial state (each step one the machine enables, by
    its text and frames), and check the cycle: back where it began (but for tag numbers), a message handed
    out unprocessed in it, and each fair class (the search's grouping) enabled all along it taken in it."""
    config, machine = to_config(setup), machine_for(setup, beliefs=True)
    (state,) = machine.initial_states(config)
    states, actions = [state], []
    for step in trace.steps:
        taken = [(a, after) for a in machine.enabled(state, config) if str(a) == step.action
                 for after, frames in [machine.step(state, a)] if tuple(str(f) for f in frames) == step.frames]
        assert taken, f"step {step.number} ({step.action}) is not one the setup's machine allows"
        action, state = taken[0]
        actions.append(action)
        states.append(state)
    k = trace.cycle_start
    assert k is not None and k < len(trace.steps)
    assert machine.canonical(states[-1]) == machine.canonical(states[k])
    loop = _loop_question().live
    assert any(loop.recurs(s) for s in states[k:-1])
    fair = machine.fairness(config)
    taken = {fair.class_of(a) for a in actions[k:]}
    always = set.intersection(*({fair.class_of(a) for a in machine.enabled(s, config)} - {-1} for s in states[k:-1]))
    assert always <= taken, [fair.classes[c] for c in always - taken]


def test_the_requeueing_workers_loop_is_found_and_is_a_fair_loop_of_their_setup():
    setup = read_setup(WORKERS)
    assert too_large(setup)
    searched = search_loop(setup, 120.0)
    assert searched.found is not None, searched.said
    assert check_lasso(setup, searched.found.trace) == ""
    assert_fair_loop(setup, searched.found.trace)
    checked = answer_setup(setup, LocalEngine(reductions=DEFAULT_REDUCTIONS))
    loop = next(a for a in checked.answers if a.key == "loop")
    assert loop.happens and loop.method == "found" and "checked there" in loop.how
    assert_fair_loop(setup, loop.trace)


def _as_it_is(setup, smaller, trace: Trace) -> Trace:
    """The smaller setup's lasso stepped in the larger setup's machine as it is: the clients it lacks idle."""
    small_config = to_config(smaller.setup, prefetch_for=publishes(setup))
    small_machine = machine_for(smaller.setup, beliefs=True)
    config, machine = to_config(setup), machine_for(setup, beliefs=True)
    (small,) = small_machine.initial_states(small_config)
    (big,) = machine.initial_states(config)
    steps = []
    for step in trace.steps:
        action, small = step_as(small_machine, small_config, small, step)
        action = _mapped(action, smaller.connections())
        big, frames = machine.step(big, action)
        steps.append(TraceStep.of(step.number, action, frames, step.fused))
    return Trace(tuple(steps), "", trace.cycle_start)


def test_the_smaller_setup_s_loop_as_it_is_is_not_fair_in_the_larger_one():
    """What the module's docstring argues: the extra publishers, idle, could publish all along the cycle."""
    setup = read_setup(WORKERS)
    from rabbitproof.check.smaller_setups import smaller_setups
    from rabbitproof.check.answers import ACTION_TYPES
    from rabbitproof.spark_check.reductions import build_reduction
    smaller = next(s for s in smaller_setups(setup) if s.consumers and not s.faults)
    config = to_config(smaller.setup, name="smaller", prefetch_for=publishes(setup))
    machine = machine_for(smaller.setup, beliefs=True)
    engine = LocalEngine(reductions=DEFAULT_REDUCTIONS)
    build_reduction(engine.reductions, machine, config)
    live = _loop_question().live
    result = engine.explore(machine, config, (), action_types=ACTION_TYPES, liveness=(live,))
    small_trace = next(p for p in result.properties if p.name == live.name).trace
    naive = _as_it_is(setup, smaller, small_trace)
    why = check_lasso(setup, naive)
    assert why.startswith("the cycle is not fair"), why
    rebuilt = full_lasso(smaller, small_trace)
    assert rebuilt is not None and check_lasso(setup, rebuilt) == ""


def test_a_broken_lasso_is_refused():
    setup = read_setup(WORKERS)
    trace = search_loop(setup, 120.0).found.trace
    short = Trace(trace.steps[:-1], "", trace.cycle_start)
    assert check_lasso(setup, short) == "the cycle does not come back to the state it started from"
    bad = Trace(trace.steps[:3] + (replace(trace.steps[3], action="nack tag 99 requeue=True"),) + trace.steps[4:],
                "", trace.cycle_start)
    assert "is not one the setup's machine takes there" in check_lasso(setup, bad)
    assert check_lasso(setup, Trace(trace.steps, "", None)) == "the trace has no cycle"


def two_workers(a: str, b: str, publishers: tuple[str, ...] = ("p",), messages: int = 2) -> str:
    """Publishers of confirmed persistent messages to one durable queue, and two workers with prefetch 1
    that fail as ``a`` and ``b`` say."""
    text = "[queues.jobs]\ndurable = true\n"
    for name in publishers:
        text += (f'\n[[publishers]]\nname = "{name}"\nqueue = "jobs"\nconfirms = true\npersistent = true\n'
                 f"messages = {messages}\n")
    for name, failure in (("a", a), ("b", b)):
        text += f'\n[[consumers]]\nname = "{name}"\nqueue = "jobs"\nprefetch = 1\non_failure = "{failure}"\n'
    return text


def test_a_loop_built_from_a_smaller_setup_is_one_the_exhaustive_search_finds_too():
    """Where the search takes the setup on, the two agree: a loop rebuilt this way is one the search finds,
    and where a second consumer never fails (the queue's round-robin hands it the message), neither finds one."""
    for a, b, loops in (("nack-requeue", "nack-requeue", True), ("nack-requeue", "none", False)):
        setup = parse_setup(two_workers(a, b), "small.toml")
        assert not too_large(setup)
        exhaustive = check_setup(setup, LocalEngine(reductions=DEFAULT_REDUCTIONS))
        assert next(x for x in exhaustive.answers if x.key == "loop").happens is loops
        searched = search_loop(setup, 60.0)
        assert (searched.found is not None) is loops, searched.said
        if loops:
            assert_fair_loop(setup, searched.found.trace)


def test_no_loop_is_given_where_a_consumer_that_never_fails_would_take_the_message():
    """Beyond the search's bounds, the same setup as the second above with three publishers: the smaller
    setups without worker b loop, but in this one the queue's round-robin hands the message to b, which
    acks it, so no fair loop is built, never a wrong "can happen"; and the round-robin argument answers
    "cannot happen" (rabbitproof.check.by_argument)."""
    setup = parse_setup(two_workers("nack-requeue", "none", ("p", "q", "r"), 1), "three.toml")
    assert too_large(setup) and len(setup.publishers) == 3
    searched = search_loop(setup, 60.0)
    assert searched.found is None and searched.said
    loop = next(a for a in answer_setup(setup, LocalEngine(reductions=DEFAULT_REDUCTIONS)).answers if a.key == "loop")
    assert loop.verdict == "cannot happen" and loop.method == "proved" and "round" in loop.how


def test_every_loop_built_for_a_setup_drawn_at_random_is_one_the_exhaustive_search_finds():
    """Setups drawn at random (seeded, up to three clients, every kind of failure handling and fault) whose
    loop no argument covers: each loop this method gives, the exhaustive search of the same setup finds too
    (about 4 s; two of the first twenty give one, and the search agrees on both)."""
    from tests.test_check_by_argument import random_setups, searched
    from rabbitproof.check.by_argument import argued
    given = 0
    for text in random_setups(20):
        setup = parse_setup(text, "random.toml")
        if argued(setup, "loop") is not None or not setup.consumers:
            continue
        found = search_loop(setup, 30.0, 15.0).found
        if found is not None:
            given += 1
            assert_fair_loop(setup, found.trace)
            assert searched(text)["loop"] == "can happen", text
    assert given > 0
