"""proofs.bmc: Z3's bounded search finds a hazard's counterexample, the spec replays it, and the
bounded model follows the spec step by step along the explorer's counterexample."""
from __future__ import annotations

import subprocess
import sys

from proofs import bmc
from spec import configs, machine
from spec.properties import get


def _explorer_actions(hazard: str) -> list:
    """The explorer's shortest counterexample, as spec actions (the local engine's trace, matched
    against the enabled actions at each step)."""
    from spark_check.bundle import load_spec
    from spark_check.engine import LocalEngine
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


def test_unknown_hazard_is_one_error_line_and_exit_code_2():
    r = subprocess.run([sys.executable, "-m", "proofs.verify", "--part", "bmc", "--hazard", "nope"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown hazard 'nope'" in lines[0]
