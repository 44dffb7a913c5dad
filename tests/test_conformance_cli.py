"""`rabbitproof conformance URL` (make conformance): findings, a table per rule family and the coverage of
the catalogue against a real broker, JSON for machines, and one clear error (exit code 2) for a bad URL, an
unreachable broker or bad credentials."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
from xml.etree import ElementTree

from rabbitproof.conformance.catalogue import RULES as CATALOGUE
from rabbitproof.conformance.command import junit_xml
from rabbitproof.conformance.probes import PROBES
from tests.fixtures.mutants import REPO
from tests.fixtures.patience import REPLY_PATIENCE


def conformance(*args: str, patient: bool = True) -> subprocess.CompletedProcess:
    """`rabbitproof conformance`; ``patient``: with a reply timeout for any load (every broker here answers)."""
    wait = ("--reply-timeout", str(REPLY_PATIENCE)) if patient else ()
    return subprocess.run([sys.executable, "-m", "rabbitproof", "conformance", *args, *wait], cwd=REPO,
                          capture_output=True, text=True, timeout=300)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_json_result_against_the_impl_server(impl_broker_module):
    b = impl_broker_module
    result = conformance(f"amqp://{b.user}:{b.password}@{b.host}:{b.port}/", "--programs", "6", "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert (report["schema"], report["exit_code"], report["verdict"]) == ("rabbitproof.conformance/1", 0, "nothing found")
    assert report["findings"] == [] and report["unsupported"] == [] and report["stopped"] is None
    totals = report["totals"]
    assert totals["probes"] == len(PROBES) and totals["generated"] == 6
    assert totals["programs"] == totals["accepted"] == len(PROBES) + 6
    assert set(report["families"]) == {"DT", "AM", "ACK", "PF", "RQ", "DS", "PC", "TX", "DU", "ER", "RT"}
    assert sum(row["programs"] for row in report["families"].values()) == totals["programs"]   # each once
    # Coverage over the whole catalogue: every rule is covered, named by a finding, or said why not.
    coverage = report["coverage"]
    assert coverage["total"] == len(CATALOGUE) and set(coverage["rules"]) == set(CATALOGUE)
    assert coverage["rules"]["DT-1"] == "covered" and coverage["rules"]["RQ-1"] == "covered"
    assert coverage["rules"]["PC-7"].startswith("unobservable: ")
    assert coverage["rules"]["DU-2"].startswith("not run: it needs broker crashes")
    assert coverage["findings"] == 0 and coverage["covered"] + coverage["unobservable"] <= coverage["total"]
    assert {"ClientPublish", "ClientGet", "BrokerTakeFrame", "ClientReceive"} <= set(coverage["actions"]["exercised"])


def test_junit_for_ci(impl_broker_module, tmp_path):
    b = impl_broker_module
    path = tmp_path / "conformance.xml"
    result = conformance(f"amqp://{b.user}:{b.password}@{b.host}:{b.port}/", "--programs", "3", "--junit", str(path),
                         "--no-probes")
    assert result.returncode == 0, result.stderr[-2000:]
    suite = ElementTree.parse(path).getroot()
    assert suite.tag == "testsuite" and suite.get("tests") == "1" and suite.get("failures") == "0"
    assert [case.get("name") for case in suite.iter("testcase")] == ["no finding"]


def test_each_finding_is_a_failed_case_in_junit():
    finding = {"kind": "rejected", "rules": ["RQ-2"], "statement": "redelivered is false on a message that was "
               "delivered before", "count": 3, "verdict": "rejected: connection c0, observation 3 has no explanation",
               "program": "Program()", "steps": "1. c0: get", "shrunk": None}
    unsupported = {**finding, "kind": "unsupported", "rules": [], "statement": "tx.select is never answered"}
    result = {"findings": [finding, unsupported], "totals": {"seconds": 1.0}}
    suite = ElementTree.fromstring(junit_xml(result, "amqp://x:secret@h/"))
    cases = list(suite.iter("testcase"))
    assert suite.get("failures") == "2" and len(cases) == 2 and "secret" not in junit_xml(result, "amqp://x:secret@h/")
    assert cases[0].get("name") == "[RQ-2] redelivered is false on a message that was delivered before"
    assert cases[1].get("name").startswith("[unsupported] tx.select")
    failure = cases[0].find("failure")
    assert failure.get("type") == "rejected" and "shown by 3 programs" in failure.text and "Program()" in failure.text


def test_report_is_printed(impl_broker_module):
    b = impl_broker_module
    result = conformance(f"amqp://guest:guest@{b.host}:{b.port}", "--programs", "3")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith(f"0 findings in {len(PROBES) + 3} programs")
    assert "programs per rule family" in result.stdout and "steps/s" in result.stdout
    assert "rules of the catalogue: " in result.stdout and "PC-7: unobservable" in result.stdout


def test_bad_numbers_are_one_clear_error():
    for args, message in ((("--time-limit", "0"), "--time-limit must be a positive"),
                          (("--programs", "-1"), "--programs must be 0 or more"),
                          (("--reply-timeout", "0"), "--reply-timeout must be a positive"),
                          (("--reply-timeout", "inf"), "--reply-timeout must be a positive")):
        result = conformance("amqp://127.0.0.1:1/", *args, patient=False)
        assert result.returncode == 2 and result.stderr.count("\n") == 1 and message in result.stderr, result.stderr


def test_unreachable_url_is_one_clear_error():
    result = conformance(f"amqp://guest:guest@127.0.0.1:{free_port()}/")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("rabbitproof conformance: error: cannot reach 127.0.0.1:") and result.stderr.count("\n") == 1


def test_bad_credentials_are_one_clear_error(impl_broker_module):
    b = impl_broker_module
    result = conformance(f"amqp://guest:wrong@{b.host}:{b.port}/")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "guest" in result.stderr and ("refused" in result.stderr or "closed the connection" in result.stderr)


def test_a_broker_that_closes_the_connection_is_one_clear_error():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        child = subprocess.Popen([sys.executable, "-m", "rabbitproof", "conformance", f"amqp://127.0.0.1:{port}"],
                                 cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        peer, _ = server.accept()
        peer.recv(8)
        peer.close()
        out, err = child.communicate(timeout=60)
    assert child.returncode == 2 and err.count("\n") == 1, err
    assert "closed the connection" in err


def test_bad_url_is_one_clear_error():
    result = conformance("http://example.org/")
    assert result.returncode == 2 and "scheme must be amqp://" in result.stderr


def test_the_command_as_a_broker_author_types_it_accepts_rabbitmq_and_our_broker(rabbitmq_node, impl_broker_module):
    """Issue 24: the command with its default program count (100), no other option, against RabbitMQ
    3.10.8 and against our broker: every program accepted, in both dialects' default (standard)."""
    for b in (rabbitmq_node, impl_broker_module):
        result = conformance(f"amqp://{b.user}:{b.password}@{b.host}:{b.port}/", "--json")
        findings = json.loads(result.stdout or "{}").get("findings")
        assert result.returncode == 0, f"{b.kind}: {json.dumps(findings, indent=1)[:6000]}" + result.stderr[-2000:]
        totals = json.loads(result.stdout)["totals"]
        assert totals["generated"] == 100 and totals["accepted"] == totals["programs"] == 100 + len(PROBES), totals


def test_a_time_limit_before_any_program_is_undecided(impl_broker_module):
    b = impl_broker_module
    result = conformance(f"amqp://{b.user}:{b.password}@{b.host}:{b.port}/", "--time-limit", "1e-9", "--json")
    assert result.returncode == 3, result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert report["verdict"] == "undecided" and report["time_limit_reached"] and report["totals"]["programs"] == 0
    assert report["exit_code"] == 3
    text = conformance(f"amqp://{b.user}:{b.password}@{b.host}:{b.port}/", "--time-limit", "1e-9")
    assert text.returncode == 3 and text.stdout.splitlines()[-1] == (
        "conformance: undecided: 0 findings in 0 programs; the time limit was reached (exit 3)")
