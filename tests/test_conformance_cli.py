"""`rabbitproof conformance URL` (make conformance): a table per rule family against a real broker, JSON for
machines, and one clear error (exit code 2) for a bad URL, an unreachable broker or bad credentials."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
from xml.etree import ElementTree

from rabbitproof.conformance.command import STATUSES, junit_xml
from tests.fixtures.mutants import REPO


def conformance(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rabbitproof", "conformance", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=300)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_json_result_per_family_against_the_impl_server(impl_broker_module):
    b = impl_broker_module
    result = conformance(f"amqp://{b.user}:{b.password}@{b.host}:{b.port}/", "--programs", "6", "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert report["totals"]["programs"] == 6 and report["totals"]["accepted"] == 6
    assert set(report["families"]) == {"DT", "AM", "ACK", "PF", "RQ", "DS", "PC", "TX", "DU", "ER", "RT"}
    assert sum(row["programs"] for row in report["families"].values()) >= 6
    # Coverage: the actions the six accepted runs' explanations took, the rules those cite, and the rest.
    coverage = report["coverage"]
    assert coverage["runs"] == 6 and coverage["actions"]["total"] == 37 and coverage["rules"]["total"] == 38
    assert {"ClientPublish", "ClientGet", "BrokerTakeFrame", "ClientReceive"} <= set(coverage["actions"]["exercised"])
    assert {"BrokerCrash", "BrokerRestart", "ClientVanish"} <= set(coverage["actions"]["never"])
    assert len(coverage["actions"]["exercised"]) + len(coverage["actions"]["never"]) == 37
    assert "PC-1" in coverage["rules"]["exercised"] and "DU-2" in coverage["rules"]["never"]     # ClientPublish; BrokerCrash
    assert all(coverage["actions"]["taken"][name] > 0 for name in coverage["actions"]["exercised"])


def test_junit_for_ci(impl_broker_module, tmp_path):
    b = impl_broker_module
    path = tmp_path / "conformance.xml"
    result = conformance(f"amqp://{b.user}:{b.password}@{b.host}:{b.port}/", "--programs", "3", "--junit", str(path))
    assert result.returncode == 0, result.stderr[-2000:]
    suite = ElementTree.parse(path).getroot()
    assert suite.tag == "testsuite" and suite.get("tests") == "11" and suite.get("failures") == "0"
    assert {case.get("name") for case in suite.iter("testcase")} == {"DT", "AM", "ACK", "PF", "RQ", "DS", "PC", "TX",
                                                                      "DU", "ER", "RT"}


def test_a_family_with_a_program_not_accepted_fails_in_junit():
    families = {f: {"programs": 1, "steps": 3, **{s: 0 for s in STATUSES}, "first_rejection": None}
                for f in ("DT", "ER")}
    families["DT"]["accepted"] = 1
    families["ER"]["rejected"] = 1
    families["ER"]["first_rejection"] = {"status": "rejected", "program": "Program()", "steps": "1. c0: ack",
                                         "verdict": "rejected: connection c0, observation 3 has no explanation"}
    suite = ElementTree.fromstring(junit_xml({"families": families, "totals": {"seconds": 1.0}}, "amqp://x/"))
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert suite.get("failures") == "1" and cases["DT"].find("failure") is None
    failure = cases["ER"].find("failure")
    assert failure.get("type") == "rejected" and failure.get("message").startswith("rejected: connection c0")
    assert "Program()" in failure.text


def test_table_is_printed(impl_broker_module):
    b = impl_broker_module
    result = conformance(f"amqp://guest:guest@{b.host}:{b.port}", "--programs", "3")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "conformance per rule family" in result.stdout and "steps/s" in result.stdout
    assert "spec actions exercised by the 3 accepted runs:" in result.stdout


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
        findings = {f: row["first_rejection"] for f, row in json.loads(result.stdout or "{}").get("families", {}).items()
                    if row["first_rejection"]}
        assert result.returncode == 0, f"{b.kind}: {json.dumps(findings, indent=1)[:6000]}" + result.stderr[-2000:]
        totals = json.loads(result.stdout)["totals"]
        assert totals["programs"] == 100 and totals["accepted"] == 100, totals
