"""The broker over TCP, observed frame by frame with the raw pamqp client: reply codes and texts as
RabbitMQ 3.10.8 gives them, and the order of frames."""

from __future__ import annotations

import struct

import pytest
from pamqp import body, commands as C, header

from tests.impl.rawclient import ConnectionClosedByPeer, RawClient


def client(server, **kwargs) -> RawClient:
    raw = RawClient(server.host, server.port).connect(**kwargs)
    raw.open_channel(1)
    return raw


def channel_close(raw: RawClient) -> C.Channel.Close:
    return raw.expect(C.Channel.Close)


def connection_close(raw: RawClient) -> C.Connection.Close:
    return raw.expect(C.Connection.Close)


def deliver_n(raw: RawClient, queue: str, n: int, consume: bool = True) -> list:
    raw.send(1, C.Queue.Declare(queue=queue, auto_delete=False))
    raw.expect(C.Queue.DeclareOk)
    for i in range(n):
        raw.publish(1, "", queue, b"m%d" % i)
    if consume:
        raw.send(1, C.Basic.Consume(queue=queue, consumer_tag="c"))
        raw.expect(C.Basic.ConsumeOk)
    return [raw.read_message() for _ in range(n)] if consume else []


def test_delivery_tags_start_at_one_and_increase_DT_1(server, qname):
    raw = client(server)
    got = deliver_n(raw, qname, 3)
    assert [m.delivery_tag for m, _, _ in got] == [1, 2, 3]
    assert [p for _, _, p in got] == [b"m0", b"m1", b"m2"]
    assert all(not m.redelivered for m, _, _ in got)


def test_unknown_delivery_tag_closes_channel_ACK_4(server):
    raw = client(server)
    raw.send(1, C.Basic.Ack(delivery_tag=5))
    close = channel_close(raw)
    assert (close.reply_code, close.reply_text) == (406, "PRECONDITION_FAILED - unknown delivery tag 5")
    assert (close.class_id, close.method_id) == (60, 80)


def test_double_ack_is_unknown_tag_ACK_7(server, qname):
    raw = client(server)
    deliver_n(raw, qname, 1)
    raw.send(1, C.Basic.Ack(delivery_tag=1))
    raw.send(1, C.Basic.Ack(delivery_tag=1))
    assert channel_close(raw).reply_text == "PRECONDITION_FAILED - unknown delivery tag 1"


def test_ack_multiple_settles_up_to_tag_ACK_2(server, qname):
    raw = client(server)
    deliver_n(raw, qname, 4)
    raw.send(1, C.Basic.Ack(delivery_tag=3, multiple=True))
    raw.send(1, C.Basic.Cancel(consumer_tag="c"))
    raw.expect(C.Basic.CancelOk)
    raw.send(1, C.Channel.Close(reply_code=200, reply_text="", class_id=0, method_id=0))
    raw.expect(C.Channel.CloseOk)
    raw.open_channel(1)
    raw.send(1, C.Queue.Declare(queue=qname, passive=True))
    assert raw.expect(C.Queue.DeclareOk).message_count == 1  # only tag 4 came back (RQ-4)


def test_ack_zero_multiple_settles_everything_ACK_3(server, qname):
    raw = client(server)
    deliver_n(raw, qname, 3)
    raw.send(1, C.Basic.Ack(delivery_tag=0, multiple=True))
    raw.send(1, C.Basic.Ack(delivery_tag=0, multiple=True))  # nothing outstanding: still no error
    raw.send(1, C.Queue.Declare(queue=qname, passive=True))
    assert raw.expect(C.Queue.DeclareOk).message_count == 0


def test_nack_requeue_goes_back_in_place_and_redelivered_RQ_1_RQ_2(server, qname):
    raw = client(server)
    deliver_n(raw, qname, 3, consume=False)
    for _ in range(3):
        raw.send(1, C.Basic.Get(queue=qname))
        raw.read_message()
    raw.send(1, C.Basic.Nack(delivery_tag=2, multiple=False, requeue=True))
    raw.send(1, C.Basic.Nack(delivery_tag=1, multiple=False, requeue=True))
    raw.send(1, C.Basic.Get(queue=qname))
    method, _, payload = raw.read_message()
    assert (payload, method.redelivered, method.delivery_tag, method.message_count) == (b"m0", True, 4, 1)
    raw.send(1, C.Basic.Get(queue=qname))
    method, _, payload = raw.read_message()
    assert (payload, method.redelivered) == (b"m1", True)


