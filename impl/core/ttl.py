"""Message TTL (x-message-ttl, the `expiration` property) and unused-queue expiry (x-expires).

A message's deadline is fixed when it enters a queue: the smaller of the queue's TTL and its own, from the
moment it was published; a requeued message keeps it. As in RabbitMQ, expiry happens at the head of the
queue: an expired message is dropped (or dead-lettered with reason `expired`) when it reaches the head, by
a timer or before a delivery, so it is never delivered after its deadline. A message is deliverable up to
its deadline, so TTL 0 means "delivered now to a consumer with room, or expired".
"""

from __future__ import annotations

import re
from typing import Any

from rabbitproof.impl.core import errors
from rabbitproof.impl.core.errors import Refused
from rabbitproof.impl.core.frames import decode_properties

EXPIRATION_FLAG_BYTE = 0x01  # the `expiration` bit (0x0100) of the property flags, in their first byte
EXPIRATION = re.compile(r"([+-]?[0-9]+)(.*)", re.DOTALL)


def milliseconds(arguments: dict[str, Any], name: str) -> int | None:
    """An integer argument (x-message-ttl, x-expires) already checked by queue_arguments, or None."""
    value = arguments.get(name)
    return value if type(value) is int else None


def parse_expiration(expiration: str) -> int | None:
    """The per-message TTL in milliseconds from the `expiration` property, checked as RabbitMQ does
    (Erlang's string:to_integer: an optional sign, digits, nothing after them); None for no expiration."""
    if expiration == "":
        return None
    match = EXPIRATION.match(expiration)
    if match is None:
        raise Refused(errors.PRECONDITION_FAILED, f"invalid expiration '{expiration}': no_integer")
    digits, rest = match.groups()
    if rest:
        raise Refused(
            errors.PRECONDITION_FAILED, f"invalid expiration '{expiration}': {{leftover_string,\"{rest}\"}}"
        )
    value = int(digits)
    if value < 0:
        raise Refused(errors.PRECONDITION_FAILED, f"invalid expiration '{expiration}': {{value_negative,{value}}}")
    return value


def message_ttl(properties_raw: bytes) -> int | None:
    """The TTL a published message asks for, None without an `expiration` property (the common case costs
    one bit test)."""
    if not properties_raw[0] & EXPIRATION_FLAG_BYTE:
        return None
    return parse_expiration(decode_properties(properties_raw).expiration or "")


def deadline(published_at: float, queue_ttl: int | None, own_ttl: int | None) -> float:
    """When a message published at `published_at` expires in a queue (the smaller TTL wins)."""
    if queue_ttl is None:
        ttl = own_ttl
    elif own_ttl is None:
        ttl = queue_ttl
    else:
        ttl = min(queue_ttl, own_ttl)
    return published_at + ttl / 1000.0  # type: ignore[operator]
