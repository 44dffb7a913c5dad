"""basic.qos as RabbitMQ 3.10.8 applies it (docs/rabbitmq-3.10.8-observations.md, section B), on impl and
on RabbitMQ: every test runs against both brokers and asserts the same deliveries.

RabbitMQ's channel-wide (global) limit is a counter in the channel's limiter process: it starts at the
channel's number of unacknowledged deliveries (basic.get ones included) when a global limit is set from
none, counts later manual consumer deliveries, and is decremented by acknowledgements of consumer
deliveries only. qos(global=false) removes it. Per-consumer limits are fixed at basic.consume (PF-1..PF-5).
Where RabbitMQ races (which consumer wins a freed place), the test accepts every outcome RabbitMQ showed.
"""

from __future__ import annotations

import uuid

import pytest
from pamqp import commands as C

from rabbitproof.recording.rawclient import RawConnection
from rabbitproof.recording.wire import deliveries, until_quiet, wait_ready



def prefilled(conn: RawConnection, count: int, label: str) -> str:
    """A fresh queue holding `count` ready messages with bodies `<label>-1`, `<label>-2`, ..."""
    queue = "rp-pf-" + uuid.uuid4().hex[:10]
    conn.queue_declare(1, queue, exclusive=True)
    for i in range(1, count + 1):
        conn.publish(1, f"{label}-{i}".encode(), routing_key=queue)
    wait_ready(conn, 1, queue, count)
    return queue


def consume(conn: RawConnection, queue: str, tag: str, no_ack: bool = False) -> None:
    conn.basic_consume(1, queue, consumer_tag=tag, no_ack=no_ack)


def ack(conn: RawConnection, tag: int, multiple: bool = False) -> None:
    conn.basic_ack(1, tag, multiple=multiple)


def got(conn: RawConnection, count: int = 0) -> list[tuple[str, int, bytes | None]]:
    """The deliveries on channel 1: read until ``count`` commands are in, however long the broker takes
    (`until_quiet`), then until it is quiet."""
    return deliveries(until_quiet(conn, channel=1, at_least=count))


# --- qos(global=false) after a global limit -------------------------------------------------------


@pytest.mark.parametrize(
    "order, expected",
    [
        ("global-then-consumer", [("C1", 1, b"q1-1"), ("C1", 2, b"q1-2"), ("C2", 3, b"q2-1"), ("C2", 4, b"q2-2")]),
        ("consumer-then-global", [("C1", 1, b"q1-1"), ("C1", 2, b"q1-2"), ("C2", 3, b"q2-1")]),
    ],
)
def test_per_consumer_qos_after_a_global_one_removes_the_global_limit_PF_2(conn, order, expected):
    """B7c: qos(3, global) then qos(2) gives 2+2 deliveries (no channel-wide limit left); the other
    order gives 3, both limits applying."""
    q1, q2 = prefilled(conn, 5, "q1"), prefilled(conn, 5, "q2")
    settings = [(3, True), (2, False)] if order == "global-then-consumer" else [(2, False), (3, True)]
    for count, global_ in settings:
        conn.basic_qos(1, count, global_=global_)
    consume(conn, q1, "C1")
    consume(conn, q2, "C2")
    assert got(conn, len(expected)) == expected


def test_per_consumer_qos_zero_after_a_global_limit_unlimits_at_once_PF_2(conn):
    """B7d/B7e: qos(1, global) then qos(0, global=false) while a delivery is outstanding: the rest of the
    queue is delivered at once."""
    queue = prefilled(conn, 5, "q1")
    conn.basic_qos(1, 1, global_=True)
    consume(conn, queue, "C")
    assert got(conn, 1) == [("C", 1, b"q1-1")]
    conn.basic_qos(1, 0, global_=False)
    assert got(conn, 4) == [("C", t, b"q1-%d" % t) for t in range(2, 6)]


# --- basic.get and the global limit ---------------------------------------------------------------


def test_get_deliveries_before_a_global_limit_count_and_their_acks_never_uncount_PF_4(conn):
    """B2: two unacked gets, then qos(2, global): a consumer gets nothing, even after both gets are acked;
    raising the limit to 3 gives exactly one; each consumer ack one more; qos(0, global) the rest."""
    q1, q2 = prefilled(conn, 3, "q1"), prefilled(conn, 5, "q2")
    assert conn.basic_get(1, q1).method.delivery_tag == 1
    assert conn.basic_get(1, q1).method.delivery_tag == 2
    conn.basic_qos(1, 2, global_=True)
    consume(conn, q2, "C")
    assert got(conn) == []
    ack(conn, 1)
    ack(conn, 2)
    assert conn.queue_declare(1, q1, passive=True).message_count == 1  # the acks were applied
    assert got(conn) == []
    conn.basic_qos(1, 3, global_=True)
    assert got(conn, 1) == [("C", 3, b"q2-1")]
    ack(conn, 3)
    assert got(conn, 1) == [("C", 4, b"q2-2")]
    conn.basic_qos(1, 0, global_=True)
    assert got(conn, 3) == [("C", 5, b"q2-3"), ("C", 6, b"q2-4"), ("C", 7, b"q2-5")]


