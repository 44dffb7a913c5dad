"""RabbitMQ's features around the AMQP core, on impl and on RabbitMQ 3.10.8: honest capabilities,
connection.update-secret, channel_max, and small replies (unbind, the default exchange, exchange types).

Each test runs against both brokers and asserts the same frames, except where impl refuses a feature it
does not have: then the test asserts RabbitMQ's behaviour and impl's clear refusal side by side.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from pamqp import commands as C

from rabbitproof.brokers import Broker
from rabbitproof.recording.rawclient import PROTOCOL_HEADER, ChannelClosed, ConnectionClosed, RawConnection
from tests.fixtures.patience import REPLY_PATIENCE

DEADLINE = 60.0  # seconds to wait for a condition that must come: for any load; a pass waits only as long as it takes


def name() -> str:
    return "rp-bf-" + uuid.uuid4().hex[:10]


def refusal(error: ChannelClosed | ConnectionClosed) -> tuple[int, str, int, int]:
    return error.reply_code, error.reply_text, error.class_id, error.method_id


# --- small replies ----------------------------------------------------------------------------------


def test_unbinding_what_does_not_exist_replies_unbind_ok(connect):
    conn = connect()
    conn.channel_open(1)
    queue = name()
    conn.queue_declare(1, queue, exclusive=True)
    for missing_queue, exchange in ((name(), "amq.direct"), (queue, name()), (name(), name())):
        reply = conn.rpc(1, C.Queue.Unbind(queue=missing_queue, exchange=exchange, routing_key="k"))
        assert isinstance(reply.method, C.Queue.UnbindOk)


@pytest.mark.parametrize("passive", [True, False])
def test_declaring_the_default_exchange_is_refused(connect, passive):
    conn = connect()
    conn.channel_open(1)
    with pytest.raises(ChannelClosed) as closed:
        conn.rpc(1, C.Exchange.Declare(exchange="", exchange_type="direct", passive=passive))
    assert refusal(closed.value) == (403, "ACCESS_REFUSED - operation not permitted on the default exchange", 40, 10)


def test_unknown_exchange_type_gets_rabbitmqs_text(connect):
    conn = connect()
    conn.channel_open(1)
    with pytest.raises(ConnectionClosed) as closed:
        conn.rpc(1, C.Exchange.Declare(exchange=name(), exchange_type="nosuch"))
    assert refusal(closed.value) == (503, "COMMAND_INVALID - unknown exchange type 'nosuch'", 40, 10)


def test_channel_max_bounds_open_channels_not_channel_numbers(connect):
    conn = connect(channel_max=2)
    assert conn.channel_max == 2
    conn.channel_open(5)  # a number above channel_max is fine
    conn.channel_open(1)
    conn.channel_close(5)
    conn.channel_open(3)  # two open again
    with pytest.raises(ConnectionClosed) as closed:
        conn.channel_open(4)
    assert refusal(closed.value) == (
        530, "NOT_ALLOWED - number of channels opened (2) has reached the negotiated channel_max (2)", 0, 0)


def test_update_secret_is_answered(connect):
    conn = connect()
    reply = conn.rpc(0, C.Connection.UpdateSecret(new_secret="guest", reason="token refresh"))
    assert isinstance(reply.method, C.Connection.UpdateSecretOk)
    conn.channel_open(1)  # the connection goes on
    conn.queue_declare(1, name(), exclusive=True)


# --- capabilities -----------------------------------------------------------------------------------


def works_publisher_confirms(broker: Broker, conn: RawConnection) -> None:
    conn.channel_open(1)
    queue = name()
    conn.queue_declare(1, queue, exclusive=True)
    conn.confirm_select(1)
    conn.publish(1, b"x", routing_key=queue)
    assert conn.confirms(1, [1]) == {1: "ack"}


def works_basic_nack(broker: Broker, conn: RawConnection) -> None:
    conn.channel_open(1)
    queue = name()
    conn.queue_declare(1, queue, exclusive=True)
    conn.publish(1, b"x", routing_key=queue)
    deadline = time.monotonic() + DEADLINE
    while isinstance((got := conn.basic_get(1, queue)).method, C.Basic.GetEmpty):
        assert time.monotonic() < deadline
    conn.send(1, C.Basic.Nack(delivery_tag=got.method.delivery_tag, requeue=True))
    deadline = time.monotonic() + DEADLINE
    while isinstance((again := conn.basic_get(1, queue, no_ack=True)).method, C.Basic.GetEmpty):
        assert time.monotonic() < deadline
    assert (again.body, again.method.redelivered) == (b"x", True)


def works_consumer_cancel_notify(broker: Broker, conn: RawConnection) -> None:
    conn.channel_open(1)
    conn.channel_open(2)
    queue = name()
    conn.queue_declare(1, queue)
    conn.basic_consume(1, queue, consumer_tag="watched")
    conn.queue_delete(2, queue)
    assert conn.expect(1, C.Basic.Cancel).method.consumer_tag == "watched"


def works_authentication_failure_close(broker: Broker, conn: RawConnection) -> None:
    raw = RawConnection(broker.host, broker.port, timeout=REPLY_PATIENCE)
    try:
        raw.send_raw(PROTOCOL_HEADER)
        raw.expect(0, C.Connection.Start)
        raw.send(0, C.Connection.StartOk(
            client_properties={"capabilities": {"authentication_failure_close": True}},
            mechanism="PLAIN", response="\0guest\0wrong", locale="en_US"))
        with pytest.raises(ConnectionClosed) as closed:
            raw.expect(0, C.Connection.Tune)
        assert closed.value.reply_code == 403
    finally:
        raw.abort()


def works_per_consumer_qos(broker: Broker, conn: RawConnection) -> None:
    conn.channel_open(1)
    queue = name()
    conn.queue_declare(1, queue, exclusive=True)
    conn.basic_qos(1, 1)
    conn.basic_consume(1, queue, consumer_tag="one-at-a-time")
    conn.publish(1, b"a", routing_key=queue)
    conn.publish(1, b"b", routing_key=queue)
    first = conn.expect(1, C.Basic.Deliver)
    deadline = time.monotonic() + DEADLINE
    while conn.queue_declare(1, queue, passive=True).message_count != 1:  # b waits for room
        assert time.monotonic() < deadline
    conn.basic_ack(1, first.method.delivery_tag)
    assert conn.expect(1, C.Basic.Deliver).body == b"b"


def works_exchange_exchange_bindings(broker: Broker, conn: RawConnection) -> None:
    conn.channel_open(1)
    source, destination, queue = name(), name(), name()
    conn.rpc(1, C.Exchange.Declare(exchange=source, exchange_type="topic", auto_delete=True))
    conn.rpc(1, C.Exchange.Declare(exchange=destination, exchange_type="fanout", auto_delete=True))
    conn.queue_declare(1, queue, exclusive=True)
    conn.rpc(1, C.Queue.Bind(queue=queue, exchange=destination))
    conn.rpc(1, C.Exchange.Bind(destination=destination, source=source, routing_key="a.*"))
    conn.publish(1, b"routed", exchange=source, routing_key="a.b")
    conn.publish(1, b"not-routed", exchange=source, routing_key="b.a")
    conn.publish(1, b"end", routing_key=queue)
    bodies = []
    deadline = time.monotonic() + DEADLINE
    while b"end" not in bodies:
        got = conn.basic_get(1, queue, no_ack=True)
        if isinstance(got.method, C.Basic.GetOk):
            bodies.append(got.body)
        assert time.monotonic() < deadline
    assert bodies == [b"routed", b"end"]


# capability -> a check that it works; a capability RabbitMQ advertises and impl does not is absent here.
CAPABILITY_CHECKS: dict[str, Callable[[Broker, RawConnection], None]] = {
    "publisher_confirms": works_publisher_confirms,
    "basic.nack": works_basic_nack,
    "consumer_cancel_notify": works_consumer_cancel_notify,
    "authentication_failure_close": works_authentication_failure_close,
    "per_consumer_qos": works_per_consumer_qos,
    "exchange_exchange_bindings": works_exchange_exchange_bindings,
}


def advertised(conn: RawConnection) -> set[str]:
    capabilities = conn.server_properties["capabilities"]
    return {name for name, value in capabilities.items() if value}


def test_impl_advertises_exactly_the_capabilities_that_work(impl_broker_module, rabbitmq_node):
    with RawConnection.connect(impl_broker_module.host, impl_broker_module.port, timeout=REPLY_PATIENCE) as impl, \
            RawConnection.connect(rabbitmq_node.host, rabbitmq_node.port, timeout=REPLY_PATIENCE) as rabbit:
        ours, theirs = advertised(impl), advertised(rabbit)
        assert set(impl.server_properties["capabilities"]) == set(rabbit.server_properties["capabilities"])
    assert ours == set(CAPABILITY_CHECKS)
    assert ours < theirs
    assert theirs - ours == {"consumer_priorities", "connection.blocked", "direct_reply_to"}


@pytest.mark.parametrize("capability", sorted(CAPABILITY_CHECKS))
def test_each_advertised_capability_works(broker, connect, capability):
    conn = connect()
    assert capability in advertised(conn)
    CAPABILITY_CHECKS[capability](broker, conn)


def test_consumer_priorities_are_refused_by_impl_and_honoured_by_rabbitmq(impl_broker_module, rabbitmq_node):
    for broker in (impl_broker_module, rabbitmq_node):
        with RawConnection.connect(broker.host, broker.port, timeout=REPLY_PATIENCE) as conn:
            conn.channel_open(1)
            queue = name()
            conn.queue_declare(1, queue, exclusive=True)
            consume = C.Basic.Consume(queue=queue, consumer_tag="p", arguments={"x-priority": 5})
            if broker is rabbitmq_node:
                assert isinstance(conn.rpc(1, consume).method, C.Basic.ConsumeOk)
                continue
            with pytest.raises(ConnectionClosed) as closed:
                conn.rpc(1, consume)
            assert refusal(closed.value) == (
                540, "NOT_IMPLEMENTED - consumer argument 'x-priority' is not implemented by this broker "
                "(rabbitproof)", 60, 20)
            conn.close_ok(closed.value)


# --- exchange-to-exchange bindings ------------------------------------------------------------------


def declare_exchanges(conn: RawConnection, *kinds: str) -> list[str]:
    names = []
    for kind in kinds:
        names.append(name())
        conn.rpc(1, C.Exchange.Declare(exchange=names[-1], exchange_type=kind, auto_delete=True))
    return names


def drain(conn: RawConnection, queue: str) -> list[bytes]:
    bodies = []
    while isinstance((got := conn.basic_get(1, queue, no_ack=True)).method, C.Basic.GetOk):
        bodies.append(got.body)
    return bodies


def test_exchange_bindings_route_through_chains_and_cycles_once_per_queue(connect):
    conn = connect()
    conn.channel_open(1)
    a, b, t = declare_exchanges(conn, "fanout", "fanout", "topic")
    q1, q2 = name(), name()
    conn.queue_declare(1, q1, exclusive=True)
    conn.queue_declare(1, q2, exclusive=True)
    for destination, source, key in ((b, a, ""), (a, b, ""), (t, b, ""), (a, t, "#")):  # a <-> b -> t -> a
        conn.rpc(1, C.Exchange.Bind(destination=destination, source=source, routing_key=key))
    conn.rpc(1, C.Queue.Bind(queue=q1, exchange=a))
    conn.rpc(1, C.Queue.Bind(queue=q1, exchange=b))
    conn.rpc(1, C.Queue.Bind(queue=q2, exchange=t, routing_key="x.*"))
    conn.confirm_select(1)
    conn.publish(1, b"m1", exchange=a, routing_key="x.y")
    conn.publish(1, b"m2", exchange=b, routing_key="z", mandatory=True)
    assert conn.confirms(1, [1, 2]) == {1: "ack", 2: "ack"}  # confirmed: every copy is enqueued
    assert drain(conn, q1) == [b"m1", b"m2"]
    assert drain(conn, q2) == [b"m1"]
    assert not [c for c in conn.take_all(1) if isinstance(c.method, C.Basic.Return)]


def test_exchange_bind_errors_and_unbind_of_what_does_not_exist(connect):
    conn = connect()
    conn.channel_open(1)
    (x,) = declare_exchanges(conn, "fanout")
    missing, other = name(), name()
    cases = [
        ((x, missing), (404, f"NOT_FOUND - no exchange '{missing}' in vhost '/'", 40, 30)),
        ((missing, x), (404, f"NOT_FOUND - no exchange '{missing}' in vhost '/'", 40, 30)),
        ((missing, other), (404, f"NOT_FOUND - no exchange '{other}' in vhost '/'", 40, 30)),  # source first
        (("", x), (403, "ACCESS_REFUSED - operation not permitted on the default exchange", 40, 30)),
        ((x, ""), (403, "ACCESS_REFUSED - operation not permitted on the default exchange", 40, 30)),
    ]
    for (destination, source), expected in cases:
        with pytest.raises(ChannelClosed) as closed:
            conn.rpc(1, C.Exchange.Bind(destination=destination, source=source, routing_key="k"))
        assert refusal(closed.value) == expected
        conn.close_ok(closed.value)
        conn.channel_open(1)
    for destination, source in ((x, missing), (missing, x), (missing, other)):
        reply = conn.rpc(1, C.Exchange.Unbind(destination=destination, source=source, routing_key="k"))
        assert isinstance(reply.method, C.Exchange.UnbindOk)


def exchange_exists(conn: RawConnection, exchange: str) -> bool:
    try:
        conn.rpc(1, C.Exchange.Declare(exchange=exchange, exchange_type="fanout", passive=True))
        return True
    except ChannelClosed as closed:
        conn.close_ok(closed)
        conn.channel_open(1)
        return False


def test_auto_delete_source_goes_with_its_last_exchange_binding(connect):
    conn = connect()
    conn.channel_open(1)
    a, b, c, d = declare_exchanges(conn, "fanout", "fanout", "fanout", "fanout")
    conn.rpc(1, C.Exchange.Bind(destination=b, source=a))
    conn.rpc(1, C.Exchange.Unbind(destination=b, source=a))
    conn.rpc(1, C.Exchange.Bind(destination=d, source=c))
    conn.rpc(1, C.Exchange.Delete(exchange=d))  # deleting the destination removes the binding too
    assert [exchange_exists(conn, x) for x in (a, b, c)] == [False, True, False]


# --- the spec's view --------------------------------------------------------------------------------

# What the spec does not model yet: the trace checker's programs and recorded traces must not use it.
UNMODELLED = ("x-max-length", "x-overflow", "x-message-ttl", "expiration", "x-expires", "exchange.bind",
              "Exchange.Bind", "update-secret", "UpdateSecret")


def test_model_based_programs_stay_away_from_unmodelled_features():
    root = Path(__file__).parent
    sources = sorted(root.glob("test_spec_trace*.py")) + sorted((root / "traces").glob("*.txt"))
    assert len(sources) > 5
    used = {(path.name, word) for path in sources for word in UNMODELLED if word in path.read_text()}
    assert not used, f"spec-checked programs use features the spec does not model: {sorted(used)}"
