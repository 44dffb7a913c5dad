"""The raw pamqp client against the real RabbitMQ 3.10.8: it speaks the protocol right and records
every frame in order, which is what makes it fit to be the observer of the spec's trace checker."""

from __future__ import annotations


import pytest
from pamqp import commands, header
from pamqp import body as amqp_body

from rabbitproof.recording.rawclient import (
    ChannelClosed,
    ConnectionClosed,
    ConnectionLost,
    RawConnection,
    persistent,
)
from tests.fixtures.patience import REPLY_PATIENCE


@pytest.fixture(params=["rabbitmq", "impl"])
def any_broker(request):
    """The session's RabbitMQ node, then this module's impl broker: the client works with both."""
    return request.getfixturevalue("rabbitmq_node" if request.param == "rabbitmq" else "impl_broker_module")


def _names(conn: RawConnection, direction: str | None = None) -> list[str]:
    return [e.name for e in conn.trace if direction is None or e.direction == direction]


def test_handshake_is_recorded_in_order(rabbitmq_node, raw_connect):
    conn = raw_connect(rabbitmq_node)
    assert _names(conn) == [
        "ProtocolHeader", "Connection.Start", "Connection.StartOk", "Connection.Tune",
        "Connection.TuneOk", "Connection.Open", "Connection.OpenOk",
    ]
    assert [e.direction for e in conn.trace] == [
        "sent", "received", "sent", "received", "sent", "sent", "received"]
    assert conn.server_properties["version"] in (b"3.10.8", "3.10.8")
    assert conn.frame_max == 131072 and conn.channel_max == 2047 and conn.heartbeat == 0
    times = [e.at for e in conn.trace]
    assert times == sorted(times)


def test_wrong_password_is_refused(any_broker):
    with pytest.raises((ConnectionClosed, ConnectionLost)) as caught:
        RawConnection.connect(any_broker.host, any_broker.port, "guest", "not-the-password", timeout=REPLY_PATIENCE)
    if isinstance(caught.value, ConnectionClosed):
        assert caught.value.reply_code == 403


def test_publish_then_get_keeps_body_and_properties(any_broker, raw_connect, queue_name):
    """RT-1, DS-2, DT-1: a message published to the default exchange is fetched intact."""
    conn = raw_connect(any_broker)
    conn.channel_open(1)
    conn.queue_declare(1, queue_name, auto_delete=False)
    props = persistent(message_id="m-1", content_type="application/octet-stream", headers={"k": "v"})
    conn.publish(1, b"hello \x00\xff world", routing_key=queue_name, properties=props)
    got = conn.basic_get(1, queue_name)
    assert isinstance(got.method, commands.Basic.GetOk)
    assert got.body == b"hello \x00\xff world"
    assert got.method.delivery_tag == 1 and got.method.redelivered is False
    assert got.method.message_count == 0
    assert got.properties.message_id == "m-1" and got.properties.delivery_mode == 2
    assert got.properties.headers == {"k": b"v"} or got.properties.headers == {"k": "v"}
    empty = conn.basic_get(1, queue_name)
    assert isinstance(empty.method, commands.Basic.GetEmpty)
    conn.basic_ack(1, 1)
    assert conn.queue_delete(1, queue_name) == 0
    sent = _names(conn, "sent")[4:]
    received = _names(conn, "received")[3:]
    assert sent == ["Channel.Open", "Queue.Declare", "Basic.Publish", "ContentHeader", "ContentBody",
                    "Basic.Get", "Basic.Get", "Basic.Ack", "Queue.Delete"]
    assert received == ["Channel.OpenOk", "Queue.DeclareOk", "Basic.GetOk", "ContentHeader", "ContentBody",
                        "Basic.GetEmpty", "Queue.DeleteOk"]


