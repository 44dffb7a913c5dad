"""Routing keys and binding keys: topic pattern matching, header matching, one binding's match (RT-1)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any


@lru_cache(maxsize=65536)
def topic_matches(binding_key: str, routing_key: str) -> bool:
    """Whether a topic binding key matches a routing key: words split on '.', '*' matches exactly one
    word, '#' zero or more words."""
    words = routing_key.split(".")
    positions = {0}
    for word in binding_key.split("."):
        if word == "#":
            positions = set(range(min(positions), len(words) + 1))
        elif word == "*":
            positions = {p + 1 for p in positions if p < len(words)}
        else:
            positions = {p + 1 for p in positions if p < len(words) and words[p] == word}
        if not positions:
            return False
    return len(words) in positions


def headers_match(binding_arguments: dict, headers: dict) -> bool:
    """The headers exchange: x-match all (the default) or any over the binding's other arguments."""
    mode = binding_arguments.get("x-match", "all")
    wanted = [(k, v) for k, v in binding_arguments.items() if not k.startswith("x-")]
    if mode == "any":
        return any(k in headers and (v is None or headers[k] == v) for k, v in wanted)
    return all(k in headers and (v is None or headers[k] == v) for k, v in wanted)


def binding_matches(kind: str, binding_key: str, arguments: dict, routing_key: str, headers: Any) -> bool:
    """Whether one binding of an exchange of this kind matches a message (exchange-to-exchange routing)."""
    if kind == "direct":
        return binding_key == routing_key
    if kind == "fanout":
        return True
    if kind == "topic":
        return topic_matches(binding_key, routing_key)
    return headers_match(arguments, headers() if callable(headers) else (headers or {}))
