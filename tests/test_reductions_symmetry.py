"""The symmetry reduction (spec.symmetry): which renamings a configuration allows, what a renaming
does to a state, the facts its soundness argument rests on (checked on every reachable state, and shown to
catch a renaming that is not a symmetry), and searches with it against full ones: the same verdicts,
traces of the same length that replay in the model, the same action classes, fewer states, pinned."""
from __future__ import annotations

import dataclasses

import pytest

from rabbitproof.spark_check.bundle import load_spec
from rabbitproof.spark_check.engine import LocalEngine
from rabbitproof.spark_check.equivariance import equivariance_problems
from rabbitproof.spark_check.expansion import Expander
from rabbitproof.spark_check.reductions import parse_reductions, written_for
from rabbitproof.spec.configs import Q0, TO_Q0
from rabbitproof.spec.roles import Role
from rabbitproof.spec.frames import MSG_STRIDE
from rabbitproof.spec.symmetry import Renaming, Symmetry, automorphisms, rename, symmetries

from rabbitproof.bench.reductions import compare_reduction, decides, replay
from rabbitproof.check.answers import check_setup, machine_for
from rabbitproof.check.interchangeable import SortedSymmetry, classes_of
from rabbitproof.check.questions import PROPERTIES, rename_watched
from rabbitproof.check.report import checked_text
from rabbitproof.check.setup_file import parse_setup
from rabbitproof.check.setup_model import to_config

from tests import toy_model as toy
from tests.test_check import EXAMPLES

SPEC = load_spec()
TWINS = SPEC.config("twin_consumers")
# Two consumer channels of one connection with the same role (channel symmetry, not connection symmetry).
CHANNEL_TWINS = dataclasses.replace(TWINS, name="channel_twins", connections=2, channels=2,
                                    roles={(0, 1): Role(publish=TO_Q0), (1, 1): TWINS.roles[(1, 1)],
                                           (1, 2): TWINS.roles[(1, 1)]})
# Automatic-mode consumers on two connections, a durable queue, a crash and lost connections.
AUTO_TWINS = dataclasses.replace(
    SPEC.config("auto_ack"), name="auto_twins", connections=3, messages=1, crashes=1, gets=0,
    queues=(dataclasses.replace(TWINS.queues[0], durable=True),),
    roles={(0, 1): Role(publish=TO_Q0, persistent=(True,), confirm=True),
           (1, 1): Role(consume=((Q0, True),)), (2, 1): Role(consume=((Q0, True),))})


def properties(config):
    return SPEC.properties(config)


def first_state(config, wanted):
    """The first state, in BFS order, for which ``wanted`` holds."""
    seen = set(SPEC.model.initial_states(config))
    frontier = list(seen)
    while frontier:
        for x in frontier:
            if wanted(x):
                return x
        nxt = []
        for x in frontier:
            for a in SPEC.model.enabled(x, config):
                y = SPEC.model.step(x, a)[0]
                if y not in seen:
                    seen.add(y)
                    nxt.append(y)
        frontier = nxt
    raise AssertionError("no such state")


def test_only_the_twin_configuration_is_symmetric_and_publishers_are_never_renamed():
    assert {n: symmetries(SPEC.config(n)) for n in SPEC.configs.STANDARD} == \
        {n: int(n == "twin_consumers") for n in SPEC.configs.STANDARD}
    assert automorphisms(TWINS) == (Renaming((0, 2, 1), ((1,), (1,), (1,))),)
    assert automorphisms(CHANNEL_TWINS) == (Renaming((0, 1), ((1, 2), (2, 1))),)
    both = Role(publish=TO_Q0, consume=((Q0, False),), ack=True)
    publishers = dataclasses.replace(TWINS, roles={(0, 1): both, (1, 1): both})
    assert automorphisms(publishers) == ()      # message ids name their connection (RQ-3 compares them)