def test_get_deliveries_acked_before_consuming_still_count_PF_4(conn):
    """B2c: the gets are acked before basic.consume; the limiter still holds them: no delivery."""
    q1, q2 = prefilled(conn, 3, "q1"), prefilled(conn, 3, "q2")
    conn.basic_get(1, q1)
    conn.basic_get(1, q1)
    conn.basic_qos(1, 2, global_=True)
    ack(conn, 2, multiple=True)
    consume(conn, q2, "C")
    assert got(conn) == []


def test_per_consumer_limit_ignores_get_deliveries_PF_4(conn):
    """B2b: two unacked gets, then qos(2, global=false): the consumer still gets 2."""
    q1, q2 = prefilled(conn, 3, "q1"), prefilled(conn, 3, "q2")
    conn.basic_get(1, q1)
    conn.basic_get(1, q1)
    conn.basic_qos(1, 2)
    consume(conn, q2, "C")
    assert got(conn, 2) == [("C", 3, b"q2-1"), ("C", 4, b"q2-2")]


def test_gets_after_a_global_limit_are_neither_limited_nor_counted_PF_4(conn):
    """B3: after qos(2, global) three gets succeed, the consumer still gets 2; acking a get frees
    nothing, acking a consumer delivery frees one place."""
    q1, q2 = prefilled(conn, 3, "q1"), prefilled(conn, 5, "q2")
    conn.basic_qos(1, 2, global_=True)
    for tag in (1, 2, 3):
        reply = conn.basic_get(1, q1)
        assert (type(reply.method), reply.method.delivery_tag) == (C.Basic.GetOk, tag)
    consume(conn, q2, "C")
    assert got(conn, 2) == [("C", 4, b"q2-1"), ("C", 5, b"q2-2")]
    ack(conn, 1)
    assert got(conn) == []
    ack(conn, 4)
    assert got(conn, 1) == [("C", 6, b"q2-3")]


# --- no-ack consumers under a global limit ----------------------------------------------------------


def test_a_global_limit_blocks_a_no_ack_consumer_while_it_is_reached_AM_2_PF_3(conn):
    """B1: under qos(1, global) with one manual delivery outstanding, a no-ack consumer gets nothing.
    After the ack, which consumer takes the freed place is a race in RabbitMQ (40 runs, 4 outcomes; a fifth
    seen later), so the test pins the shape every outcome has."""
    q1, q2 = prefilled(conn, 3, "q1"), prefilled(conn, 3, "q2")
    conn.basic_qos(1, 1, global_=True)
    consume(conn, q1, "C1")
    assert got(conn, 1) == [("C1", 1, b"q1-1")]
    consume(conn, q2, "C2", no_ack=True)
    assert got(conn) == []
    ack(conn, 1)
    after = got(conn, 1)                # the freed place goes to C1 in every outcome
    # Every outcome RabbitMQ showed (40 runs, then a fifth in CI: C2 drained q2 before C1's turn) has
    # this shape: the freed place goes to C1 once (q1-2); meanwhile the no-ack C2 takes a prefix of q2,
    # in order; once C1 holds q1-2 the limit is reached again, and at most one C2 delivery already
    # decided by q2's process slips in after it.
    assert [tag for _, tag, _ in after] == list(range(2, 2 + len(after)))
    assert [(who, body) for who, _, body in after if who == "C1"] == [("C1", b"q1-2")]
    c2_bodies = [body for who, _, body in after if who == "C2"]
    assert c2_bodies == [b"q2-%d" % i for i in range(1, len(c2_bodies) + 1)]
    c1_at = [who for who, _, _ in after].index("C1")
    assert len(after) - 1 - c1_at <= 1, after


def test_a_global_limit_with_nothing_outstanding_does_not_slow_a_no_ack_consumer_AM_2(conn):
    """B4b: qos(1, global) and nothing manual outstanding: a no-ack consumer gets all 5 (never counted)."""
    queue = prefilled(conn, 5, "q1")
    conn.basic_qos(1, 1, global_=True)
    consume(conn, queue, "NA", no_ack=True)
    assert got(conn, 5) == [("NA", t, b"q1-%d" % t) for t in range(1, 6)]


