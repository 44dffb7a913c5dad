"""Hand-written traces for delivery tags (DT), acknowledgement modes (AM) and settling (ACK):
each rule's example is accepted by the trace checker, and corrupted variants are rejected at the
corrupted observation, with what the spec allowed there."""
from __future__ import annotations

from rabbitproof.spec import machine, properties, trace
from rabbitproof.spec.frames import BASIC_ACK, CHANNEL_CLOSE, PRECONDITION_FAILED, R_UNKNOWN_TAG
from rabbitproof.spec.properties import MAX_DELIVERY_TAG
from rabbitproof.spec.roles import QueueSpec
from rabbitproof.spec.state import NEW_CHANNEL
from rabbitproof.spec.storage import with_channel
from tests.test_spec_tracekit import (
    accepted, cfg, client_close, close_406, pub, rejected_at,
)

TWO_QUEUES = cfg(queues=(QueueSpec(durable=True), QueueSpec(durable=True)))


# ---------------------------------------------------------------- DT: delivery tags

DT1 = f"""
{pub(1)}
{pub(2)}
{pub(3)}
{pub(4)}
c0 sent basic.qos(ch=2, prefetch_count=1, global=False)
c0 received basic.qos-ok(ch=2)
c0 sent basic.consume(ch=2, queue=q0, consumer_tag=1, no_ack=False)
c0 received basic.consume-ok(ch=2, consumer_tag=1)
c0 received basic.deliver(ch=2, consumer_tag=1, delivery_tag=1, redelivered=False, msg=m0.1)
c0 sent basic.get(ch=2, queue=q0, no_ack=False)
c0 received basic.get-ok(ch=2, delivery_tag=2, redelivered=False, msg=m0.2, message_count=2)
c0 sent basic.get(ch=1, queue=q0, no_ack=True)
c0 received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m0.3, message_count=1)
c0 sent basic.ack(ch=2, delivery_tag=1, multiple=False)
c0 received basic.deliver(ch=2, consumer_tag=1, delivery_tag=3, redelivered=False, msg=m0.4)
"""


def test_tags_count_per_channel_across_consumers_and_gets_DT_1():
    accepted(DT1)


def test_tag_scoped_to_channel_not_connection_DT_1():
    bad = DT1.replace("get-ok(ch=1, delivery_tag=1,", "get-ok(ch=1, delivery_tag=3,") \
             .replace("message_count=1)", "message_count=1)  # REJECTED")
    rejected_at(bad, allowed=(
        "received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m0.3, message_count=1)",), exact=True)


def test_tag_never_reused_on_a_channel_DT_1():
    bad = DT1.replace("delivery_tag=3, redelivered=False, msg=m0.4)",
                      "delivery_tag=2, redelivered=False, msg=m0.4)  # REJECTED")
    rejected_at(bad, allowed=(
        "received basic.deliver(ch=2, consumer_tag=1, delivery_tag=3, redelivered=False, msg=m0.4)",))


def test_first_tag_is_one_DT_1():
    bad = DT1.replace("delivery_tag=1, redelivered=False, msg=m0.1)",
                      "delivery_tag=0, redelivered=False, msg=m0.1)  # REJECTED")
    rejected_at(bad, allowed=(
        "received basic.deliver(ch=2, consumer_tag=1, delivery_tag=1, redelivered=False, msg=m0.1)",))


DT2 = f"""
{pub(1)}
c0 sent basic.consume(ch=2, queue=q0, consumer_tag=1, no_ack=False)
c0 received basic.consume-ok(ch=2, consumer_tag=1)
c0 received basic.deliver(ch=2, consumer_tag=1, delivery_tag=1, redelivered=False, msg=m0.1)
c0 sent basic.reject(ch=2, delivery_tag=1, requeue=True)
c0 received basic.deliver(ch=2, consumer_tag=1, delivery_tag=2, redelivered=True, msg=m0.1)
c0 sent basic.ack(ch=2, delivery_tag=2, multiple=False)
"""


def test_redelivery_gets_a_new_tag_DT_2():
    accepted(DT2)
    bad = DT2.replace("delivery_tag=2, redelivered=True, msg=m0.1)",
                      "delivery_tag=1, redelivered=True, msg=m0.1)  # REJECTED")
    rejected_at(bad, allowed=(
        "received basic.deliver(ch=2, consumer_tag=1, delivery_tag=2, redelivered=True, msg=m0.1)",), exact=True)


