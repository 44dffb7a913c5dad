"""Hand-written traces for errors (ER), routing (RT) and exclusive queues (DU-4): each rule's
example is accepted, and corrupted variants are rejected at the corrupted observation."""
from __future__ import annotations

from rabbitproof.spec import frames
from rabbitproof.spec.roles import QueueSpec
from tests.test_spec_tracekit import accepted, cfg, close_406, pub, rejected_at


def get(ch: int, tag: int, msg: str, count: int, redelivered: bool = False, queue: str = "q0", c: int = 0) -> str:
    return (f"c{c} sent basic.get(ch={ch}, queue={queue}, no_ack=False)\n"
            f"c{c} received basic.get-ok(ch={ch}, delivery_tag={tag}, redelivered={redelivered}, msg={msg}, "
            f"message_count={count})")


def empty(ch: int, queue: str = "q0", c: int = 0) -> str:
    return f"c{c} sent basic.get(ch={ch}, queue={queue}, no_ack=False)\nc{c} received basic.get-empty(ch={ch})"


# ---------------------------------------------------------------- ER: errors

ER1 = f"""
{pub(1)}
{pub(2)}
{get(2, 1, 'm0.1', 1)}
c0 sent basic.ack(ch=2, delivery_tag=7, multiple=False)
c0 sent basic.get(ch=2, queue=q0, no_ack=False)
{close_406(0, 2, 7)}
{get(1, 1, 'm0.1', 1, True)}
c0 sent channel.open(ch=2)
c0 received channel.open-ok(ch=2)
{get(2, 1, 'm0.2', 0)}
"""


def test_channel_error_closes_only_the_channel_which_can_reopen_ER_1():
    # ch1 goes on; the get sent on ch2 before the close was ignored; the reopened ch2 counts tags from 1.
    accepted(ER1)


def test_frames_after_channel_error_are_ignored_until_close_ok_ER_1():
    bad = ER1.replace(close_406(0, 2, 7), "c0 received basic.get-ok(ch=2, delivery_tag=2, redelivered=False, "
                                          "msg=m0.2, message_count=0)  # REJECTED\n" + close_406(0, 2, 7))
    rejected_at(bad, allowed=(
        "received channel.close(ch=2, reply_code=406, text='PRECONDITION_FAILED - unknown delivery tag 7')",),
        exact=True)


ER1_REOPEN = f"""
c0 sent confirm.select(ch=1)
c0 received confirm.select-ok(ch=1)
{pub(1)}
c0 received basic.ack(ch=1, delivery_tag=1, multiple=False)
c0 sent tx.select(ch=1)
c0 received channel.close(ch=1, reply_code=406, text='PRECONDITION_FAILED - cannot switch from confirm to tx mode')
c0 sent channel.close-ok(ch=1)
c0 sent channel.open(ch=1)
c0 received channel.open-ok(ch=1)
c0 sent confirm.select(ch=1)
c0 received confirm.select-ok(ch=1)
{pub(2)}
c0 received basic.ack(ch=1, delivery_tag=SEQ, multiple=False)MARK
{get(1, 1, 'm0.1', 1)}
"""


def test_reopened_channel_restarts_tags_and_publish_numbers_ER_1():
    accepted(ER1_REOPEN.replace("SEQ", "1").replace("MARK", ""))
    rejected_at(ER1_REOPEN.replace("SEQ", "2").replace("MARK", "  # REJECTED"),
                allowed=("received basic.ack(ch=1, delivery_tag=1, multiple=False)",), exact=True)


# Recorded on RabbitMQ 3.10.8 (raw client, one write): the reader forgets a channel on the client's
# close-ok, and the channel process, already closing, stops without its own close-ok. impl does the same.
ER1_CLOSE_WITH_CLOSE_OK = f"""
{pub(1)}
c0 sent channel.close(ch=1, reply_code=200, text='OK')
c0 sent channel.close-ok(ch=1)
c0 sent confirm.select(ch=1)
c0 received connection.close(ch=0, reply_code=504, text="CHANNEL_ERROR - expected 'channel.open'")
"""


