"""Messages as the broker holds them: one shared `Message` (what was published) and one `QueuedMessage`
per queue it was routed to (its place in that queue and whether it has been delivered before, RT-2)."""

from __future__ import annotations

import datetime
from typing import Any

from rabbitproof.impl.core.frames import decode_properties

PERSISTENT = 2


class Message:
    """What a publisher sent: routing information, encoded properties and body."""

    __slots__ = ("exchange", "routing_key", "properties_raw", "body", "persistent", "ttl", "published_at")

    def __init__(
        self,
        exchange: str,
        routing_key: str,
        properties_raw: bytes,
        body: bytes,
        persistent: bool,
        ttl: int | None = None,
    ) -> None:
        self.exchange = exchange
        self.routing_key = routing_key
        self.properties_raw = properties_raw
        self.body = body
        self.persistent = persistent
        self.ttl = ttl  # milliseconds from the `expiration` property (impl.core.ttl), None without one
        self.published_at: float | None = None  # set when a queue first needs it for a deadline

    def headers(self) -> dict[str, Any]:
        return decode_properties(self.properties_raw).headers or {}


class QueuedMessage:
    """A message's copy in one queue, with its publication number there (RQ-1) and the redelivered flag
    its next delivery carries (RQ-2). `on_disk` is true when the store holds (or will hold) this copy;
    `deadline` is when it expires in this queue (impl.core.ttl), None when it does not."""

    __slots__ = ("seq", "message", "queue", "redelivered", "on_disk", "deadline")

    def __init__(self, seq: int, message: Message, queue: Any, redelivered: bool = False, on_disk: bool = False):
        self.seq = seq
        self.message = message
        self.queue = queue
        self.redelivered = redelivered
        self.on_disk = on_disk
        self.deadline: float | None = None

    def __lt__(self, other: "QueuedMessage") -> bool:
        return self.seq < other.seq


def dead_lettered(
    message: Message, queue_name: str, reason: str, exchange: str, routing_key: str | None
) -> Message:
    """The copy of `message` that a queue's dead-letter exchange receives, with RabbitMQ's x-death
    headers (newest death first, a repeated (queue, reason) counted rather than repeated)."""
    properties = decode_properties(message.properties_raw)
    headers = dict(properties.headers or {})
    deaths = [dict(d) for d in headers.get("x-death") or [] if isinstance(d, dict)]
    entry: dict[str, Any] | None = None
    for death in deaths:
        if death.get("queue") == queue_name and death.get("reason") == reason:
            entry = death
            deaths.remove(death)
            break
    if entry is None:
        entry = {
            "count": 0,
            "reason": reason,
            "queue": queue_name,
            "exchange": message.exchange,
            "routing-keys": [message.routing_key],
        }
        if properties.expiration:
            entry["original-expiration"] = properties.expiration
    entry["count"] = int(entry.get("count", 0)) + 1
    entry["time"] = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    deaths.insert(0, entry)
    headers["x-death"] = deaths
    headers.setdefault("x-first-death-exchange", message.exchange)
    headers.setdefault("x-first-death-queue", queue_name)
    headers.setdefault("x-first-death-reason", reason)
    properties.headers = headers
    properties.expiration = None
    return Message(
        exchange,
        message.routing_key if routing_key is None else routing_key,
        properties.marshal(),
        message.body,
        message.persistent,
    )
