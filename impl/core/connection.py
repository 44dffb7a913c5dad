"""One client connection: the handshake, frame parsing, the channel table, and errors as close frames.

`receive_data(bytes)` takes what the socket read; `data_to_send()` returns what to write; `should_close`
says when to close the socket. The connection never blocks and never does I/O (sans-IO, like h11).
Everything that changes the connection's lifecycle state lives in this file.
"""

from __future__ import annotations

import struct
from typing import Any

from pamqp import commands

from rabbitproof.impl.core import errors
from rabbitproof.impl.core.broker import Broker
from rabbitproof.impl.core.channel import HANDLERS, Channel
from rabbitproof.impl.core.errors import Fault, Refused, erlang_binary
from rabbitproof.impl.core.frames import (
    FRAME_BODY,
    FRAME_END,
    FRAME_HEADER,
    FRAME_HEARTBEAT,
    FRAME_METHOD,
    FRAME_OVERHEAD,
    PROTOCOL_HEADER,
    decode_content_header,
    decode_method,
    encode_channel_open_ok,
    encode_heartbeat,
    encode_method,
    frame_head,
)

SERVER_FRAME_MAX = 131072
SERVER_CHANNEL_MAX = 2047
SERVER_HEARTBEAT = 60
MIN_FRAME_MAX = 4096
SERVER_PROPERTIES = {
    "capabilities": {
        "publisher_confirms": True,
        "exchange_exchange_bindings": True,
        "basic.nack": True,
        "consumer_cancel_notify": True,
        "connection.blocked": False,
        "consumer_priorities": False,
        "authentication_failure_close": True,
        "per_consumer_qos": True,
        "direct_reply_to": False,
    },
    "cluster_name": "rabbitproof",
    "copyright": "rabbitproof authors",
    "information": "rabbitproof reference broker",
    "platform": "Python",
    "product": "rabbitproof",
    "version": "0.1.0",
}

# Connection lifecycle, as data: state -> the one method expected on channel 0 in that state.
AWAIT_HEADER, AWAIT_START_OK, AWAIT_TUNE_OK, AWAIT_OPEN, OPEN, CLOSING, CLOSED = (
    "await-header",
    "await-start-ok",
    "await-tune-ok",
    "await-open",
    "open",
    "closing",
    "closed",
)
HANDSHAKE = {
    AWAIT_START_OK: commands.Connection.StartOk,
    AWAIT_TUNE_OK: commands.Connection.TuneOk,
    AWAIT_OPEN: commands.Connection.Open,
}


def method_ids(method: Any) -> tuple[int, int]:
    return method.index >> 16, method.index & 0xFFFF


