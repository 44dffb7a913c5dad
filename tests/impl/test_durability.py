"""Durability over restarts and crashes of the server process (DU-*, PC-10, TX-7)."""

from __future__ import annotations

import pika
from pamqp import commands as C

from rabbitproof.recording.rawclient import RawConnection
from tests.fixtures.patience import REPLY_PATIENCE

PERSISTENT = pika.BasicProperties(delivery_mode=2)


def connect(server) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(server.host, server.port))


def test_durable_queue_bindings_and_persistent_messages_survive_restart_DU_1_DU_2(fresh_server):
    connection = connect(fresh_server)
    channel = connection.channel()
    channel.queue_declare("durable-q", durable=True)
    channel.queue_declare("transient-q")
    channel.exchange_declare("durable-x", "direct", durable=True)
    channel.queue_bind("durable-q", "durable-x", "k")
    channel.confirm_delivery()
    for i in range(5):
        channel.basic_publish("durable-x", "k", b"p%d" % i, PERSISTENT)
        channel.basic_publish("", "durable-q", b"t%d" % i)  # transient: lost on restart
        channel.basic_publish("", "transient-q", b"x", PERSISTENT)
    connection.close()
    fresh_server.stop()
    assert fresh_server.returncode == 0
    fresh_server.start()
    connection = connect(fresh_server)
    channel = connection.channel()
    assert channel.queue_declare("durable-q", durable=True, passive=True).method.message_count == 5
    channel.basic_publish("durable-x", "k", b"after", PERSISTENT)  # the binding survived
    bodies = []
    while True:
        method, _, body = channel.basic_get("durable-q", auto_ack=True)
        if method is None:
            break
        bodies.append((body, method.redelivered))
    assert bodies == [(b"p%d" % i, False) for i in range(5)] + [(b"after", False)]
    try:
        channel.queue_declare("transient-q", passive=True)
        raise AssertionError("a non-durable queue survived a restart")
    except pika.exceptions.ChannelClosedByBroker as error:
        assert error.reply_code == 404
    connection.close()


def test_confirmed_persistent_messages_survive_sigkill_PC_10_DU_3(fresh_server):
    connection = connect(fresh_server)
    channel = connection.channel()
    channel.queue_declare("crash-q", durable=True)
    channel.confirm_delivery()
    for i in range(300):
        channel.basic_publish("", "crash-q", b"%d" % i, PERSISTENT)
    method, _, _ = channel.basic_get("crash-q")  # outstanding when the broker dies
    fresh_server.kill()
    fresh_server.start()
    connection = connect(fresh_server)
    channel = connection.channel()
    got = []
    while True:
        method, _, body = channel.basic_get("crash-q", auto_ack=True)
        if method is None:
            break
        got.append((body, method.redelivered))
    assert [b for b, _ in got] == [b"%d" % i for i in range(300)]  # DU-3: nothing outstanding, all ready
    assert got[0][1] is True  # it had been delivered before the crash (RQ-2)
    connection.close()


def test_clean_restart_keeps_redelivered_flags_and_forgets_acked_RQ_2_DU_3(fresh_server):
    connection = connect(fresh_server)
    channel = connection.channel()
    channel.queue_declare("flags-q", durable=True)
    channel.confirm_delivery()
    for i in range(3):
        channel.basic_publish("", "flags-q", b"%d" % i, PERSISTENT)
    first, _, _ = channel.basic_get("flags-q")
    second, _, _ = channel.basic_get("flags-q")
    channel.basic_ack(first.delivery_tag)  # settled: must not come back
    channel.queue_declare("flags-q", durable=True, passive=True)  # a round trip: the ack is in before the stop
    fresh_server.stop()
    assert fresh_server.returncode == 0
    fresh_server.start()
    connection = connect(fresh_server)
    channel = connection.channel()
    got = []
    for _ in range(2):
        method, _, body = channel.basic_get("flags-q", auto_ack=True)
        got.append((body, method.redelivered))
    assert got == [(b"1", True), (b"2", False)]
    assert channel.basic_get("flags-q")[0] is None
    connection.close()


def test_tx_commit_of_persistent_publish_survives_sigkill_TX_7(fresh_server):
    connection = connect(fresh_server)
    channel = connection.channel()
    channel.queue_declare("tx-q", durable=True)
    channel.tx_select()
    for i in range(10):
        channel.basic_publish("", "tx-q", b"%d" % i, PERSISTENT)
    channel.tx_commit()
    fresh_server.kill()
    fresh_server.start()
    connection = connect(fresh_server)
    channel = connection.channel()
    assert channel.queue_declare("tx-q", durable=True, passive=True).method.message_count == 10
    connection.close()


def test_durable_exchange_to_exchange_binding_survives_a_restart(impl_broker):
    """A binding between two durable exchanges is durable (as in RabbitMQ); one to a transient one is not."""
    with RawConnection.connect(impl_broker.host, impl_broker.port, timeout=REPLY_PATIENCE) as conn:
        conn.channel_open(1)
        for exchange in ("e2e-src", "e2e-dst"):
            conn.rpc(1, C.Exchange.Declare(exchange=exchange, exchange_type="fanout", durable=True))
        conn.queue_declare(1, "e2e-q", durable=True)
        conn.rpc(1, C.Queue.Bind(queue="e2e-q", exchange="e2e-dst"))
        conn.rpc(1, C.Exchange.Bind(destination="e2e-dst", source="e2e-src"))
    impl_broker.stop()
    impl_broker.start()
    with RawConnection.connect(impl_broker.host, impl_broker.port, timeout=REPLY_PATIENCE) as conn:
        conn.channel_open(1)
        conn.publish(1, b"through", exchange="e2e-src")
        assert conn.rpc(1, C.Basic.Get(queue="e2e-q", no_ack=True)).body == b"through"
