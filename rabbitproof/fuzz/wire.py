"""A lean AMQP 0-9-1 client for the fuzzer: one blocking socket, the handshake pipelined, bad bytes out, and
the broker's answer to them judged from the few methods that matter (pamqp decodes every one of them).

After a case's bytes (completed with zero filler when they end inside a frame) the client sends a probe,
basic.qos on channel 1, and reads until it can classify what the broker did:

- ``served``: the probe's qos-ok came back (the input was accepted);
- ``channel``: a channel.close with its code (answered with close-ok; channel 1 is opened again);
- ``connection``: a connection.close with its code (answered with close-ok, then the socket closes);
- ``client-close``: a connection.close-ok or a channel.close-ok (the input became the client's own
  connection.close or channel.close);
- ``dropped``: the TCP stream ended without a connection.close;
- ``silent``: nothing decisive within the time limit;
- ``undecodable``: the broker sent bytes that are not AMQP frames.
Deliveries, returns, confirms and replies to valid methods are read and passed over."""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from pamqp import commands, frame, header

from rabbitproof.fuzz.cases import Case, Outcome, bytes_to_complete

FRAME_HEAD = struct.Struct(">BHI")
INDEX = struct.Struct(">I")
PROBE = frame.marshal(commands.Basic.Qos(prefetch_count=3), 1)
QOS_OK = commands.Basic.QosOk.index
CHANNEL_CLOSE = commands.Channel.Close.index
CHANNEL_CLOSE_OK = commands.Channel.CloseOk.index
CHANNEL_OPEN_OK = commands.Channel.OpenOk.index
CONNECTION_CLOSE = commands.Connection.Close.index
CONNECTION_CLOSE_OK = commands.Connection.CloseOk.index
WATCHED = {QOS_OK, CHANNEL_CLOSE, CHANNEL_CLOSE_OK, CHANNEL_OPEN_OK, CONNECTION_CLOSE, CONNECTION_CLOSE_OK,
           commands.Connection.Start.index, commands.Connection.Tune.index, commands.Connection.OpenOk.index,
           commands.Queue.DeclareOk.index}


def lenient_close(raw: bytes) -> Any:
    """A connection.close or channel.close whose reply text is not UTF-8 (RabbitMQ quotes the bytes of a
    frame it refused): AMQP 0-9-1 short strings are octets, so the close is taken, its text decoded with
    replacements. None for anything else."""
    index = INDEX.unpack_from(raw, 7)[0]
    if index not in (CONNECTION_CLOSE, CHANNEL_CLOSE) or len(raw) < 14:
        return None
    code, length = struct.unpack_from(">HB", raw, 11)
    text = raw[14: 14 + length].decode("utf-8", "replace")
    kind = commands.Connection.Close if index == CONNECTION_CLOSE else commands.Channel.Close
    return kind(reply_code=code, reply_text=text)


class Unanswered(Exception):
    """The handshake or a set-up step got no answer, or not the expected one."""


class Undecodable(Exception):
    """The broker sent bytes that are not AMQP 0-9-1 frames."""


