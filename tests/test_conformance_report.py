"""The conformance report a broker author acts on (issue 24, item 7): each family's first failing program
shrunk against the broker, drawn as a message-sequence chart and written as a runnable program; the
spec's coverage; generation steered towards what is not covered. The broker that misbehaves is our broker
behind the fault-injecting proxy (tests/fixtures/fault_proxy.py), answering 404 where it closes a
channel with 406."""
from __future__ import annotations

import json
import subprocess
import sys
from xml.etree import ElementTree

import pytest
from hypothesis import HealthCheck, given, settings
from pamqp import commands
from pamqp import frame as amqp_frame

from rabbitproof.spec import actions as A
from rabbitproof.recording import observations
from rabbitproof.recording.rawclient import LoggedCommand

from rabbitproof.conformance import programs as P
from rabbitproof.conformance.command import outcome
from rabbitproof.conformance.coverage import ACTIONS, RULES, Coverage, steer
from rabbitproof.conformance.judge import Judgement, later
from rabbitproof.conformance.shrink import reason_kind, shrink
from rabbitproof.conformance.targets import TcpTarget
from tests.fixtures.fault_proxy import FaultProxy
from tests.fixtures.mutants import REPO
from tests.fixtures.patience import REPLY_PATIENCE

Q = (P.QueueFlags(False, False),) * P.QUEUES
# An ack of a tag never issued (406, ACK-4) among steps that have nothing to do with it.
NOISY = P.Program(Q, 2, (P.Step(0, (P.Declare(1, 0), P.Declare(1, 1))),
                         P.Step(1, (P.Publish(1, 0), P.Publish(1, 1))),
                         P.Step(0, (P.Get(1, 0), P.Qos(2, 3))),
                         P.Step(0, (P.Publish(2, 1), P.Ack(1, 9), P.Get(2, 1))),
                         P.Step(1, (P.Purge(1, 0),)),
                         P.Step(0, (P.Get(1, 1),))))


def closes_with_404(conn, channel, method, raw):
    """A 406 channel.close reaches the client as 404: a wrong reply code, which the spec rejects."""
    if isinstance(method, commands.Channel.Close) and method.reply_code == 406:
        method.reply_code = 404
        return [amqp_frame.marshal(method, channel)]
    return [raw]


@pytest.fixture(scope="module")
def proxy(impl_broker_module):
    proxy = FaultProxy((impl_broker_module.host, impl_broker_module.port), closes_with_404)
    yield proxy
    proxy.close()


@pytest.fixture
def target(proxy, impl_broker_module):
    return TcpTarget("proxied", "127.0.0.1", proxy.port, impl_broker_module.user, impl_broker_module.password,
                     timeout=30.0)         # every answer comes: a wait for any load, as long as the broker takes


