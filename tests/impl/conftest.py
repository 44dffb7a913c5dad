"""Fixtures for the impl broker's own tests: `python -m rabbitproof.impl.server` on a free port with a private data
directory (rabbitproof/brokers/impl_broker.py), shared or per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from rabbitproof.brokers.impl_broker import ImplBroker


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ImplBroker]:
    """One broker shared by the tests that do not restart it; tests use their own queue names. Besides
    guest/guest it knows the user alice/secret."""
    broker = ImplBroker(tmp_path_factory.mktemp("impl-shared"), user=("alice", "secret")).start()
    try:
        yield broker
    finally:
        broker.close()


@pytest.fixture
def fresh_server(tmp_path: Path) -> Iterator[ImplBroker]:
    """A broker of this test's own, which the test may stop, kill and start again."""
    broker = ImplBroker(tmp_path / "data").start()
    try:
        yield broker
    finally:
        broker.close()


@pytest.fixture
def qname() -> str:
    """A queue name no other test uses."""
    return "q-" + uuid.uuid4().hex[:12]