def test_large_body_is_split_and_joined(any_broker, raw_connect, queue_name):
    """A body larger than frame_max travels as several body frames both ways."""
    conn = raw_connect(any_broker, frame_max=4096)
    assert conn.frame_max == 4096
    conn.channel_open(1)
    conn.queue_declare(1, queue_name)
    payload = bytes(range(256)) * 100  # 25 600 bytes: 7 frames of at most 4088 bytes
    conn.publish(1, payload, routing_key=queue_name)
    sent_bodies = [e for e in conn.trace if e.direction == "sent" and isinstance(e.frame, amqp_body.ContentBody)]
    assert [len(e.frame.value) for e in sent_bodies] == [4088] * 6 + [25600 - 6 * 4088]
    got = conn.basic_get(1, queue_name, no_ack=True)
    assert got.body == payload
    received_bodies = [e for e in conn.trace if e.direction == "received" and isinstance(e.frame, amqp_body.ContentBody)]
    assert len(received_bodies) == 7
    conn.queue_delete(1, queue_name)


def test_ack_of_unknown_tag_is_channel_error_406(any_broker, raw_connect, queue_name):
    """ACK-4, ER-1: the exact reply, only the channel closes, and the channel number can be reused."""
    conn = raw_connect(any_broker)
    conn.channel_open(1)
    conn.channel_open(2)
    conn.basic_ack(1, 5)
    with pytest.raises(ChannelClosed) as caught:
        conn.expect(1, commands.Channel.CloseOk, timeout=60)
    closed = caught.value
    assert (closed.reply_code, closed.reply_text) == (406, "PRECONDITION_FAILED - unknown delivery tag 5")
    assert (closed.class_id, closed.method_id) == (60, 80)
    conn.close_ok(closed)
    conn.queue_declare(2, queue_name)  # channel 2 and the connection are still fine
    conn.channel_open(1)  # ER-1: the number can be opened again
    conn.publish(1, b"x", routing_key=queue_name)
    got = conn.basic_get(1, queue_name)
    assert got.method.delivery_tag == 1  # ER-1: a new channel's tags start again at 1
    conn.queue_delete(2, queue_name)


def test_recover_without_requeue_is_connection_error_540(any_broker, raw_connect):
    """RQ-5: basic.recover(requeue=false) is refused with connection.close 540 NOT_IMPLEMENTED."""
    conn = raw_connect(any_broker)
    conn.channel_open(1)
    conn.send(1, commands.Basic.Recover(requeue=False))
    with pytest.raises(ConnectionClosed) as caught:
        conn.expect(1, commands.Basic.RecoverOk, timeout=60)
    assert caught.value.reply_code == 540
    assert caught.value.reply_text.startswith("NOT_IMPLEMENTED")
    assert (caught.value.class_id, caught.value.method_id) == (60, 110)
    conn.close_ok(caught.value)
    with pytest.raises(ConnectionLost):
        conn.pump(5)
    assert conn.trace[-1].kind == "eof"
    assert _names(conn)[-3:] == ["Connection.Close", "Connection.CloseOk", "eof"]