def test_close_and_close_ok_sent_together_end_the_channel_without_a_close_ok_ER_1():
    accepted(ER1_CLOSE_WITH_CLOSE_OK)
    # The message published before the close stays in the queue; the channel can be opened again.
    accepted(f"""
    {pub(1)}
    c0 sent channel.close(ch=1, reply_code=200, text='OK')
    c0 sent channel.close-ok(ch=1)
    c0 sent channel.open(ch=1)
    c0 sent basic.get(ch=1, queue=q0, no_ack=True)
    c0 received channel.open-ok(ch=1)
    c0 received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m0.1, message_count=0)
    """)
    # The broker's close-ok may still win the race (it went out before the client's close-ok was
    # taken); the client's close-ok then finds the channel closed: 504, as when it is sent later.
    accepted(ER1_CLOSE_WITH_CLOSE_OK.replace("c0 received connection.close", "c0 received channel.close-ok(ch=1)\n"
                                             "c0 received connection.close"))


def test_a_close_ok_on_an_open_channel_may_be_overtaken_by_the_frame_behind_it_ER_1():
    # RabbitMQ's reader forgets the channel as it passes the close-ok on: the get behind it may meet the
    # reader's 504 before the channel process raises its 503 (trace checking, `_close_ok_overtaken`).
    sent = """
    c0 sent channel.close-ok(ch=1)
    c0 sent basic.get(ch=1, queue=q0, no_ack=False)
    """
    accepted(sent + '    c0 received connection.close(ch=0, reply_code=503, text="COMMAND_INVALID - unimplemented method")')
    accepted(sent + '    c0 received connection.close(ch=0, reply_code=504, text="CHANNEL_ERROR - expected \'channel.open\'")')
    # With nothing behind the close-ok on its channel there is nothing to meet the reader's 504.
    rejected_at("""
    c0 sent channel.close-ok(ch=1)
    c0 sent basic.get(ch=2, queue=q0, no_ack=False)
    c0 received connection.close(ch=0, reply_code=504, text="CHANNEL_ERROR - expected 'channel.open'")  # REJECTED
    """)


def test_after_its_own_close_ok_the_channel_answers_nothing_ER_1():
    # The client's close-ok, taken first, ends the channel: no close-ok of the old channel comes after
    # the new one is open (had the broker's come first, the client's would have been a 504).
    text = """
    c0 sent channel.close(ch=1, reply_code=200, text='OK')
    c0 sent channel.close-ok(ch=1)
    c0 sent channel.open(ch=1)
    c0 received channel.open-ok(ch=1)
    c0 received channel.close-ok(ch=1)  # REJECTED
    """
    rejected_at(text, allowed=("sent (any client frame)",), exact=True)


def test_connection_error_closes_every_channel_ER_1():
    text = f"""
    {pub(1)}
    {pub(2)}
    {get(1, 1, 'm0.1', 1)}
    {get(2, 1, 'm0.2', 0)}
    c0 sent basic.recover(ch=2, requeue=False)
    c0 received connection.close(ch=0, reply_code=540, text='NOT_IMPLEMENTED - requeue=false')
    c0 sent connection.close-ok(ch=0)
    c0 connect
    {get(1, 1, 'm0.1', 1, True)}
    {get(1, 2, 'm0.2', 0, True)}
    """
    accepted(text)
    # A client may drop the connection without answering; frames it writes into a closed connection
    # are lost. But the broker writes nothing after its connection.close.
    accepted(text.replace("c0 sent connection.close-ok(ch=0)", "c0 sent basic.qos(ch=1, prefetch_count=0, global=False)"))
    bad = text.replace("c0 sent connection.close-ok(ch=0)", "c0 received basic.get-empty(ch=1)  # REJECTED")
    rejected_at(bad)


def test_reply_codes_from_amqp_0_9_1_ER_2():
    assert (frames.ACCESS_REFUSED, frames.NOT_FOUND, frames.RESOURCE_LOCKED, frames.PRECONDITION_FAILED) == \
        (403, 404, 405, 406)
    assert (frames.CHANNEL_ERROR, frames.NOT_ALLOWED, frames.NOT_IMPLEMENTED) == (504, 530, 540)
    assert frames.NO_ROUTE == 312
    text = """
    c0 sent basic.get(ch=1, queue=q5, no_ack=False)
    c0 received channel.close(ch=1, reply_code=404, text="NOT_FOUND - no queue 'q5' in vhost '/'")
    c0 sent channel.close-ok(ch=1)
    """
    accepted(text)


