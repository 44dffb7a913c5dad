"""The conformance suite reports what a broker author needs (issue 39): each divergence found in a
third-party broker, planted in a copy of our broker (tests/fixtures/divergences.py), is its own finding
named by its rule, with a program shrunk to at most 5 steps; several planted at once give as many
findings; a method the broker does not implement is reported once and left out; a broker that deadlocks
is reported as having stopped answering, with the other findings.

The runs draw 10 generated programs besides the probes (a program per catalogue rule, run first): the
probes are what must find these, so a short run shows them as a default one does.

`make test` runs a representative part, seconds a run: three divergences alone (RQ-2, ACK-4 and the
refused publish appended to the previous message, PC-9), five at once with the one that breaks every
basic.get-ok (DS-2), the tx class never answered, and delete of a missing queue allowed by the standard
dialect only. `make verify` runs every test for every divergence (RABBITPROOF_ALL_DIVERGENCES=1, about 5 minutes):
each other divergence alone, all of them at once (the deadlock restarted with --start-cmd), the
deadlock reported with the other findings, the broker started again, the 406 of an exclusive redeclare."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from contextlib import contextmanager

import pytest

from rabbitproof.brokers.impl_broker import ImplBroker
from rabbitproof.brokers.ports import free_port, wait_until_listening
from rabbitproof.substitute import IMPL_ENV
from tests.fixtures.divergences import BY_NAME, DIVERGENCES, make_copy
from tests.fixtures.mutants import REPO
from tests.fixtures.patience import REPLY_PATIENCE

ALL = bool(os.environ.get("RABBITPROOF_ALL_DIVERGENCES"))
QUICK = ("redelivered_false_after_a_requeue", "multiple_ack_of_a_tag_not_outstanding_accepted",
         "refused_publish_appended_to_the_previous_message", "delete_of_a_missing_queue_refused_404")
slower = pytest.mark.skipif(not ALL, reason="minutes: make verify runs it (RABBITPROOF_ALL_DIVERGENCES=1)")
REJECTED = [d for d in DIVERGENCES if d.kind == "rejected" and (ALL or d.name in QUICK)]


@contextmanager
def planted(names, tmp_path):
    """Our broker with the divergences ``names`` planted, started from the patched copy."""
    copy = make_copy([BY_NAME[name] for name in names], tmp_path)
    before = os.environ.get(IMPL_ENV)
    os.environ[IMPL_ENV] = str(copy)
    try:
        broker = ImplBroker(tmp_path / "data", startup_timeout=60)
        broker.start()
    finally:
        if before is None:
            del os.environ[IMPL_ENV]
        else:
            os.environ[IMPL_ENV] = before
    try:
        yield broker
    finally:
        broker.close()


def conformance(broker, *args, programs: int = 10, patient: bool = True) -> tuple[int, dict]:
    """`rabbitproof conformance --json` on ``broker``; ``patient``: a reply may take REPLY_PATIENCE, for a
    run where every method is answered (not `--reply-timeout`'s default, which a test of a broker that
    never answers keeps)."""
    args = (*args, "--reply-timeout", str(REPLY_PATIENCE)) if patient else args
    env = {k: v for k, v in os.environ.items() if k != IMPL_ENV}
    done = subprocess.run([sys.executable, "-m", "rabbitproof", "conformance",
                           f"amqp://guest:guest@{broker.host}:{broker.port}/", "--programs", str(programs), "--json",
                           *args], cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done.returncode, json.loads(done.stdout)


def shown_steps(finding: dict) -> int:
    return finding["shrunk"]["steps_after"] if finding["shrunk"] else len(finding["steps"].splitlines()) - 2


@pytest.mark.parametrize("divergence", REJECTED, ids=[d.name for d in REJECTED])
def test_a_planted_divergence_is_named_by_its_rule_and_shrunk(divergence, tmp_path):
    with planted([divergence.name], tmp_path) as broker:
        code, report = conformance(broker)
    assert code == 1 and (report["verdict"], report["exit_code"]) == ("found", 1), report["totals"]
    named = [f for f in report["findings"] if set(f["rules"]) & set(divergence.rules)]
    assert named, [(f["rules"], f["statement"]) for f in report["findings"]]
    best = min(named, key=shown_steps)
    shown = (best["shrunk"] or best)["steps"]
    assert best["kind"] == "rejected" and shown_steps(best) <= 5, shown
    assert best["statement"] and best["count"] >= 1 and best["verdict"].startswith("rejected: ")


def named(report: dict, divergence) -> list:
    """The findings of ``report`` that name ``divergence``: by one of its rules, or, for a method the
    broker does not implement, by that method."""
    if divergence.kind == "unsupported":
        return [f for f in report["findings"] if f["kind"] == "unsupported" and f["method"] in divergence.rules]
    if divergence.kind == "stopped answering":
        return [f for f in report["findings"] if f["kind"] == "stopped answering"]
    return [f for f in report["findings"] if f["kind"] == "rejected" and set(f["rules"]) & set(divergence.rules)]


def test_several_planted_at_once_give_as_many_findings(tmp_path):
    """DS-2 planted (message_count off by one on every basic.get-ok) does not hide the others: a frame
    wrong only in message_count or redelivered is judged on as the spec allowed it (judge.later). Probes
    only: they are written to show these."""
    names = ["get_ok_message_count_off_by_one", "redelivered_false_after_a_requeue",
             "multiple_ack_of_a_tag_not_outstanding_accepted", "get_limited_by_the_prefetch",
             "requeued_to_the_head_one_by_one", "recover_not_implemented"]
    with planted(names, tmp_path) as broker:
        code, report = conformance(broker, programs=0)
    assert code == 1
    shown = [(f["rules"] or f["method"], f["statement"]) for f in report["findings"]]
    for name in names:
        assert named(report, BY_NAME[name]), (name, shown)
    unsupported = [f for f in report["findings"] if f["kind"] == "unsupported"]
    assert [f["method"] for f in unsupported] == ["basic.recover"] and report["unsupported"] == ["basic.recover"]
    assert "540" in unsupported[0]["statement"]
    # Each rejection is its own finding, shrunk to a program of at most 5 steps that shows it.
    for name in names[:-1]:
        best = min(named(report, BY_NAME[name]), key=shown_steps)
        assert shown_steps(best) <= 5, (name, best["shrunk"] or best["steps"])


@slower
def test_every_divergence_planted_at_once_gives_a_finding_for_each(tmp_path):
    """All the divergences in one broker, the deadlock included (started again with --start-cmd): each is
    named by a finding of its own (the rules it breaks, the method it lacks, the broker stopping), and
    the standard dialect's allowances are counted, not reported."""
    with restartable([d.name for d in DIVERGENCES], tmp_path) as (port, start):
        report = conformance_restarting(port, start)
    shown = [(f["rules"] or f["method"], f["statement"]) for f in report["findings"]]
    for divergence in DIVERGENCES:
        if divergence.kind != "allowed":
            assert named(report, divergence), (divergence.name, shown)
    rejected = [d for d in DIVERGENCES if d.kind == "rejected"]
    by_rule = {rule: [f for f in report["findings"] if rule in f["rules"]] for d in rejected for rule in d.rules}
    assert len({f["id"] for fs in by_rule.values() for f in fs}) >= len(rejected), shown
    assert len(report["allowed_differences"]) == 2, report["allowed_differences"]