def test_a_renaming_moves_every_name_of_a_channel_and_nothing_else():
    g = automorphisms(CHANNEL_TWINS)[0]
    x = first_state(CHANNEL_TWINS, lambda s: s.conns[1].channels[0].unacked and s.conns[1].to_client[2]
                    and not s.conns[1].to_client[1])
    y = rename(x, g)
    cx, cy = x.conns[1], y.conns[1]
    assert cy.channels == (cx.channels[1], cx.channels[0]) and cy.clients == (cx.clients[1], cx.clients[0])
    assert cy.to_client[2] == () and cy.to_client[1] == tuple((f[0], 1) + f[2:] for f in cx.to_client[2])
    assert cy.to_broker[0] == cx.to_broker[0] and y.conns[0] == x.conns[0]
    swap = {(1, 1): (1, 2), (1, 2): (1, 1)}
    assert y.queues[0].ring == tuple(swap[(c, ch)] + (t,) for c, ch, t in x.queues[0].ring)
    assert (y.disk, y.fates, y.delivered, y.used) == (x.disk, x.fates, x.delivered, x.used)
    assert y != x and rename(y, g) == x


def test_a_renaming_of_connections_moves_them_and_their_consumers():
    g = automorphisms(TWINS)[0]
    x = first_state(TWINS, lambda s: s.conns[1].channels[0].unacked and not s.conns[2].channels[0].unacked)
    y = rename(x, g)
    assert (y.conns[1], y.conns[2], y.conns[0]) == (x.conns[2], x.conns[1], x.conns[0])
    assert y.queues[0].ring == tuple(({1: 2, 2: 1}[c], ch, t) for c, ch, t in x.queues[0].ring)
    assert rename(y, g) == x


def test_the_renamings_commute_with_the_model_and_the_properties_on_every_reachable_state():
    config = AUTO_TWINS      # the other configurations: in every comparison below (compare_reduction checks it)
    checked, problems = equivariance_problems(SPEC.model, config, properties(config))
    assert problems == []
    assert checked == LocalEngine().explore(SPEC.model, config, properties(config)).distinct_states


def test_the_check_catches_renamings_that_are_not_symmetries():
    publisher_swap = Renaming((1, 0, 2), ((1,), (1,), (1,)))       # the publisher and a consumer
    _, problems = equivariance_problems(SPEC.model, TWINS, properties(TWINS), renamings=(publisher_swap,), limit=3)
    assert problems and problems[0].startswith("(2):")
    both = Role(publish=TO_Q0, consume=((Q0, False),), ack=True, reject=(True,))
    publishers = dataclasses.replace(SPEC.config("hazard_consumer_order"), roles={(0, 1): both, (1, 1): both})
    swap = Renaming((1, 0), ((1,), (1,)))       # two publishers: the message ids still name the old connection
    _, problems = equivariance_problems(SPEC.model, publishers, properties(publishers), renamings=(swap,), limit=10)
    assert {p[:3] for p in problems} == {"(2)", "(3)"}
    assert "(3): renaming ((1, 0), ((1,), (1,))) changes messages_numbered" in problems


@pytest.mark.parametrize("config, reductions", [
    (TWINS, ("symmetry",)), (CHANNEL_TWINS, ("symmetry",)), (AUTO_TWINS, ("symmetry",)), (TWINS, ("por", "symmetry"))],
    ids=["twin_consumers", "channel_twins", "auto_twins", "twin_consumers-por"])
def test_verdicts_traces_deadlocks_and_coverage_agree_with_the_full_search(config, reductions):
    comparison = compare_reduction(SPEC.model, config, properties(config), reductions, SPEC.action_types())
    assert comparison.problems == []
    full, reduced = comparison.full, comparison.reduced
    assert reduced.reductions == reductions
    assert [(p.name, p.verdict) for p in reduced.properties] == [(p.name, p.verdict) for p in full.properties]
    assert reduced.distinct_states < full.distinct_states
    assert any(p.found for p in reduced.properties)
    for f, r in zip(full.properties, reduced.properties):
        if f.trace is not None and reductions == ("symmetry",):
            assert len(r.trace.steps) == len(f.trace.steps)


