"""RabbitMQ 3.10.8's queue arguments, each checked as RabbitMQ checks it, and what this broker does with it.

`QUEUE_ARGUMENTS` lists every argument RabbitMQ 3.10.8 knows (`rabbit_amqqueue:declare_args/0`) with its
check and one of three verdicts: implemented here; accepted because it changes nothing a client can observe
on a single node (where messages are stored, which node leads); or refused because RabbitMQ acts on it and
this broker does not, so that no client believes it has, say, a priority queue when it has not.
Arguments RabbitMQ does not know (`x-foo`) are accepted and ignored, as RabbitMQ does.
"""

from __future__ import annotations

from typing import Any, Callable

from rabbitproof.impl.core import errors
from rabbitproof.impl.core.errors import Refused, vhost_resource

IMPLEMENTED, NO_VISIBLE_EFFECT, REFUSED, NOT_FOR_CLASSIC = "implemented", "no-visible-effect", "refused", "not-classic"
OVERFLOW_MODES = ("drop-head", "reject-publish", "reject-publish-dlx")

# The AMQP field type names RabbitMQ prints, by the Python type pamqp decodes a field into.
FIELD_TYPE_NAMES: dict[type, str] = {
    bool: "bool", str: "longstr", bytes: "longstr", float: "float", dict: "table", list: "array",
}


def field_type(value: Any) -> str:
    """The AMQP type name RabbitMQ gives a decoded field value (integers by their encoded width)."""
    if type(value) is int:
        if -128 <= value <= 127:
            return "byte"
        if -32768 <= value <= 32767:
            return "short"
        return "signedint" if -2147483648 <= value <= 2147483647 else "long"
    return FIELD_TYPE_NAMES.get(type(value), "void" if value is None else type(value).__name__)


def integer(value: Any) -> str | None:
    """RabbitMQ's integer check: the complaint about a value that is not an integer, else None."""
    if type(value) is int:
        return None
    return f'"expected integer, got {field_type(value)}"'


def non_negative(value: Any) -> str | None:
    """An integer >= 0 (x-max-length, x-max-length-bytes, x-message-ttl)."""
    return integer(value) or (f"{{value_negative,{value}}}" if value < 0 else None)


def positive(value: Any) -> str | None:
    """An integer > 0 (x-expires)."""
    return non_negative(value) or (f"{{value_zero,{value}}}" if value == 0 else None)


def one_of(kind: str, allowed: tuple[Any, ...], show: Callable[[Any], str] = str) -> Callable[[Any], str | None]:
    """A string (or integer) among `allowed`; RabbitMQ's "unsupported queue <kind> '<value>'" otherwise."""

    def check(value: Any) -> str | None:
        shown = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
        return None if shown in allowed else f"\"unsupported queue {kind} '{show(shown)}'\""

    return check


def overflow(value: Any) -> str | None:
    """x-overflow: one of RabbitMQ's three overflow behaviours."""
    if not isinstance(value, (str, bytes)):
        return f"{{unacceptable_type,{field_type(value)}}}"
    shown = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    return None if shown in OVERFLOW_MODES else "invalid_overflow"


def anything(value: Any) -> str | None:
    """No check here: the argument is refused, not for classic queues, or a string argument whose type
    the channel checks with RabbitMQ's own text ("invalid type 'byte' for arg ...")."""
    return None


# name -> (check of the value, verdict). The order is RabbitMQ's.
QUEUE_ARGUMENTS: dict[str, tuple[Callable[[Any], str | None], str]] = {
    "x-expires": (positive, IMPLEMENTED),
    "x-message-ttl": (non_negative, IMPLEMENTED),
    "x-dead-letter-exchange": (anything, IMPLEMENTED),
    "x-dead-letter-routing-key": (anything, IMPLEMENTED),
    "x-dead-letter-strategy": (anything, NOT_FOR_CLASSIC),
    "x-max-length": (non_negative, IMPLEMENTED),
    "x-max-length-bytes": (non_negative, IMPLEMENTED),
    "x-max-in-memory-length": (anything, NOT_FOR_CLASSIC),
    "x-max-in-memory-bytes": (anything, NOT_FOR_CLASSIC),
    "x-max-priority": (anything, REFUSED),
    "x-overflow": (overflow, IMPLEMENTED),
    "x-queue-mode": (one_of("mode", ("default", "lazy")), NO_VISIBLE_EFFECT),
    "x-queue-version": (one_of("version", (1, 2)), NO_VISIBLE_EFFECT),
    "x-single-active-consumer": (anything, REFUSED),
    "x-queue-type": (one_of("type", ("classic", "quorum", "stream")), IMPLEMENTED),
    "x-quorum-initial-group-size": (anything, NOT_FOR_CLASSIC),
    "x-max-age": (anything, NOT_FOR_CLASSIC),
    "x-stream-max-segment-size-bytes": (anything, NOT_FOR_CLASSIC),
    "x-initial-cluster-size": (anything, NOT_FOR_CLASSIC),
    "x-queue-leader-locator": (anything, NOT_FOR_CLASSIC),
    "x-queue-master-locator": (anything, NO_VISIBLE_EFFECT),
    "x-delivery-limit": (anything, NOT_FOR_CLASSIC),
}
QUEUE_TYPES_HERE = ("classic",)

# Consumer arguments (basic.consume) RabbitMQ acts on: x-priority is refused (no consumer priorities here);
# x-cancel-on-ha-failover only matters for mirrored queues and x-stream-offset only for streams.
REFUSED_CONSUMER_ARGUMENTS = ("x-priority", "x-credit")


def not_implemented(what: str) -> Refused:
    """The refusal of something RabbitMQ does and this broker does not: 540 NOT_IMPLEMENTED, naming it."""
    return Refused(errors.NOT_IMPLEMENTED, f"{what} is not implemented by this broker (rabbitproof)")


def check_queue_arguments(queue: str, arguments: dict[str, Any]) -> None:
    """Refuse a queue.declare whose arguments RabbitMQ would refuse (406, RabbitMQ's text), or that ask for
    something this broker does not do (540, naming the argument)."""
    where = vhost_resource("queue", queue)
    for name, value in arguments.items():
        entry = QUEUE_ARGUMENTS.get(name)
        if entry is None:
            continue
        check, verdict = entry
        if verdict == NOT_FOR_CLASSIC:
            raise Refused(
                errors.PRECONDITION_FAILED, f"invalid arg '{name}' for {where} of queue type rabbit_classic_queue"
            )
        complaint = check(value)
        if complaint is not None:
            raise Refused(errors.PRECONDITION_FAILED, f"invalid arg '{name}' for {where}: {complaint}")
        if verdict == REFUSED:
            raise not_implemented(f"queue argument '{name}'")
        if name == "x-queue-type" and value not in QUEUE_TYPES_HERE:
            raise not_implemented(f"queue type '{value}'")


def check_consumer_arguments(arguments: dict[str, Any]) -> None:
    """Refuse a basic.consume argument RabbitMQ acts on and this broker does not (consumer priorities)."""
    for name in REFUSED_CONSUMER_ARGUMENTS:
        if name in arguments:
            raise not_implemented(f"consumer argument '{name}'")
