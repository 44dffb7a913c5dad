"""A raw AMQP 0-9-1 test client on pamqp: sends exact frames and records every frame received, in order.

Client libraries hide or reorder frames, so tests that pin the order of frames or the exact reply
texts use this client. It is deliberately independent of impl/'s own codec.
"""

from __future__ import annotations

import socket
import time
from typing import Any

from pamqp import body, commands, frame, header, heartbeat
from pamqp.exceptions import UnmarshalingException

Received = tuple[int, Any]


class ConnectionClosedByPeer(Exception):
    """The broker closed the TCP connection."""


class RawClient:
    """One TCP connection: send frames, receive frames one at a time."""

    def __init__(self, host: str, port: int, timeout: float = 5.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self.buffer = b""
        self.received: list[Received] = []
        self.closed = False
        self.frame_max = 131072

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, channel: int, value: Any) -> None:
        self.sock.sendall(frame.marshal(value, channel))

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv(self, timeout: float | None = None) -> Received | None:
        """The next frame, or None on timeout; ConnectionClosedByPeer when the socket closes."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            if self.buffer:
                try:
                    used, channel, value = frame.unmarshal(self.buffer)
                except UnmarshalingException:
                    used = 0
                if used:
                    self.buffer = self.buffer[used:]
                    self.received.append((channel, value))
                    return channel, value
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            self.sock.settimeout(remaining)
            try:
                data = self.sock.recv(1 << 16)
            except socket.timeout:
                return None
            except OSError as error:
                self.closed = True
                raise ConnectionClosedByPeer(str(error)) from error
            if not data:
                self.closed = True
                raise ConnectionClosedByPeer("eof")
            self.buffer += data

    def recv_skip_heartbeats(self, timeout: float | None = None) -> Received | None:
        while True:
            got = self.recv(timeout)
            if got is None or not isinstance(got[1], heartbeat.Heartbeat):
                return got

    def expect(self, kind: type, timeout: float | None = None) -> Any:
        got = self.recv_skip_heartbeats(timeout)
        if got is None:
            raise AssertionError(f"expected {kind.__name__}, got nothing")
        if not isinstance(got[1], kind):
            raise AssertionError(f"expected {kind.__name__}, got {describe(got[1])}")
        return got[1]

    def drain(self, timeout: float = 0.3) -> list[Received]:
        """Every frame that arrives within `timeout` seconds of the previous one."""
        out = []
        while True:
            try:
                got = self.recv_skip_heartbeats(timeout)
            except ConnectionClosedByPeer:
                out.append((-1, "EOF"))
                return out
            if got is None:
                return out
            out.append(got)

    def handshake(
        self,
        user: str = "guest",
        password: str = "guest",
        vhost: str = "/",
        frame_max: int | None = None,
        channel_max: int | None = None,
        heartbeat_s: int = 0,
        capabilities: dict | None = None,
    ) -> commands.Connection.Tune:
        self.send_raw(header.ProtocolHeader().marshal())
        self.expect(commands.Connection.Start)
        self.send(
            0,
            commands.Connection.StartOk(
                client_properties={"product": "rawclient", "capabilities": capabilities or {}},
                mechanism="PLAIN",
                response=f"\0{user}\0{password}",
                locale="en_US",
            ),
        )
        tune = self.expect(commands.Connection.Tune)
        fm = tune.frame_max if frame_max is None else frame_max
        cm = tune.channel_max if channel_max is None else channel_max
        self.frame_max = fm or 131072
        self.send(0, commands.Connection.TuneOk(channel_max=cm, frame_max=fm, heartbeat=heartbeat_s))
        self.send(0, commands.Connection.Open(virtual_host=vhost))
        return tune

    def connect(self, **kwargs: Any) -> "RawClient":
        self.handshake(**kwargs)
        self.expect(commands.Connection.OpenOk)
        return self

    def open_channel(self, channel: int = 1) -> None:
        self.send(channel, commands.Channel.Open())
        self.expect(commands.Channel.OpenOk)

    def publish(
        self,
        channel: int,
        exchange: str,
        routing_key: str,
        payload: bytes,
        properties: commands.Basic.Properties | None = None,
        mandatory: bool = False,
    ) -> None:
        frames = [
            frame.marshal(
                commands.Basic.Publish(exchange=exchange, routing_key=routing_key, mandatory=mandatory), channel
            ),
            frame.marshal(header.ContentHeader(0, len(payload), properties or commands.Basic.Properties()), channel),
        ]
        chunk = self.frame_max - 8
        for start in range(0, len(payload), chunk):
            frames.append(frame.marshal(body.ContentBody(payload[start : start + chunk]), channel))
        self.send_raw(b"".join(frames))

    def read_message(self) -> tuple[Any, header.ContentHeader, bytes]:
        """A basic.deliver, basic.get-ok or basic.return with its header and body."""
        method = self.recv_skip_heartbeats()
        assert method is not None, "expected a message, got nothing"
        content = self.expect(header.ContentHeader)
        payload = b""
        while len(payload) < content.body_size:
            payload += self.expect(body.ContentBody).value
        return method[1], content, payload


def describe(value: Any) -> str:
    if isinstance(value, (commands.Connection.Close, commands.Channel.Close)):
        return f"{value.name}({value.reply_code}, {value.reply_text!r}, {value.class_id}, {value.method_id})"
    return getattr(value, "name", repr(value))
