"""Hand-written traces for publisher confirms (PC) and transactions (TX): each rule's example is
accepted, and corrupted variants are rejected at the corrupted observation."""
from __future__ import annotations

from rabbitproof.spec.roles import QueueSpec
from tests.test_spec_tracekit import accepted, cfg, client_close, close_406, pub, rejected_at

CONFIRM = "c0 sent confirm.select(ch=1)\nc0 received confirm.select-ok(ch=1)"
TX = "c0 sent tx.select(ch=CH)\nc0 received tx.select-ok(ch=CH)"


def tx(ch: int = 1) -> str:
    return TX.replace("CH", str(ch))


def ack(tag: int, multiple: bool = False, ch: int = 1) -> str:
    return f"c0 received basic.ack(ch={ch}, delivery_tag={tag}, multiple={multiple})"


def nack(tag: int, multiple: bool = False, ch: int = 1) -> str:
    return f"c0 received basic.nack(ch={ch}, delivery_tag={tag}, multiple={multiple}, requeue=False)"


def get(ch: int, tag: int, msg: str, count: int, redelivered: bool = False, queue: str = "q0") -> str:
    return (f"c0 sent basic.get(ch={ch}, queue={queue}, no_ack=False)\n"
            f"c0 received basic.get-ok(ch={ch}, delivery_tag={tag}, redelivered={redelivered}, msg={msg}, "
            f"message_count={count})")


def empty(ch: int, queue: str = "q0") -> str:
    return f"c0 sent basic.get(ch={ch}, queue={queue}, no_ack=False)\nc0 received basic.get-empty(ch={ch})"


def commit(ch: int = 1) -> str:
    return f"c0 sent tx.commit(ch={ch})\nc0 received tx.commit-ok(ch={ch})"


def rollback(ch: int = 1) -> str:
    return f"c0 sent tx.rollback(ch={ch})\nc0 received tx.rollback-ok(ch={ch})"


# ---------------------------------------------------------------- PC: publisher confirms

PC1 = f"""
{pub(1)}
{CONFIRM}
{CONFIRM}
{pub(2)}
{ack(1)}
"""


def test_confirm_numbering_starts_at_first_confirm_select_PC_1():
    accepted(PC1)
    rejected_at(PC1.replace(ack(1), ack(2) + "  # REJECTED"), allowed=(ack(1)[3:],), exact=True)


PC2 = f"""
{CONFIRM}
{pub(1)}
{pub(2)}
{ack(1)}
{ack(2)}
"""


def test_every_publish_confirmed_exactly_once_PC_2():
    accepted(PC2)
    rejected_at(PC2 + ack(1) + "  # REJECTED\n", allowed=("sent (any client frame)",), exact=True)
    rejected_at(PC2 + ack(2, True) + "  # REJECTED\n", allowed=("sent (any client frame)",), exact=True)


def test_no_promise_how_soon_PC_2():
    accepted(f"{CONFIRM}\n{pub(1)}\n{pub(2)}\n{pub(3)}")


def test_nacked_publish_is_never_also_acked_PC_2():
    failing = cfg(failures=1)
    text = f"{CONFIRM}\n{pub(1)}\n{nack(1)}\n"
    accepted(text, failing)
    rejected_at(text + ack(1) + "  # REJECTED\n", allowed=("sent (any client frame)",), config=failing, exact=True)


PC3 = f"""
{CONFIRM}
{pub(1)}
{pub(2)}
{pub(3)}
"""


def test_multiple_confirm_covers_every_unconfirmed_up_to_tag_PC_3():
    accepted(PC3 + ack(3, True))
    accepted(PC3 + ack(2, True) + "\n" + ack(3))
    accepted(PC3 + ack(2) + "\n" + ack(3, True) + "\n")


def test_seq_covered_by_multiple_cannot_be_confirmed_again_PC_3():
    rejected_at(PC3 + ack(1) + "\n" + ack(3, True) + "\n" + ack(2) + "  # REJECTED\n",
                allowed=("sent (any client frame)",), exact=True)


def test_the_oldest_publish_batched_with_a_later_one_is_confirmed_alone_with_multiple_PC_3():
    """RabbitMQ 3.10.8 sends a batch of confirms as one multiple for those below the oldest still
    unconfirmed and one single for each later one (spec.broker.oldest_batched): m0.1 and m0.3 ready while
    the persistent m0.2 waits for the disk give ack(1, multiple) then ack(3). Alone, or with only the
    next publish after it, the oldest goes out as ack(1)."""
    three = f"{CONFIRM}\n{pub(1)}\n{pub(2, persistent=True)}\n{pub(3)}\n"
    accepted(three + ack(1, True) + "\n" + ack(3) + "\n" + ack(2))
    accepted(three + ack(1, True) + "\n" + ack(3, True) + "\n")
    two = f"{CONFIRM}\n{pub(1)}\n{pub(2, persistent=True)}\n"
    rejected_at(two + ack(1, True) + "  # REJECTED\n" + ack(2) + "\n")
    rejected_at(f"{CONFIRM}\n{pub(1)}\n" + ack(1, True) + "  # REJECTED\n")