@contextmanager
def restartable(names, tmp_path):
    """Our broker with the divergences ``names`` planted, started by a shell command that --start-cmd
    runs again (it kills the wedged process first, and waits until it is gone): (its port, the command)."""
    copy = make_copy([BY_NAME[name] for name in names], tmp_path)
    port, pid, data = free_port(), tmp_path / "broker.pid", tmp_path / "data"
    old = f"$(cat {shlex.quote(str(pid))} 2>/dev/null)"
    start = (f"kill -9 {old} 2>/dev/null; while kill -0 {old} 2>/dev/null; do sleep 0.1; done; "
             f"{IMPL_ENV}={shlex.quote(str(copy))} {shlex.quote(sys.executable)} -m rabbitproof.impl.server "
             f"--port {port} --data-dir {shlex.quote(str(data))} > /dev/null 2>&1 & echo $! > {shlex.quote(str(pid))}")
    subprocess.run(start, shell=True, check=True)
    try:
        assert wait_until_listening("127.0.0.1", port, 60)
        yield port, start
    finally:
        subprocess.run(f"kill -9 $(cat {shlex.quote(str(pid))}) 2>/dev/null", shell=True)


def conformance_restarting(port: int, start: str) -> dict:
    """A run of 10 generated programs besides the probes, the broker started again with ``start``."""
    env = {k: v for k, v in os.environ.items() if k != IMPL_ENV}
    done = subprocess.run([sys.executable, "-m", "rabbitproof", "conformance", f"amqp://127.0.0.1:{port}/",
                           "--programs", "10", "--json", "--start-cmd", start], cwd=REPO, capture_output=True,
                          text=True, timeout=900, env=env)
    assert done.returncode == 1, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_a_class_never_answered_is_unsupported_once_per_method_and_left_out(tmp_path):
    with planted(["tx_class_ignored"], tmp_path) as broker:
        code, report = conformance(broker, patient=False)
    assert code == 1
    assert [(f["kind"], f["method"]) for f in report["findings"]] == [
        ("unsupported", "tx.select"), ("unsupported", "tx.commit"), ("unsupported", "tx.rollback")]
    assert report["unsupported"] == ["tx.select", "tx.commit", "tx.rollback"]
    # The rest of the semantics was still tested: every other program was accepted.
    totals = report["totals"]
    assert totals["found"] == 3 and totals["accepted"] == totals["programs"] - 3 and totals["generated"] == 10
    assert report["families"]["TX"]["found"] == 3


