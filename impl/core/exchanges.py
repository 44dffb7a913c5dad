"""Exchanges and their bindings: the default, direct, fanout, topic and headers types (RT-1, RT-2).

`route` returns each destination queue once, so a message bound twice reaches a queue as one copy.
"""

from __future__ import annotations

from typing import Any

from rabbitproof.impl.core.queues import Queue
from rabbitproof.impl.core.routing import binding_matches, headers_match, topic_matches

EXCHANGE_TYPES = ("direct", "fanout", "topic", "headers")
BindingKey = tuple[str, Any]  # (routing key, frozen arguments)


def freeze(arguments: dict | None) -> Any:
    """Binding arguments as a hashable value."""
    if not arguments:
        return ()
    return tuple(sorted((k, repr(v)) for k, v in arguments.items()))


class Exchange:
    """A named exchange with its bindings to queues."""

    def __init__(
        self, name: str, kind: str, durable: bool, auto_delete: bool, internal: bool, arguments: dict
    ) -> None:
        self.name = name
        self.kind = kind
        self.durable = durable
        self.auto_delete = auto_delete
        self.internal = internal
        self.arguments = arguments
        # queue name -> {(routing key, frozen arguments): arguments}
        self.bindings: dict[str, dict[BindingKey, dict]] = {}
        self.queues: dict[str, Queue] = {}
        self.direct: dict[str, dict[str, Queue]] = {}
        # exchange-to-exchange bindings with this exchange as source: destination name ->
        # {(routing key, frozen arguments): (arguments, destination)}
        self.exchange_bindings: dict[str, dict[BindingKey, tuple[dict, "Exchange"]]] = {}

    def bind_exchange(self, destination: "Exchange", routing_key: str, arguments: dict) -> bool:
        """Add an exchange-to-exchange binding from this exchange; False when it already existed."""
        per_destination = self.exchange_bindings.setdefault(destination.name, {})
        key = (routing_key, freeze(arguments))
        if key in per_destination:
            return False
        per_destination[key] = (arguments, destination)
        return True

    def unbind_exchange(self, destination_name: str, routing_key: str, arguments: dict) -> bool:
        """Remove an exchange-to-exchange binding; False when there was none."""
        per_destination = self.exchange_bindings.get(destination_name)
        key = (routing_key, freeze(arguments))
        if not per_destination or key not in per_destination:
            return False
        del per_destination[key]
        if not per_destination:
            del self.exchange_bindings[destination_name]
        return True

    def route_to_exchanges(self, routing_key: str, headers: Any) -> list["Exchange"]:
        """The exchanges this exchange passes a message on to through its exchange-to-exchange bindings."""
        return [
            destination
            for per_destination in self.exchange_bindings.values()
            for (binding_key, _), (arguments, destination) in per_destination.items()
            if binding_matches(self.kind, binding_key, arguments, routing_key, headers)
        ]

    def bind(self, queue: Queue, routing_key: str, arguments: dict) -> bool:
        """Add a binding; False when it already existed."""
        key = (routing_key, freeze(arguments))
        per_queue = self.bindings.setdefault(queue.name, {})
        if key in per_queue:
            return False
        per_queue[key] = arguments
        self.queues[queue.name] = queue
        self.direct.setdefault(routing_key, {})[queue.name] = queue
        return True

    def unbind(self, queue: Queue, routing_key: str, arguments: dict) -> bool:
        """Remove a binding; False when there was none."""
        key = (routing_key, freeze(arguments))
        per_queue = self.bindings.get(queue.name)
        if not per_queue or key not in per_queue:
            return False
        del per_queue[key]
        if not any(rk == routing_key for rk, _ in per_queue):
            by_key = self.direct.get(routing_key)
            if by_key is not None:
                by_key.pop(queue.name, None)
                if not by_key:
                    del self.direct[routing_key]
        if not per_queue:
            del self.bindings[queue.name]
            del self.queues[queue.name]
        return True

    def unbind_queue(self, queue: Queue) -> list[BindingKey]:
        """Remove every binding of a queue; the removed keys."""
        per_queue = self.bindings.pop(queue.name, {})
        self.queues.pop(queue.name, None)
        for routing_key, _ in per_queue:
            by_key = self.direct.get(routing_key)
            if by_key is not None:
                by_key.pop(queue.name, None)
                if not by_key:
                    del self.direct[routing_key]
        return list(per_queue)

    def has_bindings(self) -> bool:
        """Whether this exchange is the source of any binding (to a queue or an exchange)."""
        return bool(self.bindings) or bool(self.exchange_bindings)

    def route(self, routing_key: str, headers: Any) -> list[Queue]:
        """The queues a message published with this routing key reaches."""
        kind = self.kind
        if kind == "direct":
            by_key = self.direct.get(routing_key)
            return list(by_key.values()) if by_key else []
        if kind == "fanout":
            return list(self.queues.values())
        if kind == "topic":
            return [
                self.queues[name]
                for name, keys in self.bindings.items()
                if any(topic_matches(rk, routing_key) for rk, _ in keys)
            ]
        if kind == "headers":
            message_headers = headers() if callable(headers) else (headers or {})
            return [
                self.queues[name]
                for name, keys in self.bindings.items()
                if any(headers_match(arguments, message_headers) for arguments in keys.values())
            ]
        return []