def test_confirm_tag_beyond_publishes_rejected_PC_3():
    rejected_at(PC3 + ack(4) + "  # REJECTED\n", allowed=(ack(1)[3:], ack(3, True)[3:]))


PC4 = f"""
{CONFIRM}
{pub(1, key='q7', mandatory=True)}
c0 received basic.return(ch=1, reply_code=312, msg=m0.1)
{ack(1)}
"""


def test_return_reaches_client_before_ack_PC_4():
    accepted(PC4)
    bad = PC4.replace(f"c0 received basic.return(ch=1, reply_code=312, msg=m0.1)\n{ack(1)}",
                      f"{ack(1)}  # REJECTED\nc0 received basic.return(ch=1, reply_code=312, msg=m0.1)")
    rejected_at(bad, allowed=("received basic.return(ch=1, reply_code=312, msg=m0.1)",), exact=True)


def test_unroutable_without_mandatory_is_just_acked_PC_4():
    accepted(f"{CONFIRM}\n{pub(1, key='q7')}\n{ack(1)}")


def test_persistent_message_in_durable_queue_confirmed_PC_5():
    # The fsync is internal: the checker lets it happen before the confirm.
    text = f"{CONFIRM}\n{pub(1, persistent=True)}\n{pub(2)}\n{ack(2)}\n{ack(1)}"
    accepted(text)
    transient_queue = cfg(queues=(QueueSpec(durable=False),))
    accepted(text, transient_queue)


PC6 = f"""
{CONFIRM}
{pub(1)}
{nack(1)}
{empty(2)}
{pub(2)}
{ack(2)}
{get(2, 1, 'm0.2', 0)}
"""


def test_nack_only_when_a_queue_fails_PC_6():
    accepted(PC6, cfg(failures=1))
    rejected_at(PC6.replace(nack(1), nack(1) + "  # REJECTED"), allowed=(ack(1)[3:],), exact=True)


def test_confirms_in_another_order_than_publishes_PC_7():
    accepted(f"{CONFIRM}\n{pub(1, persistent=True)}\n{pub(2)}\n{ack(2)}\n{ack(1)}")
    accepted(f"{CONFIRM}\n{pub(1, persistent=True)}\n{pub(2, persistent=True)}\n{ack(2)}\n{ack(1)}")


def test_confirm_select_on_tx_channel_is_406_PC_8():
    text = f"""
    {tx()}
    c0 sent confirm.select(ch=1)
    c0 received channel.close(ch=1, reply_code=406, text='PRECONDITION_FAILED - cannot switch from tx to confirm mode')
    c0 sent channel.close-ok(ch=1)
    """
    accepted(text)
    bad = f"{tx()}\nc0 sent confirm.select(ch=1)\nc0 received confirm.select-ok(ch=1)  # REJECTED\n"
    rejected_at(bad, allowed=("received channel.close(ch=1, reply_code=406, "
                              "text='PRECONDITION_FAILED - cannot switch from tx to confirm mode')",), exact=True)


def test_tx_select_on_confirm_channel_is_406_PC_8():
    text = f"""
    {CONFIRM}
    c0 sent tx.select(ch=1)
    c0 received channel.close(ch=1, reply_code=406, text='PRECONDITION_FAILED - cannot switch from confirm to tx mode')
    c0 sent channel.close-ok(ch=1)
    c0 sent channel.open(ch=1)
    c0 received channel.open-ok(ch=1)
    {tx()}
    """
    accepted(text)
    bad = text.replace("cannot switch from confirm to tx mode')", "cannot switch from tx to confirm mode')  # REJECTED")
    rejected_at(bad, allowed=("received channel.close(ch=1, reply_code=406, "
                              "text='PRECONDITION_FAILED - cannot switch from confirm to tx mode')",), exact=True)


PC9 = f"""
{CONFIRM}
{pub(1, persistent=True)}
{pub(2, exchange='missing')}
"""
CLOSE_404 = ("c0 received channel.close(ch=1, reply_code=404, text=\"NOT_FOUND - no exchange 'missing' in vhost '/'\")\n"
             "c0 sent channel.close-ok(ch=1)")


def test_missing_exchange_is_404_and_pending_confirms_never_come_PC_9():
    accepted(PC9 + CLOSE_404)
    accepted(PC9 + ack(1) + "\n" + CLOSE_404)
    rejected_at(PC9 + CLOSE_404 + "\n" + ack(1) + "  # REJECTED\n", allowed=("sent (any client frame)",), exact=True)


