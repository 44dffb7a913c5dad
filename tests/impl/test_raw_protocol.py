"""The broker over TCP, observed frame by frame with the raw pamqp client: reply codes and texts as
RabbitMQ 3.10.8 gives them, and the order of frames."""

from __future__ import annotations

import struct
import time

import pytest
from pamqp import body, commands as C, header, heartbeat

from rabbitproof.recording.rawclient import Command, ConnectionLost, RawConnection
from rabbitproof.recording.wire import until_quiet
from tests.fixtures.patience import REPLY_PATIENCE


def client(server, **kwargs) -> RawConnection:
    kwargs.setdefault("timeout", REPLY_PATIENCE)
    raw = RawConnection.connect(server.host, server.port, **kwargs)
    raw.channel_open(1)
    return raw


def channel_close(raw: RawConnection, channel: int = 1) -> C.Channel.Close:
    return raw.expect(channel, C.Channel.Close).method


def connection_close(raw: RawConnection) -> C.Connection.Close:
    return raw.expect(0, C.Connection.Close).method


def expect(raw: RawConnection, method_type: type, channel: int = 1):
    """The next `method_type` on the channel (its method frame)."""
    return raw.expect(channel, method_type).method


def read_message(raw: RawConnection, channel: int = 1) -> tuple[object, object, bytes]:
    """The next basic.deliver, basic.get-ok or basic.return: (method, properties, body)."""
    command: Command = raw.expect(channel, C.Basic.Deliver, C.Basic.GetOk, C.Basic.Return)
    return command.method, command.properties, command.body or b""


def deliver_n(raw: RawConnection, queue: str, n: int, consume: bool = True) -> list:
    raw.rpc(1, C.Queue.Declare(queue=queue, auto_delete=False))
    for i in range(n):
        raw.publish(1, b"m%d" % i, routing_key=queue)
    if consume:
        raw.rpc(1, C.Basic.Consume(queue=queue, consumer_tag="c"))
    return [read_message(raw) for _ in range(n)] if consume else []


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
    expect(raw, C.Basic.CancelOk)
    raw.send(1, C.Channel.Close(reply_code=200, reply_text="", class_id=0, method_id=0))
    expect(raw, C.Channel.CloseOk)
    raw.channel_open(1)
    raw.send(1, C.Queue.Declare(queue=qname, passive=True))
    assert expect(raw, C.Queue.DeclareOk).message_count == 1  # only tag 4 came back (RQ-4)


def test_ack_zero_multiple_settles_everything_ACK_3(server, qname):
    raw = client(server)
    deliver_n(raw, qname, 3)
    raw.send(1, C.Basic.Ack(delivery_tag=0, multiple=True))
    raw.send(1, C.Basic.Ack(delivery_tag=0, multiple=True))  # nothing outstanding: still no error
    raw.send(1, C.Queue.Declare(queue=qname, passive=True))
    assert expect(raw, C.Queue.DeclareOk).message_count == 0


def test_nack_requeue_goes_back_in_place_and_redelivered_RQ_1_RQ_2(server, qname):
    raw = client(server)
    deliver_n(raw, qname, 3, consume=False)
    for _ in range(3):
        raw.send(1, C.Basic.Get(queue=qname))
        read_message(raw)
    raw.send(1, C.Basic.Nack(delivery_tag=2, multiple=False, requeue=True))
    raw.send(1, C.Basic.Nack(delivery_tag=1, multiple=False, requeue=True))
    raw.send(1, C.Basic.Get(queue=qname))
    method, _, payload = read_message(raw)
    assert (payload, method.redelivered, method.delivery_tag, method.message_count) == (b"m0", True, 4, 1)
    raw.send(1, C.Basic.Get(queue=qname))
    method, _, payload = read_message(raw)
    assert (payload, method.redelivered) == (b"m1", True)


def test_get_empty_and_message_count_DS_2(server, qname):
    raw = client(server)
    deliver_n(raw, qname, 2, consume=False)
    raw.send(1, C.Basic.Get(queue=qname, no_ack=True))
    method, _, _ = read_message(raw)
    assert method.message_count == 1
    raw.send(1, C.Basic.Get(queue=qname, no_ack=True))
    read_message(raw)
    raw.send(1, C.Basic.Get(queue=qname))
    expect(raw, C.Basic.GetEmpty)