def test_frames_that_arrive_together_are_all_kept(any_broker, raw_connect, queue_name):
    """Hundreds of deliveries and confirms arrive in few reads: none is lost, all are in order.
    PC-2/PC-3: each publish is confirmed exactly once. DT-1: tags 1, 2, 3, ... on the channel."""
    count = 2000
    conn = raw_connect(any_broker)
    conn.channel_open(1)
    conn.confirm_select(1)
    conn.queue_declare(1, queue_name)
    frames = []
    for i in range(count):
        frames += conn.content_frames(1, commands.Basic.Publish(routing_key=queue_name), str(i).encode())
    conn.send_frames(frames)
    unconfirmed = set(range(1, count + 1))
    confirms = 0
    while unconfirmed:
        ack = conn.expect(1, commands.Basic.Ack, commands.Basic.Nack, timeout=60).method
        assert isinstance(ack, commands.Basic.Ack)
        settled = {t for t in unconfirmed if t <= ack.delivery_tag} if ack.multiple else {ack.delivery_tag}
        assert settled and settled <= unconfirmed, f"confirm {ack!r} settles nothing new: confirmed twice"
        unconfirmed -= settled
        confirms += 1
    print(f"\n{count} publishes confirmed by {confirms} basic.ack frames")

    conn.channel_open(2)
    trace_before = len(conn.trace)
    conn.basic_consume(2, queue_name, no_ack=True)
    bodies = [conn.expect(2, commands.Basic.Deliver, timeout=60) for _ in range(count)]
    assert [b.body for b in bodies] == [str(i).encode() for i in range(count)]
    assert [b.method.delivery_tag for b in bodies] == list(range(1, count + 1))
    received = [e for e in conn.trace[trace_before:] if e.direction == "received" and e.channel == 2
                and e.name in ("Basic.Deliver", "ContentHeader", "ContentBody")]
    assert len(received) == 3 * count
    distinct_arrivals = len({e.at for e in received})
    print(f"{3 * count} delivery frames arrived in {distinct_arrivals} reads")
    assert distinct_arrivals < count, "frames were expected to arrive several per read"
    conn.queue_delete(1, queue_name)


def test_trace_is_one_ordered_log_across_channels(any_broker, raw_connect, queue_name):
    """Frames on different channels are recorded in one sequence, in the order sent and parsed."""
    conn = raw_connect(any_broker)
    conn.send_frames([(1, commands.Channel.Open()), (2, commands.Channel.Open()), (3, commands.Channel.Open())])
    for ch in (3, 1, 2):
        conn.expect(ch, commands.Channel.OpenOk)
    opened = [(e.direction, e.channel, e.name) for e in conn.trace[7:]]
    assert opened[:3] == [("sent", 1, "Channel.Open"), ("sent", 2, "Channel.Open"), ("sent", 3, "Channel.Open")]
    # The answers in any order across channels: RabbitMQ runs each channel as its own process and keeps
    # order within a channel only (spec.network); under load it answered 1, 3, 2.
    assert sorted(opened[3:]) == [("received", c, "Channel.OpenOk") for c in (1, 2, 3)]
    conn.send(1, header.ContentHeader(body_size=1))  # a header with no method before it
    with pytest.raises(ConnectionClosed) as caught:
        conn.expect(1, commands.Basic.QosOk, timeout=60)
    assert caught.value.reply_code == 505  # UNEXPECTED_FRAME


def test_command_log_folds_content_into_methods(any_broker, raw_connect, queue_name):
    """The spec's view of a trace: publish and get-ok carry their bodies; other methods stand alone."""
    conn = raw_connect(any_broker, frame_max=4096)
    conn.channel_open(1)
    conn.queue_declare(1, queue_name)
    conn.publish(1, b"a" * 5000, routing_key=queue_name, properties=persistent(message_id="big"))
    conn.publish(1, b"", routing_key=queue_name)
    first = conn.basic_get(1, queue_name, no_ack=True)
    second = conn.basic_get(1, queue_name, no_ack=True)
    assert (first.body, second.body) == (b"a" * 5000, b"")
    conn.queue_delete(1, queue_name)
    log = [(e.direction, e.name, e.body) for e in conn.command_log()]
    assert log[0] == ("sent", "protocol-header", None)
    assert log[7:] == [
        ("sent", "Channel.Open", None), ("received", "Channel.OpenOk", None),
        ("sent", "Queue.Declare", None), ("received", "Queue.DeclareOk", None),
        ("sent", "Basic.Publish", b"a" * 5000), ("sent", "Basic.Publish", b""),
        ("sent", "Basic.Get", None), ("received", "Basic.GetOk", b"a" * 5000),
        ("sent", "Basic.Get", None), ("received", "Basic.GetOk", b""),
        ("sent", "Queue.Delete", None), ("received", "Queue.DeleteOk", None),
    ]
    assert conn.command_log()[11].properties.message_id == "big"
