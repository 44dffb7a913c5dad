"""The broker's asyncio server: moves bytes between sockets and the sans-IO core, runs heartbeats, and
commits the core's durable-write batches to the SQLite store (group commit), one batch at a time.

    python -m rabbitproof.impl.server --host 127.0.0.1 --port 5672 --data-dir DIR --user NAME:PASSWORD

prints `rabbitproof broker listening on HOST:PORT` once ready; SIGTERM and SIGINT shut down cleanly.
Exit codes: 0 after a clean stop, 2 for options it cannot use (an address it cannot listen on, a data
directory it cannot use), refused in one line on stderr before it serves.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import os
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

from rabbitproof.impl.core import Broker, Connection
from rabbitproof.impl.store import Store

CLOSE_TIMEOUT = 3.0  # seconds to wait for connection.close-ok after the broker sent connection.close


def is_loopback(address: Any) -> bool:
    try:
        host = address[0] if isinstance(address, tuple) else str(address)
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except (ValueError, TypeError, IndexError):
        return False


class AMQPProtocol(asyncio.Protocol):
    """One client socket, bound to one core Connection."""

    def __init__(self, server: "BrokerServer") -> None:
        self.server = server
        self.connection: Connection | None = None
        self.transport: asyncio.Transport | None = None
        self.last_received = time.monotonic()
        self.last_sent = time.monotonic()
        self.heartbeat_handle: asyncio.TimerHandle | None = None
        self.close_handle: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                import socket

                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        self.server.accepted += 1
        self.connection = Connection(self.server.broker, is_loopback(transport.get_extra_info("peername")))
        self.connection.io = self  # type: ignore[attr-defined]
        self.server.protocols.add(self)

    def data_received(self, data: bytes) -> None:
        self.last_received = time.monotonic()
        connection = self.connection
        if connection is None:
            return
        connection.receive_data(data)
        if connection.internal_errors:
            for error in connection.internal_errors:
                sys.stderr.write(f"rabbitproof broker: internal error on connection {connection.number}: {error!r}\n")
            connection.internal_errors.clear()
        if connection.heartbeat and self.heartbeat_handle is None:
            self.schedule_heartbeat()
        self.server.after_input()

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.protocols.discard(self)
        for handle in (self.heartbeat_handle, self.close_handle):
            if handle is not None:
                handle.cancel()
        connection = self.connection
        if connection is not None:
            connection.connection_lost()
            self.server.after_input()

    def flush(self) -> None:
        """Write what the core has for this socket; close it when the core says so."""
        connection, transport = self.connection, self.transport
        if connection is None or transport is None or transport.is_closing():
            return
        data = connection.data_to_send()
        if data:
            transport.write(data)
            self.last_sent = time.monotonic()
        if connection.should_close:
            transport.close()
        elif connection.is_closing and self.close_handle is None:
            self.close_handle = asyncio.get_running_loop().call_later(CLOSE_TIMEOUT, self.force_close)

    def force_close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def schedule_heartbeat(self) -> None:
        """Send a heartbeat when idle for half the interval; drop a peer silent for two intervals."""
        connection = self.connection
        if connection is None or not connection.heartbeat:
            return
        interval = connection.heartbeat
        self.heartbeat_handle = asyncio.get_running_loop().call_later(interval / 2, self.heartbeat_tick)

    def heartbeat_tick(self) -> None:
        connection, transport = self.connection, self.transport
        if connection is None or transport is None or transport.is_closing():
            return
        now = time.monotonic()
        interval = connection.heartbeat
        if now - self.last_received > 2 * interval:
            transport.close()
            return
        if now - self.last_sent >= interval / 2:
            transport.write(connection.heartbeat_frame())
            self.last_sent = now
        self.schedule_heartbeat()


class BrokerServer:
    """The listening socket, the core broker, and the group-commit writer."""

    def __init__(self, broker: Broker, store: Store | None) -> None:
        self.broker = broker
        self.store = store
        self.protocols: set[AMQPProtocol] = set()
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rabbitproof-store")
        self.batch_ready = asyncio.Event()
        self.writer_task: asyncio.Task | None = None
        self.server: asyncio.base_events.Server | None = None
        self.stopping = False
        self.timer_handle: asyncio.TimerHandle | None = None
        self.timer_at: float | None = None
        self.accepted = 0                   # client connections accepted since the start

    def after_input(self) -> None:
        """After the core handled input: write every socket that has output, wake the writer."""
        for connection in self.broker.take_dirty():
            io = getattr(connection, "io", None)
            if io is not None:
                io.flush()
        if self.broker.journal.batch:
            self.batch_ready.set()
        when = self.broker.next_timer()
        if when is not None and (self.timer_at is None or when < self.timer_at):
            self.schedule_timers(when)

    def schedule_timers(self, when: float) -> None:
        """Wake up at `when` (the core's monotonic clock) to run the core's timers (message TTL, x-expires)."""
        if self.timer_handle is not None:
            self.timer_handle.cancel()
        self.timer_at = when
        delay = max(0.0, when - self.broker.clock())
        self.timer_handle = asyncio.get_running_loop().call_later(delay, self.run_timers)

    def run_timers(self) -> None:
        self.timer_handle = None
        self.timer_at = None
        self.broker.run_timers()
        self.after_input()

    async def write_batches(self) -> None:
        """Commit the core's batches one at a time; while one is written, the next one fills."""
        loop = asyncio.get_running_loop()
        while True:
            await self.batch_ready.wait()
            self.batch_ready.clear()
            batch = self.broker.take_batch()
            if batch is None:
                if self.stopping:
                    return
                continue
            ops = batch.writes()
            if ops and self.store is not None:
                await loop.run_in_executor(self.executor, self.store.write, ops)
            self.broker.batch_committed(batch)
            self.after_input()

    async def start(self, host: str, port: int) -> tuple[str, int]:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(lambda: AMQPProtocol(self), host, port, reuse_address=True)
        self.writer_task = asyncio.create_task(self.write_batches())
        sockname = self.server.sockets[0].getsockname()
        return sockname[0], sockname[1]

    async def stop(self) -> None:
        """Close every connection (320 CONNECTION_FORCED), commit the last batch, close the store."""
        if self.server is not None:
            self.server.close()
        if self.timer_handle is not None:
            self.timer_handle.cancel()
        for protocol in list(self.protocols):
            if protocol.connection is not None:
                protocol.connection.close_by_broker("shutdown")
        self.after_input()
        await asyncio.sleep(0.05)
        for protocol in list(self.protocols):
            if protocol.transport is not None:
                protocol.transport.close()
        self.stopping = True
        self.batch_ready.set()
        if self.writer_task is not None:
            await self.writer_task
        loop = asyncio.get_running_loop()
        if self.store is not None:
            batch = self.broker.take_batch()
            if batch is not None:
                await loop.run_in_executor(self.executor, self.store.write, batch.writes())
            delivered = self.broker.delivered_on_disk()
            await loop.run_in_executor(self.executor, self.store.close, delivered)
        self.executor.shutdown(wait=True)


class ArgumentParser(argparse.ArgumentParser):
    """Bad options: one error line and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"rabbitproof broker: error: {message}\n")
        raise SystemExit(2)


def parse_user(value: str) -> tuple[str, str]:
    name, sep, password = value.partition(":")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME:PASSWORD, got {value!r}")
    return name, password


def parse_port(value: str) -> int:
    try:
        port = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {value!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port out of range: {port}")
    return port


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The broker's options (`rabbitproof broker`)."""
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=parse_port, default=5672, help="the port (default 5672; 0 picks a free one)")
    parser.add_argument("--data-dir", default="./data",
                        help="where durable queues and persistent messages are kept (SQLite; default ./data)")
    parser.add_argument("--user", type=parse_user, action="append", default=[], metavar="NAME:PASSWORD",
                        help="a user besides guest:guest (repeatable)")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = ArgumentParser(prog="rabbitproof broker", description="rabbitproof's reference AMQP 0-9-1 broker")
    add_arguments(parser)
    return parser.parse_args(argv)