def test_reject_of_auto_ack_delivery_is_unknown_ACK_4(server, qname):
    raw = client(server)
    deliver_n(raw, qname, 1, consume=False)
    raw.send(1, C.Basic.Get(queue=qname, no_ack=True))
    read_message(raw)
    raw.send(1, C.Basic.Reject(delivery_tag=1, requeue=True))
    close = channel_close(raw)
    assert (close.reply_text, close.method_id) == ("PRECONDITION_FAILED - unknown delivery tag 1", 90)


def test_tag_of_another_channel_is_unknown_ACK_4(server, qname):
    raw = client(server)
    deliver_n(raw, qname, 1)
    raw.channel_open(2)
    raw.send(2, C.Basic.Ack(delivery_tag=1))
    got = raw.expect(None, C.Channel.Close)
    assert got.method.reply_text == "PRECONDITION_FAILED - unknown delivery tag 1"
    assert got.channel == 2


def test_channel_ignores_frames_until_close_ok_then_reopens_fresh_ER_1(server, qname):
    raw = client(server)
    deliver_n(raw, qname, 1, consume=False)
    raw.send(1, C.Basic.Ack(delivery_tag=9))
    raw.send(1, C.Basic.Get(queue=qname))  # ignored: the channel is closing
    channel_close(raw)
    raw.send(1, C.Channel.CloseOk())
    raw.send(1, C.Channel.Open())
    expect(raw, C.Channel.OpenOk)
    raw.send(1, C.Basic.Get(queue=qname))
    method, _, _ = read_message(raw)
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
    expect(raw, C.Basic.RecoverOk)
    again = [read_message(raw) for _ in range(2)]
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
    raw.rpc(1, first)
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
    expect(raw, C.Confirm.SelectOk)
    raw.publish(1, b"x", exchange="no-such-exchange", routing_key="k")
    close = channel_close(raw)
    assert (close.reply_code, close.reply_text) == (404, "NOT_FOUND - no exchange 'no-such-exchange' in vhost '/'")
    assert until_quiet(raw, 0.3) == []


def test_mandatory_return_precedes_confirm_PC_4_RT_3(server):
    raw = client(server)
    raw.send(1, C.Confirm.Select())
    expect(raw, C.Confirm.SelectOk)
    raw.publish(1, b"lost", exchange="amq.direct", routing_key="nobody", mandatory=True)
    returned, _, payload = read_message(raw)
    assert (returned.reply_code, returned.reply_text, payload) == (312, "NO_ROUTE", b"lost")
    ack = expect(raw, C.Basic.Ack)
    assert (ack.delivery_tag, ack.multiple) == (1, False)


def test_unroutable_non_mandatory_is_dropped_and_confirmed_RT_3_PC_4(server):
    raw = client(server)
    raw.send(1, C.Confirm.Select())
    expect(raw, C.Confirm.SelectOk)
    raw.publish(1, b"lost", exchange="amq.direct", routing_key="nobody")
    assert expect(raw, C.Basic.Ack).delivery_tag == 1


def test_confirms_number_publishes_and_multiple_covers_lower_tags_PC_1_PC_3(server, qname):
    raw = client(server)
    raw.send(1, C.Queue.Declare(queue=qname))
    expect(raw, C.Queue.DeclareOk)
    raw.send(1, C.Confirm.Select())
    expect(raw, C.Confirm.SelectOk)
    for i in range(50):
        raw.publish(1, b"x", routing_key=qname, properties=C.Basic.Properties(delivery_mode=2 if i % 2 else 1))
    confirmed: set[int] = set()
    while len(confirmed) < 50:
        ack = expect(raw, C.Basic.Ack)
        new = set(range(1, ack.delivery_tag + 1)) - confirmed if ack.multiple else {ack.delivery_tag}
        assert new and ack.delivery_tag not in confirmed  # PC-2: never twice
        confirmed |= new
    assert confirmed == set(range(1, 51))


def test_tx_publish_invisible_until_commit_and_return_before_commit_ok_TX_2_TX_6(server, qname):
    raw = client(server)
    raw.send(1, C.Queue.Declare(queue=qname))
    expect(raw, C.Queue.DeclareOk)
    raw.send(1, C.Tx.Select())
    expect(raw, C.Tx.SelectOk)
    raw.publish(1, b"held", routing_key=qname)
    raw.publish(1, b"unroutable", exchange="amq.direct", routing_key="nobody", mandatory=True)
    raw.send(1, C.Queue.Declare(queue=qname, passive=True))
    assert expect(raw, C.Queue.DeclareOk).message_count == 0
    raw.send(1, C.Tx.Commit())
    returned, _, payload = read_message(raw)
    assert isinstance(returned, C.Basic.Return) and payload == b"unroutable"
    expect(raw, C.Tx.CommitOk)
    raw.send(1, C.Queue.Declare(queue=qname, passive=True))
    assert expect(raw, C.Queue.DeclareOk).message_count == 1


