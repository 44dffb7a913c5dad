"""Output for CI: the report's width (COLUMNS, a terminal, a pipe), tables whose headers are never cut, the
verdict line and the JSON document's head; steps as data; the step that does the harm; JUnit for check;
the charts' lifelines, legend and harm mark."""
from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

from rich.console import Console

from rabbitproof.spark_check.results import Trace, TraceStep

from rabbitproof.check.junit import junit_xml
from rabbitproof.cli import main
from rabbitproof.explore.chart import chart_svg, fitted
from rabbitproof.explore.steps import frame_object, harm_step, trace_object
from rabbitproof.output import PIPE_WIDTH, new_table, print_json, verdict_line, width_of

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SVG = "{http://www.w3.org/2000/svg}"


def step(number, actor, action, action_type, *frames, fused=False, changes=()):
    return TraceStep(number, actor, action, action_type, tuple(frames), fused, changes)


def test_the_width_is_columns_else_the_terminal_else_80():
    assert width_of({"COLUMNS": "61"}, terminal=False) == 61
    assert width_of({"COLUMNS": "61"}, terminal=True) == 61
    assert width_of({}, terminal=True) is None                  # rich asks the terminal
    assert width_of({"COLUMNS": "wide"}, terminal=False) == width_of({}, terminal=False) == PIPE_WIDTH == 80


def test_a_narrow_table_wraps_its_cells_but_never_cuts_a_header():
    console = Console(file=io.StringIO(), width=40)
    table = new_table(console, "question", "answer", "rules")
    table.add_row("Can a message the publisher believes delivered be lost?", "cannot happen", "AM-2, ACK-6, PC-4")
    console.print(table)
    text = console.file.getvalue()
    assert "| question" in text and "| answer" in text and "| rules" in text and "…" not in text
    assert all(len(line) <= 40 for line in text.splitlines())
    assert set(text) <= set(map(chr, range(32, 127))) | {"\n"}          # plain ASCII when not a terminal


def test_the_verdict_line_is_one_line_and_the_json_head_names_the_schema():
    console = Console(file=io.StringIO(), width=30)
    verdict_line(console, "check", 3, "work-queue: processed twice not decided (the search stopped)")
    assert console.file.getvalue() == \
        "check: undecided: work-queue: processed twice not decided (the search stopped) (exit 3)\n"
    console = Console(file=io.StringIO(), width=30)
    print_json(console, "trace", {"status": "accepted"}, 0)
    assert json.loads(console.file.getvalue()) == {"schema": "rabbitproof.trace/1", "exit_code": 0,
                                                   "verdict": "nothing found", "status": "accepted"}


def test_a_frame_reads_as_data():
    assert frame_object("c1 broker->client basic.deliver(ch=1, consumer_tag=1, delivery_tag=2, redelivered=True, "
                        "msg=m0.1)") == {
        "connection": "c1", "direction": "broker->client", "method": "basic.deliver",
        "fields": {"ch": 1, "consumer_tag": 1, "delivery_tag": 2, "redelivered": True, "msg": "m0.1"},
        "text": "c1 broker->client basic.deliver(ch=1, consumer_tag=1, delivery_tag=2, redelivered=True, msg=m0.1)"}
    closed = frame_object("c0 broker->client channel.close(ch=1, reply_code=406, text='PRECONDITION_FAILED - a, b')")
    assert closed["fields"] == {"ch": 1, "reply_code": 406, "text": "PRECONDITION_FAILED - a, b"}
    assert frame_object("broker -> consumer: basic.deliver m0") == {
        "from": "broker", "to": "consumer", "text": "broker -> consumer: basic.deliver m0"}
    assert frame_object("something else") == {"text": "something else"}


def test_the_harm_is_done_by_the_first_step_of_the_last_edge():
    steps = (step(1, "broker", "deliver", "BrokerDeliver"), step(2, "network", "connection c1 LOST", "NetworkLoss"),
             step(3, "client c1", "connect", "ClientConnect", fused=True))
    assert harm_step(Trace(steps, "s")) == 2
    assert harm_step(Trace(steps, "s", cycle_start=1)) is None                  # a lasso: the harm is its loop
    assert harm_step(Trace((), "s")) is None
    data = trace_object(Trace(steps, "s"), "the message is lost")
    assert [s["harm"] for s in data["steps"]] == [False, True, False]
    assert (data["harm_step"], data["harm"], data["loop_from"]) == (2, "the message is lost", None)


