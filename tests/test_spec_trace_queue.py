"""Hand-written traces for prefetch (PF), requeue and redelivery (RQ) and dispatch (DS): each rule's
example is accepted, and corrupted variants are rejected at the corrupted observation."""
from __future__ import annotations

from rabbitproof.spec.roles import QueueSpec
from tests.test_spec_tracekit import accepted, cfg, client_close, pub, rejected_at

TWO_QUEUES = cfg(queues=(QueueSpec(durable=True), QueueSpec(durable=True)))


def deliver(tag: int, msg: str, ch: int = 2, ctag: int = 1, redelivered: bool = False, c: int = 0) -> str:
    return (f"c{c} received basic.deliver(ch={ch}, consumer_tag={ctag}, delivery_tag={tag}, "
            f"redelivered={redelivered}, msg={msg})")


def consume(ch: int = 2, ctag: int = 1, queue: str = "q0", no_ack: bool = False, c: int = 0) -> str:
    return (f"c{c} sent basic.consume(ch={ch}, queue={queue}, consumer_tag={ctag}, no_ack={no_ack})\n"
            f"c{c} received basic.consume-ok(ch={ch}, consumer_tag={ctag})")


def qos(count: int, global_: bool, ch: int = 2, c: int = 0) -> str:
    return (f"c{c} sent basic.qos(ch={ch}, prefetch_count={count}, global={global_})\n"
            f"c{c} received basic.qos-ok(ch={ch})")


# ---------------------------------------------------------------- PF: prefetch

PF1 = f"""
{pub(1)}
{pub(2)}
{pub(3)}
{qos(2, False)}
{consume()}
{deliver(1, 'm0.1')}
{deliver(2, 'm0.2')}
"""


def test_prefetch_bounds_outstanding_deliveries_PF_1():
    accepted(PF1 + "c0 sent basic.ack(ch=2, delivery_tag=1, multiple=False)\n" + deliver(3, "m0.3"))
    rejected_at(PF1 + deliver(3, "m0.3") + "  # REJECTED\n", allowed=("sent (any client frame)",), exact=True)


def test_prefetch_zero_means_no_bound_PF_1():
    accepted(PF1.replace("prefetch_count=2", "prefetch_count=0") + deliver(3, "m0.3"))


PF2_PER_CONSUMER = f"""
{pub(1)}
{pub(2)}
{pub(3, key='q1')}
{pub(4, key='q1')}
{consume(ctag=1, queue='q0')}
{deliver(1, 'm0.1', ctag=1)}
{deliver(2, 'm0.2', ctag=1)}
{qos(1, False)}
{consume(ctag=2, queue='q1')}
{deliver(3, 'm0.3', ctag=2)}
"""


def test_per_consumer_prefetch_applies_to_consumers_started_after_PF_2():
    accepted(PF2_PER_CONSUMER, TWO_QUEUES)
    rejected_at(PF2_PER_CONSUMER + deliver(4, "m0.4", ctag=2) + "  # REJECTED\n",
                allowed=("sent (any client frame)",), config=TWO_QUEUES, exact=True)


PF2_GLOBAL = f"""
{pub(1)}
{pub(2, key='q1')}
{qos(1, True)}
{consume(ctag=1, queue='q0')}
{consume(ctag=2, queue='q1')}
{deliver(1, 'm0.1', ctag=1)}
"""


def test_global_prefetch_shared_by_the_channel_consumers_PF_2():
    accepted(PF2_GLOBAL, TWO_QUEUES)
    rejected_at(PF2_GLOBAL + deliver(2, "m0.2", ctag=2) + "  # REJECTED\n",
                allowed=("sent (any client frame)",), config=TWO_QUEUES, exact=True)
    # An ack frees the shared place: the other consumer gets its message.
    accepted(PF2_GLOBAL + "c0 sent basic.ack(ch=2, delivery_tag=1, multiple=False)\n" + deliver(2, "m0.2", ctag=2),
             TWO_QUEUES)


