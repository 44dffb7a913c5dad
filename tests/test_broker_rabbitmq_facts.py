"""Replies and side effects as RabbitMQ 3.10.8 writes them (docs/rabbitmq-3.10.8-observations.md, section
C), on impl and on RabbitMQ: connection errors, delivery-tag edge cases, queue.delete and queue.purge,
frames on closing channels, exclusive consumers.

Every test runs against both brokers and compares what the client received, frame by frame: reply codes,
full reply texts, class and method ids, and the order of frames on a channel. Where RabbitMQ's order
between channels is a race, the test accepts the orders RabbitMQ showed.
"""

from __future__ import annotations

import uuid

import pytest
from pamqp import commands as C

from rabbitproof.recording.rawclient import ChannelClosed, RawConnection
from rabbitproof.recording.wire import shape, shapes, until_quiet, wait_ready



def name() -> str:
    return "rp-rf-" + uuid.uuid4().hex[:10]


def prefilled(conn: RawConnection, count: int, exclusive: bool = True) -> str:
    """A fresh queue holding `count` ready messages with bodies b'm1', b'm2', ..."""
    queue = name()
    conn.queue_declare(1, queue, exclusive=exclusive)
    for i in range(1, count + 1):
        conn.publish(1, b"m%d" % i, routing_key=queue)
    wait_ready(conn, 1, queue, count)
    return queue


def connection_close(code: int, text: str, class_id: int, method_id: int) -> tuple:
    return (0, "Connection.Close", code, text, class_id, method_id)


def channel_close(channel: int, code: int, text: str, class_id: int, method_id: int) -> tuple:
    return (channel, "Channel.Close", code, text, class_id, method_id)


def probe(conn: RawConnection, channel: int) -> None:
    """A synchronous method that shows the channel is still open (raises ChannelClosed otherwise)."""
    conn.rpc(channel, C.Basic.Qos(prefetch_count=0))


def ready(conn: RawConnection, channel: int, queue: str) -> int:
    return int(conn.queue_declare(channel, queue, passive=True).message_count)


# --- errors that close the connection ---------------------------------------------------------------


@pytest.mark.parametrize("nowait", [False, True])
def test_reusing_a_consumer_tag_on_its_channel_is_a_connection_error(connect, nowait):
    """C4: 530 on the same channel, for any queue; the same tag on another channel, or after cancel, is fine."""
    conn = connect(1, 2)
    q1, q2 = prefilled(conn, 0), prefilled(conn, 0)
    conn.basic_consume(1, q1, consumer_tag="T")
    conn.basic_consume(2, q1, consumer_tag="T")
    conn.rpc(1, C.Basic.Cancel(consumer_tag="T"))
    conn.basic_consume(1, q1, consumer_tag="T")
    conn.send(1, C.Basic.Consume(queue=q2, consumer_tag="T", nowait=nowait))
    assert shapes(until_quiet(conn, at_least=1)) == [
        connection_close(530, "NOT_ALLOWED - attempt to reuse consumer tag 'T'", 60, 20)
    ]


def test_a_reused_consumer_tag_is_refused_before_the_queue_is_looked_up(connect):
    conn = connect(1)
    conn.basic_consume(1, prefilled(conn, 0), consumer_tag="T")
    conn.send(1, C.Basic.Consume(queue=name(), consumer_tag="T"))
    assert shapes(until_quiet(conn, at_least=1)) == [
        connection_close(530, "NOT_ALLOWED - attempt to reuse consumer tag 'T'", 60, 20)
    ]


@pytest.mark.parametrize("global_", [False, True])
def test_prefetch_size_is_not_implemented(connect, global_):
    """B6: prefetch_size != 0 is a connection error 540."""
    conn = connect(1)
    conn.send(1, C.Basic.Qos(prefetch_size=1000, prefetch_count=5, global_=global_))
    assert shapes(until_quiet(conn, at_least=1)) == [
        connection_close(540, "NOT_IMPLEMENTED - prefetch_size!=0 (1000)", 60, 10)
    ]


@pytest.mark.parametrize("mandatory", [False, True])
def test_publish_immediate_is_not_implemented_and_enqueues_nothing(connect, mandatory):
    """C1: immediate=true is a connection error 540; the message is not enqueued."""
    owner = connect(1)
    queue = prefilled(owner, 0)
    conn = connect(1)
    publish = C.Basic.Publish(exchange="", routing_key=queue, mandatory=mandatory, immediate=True)
    conn.send_frames(conn.content_frames(1, publish, b"imm"))
    assert shapes(until_quiet(conn, at_least=1)) == [connection_close(540, "NOT_IMPLEMENTED - immediate=true", 60, 40)]
    assert ready(owner, 1, queue) == 0