def test_channel_error_with_a_connection_error_code_rejected_ER_2():
    text = """
    c0 sent tx.commit(ch=1)
    c0 received channel.close(ch=1, reply_code=540, text='PRECONDITION_FAILED - channel is not transactional')  # REJECTED
    """
    rejected_at(text, allowed=(
        "received channel.close(ch=1, reply_code=406, text='PRECONDITION_FAILED - channel is not transactional')",),
        exact=True)
    hard = """
    c0 sent basic.recover(ch=1, requeue=False)
    c0 received channel.close(ch=1, reply_code=540, text='NOT_IMPLEMENTED - requeue=false')  # REJECTED
    """
    rejected_at(hard, allowed=(
        "received connection.close(ch=0, reply_code=540, text='NOT_IMPLEMENTED - requeue=false')",), exact=True)


ER3 = f"""
{pub(1)}
{pub(2)}
c1 sent basic.get(ch=1, queue=q0, no_ack=False)
c1 received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m0.1, message_count=1)
c1 sent basic.ack(ch=1, delivery_tag=2, multiple=True)
{close_406(1, 1, 2)}
c1 sent basic.recover(ch=2, requeue=False)
c1 received connection.close(ch=0, reply_code=540, text='NOT_IMPLEMENTED - requeue=false')
c1 sent connection.close-ok(ch=0)
{get(1, 1, 'm0.1', 1, True)}
{get(1, 2, 'm0.2', 0)}
{empty(1)}
"""


def test_bad_input_of_one_client_loses_or_duplicates_nothing_of_another_ER_3():
    accepted(ER3)
    duplicated = ER3.replace(empty(1), get(1, 3, "m0.1", 0, True) + "  # REJECTED")
    rejected_at(duplicated, allowed=("received basic.get-empty(ch=1)",), exact=True)


# ---------------------------------------------------------------- RT: routing

FANOUT = cfg(queues=(QueueSpec(durable=True), QueueSpec(durable=True), QueueSpec()), bindings=(0, 1))


def test_default_exchange_routes_by_key_fanout_by_bindings_RT_1():
    text = f"""
    {pub(1, key='q2')}
    {pub(2, exchange='fanout')}
    {get(2, 1, 'm0.1', 0, queue='q2')}
    {empty(2, queue='q2')}
    {get(2, 2, 'm0.2', 0, queue='q0')}
    {get(2, 3, 'm0.2', 0, queue='q1')}
    """
    accepted(text, FANOUT)
    rejected_at(text.replace(empty(2, queue="q2"), get(2, 2, "m0.2", 0, queue="q2") + "  # REJECTED"),
                allowed=("received basic.get-empty(ch=2)",), config=FANOUT, exact=True)


def test_copies_in_several_queues_are_independent_RT_2():
    text = f"""
    {pub(1, exchange='fanout')}
    {get(2, 1, 'm0.1', 0, queue='q0')}
    c0 sent basic.ack(ch=2, delivery_tag=1, multiple=False)
    {get(2, 2, 'm0.1', 0, queue='q1')}
    c0 sent basic.reject(ch=2, delivery_tag=2, requeue=True)
    {get(1, 1, 'm0.1', 0, True, queue='q1')}
    {empty(1, queue='q0')}
    """
    accepted(text, FANOUT)
    # The copy in q1 was never delivered before its first get: it is not flagged.
    rejected_at(text.replace(get(2, 2, "m0.1", 0, queue="q1"), get(2, 2, "m0.1", 0, True, queue="q1") + "  # REJECTED"),
                allowed=("received basic.get-ok(ch=2, delivery_tag=2, redelivered=False, msg=m0.1, message_count=0)",),
                config=FANOUT, exact=True)


RT3 = f"""
{pub(1, key='q7', mandatory=True)}
{pub(2, key='q7')}
c0 received basic.return(ch=1, reply_code=312, msg=m0.1)
"""


