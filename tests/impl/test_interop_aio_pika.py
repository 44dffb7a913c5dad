"""Interop with aio-pika (and so aiormq): confirms, consume, ack / nack / reject, qos, tx."""

from __future__ import annotations

import asyncio

import aio_pika
import pytest


def run(coroutine):
    """Run a test's coroutine, stopped after 120 s (a hang, not a loaded machine: a pass takes a second)."""
    return asyncio.run(asyncio.wait_for(coroutine, 120))


def url(server) -> str:
    return f"amqp://guest:guest@{server.host}:{server.port}/"


def test_confirmed_publish_and_consume_with_acks_PC_2_ACK_1(server, qname):
    async def scenario():
        connection = await aio_pika.connect(url(server))
        async with connection:
            channel = await connection.channel(publisher_confirms=True)
            queue = await channel.declare_queue(qname, durable=True)
            for i in range(30):
                await channel.default_exchange.publish(
                    aio_pika.Message(b"%d" % i, delivery_mode=aio_pika.DeliveryMode.PERSISTENT), routing_key=qname
                )
            got = []
            async with queue.iterator() as messages:
                async for message in messages:
                    got.append(message.body)
                    await message.ack()
                    if len(got) == 30:
                        break
            await queue.delete()
            return got

    assert run(scenario()) == [b"%d" % i for i in range(30)]


def test_nack_requeue_and_reject_drop_ACK_5_RQ_2(server, qname):
    async def scenario():
        connection = await aio_pika.connect(url(server))
        async with connection:
            channel = await connection.channel()
            queue = await channel.declare_queue(qname, auto_delete=False)
            await channel.default_exchange.publish(aio_pika.Message(b"a"), routing_key=qname)
            await channel.default_exchange.publish(aio_pika.Message(b"b"), routing_key=qname)
            first = await queue.get()
            await first.nack(requeue=True)
            again = await queue.get()
            second = await queue.get()
            await second.reject(requeue=False)
            await again.ack()
            empty = await queue.get(fail=False)
            await queue.delete()
            return again.body, again.redelivered, second.body, empty

    assert run(scenario()) == (b"a", True, b"b", None)


def test_qos_limits_unacked_per_consumer_PF_1_PF_2(server, qname):
    async def scenario():
        connection = await aio_pika.connect(url(server))
        async with connection:
            channel = await connection.channel()
            await channel.set_qos(prefetch_count=2)
            queue = await channel.declare_queue(qname, auto_delete=False)
            for i in range(6):
                await channel.default_exchange.publish(aio_pika.Message(b"%d" % i), routing_key=qname)
            held: list = []

            async def hold(message) -> None:
                held.append(message)

            async def held_and_ready(count: int) -> tuple[int, int]:
                """Wait until `count` deliveries are held; then (held, ready in the queue), which the broker
                answers exactly: a delivery past the prefetch bound would have left the queue already."""
                while len(held) < count:
                    await asyncio.sleep(0.01)
                ready = (await channel.declare_queue(qname, passive=True)).declaration_result.message_count
                return len(held), ready

            await queue.consume(hold)
            first = await held_and_ready(2)
            await held[0].ack(multiple=True)
            await held[1].ack()
            second = await held_and_ready(4)
            await queue.delete(if_unused=False, if_empty=False)
            return first, second

    assert run(scenario()) == ((2, 4), (4, 2))


def test_transaction_commit_TX_2_TX_7(server, qname):
    async def scenario():
        connection = await aio_pika.connect(url(server))
        async with connection:
            channel = await connection.channel(publisher_confirms=False)
            queue = await channel.declare_queue(qname, durable=True)
            async with channel.transaction():
                await channel.default_exchange.publish(
                    aio_pika.Message(b"t", delivery_mode=aio_pika.DeliveryMode.PERSISTENT), routing_key=qname
                )
            declared = await channel.declare_queue(qname, durable=True, passive=True)
            count = declared.declaration_result.message_count
            await queue.delete(if_empty=False)
            return count

    assert run(scenario()) == 1


def test_publish_to_missing_exchange_closes_channel_PC_9(server):
    async def scenario():
        connection = await aio_pika.connect(url(server))
        async with connection:
            channel = await connection.channel()
            with pytest.raises(aio_pika.exceptions.ChannelNotFoundEntity):
                await channel.get_exchange("missing-exchange-x", ensure=True)
            return True

    assert run(scenario())