@pytest.mark.filterwarnings("ignore:This command is deprecated:DeprecationWarning")  # basic.recover-async
@pytest.mark.parametrize("method, method_id", [(C.Basic.Recover, 110), (C.Basic.RecoverAsync, 100)])
def test_recover_without_requeue_is_not_implemented_RQ_5(connect, method, method_id):
    conn = connect(1)
    conn.send(1, method(requeue=False))
    assert shapes(until_quiet(conn, at_least=1)) == [
        connection_close(540, "NOT_IMPLEMENTED - requeue=false", 60, method_id)
    ]


@pytest.mark.parametrize(
    "method",
    [
        C.Basic.Publish(exchange="", routing_key="q"),
        C.Basic.Ack(delivery_tag=1),
        C.Basic.Qos(prefetch_count=1),
        C.Channel.CloseOk(),
        C.Channel.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0),
    ],
    ids=lambda m: m.name,
)
def test_any_method_on_a_never_opened_channel_is_a_connection_error(connect, method):
    """C6: 504 expected 'channel.open', with the class and method ids of the method."""
    conn = connect(1)
    if isinstance(method, C.Basic.Publish):
        conn.send_frames(conn.content_frames(5, method, b"x"))
    else:
        conn.send(5, method)
    class_id, method_id = method.index >> 16, method.index & 0xFFFF
    assert shapes(until_quiet(conn, at_least=1)) == [
        connection_close(504, "CHANNEL_ERROR - expected 'channel.open'", class_id, method_id)
    ]


def test_channel_open_on_an_open_channel_is_a_connection_error(connect):
    conn = connect(1)
    conn.send(1, C.Channel.Open())
    assert shapes(until_quiet(conn, at_least=1)) == [
        connection_close(504, "CHANNEL_ERROR - second 'channel.open' seen", 20, 10)
    ]


def test_channel_open_right_after_the_clients_channel_close_is_a_connection_error(connect):
    """C6d: channel.close and channel.open in one write: the channel is still closing (30/30 runs);
    RabbitMQ sends no close-ok before the connection.close."""
    conn = connect(1)
    conn.send(1, C.Channel.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0), C.Channel.Open())
    assert shapes(until_quiet(conn, at_least=1)) == [
        connection_close(504, "CHANNEL_ERROR - second 'channel.open' seen", 20, 10)
    ]


def test_channel_open_before_the_close_ok_of_a_broker_close_is_a_connection_error(connect):
    conn = connect(1)
    conn.send(1, C.Basic.Ack(delivery_tag=99))
    assert shapes(until_quiet(conn, at_least=1)) == [
        channel_close(1, 406, "PRECONDITION_FAILED - unknown delivery tag 99", 60, 80)
    ]
    conn.send(1, C.Basic.Qos(prefetch_count=1), C.Channel.Open())
    assert shapes(until_quiet(conn, at_least=1)) == [
        connection_close(504, "CHANNEL_ERROR - second 'channel.open' seen", 20, 10)
    ]


def test_channel_close_ok_on_an_open_channel_is_a_connection_error(connect):
    conn = connect(1)
    conn.send(1, C.Channel.CloseOk())
    assert shapes(until_quiet(conn, at_least=1)) == [
        connection_close(503, "COMMAND_INVALID - unimplemented method", 20, 41)
    ]


# --- acknowledgements: which tag is outstanding -----------------------------------------------------


@pytest.mark.parametrize("gets, acked, tag", [(2, [], 5), (3, [2], 2)], ids=["beyond", "already-acked"])
def test_ack_multiple_needs_its_exact_tag_outstanding_ACK_2_ACK_4(connect, gets, acked, tag):
    """C9: ack(N, multiple) with lower tags outstanding but not N is 406 unknown delivery tag N."""
    conn = connect(1)
    queue = prefilled(conn, 5)
    for _ in range(gets):
        conn.basic_get(1, queue)
    for done in acked:
        conn.basic_ack(1, done)
    conn.basic_ack(1, tag, multiple=True)
    assert shapes(until_quiet(conn, at_least=1)) == [
        channel_close(1, 406, f"PRECONDITION_FAILED - unknown delivery tag {tag}", 60, 80)
    ]


