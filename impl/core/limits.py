"""Queue length limits: x-max-length, x-max-length-bytes and x-overflow, as RabbitMQ 3.10.8 applies them.

Only ready messages count (unacknowledged ones do not). With `drop-head` (the default) a publish is taken
and then the oldest ready messages are dropped, or dead-lettered with reason `maxlen`, until the queue fits;
a message a consumer takes at once is never counted. With `reject-publish` a message the queue cannot hold
is refused before any delivery: the publisher gets basic.nack in confirm mode; `reject-publish-dlx` also
dead-letters the refused message.
"""

from __future__ import annotations

from typing import Any

from rabbitproof.impl.core.messages import Message

DROP_HEAD, REJECT_PUBLISH, REJECT_PUBLISH_DLX = "drop-head", "reject-publish", "reject-publish-dlx"


class Limits:
    """A queue's length limits (None: no bound) and what to do when a publish would pass them."""

    __slots__ = ("max_length", "max_bytes", "overflow")

    def __init__(self, max_length: int | None, max_bytes: int | None, overflow: str) -> None:
        self.max_length = max_length
        self.max_bytes = max_bytes
        self.overflow = overflow

    def refuses(self, ready: Any, message: Message) -> bool:
        """Whether a reject-publish queue holding `ready` (its ready messages, with their total `size` when
        bytes are limited) must refuse this message (it would pass a limit)."""
        if self.overflow == DROP_HEAD:
            return False
        if self.max_length is not None and len(ready) >= self.max_length:
            return True
        return self.max_bytes is not None and ready.size + len(message.body) > self.max_bytes

    def over(self, ready: Any) -> bool:
        """Whether a queue's ready messages pass a limit (drop-head then drops the oldest)."""
        if self.max_length is not None and len(ready) > self.max_length:
            return True
        return self.max_bytes is not None and ready.size > self.max_bytes


def limits_of(arguments: dict[str, Any]) -> Limits | None:
    """The limits queue arguments ask for (already checked by queue_arguments); None when there are none."""
    max_length = arguments.get("x-max-length")
    max_bytes = arguments.get("x-max-length-bytes")
    if type(max_length) is not int:
        max_length = None
    if type(max_bytes) is not int:
        max_bytes = None
    if max_length is None and max_bytes is None:
        return None
    overflow = arguments.get("x-overflow", DROP_HEAD)
    if isinstance(overflow, bytes):
        overflow = overflow.decode("utf-8", "replace")
    return Limits(max_length, max_bytes, overflow)
