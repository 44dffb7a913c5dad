"""A raw AMQP 0-9-1 client on pamqp: sends exact frames and records every frame, in order.

Client libraries reorder or hide frames (pika hands out basic.return lazily, aio-pika answers
channel.close by itself), so they cannot be the observer of a broker. This client is: every frame it
writes and every frame it reads is appended to its connection's `trace` at the moment it is written
or parsed, so the trace is exactly the client's view of the conversation, in order, which is what the
spec's trace checker judges. It is synchronous (one blocking socket per connection, used by one thread)
and never loses frames that arrive in one read: each read is split into every complete frame it holds.

Two levels of reading:
- the trace (`RawConnection.trace`), one `TraceEvent` per frame sent or received, heartbeats included;
- the inbox of `Command`s: a method frame, with its content header and body frames joined to it for
  content-bearing methods (basic.deliver, basic.get-ok, basic.return). `expect()` takes the first
  command that matches and leaves the others in the inbox, in order, for later.
"""

from __future__ import annotations

import select
import socket
import struct
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Literal, Union

from pamqp import body as amqp_body
from pamqp import commands, constants, exceptions, frame, header, heartbeat
from pamqp.base import Frame as MethodFrame

AnyFrame = Union[MethodFrame, header.ContentHeader, amqp_body.ContentBody, header.ProtocolHeader,
                 heartbeat.Heartbeat]
CONTENT_METHODS = (commands.Basic.Deliver, commands.Basic.GetOk, commands.Basic.Return)
FRAME_HEADER = struct.Struct(">BHI")
PROTOCOL_HEADER = header.ProtocolHeader().marshal()


@dataclass(frozen=True)
class TraceEvent:
    """One thing the client saw happen on its connection, in the order it happened.

    kind is "frame" (a decoded frame), "raw" (bytes sent or received that are not a decodable
    frame; sent on purpose by bad-input tests, or received from a broker that breaks framing) or
    "eof" (the broker closed the TCP connection). `at` is time.monotonic().
    """

    direction: Literal["sent", "received"]
    kind: Literal["frame", "raw", "eof"]
    channel: int
    frame: AnyFrame | None
    raw: bytes | None
    at: float

    @property
    def name(self) -> str:
        """The frame's AMQP name (`Basic.Ack`, `ContentHeader`, ...), or the event kind."""
        if self.frame is not None:
            return str(getattr(self.frame, "name", type(self.frame).__name__))
        return self.kind

    def __str__(self) -> str:
        arrow = ">>" if self.direction == "sent" else "<<"
        detail = self.frame if self.frame is not None else (self.raw or b"")[:64]
        return f"{arrow} ch{self.channel} {self.name} {detail!r}"


@dataclass
class Command:
    """A method received on a channel, with its content when the method carries content."""

    channel: int
    method: MethodFrame
    properties: commands.Basic.Properties | None = None
    body: bytes | None = None

    @property
    def name(self) -> str:
        return self.method.name


@dataclass
class LoggedCommand:
    """One entry of `RawConnection.command_log()`: a method with its content, or a raw write or
    the end of the stream (kind "raw" / "eof"), or the protocol header."""

    direction: Literal["sent", "received"]
    kind: Literal["method", "raw", "eof", "protocol-header"]
    channel: int
    method: MethodFrame | None
    properties: commands.Basic.Properties | None
    body: bytes | None
    at: float

    @property
    def name(self) -> str:
        return self.method.name if self.method is not None else self.kind


@dataclass
class _Assembly:
    """Content frames still expected for a content-bearing method on one channel."""

    command: Command
    body_size: int | None = None
    chunks: list[bytes] = field(default_factory=list)
    received: int = 0


class ProtocolViolation(Exception):
    """The broker sent something this client cannot decode, or frames in an impossible order."""


class ConnectionLost(Exception):
    """The broker closed the TCP connection (without, or after, a connection.close)."""