def test_unroutable_mandatory_returned_312_other_dropped_RT_3():
    accepted(RT3)
    rejected_at(RT3 + "c0 received basic.return(ch=1, reply_code=312, msg=m0.2)  # REJECTED\n",
                allowed=("sent (any client frame)",), exact=True)
    rejected_at(RT3.replace("reply_code=312, msg=m0.1)", "reply_code=313, msg=m0.1)  # REJECTED"),
                allowed=("received basic.return(ch=1, reply_code=312, msg=m0.1)",), exact=True)


# Recorded on RabbitMQ 3.10.8 (raw client; publish, qos and close in one write, 100 runs out of 100,
# with and without confirm mode): the channel process writes the return while it handles the publish,
# before the reply to the channel's next method.
RT3_FIRST = f"""
{pub(1, key='q7', mandatory=True)}
c0 sent basic.qos(ch=1, prefetch_count=1, global=False)
c0 sent channel.close(ch=1, reply_code=200, text='OK')
c0 received basic.return(ch=1, reply_code=312, msg=m0.1)
c0 received basic.qos-ok(ch=1)
c0 received channel.close-ok(ch=1)
"""
RETURN_LINE = "c0 received basic.return(ch=1, reply_code=312, msg=m0.1)\n"


def test_return_comes_before_the_reply_to_the_channels_next_method_RT_3():
    accepted(RT3_FIRST)
    allowed = ("received basic.return(ch=1, reply_code=312, msg=m0.1)",)
    # The reply to the next method overtaking the return.
    overtaken = RT3_FIRST.replace(RETURN_LINE, "").replace(
        "c0 received basic.qos-ok(ch=1)", "c0 received basic.qos-ok(ch=1)  # REJECTED\n" + RETURN_LINE.strip())
    rejected_at(overtaken, allowed=allowed, exact=True)


def test_a_broker_that_never_returns_is_caught_outside_confirm_and_tx_mode_RT_3():
    # The return used to be able to wait behind later replies and be lost with the channel.
    never = RT3_FIRST.replace(RETURN_LINE, "").replace("c0 received basic.qos-ok(ch=1)",
                                                       "c0 received basic.qos-ok(ch=1)  # REJECTED")
    rejected_at(never, allowed=("received basic.return(ch=1, reply_code=312, msg=m0.1)",), exact=True)
    closed = f"""
    {pub(1, key='q7', mandatory=True)}
    c0 sent channel.close(ch=1, reply_code=200, text='OK')
    c0 received channel.close-ok(ch=1)  # REJECTED
    """
    rejected_at(closed, allowed=("received basic.return(ch=1, reply_code=312, msg=m0.1)",), exact=True)


def test_a_return_unread_when_the_connection_drops_takes_nothing_back_RT_3():
    # The take of the publish wrote the return, which the client never read; the publish after it
    # on the same channel was still taken (the return does not stand in the way of what follows).
    accepted(f"""
    {pub(1, key='q7', mandatory=True)}
    {pub(2)}
    c0 lost
    c1 sent basic.get(ch=1, queue=q0, no_ack=True)
    c1 received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m0.2, message_count=0)
    """)


# ---------------------------------------------------------------- DU-4: exclusive queues

EXCLUSIVE = cfg(queues=(QueueSpec(durable=True), QueueSpec(exclusive=True, declared=False)))
LOCKED = ("c1 received channel.close(ch=1, reply_code=405, text=\"RESOURCE_LOCKED - cannot obtain exclusive access "
          "to locked queue 'q1' in vhost '/'. It could be originally declared on another connection or the "
          "exclusive property value does not match that of the original declaration.\")\nc1 sent channel.close-ok(ch=1)")
NO_Q1 = ("c1 received channel.close(ch=2, reply_code=404, text=\"NOT_FOUND - no queue 'q1' in vhost '/'\")\n"
         "c1 sent channel.close-ok(ch=2)")


def test_exclusive_queue_locked_for_others_and_deleted_with_its_connection_DU_4():
    text = f"""
    c0 sent queue.declare(ch=1, queue=q1, durable=True, exclusive=True)
    c0 received queue.declare-ok(ch=1, queue=q1)
    {pub(1, key='q1')}
    c1 sent basic.get(ch=1, queue=q1, no_ack=False)
    {LOCKED}
    c0 sent connection.close(ch=0, reply_code=200, text='OK')
    c0 received connection.close-ok(ch=0)
    c1 sent basic.get(ch=2, queue=q1, no_ack=False)
    {NO_Q1}
    """
    accepted(text, EXCLUSIVE)
    # Its owner uses it freely.
    accepted(f"""
    c0 sent queue.declare(ch=1, queue=q1, durable=True, exclusive=True)
    c0 received queue.declare-ok(ch=1, queue=q1)
    {pub(1, key='q1')}
    {get(1, 1, 'm0.1', 0, queue='q1')}
    """, EXCLUSIVE)