def test_largest_tag_is_a_valid_tag_in_a_406_DT_3():
    text = f"""
    {pub(1)}
    c0 sent basic.get(ch=1, queue=q0, no_ack=False)
    c0 received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m0.1, message_count=0)
    c0 sent basic.ack(ch=1, delivery_tag={MAX_DELIVERY_TAG}, multiple=False)
    {close_406(0, 1, MAX_DELIVERY_TAG)}
    """
    accepted(text)
    obs = trace.parse(text)
    assert obs[0][3] == ("sent", (BASIC_ACK, 1, 2**63 - 1, 0))
    assert obs[0][4] == ("received", (CHANNEL_CLOSE, 1, PRECONDITION_FAILED, R_UNKNOWN_TAG, 2**63 - 1))


def test_tag_range_property_bounds_at_2_63_minus_1_DT_3():
    assert MAX_DELIVERY_TAG == 2**63 - 1
    prop = properties.get("delivery_tags_in_range")
    assert "DT-3" in prop.rules
    state = machine.initial_states(cfg())[0]
    assert prop.holds(state)
    last_ok = with_channel(state, 0, 1, NEW_CHANNEL._replace(next_tag=MAX_DELIVERY_TAG + 1))
    assert prop.holds(last_ok)
    beyond = with_channel(state, 0, 1, NEW_CHANNEL._replace(next_tag=MAX_DELIVERY_TAG + 2))
    assert not prop.holds(beyond)


# ---------------------------------------------------------------- AM: acknowledgement modes

AM1 = f"""
{pub(1, key='q0')}
{pub(2, key='q1')}
c0 sent basic.consume(ch=2, queue=q0, consumer_tag=1, no_ack=True)
c0 received basic.consume-ok(ch=2, consumer_tag=1)
c0 received basic.deliver(ch=2, consumer_tag=1, delivery_tag=1, redelivered=False, msg=m0.1)
c0 sent basic.get(ch=2, queue=q1, no_ack=False)
c0 received basic.get-ok(ch=2, delivery_tag=2, redelivered=False, msg=m0.2, message_count=0)
c0 sent basic.ack(ch=2, delivery_tag=1, multiple=False)
{close_406(0, 2, 1)}
c0 sent basic.get(ch=1, queue=q1, no_ack=False)
c0 received basic.get-ok(ch=1, delivery_tag=1, redelivered=True, msg=m0.2, message_count=0)
c0 sent basic.get(ch=1, queue=q0, no_ack=False)
c0 received basic.get-empty(ch=1)
"""


def test_mode_chosen_per_consume_and_per_get_AM_1():
    accepted(AM1, TWO_QUEUES)


def test_manual_get_beside_automatic_consumer_stays_outstanding_AM_1():
    bad = AM1.replace("redelivered=True, msg=m0.2, message_count=0)",
                      "redelivered=True, msg=m0.2, message_count=0)  # REJECTED") \
             .replace("basic.get(ch=1, queue=q1", "basic.get(ch=1, queue=q0")
    # m0.2 was a manual get from q1, requeued to q1 by the channel error: q0 is empty.
    rejected_at(bad, allowed=("received basic.get-empty(ch=1)",), config=TWO_QUEUES, exact=True)


def test_automatic_delivery_never_requeued_on_channel_close_AM_2():
    bad = AM1.replace("c0 received basic.get-empty(ch=1)",
                      "c0 received basic.get-ok(ch=1, delivery_tag=2, redelivered=True, msg=m0.1, "
                      "message_count=0)  # REJECTED")
    rejected_at(bad, allowed=("received basic.get-empty(ch=1)",), config=TWO_QUEUES, exact=True)


AM2_NO_PREFETCH = f"""
{pub(1)}
{pub(2)}
{pub(3)}
c0 sent basic.qos(ch=2, prefetch_count=1, global=False)
c0 received basic.qos-ok(ch=2)
c0 sent basic.qos(ch=2, prefetch_count=1, global=True)
c0 received basic.qos-ok(ch=2)
c0 sent basic.consume(ch=2, queue=q0, consumer_tag=1, no_ack=NOACK)
c0 received basic.consume-ok(ch=2, consumer_tag=1)
c0 received basic.deliver(ch=2, consumer_tag=1, delivery_tag=1, redelivered=False, msg=m0.1)
c0 received basic.deliver(ch=2, consumer_tag=1, delivery_tag=2, redelivered=False, msg=m0.2)  MARK
c0 received basic.deliver(ch=2, consumer_tag=1, delivery_tag=3, redelivered=False, msg=m0.3)
"""