class ServerClosed(Exception):
    """A channel.close or connection.close arrived while the caller waited for something else."""

    def __init__(self, command: Command) -> None:
        method = command.method
        self.command = command
        self.channel = command.channel
        self.reply_code = int(method.reply_code)
        self.reply_text = str(method.reply_text)
        self.class_id = int(method.class_id or 0)
        self.method_id = int(method.method_id or 0)
        super().__init__(f"{method.name} on channel {self.channel}: {self.reply_code} {self.reply_text} "
                         f"(class {self.class_id}, method {self.method_id})")


class ChannelClosed(ServerClosed):
    """The broker sent channel.close (a channel error)."""


class ConnectionClosed(ServerClosed):
    """The broker sent connection.close (a connection error)."""


class RawConnection:
    """One AMQP 0-9-1 connection over a blocking socket, with its trace and its inbox of commands."""

    def __init__(self, host: str, port: int, *, label: str = "", timeout: float = 10.0,
                 sock: socket.socket | None = None) -> None:
        self.host, self.port = host, port
        self.label = label or f"{host}:{port}"
        self.timeout = timeout
        self.trace: list[TraceEvent] = []
        self.inbox: deque[Command] = deque()
        self.eof = False
        self.frame_max = constants.FRAME_MAX_SIZE
        self.channel_max = 0
        self.heartbeat = 0
        self.server_properties: dict[str, object] = {}
        self._assembling: dict[int, _Assembly] = {}
        self._buffer = bytearray()
        self._violations: list[str] = []
        if sock is None:        # given: a stand-in for the socket (a subclass that overrides pump)
            sock = socket.create_connection((host, port), timeout=timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock

    # -- opening and closing ---------------------------------------------------------------------

    @classmethod
    def connect(
        cls,
        host: str,
        port: int,
        user: str = "guest",
        password: str = "guest",
        *,
        vhost: str = "/",
        label: str = "",
        timeout: float = 10.0,
        heartbeat: int = 0,
        frame_max: int = constants.FRAME_MAX_SIZE,
        channel_max: int = 2047,
    ) -> "RawConnection":
        """Open a TCP connection and do the whole handshake (PLAIN authentication) up to open-ok."""
        conn = cls(host, port, label=label, timeout=timeout)
        try:
            conn.handshake(user, password, vhost=vhost, heartbeat=heartbeat, frame_max=frame_max,
                           channel_max=channel_max)
        except BaseException:
            conn.abort()
            raise
        return conn

    def handshake(
        self,
        user: str,
        password: str,
        *,
        vhost: str = "/",
        heartbeat: int = 0,
        frame_max: int = constants.FRAME_MAX_SIZE,
        channel_max: int = 2047,
    ) -> None:
        """protocol header, start/start-ok, tune/tune-ok, open/open-ok; the limits are negotiated."""
        self.send_raw(PROTOCOL_HEADER, record_as=header.ProtocolHeader())
        start = self.expect(0, commands.Connection.Start).method
        self.server_properties = dict(start.server_properties or {})
        self.send(0, commands.Connection.StartOk(
            client_properties={"product": "rabbitproof raw client",
                               "capabilities": {"basic.nack": True, "publisher_confirms": True,
                                                "consumer_cancel_notify": True}},
            mechanism="PLAIN", response=f"\0{user}\0{password}", locale="en_US"))
        tune = self.expect(0, commands.Connection.Tune).method
        self.channel_max = _negotiate(int(tune.channel_max), channel_max)
        self.frame_max = _negotiate(int(tune.frame_max), frame_max)
        self.heartbeat = _negotiate(int(tune.heartbeat), heartbeat) if heartbeat else 0
        self.send(0, commands.Connection.TuneOk(channel_max=self.channel_max, frame_max=self.frame_max,
                                                heartbeat=self.heartbeat))
        self.rpc(0, commands.Connection.Open(virtual_host=vhost))

    def close(self, timeout: float | None = None) -> None:
        """Close the connection politely (connection.close, wait for close-ok), then the socket."""
        try:
            if not self.eof:
                self.send(0, commands.Connection.Close(reply_code=200, reply_text="Normal shutdown",
                                                       class_id=0, method_id=0))
                self.expect(0, commands.Connection.CloseOk, timeout=timeout)
        except (ConnectionLost, ServerClosed, OSError, TimeoutError):
            pass
        finally:
            self.abort()

    def abort(self) -> None:
        """Drop the TCP connection without a word (what a crashed client does)."""
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> "RawConnection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(timeout=2.0)

    # -- sending -----------------------------------------------------------------------------------

    def send(self, channel: int, *frames: AnyFrame) -> None:
        """Marshal the frames with pamqp and write them in one go, recording each in the trace."""
        self.send_frames([(channel, f) for f in frames])

    def send_frames(self, frames: list[tuple[int, AnyFrame]]) -> None:
        """Write frames on any channels in one write, in the given order, recording each."""
        data = b"".join(frame.marshal(f, ch) for ch, f in frames)
        now = time.monotonic()
        self.trace.extend(TraceEvent("sent", "frame", ch, f, None, now) for ch, f in frames)
        self.sock.sendall(data)

    def send_raw(self, data: bytes, *, channel: int = 0, record_as: AnyFrame | None = None) -> None:
        """Write bytes exactly as given (bad input, or the protocol header), recording them."""
        if record_as is not None:
            self.trace.append(TraceEvent("sent", "frame", channel, record_as, None, time.monotonic()))
        else:
            self.trace.append(TraceEvent("sent", "raw", channel, None, bytes(data), time.monotonic()))
        self.sock.sendall(data)

    def content_frames(
        self,
        channel: int,
        method: MethodFrame,
        body: bytes,
        properties: commands.Basic.Properties | None = None,
    ) -> list[tuple[int, AnyFrame]]:
        """A content-bearing method with its header and body frames, the body split at frame_max."""
        frames: list[tuple[int, AnyFrame]] = [
            (channel, method),
            (channel, header.ContentHeader(body_size=len(body), properties=properties)),
        ]
        chunk = self.frame_max - 8 if self.frame_max else len(body) or 1
        frames += [(channel, amqp_body.ContentBody(body[i:i + chunk])) for i in range(0, len(body), chunk)]
        return frames

    def publish(
        self,
        channel: int,
        body: bytes,
        *,
        exchange: str = "",
        routing_key: str = "",
        properties: commands.Basic.Properties | None = None,
        mandatory: bool = False,
    ) -> None:
        """basic.publish with its content header and body frames, in one write."""
        method = commands.Basic.Publish(exchange=exchange, routing_key=routing_key, mandatory=mandatory)
        self.send_frames(self.content_frames(channel, method, body, properties))

    # -- receiving ---------------------------------------------------------------------------------

    def pump(self, timeout: float | None = None) -> int:
        """Read once from the socket (waiting up to `timeout`; None means the connection's timeout)
        and parse every complete frame the read completes. Return the number of bytes read; 0 when
        nothing arrived in time. Raise ConnectionLost at end of stream."""
        if self.eof:
            raise ConnectionLost(f"{self.label}: connection already closed by the broker")
        wait = self.timeout if timeout is None else max(0.0, timeout)
        try:
            readable, _, _ = select.select([self.sock], [], [], wait)
            if not readable:
                return 0
            data = self.sock.recv(1 << 18)
        except (TimeoutError, socket.timeout, BlockingIOError):
            return 0
        except OSError as error:
            self._end_of_stream()
            raise ConnectionLost(f"{self.label}: {error}") from error
        if not data:
            self._end_of_stream()
            raise ConnectionLost(f"{self.label}: the broker closed the TCP connection")
        self._buffer += data
        self._parse()
        return len(data)

    def recv(self, timeout: float | None = None) -> Command:
        """The next command from the inbox, reading until one is complete."""
        return self.expect(None, timeout=timeout)

    def expect(
        self,
        channel: int | None,
        *method_types: type[MethodFrame],
        timeout: float | None = None,
        where: Callable[[Command], bool] | None = None,
    ) -> Command:
        """Take the first command on `channel` (any channel if None) of one of `method_types` (any
        if none given) that satisfies `where`; the commands before it stay in the inbox.

        A channel.close on that channel, or a connection.close, that is not what the caller asked
        for is taken from the inbox and raised as ChannelClosed / ConnectionClosed: the caller's
        wait is over. TimeoutError after `timeout` seconds (default: the connection's timeout).
        """
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            self._raise_violation()
            for command in list(self.inbox):
                if (channel is None or command.channel == channel) and \
                        (not method_types or isinstance(command.method, method_types)) and \
                        (where is None or where(command)):
                    self.inbox.remove(command)
                    return command
                if isinstance(command.method, commands.Connection.Close):
                    self.inbox.remove(command)
                    raise ConnectionClosed(command)
                if isinstance(command.method, commands.Channel.Close) and command.channel == channel:
                    self.inbox.remove(command)
                    raise ChannelClosed(command)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                wanted = "/".join(t.name for t in method_types) or "any command"
                raise TimeoutError(f"{self.label}: no {wanted} on channel {channel} within "
                                   f"{self.timeout if timeout is None else timeout} s; "
                                   f"inbox: {[c.name for c in self.inbox]}")
            self.pump(remaining)

    def take_all(self, channel: int | None = None) -> list[Command]:
        """Remove and return every command already in the inbox (of one channel if given)."""
        taken = [c for c in self.inbox if channel is None or c.channel == channel]
        for command in taken:
            self.inbox.remove(command)
        return taken

    def command_log(self) -> list[LoggedCommand]:
        """The trace with content folded into its method, in the order of the method frames.

        This is the trace at the spec's level of detail (spec/frames.py folds header and body into
        basic.publish, basic.deliver, basic.get-ok and basic.return): one entry per method sent or
        received, per raw write and per end of stream. Heartbeats are left out.
        """
        log: list[LoggedCommand] = []
        open_content: dict[tuple[str, int], LoggedCommand] = {}
        for event in self.trace:
            if event.kind != "frame":
                log.append(LoggedCommand(event.direction, event.kind, event.channel, None, None, event.raw,
                                         event.at))
                continue
            value = event.frame
            key = (event.direction, event.channel)
            if isinstance(value, MethodFrame):
                entry = LoggedCommand(event.direction, "method", event.channel, value, None, None, event.at)
                log.append(entry)
                if isinstance(value, (commands.Basic.Publish, *CONTENT_METHODS)):
                    open_content[key] = entry
                    entry.body = b""
            elif isinstance(value, header.ContentHeader) and key in open_content:
                open_content[key].properties = value.properties
            elif isinstance(value, amqp_body.ContentBody) and key in open_content:
                entry = open_content[key]
                entry.body = (entry.body or b"") + bytes(value.value)
            elif isinstance(value, header.ProtocolHeader):
                log.append(LoggedCommand(event.direction, "protocol-header", 0, None, None, None, event.at))
        return log

    def received_frames(self) -> list[TraceEvent]:
        """The received part of the trace."""
        return [e for e in self.trace if e.direction == "received"]

    # -- synchronous methods -------------------------------------------------------------------------

    def rpc(self, channel: int, method: MethodFrame, timeout: float | None = None) -> Command:
        """Send a synchronous method and wait for its reply on the same channel (per pamqp's
        valid_responses); a channel.close or connection.close instead is raised."""
        self.send(channel, method)
        replies = tuple(_method_class(name) for name in method.valid_responses)
        return self.expect(channel, *replies, timeout=timeout)

    def channel_open(self, channel: int) -> None:
        self.rpc(channel, commands.Channel.Open())

    def channel_close(self, channel: int) -> None:
        self.rpc(channel, commands.Channel.Close(reply_code=200, reply_text="Normal shutdown",
                                                 class_id=0, method_id=0))

    def close_ok(self, closed: ServerClosed) -> None:
        """Answer the broker's channel.close or connection.close with its close-ok."""
        if isinstance(closed, ConnectionClosed):
            self.send(0, commands.Connection.CloseOk())
        else:
            self.send(closed.channel, commands.Channel.CloseOk())

    def confirm_select(self, channel: int) -> None:
        self.rpc(channel, commands.Confirm.Select())

    def queue_declare(self, channel: int, queue: str, *, durable: bool = False, passive: bool = False,
                      exclusive: bool = False, auto_delete: bool = False,
                      arguments: dict[str, object] | None = None) -> commands.Queue.DeclareOk:
        return self.rpc(channel, commands.Queue.Declare(
            queue=queue, durable=durable, passive=passive, exclusive=exclusive,
            auto_delete=auto_delete, arguments=arguments)).method

    def queue_delete(self, channel: int, queue: str) -> int:
        return int(self.rpc(channel, commands.Queue.Delete(queue=queue)).method.message_count)

    def queue_purge(self, channel: int, queue: str) -> int:
        return int(self.rpc(channel, commands.Queue.Purge(queue=queue)).method.message_count)

    def basic_qos(self, channel: int, prefetch_count: int, *, global_: bool = False) -> None:
        self.rpc(channel, commands.Basic.Qos(prefetch_count=prefetch_count, global_=global_))

    def basic_consume(self, channel: int, queue: str, *, consumer_tag: str = "", no_ack: bool = False,
                      exclusive: bool = False) -> str:
        reply = self.rpc(channel, commands.Basic.Consume(queue=queue, consumer_tag=consumer_tag,
                                                         no_ack=no_ack, exclusive=exclusive))
        return str(reply.method.consumer_tag)

    def basic_get(self, channel: int, queue: str, *, no_ack: bool = False) -> Command:
        """basic.get: a get-ok Command with its content, or the get-empty Command."""
        return self.rpc(channel, commands.Basic.Get(queue=queue, no_ack=no_ack))

    def basic_ack(self, channel: int, delivery_tag: int, *, multiple: bool = False) -> None:
        self.send(channel, commands.Basic.Ack(delivery_tag=delivery_tag, multiple=multiple))

    def confirms(self, channel: int, seqs: range | list[int], timeout: float | None = None) -> dict[int, str]:
        """Read publisher confirms on `channel` until every sequence number in `seqs` is settled: a map
        seq -> "ack" or "nack" (PC-3: multiple=true settles every still-unsettled seq up to its tag).
        A seq confirmed twice, or a confirm for a seq never published, is a ProtocolViolation (PC-2)."""
        wanted = set(seqs)
        outcome: dict[int, str] = {}
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while not wanted <= outcome.keys():
            command = self.expect(channel, commands.Basic.Ack, commands.Basic.Nack,
                                  timeout=max(0.0, deadline - time.monotonic()))
            kind = "ack" if isinstance(command.method, commands.Basic.Ack) else "nack"
            tag, multiple = int(command.method.delivery_tag), bool(command.method.multiple)
            covered = [s for s in wanted if s <= tag and s not in outcome] if multiple else [tag]
            if not multiple and (tag in outcome or tag not in wanted):
                raise ProtocolViolation(f"{self.label}: {kind} for seq {tag}, already {outcome.get(tag)}")
            for seq in covered:
                outcome[seq] = kind
        return outcome

    # -- internals -----------------------------------------------------------------------------------

    def _end_of_stream(self) -> None:
        self.eof = True
        self.trace.append(TraceEvent("received", "eof", 0, None, None, time.monotonic()))

    def _parse(self) -> None:
        """Split the buffer into every complete frame it holds, in order; keep the partial rest."""
        buf = self._buffer
        offset, end = 0, len(buf)
        now = time.monotonic()
        while end - offset >= 7:
            if buf[offset:offset + 4] == b"AMQP":
                if end - offset < 8:
                    break
                raw = bytes(buf[offset:offset + 8])
                self.trace.append(TraceEvent("received", "raw", 0, None, raw, now))
                self._violations.append(f"the broker answered with a protocol header {raw!r}")
                offset += 8
                continue
            frame_type, channel, size = FRAME_HEADER.unpack_from(buf, offset)
            total = 7 + size + 1
            if end - offset < total:
                break
            raw = bytes(buf[offset:offset + total])
            offset += total
            try:
                try:
                    _, _, decoded = frame.unmarshal(raw)
                except exceptions.UnmarshalingException:
                    decoded = _lenient_close(raw)
                    if decoded is None:
                        raise
            except (exceptions.UnmarshalingException, ValueError, struct.error) as error:
                self.trace.append(TraceEvent("received", "raw", channel, None, raw, now))
                self._violations.append(f"undecodable frame on channel {channel}: {error} {raw[:80]!r}")
                continue
            self.trace.append(TraceEvent("received", "frame", channel, decoded, None, now))
            self._on_frame(channel, decoded)
        del buf[:offset]

    def _on_frame(self, channel: int, decoded: AnyFrame) -> None:
        """Join content frames to their method and put complete commands in the inbox."""
        if isinstance(decoded, heartbeat.Heartbeat):
            return
        assembly = self._assembling.get(channel)
        if isinstance(decoded, MethodFrame):
            if assembly is not None:
                self._violations.append(f"{decoded.name} on channel {channel} inside the content of "
                                        f"{assembly.command.name}")
                del self._assembling[channel]
            command = Command(channel, decoded)
            if isinstance(decoded, CONTENT_METHODS):
                self._assembling[channel] = _Assembly(command)
            else:
                self.inbox.append(command)
        elif isinstance(decoded, header.ContentHeader):
            if assembly is None or assembly.body_size is not None:
                self._violations.append(f"content header on channel {channel} without a method")
                return
            assembly.body_size = int(decoded.body_size)
            assembly.command.properties = decoded.properties
            self._complete_if_done(channel, assembly)
        elif isinstance(decoded, amqp_body.ContentBody):
            if assembly is None or assembly.body_size is None:
                self._violations.append(f"content body on channel {channel} without a header")
                return
            assembly.chunks.append(bytes(decoded.value))
            assembly.received += len(decoded.value)
            if assembly.received > assembly.body_size:
                self._violations.append(f"content body on channel {channel} longer than announced")
            self._complete_if_done(channel, assembly)

    def _complete_if_done(self, channel: int, assembly: _Assembly) -> None:
        if assembly.body_size is not None and assembly.received >= assembly.body_size:
            assembly.command.body = b"".join(assembly.chunks)
            del self._assembling[channel]
            self.inbox.append(assembly.command)

    def _raise_violation(self) -> None:
        if self._violations:
            raise ProtocolViolation(f"{self.label}: " + "; ".join(self._violations))


CLOSE_METHODS = {cls.index: cls for cls in (commands.Connection.Close, commands.Channel.Close)}
CLOSE_ARGUMENTS = struct.Struct(">HB")


def _lenient_close(raw: bytes) -> MethodFrame | None:
    """Decode a connection.close or channel.close whose reply-text is not UTF-8.

    AMQP short strings are bytes; RabbitMQ quotes the offending input in the text of a
    FRAME_ERROR, and pamqp only decodes UTF-8. Other frames get no such leniency (None).
    """
    if raw[0] != constants.FRAME_METHOD or len(raw) < 7 + 4 + 3 + 1:
        return None
    (index,) = struct.unpack_from(">I", raw, 7)
    method_class = CLOSE_METHODS.get(index)
    if method_class is None:
        return None
    reply_code, text_length = CLOSE_ARGUMENTS.unpack_from(raw, 11)
    text_end = 14 + text_length
    if len(raw) != text_end + 4 + 1:
        return None
    class_id, method_id = struct.unpack_from(">HH", raw, text_end)
    return method_class(reply_code=reply_code, reply_text=raw[14:text_end].decode("utf-8", "replace"),
                        class_id=class_id, method_id=method_id)


def _negotiate(server: int, client: int) -> int:
    """AMQP limit negotiation: 0 means no limit, otherwise the smaller of the two."""
    if server == 0 or client == 0:
        return max(server, client)
    return min(server, client)


def _method_class(name: str) -> type[MethodFrame]:
    """pamqp's method class for a name such as 'Queue.DeclareOk'."""
    class_name, method_name = name.split(".")
    return getattr(getattr(commands, class_name), method_name)


def persistent(**props: object) -> commands.Basic.Properties:
    """Basic properties of a persistent message (delivery-mode 2)."""
    return commands.Basic.Properties(delivery_mode=2, **props)


def transient(**props: object) -> commands.Basic.Properties:
    """Basic properties of a transient message (delivery-mode 1)."""
    return commands.Basic.Properties(delivery_mode=1, **props)