def test_the_twin_configuration_pins_its_counts_with_and_without_symmetry():
    props = properties(TWINS)
    counts = {r: LocalEngine(reductions=r).explore(SPEC.model, TWINS, props).distinct_states
              for r in [(), ("symmetry",), ("por",), ("por", "symmetry")]}
    assert counts == {(): 33870, ("symmetry",): 16977, ("por",): 20080, ("por", "symmetry"): 10071}
    exact = LocalEngine(exact=True, reductions=("symmetry",)).explore(SPEC.model, TWINS, props)
    assert exact.distinct_states == 16977 and exact.exact


def test_a_trace_found_over_orbits_is_a_path_of_the_model():
    props = [p for p in properties(TWINS) if p.name == "consumer_sees_publication_order"]
    result = LocalEngine(reductions=("symmetry",)).explore(SPEC.model, TWINS, props)
    trace = result.properties[0].trace
    assert trace is not None and len(trace.steps) == 15
    ends = replay(SPEC.model, TWINS, trace)     # step by step through the model, to the trace's final state
    assert ends and decides(props[0], ends[0])
    assert any(any(v.disorder for v in c.clients) for c in ends[0].conns)


def test_names_are_checked_ordered_and_symmetry_is_for_models_that_offer_it():
    assert parse_reductions("symmetry,por") == ("por", "symmetry") == parse_reductions("por,symmetry")
    assert written_for(SPEC.model) == ("por", "symmetry") and written_for(toy) == ()
    with pytest.raises(ValueError, match=r"reduction 'symmetry' is not written for this model \(it offers: none\)"):
        Expander(toy, toy.get("manual"), [], reductions=("symmetry",))
    # Without a renaming the fingerprint is the plain hash: a symmetric-free configuration costs nothing.
    plain = Expander(SPEC.model, SPEC.config("ack_basics"), [], reductions=("symmetry",))
    assert plain.fingerprint is hash


def test_engines_name_a_combination_one_way():
    assert LocalEngine(reductions=["symmetry", "por"]).reductions == ("por", "symmetry")


# The two-workers example with one message: two consumers with the same settings, each on its connection.
TWO_WORKERS = (EXAMPLES / "two-workers.toml").read_text().replace("messages = 2", "messages = 1")


def test_two_identical_workers_of_a_setup_are_interchangeable_and_no_answer_changes():
    setup = parse_setup(TWO_WORKERS, "two-workers.toml")
    machine, config = machine_for(setup), to_config(setup)
    assert machine.symmetry(config).renamings == (Renaming((0, 2, 1), ((1,), (1,), (1,))),)
    full, reduced = full_and_reduced(setup)
    assert reduced.result.distinct_states < full.result.distinct_states
    assert written_for(machine) == ("por", "symmetry", "budgets")
    swapped = "swapping the interchangeable consumers 'worker-1' and 'worker-2'"
    assert swapped in checked_text(reduced) and swapped not in checked_text(full)


def full_and_reduced(setup):
    """Facts (1) to (4) on every reachable state of ``setup``'s machine, the observer's ghost too; then the
    full and the symmetry-reduced check, with the same verdicts and shortest traces."""
    machine, config = machine_for(setup), to_config(setup)
    checked, problems = equivariance_problems(machine, config, PROPERTIES)
    assert problems == []
    full = check_setup(setup, LocalEngine())
    reduced = check_setup(setup, LocalEngine(reductions=("symmetry",)))
    assert checked == full.result.distinct_states
    assert [a.verdict for a in reduced.answers] == [a.verdict for a in full.answers]
    assert [len(a.trace.steps) if a.trace else None for a in reduced.answers] == \
        [len(a.trace.steps) if a.trace else None for a in full.answers]
    return full, reduced


def test_workers_that_differ_are_not_interchangeable():
    setup = parse_setup(TWO_WORKERS.replace('acks = "manual"', 'acks = "manual"\non_failure = "nack-drop"', 1),
                        "two-workers.toml")
    assert machine_for(setup).symmetry(to_config(setup)).renamings == ()
    # Prefetch 1 and 2 with one message: neither ever binds, both are explored as no limit (PF-1).
    same = parse_setup(TWO_WORKERS.replace("prefetch = 1", "prefetch = 2", 1), "two-workers.toml")
    assert machine_for(same).symmetry(to_config(same)).renamings


