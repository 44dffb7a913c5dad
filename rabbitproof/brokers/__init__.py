"""Brokers under test, started, killed and restarted on demand: our impl as a process, a private RabbitMQ
3.10.8 node (the conformance suite, the benchmarks and the tests use both), and any broker through the
user's own commands (commanded.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Protocol

from rabbitproof.brokers.impl_broker import ImplBroker
from rabbitproof.brokers.rabbitmq import RabbitMQNode

BrokerKind = Literal["impl", "rabbitmq"]
BROKER_KINDS: tuple[BrokerKind, ...] = ("impl", "rabbitmq")


class Broker(Protocol):
    """A broker process on `host:port` that keeps its port and data across kill() and restart()."""

    kind: str
    host: str
    port: int
    user: str
    password: str

    def start(self) -> "Broker": ...
    def stop(self) -> None: ...
    def kill(self) -> None: ...
    def restart(self) -> "Broker": ...
    def close(self) -> None: ...
    def is_running(self) -> bool: ...
    def log_tail(self, lines: int = ...) -> str: ...


def make_broker(kind: BrokerKind, root: Path | None = None) -> Broker:
    """A new, not yet started broker of the given kind with its own directory."""
    if kind == "impl":
        return ImplBroker(root)
    if kind == "rabbitmq":
        return RabbitMQNode(root)
    raise ValueError(f"unknown broker kind {kind!r}; expected one of {BROKER_KINDS}")