def test_get_empty_and_message_count_DS_2(server, qname):
    raw = client(server)
    deliver_n(raw, qname, 2, consume=False)
    raw.send(1, C.Basic.Get(queue=qname, no_ack=True))
    method, _, _ = raw.read_message()
    assert method.message_count == 1
    raw.send(1, C.Basic.Get(queue=qname, no_ack=True))
    raw.read_message()
    raw.send(1, C.Basic.Get(queue=qname))
    raw.expect(C.Basic.GetEmpty)


def test_reject_of_auto_ack_delivery_is_unknown_ACK_4(server, qname):
    raw = client(server)
    deliver_n(raw, qname, 1, consume=False)
    raw.send(1, C.Basic.Get(queue=qname, no_ack=True))
    raw.read_message()
    raw.send(1, C.Basic.Reject(delivery_tag=1, requeue=True))
    close = channel_close(raw)
    assert (close.reply_text, close.method_id) == ("PRECONDITION_FAILED - unknown delivery tag 1", 90)


def test_tag_of_another_channel_is_unknown_ACK_4(server, qname):
    raw = client(server)
    deliver_n(raw, qname, 1)
    raw.open_channel(2)
    raw.send(2, C.Basic.Ack(delivery_tag=1))
    got = raw.expect(C.Channel.Close)
    assert got.reply_text == "PRECONDITION_FAILED - unknown delivery tag 1"
    assert raw.received[-1][0] == 2


def test_channel_ignores_frames_until_close_ok_then_reopens_fresh_ER_1(server, qname):
    raw = client(server)
    deliver_n(raw, qname, 1, consume=False)
    raw.send(1, C.Basic.Ack(delivery_tag=9))
    raw.send(1, C.Basic.Get(queue=qname))  # ignored: the channel is closing
    channel_close(raw)
    raw.send(1, C.Channel.CloseOk())
    raw.send(1, C.Channel.Open())
    raw.expect(C.Channel.OpenOk)
    raw.send(1, C.Basic.Get(queue=qname))
    method, _, _ = raw.read_message()
    assert method.delivery_tag == 1  # a new channel: tags start again at 1


def test_recover_requeue_false_is_not_implemented_RQ_5(server):
    raw = client(server)
    raw.send(1, C.Basic.Recover(requeue=False))
    close = connection_close(raw)
    assert (close.reply_code, close.reply_text) == (540, "NOT_IMPLEMENTED - requeue=false")


def test_recover_requeues_outstanding_RQ_5(server, qname):
    raw = client(server)
    deliver_n(raw, qname, 2)
    raw.send(1, C.Basic.Recover(requeue=True))
    raw.expect(C.Basic.RecoverOk)
    again = [raw.read_message() for _ in range(2)]
    assert [(m.delivery_tag, m.redelivered, p) for m, _, p in again] == [(3, True, b"m0"), (4, True, b"m1")]


@pytest.mark.parametrize(
    "first,second,text,class_id",
    [
        (C.Confirm.Select(), C.Tx.Select(), "PRECONDITION_FAILED - cannot switch from confirm to tx mode", 90),
        (C.Tx.Select(), C.Confirm.Select(), "PRECONDITION_FAILED - cannot switch from tx to confirm mode", 85),
    ],
)
def test_confirm_and_tx_modes_exclude_each_other_PC_8(server, first, second, text, class_id):
    raw = client(server)
    raw.send(1, first)
    raw.recv_skip_heartbeats()
    raw.send(1, second)
    close = channel_close(raw)
    assert (close.reply_code, close.reply_text, close.class_id) == (406, text, class_id)


@pytest.mark.parametrize("method,method_id", [(C.Tx.Commit(), 20), (C.Tx.Rollback(), 30)])
def test_commit_on_non_tx_channel_TX_10(server, method, method_id):
    raw = client(server)
    raw.send(1, method)
    close = channel_close(raw)
    assert (close.reply_text, close.method_id) == ("PRECONDITION_FAILED - channel is not transactional", method_id)


