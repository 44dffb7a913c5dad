"""Recorded scenarios: short client programs, one or more per rule family (rabbitproof/rules.toml), run with the
raw client against a broker; each returns its recording (slots of command logs) for
``rabbitproof.recording.observations`` to turn into a trace the spec judges.

Every step is one TCP write followed by reading until the broker has been quiet for a moment, so the
recording holds every frame the broker sent, in the order it arrived. Queue names are the caller's,
unique per run (the RabbitMQ node is shared); bodies are unique within a run (they name messages).
"""
from __future__ import annotations

import time
from collections.abc import Callable

from pamqp import commands

from rabbitproof.recording.rawclient import ConnectionLost, RawConnection, persistent, transient

QUIET = 0.25            # seconds of silence that end a step


class Client:
    """One raw connection driven step by step; ``log()`` is its recording."""

    def __init__(self, broker, heartbeat: int = 0) -> None:
        self.broker = broker
        self.conn = RawConnection.connect(broker.host, broker.port, broker.user, broker.password,
                                          heartbeat=heartbeat)

    def step(self, *frames: tuple) -> None:
        """Send (channel, method[, body, props, mandatory]) items in one write, then read until quiet."""
        out: list = []
        for item in frames:
            ch, method = item[0], item[1]
            if isinstance(method, commands.Basic.Publish):
                body = item[2]
                props = item[3] if len(item) > 3 else transient()
                out += self.conn.content_frames(ch, method, body, props)
            else:
                out.append((ch, method))
        self.conn.send_frames(out)
        self.settle()

    def settle(self) -> None:
        try:
            while self.conn.pump(QUIET):
                pass
        except ConnectionLost:
            pass

    def wait_for(self, done: Callable[[], bool], timeout: float) -> None:
        """Read until ``done()`` holds; an AssertionError naming the wait after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise AssertionError(f"the broker did not send what was awaited within {timeout} s")
            try:
                self.conn.pump(0.1)
            except ConnectionLost:
                return

    def log(self) -> list:
        return self.conn.command_log()

    def close(self) -> None:
        self.conn.abort()


def publish(ch: int, queue: str, body: bytes, *, durable_msg: bool = False, mandatory: bool = False,
            exchange: str = "", immediate: bool = False) -> tuple:
    method = commands.Basic.Publish(exchange=exchange, routing_key=queue, mandatory=mandatory, immediate=immediate)
    return (ch, method, body, persistent() if durable_msg else transient())


def open_(ch: int) -> tuple:
    return (ch, commands.Channel.Open())


def declare(ch: int, queue: str, durable: bool = False, exclusive: bool = False) -> tuple:
    return (ch, commands.Queue.Declare(queue=queue, durable=durable, exclusive=exclusive))


def consume(ch: int, queue: str, tag: str, no_ack: bool = False, exclusive: bool = False) -> tuple:
    return (ch, commands.Basic.Consume(queue=queue, consumer_tag=tag, no_ack=no_ack, exclusive=exclusive))


def ack(ch: int, tag: int, multiple: bool = False) -> tuple:
    return (ch, commands.Basic.Ack(delivery_tag=tag, multiple=multiple))


def nack(ch: int, tag: int, multiple: bool = False, requeue: bool = True) -> tuple:
    return (ch, commands.Basic.Nack(delivery_tag=tag, multiple=multiple, requeue=requeue))


def reject(ch: int, tag: int, requeue: bool = True) -> tuple:
    return (ch, commands.Basic.Reject(delivery_tag=tag, requeue=requeue))


def get(ch: int, queue: str, no_ack: bool = False) -> tuple:
    return (ch, commands.Basic.Get(queue=queue, no_ack=no_ack))


def qos(ch: int, count: int, global_: bool = False, size: int = 0) -> tuple:
    return (ch, commands.Basic.Qos(prefetch_count=count, global_=global_, prefetch_size=size))


def close_ok(ch: int) -> tuple:
    return (ch, commands.Channel.CloseOk())


def close(ch: int) -> tuple:
    return (ch, commands.Channel.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0))


def delete(ch: int, queue: str, if_unused: bool = False, if_empty: bool = False) -> tuple:
    return (ch, commands.Queue.Delete(queue=queue, if_unused=if_unused, if_empty=if_empty))


def purge(ch: int, queue: str) -> tuple:
    return (ch, commands.Queue.Purge(queue=queue))


def cleanup(broker, *queues: str) -> None:
    """Delete the scenario's queues (RabbitMQ's node is shared by the session)."""
    c = Client(broker)
    c.step(open_(1), *(delete(1, q) for q in queues))
    c.conn.close(timeout=2.0)


# ---------------------------------------------------------------- the scenarios

def ack_multiple_and_unknown_tag(broker, q: str) -> list:
    """DT-1, ACK-1, ACK-2, ACK-4: tags count up per channel; multiple settles every lower tag; an
    unknown tag closes the channel with 406."""
    c = Client(broker)
    c.step(open_(1), open_(2), declare(1, q))
    c.step(publish(1, q, b"a1"), publish(1, q, b"a2"), publish(1, q, b"a3"), publish(1, q, b"a4"))
    c.step(consume(2, q, "k"))
    c.step(ack(2, 2, multiple=True), ack(2, 3))
    c.step(ack(2, 3))
    c.step(close_ok(2), open_(2), get(2, q))
    c.step(ack(2, 1))
    c.step(delete(1, q))
    return [[c.log()]]


def auto_ack_and_get(broker, q: str) -> list:
    """AM-1, AM-2, DS-2: automatic-mode deliveries are settled when sent; get-empty on an empty queue."""
    c = Client(broker)
    c.step(open_(1), open_(2), declare(1, q))
    c.step(publish(1, q, b"b1"), publish(1, q, b"b2"), publish(1, q, b"b3"))
    c.step(get(1, q, no_ack=True))
    c.step(consume(2, q, "auto", no_ack=True))
    c.step(get(1, q))
    c.step(delete(1, q))
    return [[c.log()]]


def prefetch_per_consumer(broker, q: str) -> list:
    """PF-1, PF-2, PF-3: a per-consumer limit of 2, freed one ack at a time."""
    c = Client(broker)
    c.step(open_(1), open_(2), declare(1, q))
    c.step(*(publish(1, q, f"c{i}".encode()) for i in range(1, 6)))
    c.step(qos(2, 2), consume(2, q, "k"))
    c.step(ack(2, 1))
    c.step(ack(2, 3, multiple=True))
    c.step(qos(2, 0), qos(2, 1, global_=True))
    c.step(delete(1, q))
    return [[c.log()]]


def prefetch_global_with_gets(broker, q: str) -> list:
    """PF-2, PF-4, PF-3: basic.get deliveries outstanding when a global limit is set count toward it
    and are never counted off (RabbitMQ's limiter); raising the limit makes room for one."""
    q2 = q + "-2"
    c = Client(broker)
    c.step(open_(1), open_(2), declare(1, q), declare(1, q2))
    c.step(publish(1, q, b"d1"), publish(1, q, b"d2"), publish(1, q2, b"d3"), publish(1, q2, b"d4"))
    c.step(get(2, q))
    c.step(get(2, q))
    c.step(qos(2, 2, global_=True), consume(2, q2, "k"))
    c.step(ack(2, 1), ack(2, 2))
    c.step(qos(2, 3, global_=True))
    c.step(consume(2, q, "auto", no_ack=True))
    c.step(publish(1, q, b"d5"))
    c.step(ack(2, 3))
    c.step(delete(1, q), delete(1, q2))
    return [[c.log()]]


def requeue_in_place(broker, q: str) -> list:
    """RQ-1, RQ-2, RQ-4, RQ-5, ACK-5, ACK-6: requeued messages go back to their place, redelivered;
    closing a channel requeues what it held; recover requeues everything."""
    c = Client(broker)
    c.step(open_(1), open_(2), declare(1, q))
    c.step(*(publish(1, q, f"e{i}".encode()) for i in range(1, 5)))
    c.step(get(2, q), get(2, q), get(2, q))
    c.step(reject(2, 2))
    c.step(nack(2, 3, requeue=False))
    c.step((2, commands.Basic.Recover(requeue=True)))
    c.step(get(2, q), get(2, q))
    c.step(close(2))
    c.step(open_(2), get(2, q), get(2, q), get(2, q))
    c.step(nack(2, 0, multiple=True, requeue=True))
    c.step(delete(1, q))
    return [[c.log()]]


def dispatch_round_robin(broker, q: str) -> list:
    """DS-1: consumers on two channels take turns; channels reach the client interleaved."""
    c = Client(broker)
    p = Client(broker)
    c.step(open_(1), open_(2), declare(1, q))
    c.step(consume(1, q, "one"), consume(2, q, "two"))
    p.step(open_(1))
    p.step(*(publish(1, q, f"f{i}".encode()) for i in range(1, 7)))
    c.step(ack(1, 0, multiple=True), ack(2, 0, multiple=True))
    c.step(delete(1, q))
    return [[c.log()], [p.log()]]


def confirms_and_returns(broker, q: str) -> list:
    """PC-1..PC-5, RT-3: confirm mode numbers publishes; a mandatory unroutable publish is returned
    before its confirm; persistent messages to a durable queue are confirmed once on disk."""
    c = Client(broker)
    c.step(open_(1), declare(1, q, durable=True), (1, commands.Confirm.Select()))
    c.step(publish(1, q, b"g1", durable_msg=True), publish(1, q + "-nowhere", b"g2", mandatory=True),
           publish(1, q, b"g3"), publish(1, q, b"g4", durable_msg=True))
    c.step(delete(1, q))
    return [[c.log()]]


def transactions(broker, q: str) -> list:
    """TX-1..TX-4, TX-10: publishes and acks inside a transaction take effect at commit and are
    undone by rollback; commit on a channel that is not transactional is 406."""
    c = Client(broker)
    c.step(open_(1), open_(2), declare(1, q), (2, commands.Tx.Select()))
    c.step(publish(1, q, b"h1"), publish(1, q, b"h2"))
    c.step(get(2, q))
    c.step(ack(2, 1), publish(2, q, b"h3"), (2, commands.Tx.Rollback()))
    c.step(get(1, q))
    c.step(ack(2, 1), publish(2, q, b"h4"), (2, commands.Tx.Commit()))
    c.step(get(1, q), get(1, q), get(1, q))
    c.step((1, commands.Tx.Commit()))
    c.step(close_ok(1), open_(1), delete(1, q))
    return [[c.log()]]


def durable_crash(broker, q: str) -> list:
    """DU-1, DU-2, DU-3, PC-10: a confirmed persistent message in a durable queue survives a crash,
    redelivered; the transient one does not. The broker is killed (SIGKILL) and restarted."""
    c = Client(broker)
    c.step(open_(1), declare(1, q, durable=True), (1, commands.Confirm.Select()))
    c.step(publish(1, q, b"i1", durable_msg=True), publish(1, q, b"i2"))
    # The subject is the messages' durability, not the declaration's: RabbitMQ logs a declaration to
    # disk asynchronously, and a kill right after it lost the queue once in CI (404 after the restart;
    # RabbitMQNode.sync_metadata). Our broker commits it before declare-ok and has nothing to flush.
    getattr(broker, "sync_metadata", lambda: None)()
    broker.kill()
    c.settle()
    first = c.log()
    broker.restart()
    d = Client(broker)
    d.step(open_(1), get(1, q), get(1, q))
    d.step(delete(1, q))
    return [[first, d.log()]]


def errors_and_refusals(broker, q: str) -> list:
    """ER-1, ER-2: channel errors close one channel (404 missing exchange, 404 missing queue), and
    what RabbitMQ refuses with a connection error (immediate, prefetch_size, a reused consumer tag,
    a frame on a channel never opened)."""
    c = Client(broker)
    c.step(open_(1), open_(2), declare(1, q))
    c.step(publish(2, q, b"j1", exchange="rp-missing-exchange"))
    c.step(close_ok(2), open_(2), get(2, q + "-missing"))
    c.step(close_ok(2), open_(2), consume(2, q, "k"), consume(1, q, "k"))
    c.step(consume(2, q, "k"))
    d = Client(broker)
    d.step(open_(1), qos(1, 0, size=1000))
    e = Client(broker)
    e.step(open_(1), publish(1, q, b"j2", immediate=True))
    f = Client(broker)
    f.step(open_(1), publish(3, q, b"j3"))
    cleanup(broker, q)
    return [[c.log()], [d.log()], [e.log()], [f.log()]]


def exclusive_queue_and_consumer(broker, q: str) -> list:
    """DU-4, ER-2: another connection may not use an exclusive queue (405), but may publish to it; an
    exclusive consumer locks out other consumers (403) but not basic.get."""
    qx = q + "-x"
    c = Client(broker)
    d = Client(broker)
    c.step(open_(1), declare(1, qx, exclusive=True), declare(1, q))
    d.step(open_(1), open_(2), get(1, qx))
    d.step(publish(2, qx, b"k1"))
    c.step(get(1, qx))
    c.step(consume(1, q, "x", exclusive=True))
    d.step(close_ok(1), open_(1), consume(1, q, "y"))
    d.step(close_ok(1), open_(1), get(1, q))
    c.step(delete(1, q))
    return [[c.log()], [d.log()]]


def routing_fanout(broker, q: str) -> list:
    """RT-1, RT-2: a fanout exchange copies a message into every bound queue."""
    q2 = q + "-2"
    c = Client(broker)
    c.step(open_(1), declare(1, q), declare(1, q2))
    c.step((1, commands.Queue.Bind(queue=q, exchange="amq.fanout", routing_key="")),
           (1, commands.Queue.Bind(queue=q2, exchange="amq.fanout", routing_key="")))
    c.step(publish(1, "", b"l1", exchange="amq.fanout"))
    c.step(get(1, q), get(1, q2))
    c.step(delete(1, q), delete(1, q2))
    return [[c.log()]]


def purge_and_delete(broker, q: str) -> list:
    """queue.purge drops ready messages only; queue.delete cancels the consumers of another connection
    (basic.cancel) and leaves their deliveries settleable; if-unused and if-empty refuse (406)."""
    c = Client(broker)
    d = Client(broker)
    c.step(open_(1), declare(1, q))
    c.step(*(publish(1, q, f"m{i}".encode()) for i in range(1, 5)))
    d.step(open_(1), qos(1, 1), consume(1, q, "d"))
    c.step(purge(1, q))
    c.step(delete(1, q, if_unused=True))
    c.step(close_ok(1), open_(1), publish(1, q, b"m5"))
    c.step(delete(1, q, if_empty=True))
    c.step(close_ok(1), open_(1), delete(1, q))
    d.settle()
    d.step(ack(1, 1))
    d.step(qos(1, 0))
    return [[c.log()], [d.log()]]


def channels_concurrent(broker, q: str) -> list:
    """A channel's frames keep their order; different channels of a connection do not: a publish on
    channel 2 and a get on channel 1 in one write may be taken in either order."""
    c = Client(broker)
    c.step(open_(1), open_(2), declare(1, q))
    c.step(publish(2, q, b"n1"), get(1, q))
    c.step(publish(2, q, b"n2"), publish(1, q, b"n3"), get(2, q), get(1, q))
    c.step(close(1), publish(1, q, b"n4"))
    c.step(open_(1), get(1, q), get(1, q))
    c.step(delete(2, q))
    return [[c.log()]]


# name -> (rule family, scenario, whether the broker is killed and restarted)
SCENARIOS: dict[str, tuple[str, Callable, bool]] = {
    "ack_multiple_and_unknown_tag": ("DT, ACK", ack_multiple_and_unknown_tag, False),
    "auto_ack_and_get": ("AM", auto_ack_and_get, False),
    "prefetch_per_consumer": ("PF", prefetch_per_consumer, False),
    "prefetch_global_with_gets": ("PF", prefetch_global_with_gets, False),
    "requeue_in_place": ("RQ", requeue_in_place, False),
    "dispatch_round_robin": ("DS", dispatch_round_robin, False),
    "confirms_and_returns": ("PC, RT", confirms_and_returns, False),
    "transactions": ("TX", transactions, False),
    "durable_crash": ("DU", durable_crash, True),
    "exclusive_queue_and_consumer": ("DU, ER", exclusive_queue_and_consumer, False),
    "errors_and_refusals": ("ER", errors_and_refusals, False),
    "routing_fanout": ("RT", routing_fanout, False),
    "purge_and_delete": ("queue admin", purge_and_delete, False),
    "channels_concurrent": ("channels", channels_concurrent, False),
}


def closing_channel_keeps_gets(broker, q: str) -> list:
    """RQ-4 as RabbitMQ does it: a channel closed by an error gives back at once the deliveries of
    queues it consumes from, and a basic.get delivery of another queue only once the client's close-ok
    arrives (in between, another channel finds that queue empty)."""
    qc = q + "-c"
    c = Client(broker)
    c.step(open_(1), open_(2), declare(2, q), declare(2, qc))
    c.step(publish(2, q, b"o1"), publish(2, qc, b"o2"))
    c.step(get(1, q), consume(1, qc, "k"))
    c.step(ack(1, 99))
    c.step(get(2, q), get(2, qc, no_ack=True))
    c.step(close_ok(1))
    c.step(get(2, q, no_ack=True))
    c.step(delete(2, q), delete(2, qc))
    return [[c.log()]]


SCENARIOS["closing_channel_keeps_gets"] = ("RQ, ER", closing_channel_keeps_gets, False)


def silent_consumer_replaced(broker, q: str) -> list:
    """RQ-3, RQ-4 with a late detection: a consumer's client goes silent (its process paused: the
    socket stays open, nothing is read or sent, no heartbeat) while holding a delivery; the same client
    connects again and consumes the messages behind it; only when the broker notices the silent
    connection (a missed heartbeat, about two heartbeat intervals) does the held delivery come back,
    redelivered, after the later messages."""
    p = Client(broker)
    p.step(open_(1), declare(1, q))
    old = Client(broker, heartbeat=2)
    old.step(open_(1), qos(1, 1), consume(1, q, "k"))
    p.step(publish(1, q, b"s1"), publish(1, q, b"s2"), publish(1, q, b"s3"))
    old.settle()                                    # s1 arrives; then the client goes silent
    new = Client(broker)
    new.step(open_(1), qos(1, 1), consume(1, q, "k"))
    new.step(ack(1, 1))
    new.step(ack(1, 2))
    new.wait_for(lambda: sum(isinstance(e.method, commands.Basic.Deliver) for e in new.log()) >= 3,
                 timeout=30.0)
    new.step(ack(1, 3))
    old.settle()                                    # resumed: the broker has closed the socket
    p.step(delete(1, q))
    return [[old.log(), new.log()], [p.log()]]


SCENARIOS["silent_consumer_replaced"] = ("RQ, faults", silent_consumer_replaced, False)
