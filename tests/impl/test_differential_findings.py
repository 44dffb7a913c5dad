"""What the differential test (tests/test_conformance_differential.py) found where impl's frames differed
from RabbitMQ 3.10.8's, pinned one by one on the impl server (each test failed before its fix)."""

from __future__ import annotations

from rabbitproof.recording.rawclient import RawConnection
from tests.fixtures.patience import REPLY_PATIENCE


def received(raw: RawConnection, name: str) -> list:
    return [e.frame for e in raw.trace if e.direction == "received" and e.name == name]


def test_channel_open_ok_sends_its_reserved_field_empty(server):
    """channel.open-ok's reserved longstr is empty on the wire, as RabbitMQ sends it (pamqp's default
    is "0")."""
    raw = RawConnection.connect(server.host, server.port, timeout=REPLY_PATIENCE)
    try:
        raw.channel_open(1)
        assert [f.channel_id for f in received(raw, "Channel.OpenOk")] == [""]
    finally:
        raw.close()