def test_publish_to_missing_exchange_is_404_and_never_confirmed_PC_9(server):
    raw = client(server)
    raw.send(1, C.Confirm.Select())
    raw.expect(C.Confirm.SelectOk)
    raw.publish(1, "no-such-exchange", "k", b"x")
    close = channel_close(raw)
    assert (close.reply_code, close.reply_text) == (404, "NOT_FOUND - no exchange 'no-such-exchange' in vhost '/'")
    assert raw.drain(0.3) == []


def test_mandatory_return_precedes_confirm_PC_4_RT_3(server):
    raw = client(server)
    raw.send(1, C.Confirm.Select())
    raw.expect(C.Confirm.SelectOk)
    raw.publish(1, "amq.direct", "nobody", b"lost", mandatory=True)
    returned, _, payload = raw.read_message()
    assert (returned.reply_code, returned.reply_text, payload) == (312, "NO_ROUTE", b"lost")
    ack = raw.expect(C.Basic.Ack)
    assert (ack.delivery_tag, ack.multiple) == (1, False)


def test_unroutable_non_mandatory_is_dropped_and_confirmed_RT_3_PC_4(server):
    raw = client(server)
    raw.send(1, C.Confirm.Select())
    raw.expect(C.Confirm.SelectOk)
    raw.publish(1, "amq.direct", "nobody", b"lost")
    assert raw.expect(C.Basic.Ack).delivery_tag == 1


def test_confirms_number_publishes_and_multiple_covers_lower_tags_PC_1_PC_3(server, qname):
    raw = client(server)
    raw.send(1, C.Queue.Declare(queue=qname))
    raw.expect(C.Queue.DeclareOk)
    raw.send(1, C.Confirm.Select())
    raw.expect(C.Confirm.SelectOk)
    for i in range(50):
        raw.publish(1, "", qname, b"x", C.Basic.Properties(delivery_mode=2 if i % 2 else 1))
    confirmed: set[int] = set()
    while len(confirmed) < 50:
        ack = raw.expect(C.Basic.Ack)
        new = set(range(1, ack.delivery_tag + 1)) - confirmed if ack.multiple else {ack.delivery_tag}
        assert new and ack.delivery_tag not in confirmed  # PC-2: never twice
        confirmed |= new
    assert confirmed == set(range(1, 51))


def test_tx_publish_invisible_until_commit_and_return_before_commit_ok_TX_2_TX_6(server, qname):
    raw = client(server)
    raw.send(1, C.Queue.Declare(queue=qname))
    raw.expect(C.Queue.DeclareOk)
    raw.send(1, C.Tx.Select())
    raw.expect(C.Tx.SelectOk)
    raw.publish(1, "", qname, b"held")
    raw.publish(1, "amq.direct", "nobody", b"unroutable", mandatory=True)
    raw.send(1, C.Queue.Declare(queue=qname, passive=True))
    assert raw.expect(C.Queue.DeclareOk).message_count == 0
    raw.send(1, C.Tx.Commit())
    returned, _, payload = raw.read_message()
    assert isinstance(returned, C.Basic.Return) and payload == b"unroutable"
    raw.expect(C.Tx.CommitOk)
    raw.send(1, C.Queue.Declare(queue=qname, passive=True))
    assert raw.expect(C.Queue.DeclareOk).message_count == 1


def test_tx_rollback_drops_publishes_and_keeps_deliveries_outstanding_TX_3(server, qname):
    raw = client(server)
    deliver_n(raw, qname, 1, consume=False)
    raw.send(1, C.Tx.Select())
    raw.expect(C.Tx.SelectOk)
    raw.send(1, C.Basic.Get(queue=qname))
    raw.read_message()
    raw.send(1, C.Basic.Ack(delivery_tag=1))
    raw.publish(1, "", qname, b"dropped")
    raw.send(1, C.Tx.Rollback())
    raw.expect(C.Tx.RollbackOk)
    raw.send(1, C.Basic.Ack(delivery_tag=1))  # outstanding again: can be settled
    raw.send(1, C.Tx.Commit())
    raw.expect(C.Tx.CommitOk)
    raw.send(1, C.Queue.Declare(queue=qname, passive=True))
    assert raw.expect(C.Queue.DeclareOk).message_count == 0


def test_tx_unknown_tag_detected_on_arrival_TX_5(server):
    raw = client(server)
    raw.send(1, C.Tx.Select())
    raw.expect(C.Tx.SelectOk)
    raw.send(1, C.Basic.Ack(delivery_tag=3))
    assert channel_close(raw).reply_text == "PRECONDITION_FAILED - unknown delivery tag 3"


