"""proofs.bmc: Z3's bounded search finds a hazard's counterexample, the spec replays it, and the
bounded model follows the spec step by step along the explorer's counterexample."""
from __future__ import annotations

import subprocess
import sys

import z3

from rabbitproof.proofs import bmc
from rabbitproof.spec import configs, machine
from rabbitproof.spec.properties import get


def _explorer_actions(hazard: str) -> list:
    """The explorer's shortest counterexample, as spec actions (the local engine's trace, matched
    against the enabled actions at each step)."""
    from rabbitproof.spark_check.bundle import load_spec
    from rabbitproof.spark_check.engine import LocalEngine
    config = configs.get(bmc.HAZARD_CONFIGS[hazard])
    trace = LocalEngine().explore(load_spec().model, config, [get(hazard)]).properties[0].trace
    state, out = machine.initial_states(config)[0], []
    for step in trace.steps:
        action = next(a for a in machine.enabled(state, config)
                      if str(a) == step.action and type(a).__name__ == step.action_type and a.actor == step.actor)
        out.append(action)
        state = machine.step(state, action)[0]
    return out


def test_a_crash_hazard_is_found_replayed_and_as_short_as_the_explorers():
    o = bmc.check_hazard("persistent_never_lost")
    assert o.status == bmc.FOUND, o.detail
    assert o.length == o.explorer_length == 3
    assert type(o.actions[-1]).__name__ == "BrokerCrash"
    assert bmc.replay("persistent_never_lost", configs.get(o.config), o.actions) == ""


def test_an_automatic_mode_loss_is_found_and_replayed():
    o = bmc.check_hazard("auto_ack_never_loses")
    assert o.status == bmc.FOUND, o.detail
    assert o.length == o.explorer_length
    assert type(o.actions[-1]).__name__ == "NetworkLoss"


def test_no_shorter_execution_exists_than_the_shortest():
    config = configs.get("hazard_unconfirmed_lost")
    status, actions, why = bmc.search("persistent_never_lost", config, max_steps=2)
    assert status == bmc.NOT_FOUND and actions == [], why


def test_replay_refuses_an_execution_the_spec_does_not_have():
    config = configs.get("hazard_unconfirmed_lost")
    o = bmc.check_hazard("persistent_never_lost")
    assert "not enabled" in bmc.replay("persistent_never_lost", config, o.actions[1:])     # take before publish
    assert "holds" in bmc.replay("persistent_never_lost", config, o.actions[:-1])          # no crash yet


def test_the_bounded_model_follows_the_spec_along_the_explorers_counterexamples():
    for hazard in ("acked_never_redelivered", "consumer_sees_publication_order", "tx_commit_atomic",
                   "confirms_in_publish_order", "outstanding_within_prefetch"):
        actions = _explorer_actions(hazard)
        assert bmc.follows(configs.get(bmc.HAZARD_CONFIGS[hazard]), actions) == "", hazard


def _states_along(config, actions: list) -> list:
    state, out = machine.initial_states(config)[0], []
    for action in actions:
        out.append(state)
        state = machine.step(state, action)[0]
    return out + [state]


def test_the_independent_and_commuting_pairs_commute_in_the_spec_and_a_planted_pair_is_caught():
    """The canonical interleavings rest on independence and on Z3's commutation proofs: both checked on
    the spec at every state of the explorer's counterexamples; a pair that does not commute (a client's
    publish and the broker taking that channel's frame, when no frame waits: the take needs the frame;
    a publish and a consume written on one channel: their frames' order differs) is refused by the
    check, and neither is listed as such."""
    for hazard in ("outstanding_within_prefetch", "consumer_sees_publication_order"):
        config = configs.get(bmc.HAZARD_CONFIGS[hazard])
        shape = bmc.B.shape_of(config)
        alphabet = bmc.B.instances(config, shape)
        independent, commuting = bmc.independent_pairs(config, shape, alphabet, conditional=True)
        assert independent and commuting, hazard
        states = _states_along(config, _explorer_actions(hazard))
        assert bmc.commutation_problem(config, independent, states) == "", hazard
        assert bmc.commutation_problem(config, commuting, states, conditional=True) == "", hazard

    def at(kind, conn):
        return next(i for i, a in enumerate(alphabet) if type(a).__name__ == kind and a.conn == conn and a.ch == 1)
    publish, take = at("ClientPublish", 0), at("BrokerTakeFrame", 0)
    planted = (min(publish, take), max(publish, take))
    assert planted not in independent and planted in commuting
    assert "not enabled first" in bmc.commutation_problem(config, {planted}, states)
    consume = at("ClientConsume", 0)
    writers = (min(publish, consume), max(publish, consume))        # two frames written on one channel
    assert writers not in independent | commuting
    assert "different states" in bmc.commutation_problem(config, {writers}, states, conditional=True)


