"""A rejected frame is named by what went wrong, not by the first field that differs: a close whose reply
code is wrong for a refusal the spec owed names that refusal's rule beside ER-2, and a frame the broker sends
on a channel the client has closed is the channel answering after its close (ER-1), whatever the frame."""
from __future__ import annotations

from types import SimpleNamespace

from rabbitproof.spec import frames as F

from rabbitproof.conformance import programs as P
from rabbitproof.conformance.findings import REJECTED, diagnose

Q = (P.QueueFlags(False, False),) * P.QUEUES
PROGRAM = P.Program(Q, 1, (P.Step(0, (P.Ack(1, 9),)),))


def rejected(frame, *allowed: str):
    verdict = SimpleNamespace(observation=("received", frame), allowed=list(allowed))
    return diagnose(SimpleNamespace(status=REJECTED, judgement=SimpleNamespace(verdict=verdict)), PROGRAM)


def test_a_wrong_reply_code_for_an_owed_refusal_names_the_refusal():
    got = rejected(F.make_frame(F.CHANNEL_CLOSE, 1, 404, F.R_ANY, 0),
                   "received channel.close(ch=1, reply_code=406, text='PRECONDITION_FAILED - unknown delivery tag 9')",
                   "sent (any client frame)")
    assert got.rules == ("ER-2", "ACK-4")
    assert got.statement == ("channel.close with reply code 404 where AMQP 0-9-1 requires 406 (a settlement of a "
                             "delivery tag that is not outstanding)")
    plain = rejected(F.make_frame(F.CHANNEL_CLOSE, 1, 404, F.R_ANY, 0),
                     "received channel.close(ch=1, reply_code=406, text='PRECONDITION_FAILED - inequivalent arg')")
    assert plain.rules == ("ER-2",) and plain.key != got.key


def test_a_frame_on_a_channel_the_client_closed_is_an_answer_after_the_close():
    after = rejected(F.make_frame(F.CHANNEL_CLOSE, 1, 406, F.R_ANY, 0),
                     "received channel.close(ch=2, reply_code=404, text=\"NOT_FOUND - no queue 'q0' in vhost '/'\")",
                     "received channel.close-ok(ch=1)", "sent (any client frame)")
    assert after.rules == ("ER-1",) and "after the client's channel.close" in after.statement
    reply = rejected(F.make_frame(F.QUEUE_DECLARE_OK, 1, 0), "received channel.close-ok(ch=1)")
    assert reply.rules == ("ER-1",) and reply.key == after.key          # one finding, whatever the frame
    # A close on that channel with another code than one the spec allows there is a reply code, not ER-1.
    wrong_code = rejected(F.make_frame(F.CHANNEL_CLOSE, 1, 404, F.R_ANY, 0),
                          "received channel.close(ch=1, reply_code=406, text='PRECONDITION_FAILED - unknown delivery "
                          "tag 9')", "received channel.close-ok(ch=1)")
    assert wrong_code.rules == ("ER-2", "ACK-4")
