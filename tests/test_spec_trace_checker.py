"""The trace checker itself (spec.trace): the trace files in tests/traces, multi-connection
interleavings, an unobserved broker crash, parse errors, and the rule citations of the property
registry against the rule table (rabbitproof/rules.toml)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from rabbitproof import rules
from rabbitproof.spec import frames, properties, trace
from rabbitproof.spec.frames import FIELDS, METHOD_NAMES, frame_text
from tests.test_spec_tracekit import TRACES, accepted, cfg, pub, rejected_at

REPO = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------- trace files

def trace_files():
    return sorted(TRACES.glob("*.txt"))


def test_trace_files_exist():
    assert len(trace_files()) >= 5


@pytest.mark.parametrize("path", trace_files(), ids=lambda p: p.stem)
def test_trace_file(path):
    """Each file says what the checker must answer (``# expect:``), what the spec allowed where it
    stops (``# allowed:``) and the configuration's changes to the generous default (``# config:``)."""
    text = path.read_text()
    headers = dict(re.findall(r"^# (expect|config): (.*)$", text, re.M))
    allowed = tuple(re.findall(r"^# allowed: (.*)$", text, re.M))
    changes = {k: int(v) for k, v in (item.split("=") for item in headers.get("config", "").split() if item)}
    config = cfg(**changes)
    if headers["expect"] == "accepted":
        accepted(text, config)
    else:
        assert headers["expect"] == "rejected"
        rejected_at(text, allowed=allowed, config=config, exact=True)


# ---------------------------------------------------------------- several connections

def test_interleaving_explained_by_some_schedule():
    # c0's get sees one more message behind m0.1: c1's publish was taken between c0's publish and get.
    text = f"""
    {pub(1)}
    c0 sent basic.get(ch=1, queue=q0, no_ack=False)
    c0 received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m0.1, message_count=1)
    {pub(1, c=1)}
    c1 sent basic.get(ch=1, queue=q0, no_ack=False)
    c1 received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m1.1, message_count=0)
    """
    accepted(text)
    # Or c1's publish came first: c0's get then takes m1.1, and c1's get takes m0.1.
    swapped = text.replace("msg=m0.1, message_count=1)", "msg=m1.1, message_count=1)") \
                  .replace("msg=m1.1, message_count=0)", "msg=m0.1, message_count=0)")
    accepted(swapped)


def test_an_acceptance_names_the_path_of_spec_actions_that_explains_it():
    """``Verdict.path``: the explanation found, action by action (what the conformance suite's coverage
    counts). Here c0 publishes and gets its message back: each client frame is its client action, the
    broker takes each frame, and the client reads the get-ok."""
    verdict = accepted(f"""
    {pub(1)}
    c0 sent basic.get(ch=1, queue=q0, no_ack=True)
    c0 received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m0.1, message_count=0)
    """)
    assert [str(a) for a in verdict.path] == [
        "publish to exchange '' key q0", "get from q0 (automatic ack)", "take the next frame from c0.ch1",
        "take the next frame from c0.ch1", "receive the next frame of channel 1"]


def test_interleaving_no_schedule_explains():
    # c0's own publish is ahead of its get on the same connection: the queue cannot be down to m1.1 alone.
    text = f"""
    {pub(1)}
    c0 sent basic.get(ch=1, queue=q0, no_ack=False)
    c0 received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m1.1, message_count=0)  # REJECTED
    {pub(1, c=1)}
    """
    rejected_at(text, allowed=(
        "received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m0.1, message_count=0)",
        "received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m0.1, message_count=1)",
        "received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m1.1, message_count=1)"), exact=True)


CAUSAL = f"""
{pub(1)}
c0 sent basic.get(ch=2, queue=q0, no_ack=False)
c0 received basic.get-ok(ch=2, delivery_tag=1, redelivered=False, msg=m0.1, message_count=0)
CLOSE
c1 sent basic.get(ch=1, queue=q0, no_ack=False)
c1 received basic.get-ok(ch=1, delivery_tag=1, redelivered=True, msg=m0.1, message_count=0)MARK
"""


def test_redelivery_on_another_connection_needs_the_close_first():
    accepted(CAUSAL.replace("CLOSE", "c0 sent channel.close(ch=2, reply_code=200, text='OK')\n"
                                     "c0 received channel.close-ok(ch=2)").replace("MARK", ""))
    # Without it m0.1 is outstanding on c0 (c0 got it, so c1 cannot have got it first): c1 sees an empty queue.
    rejected_at(CAUSAL.replace("CLOSE\n", "").replace("MARK", "  # REJECTED"), allowed=(
        "received basic.get-empty(ch=1)",), exact=True)


def test_unknown_connection_is_refused():
    with pytest.raises(ValueError, match="c2"):
        trace.check(trace.parse("c2 lost"), cfg())


# ---------------------------------------------------------------- unobserved broker crash

CRASH = f"""
c0 sent confirm.select(ch=1)
c0 received confirm.select-ok(ch=1)
{pub(1, persistent=True)}
{pub(2, persistent=False)}
c0 received basic.ack(ch=1, delivery_tag=1, multiple=False)
c0 received basic.ack(ch=1, delivery_tag=2, multiple=False)
c0 lost
c0 connect
c0 sent basic.consume(ch=1, queue=q0, consumer_tag=1, no_ack=False)
c0 received basic.consume-ok(ch=1, consumer_tag=1)
c0 received basic.deliver(ch=1, consumer_tag=1, delivery_tag=1, redelivered=True, msg=m0.1)
"""


def test_unobserved_crash_explains_redelivered_confirmed_message():
    # Only a crash explains both: m0.2 (transient, confirmed) is gone, and m0.1 is flagged redelivered.
    accepted(CRASH, cfg(crashes=1))
    verdict = trace.check(trace.parse(CRASH), cfg())
    assert not verdict.ok
    assert (verdict.conn, verdict.index) == (0, 10)
    assert verdict.allowed == ["received basic.deliver(ch=1, consumer_tag=1, delivery_tag=1, redelivered=False, "
                               "msg=m0.1)", "sent (any client frame)"]


def test_crash_never_invents_a_message():
    text = CRASH + "c0 received basic.deliver(ch=1, consumer_tag=1, delivery_tag=2, redelivered=True, msg=m0.2)" \
                   "  # REJECTED\n"
    rejected_at(text, allowed=("sent (any client frame)",), config=cfg(crashes=1), exact=True)


def test_crash_with_two_connections_both_lost():
    text = f"""
    {pub(1, persistent=True, c=1)}
    c1 sent basic.qos(ch=1, prefetch_count=0, global=False)
    c1 received basic.qos-ok(ch=1)
    c0 lost
    c1 lost
    c1 connect
    c1 sent basic.get(ch=1, queue=q0, no_ack=False)
    c1 received basic.get-empty(ch=1)
    """
    accepted(text, cfg(crashes=1))
    # Without a crash, c1 losing its connection loses nothing the broker took.
    verdict = trace.check(trace.parse(text), cfg())
    assert not verdict.ok and (verdict.conn, verdict.index) == (1, 6)


# ---------------------------------------------------------------- parse

def test_parse_reads_what_frame_text_prints():
    text = """
    # a comment, then a blank line

    c0 sent basic.publish(ch=1, exchange='fanout', routing_key='q1', mandatory=True, persistent=True, msg=m0.1)
    c1 received basic.deliver(ch=2, consumer_tag=1, delivery_tag=3, redelivered=True, msg=m0.1)  # trailing comment
    c0 lost
    c0 connect
    """
    obs = trace.parse(text)
    assert obs == {
        0: [("sent", (frames.BASIC_PUBLISH, 1, frames.FANOUT_EXCHANGE, 1, 1, 1, 1, 0)), ("lost",), ("connect",)],
        1: [("received", (frames.BASIC_DELIVER, 2, 1, 3, 1, 1))],
    }


def sample_frame(method):
    values = {"msg": 101, "queue": 1, "routing_key": 1, "exchange": frames.DEFAULT_EXCHANGE}
    return (method, 1) + tuple(values.get(name, 1) for name in FIELDS.get(method, ()))


@pytest.mark.parametrize("method", sorted(set(METHOD_NAMES) - {frames.CHANNEL_CLOSE, frames.CONNECTION_CLOSE}))
def test_parse_frame_round_trip(method):
    frame = sample_frame(method)
    assert trace.parse_frame(frame_text(frame)) == frame


@pytest.mark.parametrize("code,reason,detail", [
    (406, frames.R_UNKNOWN_TAG, 5), (406, frames.R_TX_TO_CONFIRM, 0), (406, frames.R_CONFIRM_TO_TX, 0),
    (406, frames.R_NOT_TX, 0), (540, frames.R_RECOVER_NO_REQUEUE, 0), (200, frames.R_NORMAL, 0)])
def test_parse_close_round_trip(code, reason, detail):
    frame = (frames.CHANNEL_CLOSE, 2, code, reason, detail)
    assert trace.parse_frame(frame_text(frame)) == frame


@pytest.mark.parametrize("line,message", [
    ("c0 sent basic.frobnicate(ch=1)", "line 3: not a frame: 'basic.frobnicate(ch=1)'"),
    ("c0 shouted basic.get(ch=1, queue=q0, no_ack=False)", "line 3: cannot read 'c0 shouted basic.get("),
    ("x0 lost", "line 3: cannot read 'x0 lost'"),
    ("c0 sent basic.publish(ch=1, exchange='', routing_key='q0', mandatory=False, persistent=False, msg=m1)",
     "line 3: msg must read m<connection>.<n>, not 'm1'"),
    ("c0 sent basic.get(ch=1, queue=foo, no_ack=False)", "line 3: queue must name a model queue such as 'q0', not 'foo'"),
    ("c0 sent basic.publish(ch=1, exchange='amq.direct', routing_key='q0', mandatory=False, persistent=False, "
     "msg=m0.1)", "line 3: unknown exchange \"'amq.direct'\""),
    ("c0 received channel.close(ch=1, reply_code=406, text='PRECONDITION_FAILED - who knows')",
     "line 3: unknown reply text 'PRECONDITION_FAILED - who knows'"),
    ("c0 sent basic.ack(ch=1, delivery_tag=one, multiple=False)", "line 3: invalid literal for int()"),
])
def test_parse_error_names_the_line(line, message):
    text = f"c0 lost\nc0 connect\n{line}\n"
    with pytest.raises(ValueError) as info:
        trace.parse(text)
    assert str(info.value).startswith(message), str(info.value)


# ---------------------------------------------------------------- rule citations

def semantics_ids() -> list:
    """Every rule ID of the table shipped with the package (rabbitproof/rules.toml)."""
    return list(rules.table().rules)


def test_semantics_lists_every_rule_family():
    ids = semantics_ids()
    assert len(ids) == len(set(ids))
    counts = {}
    for rule in ids:
        family, n = rule.split("-")
        counts[family] = max(counts.get(family, 0), int(n))
    assert counts == {"DT": 3, "AM": 3, "ACK": 7, "PF": 5, "RQ": 6, "DS": 2, "PC": 10, "TX": 11, "DU": 4,
                      "ER": 3, "RT": 3}
    assert len(ids) == sum(counts.values())


def test_properties_cite_only_existing_rules():
    ids = set(semantics_ids())
    bad = {name: [r for r in p.rules if r not in ids] for name, p in properties.REGISTRY.items()}
    assert not {name: rules for name, rules in bad.items() if rules}


def ids_in_test_names() -> set:
    names = []
    for path in sorted(Path(__file__).parent.glob("test_spec_*.py")):
        names += re.findall(r"^def (test_\w+)\(", path.read_text(), re.M)
    return {f"{family}-{n}" for name in names for family, n in re.findall(r"_([A-Z]{2,3})_(\d+)(?=_|$)", name)}


def test_every_rule_cited_by_a_property_or_a_test():
    cited = {r for p in properties.REGISTRY.values() for r in p.rules} | ids_in_test_names()
    assert [rule for rule in semantics_ids() if rule not in cited] == []


def test_every_rule_has_a_spec_test():
    assert [rule for rule in semantics_ids() if rule not in ids_in_test_names()] == []


def test_test_names_cite_only_existing_rules():
    assert sorted(ids_in_test_names() - set(semantics_ids())) == []