@dataclass
class Served:
    """What one run of the server did: where it listened, what stopped it, how long it served, and how many
    client connections it accepted."""

    host: str = ""
    port: int = 0
    stopped_by: str = ""
    seconds: float = 0.0
    connections: int = 0


def print_ready(served: Served) -> None:
    """The ready line other programs wait for (rabbitproof.brokers.impl_broker reads it)."""
    sys.stdout.write(f"rabbitproof broker listening on {served.host}:{served.port}\n")
    sys.stdout.flush()


async def serve(options: argparse.Namespace, on_listening: Callable[[Served], None] = print_ready,
                served: Served | None = None) -> int:
    """Serve until SIGTERM or SIGINT; ``on_listening`` is called once the socket listens, and ``served``
    (if given) holds the run's figures when this returns. The exit code."""
    served = served if served is not None else Served()
    users = {"guest": "guest"}
    users.update(dict(options.user))
    try:
        store = Store(options.data_dir)
        state = store.load()
    except (OSError, Exception) as error:  # sqlite3.Error, permissions, a file where a directory should be
        sys.stderr.write(f"rabbitproof broker: error: cannot use data directory {options.data_dir!r}: {error}\n")
        return 2
    broker = Broker(users)
    broker.recover(state)
    server = BrokerServer(broker, store)
    try:
        served.host, served.port = await server.start(options.host, options.port)
    except OSError as error:
        sys.stderr.write(f"rabbitproof broker: error: cannot listen on {options.host}:{options.port}: "
                         f"{error.strerror or error}\n")
        return 2
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def stopped_by(signum: signal.Signals) -> None:
        served.stopped_by = signum.name
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopped_by, signum)
    started = time.monotonic()
    on_listening(served)
    await stop.wait()
    await server.stop()
    served.seconds, served.connections = time.monotonic() - started, server.accepted
    return 0


def main(argv: list[str] | None = None) -> int:
    return run(parse_args(argv))


def run(options: argparse.Namespace, on_listening: Callable[[Served], None] = print_ready,
        served: Served | None = None) -> int:
    """Serve until SIGTERM or SIGINT; the exit code (2 for an unusable data directory or address)."""
    if os.path.exists(options.data_dir) and not os.path.isdir(options.data_dir):
        sys.stderr.write(f"rabbitproof broker: error: --data-dir {options.data_dir!r} is not a directory\n")
        return 2
    return asyncio.run(serve(options, on_listening, served))


if __name__ == "__main__":  # the same as `rabbitproof broker`
    raise SystemExit(main())
