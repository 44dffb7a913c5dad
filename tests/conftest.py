"""Fixtures for brokers under test: a private RabbitMQ 3.10.8 node and our impl broker.

RabbitMQ is required (`make test` installs it with `make rabbitmq`): a missing package is an error
that says how to install it, never a skip.

- `rabbitmq_node`: one node for the whole session; tests use their own queue names and leave it running.
- `impl_broker`: a fresh impl.server per test, with its own data directory.
- `impl_broker_module`: one impl.server shared by the tests of a module.
- `broker`, `conn`, `connect`: for tests run on both brokers, impl then RabbitMQ (a connection with channel 1 open).
- `broker_factory`: makes brokers of either kind that the test may kill and restart; all are closed at
  the end of the test.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rabbitproof.brokers import Broker, BrokerKind, make_broker
from rabbitproof.brokers.impl_broker import ImplBroker
from rabbitproof.brokers.rabbitmq import RabbitMQNode
from rabbitproof.recording.rawclient import RawConnection
from tests.fixtures.patience import REPLY_PATIENCE


@pytest.fixture(scope="session")
def rabbitmq_node() -> Iterator[RabbitMQNode]:
    """A private RabbitMQ node shared by the session (do not kill it: use broker_factory for that)."""
    node = RabbitMQNode()
    node.start()
    try:
        yield node
    finally:
        node.close()


@pytest.fixture
def impl_broker(tmp_path: Path) -> Iterator[ImplBroker]:
    """A fresh impl broker for one test, data under the test's tmp_path."""
    broker = ImplBroker(tmp_path / "impl-data")
    broker.start()
    try:
        yield broker
    finally:
        broker.close()


@pytest.fixture(scope="module")
def impl_broker_module(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ImplBroker]:
    """One impl broker shared by the tests of a module."""
    broker = ImplBroker(tmp_path_factory.mktemp("impl-data"))
    broker.start()
    try:
        yield broker
    finally:
        broker.close()


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[Callable[[BrokerKind], Broker]]:
    """make(kind) starts a broker of that kind for this test only; it may be killed and restarted."""
    made: list[Broker] = []

    def make(kind: BrokerKind) -> Broker:
        broker = make_broker(kind, tmp_path / f"{kind}-{len(made)}")
        made.append(broker)
        broker.start()
        return broker

    try:
        yield make
    finally:
        for broker in made:
            broker.close()


@pytest.fixture
def raw_connect() -> Iterator[Callable[..., RawConnection]]:
    """connect(broker, **kw) opens a RawConnection to a broker; all are closed after the test. A reply
    may take REPLY_PATIENCE unless kw says otherwise."""
    opened: list[RawConnection] = []

    def connect(broker: Broker, **kwargs: object) -> RawConnection:
        kwargs.setdefault("timeout", REPLY_PATIENCE)
        conn = RawConnection.connect(broker.host, broker.port, broker.user, broker.password, **kwargs)
        opened.append(conn)
        return conn

    try:
        yield connect
    finally:
        for conn in opened:
            conn.close(timeout=1.0)


@pytest.fixture(params=["impl", "rabbitmq"])
def broker(request: pytest.FixtureRequest) -> Broker:
    """For tests run on both brokers: the module's impl broker, then the session's RabbitMQ node."""
    return request.getfixturevalue("impl_broker_module" if request.param == "impl" else "rabbitmq_node")


@pytest.fixture
def conn(broker: Broker) -> Iterator[RawConnection]:
    """For tests run on both brokers: a raw connection to ``broker`` with channel 1 open, its replies
    waited for up to REPLY_PATIENCE."""
    connection = RawConnection.connect(broker.host, broker.port, broker.user, broker.password,
                                       timeout=REPLY_PATIENCE)
    connection.channel_open(1)
    try:
        yield connection
    finally:
        connection.close(timeout=2.0)


@pytest.fixture
def connect(broker: Broker) -> Iterator[Callable[..., RawConnection]]:
    """For tests run on both brokers: connect(*channels, **kw) opens a raw connection to ``broker`` (kw
    as ``RawConnection.connect`` takes them; a reply may take REPLY_PATIENCE unless they say otherwise) with
    those channels open; all are closed after the test."""
    opened: list[RawConnection] = []

    def make(*channels: int, **kwargs: object) -> RawConnection:
        kwargs.setdefault("timeout", REPLY_PATIENCE)
        conn = RawConnection.connect(broker.host, broker.port, broker.user, broker.password, **kwargs)
        opened.append(conn)
        for channel in channels:
            conn.channel_open(channel)
        return conn

    try:
        yield make
    finally:
        for conn in opened:
            conn.close(timeout=2.0)


@pytest.fixture
def queue_name(request: pytest.FixtureRequest) -> str:
    """A queue name of this test alone (tests share the session's RabbitMQ node)."""
    return f"rp-{request.node.name[:60]}-{os.getpid()}-{secrets.token_hex(3)}".replace("[", "-").replace("]", "")
