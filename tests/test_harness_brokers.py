"""The broker harness: both kinds start on a free loopback port, keep port and durable data across
kill (SIGKILL) and restart, and stop cleanly. DU-1, DU-2: a durable queue and a confirmed persistent
message survive; a transient queue does not."""

from __future__ import annotations

import socket
import time

import pytest
from pamqp import commands

from rabbitproof.brokers import make_broker
from rabbitproof.brokers.impl_broker import ImplBroker, ImplStartFailed
from rabbitproof.brokers.rabbitmq import RabbitMQNode, RabbitMQNotInstalled
from rabbitproof.recording.rawclient import ChannelClosed, RawConnection, persistent
from tests.fixtures.patience import REPLY_PATIENCE


def _publish_confirmed(broker, queue: str, body: bytes) -> None:
    with RawConnection.connect(broker.host, broker.port, broker.user, broker.password, timeout=REPLY_PATIENCE) as conn:
        conn.channel_open(1)
        conn.confirm_select(1)
        conn.queue_declare(1, queue, durable=True)
        conn.queue_declare(1, queue + "-transient")
        conn.publish(1, body, routing_key=queue, properties=persistent())
        assert conn.expect(1, commands.Basic.Ack, commands.Basic.Nack).method.delivery_tag == 1


def _get(broker, queue: str) -> bytes | None:
    with RawConnection.connect(broker.host, broker.port, broker.user, broker.password, timeout=REPLY_PATIENCE) as conn:
        conn.channel_open(1)
        got = conn.basic_get(1, queue, no_ack=True)
        return got.body if isinstance(got.method, commands.Basic.GetOk) else None


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


@pytest.mark.parametrize("kind", ["impl", "rabbitmq"])
def test_kill_and_restart_keep_port_and_durable_data(kind, tmp_path):
    broker = make_broker(kind, tmp_path / kind)
    try:
        t0 = time.monotonic()
        broker.start()
        started = time.monotonic() - t0
        port = broker.port
        assert broker.host == "127.0.0.1" and port > 0 and broker.is_running()
        _publish_confirmed(broker, "harness-durable", b"survivor")
        if isinstance(broker, RabbitMQNode):
            broker.sync_metadata()  # see its docstring: the declaration itself is not under test here
        t0 = time.monotonic()
        broker.kill()
        killed = time.monotonic() - t0
        assert not broker.is_running() and not _listening(broker.host, port)
        t0 = time.monotonic()
        broker.start()
        restarted = time.monotonic() - t0
        assert broker.port == port
        assert _get(broker, "harness-durable") == b"survivor"  # DU-1, DU-2, PC-10
        with RawConnection.connect(broker.host, broker.port, timeout=REPLY_PATIENCE) as conn:
            conn.channel_open(1)
            with pytest.raises(ChannelClosed) as caught:  # DU-1: the transient queue is gone
                conn.queue_declare(1, "harness-durable-transient", passive=True)
            assert caught.value.reply_code == 404
        t0 = time.monotonic()
        broker.stop()
        stopped = time.monotonic() - t0
        assert not broker.is_running() and not _listening(broker.host, port)
        print(f"\n{kind}: start {started:.2f} s, SIGKILL {killed:.2f} s, restart {restarted:.2f} s, "
              f"stop {stopped:.2f} s")
    finally:
        broker.close()


def test_impl_reports_a_failed_start(tmp_path):
    """A broker that cannot start (its port is taken) is an error with the broker's own output."""
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        broker = ImplBroker(tmp_path / "data", port=squatter.getsockname()[1], startup_timeout=20)
        with pytest.raises(ImplStartFailed, match="rabbitproof.impl.server"):
            broker.start()
        assert not broker.is_running()
        broker.close()


def test_rabbitmq_node_is_private(rabbitmq_node: RabbitMQNode):
    """The session node keeps all its state under its own directory and names itself uniquely."""
    assert rabbitmq_node.root.is_dir() and (rabbitmq_node.root / "mnesia").is_dir()
    assert rabbitmq_node.nodename.startswith("rabbitproof-")
    assert rabbitmq_node.beam_pid() is not None
    status = rabbitmq_node.ctl("status").stdout
    assert "3.10.8" in status
    assert str(rabbitmq_node.root) in rabbitmq_node.ctl("eval", "rabbit_mnesia:dir().").stdout


def test_missing_rabbitmq_is_a_clear_error(tmp_path):
    """Without the package, the harness says what is missing and how to install it (no skip)."""
    with pytest.raises(RabbitMQNotInstalled, match=r"3\.10\.8 is not installed .* run `make rabbitmq`"):
        RabbitMQNode(bin_dir=tmp_path)