def test_global_and_per_consumer_prefetch_both_apply_PF_2():
    both = f"""
    {pub(1)}
    {pub(2)}
    {pub(3, key='q1')}
    {qos(2, True)}
    {qos(1, False)}
    {consume(ctag=1, queue='q0')}
    {consume(ctag=2, queue='q1')}
    {deliver(1, 'm0.1', ctag=1)}
    {deliver(2, 'm0.3', ctag=2)}
    """
    accepted(both, TWO_QUEUES)
    # After an ack of ctag 2's delivery the channel is below its global bound of 2, but ctag 1 is
    # still at its own bound of 1: m0.2 must wait.
    rejected_at(both + "c0 sent basic.ack(ch=2, delivery_tag=2, multiple=False)\n" + deliver(3, "m0.2", ctag=1)
                + "  # REJECTED\n", allowed=("sent (any client frame)",), config=TWO_QUEUES, exact=True)


PF3 = f"""
{pub(1)}
{pub(2)}
{pub(3)}
{pub(4)}
{qos(2, False)}
{consume()}
{deliver(1, 'm0.1')}
{deliver(2, 'm0.2')}
"""


def test_settling_k_deliveries_frees_k_places_PF_3():
    accepted(PF3 + "c0 sent basic.ack(ch=2, delivery_tag=2, multiple=True)\n" + deliver(3, "m0.3") + "\n"
             + deliver(4, "m0.4"))
    accepted(PF3 + "c0 sent basic.nack(ch=2, delivery_tag=1, multiple=False, requeue=False)\n" + deliver(3, "m0.3"))


def test_one_settlement_frees_one_place_PF_3():
    rejected_at(PF3 + "c0 sent basic.ack(ch=2, delivery_tag=1, multiple=False)\n" + deliver(3, "m0.3") + "\n"
                + deliver(4, "m0.4") + "  # REJECTED\n", allowed=("sent (any client frame)",), exact=True)


def test_basic_get_not_limited_by_prefetch_PF_4():
    text = f"""
    {pub(1)}
    {pub(2)}
    {pub(3)}
    {qos(1, True)}
    {qos(1, False)}
    {consume()}
    {deliver(1, 'm0.1')}
    c0 sent basic.get(ch=2, queue=q0, no_ack=False)
    c0 received basic.get-ok(ch=2, delivery_tag=2, redelivered=False, msg=m0.2, message_count=1)
    c0 sent basic.ack(ch=2, delivery_tag=1, multiple=False)
    {deliver(3, 'm0.3')}
    """
    # The get is served at the bound, and its outstanding delivery does not count against the consumer.
    accepted(text)


PF5 = f"""
{pub(1)}
{pub(2)}
{pub(3)}
{qos(2, True)}
{consume()}
{deliver(1, 'm0.1')}
{deliver(2, 'm0.2')}
{qos(1, True)}
c0 sent basic.ack(ch=2, delivery_tag=1, multiple=False)
"""


def test_lowering_prefetch_takes_nothing_back_PF_5():
    # Both deliveries stay outstanding under the new bound of 1: they can still be acked.
    accepted(PF5 + "c0 sent basic.ack(ch=2, delivery_tag=2, multiple=False)\n" + deliver(3, "m0.3"))
    # With one still outstanding the channel is at its new bound: nothing more comes.
    rejected_at(PF5 + deliver(3, "m0.3") + "  # REJECTED\n", allowed=("sent (any client frame)",), exact=True)


def test_deliveries_in_flight_when_prefetch_lowered_PF_5():
    # qos(1) is sent after both deliveries were made but before the client read the second one.
    text = f"""
    {pub(1)}
    {pub(2)}
    {qos(2, True)}
    {consume()}
    {deliver(1, 'm0.1')}
    c0 sent basic.qos(ch=2, prefetch_count=1, global=True)
    {deliver(2, 'm0.2')}
    c0 received basic.qos-ok(ch=2)
    """
    accepted(text)


# ---------------------------------------------------------------- RQ: requeue, redelivery, ordering

