"""AMQP errors as values: a `Fault` names the reply code (from pamqp's generated tables) and RabbitMQ's text.

Handlers raise `Refused(fault)`; the connection turns it into a channel.close or connection.close frame at
the boundary, so no error escapes the core as an exception. Texts follow RabbitMQ 3.10.8 word for word.
"""

from __future__ import annotations

from dataclasses import dataclass

from pamqp import exceptions

ACCESS_REFUSED = exceptions.AMQPAccessRefused
NOT_FOUND = exceptions.AMQPNotFound
RESOURCE_LOCKED = exceptions.AMQPResourceLocked
PRECONDITION_FAILED = exceptions.AMQPPreconditionFailed
CONNECTION_FORCED = exceptions.AMQPConnectionForced
FRAME_ERROR = exceptions.AMQPFrameError
SYNTAX_ERROR = exceptions.AMQPSyntaxError
COMMAND_INVALID = exceptions.AMQPCommandInvalid
CHANNEL_ERROR = exceptions.AMQPChannelError
UNEXPECTED_FRAME = exceptions.AMQPUnexpectedFrame
NOT_ALLOWED = exceptions.AMQPNotAllowed
NOT_IMPLEMENTED = exceptions.AMQPNotImplemented
INTERNAL_ERROR = exceptions.AMQPInternalError
NO_ROUTE = exceptions.AMQPNoRoute


def constant_name(kind: type[exceptions.AMQPError]) -> str:
    """The reply-code name as RabbitMQ writes it in reply texts: `NOT_FOUND`, not `NOT-FOUND`."""
    return kind.name.replace("-", "_")  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class Fault:
    """A channel error (soft) or a connection error (hard), with the method that caused it."""

    kind: type[exceptions.AMQPError]
    detail: str
    class_id: int = 0
    method_id: int = 0

    @property
    def code(self) -> int:
        return self.kind.value  # type: ignore[attr-defined,no-any-return]

    @property
    def text(self) -> str:
        """The reply text, cut to the 255 bytes a short string holds."""
        text = f"{constant_name(self.kind)} - {self.detail}"
        encoded = text.encode("utf-8")
        return text if len(encoded) <= 255 else encoded[:255].decode("utf-8", "ignore")

    @property
    def is_connection_error(self) -> bool:
        return issubclass(self.kind, exceptions.AMQPHardError)


class Refused(Exception):
    """Carries a Fault from a handler to the connection boundary, where it becomes a close frame."""

    def __init__(self, kind: type[exceptions.AMQPError], detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


def erlang_binary(data: bytes) -> str:
    """Bytes as RabbitMQ prints them in FRAME_ERROR texts: <<"abc">> when printable, else <<1,2,3>>."""
    if data and all(32 <= b < 127 and b not in (34, 92) for b in data):
        return '<<"' + data.decode("ascii") + '">>'
    return "<<" + ",".join(str(b) for b in data) + ">>"


def vhost_resource(kind: str, name: str) -> str:
    """RabbitMQ's way of naming a resource in texts: queue 'q' in vhost '/'."""
    return f"{kind} '{name}' in vhost '/'"