def test_a_label_gives_up_tags_before_the_flags_that_make_the_point():
    frame = "basic.deliver(ch=1, consumer_tag=1, delivery_tag=2, redelivered=True, msg=m0.1)"
    assert fitted(frame, 80) == "basic.deliver m0.1 ctag=1 tag=2 redelivered"
    assert fitted(frame, 32) == "basic.deliver m0.1 redelivered"
    assert fitted(frame, 10) == "basic.del…"


def vanished_trace() -> Trace:
    """c1 vanishes; the broker, not knowing, delivers to its old connection (held as c2: the spec writes
    no frame there, only the delivery it holds unacknowledged); the client connects again as c1; the
    heartbeat timeout closes c2, and the message goes to c1 a second time."""
    return Trace((
        step(1, "broker", "deliver the head of q0", "BrokerDeliver",
             "c1 broker->client basic.deliver(ch=1, consumer_tag=1, delivery_tag=1, redelivered=False, msg=m0.1)"),
        step(2, "client c1.ch1", "receive the next frame of channel 1", "ClientReceive",
             "c1 broker->client basic.deliver(ch=1, consumer_tag=1, delivery_tag=1, redelivered=False, msg=m0.1)"),
        step(3, "network", "connection c1 VANISHES (the broker has not noticed)", "ClientVanish"),
        step(4, "broker", "deliver the head of q0", "BrokerDeliver",
             changes=(("spec.conns[2].channels[0].unacked", "(Unacked(tag=1, queue=0, key=1, msg=1, redelivered=False, "
                       "persistent=False, consumer=1),)", "(Unacked(tag=1, queue=0, key=1, msg=1, redelivered=False, "
                       "persistent=False, consumer=1), Unacked(tag=2, queue=0, key=2, msg=2, redelivered=False, "
                       "persistent=False, consumer=1))"),)),
        step(5, "client c1", "connect", "ClientConnect"),
        step(6, "broker", "heartbeat timeout: the broker closes the vanished client's old connection (held as c2)",
             "BrokerDetect"),
        step(7, "broker", "deliver the head of q0", "BrokerDeliver",
             "c1 broker->client basic.deliver(ch=1, consumer_tag=1, delivery_tag=1, redelivered=True, msg=m0.1)"),
        step(8, "client c1.ch1", "receive the next frame of channel 1", "ClientReceive",
             "c1 broker->client basic.deliver(ch=1, consumer_tag=1, delivery_tag=1, redelivered=True, msg=m0.1)"),
    ), "s")


def test_a_vanished_client_s_old_connection_has_a_lifeline_and_a_legend_entry():
    svg = chart_svg("t", vanished_trace(), {"c0": "app (c0)", "c1": "worker (c1)"}, harm="a message is processed the "
                    "second time", described={"c0": "publisher 'app'", "c1": "consumer 'worker'"})
    root = ET.fromstring(svg)
    lifelines = {g.get("data-name"): "".join(g.find(f"{SVG}text").itertext())
                 for g in root.iter(f"{SVG}g") if g.get("class") == "lifeline"}
    assert lifelines == {"c1": "worker (c1)", "c2": "old worker (c2)", "broker": "broker",
                         "disk": "disk"}
    to_old = [g for g in root.iter(f"{SVG}g") if g.get("class") == "frame" and g.get("data-to") == "c2"]
    assert [(g.get("data-sent"), g.get("data-read")) for g in to_old] == [("4", "")]       # never read
    assert "".join(to_old[0].find(f"{SVG}text").itertext()) == "basic.deliver m0.2 tag=2 (client gone)"
    legend = [t.text for g in root.iter(f"{SVG}g") if g.get("class") == "legend" for t in g.iter(f"{SVG}text")]
    assert "worker (c1): consumer 'worker'" in legend
    assert any(line.startswith("old worker (c2): the old connection of worker (c1), left open when its client "
                               "vanished at step 3") for line in legend)
    assert "red band, step 8: here a message is processed the second time" in legend
    [harm] = [g for g in root.iter(f"{SVG}g") if g.get("class") == "harm"]
    assert harm.get("data-row") == "8"
    # The label keeps redelivered; the tooltip has the whole frame, where it was written and read.
    again = next(g for g in root.iter(f"{SVG}g") if g.get("class") == "frame" and g.get("data-sent") == "7")
    assert "redelivered" in "".join(again.find(f"{SVG}text").itertext())
    assert again.find(f"{SVG}title").text.endswith(
        "c1 broker->client basic.deliver(ch=1, consumer_tag=1, delivery_tag=1, redelivered=True, msg=m0.1): "
        "written at step 7, read at step 8")


