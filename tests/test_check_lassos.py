"""A liveness "can happen" only with a lasso fair for every client (rabbitproof.check.lassos): the search's
fairness lets interchangeable clients share their classes, and a cycle fair only that way is searched
again with every client apart; and a consumer's channel close that is the setup's fault happens once,
even beside a consumer that closes its channel on every failure."""
from __future__ import annotations

from rabbitproof.spark_check.engine import LocalEngine
from rabbitproof.spec import actions as A

from rabbitproof.check.answers import DEFAULT_REDUCTIONS, check_setup, machine_for, prepare
from rabbitproof.check.cross_checks import setup_text
from rabbitproof.check.lassos import lasso_problem
from rabbitproof.check.questions import LIVENESS, PROPERTIES, QUESTIONS
from rabbitproof.check.setup_file import parse_setup

CONFIRMED = {"confirms": True, "persistent": True}
LOOP = next(q for q in QUESTIONS if q.key == "loop")


def _engine() -> LocalEngine:
    return LocalEngine(reductions=DEFAULT_REDUCTIONS)


def first_lasso(text: str):
    """The loop question's lasso as the search with twins sharing their classes gives it, and the
    configuration and machine it is one of."""
    setup = parse_setup(text, "twins.toml")
    prepared = prepare(setup, _engine())
    result = _engine().explore(prepared.machine, prepared.config, PROPERTIES, liveness=LIVENESS)
    verdict = next(p for p in result.properties if p.name == LOOP.name)
    return setup, prepared, verdict


def test_two_pollers_loop_only_with_their_turns_shared_and_check_says_no_loop():
    """Two consumers that poll and never fail, one message: the search's lasso has one poller ask again and
    again and find the queue empty, while the other never reads the basic.get-ok sent to it. Fair only if
    "one of the pollers reads" is one class; `check` searches again with every client apart: no loop."""
    text = setup_text((CONFIRMED,), ({"polls": True}, {"polls": True}))
    setup, prepared, verdict = first_lasso(text)
    assert verdict.found and verdict.trace.cycle_start is not None
    why = lasso_problem(prepared.config, prepared.machine, verdict.trace, LOOP.live)
    assert why.startswith("the cycle is not fair: c1 reads the frames that reach it"), why
    answer = next(a for a in check_setup(setup, _engine()).answers if a.key == "loop")
    assert answer.verdict == "cannot happen"
    assert "ran again with every client's turns its own" in answer.how


def test_two_consumers_closing_on_failure_loop_with_a_lasso_fair_for_each():
    """Two consumers that close their channel on every failure: a message fails with one, goes to the
    other, fails there, for ever. That loop is real, and the lasso `check` gives is fair for every client."""
    closer = {"on_failure": "close-channel"}
    setup = parse_setup(setup_text((CONFIRMED,), (closer, closer)), "closers.toml")
    answer = next(a for a in check_setup(setup, _engine()).answers if a.key == "loop")
    assert answer.verdict == "can happen"
    prepared = prepare(setup, _engine())
    assert lasso_problem(prepared.config, prepared.machine, answer.trace, LOOP.live) == ""


def test_the_channel_closed_fault_closes_a_steady_consumer_s_channel_once_beside_one_that_closes_on_failure():
    """A consumer that closes its channel on failure does so without end; the other one's close is the
    fault, which happens once: in every reachable state it has closed at most once, and no loop comes of
    the fault (the search used to let it close and open again for ever while the message waited)."""
    text = setup_text((CONFIRMED,), ({"on_failure": "close-channel", "name": "closer"}, {"name": "steady"}),
                      faults=("channel_closed",))
    setup = parse_setup(text, "closer.toml")
    machine = machine_for(setup)
    assert machine.closing == (False, True, False)
    answer = next(a for a in check_setup(setup, _engine()).answers if a.key == "loop")
    assert answer.verdict == "cannot happen"
    prepared = prepare(setup, _engine())
    config = prepared.config
    (start,) = machine.initial_states(config)
    seen, todo, most = {machine.canonical(start)}, [(start, 0)], 0
    while todo:
        here, closed = todo.pop()
        for action in machine.enabled(here, config):
            after, _ = machine.step(here, action)
            now = closed + (type(action) is A.ClientChannelClose and action.conn == 2)
            most = max(most, now)
            key = (machine.canonical(after), now)
            if key not in seen and len(seen) < 50_000:
                seen.add(key)
                todo.append((after, now))
    assert most == 1


def test_a_step_is_matched_by_its_actor_as_well_as_its_words():
    """After a crash every client connects again, and each of those steps reads "connect" and writes no
    frame: stepping a trace again finds each by its actor too, never another client's connect."""
    from rabbitproof.spark_check.results import TraceStep
    from rabbitproof.check.smaller_setups import step_as

    setup = parse_setup(setup_text((CONFIRMED,), ({}, {}), faults=("broker_crash",)), "crash.toml")
    config, machine = prepare(setup, _engine()).config, machine_for(setup)
    (here,) = machine.initial_states(config)
    todo, seen = [here], set()
    while todo:
        here = todo.pop(0)
        connects = [a for a in machine.enabled(here, config) if type(a) is A.ClientConnect]
        if len(connects) >= 2:
            break
        for action in machine.enabled(here, config):
            after, _ = machine.step(here, action)
            if machine.canonical(after) not in seen:
                seen.add(machine.canonical(after))
                todo.append(after)
    assert len({str(a) for a in connects}) == 1 and len(connects) >= 2
    for action in connects:
        taken = step_as(machine, config, here, TraceStep.of(1, action, ()))
        assert taken is not None and taken[0] == action


def test_the_orbits_are_those_of_the_symmetry_s_renamings():
    """``SetupMachine.orbits`` (the fair classes' grouping, found without listing the renamings) is, on
    every example and mixed setup, the least connection each renaming of the symmetry sends a connection
    to; and a setup of twenty clients gets its orbits at once."""
    from rabbitproof.check.cross_checks import known_setups
    from rabbitproof.check.setup_file import read_setup
    from rabbitproof.check.setup_model import to_config

    twins = [parse_setup(setup_text((CONFIRMED, CONFIRMED), ({}, {}), faults=faults), "twins.toml")
             for faults in ((), ("channel_closed",), ("host_vanished_consumers",))]
    twins.append(parse_setup(setup_text((CONFIRMED,), ({"on_failure": "close-channel"}, {}, {})), "three.toml"))
    grouped = 0
    for path, setup in [(p, read_setup(p)) for p in known_setups()] + [(None, s) for s in twins]:
        config, machine = to_config(setup), machine_for(setup)
        renamings = machine.symmetry(config).renamings
        by_renamings = tuple(min([c] + [g.conns[c] for g in renamings]) for c in range(config.connections))
        assert machine.orbits(config) == by_renamings, path or setup.source
        grouped += by_renamings != tuple(range(config.connections))
    assert grouped >= 5                 # the twins' setups and an example have interchangeable clients
    many = setup_text(({**CONFIRMED, "messages": 5},) * 10, ({"prefetch": 2},) * 10)
    setup = parse_setup(many, "many.toml")
    assert machine_for(setup).orbits(to_config(setup)) == (0,) * 10 + (10,) * 10
