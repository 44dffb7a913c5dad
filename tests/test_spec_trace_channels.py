"""Channels of one connection run concurrently (spec/network.py), as in RabbitMQ 3.10.8: order is
kept within a channel, in both directions, and not across channels; connection-level frames come
after everything sent before them. Each concurrency a real broker shows is accepted, and each order
it keeps is enforced (the rejected variants)."""
from __future__ import annotations

from tests.test_spec_tracekit import accepted, pub, rejected_at
from tests.test_spec_trace_queue import consume, deliver


def test_get_on_one_channel_may_overtake_a_publish_on_another_DS_2():
    # Sent in this order, but on two channels: the get may be handled before the publish.
    accepted(f"""
    {pub(1, ch=2)}
    c0 sent basic.get(ch=1, queue=q0, no_ack=True)
    c0 received basic.get-empty(ch=1)
    """)


def test_get_after_a_publish_on_the_same_channel_sees_it_DS_2():
    text = f"""
    {pub(1, ch=1)}
    c0 sent basic.get(ch=1, queue=q0, no_ack=True)
    c0 received basic.get-empty(ch=1)  # REJECTED
    """
    rejected_at(text, allowed=(
        "received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m0.1, message_count=0)",), exact=True)


def test_deliveries_to_two_channels_reach_the_wire_in_any_order_DS_1():
    # Round robin dispatches m1.1 to channel 1 and m1.2 to channel 2; channel 2's delivery arrives first.
    accepted(f"""
    {consume(ch=1, ctag=1)}
    {consume(ch=2, ctag=2)}
    {pub(1, c=1)}
    {pub(2, c=1)}
    {deliver(1, 'm1.2', ch=2, ctag=2)}
    {deliver(1, 'm1.1', ch=1, ctag=1)}
    """)


def test_deliveries_on_one_channel_keep_their_order_DT_1():
    text = f"""
    {consume(ch=1, ctag=1)}
    {pub(1, c=1)}
    {pub(2, c=1)}
    {deliver(2, 'm1.2', ch=1, ctag=1)}  # REJECTED
    """
    rejected_at(text, allowed=(
        "received basic.deliver(ch=1, consumer_tag=1, delivery_tag=1, redelivered=False, msg=m1.1)",), exact=True)


def test_replies_on_two_channels_in_either_order_ER_1():
    # The get on channel 2 was sent last and answered first.
    accepted(f"""
    {pub(1, ch=1)}
    c0 sent basic.get(ch=1, queue=q0, no_ack=True)
    c0 sent basic.get(ch=2, queue=q0, no_ack=True)
    c0 received basic.get-empty(ch=2)
    c0 received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m0.1, message_count=0)
    """)


def test_connection_close_comes_after_every_channel_RQ_4():
    # connection.close is handled after the publish sent before it on channel 1: the message is in the queue.
    text = f"""
    {pub(1, ch=1)}
    c0 sent connection.close(ch=0, reply_code=200, text='OK')
    c0 received connection.close-ok(ch=0)
    c0 connect
    c0 sent basic.get(ch=2, queue=q0, no_ack=True)
    c0 received basic.get-empty(ch=2)  # REJECTED
    """
    rejected_at(text, allowed=(
        "received basic.get-ok(ch=2, delivery_tag=1, redelivered=False, msg=m0.1, message_count=0)",), exact=True)
