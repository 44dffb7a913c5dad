"""The frame fuzzer (rabbitproof/fuzz/, `rabbitproof bench fuzz`), small and seeded (ER-1, ER-2, ER-3, DU-1).

A seeded run of 1,000 cases against our broker must find nothing: every answer one AMQP 0-9-1 allows,
pika's round trips clean, the durable messages intact after the cases and after a restart, no error in
the log. The same fuzzer pointed at RabbitMQ 3.10.8 finds what RabbitMQ does wrong with the same input
(541 for a content header whose properties do not decode), which shows the judge can fail. The
pieces are tested on their own: the filler that completes a cut frame and the judge."""

from __future__ import annotations

import json
import random
import struct

import pika
import pytest
from pamqp import commands, frame

from rabbitproof.bench import fuzz as bench_fuzz
from rabbitproof.fuzz import campaign
from rabbitproof.fuzz.cases import ANY_CLEAR, KINDS, Case, bytes_to_complete, channel, connection, make_case

SEED = 20260
FRAME_MAX = 131072
QOS = frame.marshal(commands.Basic.Qos(prefetch_count=1), 1)  # 19 bytes


@pytest.mark.parametrize("data,filler", [
    (QOS, 0),                                  # one whole frame
    (QOS + QOS, 0),
    (QOS[:10], 9),                             # the payload cut: the rest of it and the end
    (QOS + QOS[:3], 4 + 1),                    # a header cut after 3 bytes: its size reads 0 once filled
    (struct.pack(">BHI", 1, 1, 131065), 131065 + 1),   # too large by one: completed, RabbitMQ reads it whole
    (struct.pack(">BHI", 1, 1, 1 << 21), 0),   # far too large: refused at its header
    (struct.pack(">BHI", 1, 1, 1 << 21)[:5], 2),
])
def test_the_filler_completes_exactly_the_last_frame(data, filler):
    assert bytes_to_complete(data, FRAME_MAX) == filler


def test_the_judge_refuses_what_amqp_does_not_allow():
    exact = Case("unknown-delivery-tag", b"", 1, channel(406), keeps_state=True)
    assert campaign.judge(exact, ("channel", 406), "", False) is None
    assert "allowed" in campaign.judge(exact, ("channel", 404), "", False)
    assert "allowed" in campaign.judge(exact, ("silent", 0), "", False)
    assert "allowed" in campaign.judge(exact, ("dropped", 0), "", False)
    flipped = Case("flip", b"", 1, ANY_CLEAR, may_drop=True)
    assert campaign.judge(flipped, ("dropped", 0), "", False) is None
    assert "541" in campaign.judge(flipped, ("connection", 541), "INTERNAL_ERROR", False)
    assert "not a connection error code" in campaign.judge(flipped, ("connection", 404), "", False)
    assert "not a channel error code" in campaign.judge(flipped, ("channel", 501), "", False)
    assert "allowed" in campaign.judge(flipped, ("silent", 0), "", False)
    framing = Case("bad-frame-end", b"", 1, connection(501), may_drop=True)
    unknown = Case("unknown-method", b"", 1, connection(503))
    assert campaign.judge(framing, ("dropped", 0), "", False) is None
    assert campaign.judge(unknown, ("dropped", 0), "", False) is not None   # our broker must say why
    assert campaign.judge(unknown, ("dropped", 0), "", True) is None        # RabbitMQ may drop it


def test_the_cases_are_seeded_and_every_kind_is_drawn():
    first = [make_case(random.Random(f"{SEED}-{n}"), "q") for n in range(600)]
    again = [make_case(random.Random(f"{SEED}-{n}"), "q") for n in range(600)]
    assert first == again
    assert {case.kind for case in first} == set(KINDS)


# How long a case waits for our broker's answer (which always comes) before calling it silent: long enough for
# any load on the machine, and a passing run waits only as long as the broker takes.
PATIENCE = 60.0


