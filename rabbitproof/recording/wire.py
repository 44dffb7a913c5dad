"""Small readers of what a broker sent, for tests that compare impl and RabbitMQ frame by frame.

`until_quiet` collects everything a broker sends until it falls silent (as the recorded RabbitMQ runs in
docs/rabbitmq-3.10.8-observations.md did); `shape` reduces a command to the fields a test compares.
"""

from __future__ import annotations

import time
from typing import Any

from pamqp import commands as C

from rabbitproof.recording.rawclient import Command, ConnectionLost, RawConnection

QUIET = 0.5  # seconds of silence after which a broker is taken to have sent all it will send


def until_quiet(conn: RawConnection, quiet: float = QUIET, channel: int | None = None, at_least: int = 0,
                patience: float = 60.0) -> list[Command]:
    """Every command that arrives until `quiet` seconds pass with nothing read, plus what was already in
    the inbox (of one channel if given), in arrival order. The end of the stream ends the wait. With
    `at_least`, the quiet time starts only once that many commands (of the channel) are in, or after
    `patience` seconds: what must come is read however loaded the machine, and only what may still
    follow it is left to the quiet time."""
    deadline = time.monotonic() + patience
    try:
        while (sum(channel is None or c.channel == channel for c in conn.inbox) < at_least
               and not conn.eof and time.monotonic() < deadline):
            conn.pump(max(0.0, deadline - time.monotonic()))
        while conn.pump(quiet):
            pass
    except ConnectionLost:
        pass
    return conn.take_all(channel)


def shape(command: Command) -> tuple[Any, ...]:
    """A command as a comparable tuple: the channel, the method name and the fields that matter."""
    m = command.method
    ch = command.channel
    if isinstance(m, C.Basic.Deliver):
        return (ch, "deliver", m.consumer_tag, m.delivery_tag, m.redelivered, command.body)
    if isinstance(m, C.Basic.GetOk):
        return (ch, "get-ok", m.delivery_tag, m.redelivered, m.message_count, command.body)
    if isinstance(m, (C.Connection.Close, C.Channel.Close)):
        return (ch, m.name, m.reply_code, m.reply_text, m.class_id, m.method_id)
    if isinstance(m, C.Basic.Cancel):
        return (ch, "cancel", m.consumer_tag, m.nowait)
    if isinstance(m, (C.Queue.DeleteOk, C.Queue.PurgeOk)):
        return (ch, m.name, m.message_count)
    return (ch, m.name)


def shapes(commands: list[Command]) -> list[tuple[Any, ...]]:
    return [shape(c) for c in commands]


def deliveries(commands: list[Command]) -> list[tuple[str, int, bytes | None]]:
    """(consumer tag, delivery tag, body) of each basic.deliver, in arrival order."""
    return [
        (str(c.method.consumer_tag), int(c.method.delivery_tag), c.body)
        for c in commands
        if isinstance(c.method, C.Basic.Deliver)
    ]


def wait_ready(conn: RawConnection, channel: int, queue: str, expected: int, deadline: float = 10.0) -> None:
    """Poll queue.declare(passive) until the queue holds `expected` ready messages."""
    end = time.monotonic() + deadline
    while True:
        count = conn.queue_declare(channel, queue, passive=True).message_count
        if count == expected:
            return
        assert time.monotonic() < end, f"{queue} holds {count} ready messages, not {expected}"
        time.sleep(0.02)