def test_no_prefetch_limit_for_automatic_consumers_AM_2():
    accepted(AM2_NO_PREFETCH.replace("NOACK", "True").replace("MARK", ""))
    # The same deliveries in manual mode break the prefetch of 1.
    rejected_at(AM2_NO_PREFETCH.replace("NOACK", "False").replace("MARK", "# REJECTED"),
                allowed=("sent (any client frame)",), exact=True)


def test_automatic_delivery_lost_with_its_connection_AM_2():
    # The publish goes on the consumer's channel, so consume-ok proves the broker took it first.
    text = f"""
    {pub(1, ch=2)}
    c0 sent basic.consume(ch=2, queue=q0, consumer_tag=1, no_ack=NOACK)
    c0 received basic.consume-ok(ch=2, consumer_tag=1)
    c0 lost
    c0 connect
    c0 sent basic.get(ch=1, queue=q0, no_ack=False)
    c0 received basic.get-empty(ch=1)  MARK
    """
    accepted(text.replace("NOACK", "True").replace("MARK", ""))
    # In manual mode the message is requeued when the connection is lost (RQ-4), never gone.
    rejected_at(text.replace("NOACK", "False").replace("MARK", "# REJECTED"), allowed=(
        "received basic.get-ok(ch=1, delivery_tag=1, redelivered=True, msg=m0.1, message_count=0)",
        "received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m0.1, message_count=0)"), exact=True)


AM3 = f"""
{pub(1)}
c0 sent basic.consume(ch=2, queue=q0, consumer_tag=1, no_ack=False)
c0 received basic.consume-ok(ch=2, consumer_tag=1)
c0 received basic.deliver(ch=2, consumer_tag=1, delivery_tag=1, redelivered=False, msg=m0.1)
c0 sent basic.get(ch=1, queue=q0, no_ack=False)
c0 received basic.get-empty(ch=1)
{client_close(0, 2)}
c0 sent basic.get(ch=1, queue=q0, no_ack=False)
c0 received basic.get-ok(ch=1, delivery_tag=1, redelivered=True, msg=m0.1, message_count=0)
"""


def test_manual_delivery_outstanding_until_channel_closes_AM_3():
    accepted(AM3)
    bad = AM3.replace("redelivered=True, msg=m0.1, message_count=0)",
                      "redelivered=True, msg=m0.1, message_count=0)  # REJECTED", 1) \
             .replace("c0 received basic.get-empty(ch=1)\n", "", 1) \
             .replace("c0 sent basic.get(ch=1, queue=q0, no_ack=False)\n", "", 1)
    # Without the close, the outstanding delivery is not back in the queue.
    bad = bad.replace("c0 sent channel.close(ch=2, reply_code=200, text='OK')\n"
                      "c0 received channel.close-ok(ch=2)\n", "")
    rejected_at(bad, allowed=("received basic.get-empty(ch=1)",), exact=True)


# ---------------------------------------------------------------- ACK: settling deliveries

def gets(n: int, c: int = 0, ch: int = 2, first_tag: int = 1, first_msg: int = 1, left: int = 0,
         redelivered: bool = False) -> str:
    """n manual basic.get round trips on channel ch, returning consecutive messages of c0."""
    lines = []
    for i in range(n):
        lines.append(f"c{c} sent basic.get(ch={ch}, queue=q0, no_ack=False)")
        lines.append(f"c{c} received basic.get-ok(ch={ch}, delivery_tag={first_tag + i}, "
                     f"redelivered={redelivered}, msg=m0.{first_msg + i}, message_count={left + n - 1 - i})")
    return "\n".join(lines)


ACK1 = f"""
{pub(1)}
{pub(2)}
{pub(3)}
{gets(3)}
c0 sent basic.ack(ch=2, delivery_tag=2, multiple=False)
{client_close(0, 2)}
c0 sent basic.get(ch=1, queue=q0, no_ack=False)
c0 received basic.get-ok(ch=1, delivery_tag=1, redelivered=True, msg=m0.1, message_count=1)
c0 sent basic.get(ch=1, queue=q0, no_ack=False)
c0 received basic.get-ok(ch=1, delivery_tag=2, redelivered=True, msg=m0.3, message_count=0)
c0 sent basic.get(ch=1, queue=q0, no_ack=False)
c0 received basic.get-empty(ch=1)
"""