def test_a_seeded_run_of_our_broker_breaks_no_rule(impl_broker_module):
    broker = impl_broker_module
    report = campaign.run(broker, 1000, SEED, round_trip_every=50, durable_messages=10, restart=True,
                          timeout=PATIENCE, stderr_text=broker.stderr_text)
    print(f"\n{report.cases} cases, {report.bad_frames} bad frames, {report.connections} connections, "
          f"{report.seconds:.1f} s; {dict(report.replies_by_code())}")
    assert report.failures == []
    assert report.cases == 1000
    assert report.bad_frames > report.cases
    assert 0 < report.malformed_frames < report.bad_frames
    assert report.connections >= 1000 // 10
    assert {kind for kind, _ in report.outcomes} == set(KINDS)
    assert {"connection 501", "connection 503", "connection 504", "connection 505", "channel 404", "channel 406",
            "served"} <= set(report.replies_by_code())
    assert report.round_trips >= report.connections // 50
    assert report.durable_checks == ["after the last case: 10 of 10 intact", "after a restart: 10 of 10 intact"]
    assert report.broker_alive and broker.is_running()
    assert report.log_lines == []


def test_rabbitmq_gets_the_same_cases_and_its_faults_are_found(rabbitmq_node):
    """RabbitMQ 3.10.8 reads a content header's properties only when it routes the message: properties that
    do not decode get 541 INTERNAL_ERROR, or pass unseen, where AMQP 0-9-1 asks for 501 or 502."""
    report = campaign.run(rabbitmq_node, 400, SEED, round_trip_every=100, durable_messages=5, settle=0.1,
                          is_reference=True)
    assert report.broker_alive and report.durable_checks == ["after the last case: 5 of 5 intact"]
    by_kind = {(kind, outcome) for (kind, outcome) in report.outcomes}
    assert ("header-with-bad-properties", ("connection", 541)) in by_kind
    assert any("header-with-bad-properties: 541 internal error" in line for line in report.failures)
    assert ("unknown-delivery-tag", ("channel", 406)) in by_kind
    assert ("bad-frame-end", ("connection", 501)) in by_kind


def test_the_bench_part_reports_and_exits_0_on_our_broker(capsys):
    code = bench_fuzz.main(["--cases", "150", "--targets", "impl", "--round-trip-every", "20", "--json",
                            "--timeout", str(int(PATIENCE))])
    out = capsys.readouterr().out
    document = json.loads(out)
    assert code == 0
    assert document["schema"] == "rabbitproof.bench.fuzz/1"
    impl = document["targets"]["impl"]
    assert impl["cases"] == 150 and impl["failures"] == [] and impl["broker_alive"]
    assert sum(impl["replies"].values()) == 150


@pytest.mark.parametrize("argv,message", [
    (["--cases", "0"], "--cases: 0 is out of range"),
    (["--targets", "impl,nothing"], "--targets: 'nothing' is not a target; choose from impl, rabbitmq"),
    (["--seed", "x"], "--seed: not an integer"),
])
def test_bad_options_are_one_line_and_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as stopped:
        bench_fuzz.parse_args(argv)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


class LosingBroker:
    """Our broker, except that its restart loses the durable queue's messages (a planted fault)."""

    def __init__(self, broker) -> None:
        self.broker = broker
        self.kind, self.host, self.port = broker.kind, broker.host, broker.port
        self.user, self.password = broker.user, broker.password

    def is_running(self) -> bool:
        return self.broker.is_running()

    def restart(self) -> None:
        with pika.BlockingConnection(campaign.pika_parameters(self.host, self.port, self.user,
                                                              self.password)) as conn:
            conn.channel().queue_purge(campaign.DURABLE_QUEUE)
        self.broker.restart()


class DyingBroker(LosingBroker):
    """Our broker, reported stopped after its first connections (as if it had crashed)."""

    def __init__(self, broker) -> None:
        super().__init__(broker)
        self.asked = 0

    def is_running(self) -> bool:
        self.asked += 1
        return self.asked < 30


def test_lost_durable_messages_are_a_failure(impl_broker_module):
    report = campaign.run(LosingBroker(impl_broker_module), 50, SEED, durable_messages=5, restart=True)
    assert report.durable_checks[0] == "after the last case: 5 of 5 intact"
    assert report.durable_checks[1].startswith("after a restart: the durable queue holds 0 messages")
    assert report.failures == [f"durable data {report.durable_checks[1]}"]


def test_a_broker_that_stops_is_a_failure(impl_broker_module):
    report = campaign.run(DyingBroker(impl_broker_module), 500, SEED, durable_messages=5)
    assert not report.broker_alive
    assert report.failures == ["the broker is not running after connection 30"]
    assert report.cases < 500 and report.durable_checks == []