def test_rollback_does_not_requeue_consumed_messages_TX_4(server, qname):
    raw = client(server)
    deliver_n(raw, qname, 1, consume=False)
    raw.send(1, C.Tx.Select())
    raw.expect(C.Tx.SelectOk)
    raw.send(1, C.Basic.Consume(queue=qname))
    raw.expect(C.Basic.ConsumeOk)
    raw.read_message()
    raw.send(1, C.Tx.Rollback())
    raw.expect(C.Tx.RollbackOk)
    assert raw.drain(0.3) == []  # no redelivery


def test_exclusive_queue_locked_for_other_connections_DU_4(server, qname):
    owner = client(server)
    owner.send(1, C.Queue.Declare(queue=qname, exclusive=True, durable=True))
    owner.expect(C.Queue.DeclareOk)
    other = client(server)
    other.send(1, C.Basic.Consume(queue=qname))
    close = channel_close(other)
    assert close.reply_code == 405
    assert close.reply_text.startswith(f"RESOURCE_LOCKED - cannot obtain exclusive access to locked queue '{qname}'")
    owner.close()
    other.send(1, C.Channel.CloseOk())
    other.open_channel(1)
    for _ in range(50):
        other.send(1, C.Queue.Declare(queue=qname, passive=True))
        got = other.recv_skip_heartbeats()
        if isinstance(got[1], C.Channel.Close):  # deleted with its connection
            assert got[1].reply_code == 404
            return
    raise AssertionError("exclusive queue survived its connection")


@pytest.mark.parametrize(
    "frames,code,text",
    [
        ([C.Queue.Declare(queue="absent-q", passive=True)], 404, "NOT_FOUND - no queue 'absent-q' in vhost '/'"),
        ([C.Exchange.Declare(exchange="amq.nope", exchange_type="direct")], 403,
         "ACCESS_REFUSED - exchange name 'amq.nope' contains reserved prefix 'amq.*'"),
        ([C.Queue.Bind(queue="x", exchange="")], 403, "ACCESS_REFUSED - operation not permitted on the default exchange"),
        ([C.Exchange.Delete(exchange="amq.direct")], 403,
         "ACCESS_REFUSED - deletion of system exchange 'amq.direct' in vhost '/' not allowed"),
        ([C.Exchange.Declare(exchange="ex-eq", exchange_type="direct", auto_delete=True),
          C.Exchange.Declare(exchange="ex-eq", exchange_type="fanout", auto_delete=True)], 406,
         "PRECONDITION_FAILED - inequivalent arg 'type' for exchange 'ex-eq' in vhost '/': "
         "received 'fanout' but current is 'direct'"),
    ],
)
def test_channel_errors_have_rabbitmq_texts_ER_1_ER_2(server, frames, code, text):
    raw = client(server)
    for frame in frames:
        raw.send(1, frame)
    while True:
        got = raw.recv_skip_heartbeats()
        if isinstance(got[1], C.Channel.Close):
            break
    assert (got[1].reply_code, got[1].reply_text) == (code, text)


@pytest.mark.parametrize(
    "data,code",
    [
        (struct.pack(">BHI", 9, 1, 3) + b"abc\xce", 501),  # unknown frame type
        (struct.pack(">BHI", 1, 1, 4) + struct.pack(">HH", 60, 40) + b"\x00", 501),  # bad frame end
        (struct.pack(">BHI", 1, 1, 6) + struct.pack(">HH", 60, 40) + b"\x00\x00\xce", 501),  # truncated
        (struct.pack(">BHI", 3, 1, 3) + b"abc\xce", 505),  # body without publish
        (struct.pack(">BHI", 1, 1, 4) + struct.pack(">HH", 60, 99) + b"\xce", 503),  # unknown method
        (struct.pack(">BHI", 1, 5, 11) + struct.pack(">HHIHB", 60, 10, 0, 1, 0) + b"\xce", 504),  # not open
    ],
)
def test_malformed_frames_close_the_connection_ER_2_ER_3(server, data, code):
    raw = client(server)
    raw.send_raw(data)
    assert connection_close(raw).reply_code == code
    raw.send(0, C.Connection.CloseOk())
    with pytest.raises(ConnectionClosedByPeer):
        raw.recv(2.0)