def test_single_ack_settles_exactly_that_delivery_ACK_1():
    accepted(ACK1)


def test_single_ack_does_not_settle_lower_tags_ACK_1():
    bad = ACK1.replace("redelivered=True, msg=m0.1, message_count=1)",
                       "redelivered=True, msg=m0.2, message_count=1)  # REJECTED")
    rejected_at(bad, allowed=(
        "received basic.get-ok(ch=1, delivery_tag=1, redelivered=True, msg=m0.1, message_count=1)",), exact=True)


# The seed's example (002_*.txt): tags 5, 6, 7 and 8 outstanding, ack(8, multiple=true) settles all four;
# with multiple=false 5, 6 and 7 stay outstanding. With a prefetch of 4, settling frees room (PF-3).
ACK2 = f"""
{chr(10).join(pub(n) for n in range(1, 9))}
c0 sent basic.qos(ch=2, prefetch_count=4, global=False)
c0 received basic.qos-ok(ch=2)
c0 sent basic.consume(ch=2, queue=q0, consumer_tag=1, no_ack=False)
c0 received basic.consume-ok(ch=2, consumer_tag=1)
{chr(10).join(f"c0 received basic.deliver(ch=2, consumer_tag=1, delivery_tag={t}, redelivered=False, msg=m0.{t})"
              for t in range(1, 5))}
c0 sent basic.ack(ch=2, delivery_tag=4, multiple=True)
{chr(10).join(f"c0 received basic.deliver(ch=2, consumer_tag=1, delivery_tag={t}, redelivered=False, msg=m0.{t})"
              for t in range(5, 9))}
c0 sent basic.ack(ch=2, delivery_tag=8, multiple=MULTIPLE)
"""


def test_multiple_ack_settles_up_to_tag_ACK_2():
    # After ack(8, multiple=true), tag 5 is no longer outstanding: acking it is an unknown tag.
    accepted(ACK2.replace("MULTIPLE", "True") + "c0 sent basic.ack(ch=2, delivery_tag=5, multiple=False)\n"
             + close_406(0, 2, 5))


def test_single_ack_of_8_leaves_5_6_7_outstanding_ACK_2():
    text = ACK2.replace("MULTIPLE", "False") + client_close(0, 2) + "\n" + "\n".join(
        f"c0 sent basic.get(ch=1, queue=q0, no_ack=False)\n"
        f"c0 received basic.get-ok(ch=1, delivery_tag={t - 4}, redelivered=True, msg=m0.{t}, message_count={7 - t})"
        for t in (5, 6, 7))
    accepted(text)


def test_multiple_ack_leaves_nothing_to_requeue_ACK_2():
    text = ACK2.replace("MULTIPLE", "True") + client_close(0, 2) + """
c0 sent basic.get(ch=1, queue=q0, no_ack=False)
c0 received basic.get-ok(ch=1, delivery_tag=1, redelivered=True, msg=m0.5, message_count=2)  # REJECTED
"""
    rejected_at(text, allowed=("received basic.get-empty(ch=1)",), exact=True)


def test_multiple_ack_then_ack_of_a_settled_tag_is_refused_ACK_2():
    text = ACK2.replace("MULTIPLE", "True") + """
c0 sent basic.ack(ch=2, delivery_tag=7, multiple=False)
c0 sent basic.qos(ch=2, prefetch_count=4, global=False)
c0 received basic.qos-ok(ch=2)  # REJECTED
"""
    rejected_at(text, allowed=(
        "received channel.close(ch=2, reply_code=406, text='PRECONDITION_FAILED - unknown delivery tag 7')",),
        exact=True)


ACK3 = f"""
{pub(1)}
{pub(2)}
{pub(3)}
{gets(3)}
c0 sent basic.METHOD(ch=2, delivery_tag=0, multiple=True ARGS)
"""


def test_ack_tag_zero_multiple_settles_all_ACK_3():
    text = ACK3.replace("METHOD", "ack").replace(" ARGS", "") + \
        "c0 sent basic.ack(ch=2, delivery_tag=3, multiple=False)\n" + close_406(0, 2, 3) + """
c0 sent basic.get(ch=1, queue=q0, no_ack=False)
c0 received basic.get-empty(ch=1)
"""
    accepted(text)