def conformance(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rabbitproof", "conformance", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=300)


def test_a_rejection_shrinks_to_the_one_method_the_broker_answers_wrongly(target):
    failed = outcome(NOISY, target, judge_texts=False)
    assert reason_kind(failed) == "rejected at received channel.close 404", failed.explanation
    shrunk = shrink(NOISY, failed, lambda program: outcome(program, target, judge_texts=False))
    assert shrunk.program == P.Program(Q, 1, (P.Step(0, (P.Ack(1, 9),)),))
    assert not shrunk.capped and shrunk.reruns <= 40
    assert shrunk.outcome.status == "rejected" and "reply_code=404" in shrunk.outcome.explanation


def test_the_cap_on_reruns_stops_shrinking_and_says_so(target):
    failed = outcome(NOISY, target, judge_texts=False)
    shrunk = shrink(NOISY, failed, lambda program: outcome(program, target, judge_texts=False), max_reruns=2)
    assert shrunk.capped and shrunk.reruns == 2
    assert len(shrunk.program.steps) < len(NOISY.steps) and reason_kind(shrunk.outcome) == reason_kind(failed)


def test_a_candidate_that_passes_is_not_kept(target, impl_broker_module):
    """A candidate counts as failing only if it fails the same way: against a broker that passes every
    candidate (a race that went the other way), the program stays as it was."""
    failed = outcome(NOISY, target, judge_texts=False)
    honest = TcpTarget("impl", impl_broker_module.host, impl_broker_module.port, timeout=REPLY_PATIENCE)
    shrunk = shrink(NOISY, failed, lambda program: outcome(program, honest, judge_texts=False), max_reruns=5)
    assert shrunk.program == NOISY and shrunk.outcome is failed


def test_chart_and_runnable_program_of_each_finding(proxy, impl_broker_module, tmp_path):
    url = f"amqp://guest:guest@127.0.0.1:{proxy.port}/"
    result = conformance(url, "--programs", "2", "--shrink-reruns", "12", "--chart", str(tmp_path), "--json")
    assert result.returncode == 1, result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert (report["verdict"], report["exit_code"]) == ("found", 1) and report["findings"]
    # Every 406 refusing an unknown delivery tag comes through as 404: one finding (ER-2, the reply code, and
    # ACK-4, the refusal it stands for), however many programs show it.
    [finding] = [f for f in report["findings"] if f["rules"] == ["ER-2", "ACK-4"]]
    assert finding["kind"] == "rejected" and finding["count"] > 1
    assert finding["statement"] == ("channel.close with reply code 404 where AMQP 0-9-1 requires 406 (a settlement of a "
                                    "delivery tag that is not outstanding)")
    shrunk = finding["shrunk"]
    assert shrunk["steps_after"] <= shrunk["steps_before"] and 0 < shrunk["reruns"] <= 12
    name = f"finding-{finding['id']}"
    assert finding["files"] == [str(tmp_path / f"{name}.svg"), str(tmp_path / f"{name}.py")]
    svg = ElementTree.parse(tmp_path / f"{name}.svg").getroot()
    faults = [g for g in svg.iter("{http://www.w3.org/2000/svg}g") if g.get("class") == "fault"]
    frames = [g.findtext("{http://www.w3.org/2000/svg}title") for g in svg.iter("{http://www.w3.org/2000/svg}g")
              if g.get("class") == "frame"]
    assert len(faults) == 1 and "has no explanation" in "".join(faults[0].itertext())
    assert any("channel.close" in f and "reply_code=404" in f for f in frames)
    assert "the spec allowed there: received channel.close" in "".join(svg.itertext())
    assert "guest:guest" not in (tmp_path / f"{name}.py").read_text()
    # The runnable program reproduces the rejection through the proxy, and passes against our broker.
    replay = subprocess.run([sys.executable, str(tmp_path / f"{name}.py"), url], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(REPO)})
    assert replay.returncode == 1 and "reply_code=404" in replay.stdout, replay.stdout[-2000:] + replay.stderr
    assert replay.stdout.splitlines()[-1].startswith("rejected: connection c0")
    honest = subprocess.run([sys.executable, str(tmp_path / f"{name}.py"),
                             f"amqp://guest:guest@{impl_broker_module.host}:{impl_broker_module.port}/"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(REPO)})
    assert honest.returncode == 0 and honest.stdout.splitlines()[-1].startswith("accepted: all"), honest.stdout


