"""The sans-IO core driven in process: bytes in, bytes out, batches committed by hand."""

from __future__ import annotations

import random

from pamqp import body, commands as C, frame, header

from rabbitproof.impl.core import Broker, Connection
from rabbitproof.impl.core.messages import Message, QueuedMessage
from rabbitproof.impl.core.queues import ReadyMessages
from rabbitproof.impl.core.routing import topic_matches


class CoreClient:
    """One core Connection fed with pamqp-encoded frames; decodes what the core sends back."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.connection = Connection(broker, True)
        self.feed(header.ProtocolHeader().marshal())
        self.send(0, C.Connection.StartOk(client_properties={}, mechanism="PLAIN", response="\0guest\0guest",
                                          locale="en_US"))
        self.send(0, C.Connection.TuneOk(channel_max=0, frame_max=131072, heartbeat=0))
        self.send(0, C.Connection.Open(virtual_host="/"))
        self.send(1, C.Channel.Open())
        self.frames()

    def feed(self, data: bytes) -> None:
        self.connection.receive_data(data)

    def send(self, channel: int, value) -> None:
        self.feed(frame.marshal(value, channel))

    def publish(self, queue: str, payload: bytes, persistent: bool = False) -> None:
        properties = C.Basic.Properties(delivery_mode=2 if persistent else 1)
        self.send(1, C.Basic.Publish(exchange="", routing_key=queue))
        self.send(1, header.ContentHeader(0, len(payload), properties))
        self.send(1, body.ContentBody(payload))

    def frames(self) -> list:
        data = self.connection.data_to_send()
        out = []
        while data:
            used, channel, value = frame.unmarshal(data)
            data = data[used:]
            out.append(value)
        return out


def test_confirm_of_persistent_message_waits_for_its_batch_PC_5():
    broker = Broker()
    client = CoreClient(broker)
    client.send(1, C.Queue.Declare(queue="q", durable=True))
    client.send(1, C.Confirm.Select())
    assert client.frames() == []  # declare-ok of a new durable queue waits for its batch (DU-1)
    broker.batch_committed(broker.take_batch())
    client.frames()
    client.publish("q", b"transient")
    client.publish("q", b"persistent", persistent=True)
    client.publish("q", b"transient again")
    sent = client.frames()
    assert [(f.delivery_tag, f.multiple) for f in sent if isinstance(f, C.Basic.Ack)] == [(1, False), (3, False)]
    batch = broker.take_batch()
    assert [op[0] for op in batch.writes()] == ["m+"]
    assert client.frames() == []  # not on disk yet: no confirm for 2
    broker.batch_committed(batch)
    sent = client.frames()
    assert [(f.delivery_tag, f.multiple) for f in sent if isinstance(f, C.Basic.Ack)] == [(2, False)]


def test_publishes_pipelined_behind_a_waiting_reply_are_held_whole_and_taken_in_order_DU_1_TX_7():
    """Methods and the content frames of publishes that arrive while a reply waits for the disk (the
    declare-ok of a new durable queue, a tx.commit-ok) wait behind it, and are taken in order after it;
    one that waits for the disk again holds the rest again."""
    broker = Broker()
    client = CoreClient(broker)
    client.send(1, C.Queue.Declare(queue="q", durable=True))
    client.publish("q", b"first", persistent=True)
    client.send(1, C.Queue.Declare(queue="r", durable=True))
    client.publish("q", b"second")
    client.send(1, C.Queue.Declare(queue="q", passive=True))
    assert client.frames() == []
    broker.batch_committed(broker.take_batch())
    assert [type(f) for f in client.frames()] == [C.Queue.DeclareOk]     # q's; r's waits for its batch
    broker.batch_committed(broker.take_batch())
    replies = client.frames()
    assert [(type(f), getattr(f, "queue", None)) for f in replies] == [(C.Queue.DeclareOk, "r"),
                                                                       (C.Queue.DeclareOk, "q")]
    assert replies[1].message_count == 2
    assert not client.connection.should_close


def test_message_written_and_acked_in_one_batch_never_reaches_disk():
    broker = Broker()
    client = CoreClient(broker)
    client.send(1, C.Queue.Declare(queue="q", durable=True))
    broker.batch_committed(broker.take_batch())
    client.publish("q", b"x", persistent=True)
    client.send(1, C.Basic.Get(queue="q"))
    client.send(1, C.Basic.Ack(delivery_tag=1))
    assert broker.take_batch().writes() == []


def test_ready_messages_requeue_in_place_RQ_1():
    queue_order = ReadyMessages()
    messages = [QueuedMessage(seq, Message("", "q", b"\x00\x00", b"", False), None) for seq in range(1, 101)]
    for qm in messages:
        queue_order.append(qm)
    taken = [queue_order.pop_head() for _ in range(60)]
    random.Random(7).shuffle(taken)
    for qm in taken:
        queue_order.requeue(qm)
    assert [queue_order.pop_head().seq for _ in range(100)] == list(range(1, 101))


def test_multiple_ack_touches_only_what_it_settles_ACK_2():
    broker = Broker()
    client = CoreClient(broker)
    client.send(1, C.Queue.Declare(queue="q"))
    for i in range(1000):
        client.publish("q", b"%d" % i)
    client.send(1, C.Basic.Consume(queue="q", consumer_tag="c"))
    client.frames()
    channel = client.connection.channels[1]
    client.send(1, C.Basic.Ack(delivery_tag=10, multiple=True))
    assert len(channel.unacked) == 990 and channel.unacked_order[0] == 11
    client.send(1, C.Basic.Ack(delivery_tag=500))
    client.send(1, C.Basic.Ack(delivery_tag=600, multiple=True))
    assert len(channel.unacked) == 400 and min(channel.unacked) == 601


def test_round_robin_between_consumers_DS_1():
    broker = Broker()
    client = CoreClient(broker)
    client.send(1, C.Queue.Declare(queue="q"))
    client.send(1, C.Basic.Consume(queue="q", consumer_tag="a", no_ack=True))
    client.send(1, C.Basic.Consume(queue="q", consumer_tag="b", no_ack=True))
    client.frames()
    for i in range(4):
        client.publish("q", b"%d" % i)
    tags = [f.consumer_tag for f in client.frames() if isinstance(f, C.Basic.Deliver)]
    assert tags == ["a", "b", "a", "b"]


def test_global_and_consumer_prefetch_both_apply_PF_2():
    """The per-consumer qos comes first: a per-consumer qos after a global one removes the global limit,
    as in RabbitMQ (tests/test_broker_rabbitmq_prefetch.py)."""
    broker = Broker()
    client = CoreClient(broker)
    client.send(1, C.Queue.Declare(queue="q"))
    client.send(1, C.Basic.Qos(prefetch_count=2, global_=False))
    client.send(1, C.Basic.Qos(prefetch_count=3, global_=True))
    for i in range(10):
        client.publish("q", b"%d" % i)
    client.send(1, C.Basic.Consume(queue="q", consumer_tag="a"))
    client.send(1, C.Basic.Consume(queue="q", consumer_tag="b"))
    delivered = [f.consumer_tag for f in client.frames() if isinstance(f, C.Basic.Deliver)]
    assert sorted(delivered) == ["a", "a", "b"]  # 2 per consumer, 3 per channel


def test_topic_matching_RT_1():
    assert topic_matches("a.#", "a")
    assert topic_matches("#", "")
    assert topic_matches("*.b.#", "x.b.c.d")
    assert not topic_matches("*.b", "b")
    assert topic_matches("a.#.z", "a.z") and topic_matches("a.#.z", "a.b.c.z")
    assert not topic_matches("a.*", "a.b.c")


def test_connection_close_requeues_and_deletes_exclusive_queues_RQ_4_DU_4():
    broker = Broker()
    owner, other = CoreClient(broker), CoreClient(broker)
    owner.send(1, C.Queue.Declare(queue="excl", exclusive=True))
    other.send(1, C.Queue.Declare(queue="shared"))
    other.publish("shared", b"m")
    owner.send(1, C.Basic.Get(queue="shared"))
    owner.connection.connection_lost()
    assert "excl" not in broker.queues
    assert len(broker.queues["shared"].ready) == 1