def test_nack_tag_zero_multiple_requeues_all_ACK_3():
    text = ACK3.replace("METHOD", "nack").replace(" ARGS", ", requeue=True") + "\n" + \
        gets(3, ch=1, redelivered=True)
    accepted(text)
    # Tag 0 settled them all: none is outstanding on ch2 any more.
    bad = text + "\nc0 sent basic.ack(ch=2, delivery_tag=1, multiple=False)\n" \
        "c0 sent basic.get(ch=2, queue=q0, no_ack=False)\n" \
        "c0 received basic.get-empty(ch=2)  # REJECTED\n"
    rejected_at(bad, allowed=(
        "received channel.close(ch=2, reply_code=406, text='PRECONDITION_FAILED - unknown delivery tag 1')",),
        exact=True)


def test_ack_tag_zero_without_multiple_is_an_unknown_tag_ACK_3():
    text = ACK3.replace("METHOD", "ack").replace("multiple=True ARGS", "multiple=False") + close_406(0, 2, 0)
    accepted(text)


ACK4 = f"""
{pub(1)}
{pub(2)}
{gets(2)}
c0 sent basic.ack(ch=2, delivery_tag=5, multiple=True)
c0 received channel.close(ch=2, reply_code=406, text='PRECONDITION_FAILED - unknown delivery tag 5')
c0 sent channel.close-ok(ch=2)
{gets(2, ch=1, redelivered=True)}
"""


def test_unknown_tag_is_406_and_nothing_of_it_applied_ACK_4():
    accepted(ACK4)


def test_unknown_tag_wrong_reply_code_rejected_ACK_4():
    bad = ACK4.replace("reply_code=406, text='PRECONDITION_FAILED - unknown delivery tag 5')",
                       "reply_code=404, text='PRECONDITION_FAILED - unknown delivery tag 5')  # REJECTED")
    rejected_at(bad, allowed=(
        "received channel.close(ch=2, reply_code=406, text='PRECONDITION_FAILED - unknown delivery tag 5')",),
        exact=True)


def test_unknown_tag_wrong_reply_text_rejected_ACK_4():
    bad = ACK4.replace("unknown delivery tag 5')", "unknown delivery tag 2')  # REJECTED")
    rejected_at(bad, allowed=(
        "received channel.close(ch=2, reply_code=406, text='PRECONDITION_FAILED - unknown delivery tag 5')",),
        exact=True)


def test_unknown_tag_error_applies_nothing_so_both_are_requeued_ACK_4():
    # ack(5, multiple) on tags 1, 2: had it settled 1 and 2, the queue would be empty. (The gets come
    # back when the close-ok reaches the broker, so the get goes on the same channel, after it.)
    bad = ACK4.split(gets(2, ch=1, redelivered=True))[0] + \
        "c0 sent channel.open(ch=2)\nc0 received channel.open-ok(ch=2)\n" + \
        "c0 sent basic.get(ch=2, queue=q0, no_ack=False)\nc0 received basic.get-empty(ch=2)  # REJECTED\n"
    rejected_at(bad, allowed=(
        "received basic.get-ok(ch=2, delivery_tag=1, redelivered=True, msg=m0.1, message_count=1)",), exact=True)


def test_tag_of_another_channel_is_unknown_ACK_4():
    text = f"""
    {pub(1)}
    c0 sent basic.get(ch=1, queue=q0, no_ack=False)
    c0 received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m0.1, message_count=0)
    c0 sent basic.ack(ch=2, delivery_tag=1, multiple=False)
    {close_406(0, 2, 1)}
    c0 sent basic.ack(ch=1, delivery_tag=1, multiple=False)
    c0 sent channel.open(ch=2)
    c0 received channel.open-ok(ch=2)
    """
    accepted(text)


def test_automatic_mode_tag_is_unknown_ACK_4():
    text = f"""
    {pub(1)}
    c0 sent basic.get(ch=1, queue=q0, no_ack=True)
    c0 received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m0.1, message_count=0)
    c0 sent basic.ack(ch=1, delivery_tag=1, multiple=False)
    c0 sent basic.qos(ch=1, prefetch_count=1, global=False)
    c0 received basic.qos-ok(ch=1)  # REJECTED
    """
    rejected_at(text, allowed=(
        "received channel.close(ch=1, reply_code=406, text='PRECONDITION_FAILED - unknown delivery tag 1')",),
        exact=True)