def run(*argv: str) -> tuple[int, str]:
    buffer = io.StringIO()
    code = main(list(argv), Console(file=buffer, width=100))
    return code, buffer.getvalue()


def test_check_stopped_before_it_found_anything_exits_3(tmp_path):
    """A setup where nothing can happen, but not every question is decided without the search (a dead-letter
    queue's messages come back in another order only if the search finds it), stopped at once: undecided,
    not found."""
    code, text = run("check", str(EXAMPLES / "dead-letter.toml"), "--time-limit", "1e-9", "--no-progress",
                     "--no-advice")
    assert code == 3
    assert text.rstrip().splitlines()[-1].startswith("check: undecided: dead-letter: ")


def test_check_junit_has_one_case_per_question(tmp_path):
    path = tmp_path / "report.xml"
    code, text = run("check", str(EXAMPLES / "auto-ack.toml"), "--no-progress", "--no-advice", "--junit", str(path))
    suite = ET.parse(path).getroot()
    cases = suite.findall("testcase")
    assert code == 1 and suite.get("tests") == "5" and suite.get("failures") == "1" and suite.get("errors") == "0"
    assert [c.get("name").split(":")[0] for c in cases] == ["lost", "twice", "order", "loop", "waits"]
    failure = cases[0].find("failure")
    assert failure.get("type") == "can happen" and "connection c1 LOST" in failure.text
    assert all(c.find("failure") is None for c in cases[1:])


def test_check_junit_marks_an_undecided_question_as_an_error(tmp_path):
    from rabbitproof.check.answers import Answer

    class Stub:                                      # only what junit_xml reads
        setup = type("S", (), {"source": "x.toml"})()
        result = type("R", (), {"seconds": 1.0, "error": "time limit of 1 s reached"})()
        answers = (Answer("lost", "Lost?", False, None, ("AM-2",)), Answer("twice", "Twice?", None, None, ()))

    suite = junit_xml(Stub()).getroot()
    assert (suite.get("failures"), suite.get("errors")) == ("0", "1")
    assert suite.findall("testcase")[1].find("error").get("message").startswith("undecided: the search stopped")


def test_a_bad_junit_path_is_refused_before_any_work(tmp_path, capsys):
    code, out = run("check", str(EXAMPLES / "auto-ack.toml"), "--junit", str(tmp_path / "no" / "r.xml"))
    assert code == 2 and out == ""
    assert capsys.readouterr().err.startswith("rabbitproof check: error: --junit: no such directory")


RECORDINGS = EXAMPLES / "recordings"


def test_trace_exit_codes_accepted_rejected_and_a_spent_budget():
    assert run("trace", str(RECORDINGS / "requeue-and-ack.json"))[0] == 0
    code, text = run("trace", str(RECORDINGS / "requeue-not-redelivered.json"))
    assert code == 1 and text.rstrip().splitlines()[-1] == \
        "trace: found: requeue-not-redelivered.json: rejected (exit 1)"
    code, text = run("trace", str(RECORDINGS / "requeue-and-ack.json"), "--max-nodes", "3")
    assert code == 3 and text.rstrip().splitlines()[-1] == \
        "trace: undecided: requeue-and-ack.json: inconclusive (exit 3)"