def test_ack_zero_multiple_with_nothing_outstanding_is_a_no_op_and_ack_zero_is_unknown_ACK_3_ACK_4(connect):
    conn = connect(1)
    queue = prefilled(conn, 5)
    conn.basic_ack(1, 0, multiple=True)
    conn.send(1, C.Basic.Nack(delivery_tag=0, multiple=True, requeue=True))
    assert ready(conn, 1, queue) == 5
    conn.basic_get(1, queue)
    conn.basic_get(1, queue)
    conn.basic_ack(1, 0, multiple=True)  # settles both
    assert ready(conn, 1, queue) == 3
    conn.basic_get(1, queue)
    conn.basic_ack(1, 0)
    assert shapes(until_quiet(conn, at_least=1)) == [
        channel_close(1, 406, "PRECONDITION_FAILED - unknown delivery tag 0", 60, 80)
    ]


# --- queue.delete and queue.purge -------------------------------------------------------------------


@pytest.mark.parametrize("if_unused, if_empty", [(False, False), (True, True)])
def test_deleting_a_missing_queue_replies_delete_ok_zero(connect, if_unused, if_empty):
    conn = connect(1)
    reply = conn.rpc(1, C.Queue.Delete(queue=name(), if_unused=if_unused, if_empty=if_empty))
    assert shape(reply) == (1, "Queue.DeleteOk", 0)


@pytest.mark.parametrize(
    "if_unused, if_empty, refusal",
    [(True, False, "in use"), (False, True, "not empty"), (True, True, "not empty")],
)
def test_delete_if_unused_and_if_empty_refusals(connect, if_unused, if_empty, refusal):
    """C3: a queue with a consumer and ready messages; RabbitMQ checks if-empty first."""
    conn = connect(1, 2)
    queue = prefilled(conn, 4)
    conn.basic_qos(2, 2)
    conn.basic_consume(2, queue, consumer_tag="C")
    conn.send(1, C.Queue.Delete(queue=queue, if_unused=if_unused, if_empty=if_empty))
    closed = [c for c in until_quiet(conn) if c.channel == 1]
    assert shapes(closed) == [
        channel_close(1, 406, f"PRECONDITION_FAILED - queue '{queue}' in vhost '/' {refusal}", 50, 40)
    ]


def test_delete_if_empty_allows_only_unacked_messages_and_they_can_still_be_settled(connect):
    """C3: two unacked gets, nothing ready: if-empty deletes; ack and reject(requeue) of the deleted
    queue's deliveries are then accepted silently."""
    conn = connect(1, 2)
    queue = prefilled(conn, 2)
    conn.basic_get(2, queue)
    conn.basic_get(2, queue)
    assert shape(conn.rpc(1, C.Queue.Delete(queue=queue, if_empty=True))) == (1, "Queue.DeleteOk", 0)
    conn.basic_ack(2, 1)
    conn.send(2, C.Basic.Reject(delivery_tag=2, requeue=True))
    probe(conn, 2)
    assert until_quiet(conn) == []


def test_a_rejected_delivery_of_a_deleted_queue_is_not_dead_lettered_ACK_6(connect):
    """The deleted queue is gone with its dead-letter settings: nack(requeue=false) drops the message."""
    conn = connect(1)
    dead = prefilled(conn, 0)
    queue = name()
    conn.queue_declare(1, queue, exclusive=True,
                       arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dead})
    conn.publish(1, b"m1", routing_key=queue)
    conn.publish(1, b"m2", routing_key=queue)
    wait_ready(conn, 1, queue, 2)
    conn.basic_get(1, queue)
    conn.send(1, C.Basic.Nack(delivery_tag=1, requeue=False))
    wait_ready(conn, 1, dead, 1)  # dead-lettered while its queue exists
    conn.basic_get(1, queue)
    conn.rpc(1, C.Queue.Delete(queue=queue))
    conn.send(1, C.Basic.Nack(delivery_tag=2, requeue=False))
    probe(conn, 1)
    assert until_quiet(conn) == []
    assert ready(conn, 1, dead) == 1


def test_delete_if_unused_ignores_get_deliveries(connect):
    conn = connect(1)
    queue = prefilled(conn, 2)
    conn.basic_get(1, queue)
    assert shape(conn.rpc(1, C.Queue.Delete(queue=queue, if_unused=True))) == (1, "Queue.DeleteOk", 1)
    conn.basic_ack(1, 1)
    probe(conn, 1)
    assert until_quiet(conn) == []