def test_tx_rollback_drops_publishes_and_keeps_deliveries_outstanding_TX_3(server, qname):
    raw = client(server)
    deliver_n(raw, qname, 1, consume=False)
    raw.send(1, C.Tx.Select())
    expect(raw, C.Tx.SelectOk)
    raw.send(1, C.Basic.Get(queue=qname))
    read_message(raw)
    raw.send(1, C.Basic.Ack(delivery_tag=1))
    raw.publish(1, b"dropped", routing_key=qname)
    raw.send(1, C.Tx.Rollback())
    expect(raw, C.Tx.RollbackOk)
    raw.send(1, C.Basic.Ack(delivery_tag=1))  # outstanding again: can be settled
    raw.send(1, C.Tx.Commit())
    expect(raw, C.Tx.CommitOk)
    raw.send(1, C.Queue.Declare(queue=qname, passive=True))
    assert expect(raw, C.Queue.DeclareOk).message_count == 0


def test_tx_unknown_tag_detected_on_arrival_TX_5(server):
    raw = client(server)
    raw.send(1, C.Tx.Select())
    expect(raw, C.Tx.SelectOk)
    raw.send(1, C.Basic.Ack(delivery_tag=3))
    assert channel_close(raw).reply_text == "PRECONDITION_FAILED - unknown delivery tag 3"


def test_rollback_does_not_requeue_consumed_messages_TX_4(server, qname):
    raw = client(server)
    deliver_n(raw, qname, 1, consume=False)
    raw.send(1, C.Tx.Select())
    expect(raw, C.Tx.SelectOk)
    raw.send(1, C.Basic.Consume(queue=qname))
    expect(raw, C.Basic.ConsumeOk)
    read_message(raw)
    raw.send(1, C.Tx.Rollback())
    expect(raw, C.Tx.RollbackOk)
    assert until_quiet(raw, 0.3) == []  # no redelivery


def test_exclusive_queue_locked_for_other_connections_DU_4(server, qname):
    owner = client(server)
    owner.send(1, C.Queue.Declare(queue=qname, exclusive=True, durable=True))
    expect(owner, C.Queue.DeclareOk)
    other = client(server)
    other.send(1, C.Basic.Consume(queue=qname))
    close = channel_close(other)
    assert close.reply_code == 405
    assert close.reply_text.startswith(f"RESOURCE_LOCKED - cannot obtain exclusive access to locked queue '{qname}'")
    owner.close()
    other.send(1, C.Channel.CloseOk())
    other.channel_open(1)
    deadline = time.monotonic() + 60        # however long the teardown takes on a loaded machine
    while time.monotonic() < deadline:
        other.send(1, C.Queue.Declare(queue=qname, passive=True))
        got = other.expect(1, C.Queue.DeclareOk, C.Channel.Close)
        if isinstance(got.method, C.Channel.Close):  # deleted with its connection
            assert got.method.reply_code == 404
            return
        time.sleep(0.05)  # the owner's connection is still being torn down: ask again
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
    close = raw.expect(1, C.Channel.Close).method  # replies before it (declare-ok) stay in the inbox
    assert (close.reply_code, close.reply_text) == (code, text)


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
    with pytest.raises(ConnectionLost):
        raw.pump(2.0)


def test_wrong_protocol_header_gets_ours_back(server):
    raw = RawConnection(server.host, server.port, timeout=REPLY_PATIENCE)
    raw.send_raw(b"AMQP\x01\x01\x00\x0a")
    assert raw.sock.recv(8) == b"AMQP\x00\x00\x09\x01"


def test_bad_password_refused_with_access_refused(server):
    raw = RawConnection(server.host, server.port, timeout=REPLY_PATIENCE)
    raw.send_raw(header.ProtocolHeader().marshal())
    expect(raw, C.Connection.Start, channel=0)
    raw.send(0, C.Connection.StartOk(client_properties={"capabilities": {"authentication_failure_close": True}},
                                     mechanism="PLAIN", response="\0guest\0wrong", locale="en_US"))
    close = connection_close(raw)
    assert (close.reply_code, close.reply_text) == (
        403, "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN. For details see the broker logfile.")