def test_workers_that_work_before_the_ack_stay_interchangeable():
    """The work step and its ghost (which deliveries' work is done) are renamed with the consumers."""
    text = TWO_WORKERS.replace('acks = "manual"', 'acks = "manual"\nwork = "before-ack"')
    assert text.count('work = "before-ack"') == 2
    setup = parse_setup(text, "two-workers.toml")
    machine, config = machine_for(setup), to_config(setup)
    assert machine.works == (False, True, True) and machine.symmetry(config).renamings
    _, problems = equivariance_problems(machine, config, PROPERTIES)
    assert problems == []


def test_the_renamings_fix_the_slots_of_vanished_connections():
    """spec.symmetry: a vanished connection held in a slot of its own keeps no link to the slot it came
    from, so the renamings of the twins fix it; facts (1) to (3) hold with it on every reachable state."""
    config = TWINS.override({"vanishes": 1, "reconnects": 1, "closes": 0, "requeues": 0})
    held = first_state(config, lambda s: len(s.conns) == 4 and s.conns[3].channels[0].unacked)
    g = automorphisms(config)[0]
    assert rename(held, g).conns[3] == held.conns[3]
    checked, problems = equivariance_problems(SPEC.model, config, properties(config))
    assert problems == [] and checked > 1000


# Two publishers with the same settings, each with one confirmed message, and one consumer.
TWO_PUBLISHERS = """
[queues.jobs]
durable = true

[[publishers]]
name = "web-1"
queue = "jobs"
confirms = true
persistent = true

[[publishers]]
name = "web-2"
queue = "jobs"
confirms = true
persistent = true

[[consumers]]
name = "worker"
queue = "jobs"
prefetch = 1
"""


# Variants small enough to check exactly: (what changes, the faults).
PUBLISHER_VARIANTS = [
    ((), ""),
    ((("confirms = true\n", ""), ("prefetch = 1", 'acks = "automatic"')), "broker_crash = true"),
    ((("confirms = true\n", ""),), "connection_closed = true"),
    ((("confirms = true\n", ""), ("prefetch = 1", 'acks = "automatic"')), "host_vanished = true"),
    ((("confirms = true\n", "transactions = true\n"), ("prefetch = 1", 'acks = "automatic"')), ""),
    # Republishing: the copies and the messages owed again are renamed with their publisher.
    ((("confirms = true\n", "confirms = true\nrepublish = 1\n"), ("prefetch = 1", 'acks = "automatic"')),
     "queue_refuses = true"),
]


@pytest.mark.parametrize("changes, faults", PUBLISHER_VARIANTS)
def test_two_identical_publishers_are_interchangeable_with_their_messages_and_no_answer_changes(changes, faults):
    """Publishers renamed with their message ids (spec.symmetry.rename_messages): facts (1) to (4) on
    every reachable state, questions included; the same verdicts and shortest traces as the full search,
    in fewer states. With confirms, with a transaction, with a crash (the disk), a lost connection, a
    vanished publisher (its messages in a slot of its own) and publishers that republish."""
    text = TWO_PUBLISHERS
    for old, new in changes:
        text = text.replace(old, new)
    setup = parse_setup(text + (f"[faults]\n{faults}\n" if faults else ""), "two-publishers.toml")
    machine, config = machine_for(setup), to_config(setup)
    assert machine.symmetry(config).renamings == (Renaming((1, 0, 2), ((1,), (1,), (1,))),)
    full, reduced = full_and_reduced(setup)
    assert reduced.result.distinct_states < 0.6 * full.result.distinct_states
    swapped = "swapping the interchangeable publishers 'web-1' and 'web-2' (with their messages)"
    assert swapped in checked_text(reduced) and swapped not in checked_text(full)