class Connection:
    """A client connection on the broker's virtual host."""

    def __init__(self, broker: Broker, peer_is_loopback: bool = True) -> None:
        """A new client connection on the broker's virtual host, waiting for the protocol header."""
        self.broker = broker
        self.number = broker.register(self)
        self.peer_is_loopback = peer_is_loopback
        self.state = AWAIT_HEADER
        self.buffer = bytearray()
        self.output: list[bytes] = []
        self.channels: dict[int, Channel] = {}
        self.confirms_due: set[Channel] = set()
        self.closed_by_client: list[Channel] = []  # channel.close received; close-ok goes with the next output
        self.frame_max = SERVER_FRAME_MAX
        self.channel_max = SERVER_CHANNEL_MAX
        self.heartbeat = 0
        self.consumer_cancel_notify = False
        self.authentication_failure_close = False
        self.user = ""
        self.torn_down = False
        self.internal_errors: list[Exception] = []  # bugs contained at the boundary, for logs and tests

    # --- the sans-IO interface ----------------------------------------------------------------

    @property
    def should_close(self) -> bool:
        """The socket should be closed once data_to_send() has been written."""
        return self.state == CLOSED

    @property
    def is_closing(self) -> bool:
        """The broker sent connection.close and waits for close-ok."""
        return self.state == CLOSING

    def write(self, data: bytes) -> None:
        if self.state == CLOSED:
            return
        self.output.append(data)
        self.broker.dirty.add(self)

    def confirm_due(self, channel: Channel) -> None:
        """The channel has publisher confirms to send with the next data_to_send()."""
        self.confirms_due.add(channel)
        self.broker.dirty.add(self)

    def send_method(self, channel: int, method: Any) -> None:
        self.write(encode_method(channel, method))

    def data_to_send(self) -> bytes:
        """Everything to write to the socket now, confirms that fell due and close-oks included."""
        if self.closed_by_client:
            self.finish_client_closes()
        if self.confirms_due:
            due = list(self.confirms_due)
            self.confirms_due.clear()
            for channel in due:
                channel.flush_confirms()
        if not self.output:
            return b""
        data = b"".join(self.output)
        self.output.clear()
        return data

    def heartbeat_frame(self) -> bytes:
        return encode_heartbeat()

    def receive_data(self, data: bytes) -> None:
        """Bytes from the socket: parse and handle every complete frame."""
        if self.state == CLOSED:
            return
        buffer = self.buffer
        buffer += data
        offset = 0
        if self.state == AWAIT_HEADER:
            if len(buffer) < 8:
                if PROTOCOL_HEADER.startswith(bytes(buffer)):
                    return
                self.refuse_protocol()
                return
            if bytes(buffer[:8]) != PROTOCOL_HEADER:
                self.refuse_protocol()
                return
            offset = 8
            self.start()
        size_limit = self.frame_max - FRAME_OVERHEAD
        end = len(buffer)
        while end - offset >= 7 and self.state != CLOSED:
            frame_type, channel, size = frame_head(buffer, offset)
            if size > size_limit:
                self.fail(
                    Fault(
                        errors.FRAME_ERROR,
                        f"type {frame_type}, all octets = <<>>: {{frame_too_large,{size},{size_limit}}}",
                    )
                )
                buffer.clear()  # framing is lost: nothing after this can be read as frames
                return
            frame_end = offset + 7 + size
            if frame_end >= end:
                break
            payload = bytes(buffer[offset + 7 : frame_end])
            if buffer[frame_end] != FRAME_END:
                self.fail(
                    Fault(
                        errors.FRAME_ERROR,
                        f"type {frame_type}, all octets = {erlang_binary(payload)}: "
                        f"{{invalid_frame_end_marker,{buffer[frame_end]}}}",
                    )
                )
                buffer.clear()
                return
            offset = frame_end + 1
            try:
                self.receive_frame(frame_type, channel, payload)
            except Exception as error:  # a bug: contain it to this connection (ER-3)
                self.internal_errors.append(error)
                self.fail(Fault(errors.INTERNAL_ERROR, f"{type(error).__name__}: {error}"))
                if self.state != CLOSING:
                    self.abort()
            size_limit = self.frame_max - FRAME_OVERHEAD
        if self.state == CLOSED:
            buffer.clear()
        elif offset:
            del buffer[:offset]

    def connection_lost(self) -> None:
        """The socket closed: everything of this connection goes (RQ-4, DU-4)."""
        self.state = CLOSED
        self.teardown()

    # --- frames -------------------------------------------------------------------------------

    def receive_frame(self, frame_type: int, channel_number: int, payload: bytes) -> None:
        """Handle one frame (already split from the byte stream)."""
        state = self.state
        if frame_type == FRAME_METHOD:
            try:
                method = decode_method(payload)
            except KeyError:
                if state in (OPEN, CLOSING):
                    self.fail(Fault(errors.COMMAND_INVALID, "unknown method " + erlang_binary(payload[:4])))
                else:
                    self.abort()
                return
            except ValueError:
                class_id, method_id = struct.unpack_from(">HH", payload) if len(payload) >= 4 else (0, 0)
                if state in (OPEN, CLOSING):
                    self.fail(
                        Fault(
                            errors.FRAME_ERROR, "cannot decode " + erlang_binary(payload[4:]), class_id, method_id
                        )
                    )
                else:
                    self.abort()
                return
            if channel_number == 0 or state != OPEN:
                self.connection_method(channel_number, method)
            else:
                self.channel_method(channel_number, method)
            return
        if state != OPEN:
            if state != CLOSING:
                self.abort()
            return
        if frame_type == FRAME_HEARTBEAT:
            if channel_number != 0:
                self.fail(Fault(errors.UNEXPECTED_FRAME, f"type 8, all octets = {erlang_binary(payload)}"))
            elif payload:
                self.fail(Fault(errors.FRAME_ERROR, f"type 8, all octets = {erlang_binary(payload)}: unknown_frame"))
            return
        if frame_type not in (FRAME_HEADER, FRAME_BODY):
            self.fail(
                Fault(errors.FRAME_ERROR, f"type {frame_type}, all octets = {erlang_binary(payload)}: unknown_frame")
            )
            return
        if channel_number == 0:
            self.fail(Fault(errors.UNEXPECTED_FRAME, f"type {frame_type}, all octets = {erlang_binary(payload)}"))
            return
        self.content_frame(channel_number, frame_type, payload)

    def content_frame(self, channel_number: int, frame_type: int, payload: bytes) -> None:
        """A content header or body frame on a channel."""
        channel = self.channels.get(channel_number)
        if channel is None:  # a channel never opened expects channel.open, a method: 505, as RabbitMQ says
            self.fail(Fault(errors.UNEXPECTED_FRAME, "expected method frame, got non method frame instead"))
            return
        if channel.closing:
            return  # ER-1: ignored until close-ok
        if channel.commit_waiting:  # the content of a publish held behind a reply that waits for the disk
            channel.held_frames.append((frame_type, payload))
            return
        if channel.content_method is None:
            self.fail(Fault(errors.UNEXPECTED_FRAME, "expected method frame, got non method frame instead"))
            return
        if frame_type == FRAME_HEADER:
            if channel.content_header is not None:
                self.fail(
                    Fault(
                        errors.UNEXPECTED_FRAME,
                        "expected content body, got non content body frame instead",
                        60,
                        40,
                    )
                )
                return
            if len(payload) < 14:  # class, weight, body size: a header this short cannot decode
                self.fail(Fault(errors.FRAME_ERROR, f"cannot decode content header: {len(payload)} octets", 60, 40))
                return
            class_id = struct.unpack_from(">H", payload)[0]
            if class_id != 60:
                self.fail(
                    Fault(
                        errors.UNEXPECTED_FRAME,
                        f"expected content header for class 60, got one for class {class_id} instead",
                        60,
                        40,
                    )
                )
                return
            try:
                header = decode_content_header(payload)
            except (ValueError, struct.error) as error:
                self.fail(Fault(errors.FRAME_ERROR, f"cannot decode content header: {error}", 60, 40))
                return
            self.guarded(channel, channel.on_content_header, header, 60, 40)
            return
        if channel.content_header is None:
            self.fail(
                Fault(
                    errors.UNEXPECTED_FRAME,
                    "expected content header for class 60, got non content header frame instead",
                    60,
                    40,
                )
            )
            return
        if not self.guarded(channel, channel.on_content_body, payload, 60, 40):
            self.fail(
                Fault(errors.UNEXPECTED_FRAME, "content body exceeds the size its header announced", 60, 40)
            )

    def guarded(self, channel: Channel, handler: Any, argument: Any, class_id: int, method_id: int) -> Any:
        """Run a channel handler, turning a refusal into a channel or connection error (ER-1)."""
        try:
            return handler(argument)
        except Refused as refusal:
            self.fail(Fault(refusal.kind, refusal.detail, class_id, method_id), channel)
            return True

    def channel_method(self, number: int, method: Any) -> None:
        channel = self.channels.get(number)
        if channel is None:
            if isinstance(method, commands.Channel.Open):
                if len(self.channels) >= self.channel_max:  # channel_max bounds open channels, not numbers
                    self.fail(
                        Fault(
                            errors.NOT_ALLOWED,
                            f"number of channels opened ({len(self.channels)}) has reached the negotiated "
                            f"channel_max ({self.channel_max})",
                        )
                    )
                    return
                self.channels[number] = Channel(self, number)
                self.write(encode_channel_open_ok(number))
            else:  # close and close-ok too, as in RabbitMQ
                self.fail(Fault(errors.CHANNEL_ERROR, "expected 'channel.open'", *method_ids(method)))
            return
        if channel.closing:  # ER-1: ignored until close-ok, as RabbitMQ's closing channel does
            if isinstance(method, commands.Channel.CloseOk):
                channel.requeue_outstanding()                   # the basic.get deliveries it kept
                del self.channels[number]
            elif isinstance(method, commands.Channel.Close):  # answered, but the channel waits for close-ok
                self.send_method(number, commands.Channel.CloseOk())
            elif isinstance(method, commands.Channel.Open):
                self.fail(Fault(errors.CHANNEL_ERROR, "second 'channel.open' seen", *method_ids(method)))
            return
        if channel.content_method is not None:
            expected = "content body" if channel.content_header is not None else "content header for class 60"
            got = "content body" if channel.content_header is not None else "content header"
            self.fail(Fault(errors.UNEXPECTED_FRAME, f"expected {expected}, got non {got} frame instead", 60, 40))
            return
        if channel.commit_waiting:
            channel.held_frames.append(method)
            return
        self.handle_channel_method(channel, method)

    def replay_held(self, channel: Channel, held: Any) -> None:
        """A frame held behind a reply that waited for the disk, taken now in its turn (a method, or a
        content frame as (frame type, payload)); it is held again if the channel waits again."""
        if isinstance(held, tuple):
            self.content_frame(channel.number, *held)
        else:
            self.channel_method(channel.number, held)

    def handle_channel_method(self, channel: Channel, method: Any) -> None:
        if not channel.is_open or self.state != OPEN:
            return
        handler = HANDLERS.get(type(method))
        if handler is not None:
            try:
                handler(channel, method)
            except Refused as refusal:
                self.fail(Fault(refusal.kind, refusal.detail, *method_ids(method)), channel)
            return
        if isinstance(method, commands.Channel.Close):
            self.close_by_client(channel)
        elif isinstance(method, commands.Channel.Open):
            self.fail(Fault(errors.CHANNEL_ERROR, "second 'channel.open' seen", *method_ids(method)))
        else:  # channel.close-ok on an open channel too, as in RabbitMQ
            self.fail(Fault(errors.COMMAND_INVALID, "unimplemented method", *method_ids(method)))

    # --- channel 0: handshake and connection methods ------------------------------------------

    def refuse_protocol(self) -> None:
        """A client speaking another protocol gets the header we speak, then the socket closes."""
        self.output.append(PROTOCOL_HEADER)
        self.broker.dirty.add(self)
        self.abort()

    def start(self) -> None:
        self.state = AWAIT_START_OK
        self.send_method(
            0,
            commands.Connection.Start(
                version_major=0,
                version_minor=9,
                server_properties=SERVER_PROPERTIES,
                mechanisms="PLAIN",
                locales="en_US",
            ),
        )

    def abort(self) -> None:
        """Close the socket without a close handshake (errors before the connection is open)."""
        self.broker.dirty.add(self)
        self.state = CLOSED
        self.teardown()

    def connection_method(self, channel_number: int, method: Any) -> None:
        state = self.state
        if state in HANDSHAKE:
            if channel_number != 0 or not isinstance(method, HANDSHAKE[state]):
                self.abort()
                return
            getattr(self, "on_" + type(method).__name__.lower())(method)
            return
        if state == CLOSING:
            if isinstance(method, commands.Connection.CloseOk):
                self.abort()
            return          # a crossing connection.close is not answered: the broker waits for close-ok
        if state != OPEN:
            return
        if isinstance(method, commands.Connection.Close):
            if any(channel.commit_waiting for channel in self.channels.values()):
                # ER-1: a reply waiting for the disk (a durable declare-ok, bind-ok, commit-ok) goes out
                # before close-ok, as RabbitMQ's channels answer what came before the connection.close.
                self.broker.journal.after_commit(lambda _: self.connection_method(channel_number, method))
                return
            self.send_method(0, commands.Connection.CloseOk())
            self.abort()
        elif isinstance(method, commands.Connection.CloseOk):
            self.abort()
        elif isinstance(method, (commands.Connection.Blocked, commands.Connection.Unblocked)):
            return
        elif isinstance(method, commands.Connection.UpdateSecret) and channel_number == 0:
            self.send_method(0, commands.Connection.UpdateSecretOk())  # PLAIN credentials: nothing expires
        elif channel_number != 0:
            self.fail(Fault(errors.COMMAND_INVALID, "unimplemented method", *method_ids(method)))
        else:
            self.fail(
                Fault(errors.CHANNEL_ERROR, "unexpected method in connection state running", *method_ids(method))
            )

    def on_startok(self, method: commands.Connection.StartOk) -> None:
        capabilities = (method.client_properties or {}).get("capabilities") or {}
        if isinstance(capabilities, dict):
            self.consumer_cancel_notify = bool(capabilities.get("consumer_cancel_notify"))
            self.authentication_failure_close = bool(capabilities.get("authentication_failure_close"))
        response = method.response
        if isinstance(response, str):
            response = response.encode("utf-8", "surrogateescape")
        parts = (response or b"").split(b"\0")
        user = password = None
        if method.mechanism == "PLAIN" and len(parts) == 3:
            user, password = parts[1].decode("utf-8", "replace"), parts[2].decode("utf-8", "replace")
        if user is None or not self.broker.authenticate(user, password or "", self.peer_is_loopback):
            if self.authentication_failure_close:
                self.send_method(
                    0,
                    commands.Connection.Close(
                        reply_code=errors.ACCESS_REFUSED.value,
                        reply_text=f"{errors.constant_name(errors.ACCESS_REFUSED)} - Login was refused using "
                        f"authentication mechanism {method.mechanism}. For details see the broker logfile.",
                        class_id=0,
                        method_id=0,
                    ),
                )
            self.abort()
            return
        self.user = user
        self.state = AWAIT_TUNE_OK
        self.send_method(
            0,
            commands.Connection.Tune(
                channel_max=SERVER_CHANNEL_MAX, frame_max=SERVER_FRAME_MAX, heartbeat=SERVER_HEARTBEAT
            ),
        )

    def on_tuneok(self, method: commands.Connection.TuneOk) -> None:
        """Frame-max and channel-max negotiation: the client may lower the server's values, not raise them."""
        frame_max, channel_max = method.frame_max, method.channel_max
        if not (MIN_FRAME_MAX <= frame_max <= SERVER_FRAME_MAX) or channel_max > SERVER_CHANNEL_MAX:
            self.abort()
            return
        self.frame_max = frame_max
        self.channel_max = channel_max or SERVER_CHANNEL_MAX
        self.heartbeat = method.heartbeat
        self.state = AWAIT_OPEN

    def on_open(self, method: commands.Connection.Open) -> None:
        if method.virtual_host != "/":
            self.state = OPEN
            self.fail(Fault(errors.NOT_ALLOWED, f"vhost {method.virtual_host} not found", 10, 40))
            return
        self.state = OPEN
        self.send_method(0, commands.Connection.OpenOk())

    # --- errors and closing -------------------------------------------------------------------

    def fail(self, fault: Fault, channel: Channel | None = None) -> None:
        """A channel error closes the channel; a connection error closes everything (ER-1, ER-2)."""
        if self.state in (CLOSING, CLOSED):
            return
        if not fault.is_connection_error and channel is not None:
            channel.teardown(closing=True)
            channel.closing = True
            self.send_method(
                channel.number,
                commands.Channel.Close(
                    reply_code=fault.code, reply_text=fault.text, class_id=fault.class_id, method_id=fault.method_id
                ),
            )
            return
        self.teardown()
        self.send_method(
            0,
            commands.Connection.Close(
                reply_code=fault.code, reply_text=fault.text, class_id=fault.class_id, method_id=fault.method_id
            ),
        )
        self.state = CLOSING

    def close_by_client(self, channel: Channel) -> None:
        """channel.close from the client: the channel closes now (RQ-4) but, as in RabbitMQ, stays closing
        until its close-ok is sent with the next output, so frames that came with the close are ignored
        and a channel.open among them is a second channel.open."""
        channel.teardown(closing=True)
        channel.closing = True
        self.closed_by_client.append(channel)
        self.broker.dirty.add(self)

    def finish_client_closes(self) -> None:
        """Free the channels the client closed and send their close-oks (none after a connection error)."""
        closed, self.closed_by_client = self.closed_by_client, []
        for channel in closed:
            if self.state == OPEN and self.channels.get(channel.number) is channel:
                channel.requeue_outstanding()                   # the basic.get deliveries it kept
                del self.channels[channel.number]
                self.send_method(channel.number, commands.Channel.CloseOk())

    def close_by_broker(self, reason: str) -> None:
        """The broker shuts down: connection.close 320 CONNECTION_FORCED."""
        self.fail(Fault(errors.CONNECTION_FORCED, f"broker forced connection closure with reason '{reason}'"))

    def teardown(self) -> None:
        """Close every channel (RQ-4) and delete the exclusive queues this connection owns (DU-4)."""
        if self.torn_down:
            return
        self.torn_down = True
        for channel in list(self.channels.values()):
            channel.teardown()
            channel.requeue_outstanding()                       # a closing channel's kept deliveries
        self.confirms_due.clear()
        broker = self.broker
        for queue in [q for q in broker.queues.values() if q.exclusive_owner is self]:
            broker.delete_queue(queue)
        broker.unregister(self)

    def delivered_on_disk(self) -> list[tuple[str, int]]:
        """(queue, publication number) of the on-disk messages this connection's channels have outstanding."""
        keys = []
        for channel in self.channels.values():
            for delivery in channel.unacked.values():
                qm = delivery.qm
                if qm.on_disk and not qm.queue.deleted:
                    keys.append((qm.queue.name, qm.seq))
        return keys