def test_a_per_consumer_limit_does_not_apply_to_a_no_ack_consumer_AM_2(conn):
    """B1b: qos(1, global=false) with a manual consumer holding 1: a no-ack consumer gets all 3."""
    q1, q2 = prefilled(conn, 3, "q1"), prefilled(conn, 3, "q2")
    conn.basic_qos(1, 1)
    consume(conn, q1, "C1")
    assert got(conn, 1) == [("C1", 1, b"q1-1")]
    consume(conn, q2, "C2", no_ack=True)
    assert got(conn, 3) == [("C2", t, b"q2-%d" % (t - 1)) for t in range(2, 5)]


# --- changing limits --------------------------------------------------------------------------------


def test_per_consumer_prefetch_is_fixed_at_basic_consume_PF_2_PF_5(conn):
    """B5b: lowering qos(global=false) 2 -> 1, or to 0, does not change an existing consumer."""
    queue = prefilled(conn, 6, "q1")
    conn.basic_qos(1, 2)
    consume(conn, queue, "C")
    assert got(conn, 2) == [("C", 1, b"q1-1"), ("C", 2, b"q1-2")]
    conn.basic_qos(1, 1)
    ack(conn, 1)
    assert got(conn, 1) == [("C", 3, b"q1-3")]
    ack(conn, 2)
    assert got(conn, 1) == [("C", 4, b"q1-4")]
    conn.basic_qos(1, 0)
    ack(conn, 3)
    assert got(conn, 1) == [("C", 5, b"q1-5")]


def test_changing_the_global_limit_applies_at_once_PF_3_PF_5(conn):
    """B5: lowering the global limit 2 -> 1 with 2 outstanding: the first ack frees nothing, the second
    one place; qos(0, global) then delivers everything ready."""
    queue = prefilled(conn, 8, "q1")
    conn.basic_qos(1, 2, global_=True)
    consume(conn, queue, "C")
    assert got(conn, 2) == [("C", 1, b"q1-1"), ("C", 2, b"q1-2")]
    conn.basic_qos(1, 1, global_=True)
    ack(conn, 1)
    assert got(conn) == []
    ack(conn, 2)
    assert got(conn, 1) == [("C", 3, b"q1-3")]
    conn.basic_qos(1, 0, global_=True)
    assert got(conn, 5) == [("C", t, b"q1-%d" % t) for t in range(4, 9)]


def test_global_qos_zero_releases_deliveries_while_the_limit_is_held_PF_5(conn):
    """B5c: qos(0, global) while 2 of 2 are outstanding delivers the rest at once."""
    queue = prefilled(conn, 6, "q1")
    conn.basic_qos(1, 2, global_=True)
    consume(conn, queue, "C")
    assert got(conn, 2) == [("C", 1, b"q1-1"), ("C", 2, b"q1-2")]
    conn.basic_qos(1, 0, global_=True)
    assert got(conn, 4) == [("C", t, b"q1-%d" % t) for t in range(3, 7)]


def test_recover_fills_the_global_window_again_and_requeues_gets_RQ_5(conn, broker):
    """B8c: qos(2, global), one get and two consumer deliveries outstanding; basic.recover requeues
    the consumer's two and puts the get back in its queue; the window of 2 fills again (new tags).

    impl redelivers the two requeued copies. RabbitMQ usually does too, but its queue process handles
    the limiter's `resume` at a higher priority than the channel's `requeue` (gen_server2
    prioritise_cast), so the window can fill with q2-3 and q2-4, or q2-3 and q2-1, before the requeued
    copies are back (seen once in CI; docs/reference/differences.md)."""
    q1, q2 = prefilled(conn, 4, "q1"), prefilled(conn, 4, "q2")
    conn.basic_qos(1, 2, global_=True)
    assert conn.basic_get(1, q1).method.delivery_tag == 1
    consume(conn, q2, "C")
    assert got(conn, 2) == [("C", 2, b"q2-1"), ("C", 3, b"q2-2")]
    conn.rpc(1, C.Basic.Recover(requeue=True))
    redelivered = until_quiet(conn, channel=1, at_least=2)   # every outcome redelivers two
    outcomes = [[b"q2-1", b"q2-2"]]
    if broker.kind == "rabbitmq":
        outcomes += [[b"q2-3", b"q2-4"], [b"q2-3", b"q2-1"]]
    bodies = [body for _, _, body in deliveries(redelivered)]
    assert bodies in outcomes
    assert [(c, t) for c, t, _ in deliveries(redelivered)] == [("C", 4), ("C", 5)]
    assert [c.method.redelivered for c in redelivered] == [b in (b"q2-1", b"q2-2") for b in bodies]
    again = conn.basic_get(1, q1)
    assert (again.method.delivery_tag, again.method.redelivered, again.body) == (6, True, b"q1-1")