def test_trace_json_gives_where_it_broke_and_the_observations_as_data():
    code, text = run("trace", str(RECORDINGS / "requeue-not-redelivered.json"), "--json")
    data = json.loads(text)
    assert code == 1 and (data["schema"], data["exit_code"], data["status"]) == ("rabbitproof.trace/1", 1, "rejected")
    broke = data["rejected_at"]
    assert (broke["connection"], broke["observation"]) == ("c1", 11)
    assert broke["allowed"][0].endswith("redelivered=True, msg=m0.2)") and "redelivered=False" in broke["text"]
    assert data["observations"][0] == {"connection": "c0", "direction": "sent", "method": "channel.open",
                                       "fields": {"ch": 1}, "text": "c0 sent channel.open(ch=1)"}
    assert "q0 = 'jobs'" in data["names"]
    code, text = run("trace", str(RECORDINGS / "requeue-and-ack.json"), "--json")
    data = json.loads(text)
    assert code == 0 and data["rejected_at"] is None
    assert data["explanation_steps"][0] == {"action": "ClientChannelOpen", "text": "open channel"}


def test_a_step_says_what_it_changed_in_the_state():
    from typing import NamedTuple

    from rabbitproof.spark_check.results import state_changes

    class Channel(NamedTuple):
        next_tag: int
        unacked: tuple

    class State(NamedTuple):
        channels: tuple
        up: bool

    before = State((Channel(1, ()), Channel(1, ())), True)
    after = State((Channel(1, ()), Channel(2, ((1, 7),))), True)
    assert state_changes(before, after) == [("channels[1].next_tag", "1", "2"), ("channels[1].unacked", "()", "((1, 7),)")]
    assert state_changes(before, before) == []
    assert state_changes(State((), True), State((Channel(1, ()),), False)) == [
        ("channels", "()", "(Channel(next_tag=1, unacked=()),)"), ("up", "True", "False")]


def test_check_json_steps_carry_their_state_changes():
    code, text = run("check", str(EXAMPLES / "auto-ack.toml"), "--json", "--no-progress", "--no-advice")
    steps = {s["number"]: s for s in json.loads(text)["answers"][0]["trace"]["steps"]}
    lost = next(s for s in steps.values() if s["harm"])
    assert lost["text"] == "connection c1 LOST"
    # The delivery in flight to the consumer is gone with its connection: the harm, in the state.
    assert any(c["where"].endswith("conns[1].to_client[1]") and "BasicDeliver" in c["before"] and c["after"] == "()"
               for c in lost["changes"])
    assert all(s["changes"] == [] for s in steps.values() if s["fused"])


def test_a_table_too_wide_for_the_report_is_listed_row_by_row_not_cut():
    from rabbitproof.output import show

    console = Console(file=io.StringIO(), width=40)
    table = new_table(console, "property", "kind", "rules", title="Properties", whole=("property", "kind"))
    table.add_row("confirmed_only_when_on_disk", "always", "PC-5, PC-4")
    show(console, table)
    assert " ".join(console.file.getvalue().split()) == \
        "Properties - property: confirmed_only_when_on_disk; kind: always; rules: PC-5, PC-4"
    wide = Console(file=io.StringIO(), width=80)
    show(wide, table)
    assert "| confirmed_only_when_on_disk | always | PC-5, PC-4 |" in wide.file.getvalue()


def test_the_text_trace_shows_a_delivery_to_a_vanished_client_s_old_connection():
    from rabbitproof.explore.report import print_trace

    console = Console(file=io.StringIO(), width=200)
    print_trace(console, "t", vanished_trace(), harm="a message is processed the second time")
    text = console.file.getvalue()
    assert ("  4. [broker] deliver the head of q0\n       c2 broker->client basic.deliver(ch=1, delivery_tag=2, "
            "redelivered=False, msg=m0.2), never read: its client is gone\n") in text
    assert "  8. [client c1.ch1] receive the next frame of channel 1  <-- here a message is processed the second time" \
        in text


def test_check_names_the_old_connection_a_vanished_client_left_behind():
    code, text = run("check", str(EXAMPLES / "flaky-hosts.toml"), "--json", "--no-progress", "--no-advice")
    names = json.loads(text)["names"]
    assert names["c1"] == "consumer 'fulfilment'"
    assert names["c2"] == "the old connection of consumer 'fulfilment', whose client vanished"