def test_missing_exchange_wrong_reply_code_rejected_PC_9():
    bad = PC9 + CLOSE_404.replace("reply_code=404", "reply_code=406").replace("'/'\")", "'/'\")  # REJECTED")
    rejected_at(bad, allowed=(CLOSE_404.splitlines()[0][3:],))


PC10 = f"""
{CONFIRM}
{pub(1, persistent=True)}
c0 sent basic.qos(ch=1, prefetch_count=0, global=False)
c0 received basic.qos-ok(ch=1)
CONFIRMED
c0 lost
c0 connect
"""
# The qos round trip shows the broker took the publish (frames of a connection are taken in order).


def test_confirmed_persistent_message_survives_crash_PC_10():
    crashing = cfg(crashes=1)
    text = PC10.replace("CONFIRMED", ack(1))
    accepted(text + get(1, 1, "m0.1", 0, True), crashing)
    rejected_at(text + empty(1) + "  # REJECTED\n", allowed=(
        "received basic.get-ok(ch=1, delivery_tag=1, redelivered=True, msg=m0.1, message_count=0)",
        "received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m0.1, message_count=0)"),
        config=crashing, exact=True)


def test_unconfirmed_persistent_message_may_be_lost_PC_10():
    crashing = cfg(crashes=1)
    text = PC10.replace("CONFIRMED\n", "")
    accepted(text + empty(1), crashing)
    accepted(text + get(1, 1, "m0.1", 0, True), crashing)
    # Without a crash a lost connection loses no message the broker took.
    rejected_at(text + empty(1) + "  # REJECTED\n", allowed=(
        "received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m0.1, message_count=0)",), exact=True)


# ---------------------------------------------------------------- TX: transactions

TX1 = f"""
{tx()}
{pub(1)}
{commit()}
{pub(2)}
{get(2, 1, 'm0.1', 0)}
{empty(2)}
"""


def test_channel_stays_transactional_after_commit_TX_1():
    accepted(TX1)
    bad = TX1.replace(empty(2), get(2, 2, "m0.2", 0) + "  # REJECTED")
    rejected_at(bad, allowed=("received basic.get-empty(ch=2)",), exact=True)


TX2 = f"""
{tx()}
{pub(1)}
{empty(2)}
{rollback()}
{empty(2)}
{pub(2)}
{commit()}
{get(2, 1, 'm0.2', 0)}
"""


def test_publish_held_until_commit_dropped_by_rollback_TX_2():
    accepted(TX2)
    bad = TX2.replace(get(2, 1, "m0.2", 0), get(2, 1, "m0.1", 0) + "  # REJECTED")
    rejected_at(bad, allowed=(
        "received basic.get-ok(ch=2, delivery_tag=1, redelivered=False, msg=m0.2, message_count=0)",), exact=True)
    before_commit = f"{tx()}\n{pub(1)}\n{get(2, 1, 'm0.1', 0)}  # REJECTED\n"
    rejected_at(before_commit, allowed=("received basic.get-empty(ch=2)",), exact=True)


TX3 = f"""
{pub(1)}
{tx(2)}
{get(2, 1, 'm0.1', 0)}
c0 sent basic.ack(ch=2, delivery_tag=1, multiple=False)
"""


def test_ack_held_back_until_commit_TX_3():
    # Rolled back, the delivery is outstanding again and can be acked again; committed, it is settled.
    text = TX3 + rollback(2) + "\nc0 sent basic.ack(ch=2, delivery_tag=1, multiple=False)\n" + commit(2) + \
        "\nc0 sent basic.ack(ch=2, delivery_tag=1, multiple=False)\n" + close_406(0, 2, 1) + "\n" + empty(1)
    accepted(text)


def test_uncommitted_ack_is_undone_by_channel_close_TX_3():
    accepted(TX3 + client_close(0, 2) + "\n" + get(1, 1, "m0.1", 0, True))
    rejected_at(TX3 + commit(2) + "\n" + client_close(0, 2) + "\n" + get(1, 1, "m0.1", 0, True) + "  # REJECTED\n",
                allowed=("received basic.get-empty(ch=1)",), exact=True)


def test_rollback_does_not_requeue_deliveries_TX_4():
    text = f"{pub(1)}\n{tx(2)}\n{get(2, 1, 'm0.1', 0)}\n{rollback(2)}\n"
    accepted(text + empty(1))
    rejected_at(text + get(1, 1, "m0.1", 0, True) + "  # REJECTED\n",
                allowed=("received basic.get-empty(ch=1)",), exact=True)