def test_configured_user_can_log_in(server):
    raw = RawConnection.connect(server.host, server.port, "alice", "secret", timeout=REPLY_PATIENCE)
    raw.channel_open(1)
    assert raw.queue_declare(1, "", exclusive=True).queue.startswith("amq.gen-")


def test_frame_max_negotiated_splits_bodies_and_limits_frames(server, qname):
    raw = client(server, frame_max=4096)
    payload = bytes(range(256)) * 40  # 10240 bytes: three body frames of at most 4088
    raw.send(1, C.Queue.Declare(queue=qname))
    expect(raw, C.Queue.DeclareOk)
    raw.publish(1, payload, routing_key=qname)
    raw.send(1, C.Basic.Get(queue=qname, no_ack=True))
    assert read_message(raw)[2] == payload
    received = raw.received_frames()
    start = max(i for i, e in enumerate(received) if isinstance(e.frame, C.Basic.GetOk))
    sizes = [len(e.frame.value) for e in received[start:] if isinstance(e.frame, body.ContentBody)]
    assert sizes == [4088, 4088, 10240 - 2 * 4088]
    raw.send_raw(struct.pack(">BHI", 3, 1, 5000) + b"x" * 5000 + b"\xce")
    close = connection_close(raw)
    assert close.reply_code == 501 and "frame_too_large" in close.reply_text


def test_channel_max_negotiated(server):
    """channel_max bounds how many channels are open at once, as in RabbitMQ 3.10.8 (530 NOT_ALLOWED);
    the comparison with RabbitMQ is in tests/test_broker_features.py."""
    raw = client(server, channel_max=3)
    for number in (2, 7):  # with channel 1, three channels are open
        raw.channel_open(number)
    raw.send(4, C.Channel.Open())
    assert connection_close(raw).reply_code == 530


# How long the tests below wait for what a 1 s heartbeat brings within a few seconds: long enough for any
# load on the machine; a passing run waits only as long as the broker takes.
HEARTBEAT_PATIENCE = 60.0


def test_heartbeats_sent_when_negotiated(server):
    raw = RawConnection.connect(server.host, server.port, heartbeat=1, timeout=REPLY_PATIENCE)
    deadline = time.monotonic() + HEARTBEAT_PATIENCE
    while not any(isinstance(e.frame, heartbeat.Heartbeat) for e in raw.received_frames()):
        assert time.monotonic() < deadline, f"no heartbeat within {HEARTBEAT_PATIENCE:g} s of a 1 s heartbeat"
        raw.pump(0.25)


def test_silent_peer_dropped_after_two_heartbeat_intervals(server):
    raw = RawConnection.connect(server.host, server.port, heartbeat=1, timeout=REPLY_PATIENCE)
    deadline = time.monotonic() + HEARTBEAT_PATIENCE
    with pytest.raises(ConnectionLost):
        while time.monotonic() < deadline:
            raw.pump(0.25)


def test_auto_delete_queue_goes_with_its_last_consumer(server, qname):
    raw = client(server)
    raw.send(1, C.Queue.Declare(queue=qname, auto_delete=True))
    expect(raw, C.Queue.DeclareOk)
    raw.send(1, C.Basic.Consume(queue=qname, consumer_tag="only"))
    expect(raw, C.Basic.ConsumeOk)
    raw.send(1, C.Basic.Cancel(consumer_tag="only"))
    expect(raw, C.Basic.CancelOk)
    raw.send(1, C.Queue.Declare(queue=qname, passive=True))
    assert channel_close(raw).reply_code == 404


def test_deleting_a_queue_cancels_its_consumers_with_basic_cancel(server, qname):
    consumer = client(server)  # the raw client announces consumer_cancel_notify
    consumer.send(1, C.Queue.Declare(queue=qname))
    expect(consumer, C.Queue.DeclareOk)
    consumer.send(1, C.Basic.Consume(queue=qname, consumer_tag="victim"))
    expect(consumer, C.Basic.ConsumeOk)
    other = client(server)
    other.send(1, C.Queue.Delete(queue=qname))
    assert expect(other, C.Queue.DeleteOk).message_count == 0
    assert raw_cancel(consumer).consumer_tag == "victim"


def raw_cancel(raw: RawConnection) -> C.Basic.Cancel:
    return expect(raw, C.Basic.Cancel)
