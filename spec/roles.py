"""What a configuration lets each client channel do, and the queues it starts with.

Kept apart from the transition rules (like a TLA+ model file): the rules say what each action does,
a role says which client actions a channel may take at all, so that each configuration explores
one part of the semantics without the whole product of features.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class QueueSpec:
    """A model queue: its flags, whether it exists at the start, and where it dead-letters (ACK-6)."""

    durable: bool = False
    exclusive: bool = False
    declared: bool = True
    dead_letter: int = -1           # index of the queue it dead-letters into, -1 for none


@dataclass(frozen=True)
class Role:
    """The client actions one channel may take."""

    publish: tuple[tuple[int, int], ...] = ()     # (exchange, routing key) targets
    persistent: tuple[bool, ...] = (False,)
    mandatory: tuple[bool, ...] = (False,)
    confirm: bool = False                         # sends confirm.select
    tx: bool = False                              # sends tx.select, then commits and rolls back
    consume: tuple[tuple[int, bool], ...] = ()    # (queue, no_ack); consumer tag = position + 1
    cancel: bool = False
    get: tuple[tuple[int, bool], ...] = ()        # (queue, no_ack)
    ack: bool = False
    multiple: bool = False                        # ack / nack with multiple=true
    ack_all: bool = False                         # tag 0 with multiple=true (ACK-3)
    nack: tuple[bool, ...] = ()                   # requeue values used with basic.nack
    reject: tuple[bool, ...] = ()                 # requeue values used with basic.reject
    bad_ack: bool = False                         # acks of tags that are not outstanding (ACK-4, ACK-7)
    qos: tuple[tuple[int, bool], ...] = ()        # (prefetch_count, global)
    qos_first: bool = False                       # consumes only once the qos budget is spent (qos, then consume)
    recover: tuple[bool, ...] = ()                # requeue values used with basic.recover
    mode_errors: bool = False                     # confirm.select on tx, tx.select on confirm, commit on none
    declare: tuple[int, ...] = ()                 # queues this channel declares
    bind: tuple[int, ...] = ()                    # queues this channel binds to the fanout exchange
    exclusive: bool = False                       # its consumers are exclusive
    purge: tuple[int, ...] = ()                   # queues it purges
    delete: tuple[tuple[int, bool, bool], ...] = ()   # (queue, if_unused, if_empty) it deletes
    protocol_errors: bool = False                 # frames refused with a connection error (ER-1)
    close: bool = False                           # closes and reopens the channel
    close_connection: bool = False                # closes and reopens its connection


IDLE = Role()