def test_deleting_a_queue_cancels_its_consumer_after_delete_ok_on_the_same_channel(connect):
    """C3b: delete-ok first, then basic.cancel (nowait) to the consumer on the deleting channel (30/30)."""
    conn = connect(1)
    queue = prefilled(conn, 1)
    conn.basic_consume(1, queue, consumer_tag="K")
    assert [shape(c)[:4] for c in until_quiet(conn, at_least=1)] == [(1, "deliver", "K", 1)]
    conn.send(1, C.Queue.Delete(queue=queue))
    assert shapes(until_quiet(conn, at_least=2)) == [(1, "Queue.DeleteOk", 0), (1, "cancel", "K", True)]


def test_deleting_a_queue_cancels_consumers_of_other_channels_and_connections(connect):
    """C3: the other connection's consumer gets basic.cancel (nowait); its unacked deliveries can be
    acked and rejected silently, and its own basic.cancel of the tag gets cancel-ok. On another channel
    of the deleting connection, delete-ok and basic.cancel come in either order (22/8 of 30)."""
    conn = connect(1, 2)
    other = connect(1)
    queue = prefilled(conn, 3, exclusive=False)
    other.basic_qos(1, 2)
    other.basic_consume(1, queue, consumer_tag="BC")
    conn.basic_consume(2, queue, consumer_tag="K")
    until_quiet(other)
    until_quiet(conn)
    conn.send(1, C.Queue.Delete(queue=queue))
    assert shapes(until_quiet(conn)) in (
        [(1, "Queue.DeleteOk", 0), (2, "cancel", "K", True)],
        [(2, "cancel", "K", True), (1, "Queue.DeleteOk", 0)],
    )
    assert shapes(until_quiet(other, at_least=1)) == [(1, "cancel", "BC", True)]
    other.basic_ack(1, 1)
    other.send(1, C.Basic.Reject(delivery_tag=2, requeue=True))
    assert shape(other.rpc(1, C.Basic.Cancel(consumer_tag="BC"))) == (1, "Basic.CancelOk")
    probe(other, 1)
    assert until_quiet(other) == []


def test_purge_counts_ready_messages_and_leaves_unacked_deliveries_alone(connect):
    """C2: 3 ready and 2 unacked: purge-ok 3, the consumer stays; the unacked ones can be acked, and a
    rejected one comes back and is redelivered at once."""
    conn = connect(1, 2)
    queue = prefilled(conn, 5)
    conn.basic_qos(2, 2)
    conn.basic_consume(2, queue, consumer_tag="C")
    assert [shape(c)[:4] for c in until_quiet(conn, at_least=2)] == [(2, "deliver", "C", 1), (2, "deliver", "C", 2)]
    assert shape(conn.rpc(1, C.Queue.Purge(queue=queue))) == (1, "Queue.PurgeOk", 3)
    declared = conn.queue_declare(1, queue, passive=True)
    assert (declared.message_count, declared.consumer_count) == (0, 1)
    conn.basic_ack(2, 1)
    conn.send(2, C.Basic.Reject(delivery_tag=2, requeue=True))
    assert shapes(until_quiet(conn, at_least=1)) == [(2, "deliver", "C", 3, True, b"m2")]


def test_purging_a_missing_queue_is_not_found(connect):
    conn = connect(1)
    missing = name()
    conn.send(1, C.Queue.Purge(queue=missing))
    assert shapes(until_quiet(conn, at_least=1)) == [
        channel_close(1, 404, f"NOT_FOUND - no queue '{missing}' in vhost '/'", 50, 30)
    ]


# --- frames on a closing channel --------------------------------------------------------------------


def test_frames_after_the_clients_channel_close_are_dropped_ER_1(connect):
    """C6: channel.close then publish, ack, qos, get in one write: only close-ok comes back; the publish
    is not enqueued, the ack not applied (the get delivery is requeued by the close)."""
    conn = connect(1, 2)
    queue = prefilled(conn, 2)
    assert shape(conn.basic_get(1, queue))[:3] == (1, "get-ok", 1)
    frames = [(1, C.Channel.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0))]
    frames += conn.content_frames(1, C.Basic.Publish(exchange="", routing_key=queue), b"after-close")
    frames += [(1, C.Basic.Ack(delivery_tag=1)), (1, C.Basic.Qos(prefetch_count=1)), (1, C.Basic.Get(queue=queue))]
    conn.send_frames(frames)
    assert shapes(until_quiet(conn, at_least=1)) == [(1, "Channel.CloseOk")]
    conn.channel_open(1)
    assert ready(conn, 1, queue) == 2