def test_canonical_interleavings_keep_the_shortest_length():
    config = configs.get("hazard_confirm_order")
    full = bmc.search("confirms_in_publish_order", config, canonical=False, conditional=False)
    canonical = bmc.search("confirms_in_publish_order", config)
    assert full[0] == canonical[0] == bmc.FOUND and full[2] == canonical[2] == ""
    assert len(full[1]) == len(canonical[1])


def test_the_prefetch_hazard_is_found_at_the_explorers_length_with_no_shorter_one():
    o = bmc.check_hazard("outstanding_within_prefetch")
    assert o.status == bmc.FOUND and o.detail == "", o.detail
    assert o.length == o.explorer_length


def test_unknown_hazard_is_one_error_line_and_exit_code_2():
    r = subprocess.run([sys.executable, "-m", "rabbitproof", "verify", "--part", "bmc", "--hazard", "nope"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown hazard 'nope'" in lines[0]


def _giving_up_at(monkeypatch, bound, times: int):
    """The solver gives up on the query at ``bound`` (or at each of several bounds) the first ``times``
    times it is asked (a query that runs out of its budget); every other query is Z3's own answer."""
    bounds = (bound,) if isinstance(bound, int) else tuple(bound)
    asked = {"n": 0, **{b: 0 for b in bounds}}
    real = bmc.Unrolling.violation_within

    def violation_within(self, prop, k, budget):
        if k in bounds and asked[k] < times:
            asked[k] += 1
            asked["n"] += 1
            return z3.unknown, "max. resource limit exceeded"
        return real(self, prop, k, budget)
    monkeypatch.setattr(bmc.Unrolling, "violation_within", violation_within)
    return asked


def test_a_bound_the_solver_gives_up_on_is_passed_over_and_asked_again(monkeypatch):
    """persistent_never_lost's shortest execution has 3 steps. With the query at bound 2 undecided at
    first, the search goes on to bound 3, finds the execution, then asks bound 2 again: none there, so
    the 3 steps are a shortest execution."""
    config = configs.get("hazard_unconfirmed_lost")
    asked = _giving_up_at(monkeypatch, 2, 1)
    status, actions, why = bmc.search("persistent_never_lost", config)
    assert (status, len(actions), why, asked["n"]) == (bmc.FOUND, 3, "", 1)


def test_a_violation_at_a_bound_passed_over_is_a_shortest_one(monkeypatch):
    """The shortest execution has 3 steps. With the queries at bounds 3 and 4 undecided at first,
    bound 5 admits a violation whose first step may be at a bound passed over (Z3's model there has 4
    steps) or the 5th; the bounds passed over below it are asked again in turn, and the search ends
    with 3 steps, shown shortest since bound 2 admits none."""
    config = configs.get("hazard_unconfirmed_lost")
    _giving_up_at(monkeypatch, (3, 4), 1)
    status, actions, why = bmc.search("persistent_never_lost", config)
    assert (status, len(actions), why) == (bmc.FOUND, 3, "")
    assert bmc.replay("persistent_never_lost", config, actions) == ""


def test_a_bound_left_undecided_is_reported(monkeypatch):
    config = configs.get("hazard_unconfirmed_lost")
    _giving_up_at(monkeypatch, 2, 2)
    status, actions, why = bmc.search("persistent_never_lost", config)
    assert status == bmc.FOUND and len(actions) == 3
    assert why == "none within 2 steps not shown: the solver gave up at that bound"
    assert bmc.replay("persistent_never_lost", config, actions) == ""
    _giving_up_at(monkeypatch, 1, 99)
    status, actions, why = bmc.search("persistent_never_lost", config, max_steps=2)
    assert (status, actions) == (bmc.UNKNOWN, [])
    assert why == "the solver gave up at bound(s) 1 and found none at the others up to 2"


def test_a_search_out_of_budget_at_every_bound_is_unknown_and_a_bound_is_retried_with_more(monkeypatch):
    """With a budget of one unit no bound is decided: the outcome is unknown, not "not found"; a bound
    passed over below a violation is asked again with budgets.RETRY times the budget, and decided then."""
    config = configs.get("hazard_unconfirmed_lost")
    status, actions, why = bmc.search("persistent_never_lost", config, max_steps=2, budget=1)
    assert (status, actions) == (bmc.UNKNOWN, [])
    assert why == "the solver gave up at bound(s) 1, 2 and found none at the others up to 2"
    asked = []
    real = bmc.Unrolling.violation_within

    def violation_within(self, prop, k, budget):
        asked.append((k, budget))
        return real(self, prop, k, 1 if k == 2 and budget == 10_000_000 else budget)
    monkeypatch.setattr(bmc.Unrolling, "violation_within", violation_within)
    status, actions, why = bmc.search("persistent_never_lost", config, budget=10_000_000)
    assert (status, len(actions), why) == (bmc.FOUND, 3, "")
    assert asked == [(1, 10_000_000), (2, 10_000_000), (3, 10_000_000), (2, bmc.budgets.RETRY * 10_000_000)]