def test_an_unwritable_chart_directory_is_one_clear_error(impl_broker_module, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = conformance(f"amqp://guest:guest@{impl_broker_module.host}:{impl_broker_module.port}/",
                         "--chart", str(blocker / "charts"))
    assert result.returncode == 2 and result.stdout == "" and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("rabbitproof conformance: error: --chart: cannot make directory")


def test_coverage_counts_the_actions_of_accepted_explanations_and_the_rules_they_cite():
    coverage = Coverage()
    assert coverage.missing_actions() == list(ACTIONS) and len(ACTIONS) == 37 and len(RULES) == 38
    coverage.add((A.ClientConfirmSelect(0, 1), A.BrokerTakeFrame(0, 1), A.BrokerRestart()))
    report = coverage.report()
    assert report["actions"]["exercised"] == ["ClientConfirmSelect", "BrokerTakeFrame", "BrokerRestart"]
    assert report["rules"]["exercised"] == ["DU-1", "DU-2", "DU-3", "PC-1", "PC-8"]     # DU-1..3 counts as three
    assert len(report["actions"]["never"]) == 34 and len(report["rules"]["never"]) == 33


def test_steering_weighs_the_op_kinds_that_lead_to_what_is_not_covered():
    coverage = Coverage()
    coverage.taken.update(name for name in ACTIONS if name not in ("BrokerCommitOk", "ClientRecover"))
    weights = P.Steering()
    steer(weights, coverage)
    assert weights.factors == {P.TxSelect: 4, P.TxCommit: 4, P.Recover: 4}

    def recovers(steering) -> int:
        drawn: list = []

        @settings(max_examples=40, derandomize=True, database=None, deadline=None,
                  suppress_health_check=list(HealthCheck))
        @given(P.programs(errors=False, rabbitmq_safe=True, steering=steering))
        def draw(program):
            drawn.append(program)
        draw()
        return sum(isinstance(op, P.Recover) for program in drawn for op in program.ops())
    assert recovers(weights) > 2 * recovers(P.Steering())


def _get_ok(tag: int, body: bytes, count: int, redelivered: bool = False):
    return LoggedCommand("received", "method", 1, commands.Basic.GetOk(
        delivery_tag=tag, redelivered=redelivered, exchange="", routing_key="q", message_count=count),
        None, body, 0.0)


def _recording(*replies) -> list:
    """Channel 1 opened, queue q declared, m1, m2 and m3 published, then a basic.get per reply."""
    def sent(method, body=None):
        return LoggedCommand("sent", "method", 1, method, None, body, 0.0)
    log = [sent(commands.Channel.Open()), LoggedCommand("received", "method", 1, commands.Channel.OpenOk(), None,
                                                        None, 0.0),
           sent(commands.Queue.Declare(queue="q")),
           LoggedCommand("received", "method", 1, commands.Queue.DeclareOk(queue="q"), None, None, 0.0),
           sent(commands.Basic.Publish(exchange="", routing_key="q"), b"m1"),
           sent(commands.Basic.Publish(exchange="", routing_key="q"), b"m2"),
           sent(commands.Basic.Publish(exchange="", routing_key="q"), b"m3")]
    for reply in replies:
        log += [sent(commands.Basic.Get(queue="q")), reply]
    return log


def test_a_frame_wrong_only_in_message_count_is_judged_on_and_later_breaks_are_found_DS_2():
    """judge.later: message_count off on both get-oks, then a get-empty while a message is ready: three
    rejections of one recording, each where it is; the first verdict stands."""
    rec = observations.from_recording([[_recording(_get_ok(1, b"m1", 5), _get_ok(2, b"m2", 3),
                                                   LoggedCommand("received", "method", 1, commands.Basic.GetEmpty(),
                                                                 None, None, 0.0))]], judge_texts=False)
    first = Judgement(None, rec.check(), rec)
    assert first.status == "rejected" and first.verdict.index == 8, first.verdict.explain()
    more = later(first)
    assert [j.verdict.index for j in more] == [10, 12], [j.verdict.explain() for j in more]
    assert "message_count=3" in more[0].verdict.explain() and "get-empty" in more[1].verdict.explain()
    # the second get-ok, wrong only in message_count too, was judged on; the get-empty (m3 is ready) was not
    assert first.verdict.index == 8 and first.status == "rejected"


def test_a_frame_with_another_message_is_not_judged_on_RQ_1():
    """A get-ok of m2 where m1 is at the head differs in more than message_count: nothing after it is
    judged (the broker's queue is not the spec's any more)."""
    rec = observations.from_recording([[_recording(_get_ok(1, b"m2", 1), _get_ok(2, b"m1", 0))]], judge_texts=False)
    first = Judgement(None, rec.check(), rec)
    assert first.status == "rejected" and later(first) == []
