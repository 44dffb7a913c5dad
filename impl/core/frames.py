"""The AMQP 0-9-1 frame codec: raw frames out of a byte buffer, frames into bytes.

Methods are decoded with pamqp's generated classes; a content header keeps its property bytes as
received (validated once) so that deliveries re-send them without re-encoding. The few frames on the
per-message path (basic.deliver, basic.get-ok, basic.ack, content) are encoded here directly; every
other method goes through pamqp.
"""

from __future__ import annotations

import struct
from typing import Any

from pamqp import commands, constants
from pamqp import decode as pamqp_decode
from pamqp import frame as pamqp_frame
from pamqp import header as pamqp_header

FRAME_METHOD = constants.FRAME_METHOD
FRAME_HEADER = constants.FRAME_HEADER
FRAME_BODY = constants.FRAME_BODY
FRAME_HEARTBEAT = constants.FRAME_HEARTBEAT
FRAME_END = constants.FRAME_END
FRAME_END_BYTE = constants.FRAME_END_CHAR
FRAME_OVERHEAD = constants.FRAME_HEADER_SIZE + 1
PROTOCOL_HEADER = pamqp_header.ProtocolHeader().marshal()
METHODS = commands.INDEX_MAPPING
BASIC_CLASS = commands.Basic.frame_id

_frame_head = struct.Struct(">BHI")
_method_head = struct.Struct(">BHIHH")
_u64 = struct.Struct(">Q")
_content_head = struct.Struct(">BHIHHQ")
_ack = struct.Struct(">BHIHHQB")
_HEARTBEAT = _frame_head.pack(FRAME_HEARTBEAT, 0, 0) + FRAME_END_BYTE
_DELIVERY_MODE_FLAG = commands.Basic.Properties.flags["delivery_mode"]
_KNOWN_PROPERTY_FLAGS = sum(commands.Basic.Properties.flags.values())
_NO_PROPERTIES = b"\x00\x00"
_PROPERTY_TYPES = tuple((name, getattr(commands.Basic.Properties, "_" + name))
                        for name in commands.Basic.Properties.__slots__)
_PROPERTY_WIDTHS = {"octet": 1, "timestamp": 8}


class ContentHeader:
    """A received content header: class, body size and the encoded properties (validated)."""

    __slots__ = ("class_id", "body_size", "properties_raw", "delivery_mode", "_properties")

    def __init__(self, class_id: int, body_size: int, properties_raw: bytes, delivery_mode: int = 0) -> None:
        self.class_id = class_id
        self.body_size = body_size
        self.properties_raw = properties_raw
        self.delivery_mode = delivery_mode
        self._properties: commands.Basic.Properties | None = None

    @property
    def properties(self) -> commands.Basic.Properties:
        if self._properties is None:
            self._properties = decode_properties(self.properties_raw)
        return self._properties


def decode_properties(raw: bytes) -> commands.Basic.Properties:
    """pamqp's Basic.Properties from encoded property flags and values."""
    flags = struct.unpack_from(">H", raw)[0]
    properties = commands.Basic.Properties()
    properties.unmarshal(flags, raw[2:])
    return properties


def canonical_properties(raw: bytes) -> tuple[bytes, int]:
    """The properties re-encoded (so that a client never receives bytes it cannot decode) and the
    delivery mode; raises ValueError for properties that are malformed."""
    if raw == _NO_PROPERTIES:
        return raw, 0
    if len(raw) == 3 and raw[0] == 0x10 and raw[1] == 0:
        return raw, raw[2]
    if len(raw) < 2:
        raise ValueError("content header properties are truncated")
    flags = struct.unpack_from(">H", raw)[0]
    if flags & ~_KNOWN_PROPERTY_FLAGS & 0xFFFF:
        raise ValueError(f"unknown property flags {flags:#06x}")
    try:
        check_property_values(flags, raw)
        properties = decode_properties(raw)
        encoded = properties.marshal()
    except Exception as error:  # pamqp raises struct.error, ValueError, TypeError, UnicodeDecodeError
        raise ValueError(str(error)) from error
    return encoded, properties.delivery_mode or 0


def check_property_values(flags: int, raw: bytes) -> None:
    """ValueError unless the values the flags announce fill the properties exactly, each inside them.

    pamqp's decoder takes what is there: a short string that claims more bytes than remain comes back
    shorter, and bytes after the last value are ignored; either would change the message unseen."""
    position = 2
    for name, kind in _PROPERTY_TYPES:
        if not flags & commands.Basic.Properties.flags[name]:
            continue
        if kind == "shortstr":
            if position >= len(raw) or position + 1 + raw[position] > len(raw):
                raise ValueError(f"property {name} overruns the content header")
            position += 1 + raw[position]
        elif kind == "table":
            check_table(raw, position)
            position += 4 + struct.unpack_from(">I", raw, position)[0]
        else:
            position += _PROPERTY_WIDTHS[kind]
            if position > len(raw):
                raise ValueError(f"property {name} overruns the content header")
    if position != len(raw):
        raise ValueError("bytes after the last property of the content header")


def decode_method(payload: bytes) -> Any:
    """A pamqp method object from a method frame's payload; KeyError for an unknown method, ValueError
    for arguments that do not decode or do not fill the frame exactly."""
    if len(payload) < 4:
        raise ValueError("method frame too short")
    method = METHODS[struct.unpack_from(">I", payload)[0]]()
    try:
        position = _decode_arguments(method, payload, 4)
    except Exception as error:  # pamqp raises struct.error, ValueError, IndexError, UnicodeDecodeError
        raise ValueError(str(error)) from error
    if position != len(payload):
        raise ValueError("method arguments do not fill the frame")
    return method