def get(ch: int, tag: int, msg: str, count: int, redelivered: bool = False, c: int = 0, queue: str = "q0") -> str:
    return (f"c{c} sent basic.get(ch={ch}, queue={queue}, no_ack=False)\n"
            f"c{c} received basic.get-ok(ch={ch}, delivery_tag={tag}, redelivered={redelivered}, msg={msg}, "
            f"message_count={count})")


RQ1 = f"""
{pub(1)}
{pub(2)}
{pub(3)}
{get(2, 1, 'm0.1', 2)}
{get(2, 2, 'm0.2', 1)}
c0 sent basic.reject(ch=2, delivery_tag=2, requeue=True)
c0 sent basic.nack(ch=2, delivery_tag=1, multiple=False, requeue=True)
{get(1, 1, 'm0.1', 2, True)}
{get(1, 2, 'm0.2', 1, True)}
{get(1, 3, 'm0.3', 0)}
"""


def test_requeued_messages_go_back_to_their_place_RQ_1():
    accepted(RQ1)


def test_requeued_message_at_the_tail_is_rejected_RQ_1():
    bad = RQ1.replace(f"{get(1, 1, 'm0.1', 2, True)}\n{get(1, 2, 'm0.2', 1, True)}\n{get(1, 3, 'm0.3', 0)}",
                      "c0 sent basic.get(ch=1, queue=q0, no_ack=False)\n"
                      "c0 received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m0.3, message_count=2)"
                      "  # REJECTED")
    # The requeues were sent on channel 2 and the get on channel 1: the broker may take them in either
    # order (channels run concurrently), but never puts a requeued message at the tail.
    rejected_at(bad, allowed=(
        "received basic.get-ok(ch=1, delivery_tag=1, redelivered=True, msg=m0.1, message_count=2)",
        "received basic.get-ok(ch=1, delivery_tag=1, redelivered=True, msg=m0.2, message_count=1)",
        "received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m0.3, message_count=0)"), exact=True)


def test_requeue_on_close_restores_publication_order_RQ_1():
    text = f"""
    {pub(1)}
    {pub(2)}
    {get(2, 1, 'm0.1', 1)}
    {client_close(0, 2)}
    {get(1, 1, 'm0.1', 1, True)}
    {get(1, 2, 'm0.2', 0)}
    """
    accepted(text)


def test_missing_redelivered_flag_is_rejected_RQ_2():
    bad = RQ1.replace(get(1, 2, "m0.2", 1, True), get(1, 2, "m0.2", 1, False) + "  # REJECTED")
    rejected_at(bad, allowed=(
        "received basic.get-ok(ch=1, delivery_tag=2, redelivered=True, msg=m0.2, message_count=1)",), exact=True)


def test_first_delivery_not_flagged_redelivered_RQ_2():
    bad = RQ1.replace(get(1, 3, "m0.3", 0), get(1, 3, "m0.3", 0, True) + "  # REJECTED")
    rejected_at(bad, allowed=(
        "received basic.get-ok(ch=1, delivery_tag=3, redelivered=False, msg=m0.3, message_count=0)",), exact=True)


RQ3 = f"""
{qos(1, False, ch=1)}
{consume(ch=1, ctag=1)}
{qos(1, False, ch=2)}
{consume(ch=2, ctag=2)}
{pub(1)}
{pub(2)}
{pub(3)}
{deliver(1, 'm0.1', ch=1, ctag=1)}
{deliver(1, 'm0.2', ch=2, ctag=2)}
c0 sent basic.ack(ch=2, delivery_tag=1, multiple=False)
{deliver(2, 'm0.3', ch=2, ctag=2)}
c0 sent basic.ack(ch=2, delivery_tag=2, multiple=False)
{client_close(0, 1)}
{deliver(3, 'm0.1', ch=2, ctag=2, redelivered=True)}
"""


def test_consumer_sees_requeued_message_out_of_order_RQ_3():
    # ctag 2 receives m0.2, m0.3, then m0.1: out of publication order, while q0 stayed in order.
    accepted(RQ3)


