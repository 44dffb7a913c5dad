"""Regression tests for three trace-checker defects: reply texts in double quotes, the close-ok a client owes in
the "allowed" list, and missing fields reported with their line number."""

import pytest

from rabbitproof.spec import frames, trace
from rabbitproof.spec.frames import CHANNEL_CLOSE, frame_text
from tests.test_spec_tracekit import cfg, pub


@pytest.mark.parametrize("frame", [
    (CHANNEL_CLOSE, 1, 404, frames.R_NO_EXCHANGE, frames.MISSING_EXCHANGE),
    (CHANNEL_CLOSE, 1, 404, frames.R_NO_QUEUE, 1),
    (CHANNEL_CLOSE, 1, 405, frames.R_LOCKED, 1),
])
def test_parse_reads_double_quoted_reply_texts_PC_9_DU_4(frame):
    # frame_text prints these texts with repr(), in double quotes because they contain single quotes;
    # parse_frame's .strip("'\"") then also strips the text's own closing quote after '/'.
    assert trace.parse_frame(frame_text(frame)) == frame


def test_verdict_allowed_after_a_connection_error_is_only_connect_ER_1():
    text = f"""
    {pub(1)}
    c0 sent basic.recover(ch=2, requeue=False)
    c0 received connection.close(ch=0, reply_code=540, text='NOT_IMPLEMENTED - requeue=false')
    c0 received basic.recover-ok(ch=2)
    """
    verdict = trace.check(trace.parse(text), cfg())
    assert not verdict.ok and verdict.index == 3
    # The broker sends nothing after connection.close; the client can only connect again.
    assert verdict.allowed == ["connect"], verdict.explain()
    assert trace.check(trace.parse(text.replace("c0 received basic.recover-ok(ch=2)", "c0 connect")), cfg()).ok


def test_client_answers_channel_close_when_it_likes_ER_1():
    # A client library answers channel.close as it reads it; a raw client may first use other
    # channels, or the closed one (those frames are dropped until its close-ok reaches the broker).
    text = """
    c0 sent tx.commit(ch=1)
    c0 received channel.close(ch=1, reply_code=406, text='PRECONDITION_FAILED - channel is not transactional')
    c0 sent basic.qos(ch=2, prefetch_count=0, global=False)
    c0 sent basic.qos(ch=1, prefetch_count=0, global=False)
    c0 received basic.qos-ok(ch=2)
    c0 sent channel.close-ok(ch=1)
    c0 sent channel.open(ch=1)
    c0 received channel.open-ok(ch=1)
    """
    assert trace.check(trace.parse(text), cfg()).ok
    # The qos sent on ch1 before its close-ok was dropped: no qos-ok can come back for it.
    bad = text.replace("c0 sent channel.close-ok(ch=1)", "c0 received basic.qos-ok(ch=1)\n    c0 sent channel.close-ok(ch=1)")
    verdict = trace.check(trace.parse(bad), cfg())
    assert not verdict.ok and verdict.index == 5, verdict.explain()


@pytest.mark.parametrize("line", ["c0 sent basic.ack(ch=1, delivery_tag=1)",
                                  "c0 sent basic.ack(delivery_tag=1, multiple=False)"])
def test_parse_error_for_a_missing_field_names_the_line(line):
    # Today: a bare KeyError('multiple') / KeyError('ch'), with no line number.
    with pytest.raises(ValueError, match="^line 2: "):
        trace.parse("c0 lost\n" + line)
