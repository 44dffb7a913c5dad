"""Interop with pika, blocking and asynchronous (SelectConnection) adapters."""

from __future__ import annotations

import pika
import pytest
from pika.exceptions import ChannelClosedByBroker, UnroutableError


def connect(server, **kwargs) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(server.host, server.port, **kwargs))


def drain(channel, queue: str, n: int, auto_ack: bool = False) -> list:
    got = []
    for method, properties, body in channel.consume(queue, auto_ack=auto_ack, inactivity_timeout=60):
        assert method is not None, f"only {len(got)} of {n} messages arrived"
        got.append((method, properties, body))
        if len(got) == n:
            break
    return got


def test_publish_consume_ack_in_order_RQ_1_DT_1(server, qname):
    connection = connect(server)
    channel = connection.channel()
    channel.queue_declare(qname)
    for i in range(20):
        channel.basic_publish("", qname, b"%d" % i)
    got = drain(channel, qname, 20)
    assert [body for _, _, body in got] == [b"%d" % i for i in range(20)]
    assert [m.delivery_tag for m, _, _ in got] == list(range(1, 21))
    channel.basic_ack(got[-1][0].delivery_tag, multiple=True)
    channel.cancel()
    assert channel.queue_declare(qname, passive=True).method.message_count == 0
    connection.close()


def test_reject_and_nack_requeue_and_drop_ACK_5_ACK_6(server, qname):
    connection = connect(server)
    channel = connection.channel()
    channel.queue_declare(qname)
    for i in range(4):
        channel.basic_publish("", qname, b"%d" % i)
    got = drain(channel, qname, 4)
    channel.basic_reject(got[0][0].delivery_tag, requeue=False)
    channel.basic_nack(got[2][0].delivery_tag, multiple=True, requeue=True)  # tags 2 and 3
    again = drain(channel, qname, 2)
    assert [(b, m.redelivered) for m, _, b in again] == [(b"1", True), (b"2", True)]
    channel.basic_nack(0, multiple=True, requeue=False)  # ACK-3 for nack: tag 4 and both redeliveries
    channel.cancel()
    assert channel.queue_declare(qname, passive=True).method.message_count == 0
    connection.close()


def test_prefetch_bounds_outstanding_deliveries_PF_1_PF_3(server, qname):
    connection = connect(server)
    channel = connection.channel()
    channel.queue_declare(qname)
    for i in range(10):
        channel.basic_publish("", qname, b"%d" % i)
    channel.basic_qos(prefetch_count=3)
    seen = []

    def seen_and_ready(count: int) -> tuple[list[int], int]:
        """Wait until `count` deliveries are seen; then (the tags seen, ready in the queue), which the broker
        answers exactly: a delivery past the prefetch bound would have left the queue already."""
        while len(seen) < count:
            connection.process_data_events(time_limit=0.1)
        return list(seen), channel.queue_declare(qname, passive=True).method.message_count

    channel.basic_consume(qname, lambda ch, m, p, b: seen.append(m.delivery_tag))
    assert seen_and_ready(3) == ([1, 2, 3], 7)
    channel.basic_ack(2, multiple=True)  # frees two places
    assert seen_and_ready(5) == ([1, 2, 3, 4, 5], 5)
    connection.close()


def test_basic_get_not_limited_by_prefetch_PF_4(server, qname):
    connection = connect(server)
    channel = connection.channel()
    channel.queue_declare(qname)
    channel.basic_qos(prefetch_count=1)
    for i in range(3):
        channel.basic_publish("", qname, b"%d" % i)
    tags = [channel.basic_get(qname)[0].delivery_tag for _ in range(3)]
    assert tags == [1, 2, 3]
    method, _, _ = channel.basic_get(qname)
    assert method is None
    connection.close()


def test_channel_close_requeues_outstanding_RQ_4(server, qname):
    connection = connect(server)
    channel = connection.channel()
    channel.queue_declare(qname)
    for i in range(3):
        channel.basic_publish("", qname, b"%d" % i)
    drain(channel, qname, 3)
    channel.close()
    channel = connection.channel()
    got = drain(channel, qname, 3, auto_ack=True)
    assert [(b, m.redelivered) for m, _, b in got] == [(b"0", True), (b"1", True), (b"2", True)]
    connection.close()


def test_confirms_and_mandatory_return_PC_2_PC_4(server, qname):
    connection = connect(server)
    channel = connection.channel()
    channel.queue_declare(qname, durable=True)
    channel.confirm_delivery()
    for i in range(20):
        channel.basic_publish("", qname, b"%d" % i, pika.BasicProperties(delivery_mode=2))
    with pytest.raises(UnroutableError):
        channel.basic_publish("amq.direct", "nobody-" + qname, b"x", mandatory=True)
    assert channel.queue_declare(qname, durable=True, passive=True).method.message_count == 20
    channel.queue_delete(qname)
    connection.close()


