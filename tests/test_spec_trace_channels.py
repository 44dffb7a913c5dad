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


# ---------------------------------------------------------------- what RabbitMQ's channel process reorders
# (spec/network.py, ``read_from``; each accepted trace below was recorded on RabbitMQ 3.10.8, the
# methods of each block sent in one write)

CONSUME = "c0 sent basic.consume(ch=1, queue=q0, consumer_tag=1, no_ack=False)"
CONSUME_OK = "c0 received basic.consume-ok(ch=1, consumer_tag=1)"


def test_consume_ok_is_overtaken_by_the_replies_to_the_next_methods_DS_1():
    # RabbitMQ's queue process sends consume-ok through the channel's mailbox, behind the methods
    # already waiting there: get-empty first (30 of 30), qos-ok first (100 of 100).
    accepted(f"""
    {CONSUME}
    c0 sent basic.get(ch=1, queue=q0, no_ack=False)
    c0 received basic.get-empty(ch=1)
    {CONSUME_OK}
    """)
    accepted(f"""
    {CONSUME}
    c0 sent basic.qos(ch=1, prefetch_count=0, global=False)
    c0 received basic.qos-ok(ch=1)
    {CONSUME_OK}
    """)


def test_a_delivery_never_overtakes_its_consumers_consume_ok_DS_1():
    text = f"""
    {CONSUME}
    {pub(1)}
    {deliver(1, 'm0.1', ch=1)}  # REJECTED
    {CONSUME_OK}
    """
    rejected_at(text, allowed=("received basic.consume-ok(ch=1, consumer_tag=1)",), exact=True)


def test_a_closing_channel_drops_the_consume_ok_but_writes_the_deliveries_DS_1_ER_1():
    # Recorded (20 of 20): consume of a queue with a ready message + channel.close in one write.
    accepted(f"""
    {pub(1)}
    c0 sent basic.qos(ch=1, prefetch_count=0, global=False)
    c0 received basic.qos-ok(ch=1)
    {CONSUME}
    c0 sent channel.close(ch=1, reply_code=200, text='OK')
    {deliver(1, 'm0.1', ch=1)}
    c0 received channel.close-ok(ch=1)
    """)


def test_a_closing_channel_or_connection_never_sends_the_consume_ok_ER_1():
    # A 406, the client's own channel.close, a 530, the client's connection.close: no consume-ok
    # (30 of 30 each).
    accepted(f"""
    {CONSUME}
    c0 sent basic.ack(ch=1, delivery_tag=99, multiple=False)
    c0 received channel.close(ch=1, reply_code=406, text='PRECONDITION_FAILED - unknown delivery tag 99')
    c0 sent channel.close-ok(ch=1)
    """)
    accepted(f"""
    {CONSUME}
    c0 sent channel.close(ch=1, reply_code=200, text='OK')
    c0 received channel.close-ok(ch=1)
    """)
    accepted(f"""
    {CONSUME}
    {CONSUME}
    c0 received connection.close(ch=0, reply_code=530, text="NOT_ALLOWED - attempt to reuse consumer tag '1'")
    """)
    accepted(f"""
    {CONSUME}
    c0 sent connection.close(ch=0, reply_code=200, text='OK')
    c0 received connection.close-ok(ch=0)
    """)


def test_a_reply_to_a_later_method_is_not_dropped_for_a_close_ER_1():
    # Only consume-oks are dropped: the get's reply is written before the channel's close-ok.
    text = f"""
    {pub(1)}
    c0 sent basic.get(ch=1, queue=q0, no_ack=True)
    c0 sent channel.close(ch=1, reply_code=200, text='OK')
    c0 received channel.close-ok(ch=1)  # REJECTED
    """
    rejected_at(text, allowed=(
        "received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m0.1, message_count=0)",), exact=True)


# Recorded (100 of 100): publish + ack of an unknown tag in one write, on a channel consuming the queue.
# The queue dispatched m0.1 to the channel before the error; the channel wrote it after its close, and
# the message, requeued when the channel went, comes back redelivered.
DELIVERED_AFTER_CLOSE = f"""
c0 sent basic.consume(ch=1, queue=q0, consumer_tag=1, no_ack=False)
{CONSUME_OK}
{pub(1)}
c0 sent basic.ack(ch=1, delivery_tag=99, multiple=False)
c0 received channel.close(ch=1, reply_code=406, text='PRECONDITION_FAILED - unknown delivery tag 99')
{deliver(1, 'm0.1', ch=1)}
c0 sent channel.close-ok(ch=1)
c0 sent channel.open(ch=1)
c0 received channel.open-ok(ch=1)
c0 sent basic.get(ch=1, queue=q0, no_ack=False)
c0 received basic.get-ok(ch=1, delivery_tag=1, redelivered=True, msg=m0.1, message_count=0)
"""


def test_deliveries_dispatched_before_a_channel_error_may_follow_its_close_ER_1():
    accepted(DELIVERED_AFTER_CLOSE)
    # Not a message that reached the queue only after the error: the publish behind the bad ack is dropped.
    text = f"""
    c0 sent basic.consume(ch=1, queue=q0, consumer_tag=1, no_ack=False)
    {CONSUME_OK}
    c0 sent basic.ack(ch=1, delivery_tag=99, multiple=False)
    {pub(1)}
    c0 received channel.close(ch=1, reply_code=406, text='PRECONDITION_FAILED - unknown delivery tag 99')
    {deliver(1, 'm0.1', ch=1)}  # REJECTED
    """
    rejected_at(text, allowed=("sent (any client frame)",), exact=True)


