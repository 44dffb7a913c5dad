"""The rank of a waiting publish (model.ranking, proofs.ranking): every obligation proved by Z3 for every
action of the model, each one refuted where its condition is dropped (a broker that may drop a confirm, a
client that reads a confirm without taking it in), the waits answer citing it, and `rabbitproof verify`
running it in its proofs part."""
from __future__ import annotations

import subprocess
import sys

import pytest
import z3

from rabbitproof.spec import actions as A
from rabbitproof.model import actions as M
from rabbitproof.model.actions import RELATIONS, Transition
from rabbitproof.proofs.ranking import OBLIGATIONS, obligations_named, prove_obligation, prove_ranking
from rabbitproof.proofs.inductive import COUNTEREXAMPLE, PROVED

from rabbitproof.check import cross_checks
from rabbitproof.check.by_argument import argued
from rabbitproof.check.setup_file import read_setup

LARGER = cross_checks.LARGER


def test_every_ranking_obligation_is_proved_for_every_action():
    outcomes = prove_ranking(obligations_named())
    assert {o.invariant for o in outcomes} == set(OBLIGATIONS)
    assert len([o for o in outcomes if o.invariant == "rank_never_rises"]) == len(RELATIONS)
    assert [(o.invariant, o.action, o.counterexample) for o in outcomes if o.status != PROVED] == []


def _dropping_confirm(x, a, o):
    """A broker that may drop a confirm: the publish leaves ``unconfirmed`` and no confirm goes out."""
    t = M.BrokerConfirm(x, a, o)
    return Transition(t.guard, x.replace(unconfirmed=z3.Store(x.unconfirmed, a.conn, a.ch, a.seq, False)))


def _reading_without_taking_in(x, a, o):
    """A client that reads a confirm and does not count it as seen."""
    t = M.ClientReceive(x, a, o)
    return Transition(t.guard, t.after.replace(view_confirmed=x.view_confirmed))


def test_a_broker_that_may_drop_a_confirm_raises_the_rank(monkeypatch):
    monkeypatch.setitem(RELATIONS, A.BrokerConfirm, _dropping_confirm)
    outcome = prove_obligation(OBLIGATIONS["rank_never_rises"], A.BrokerConfirm)
    assert outcome.status == COUNTEREXAMPLE, outcome
    assert any(line.startswith("after:") for line in outcome.counterexample)


def test_a_client_that_does_not_take_in_a_confirm_is_never_answered(monkeypatch):
    monkeypatch.setitem(RELATIONS, A.ClientReceive, _reading_without_taking_in)
    outcome = prove_obligation(OBLIGATIONS["reading_answers"], A.ClientReceive)
    assert outcome.status == COUNTEREXAMPLE, outcome


def test_the_waits_answer_names_the_ranking_where_publishers_confirm():
    confirming = read_setup(LARGER / "requeueing-workers.toml")
    text = argued(confirming, "waits").text()
    assert all(name in text for name in OBLIGATIONS) and "proved by Z3" in text
    plain = read_setup(LARGER / "fire-and-forget-web-servers.toml")
    assert not any(p.confirms for p in plain.publishers)
    assert "rank_never_rises" not in argued(plain, "waits").text()


def _verify(*args):
    return subprocess.run([sys.executable, "-m", "rabbitproof", "verify", "--part", "proofs", *args],
                          capture_output=True, text=True, timeout=300)


def test_verify_runs_the_ranking_in_its_proofs_part():
    r = _verify("--invariant", "rank_never_rises", "--action", "BrokerConfirm", "--action", "DiskFsync")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "rank_never_rises" in r.stdout and "verify: nothing found: proofs PASS (exit 0)" in r.stdout


@pytest.mark.parametrize("name", ["rank_never_rise", "waits"])
def test_an_unknown_name_is_refused(name):
    r = _verify("--invariant", name)
    assert r.returncode == 2 and r.stdout == ""
    assert f"unknown invariant {name!r}" in r.stderr
