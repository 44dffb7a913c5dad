"""The queues of a try, kept by a connection of the replay's own outside the recording: declared before the
clients start (the execution starts with them), on the broker's disk before an execution that crashes it,
and at the end read for the messages left in them and deleted."""
from __future__ import annotations

import time
from dataclasses import dataclass

from pamqp import commands

from rabbitproof.recording.rawclient import ChannelClosed, ConnectionClosed, ConnectionLost, RawConnection
from rabbitproof.spec.roles import QueueSpec

from rabbitproof.replay.naming import Names

DECLARATION_PAUSE = 1.0     # seconds given to the broker to write the declarations before a crash can come


class BrokerUnusable(Exception):
    """The broker cannot be reached to set a try up; the message says why."""


@dataclass(frozen=True)
class Where:
    """The broker's address and the credentials of the replay's clients."""

    host: str
    port: int
    user: str = "guest"
    password: str = "guest"
    vhost: str = "/"



def admin(where: Where, timeout: float) -> RawConnection:
    """A connection of the replay's own, with channel 1 open; BrokerUnusable if it cannot be made."""
    try:
        conn = RawConnection.connect(where.host, where.port, where.user, where.password, vhost=where.vhost,
                                     timeout=timeout)
    except (OSError, ConnectionLost, ConnectionClosed, TimeoutError) as e:
        raise BrokerUnusable(f"cannot connect to {where.host}:{where.port}: {e}") from None
    conn.channel_open(1)
    return conn


def declare(where: Where, names: Names, durable: tuple[bool, ...], predeclared: tuple[int, ...],
            timeout: float) -> dict:
    """The setup's queues ``predeclared`` (those no client declares itself), under the try's names; the
    recording's "existing"."""
    existing = {}
    with admin(where, timeout) as conn:
        for q in predeclared:
            name = names.queue(f"q{q}")
            conn.queue_declare(1, name, durable=durable[q])
            existing[name] = QueueSpec(durable=durable[q])
    return existing


def settle_declarations(crasher: object) -> None:
    """Before an execution that crashes the broker: the queues it starts with are on the broker's disk.
    RabbitMQ writes a declaration to disk a moment after declare-ok (docs/reference/differences.md), so a
    crash right after the replay's own declarations could lose a durable queue the execution holds to
    exist; a broker that can be told to write them (``sync_metadata``) is, any other is given
    DECLARATION_PAUSE seconds."""
    sync = getattr(crasher, "sync_metadata", None)
    if sync is not None:
        sync()
    else:
        time.sleep(DECLARATION_PAUSE)


def read_and_empty(where: Where, names: Names, timeout: float) -> set:
    """The messages left in the try's queues once no consumer holds any (theirs went back when their
    connections closed), by the execution's names; the queues deleted."""
    left: set = set()
    try:
        conn = admin(where, timeout)
    except BrokerUnusable:
        return left
    with conn:
        for q in range(len(names.queues)):
            name = names.queue(f"q{q}")
            try:
                deadline = time.monotonic() + 10
                while conn.queue_declare(1, name, passive=True).consumer_count and time.monotonic() < deadline:
                    time.sleep(0.05)
                while True:
                    got = conn.basic_get(1, name, no_ack=True)
                    if not isinstance(got.method, commands.Basic.GetOk):
                        break
                    left.add(names.message_of(got.body) or "")
                conn.queue_delete(1, name)
            except ChannelClosed:           # no such queue (a transient one gone with a crash)
                conn.send(1, commands.Channel.CloseOk())
                conn.channel_open(1)
            except (ConnectionLost, ConnectionClosed, TimeoutError):
                break
    return left