def test_out_of_order_redelivery_still_flagged_RQ_3():
    bad = RQ3.replace(deliver(3, "m0.1", ch=2, ctag=2, redelivered=True),
                      deliver(3, "m0.1", ch=2, ctag=2, redelivered=False) + "  # REJECTED")
    rejected_at(bad, allowed=(
        "received basic.deliver(ch=2, consumer_tag=2, delivery_tag=3, redelivered=True, msg=m0.1)",), exact=True)


RQ4 = f"""
{pub(1)}
{pub(2)}
{get(2, 1, 'm0.1', 1)}
CLOSE
{get(1, 1, 'm0.1', 1, True)}
{get(1, 2, 'm0.2', 0)}
"""


def test_connection_close_requeues_outstanding_RQ_4():
    accepted(RQ4.replace("CLOSE", "c0 sent connection.close(ch=0, reply_code=200, text='OK')\n"
                                  "c0 received connection.close-ok(ch=0)\nc0 connect"))


def test_lost_connection_requeues_outstanding_RQ_4():
    accepted(RQ4.replace("CLOSE", "c0 lost\nc0 connect"))
    bad = RQ4.replace("CLOSE", "c0 lost\nc0 connect").replace(
        get(1, 1, "m0.1", 1, True), get(1, 1, "m0.1", 1, False) + "  # REJECTED")
    rejected_at(bad, allowed=(
        "received basic.get-ok(ch=1, delivery_tag=1, redelivered=True, msg=m0.1, message_count=1)",), exact=True)


def test_channel_close_and_channel_error_requeue_outstanding_RQ_4():
    accepted(RQ4.replace("CLOSE", client_close(0, 2)))
    accepted(RQ4.replace("CLOSE", "c0 sent basic.ack(ch=2, delivery_tag=9, multiple=False)\n"
                                  "c0 received channel.close(ch=2, reply_code=406, "
                                  "text='PRECONDITION_FAILED - unknown delivery tag 9')\n"
                                  "c0 sent channel.close-ok(ch=2)"))


def test_without_close_nothing_is_requeued_RQ_4():
    bad = RQ4.replace("CLOSE\n", "").replace(get(1, 1, "m0.1", 1, True), get(1, 1, "m0.1", 1, True) + "  # REJECTED")
    rejected_at(bad, allowed=(
        "received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m0.2, message_count=0)",), exact=True)


RQ5 = f"""
{pub(1)}
{pub(2)}
{get(2, 1, 'm0.1', 1)}
{get(2, 2, 'm0.2', 0)}
"""


def test_recover_requeue_true_requeues_every_outstanding_delivery_RQ_5():
    text = RQ5 + "c0 sent basic.recover(ch=2, requeue=True)\nc0 received basic.recover-ok(ch=2)\n" \
        + get(2, 3, "m0.1", 1, True) + "\n" + get(2, 4, "m0.2", 0, True)
    accepted(text)
    # The old tags are no longer outstanding.
    accepted(text + "\nc0 sent basic.ack(ch=2, delivery_tag=2, multiple=False)\n"
             "c0 received channel.close(ch=2, reply_code=406, text='PRECONDITION_FAILED - unknown delivery tag 2')\n"
             "c0 sent channel.close-ok(ch=2)")


def test_recover_requeue_false_is_540_not_implemented_RQ_5():
    text = RQ5 + "c0 sent basic.recover(ch=2, requeue=False)\n" \
        "c0 received connection.close(ch=0, reply_code=540, text='NOT_IMPLEMENTED - requeue=false')\n" \
        "c0 sent connection.close-ok(ch=0)\nc0 connect\n" + get(1, 1, "m0.1", 1, True)
    accepted(text)
    bad = RQ5 + "c0 sent basic.recover(ch=2, requeue=False)\n" \
        "c0 received basic.recover-ok(ch=2)  # REJECTED\n"
    rejected_at(bad, allowed=(
        "received connection.close(ch=0, reply_code=540, text='NOT_IMPLEMENTED - requeue=false')",), exact=True)