def test_a_renaming_of_publishers_renames_every_message_id():
    """A state where only the second publisher (connection 1) has published, its message on disk, held
    by the consumer and in the ghost: its id (1 * MSG_STRIDE + 1, an int no other field takes) is
    everywhere renamed to the first publisher's, so no int that large is left; renaming twice is no change."""
    setup = parse_setup(TWO_PUBLISHERS, "two-publishers.toml")
    machine, config = machine_for(setup, beliefs=True), to_config(setup)
    (g,) = machine.symmetry(config).renamings
    state = first_watched(machine, config, lambda w: w.spec.conns[1].published and not w.spec.conns[0].published
                          and w.spec.disk and w.spec.conns[2].channels[0].unacked and w.ghost.believed)
    assert large_ints(state) == {MSG_STRIDE + 1}
    swapped = rename_watched(state, g)
    assert large_ints(swapped) == set() and swapped.ghost.believed == (1,) and swapped.spec.disk[0][2] == 1
    assert rename_watched(swapped, g) == state


def large_ints(x) -> set[int]:
    """Every int of at least MSG_STRIDE anywhere in ``x``, a nest of tuples."""
    if isinstance(x, tuple):
        return set().union(*map(large_ints, x)) if x else set()
    return {x} if isinstance(x, int) and x >= MSG_STRIDE else set()


def first_watched(machine, config, wanted):
    """The first state, breadth first, of the check machine that satisfies ``wanted``."""
    for x in breadth_first(machine, config):
        if wanted(x):
            return x
    raise AssertionError("no such state")


def breadth_first(machine, config):
    """Every state of the check machine reachable from the start (exactly), breadth first."""
    frontier = list(machine.initial_states(config))
    seen = set(frontier)
    while frontier:
        yield from frontier
        nxt = []
        for x in frontier:
            for a in machine.enabled(x, config):
                y = machine.step(x, a)[0]
                if y not in seen:
                    seen.add(y)
                    nxt.append(y)
        frontier = nxt


@pytest.mark.parametrize("text", [TWO_PUBLISHERS, TWO_WORKERS, TWO_PUBLISHERS.replace(
    "confirms = true\n", "confirms = true\nrepublish = 1\n").replace("prefetch = 1", 'acks = "automatic"')
    + "[faults]\nqueue_refuses = true\n", TWO_PUBLISHERS.replace("[[consumers]]", """[[consumers]]
name = "other"
queue = "jobs"
prefetch = 1

[[consumers]]""")])
def test_sorting_interchangeable_clients_names_the_same_orbits_as_trying_every_renaming(text):
    """rabbitproof.check.interchangeable: on every reachable state, the fingerprint made by sorting clients
    and the least hash over the whole group partition the states alike (one class for one class)."""
    setup = parse_setup(text, "setup.toml")
    machine, config = machine_for(setup), to_config(setup)
    sorted_ = machine.symmetry(config)
    assert isinstance(sorted_, SortedSymmetry)
    every = Symmetry(config, sorted_.renamings, rename_watched)
    by_sorting, by_group = sorted_.fingerprint_of(False), every.fingerprint_of(False)
    pairs = {(by_sorting(machine.canonical(x)), by_group(machine.canonical(x))) for x in breadth_first(machine, config)}
    assert len({a for a, _ in pairs}) == len({b for _, b in pairs}) == len(pairs) > 100


def test_classes_are_found_only_for_a_group_of_whole_permutations():
    one = (1,)
    swap = Renaming((1, 0, 2), (one,) * 3)
    assert classes_of((swap,), 3) == ((0, 1),)
    cycle = Renaming((1, 2, 0), (one,) * 3)
    assert classes_of((cycle,), 3) is None          # a rotation alone is not every permutation of the three
    assert classes_of((Renaming((0, 1), ((1, 2), (2, 1))),), 2) is None      # channels renamed


def test_workers_whose_requeues_wait_behind_a_resume_stay_interchangeable():
    """Two identical workers under a channel-wide limit that requeue on failure: the copies away behind a
    resume name the requeueing channel (spec.interleavings), which a renaming renames too; every fact holds
    on every reachable state and no answer changes."""
    setup = parse_setup(TWO_WORKERS.replace("prefetch = 1", 'prefetch = 1\nprefetch_scope = "channel"\n'
                                            'on_failure = "nack-requeue"'), "two-workers.toml")
    full, reduced = full_and_reduced(setup)
    assert reduced.result.distinct_states < full.result.distinct_states