@slower
def test_a_broker_that_deadlocks_is_reported_with_the_other_findings(tmp_path):
    with planted(["queue_delete_with_a_consumer_deadlocks", "redelivered_false_after_a_requeue"], tmp_path) as broker:
        # The deadlock ends the run; the limit is only there in case it did not, and no load reaches it.
        code, report = conformance(broker, "--time-limit", "400", patient=False)
    assert code == 1 and report["stopped"].startswith("the broker stopped answering")
    kinds = {f["kind"]: f for f in report["findings"]}
    assert "RQ-2" in kinds["rejected"]["rules"]
    stopped = kinds["stopped answering"]
    assert stopped["statement"] == "the broker stopped answering every connection"
    assert "Delete(ch=1, queue=0" in stopped["program"]           # the last program that ran


def test_every_divergence_patch_applies_once(tmp_path):
    make_copy(DIVERGENCES, tmp_path)        # StalePatch when an old text does not occur exactly once
    assert len(DIVERGENCES) >= 10 and len({d.name for d in DIVERGENCES}) == len(DIVERGENCES)


ALLOWED = [d for d in DIVERGENCES if d.kind == "allowed" and (ALL or d.name in QUICK)]


@pytest.mark.parametrize("divergence", ALLOWED, ids=[d.name for d in ALLOWED])
def test_what_amqp_leaves_open_is_allowed_by_the_standard_dialect_only(divergence, tmp_path):
    with planted([divergence.name], tmp_path) as broker:
        code, standard = conformance(broker)
        rabbitmq_code, rabbitmq = conformance(broker, "--dialect", "rabbitmq")
    assert code == 0 and standard["findings"] == [], [(f["rules"], f["statement"]) for f in standard["findings"]]
    [difference] = standard["allowed_differences"]
    assert difference["count"] >= 1 and "RabbitMQ 3.10.8" in difference["statement"]
    assert rabbitmq_code == 1 and rabbitmq["allowed_differences"] == []
    assert [f["rules"] for f in rabbitmq["findings"]] == [["ER-2"]]


@slower
def test_a_broker_that_stops_answering_is_started_again_with_the_start_command(tmp_path):
    """With --start-cmd, a deadlocked broker is reported, started again (the user's command kills the
    wedged process first), and the run goes on to its end."""
    with restartable(["queue_delete_with_a_consumer_deadlocks"], tmp_path) as (port, start):
        report = conformance_restarting(port, start)
    assert report["stopped"] is None and report["totals"]["generated"] == 10
    [stopped] = [f for f in report["findings"] if f["kind"] == "stopped answering"]
    assert "Delete(ch=1, queue=0" in stopped["program"] and stopped["count"] >= 1