def test_tx_commit_and_rollback_TX_2_TX_3(server, qname):
    connection = connect(server)
    channel = connection.channel()
    channel.queue_declare(qname)
    channel.tx_select()
    channel.basic_publish("", qname, b"rolled back")
    channel.tx_rollback()
    channel.basic_publish("", qname, b"committed")
    assert channel.queue_declare(qname, passive=True).method.message_count == 0
    channel.tx_commit()
    method, _, body = channel.basic_get(qname)
    assert body == b"committed"
    channel.basic_ack(method.delivery_tag)
    channel.tx_commit()
    assert channel.queue_declare(qname, passive=True).method.message_count == 0
    connection.close()


def test_recover_redelivers_RQ_5(server, qname):
    connection = connect(server)
    channel = connection.channel()
    channel.queue_declare(qname)
    channel.basic_publish("", qname, b"x")
    method, _, _ = channel.basic_get(qname)
    channel.basic_recover(requeue=True)
    method2, _, body = channel.basic_get(qname)
    assert (body, method2.redelivered, method2.delivery_tag) == (b"x", True, 2)
    connection.close()


def test_unknown_tag_closes_channel_with_pika_ACK_4(server):
    connection = connect(server)
    channel = connection.channel()
    channel.basic_ack(42)
    with pytest.raises(ChannelClosedByBroker) as error:
        channel.queue_declare("", exclusive=True)
    assert (error.value.reply_code, error.value.reply_text) == (406, "PRECONDITION_FAILED - unknown delivery tag 42")
    assert connection.channel().is_open  # ER-1: only the channel closed
    connection.close()


def test_routing_direct_fanout_topic_RT_1_RT_2(server, qname):
    connection = connect(server)
    channel = connection.channel()
    names = [qname + s for s in ("-a", "-b", "-c")]
    for name in names:
        channel.queue_declare(name, auto_delete=False)
    channel.exchange_declare(qname + "-fan", "fanout", auto_delete=True)
    channel.exchange_declare(qname + "-top", "topic", auto_delete=True)
    channel.queue_bind(names[0], qname + "-fan")
    channel.queue_bind(names[1], qname + "-fan")
    channel.queue_bind(names[1], qname + "-top", "stock.#")
    channel.queue_bind(names[2], qname + "-top", "*.eu.*")
    channel.queue_bind(names[2], "amq.direct", qname)
    channel.basic_publish(qname + "-fan", "", b"fan")
    channel.basic_publish(qname + "-top", "stock.eu.x", b"top")  # both topic queues
    channel.basic_publish(qname + "-top", "bond.us", b"none")
    channel.basic_publish("amq.direct", qname, b"direct")
    counts = [channel.queue_declare(n, passive=True).method.message_count for n in names]
    assert counts == [1, 2, 2]
    for name in names:
        channel.queue_delete(name)
    connection.close()


def test_dead_letter_on_reject_without_requeue_ACK_6(server, qname):
    connection = connect(server)
    channel = connection.channel()
    channel.exchange_declare(qname + "-dlx", "fanout")
    channel.queue_declare(qname + "-dead")
    channel.queue_bind(qname + "-dead", qname + "-dlx")
    channel.queue_declare(qname, arguments={"x-dead-letter-exchange": qname + "-dlx"})
    channel.basic_publish("", qname, b"doomed", pika.BasicProperties(headers={"h": 1}))
    method, _, _ = channel.basic_get(qname)
    channel.basic_reject(method.delivery_tag, requeue=False)
    method, properties, body = channel.basic_get(qname + "-dead", auto_ack=True)
    assert body == b"doomed" and method.exchange == qname + "-dlx"
    death = properties.headers["x-death"][0]
    assert (death["count"], death["reason"], death["queue"]) == (1, "rejected", qname)
    assert properties.headers["x-first-death-queue"] == qname and properties.headers["h"] == 1
    channel.exchange_delete(qname + "-dlx")
    connection.close()


def test_select_connection_adapter_publish_consume_ack(server, qname):
    received: list[bytes] = []
    state: dict = {}

    def on_open(connection):
        connection.channel(on_open_callback=on_channel)

    def on_channel(channel):
        state["channel"] = channel
        channel.queue_declare(qname, callback=on_declared)

    def on_declared(_frame):
        channel = state["channel"]
        channel.confirm_delivery(on_confirm)
        for i in range(5):
            channel.basic_publish("", qname, b"%d" % i)

    def on_confirm(frame):
        state["confirms"] = state.get("confirms", 0) + 1
        if "consuming" not in state:
            state["consuming"] = True
            state["channel"].basic_consume(qname, on_message)

    def on_message(channel, method, _properties, body):
        received.append(body)
        channel.basic_ack(method.delivery_tag)
        if len(received) == 5:
            channel.connection.close()

    connection = pika.SelectConnection(
        pika.ConnectionParameters(server.host, server.port),
        on_open_callback=on_open,
        on_open_error_callback=lambda c, e: c.ioloop.stop(),
        on_close_callback=lambda c, e: c.ioloop.stop(),
    )
    connection.ioloop.call_later(10, connection.ioloop.stop)
    connection.ioloop.start()
    assert received == [b"%d" % i for i in range(5)]
    assert state["confirms"] >= 1