def test_no_lock_on_a_queue_nobody_declared_DU_4():
    text = f"""
    c1 sent basic.get(ch=1, queue=q1, no_ack=False)
    {LOCKED.splitlines()[0]}  # REJECTED
    """
    rejected_at(text, allowed=(
        "received channel.close(ch=1, reply_code=404, text=\"NOT_FOUND - no queue 'q1' in vhost '/'\")",),
        config=EXCLUSIVE, exact=True)


def redeclared(first: str, second: str, answer: str) -> str:
    return f"""
    c0 sent queue.declare(ch=1, queue=q1, {first})
    c0 received queue.declare-ok(ch=1, queue=q1)
    c0 sent queue.declare(ch=1, queue=q1, {second})
    {answer}
    """


INEQUIVALENT = ("c0 received channel.close(ch=1, reply_code=406, text=\"PRECONDITION_FAILED - inequivalent arg "
                "'durable' for queue 'q1' in vhost '/': received '{received}' but current is '{current}'\")")
NOT_DECLARED = cfg(queues=(QueueSpec(durable=True), QueueSpec(declared=False)))


def test_a_queue_declared_again_with_other_flags_is_refused_as_rabbitmq_does_DU_4_ER_2():
    """Measured on RabbitMQ 3.10.8: another exclusive flag is 405, then another durable flag of a queue
    that is not exclusive is 406; an exclusive queue's durable flag is never compared. The spec refuses
    so (``broker._queue_declare``), and nothing else: a broker that answers declare-ok is rejected."""
    transient, durable = "durable=False, exclusive=False", "durable=True, exclusive=False"
    refusals = [
        (durable, transient, INEQUIVALENT.format(received="false", current="true")),
        (transient, durable, INEQUIVALENT.format(received="true", current="false")),
        (transient, "durable=False, exclusive=True", LOCKED.replace("c1", "c0")),
        ("durable=True, exclusive=True", transient, LOCKED.replace("c1", "c0")),
    ]
    for first, second, refusal in refusals:
        accepted(redeclared(first, second, refusal), NOT_DECLARED)
        rejected_at(redeclared(first, second, "c0 received queue.declare-ok(ch=1, queue=q1)  # REJECTED"),
                    allowed=(refusal.splitlines()[0].split("c0 ", 1)[1],), config=NOT_DECLARED, exact=True)
    # The refusal must name the flag that differs, and an exclusive queue's durable flag is no reason.
    rejected_at(redeclared(durable, transient, INEQUIVALENT.format(received="true", current="false") + "  # REJECTED"),
                config=NOT_DECLARED)
    rejected_at(redeclared("durable=True, exclusive=True", "durable=False, exclusive=True",
                           INEQUIVALENT.format(received="false", current="true") + "  # REJECTED"), config=NOT_DECLARED)
    accepted(redeclared("durable=True, exclusive=True", "durable=False, exclusive=True",
                        "c0 received queue.declare-ok(ch=1, queue=q1)"), NOT_DECLARED)


def test_rabbitmqs_channel_crash_on_a_cancel_before_its_consume_ok_is_rejected_ER_3():
    """RabbitMQ 3.10.8, consume + cancel of its tag in one write: consume-ok, then connection.close 541 (its
    channel crashes, 20 of 20). A broker fault: the programs run against RabbitMQ keep away from it."""
    sent = """
    c0 sent basic.consume(ch=1, queue=q0, consumer_tag=1, no_ack=False)
    c0 sent basic.cancel(ch=1, consumer_tag=1)
    c0 received basic.consume-ok(ch=1, consumer_tag=1)
    """
    accepted(sent + "c0 received basic.cancel-ok(ch=1, consumer_tag=1)")
    rejected_at(sent + "c0 received connection.close(ch=0, reply_code=541, text='541')  # REJECTED")