def test_frames_after_the_brokers_channel_close_are_dropped_ER_1(connect):
    """C6b/C6c: after the broker's channel.close, frames are ignored until close-ok; a client channel.close
    gets close-ok; close-ok and channel.open in one write reopen the channel."""
    conn = connect(1, 2)
    queue = prefilled(conn, 2)
    conn.basic_get(1, queue)
    conn.basic_ack(1, 99)
    assert shapes(until_quiet(conn, at_least=1)) == [
        channel_close(1, 406, "PRECONDITION_FAILED - unknown delivery tag 99", 60, 80)
    ]
    frames = conn.content_frames(1, C.Basic.Publish(exchange="", routing_key=queue), b"after-broker-close")
    frames += [(1, C.Basic.Qos(prefetch_count=1)), (1, C.Basic.Ack(delivery_tag=1)), (1, C.Basic.Get(queue=queue))]
    frames += [(1, C.Queue.Declare(queue=queue, passive=True))]
    conn.send_frames(frames)
    assert until_quiet(conn) == []
    conn.send(1, C.Channel.Close(reply_code=200, reply_text="me too", class_id=0, method_id=0))
    assert shapes(until_quiet(conn, at_least=1)) == [(1, "Channel.CloseOk")]
    conn.send(1, C.Channel.CloseOk(), C.Channel.Open())
    assert shapes(until_quiet(conn, at_least=1)) == [(1, "Channel.OpenOk")]
    assert ready(conn, 1, queue) == 2


def test_the_brokers_channel_close_requeues_the_deliveries_of_a_queue_the_channel_consumes_RQ_4(connect):
    """The channel consumes from the queue: its get and consumer deliveries are back before its close-ok.
    (RabbitMQ tells only the queues the channel consumes from at the channel.close: a get delivery from
    a queue without its consumer comes back at close-ok, C6b; impl gives everything back at the close.)"""
    conn = connect(1, 2)
    queue = prefilled(conn, 3)
    conn.basic_get(1, queue)
    conn.basic_qos(1, 1)
    conn.basic_consume(1, queue, consumer_tag="C")
    assert [shape(c)[:4] for c in until_quiet(conn, at_least=1)] == [(1, "deliver", "C", 2)]
    conn.basic_ack(1, 99)
    assert shapes(until_quiet(conn, at_least=1)) == [
        channel_close(1, 406, "PRECONDITION_FAILED - unknown delivery tag 99", 60, 80)
    ]
    wait_ready(conn, 2, queue, 3)


# --- exclusive consumers ----------------------------------------------------------------------------


def test_an_exclusive_consumer_locks_out_every_other_consumer_but_not_basic_get(connect):
    """C5b: with an exclusive consumer, consumes on another channel or connection are refused (403);
    basic.get is not; once it is cancelled, consumers are welcome again."""
    conn = connect(1, 2)
    other = connect(1)
    getter = connect(1)
    queue = prefilled(conn, 0, exclusive=False)
    conn.basic_consume(1, queue, consumer_tag="X", exclusive=True)
    text = f"ACCESS_REFUSED - queue '{queue}' in vhost '/' in exclusive use"
    for client, channel in ((conn, 2), (other, 1)):
        client.send(channel, C.Basic.Consume(queue=queue, consumer_tag="W"))
        assert shapes(until_quiet(client, at_least=1)) == [channel_close(channel, 403, text, 60, 20)]
        client.send(channel, C.Channel.CloseOk())
    assert shape(getter.basic_get(1, queue)) == (1, "Basic.GetEmpty")
    assert getter.queue_declare(1, queue, passive=True).consumer_count == 1
    conn.rpc(1, C.Basic.Cancel(consumer_tag="X"))
    other.channel_open(1)
    assert other.basic_consume(1, queue, consumer_tag="W") == "W"


@pytest.mark.parametrize("same_channel", [True, False])
def test_an_exclusive_consume_on_a_queue_with_a_consumer_is_refused(connect, same_channel):
    conn = connect(1, 2)
    queue = prefilled(conn, 0)
    conn.basic_consume(1, queue, consumer_tag="A")
    channel = 1 if same_channel else 2
    with pytest.raises(ChannelClosed) as closed:
        conn.basic_consume(channel, queue, consumer_tag="X", exclusive=True)
    assert (closed.value.reply_code, closed.value.reply_text, closed.value.class_id, closed.value.method_id) == (
        403, f"ACCESS_REFUSED - queue '{queue}' in vhost '/' in exclusive use", 60, 20)