def test_errors_detected_on_arrival_not_at_commit_TX_5():
    missing = f"{tx()}\n{pub(1, exchange='missing')}\nc0 sent tx.commit(ch=1)\n"
    accepted(missing + "c0 received channel.close(ch=1, reply_code=404, "
                       "text=\"NOT_FOUND - no exchange 'missing' in vhost '/'\")\nc0 sent channel.close-ok(ch=1)")
    rejected_at(missing + "c0 received tx.commit-ok(ch=1)  # REJECTED\n", allowed=(
        "received channel.close(ch=1, reply_code=404, text=\"NOT_FOUND - no exchange 'missing' in vhost '/'\")",),
        exact=True)
    unknown = f"{tx()}\nc0 sent basic.ack(ch=1, delivery_tag=3, multiple=False)\nc0 sent tx.commit(ch=1)\n"
    accepted(unknown + close_406(0, 1, 3))
    rejected_at(unknown + "c0 received tx.commit-ok(ch=1)  # REJECTED\n", allowed=(
        "received channel.close(ch=1, reply_code=406, text='PRECONDITION_FAILED - unknown delivery tag 3')",),
        exact=True)


TX6 = f"""
{tx()}
{pub(1, key='q7', mandatory=True)}
c0 sent tx.commit(ch=1)
c0 received basic.return(ch=1, reply_code=312, msg=m0.1)
c0 received tx.commit-ok(ch=1)
"""


def test_tx_return_sent_at_commit_before_commit_ok_TX_6():
    accepted(TX6)
    bad = TX6.replace("c0 received basic.return(ch=1, reply_code=312, msg=m0.1)\nc0 received tx.commit-ok(ch=1)",
                      "c0 received tx.commit-ok(ch=1)  # REJECTED\n"
                      "c0 received basic.return(ch=1, reply_code=312, msg=m0.1)")
    rejected_at(bad, allowed=("received basic.return(ch=1, reply_code=312, msg=m0.1)",), exact=True)
    early = f"{tx()}\n{pub(1, key='q7', mandatory=True)}\n" \
        "c0 received basic.return(ch=1, reply_code=312, msg=m0.1)  # REJECTED\n"
    rejected_at(early, allowed=("sent (any client frame)",), exact=True)


def test_commit_ok_means_publishes_visible_TX_7():
    text = f"{tx()}\n{pub(1, persistent=True)}\n{pub(2)}\n{commit()}\n{get(2, 1, 'm0.1', 1)}\n{get(2, 2, 'm0.2', 0)}"
    accepted(text)


TX8 = f"""
{CONFIRM}
{pub(1, persistent=True)}
{ack(1)}
{tx(2)}
{get(2, 1, 'm0.1', 0)}
c0 sent basic.ack(ch=2, delivery_tag=1, multiple=False)
{commit(2)}
c0 lost
c0 connect
"""


def test_committed_ack_may_come_back_after_crash_TX_8():
    crashing = cfg(crashes=1)
    accepted(TX8 + get(1, 1, "m0.1", 0, True), crashing)
    accepted(TX8 + empty(1), crashing)
    # Without a crash, an acknowledged message never comes back.
    rejected_at(TX8 + get(1, 1, "m0.1", 0, True) + "  # REJECTED\n",
                allowed=("received basic.get-empty(ch=1)",), exact=True)


def test_commit_or_rollback_on_non_tx_channel_is_406_TX_10():
    for method in ("commit", "rollback"):
        text = f"{pub(1)}\nc0 sent tx.{method}(ch=1)\n"
        accepted(text + "c0 received channel.close(ch=1, reply_code=406, "
                        "text='PRECONDITION_FAILED - channel is not transactional')\nc0 sent channel.close-ok(ch=1)")
        rejected_at(text + f"c0 received tx.{method}-ok(ch=1)  # REJECTED\n", allowed=(
            "received channel.close(ch=1, reply_code=406, text='PRECONDITION_FAILED - channel is not transactional')",),
            exact=True)


def test_declare_and_bind_never_transactional_TX_11():
    later = cfg(queues=(QueueSpec(durable=True), QueueSpec(declared=False)))
    text = f"""
    {tx()}
    c0 sent queue.declare(ch=1, queue=q1, durable=False, exclusive=False)
    c0 received queue.declare-ok(ch=1, queue=q1)
    c0 sent queue.bind(ch=1, queue=q1, exchange='fanout')
    c0 received queue.bind-ok(ch=1)
    {rollback()}
    {pub(1, ch=2, exchange='fanout')}
    {get(2, 1, 'm0.1', 0, queue='q1')}
    """
    accepted(text, later)
    # Without the declare, q1 does not exist: the get is a 404.
    no_declare = f"""
    {tx()}
    {rollback()}
    c0 sent basic.get(ch=2, queue=q1, no_ack=False)
    c0 received basic.get-empty(ch=2)  # REJECTED
    """
    rejected_at(no_declare, allowed=(
        "received channel.close(ch=2, reply_code=404, text=\"NOT_FOUND - no queue 'q1' in vhost '/'\")",),
        config=later, exact=True)
