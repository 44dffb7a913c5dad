"""Message-sequence charts: lifelines, frames as arrows from writer to reader in order, labels with the
method and its fields, faults across the lifelines; and ``--chart DIR`` writes one per trace."""
from __future__ import annotations

import os
import xml.etree.ElementTree as ET

from rich.console import Console

from rabbitproof.spark_check.bundle import load_spec
from rabbitproof.spark_check.engine import LocalEngine

from rabbitproof.cli import main
from rabbitproof.explore.chart import brief, chart_svg

SVG = "{http://www.w3.org/2000/svg}"
SPEC = load_spec()


def hazard_trace(name):
    config = SPEC.config(name)
    result = LocalEngine().explore(SPEC.model, config, SPEC.properties(config))
    return next(p.trace for p in result.properties if p.trace is not None)


def groups(root, cls):
    return [g for g in root.iter(f"{SVG}g") if g.get("class") == cls]


def text_of(element):
    return "".join(element.itertext())


def test_auto_ack_loss_chart_has_its_lifelines_arrows_and_the_lost_connection():
    trace = hazard_trace("hazard_auto_ack_loss")
    root = ET.fromstring(chart_svg("hazard_auto_ack_loss: auto_ack_never_loses found", trace))
    assert [g.get("data-name") for g in groups(root, "lifeline")] == ["c0", "c1", "broker", "disk"]
    frames = groups(root, "frame")
    # In order: the publish (written at step 1, taken at 2), the consume (3 -> 4), then the broker's
    # consume-ok and deliver, never read by c1 before its connection is lost.
    assert [(g.get("data-from"), g.get("data-to"), g.get("data-sent"), g.get("data-read")) for g in frames] == [
        ("c0", "broker", "1", "2"), ("c1", "broker", "3", "4"), ("broker", "c1", "4", ""), ("broker", "c1", "5", "")]
    titles = [g.find(f"{SVG}title").text for g in frames]
    assert titles[0].startswith("basic.publish(ch=1, exchange='', routing_key='q0'")
    assert titles[3].startswith("basic.deliver(ch=1, consumer_tag=1, delivery_tag=1")
    assert text_of(frames[0].find(f"{SVG}text")).startswith("basic.publish m")    # brief: the message first
    assert "in flight" in text_of(frames[3])
    faults = groups(root, "fault")
    assert [(g.get("data-row"), g.get("data-hits")) for g in faults] == [("6", "c1 broker")]
    assert "connection c1 LOST" in text_of(faults[0])


def test_a_crash_is_marked_across_the_broker_and_clients_and_fsync_sits_on_the_disk():
    trace = hazard_trace("hazard_ack_resurrected")
    root = ET.fromstring(chart_svg("t", trace))
    faults = {text_of(g).split("✕ ")[1]: g.get("data-hits") for g in groups(root, "fault")}
    assert faults["CRASH"] == "c0 broker"
    assert [g.get("data-on") for g in groups(root, "step-box") if "fsync" in text_of(g)] == ["disk"]
    assert [g.get("data-sent") for g in groups(root, "frame")] == sorted(
        (g.get("data-sent") for g in groups(root, "frame")), key=int)


def test_chart_option_writes_one_svg_per_counterexample(tmp_path, capsys):
    out = Console(width=200, record=True, file=open(os.devnull, "w"))
    folder = tmp_path / "charts"
    code = main(["explore", "hazard_tx_not_atomic", "--no-progress", "--chart", str(folder)], out=out)
    assert code == 0
    files = sorted(p.name for p in folder.iterdir())
    assert files == ["hazard_tx_not_atomic-tx_commit_atomic.svg"]
    root = ET.parse(folder / files[0]).getroot()
    assert root.find(f"{SVG}text").text.startswith("hazard_tx_not_atomic: tx_commit_atomic found")
    assert any("tx.commit" in g.find(f"{SVG}title").text for g in groups(root, "frame"))
    assert f"chart: {folder / files[0]}" in out.export_text()


def test_frames_in_flight_when_a_client_vanishes_stay_unread_and_later_reads_take_later_frames():
    """RQ-3 (hazard_late_detection): what the broker wrote to the consumer before its client vanished is
    never read (in flight); after it connects again, each read is of a frame written since, on the same
    channel. The vanish is a fault of the client alone: the broker has not noticed."""
    trace = hazard_trace("hazard_late_detection")
    vanish = next(s.number for s in trace.steps if s.action_type == "ClientVanish")
    root = ET.fromstring(chart_svg("t", trace))
    to_c1 = [g for g in groups(root, "frame") if g.get("data-to") == "c1"]
    before = [g for g in to_c1 if int(g.get("data-sent")) < vanish]
    after = [g for g in to_c1 if int(g.get("data-sent")) > vanish]
    assert before and after
    assert all(g.get("data-read") == "" or int(g.get("data-read")) < vanish for g in before)
    assert all(g.get("data-read") == "" or int(g.get("data-read")) > vanish for g in after)
    assert any(g.get("data-read") for g in after)
    faults = [(g.get("data-hits"), text_of(g)) for g in groups(root, "fault")]
    assert [hits for hits, text in faults if "VANISHES" in text] == ["c1"]


def test_labels_are_brief_the_message_first_and_the_whole_frame_in_the_tooltip():
    assert brief("basic.deliver(ch=1, consumer_tag=1, delivery_tag=3, redelivered=True, msg=m0.3)") == \
        "basic.deliver m0.3 ctag=1 tag=3 redelivered"
    assert brief("basic.publish(ch=1, exchange='', routing_key='q0', mandatory=False, persistent=True, msg=m0.1)") \
        == "basic.publish m0.1 key=q0 persistent"
    assert brief("basic.nack(ch=2, delivery_tag=1, multiple=False, requeue=False)") == "basic.nack ch=2 tag=1 no requeue"
    assert brief("confirm.select(ch=1)") == "confirm.select"
    odd = "channel.close(ch=1, reply_code=406, reply_text='PRECONDITION_FAILED - a, b')"
    assert brief(odd) == odd and brief("Basic.Publish") == "Basic.Publish"
