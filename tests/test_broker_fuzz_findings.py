"""What the frame fuzzer found in our broker, each pinned (ER-2, ER-3):

- a content header whose property values overrun the header (a short string claiming more bytes than
  remain) or leave bytes after the last one was accepted, the value silently cut (pamqp's decoder
  takes what is there): it is a frame that cannot decode, 501;
- a content header shorter than its fixed fields (class, weight, body size) was answered 505 "class 0";
  it cannot decode: 501, as RabbitMQ 3.10.8 answers;
- a content frame on a channel never opened was answered 504 `expected 'channel.open'`; RabbitMQ 3.10.8
  answers 505 "expected method frame, got non method frame instead", and so do we now;
- exchange.delete of an amq.* name never declared (amq.default) was answered delete-ok; RabbitMQ 3.10.8
  refuses every amq.* name with 403, and so do we now."""

from __future__ import annotations

import datetime
import struct

import pytest
from pamqp import body as amqp_body
from pamqp import commands, frame, header

from rabbitproof.fuzz.cases import Case, channel, connection, raw_frame
from rabbitproof.fuzz.wire import FuzzConnection
from rabbitproof.impl.core.frames import canonical_properties

PUBLISH = frame.marshal(commands.Basic.Publish(routing_key="nowhere"), 1)


@pytest.mark.parametrize("properties,why", [
    (b"\x80\x00\x40abc", "overruns"),                  # content-type claims 64 bytes, 3 follow
    (b"\x00\x08\x05ab", "overruns"),                   # app-id claims 5 bytes, 2 follow
    (b"\x10\x00", "overruns"),                         # delivery-mode announced, absent
    (b"\x00\x00xyz", "after the last property"),       # no property, three bytes anyway
    (b"\x10\x00\x02\x00", "after the last property"),  # delivery-mode 2, then a stray byte
])
def test_property_values_must_fill_the_header_exactly_ER_3(properties, why):
    with pytest.raises(ValueError, match=why):
        canonical_properties(properties)


def test_every_property_of_a_well_formed_header_still_decodes_ER_3():
    full = commands.Basic.Properties(
        content_type="a", content_encoding="b", headers={"x": 1, "y": "s", "t": {"n": [1, 2]}}, delivery_mode=2,
        priority=3, correlation_id="c", reply_to="r", expiration="100", message_id="m",
        timestamp=datetime.datetime(2020, 1, 1), message_type="t", user_id="guest", app_id="ap")
    raw = full.marshal()
    encoded, delivery_mode = canonical_properties(raw)
    assert delivery_mode == 2
    assert encoded == raw


def run(broker, data: bytes) -> tuple[tuple[str, int], str]:
    conn = FuzzConnection(broker.host, broker.port, broker.user, broker.password, "findings", timeout=60)
    try:
        return conn.run_case(Case("finding", data, 1, connection(501)))
    finally:
        conn.close()


@pytest.mark.parametrize("properties", [b"\x80\x00\x40abc", b"\x00\x00xyz"])
def test_a_header_with_overrunning_properties_closes_the_connection_501_ER_3(impl_broker_module, properties):
    data = (PUBLISH + raw_frame(2, 1, struct.pack(">HHQ", 60, 0, 3) + properties)
            + frame.marshal(amqp_body.ContentBody(b"abc"), 1))
    outcome, text = run(impl_broker_module, data)
    assert outcome == ("connection", 501), text
    assert text.startswith("FRAME_ERROR - cannot decode content header")


@pytest.mark.parametrize("size", [0, 1, 2, 13])
def test_a_content_header_shorter_than_its_fixed_fields_is_501_ER_3(impl_broker_module, size):
    outcome, text = run(impl_broker_module, PUBLISH + raw_frame(2, 1, struct.pack(">HHQH", 60, 0, 3, 0)[:size]))
    assert outcome == ("connection", 501), text


@pytest.mark.parametrize("content", [frame.marshal(header.ContentHeader(body_size=3), 9),
                                     frame.marshal(amqp_body.ContentBody(b"abc"), 9)])
def test_content_on_a_channel_never_opened_is_505_as_in_rabbitmq_ER_2(impl_broker_module, content):
    outcome, text = run(impl_broker_module, content)
    assert (outcome, text) == (("connection", 505), "UNEXPECTED_FRAME - expected method frame, got non method "
                                                     "frame instead")


@pytest.mark.parametrize("name", ["amq.default", "amq.not-declared", "amq.direct"])
def test_deleting_any_amq_exchange_is_refused_as_in_rabbitmq_ER_2(impl_broker_module, name):
    """RabbitMQ refuses exchange.delete of every amq.* name, declared or not (403); we deleted nothing
    but answered delete-ok for one never declared (amq.default among them)."""
    conn = FuzzConnection(impl_broker_module.host, impl_broker_module.port, "guest", "guest", "findings", timeout=60)
    try:
        outcome, text = conn.run_case(Case("finding", frame.marshal(commands.Exchange.Delete(exchange=name), 1), 1,
                                           channel(403)))
    finally:
        conn.close()
    assert (outcome, text) == (("channel", 403), f"ACCESS_REFUSED - deletion of system exchange '{name}' in "
                                                 f"vhost '/' not allowed")