def test_wrong_protocol_header_gets_ours_back(server):
    raw = RawClient(server.host, server.port)
    raw.send_raw(b"AMQP\x01\x01\x00\x0a")
    assert raw.sock.recv(8) == b"AMQP\x00\x00\x09\x01"


def test_bad_password_refused_with_access_refused(server):
    raw = RawClient(server.host, server.port)
    raw.send_raw(header.ProtocolHeader().marshal())
    raw.expect(C.Connection.Start)
    raw.send(0, C.Connection.StartOk(client_properties={"capabilities": {"authentication_failure_close": True}},
                                     mechanism="PLAIN", response="\0guest\0wrong", locale="en_US"))
    close = connection_close(raw)
    assert (close.reply_code, close.reply_text) == (
        403, "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN. For details see the broker logfile.")


def test_configured_user_can_log_in(server):
    raw = RawClient(server.host, server.port).connect(user="alice", password="secret")
    raw.open_channel(1)


def test_frame_max_negotiated_splits_bodies_and_limits_frames(server, qname):
    raw = client(server, frame_max=4096)
    payload = bytes(range(256)) * 40  # 10240 bytes: three body frames of at most 4088
    raw.send(1, C.Queue.Declare(queue=qname))
    raw.expect(C.Queue.DeclareOk)
    raw.publish(1, "", qname, payload)
    raw.send(1, C.Basic.Get(queue=qname, no_ack=True))
    raw.expect(C.Basic.GetOk)
    raw.expect(header.ContentHeader)
    sizes = [len(raw.expect(body.ContentBody).value) for _ in range(3)]
    assert sizes == [4088, 4088, 10240 - 2 * 4088]
    raw.send_raw(struct.pack(">BHI", 3, 1, 5000) + b"x" * 5000 + b"\xce")
    close = connection_close(raw)
    assert close.reply_code == 501 and "frame_too_large" in close.reply_text


def test_channel_max_negotiated(server):
    """channel_max bounds how many channels are open at once, as in RabbitMQ 3.10.8 (530 NOT_ALLOWED);
    the comparison with RabbitMQ is in tests/test_broker_features.py."""
    raw = client(server, channel_max=3)
    for number in (2, 7):  # with channel 1, three channels are open
        raw.open_channel(number)
    raw.send(4, C.Channel.Open())
    assert connection_close(raw).reply_code == 530


def test_heartbeats_sent_when_negotiated(server):
    raw = RawClient(server.host, server.port).connect(heartbeat_s=1)
    got = raw.recv(3.0)
    assert got is not None and got[1].name == "Heartbeat"


def test_silent_peer_dropped_after_two_heartbeat_intervals(server):
    raw = RawClient(server.host, server.port).connect(heartbeat_s=1)
    with pytest.raises(ConnectionClosedByPeer):
        for _ in range(40):
            raw.recv(0.25)


def test_auto_delete_queue_goes_with_its_last_consumer(server, qname):
    raw = client(server)
    raw.send(1, C.Queue.Declare(queue=qname, auto_delete=True))
    raw.expect(C.Queue.DeclareOk)
    raw.send(1, C.Basic.Consume(queue=qname, consumer_tag="only"))
    raw.expect(C.Basic.ConsumeOk)
    raw.send(1, C.Basic.Cancel(consumer_tag="only"))
    raw.expect(C.Basic.CancelOk)
    raw.send(1, C.Queue.Declare(queue=qname, passive=True))
    assert channel_close(raw).reply_code == 404


def test_deleting_a_queue_cancels_its_consumers_with_basic_cancel(server, qname):
    consumer = client(server, capabilities={"consumer_cancel_notify": True})
    consumer.send(1, C.Queue.Declare(queue=qname))
    consumer.expect(C.Queue.DeclareOk)
    consumer.send(1, C.Basic.Consume(queue=qname, consumer_tag="victim"))
    consumer.expect(C.Basic.ConsumeOk)
    other = client(server)
    other.send(1, C.Queue.Delete(queue=qname))
    assert other.expect(C.Queue.DeleteOk).message_count == 0
    assert raw_cancel(consumer).consumer_tag == "victim"


def raw_cancel(raw: RawClient) -> C.Basic.Cancel:
    return raw.expect(C.Basic.Cancel)
