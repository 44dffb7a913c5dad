"""Field tables in method frames are decoded strictly (ER-3): an entry that claims more bytes than
its table holds is refused, as RabbitMQ 3.10.8 refuses it, instead of being read from what follows."""
import struct

import pytest
from pamqp import commands, frame

from rabbitproof.impl.core.frames import check_table, decode_method


def declare_payload(arguments: dict) -> bytes:
    """The method payload of a queue.declare carrying ``arguments``."""
    raw = frame.marshal(commands.Queue.Declare(queue="q", arguments=arguments), 1)
    return raw[7:-1]


def test_a_well_formed_table_passes_and_decodes_ER_3():
    payload = declare_payload({"x-max-length": 10, "x-name": "abc", "x-nested": {"k": "v"}})
    method = decode_method(payload)
    assert method.arguments == {"x-max-length": 10, "x-name": "abc", "x-nested": {"k": "v"}}


def test_a_string_running_past_its_table_is_refused_ER_3():
    entry = b"\x01kS" + struct.pack(">I", 7) + b"abc"     # claims 7 bytes, the table holds 3
    table = struct.pack(">I", len(entry)) + entry
    with pytest.raises(ValueError, match="overrun"):
        check_table(table + b"defg", 0)                    # pamqp alone would read "abcdefg"
    good = struct.pack(">I", 10) + b"\x01kS" + struct.pack(">I", 3) + b"abc"
    check_table(good, 0)


def test_a_declare_with_an_overrunning_table_does_not_decode_ER_3():
    payload = bytearray(declare_payload({"k": "abc"}))
    at = payload.index(b"kS") + 2
    struct.pack_into(">I", payload, at, 5)                 # "abc" now claims 5 bytes, ending past the table
    with pytest.raises(ValueError):
        decode_method(bytes(payload))


def test_a_table_longer_than_the_frame_is_refused_ER_3():
    with pytest.raises(ValueError, match="overruns the frame"):
        check_table(b"\x00\x00\x00\x09ab", 0)