def test_requeue_loop_any_number_of_times_RQ_6():
    text = f"{pub(1)}\n" + "\n".join(
        f"{get(2, t, 'm0.1', 0, t > 1)}\nc0 sent basic.reject(ch=2, delivery_tag={t}, requeue=True)"
        for t in range(1, 6)) + "\n" + get(2, 6, "m0.1", 0, True)
    accepted(text)


# ---------------------------------------------------------------- DS: dispatch

DS1 = f"""
{consume(ch=1, ctag=1)}
{consume(ch=2, ctag=2)}
{pub(1)}
{pub(2)}
{pub(3)}
{pub(4)}
{deliver(1, 'm0.1', ch=1, ctag=1)}
{deliver(1, 'm0.2', ch=2, ctag=2)}
{deliver(2, 'm0.3', ch=1, ctag=1)}
{deliver(2, 'm0.4', ch=2, ctag=2)}
"""


def test_round_robin_among_consumers_DS_1():
    accepted(DS1)
    bad = DS1.replace(f"{deliver(1, 'm0.2', ch=2, ctag=2)}\n{deliver(2, 'm0.3', ch=1, ctag=1)}",
                      f"{deliver(2, 'm0.2', ch=1, ctag=1)}  # REJECTED\n{deliver(1, 'm0.3', ch=2, ctag=2)}")
    # Deliveries to two channels reach the wire in any order, so channel 1's next delivery (m0.3) may
    # come before channel 2's m0.2; channel 1 never gets m0.2, which round robin gave channel 2.
    rejected_at(bad, allowed=(
        "received basic.deliver(ch=2, consumer_tag=2, delivery_tag=1, redelivered=False, msg=m0.2)",
        "received basic.deliver(ch=1, consumer_tag=1, delivery_tag=2, redelivered=False, msg=m0.3)"), exact=True)


def test_consumer_without_room_is_skipped_DS_1():
    text = f"""
    {qos(1, False, ch=1)}
    {consume(ch=1, ctag=1)}
    {consume(ch=2, ctag=2)}
    {pub(1)}
    {pub(2)}
    {pub(3)}
    {deliver(1, 'm0.1', ch=1, ctag=1)}
    {deliver(1, 'm0.2', ch=2, ctag=2)}
    {deliver(2, 'm0.3', ch=2, ctag=2)}
    """
    accepted(text)


def test_basic_get_takes_the_head_DS_1():
    text = f"""
    {pub(1)}
    {pub(2)}
    c0 sent basic.get(ch=1, queue=q0, no_ack=True)
    c0 received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m0.2, message_count=1)  # REJECTED
    """
    rejected_at(text, allowed=(
        "received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m0.1, message_count=1)",), exact=True)


def test_get_empty_and_message_count_DS_2():
    text = f"""
    c0 sent basic.get(ch=1, queue=q0, no_ack=True)
    c0 received basic.get-empty(ch=1)
    {pub(1)}
    {pub(2)}
    c0 sent basic.get(ch=1, queue=q0, no_ack=True)
    c0 received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m0.1, message_count=1)
    c0 sent basic.get(ch=1, queue=q0, no_ack=True)
    c0 received basic.get-ok(ch=1, delivery_tag=2, redelivered=False, msg=m0.2, message_count=0)
    c0 sent basic.get(ch=1, queue=q0, no_ack=True)
    c0 received basic.get-empty(ch=1)
    """
    accepted(text)
    bad = text.replace("msg=m0.1, message_count=1)", "msg=m0.1, message_count=2)  # REJECTED")
    rejected_at(bad, allowed=(
        "received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m0.1, message_count=1)",), exact=True)
    empty_while_ready = f"""
    {pub(1)}
    c0 sent basic.get(ch=1, queue=q0, no_ack=True)
    c0 received basic.get-empty(ch=1)  # REJECTED
    """
    rejected_at(empty_while_ready, allowed=(
        "received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m0.1, message_count=0)",), exact=True)