ACK5 = f"""
{pub(1)}
{pub(2)}
{pub(3)}
{gets(3)}
SETTLE
{client_close(0, 2)}
"""


def test_reject_settles_one_delivery_ACK_5():
    text = ACK5.replace("SETTLE", "c0 sent basic.reject(ch=2, delivery_tag=3, requeue=False)") + \
        gets(2, ch=1, redelivered=True) + "\nc0 sent basic.get(ch=1, queue=q0, no_ack=False)\n" \
        "c0 received basic.get-empty(ch=1)\n"
    accepted(text)


def test_nack_multiple_settles_several_ACK_5():
    text = ACK5.replace("SETTLE", "c0 sent basic.nack(ch=2, delivery_tag=3, multiple=True, requeue=False)") + \
        "c0 sent basic.get(ch=1, queue=q0, no_ack=False)\n" \
        "c0 received basic.get-ok(ch=1, delivery_tag=1, redelivered=True, msg=m0.1, message_count=1)  # REJECTED\n"
    rejected_at(text, allowed=("received basic.get-empty(ch=1)",), exact=True)


def test_nack_without_multiple_is_a_reject_ACK_5():
    text = ACK5.replace("SETTLE", "c0 sent basic.nack(ch=2, delivery_tag=3, multiple=False, requeue=False)") + \
        gets(2, ch=1, redelivered=True)
    accepted(text)


ACK6 = f"""
{pub(1)}
{gets(1)}
SETTLE
{client_close(0, 2)}
c0 sent basic.get(ch=1, queue=QUEUE, no_ack=False)
"""


def test_negative_settlement_without_requeue_drops_ACK_6():
    for settle in ("c0 sent basic.reject(ch=2, delivery_tag=1, requeue=False)",
                   "c0 sent basic.nack(ch=2, delivery_tag=1, multiple=False, requeue=False)"):
        text = ACK6.replace("SETTLE", settle).replace("QUEUE", "q0")
        accepted(text + "c0 received basic.get-empty(ch=1)\n")
        rejected_at(text + "c0 received basic.get-ok(ch=1, delivery_tag=1, redelivered=True, msg=m0.1, "
                           "message_count=0)  # REJECTED\n",
                    allowed=("received basic.get-empty(ch=1)",), exact=True)


def test_negative_settlement_with_requeue_goes_back_ACK_6():
    text = ACK6.replace("SETTLE", "c0 sent basic.reject(ch=2, delivery_tag=1, requeue=True)").replace("QUEUE", "q0")
    accepted(text + "c0 received basic.get-ok(ch=1, delivery_tag=1, redelivered=True, msg=m0.1, message_count=0)\n")


def test_negative_settlement_dead_letters_when_queue_has_one_ACK_6():
    dlx = cfg(queues=(QueueSpec(durable=True, dead_letter=1), QueueSpec(durable=True)))
    text = ACK6.replace("SETTLE", "c0 sent basic.reject(ch=2, delivery_tag=1, requeue=False)").replace("QUEUE", "q1")
    accepted(text + "c0 received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m0.1, message_count=0)\n",
             dlx)
    rejected_at(text + "c0 received basic.get-empty(ch=1)  # REJECTED\n", allowed=(
        "received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m0.1, message_count=0)",),
        config=dlx, exact=True)
    # With requeue=true it goes back to its own queue, not to the dead-letter queue.
    requeued = ACK6.replace("SETTLE", "c0 sent basic.reject(ch=2, delivery_tag=1, requeue=True)").replace("QUEUE", "q1")
    accepted(requeued + "c0 received basic.get-empty(ch=1)\n", dlx)


ACK7 = f"""
{pub(1)}
{gets(1)}
c0 sent basic.ack(ch=2, delivery_tag=1, multiple=False)
c0 sent basic.ack(ch=2, delivery_tag=1, multiple=False)
"""


def test_double_ack_is_an_unknown_tag_ACK_7():
    accepted(ACK7 + close_406(0, 2, 1))
    # A client that sees no error after the second ack is not what the spec allows.
    bad = ACK7 + "c0 sent basic.get(ch=2, queue=q0, no_ack=False)\nc0 received basic.get-empty(ch=2)  # REJECTED\n"
    rejected_at(bad, allowed=(
        "received channel.close(ch=2, reply_code=406, text='PRECONDITION_FAILED - unknown delivery tag 1')",),
        exact=True)