def test_the_close_ok_of_a_client_close_comes_after_the_deliveries_RQ_4():
    # A client's close is answered once the channel is gone, after everything it wrote: a delivery
    # never follows the close-ok.
    text = f"""
    c0 sent basic.consume(ch=1, queue=q0, consumer_tag=1, no_ack=False)
    {CONSUME_OK}
    {pub(1)}
    c0 sent channel.close(ch=1, reply_code=200, text='OK')
    c0 received channel.close-ok(ch=1)
    {deliver(1, 'm0.1', ch=1)}  # REJECTED
    """
    rejected_at(text, allowed=("sent (any client frame)",), exact=True)


def test_deliveries_in_flight_are_dropped_when_the_connection_ends_RQ_4():
    # Recorded (20 of 20 each): a publish to the channel's consumer, then a 530 or the client's own
    # connection.close, in one write: no delivery, and the message comes back redelivered.
    for end in ("c0 sent basic.consume(ch=1, queue=q0, consumer_tag=1, no_ack=False)\n"
                "c0 received connection.close(ch=0, reply_code=530, text=\"NOT_ALLOWED - attempt to reuse consumer "
                "tag '1'\")\nc0 sent connection.close-ok(ch=0)",
                "c0 sent connection.close(ch=0, reply_code=200, text='OK')\nc0 received connection.close-ok(ch=0)"):
        accepted(f"""
        c0 sent basic.consume(ch=1, queue=q0, consumer_tag=1, no_ack=False)
        {CONSUME_OK}
        {pub(1)}
        {end}
        c1 sent basic.get(ch=1, queue=q0, no_ack=False)
        c1 received basic.get-ok(ch=1, delivery_tag=1, redelivered=True, msg=m0.1, message_count=0)
        """)


def test_a_reply_in_flight_is_not_dropped_when_the_connection_ends_ER_1():
    text = f"""
    {pub(1)}
    c0 sent basic.get(ch=1, queue=q0, no_ack=False)
    c0 sent connection.close(ch=0, reply_code=200, text='OK')
    c0 received connection.close-ok(ch=0)  # REJECTED
    """
    rejected_at(text, allowed=(
        "received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m0.1, message_count=0)",), exact=True)


def test_a_closing_channel_writes_its_deliveries_after_the_close_ok_it_answers_a_client_close_with_ER_1():
    # Seen in generated programs on RabbitMQ 3.10.8: a 406 closes the channel, the client's own
    # channel.close (sent before it read the 406) is answered with close-ok, and the delivery the queue
    # had dispatched to the channel comes after both; the client's close-ok then ends the channel.
    text = f"""
    c0 sent basic.consume(ch=1, queue=q0, consumer_tag=1, no_ack=False)
    {CONSUME_OK}
    c0 sent tx.rollback(ch=1)
    {pub(1, ch=2)}
    c0 sent channel.close(ch=1, reply_code=200, text='OK')
    c0 received channel.close(ch=1, reply_code=406, text="PRECONDITION_FAILED - channel is not transactional")
    c0 received channel.close-ok(ch=1)
    {deliver(1, 'm0.1', ch=1)}
    c0 sent channel.close-ok(ch=1)
    """
    accepted(text)


def test_a_channel_may_close_before_another_takes_what_came_with_the_connection_close_RQ_4():
    # Seen in generated programs on RabbitMQ 3.10.8: channel 2 holds m0.1; a basic.get on channel 1 and the
    # connection.close in one write: the reader stops both channels at once, so channel 2's delivery may be
    # back in the queue, redelivered, when channel 1's get reaches it (`_closed_before_the_connection`).
    held = f"""
    {pub(1)}
    {pub(2)}
    c0 sent basic.get(ch=2, queue=q0, no_ack=False)
    c0 received basic.get-ok(ch=2, delivery_tag=1, redelivered=False, msg=m0.1, message_count=1)
    c0 sent basic.get(ch=1, queue=q0, no_ack=True)
    c0 sent connection.close(ch=0, reply_code=200, text='OK')
    """
    accepted(held + "c0 received basic.get-ok(ch=1, delivery_tag=1, redelivered=True, msg=m0.1, message_count=1)\n"
             "c0 received connection.close-ok(ch=0)")
    accepted(held + "c0 received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m0.2, message_count=0)\n"
             "c0 received connection.close-ok(ch=0)")
    # Without the connection.close nothing gives m0.1 back.
    rejected_at(held.replace("c0 sent connection.close(ch=0, reply_code=200, text='OK')", "") +
                "c0 received basic.get-ok(ch=1, delivery_tag=1, redelivered=True, msg=m0.1, message_count=1)  # REJECTED")


def test_a_cancel_ok_comes_through_the_mailbox_as_a_consume_ok_does_DS_1_ER_1():
    # Recorded on RabbitMQ 3.10.8 (30 of 30 each): cancel + get in one write: get-empty first; cancel + an
    # unknown tag's ack: channel.close and no cancel-ok.
    consumed = f"""
    c0 sent basic.consume(ch=1, queue=q0, consumer_tag=1, no_ack=False)
    {CONSUME_OK}
    c0 sent basic.cancel(ch=1, consumer_tag=1)
    """
    accepted(consumed + """
    c0 sent basic.get(ch=1, queue=q0, no_ack=False)
    c0 received basic.get-empty(ch=1)
    c0 received basic.cancel-ok(ch=1, consumer_tag=1)
    """)
    errored = consumed + """
    c0 sent basic.ack(ch=1, delivery_tag=9, multiple=False)
    c0 received channel.close(ch=1, reply_code=406, text='PRECONDITION_FAILED - unknown delivery tag 9')
    """
    accepted(errored)
    # Dropped by the close, the cancel-ok never comes after it.
    rejected_at(errored + "c0 received basic.cancel-ok(ch=1, consumer_tag=1)  # REJECTED")