class FuzzConnection:
    """One connection, handshake done, channel 1 open and an exclusive queue declared on it."""

    def __init__(self, host: str, port: int, user: str, password: str, queue: str, timeout: float) -> None:
        self.timeout = timeout
        self.buffer = bytearray()
        self.frame_max = 131072
        self.open = False
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            self.handshake(user, password, queue)
        except BaseException:
            self.sock.close()
            raise

    def handshake(self, user: str, password: str, queue: str) -> None:
        self.sock.sendall(header.ProtocolHeader().marshal())
        self.expect(0, commands.Connection.Start)
        self.sock.sendall(frame.marshal(commands.Connection.StartOk(
            client_properties={"product": "rabbitproof fuzzer"}, mechanism="PLAIN",
            response=f"\0{user}\0{password}", locale="en_US"), 0))
        tune = self.expect(0, commands.Connection.Tune)
        self.frame_max = min(int(tune.frame_max) or 131072, 131072)
        self.sock.sendall(b"".join((
            frame.marshal(commands.Connection.TuneOk(channel_max=2047, frame_max=self.frame_max, heartbeat=0), 0),
            frame.marshal(commands.Connection.Open(virtual_host="/"), 0),
            frame.marshal(commands.Channel.Open(), 1),
            frame.marshal(commands.Queue.Declare(queue=queue, exclusive=True), 1))))
        self.expect(0, commands.Connection.OpenOk)
        self.expect(1, commands.Channel.OpenOk)
        self.expect(1, commands.Queue.DeclareOk)
        self.open = True

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    # -- reading ---------------------------------------------------------------------------------------

    def next_watched(self, deadline: float) -> tuple[int, Any] | None:
        """The next watched method (channel, pamqp method), None at the end of the stream; TimeoutError
        at the deadline; Undecodable for bytes that are not frames."""
        while True:
            buffer = self.buffer
            while len(buffer) >= 7:
                frame_type, channel_number, size = FRAME_HEAD.unpack_from(buffer, 0)
                if frame_type not in (1, 2, 3, 8) or size > self.frame_max:
                    raise Undecodable(f"frame type {frame_type}, size {size}")
                if len(buffer) < size + 8:
                    break
                if buffer[size + 7] != 0xCE:
                    raise Undecodable(f"frame end {buffer[size + 7]}")
                raw = bytes(buffer[: size + 8])
                del buffer[: size + 8]
                if frame_type != 1 or size < 4 or INDEX.unpack_from(raw, 7)[0] not in WATCHED:
                    continue
                try:
                    _, number, method = frame.unmarshal(raw)
                except Exception as error:  # pamqp raises several kinds on bytes it cannot decode
                    method = lenient_close(raw)
                    if method is None:
                        raise Undecodable(f"{type(error).__name__}: {error}") from None
                    number = channel_number
                return number, method
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                raise TimeoutError from None
            except OSError:
                return None
            if not data:
                return None
            buffer += data

    def expect(self, channel_number: int, kind: type) -> Any:
        """The next watched method, which must be `kind` on `channel_number`."""
        got = self.next_watched(time.monotonic() + self.timeout)
        if got is None or got[0] != channel_number or not isinstance(got[1], kind):
            raise Unanswered(f"expected {kind.__name__} on channel {channel_number}, got {got!r}")
        return got[1]

    # -- one case --------------------------------------------------------------------------------------

    def run_case(self, case: Case, settle: float = 0.0) -> tuple[Outcome, str]:
        """Send the case (completed with filler), then the probe; the outcome and the reply text."""
        filler = bytes(bytes_to_complete(case.data, self.frame_max))
        try:
            self.sock.sendall(case.data + filler + PROBE)
        except OSError:
            pass  # the broker closed already; what it sent before is still readable
        probes = 1
        while True:
            try:
                got = self.next_watched(time.monotonic() + self.timeout)
            except TimeoutError:
                return ("silent", 0), f"no answer within {self.timeout:.0f} s"
            except Undecodable as error:
                self.open = False
                return ("undecodable", 0), str(error)
            if got is None:
                self.open = False
                return ("dropped", 0), "the TCP stream ended without connection.close"
            number, method = got
            if isinstance(method, commands.Basic.QosOk) and number == 1:
                probes -= 1
                if probes == 0 and settle:
                    # A broker that runs channels apart may report an error on another channel a moment
                    # after the probe's answer: ask once more after a pause.
                    time.sleep(settle)
                    settle = 0.0
                    probes = 1
                    self.send(PROBE)
                    continue
                if probes == 0:
                    return ("served", 0), ""
                continue
            if isinstance(method, commands.Connection.Close):
                self.open = False
                self.send(frame.marshal(commands.Connection.CloseOk(), 0))
                return ("connection", int(method.reply_code or 0)), str(method.reply_text)
            if isinstance(method, commands.Connection.CloseOk):
                self.open = False
                return ("client-close", 0), "connection.close-ok"
            if isinstance(method, commands.Channel.CloseOk):
                # The input became the client's own channel.close: a broker may drop the probe that came
                # right behind it on the closing channel (RabbitMQ 3.10.8 does, and so do we).
                self.open = False
                return ("client-close", 0), "channel.close-ok"
            if isinstance(method, commands.Channel.Close):
                self.send(frame.marshal(commands.Channel.CloseOk(), number))
                if number == 1:
                    self.send(frame.marshal(commands.Channel.Open(), 1))
                    try:
                        self.expect(1, commands.Channel.OpenOk)
                    except (Unanswered, TimeoutError, Undecodable) as error:
                        self.open = False
                        return ("channel", int(method.reply_code or 0)), f"{method.reply_text}; then {error}"
                return ("channel", int(method.reply_code or 0)), str(method.reply_text)

    def closed_after_close_ok(self, wait: float) -> bool:
        """After our connection.close-ok: does the broker close the socket within `wait` seconds?"""
        deadline = time.monotonic() + wait
        try:
            while self.next_watched(deadline) is not None:
                pass
        except TimeoutError:
            return False
        except Undecodable:
            return True  # bytes after a refusal the broker wrote before it read our close-ok
        return True

    def send(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except OSError:
            pass
