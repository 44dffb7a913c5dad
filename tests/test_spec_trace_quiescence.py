"""The end of a program is quiescence (``c0 quiet``, spec/trace.py ``quiescent``): after a last round trip
on each channel and a wait, what the broker owes (a confirm, a delivery within prefetch, a return) must
have come; a trace without it is rejected at the mark."""
from __future__ import annotations

from rabbitproof.spec.roles import QueueSpec
from tests.test_spec_tracekit import accepted, cfg, pub, rejected_at


CONFIRMED = f"""
c0 sent confirm.select(ch=1)
c0 received confirm.select-ok(ch=1)
{pub(1)}
c0 received basic.ack(ch=1, delivery_tag=1, multiple=False)
c0 quiet
"""

CONSUMED = f"""
{pub(1)}
c0 sent basic.consume(ch=2, queue=q0, consumer_tag=1, no_ack=False)
c0 received basic.consume-ok(ch=2, consumer_tag=1)
c0 received basic.deliver(ch=2, consumer_tag=1, delivery_tag=1, redelivered=False, msg=m0.1)
c0 quiet
"""

RETURNED = f"""
{pub(1, key='q1', mandatory=True)}
c0 received basic.return(ch=1, reply_code=312, msg=m0.1)
c0 quiet
"""


def test_what_the_broker_owes_has_come_by_the_quiet_mark_PC_2_DS_1_RT_3():
    for text in (CONFIRMED, CONSUMED, RETURNED):
        accepted(text, cfg(queues=(QueueSpec(durable=True), QueueSpec(declared=False))))
        # Without the confirm, the delivery or the return the mark is where the trace breaks.
        dropped = "\n".join(line for line in text.splitlines() if "received basic.ack" not in line and
                            "received basic.deliver" not in line and "received basic.return" not in line)
        rejected_at(dropped.replace("c0 quiet", "c0 quiet  # REJECTED"),
                    config=cfg(queues=(QueueSpec(durable=True), QueueSpec(declared=False))))
    # A consumer with no room is owed nothing: prefetch 1 and one delivery outstanding.
    accepted(f"""
    {pub(1)}
    {pub(2)}
    c0 sent basic.qos(ch=2, prefetch_count=1, global=False)
    c0 received basic.qos-ok(ch=2)
    c0 sent basic.consume(ch=2, queue=q0, consumer_tag=1, no_ack=False)
    c0 received basic.consume-ok(ch=2, consumer_tag=1)
    c0 received basic.deliver(ch=2, consumer_tag=1, delivery_tag=1, redelivered=False, msg=m0.1)
    c0 quiet
    """)