def _decode_arguments(method: Any, payload: bytes, position: int) -> int:
    """Decode the method's arguments in declaration order, bits packed into octets; the end position."""
    bits = -1
    bit_index = 8
    for name in method.__slots__:
        kind = method.amqp_type(name)
        if kind == "bit":
            if bits < 0 or bit_index == 8:
                bits = payload[position]
                position += 1
                bit_index = 0
            setattr(method, name, bool((bits >> bit_index) & 1))
            bit_index += 1
            continue
        bits = -1
        if kind == "table":
            check_table(payload, position)
        consumed, value = pamqp_decode.by_type(payload[position:], kind)
        position += consumed
        if position > len(payload):
            raise ValueError(f"argument {name} overruns the frame")
        setattr(method, name, value)
    return position


def check_table(payload: bytes, position: int) -> None:
    """ValueError unless every entry of the field table at ``position`` lies inside the table.

    pamqp's decoder trusts an entry's own length: a string that claims more bytes than its table holds
    is read from what follows the table. RabbitMQ refuses such a frame; so do we."""
    if position + 4 > len(payload):
        raise ValueError("field table length overruns the frame")
    end = position + 4 + struct.unpack_from(">I", payload, position)[0]
    if end > len(payload):
        raise ValueError("field table length overruns the frame")
    table = payload[:end]
    offset = position + 4
    while offset < end:
        offset += 1 + table[offset]
        if offset > end:
            raise ValueError("field table key overruns the table")
        if table[offset:offset + 1] == b"F":
            check_table(table, offset + 1)
        consumed, _ = pamqp_decode.embedded_value(table[offset:])
        offset += consumed
    if offset != end:
        raise ValueError("field table entries overrun the table")


def decode_content_header(payload: bytes) -> ContentHeader:
    """A ContentHeader from a header frame's payload; ValueError when it is malformed."""
    if len(payload) < 14:
        raise ValueError("content header too short")
    class_id, _weight, body_size = struct.unpack_from(">HHQ", payload)
    properties_raw, delivery_mode = canonical_properties(bytes(payload[12:]))
    return ContentHeader(class_id, body_size, properties_raw, delivery_mode)


def encode_method(channel: int, method: Any) -> bytes:
    return pamqp_frame.marshal(method, channel)


def encode_channel_open_ok(channel: int) -> bytes:
    """channel.open-ok with its reserved longstr empty, as RabbitMQ sends it (pamqp only encodes "0")."""
    payload = struct.pack(">II", commands.Channel.OpenOk.index, 0)     # class 20, method 11; length 0
    return _frame_head.pack(FRAME_METHOD, channel, len(payload)) + payload + FRAME_END_BYTE


def encode_heartbeat() -> bytes:
    return _HEARTBEAT


def _short_string(value: str) -> bytes:
    data = value.encode("utf-8")
    return bytes((len(data),)) + data


def encode_content(channel: int, properties_raw: bytes, body: bytes, frame_max: int) -> bytes:
    """The content header frame and as many body frames as frame_max requires."""
    header_size = 12 + len(properties_raw)
    parts = [
        _content_head.pack(FRAME_HEADER, channel, header_size, BASIC_CLASS, 0, len(body)),
        properties_raw,
        FRAME_END_BYTE,
    ]
    chunk = frame_max - FRAME_OVERHEAD
    size = len(body)
    if size <= chunk:
        if size:
            parts += (_frame_head.pack(FRAME_BODY, channel, size), body, FRAME_END_BYTE)
    else:
        view = memoryview(body)
        for start in range(0, size, chunk):
            piece = view[start : start + chunk]
            parts += (_frame_head.pack(FRAME_BODY, channel, len(piece)), bytes(piece), FRAME_END_BYTE)
    return b"".join(parts)


def encode_deliver(
    channel: int, consumer_tag: str, delivery_tag: int, redelivered: bool, exchange: str, routing_key: str
) -> bytes:
    """A basic.deliver method frame."""
    args = b"".join(
        (
            _short_string(consumer_tag),
            _u64.pack(delivery_tag),
            b"\x01" if redelivered else b"\x00",
            _short_string(exchange),
            _short_string(routing_key),
        )
    )
    return _method_head.pack(FRAME_METHOD, channel, len(args) + 4, 60, 60) + args + FRAME_END_BYTE


def encode_get_ok(
    channel: int, delivery_tag: int, redelivered: bool, exchange: str, routing_key: str, message_count: int
) -> bytes:
    """A basic.get-ok method frame."""
    args = b"".join(
        (
            _u64.pack(delivery_tag),
            b"\x01" if redelivered else b"\x00",
            _short_string(exchange),
            _short_string(routing_key),
            struct.pack(">I", message_count),
        )
    )
    return _method_head.pack(FRAME_METHOD, channel, len(args) + 4, 60, 71) + args + FRAME_END_BYTE


def encode_confirm(channel: int, delivery_tag: int, multiple: bool, positive: bool = True) -> bytes:
    """A publisher confirm: basic.ack, or basic.nack (requeue=false) when the broker refuses a message."""
    if positive:
        return _ack.pack(FRAME_METHOD, channel, 13, 60, 80, delivery_tag, 1 if multiple else 0) + FRAME_END_BYTE
    return _ack.pack(FRAME_METHOD, channel, 13, 60, 120, delivery_tag, 1 if multiple else 0) + FRAME_END_BYTE


def frame_head(buffer: bytes | bytearray, offset: int) -> tuple[int, int, int]:
    """Frame type, channel and payload size of the frame starting at offset."""
    return _frame_head.unpack_from(buffer, offset)  # type: ignore[return-value]
