"""The execution's names made real, unique to one try: queue q0 is ``<run>-<the setup's queue name>``,
consumer tag 1 is ``<run>-ctag1``, message m0.1 is the body ``<run>-m0.1`` (the recording names messages by
their bodies), and a delivery tag is the real one the client received where the execution received its
own. ``to_wire`` writes a frame of the execution as the pamqp frames a raw client sends."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from pamqp import commands
from pamqp.base import Frame as MethodFrame

from rabbitproof.recording.observations import pamqp_name
from rabbitproof.recording.rawclient import RawConnection

from rabbitproof.replay.steps import Frame

_QUEUE = re.compile(r"^q(\d+)$")
_MESSAGE = re.compile(r"^m(\d+)\.(\d+)$")
RENAMED = {"global": "global_", "text": "reply_text"}
EXCHANGES = {"": "", "fanout": "amq.fanout"}


@dataclass
class Names:
    """The real names of one try (``run`` makes them unique on a shared broker)."""

    run: str
    queues: tuple[str, ...]                         # the setup's queue names, q0 first
    delivery_tags: dict = field(default_factory=dict)   # (conn, link, channel, execution's tag) -> real tag

    def queue(self, name: str) -> str:
        m = _QUEUE.match(str(name))
        if not m:
            return str(name)
        index = int(m.group(1))
        return f"{self.run}-{self.queues[index] if index < len(self.queues) else name}"

    def consumer_tag(self, tag: object) -> str:
        return f"{self.run}-ctag{tag}"

    def body(self, msg: str) -> bytes:
        return f"{self.run}-{msg}".encode()

    def message_of(self, body: bytes | None) -> str | None:
        """The execution's name of a real body (``m0.1``), None for a body not of this try."""
        prefix = f"{self.run}-".encode()
        return body[len(prefix):].decode() if body and body.startswith(prefix) else None

    def exchange(self, name: str) -> str:
        return EXCHANGES.get(name, f"{self.run}-missing-exchange")


def message_order(msg: str) -> tuple[int, int]:
    """(publisher, number) of a message name ``m0.1``."""
    m = _MESSAGE.match(msg)
    return (int(m.group(1)), int(m.group(2))) if m else (-1, -1)


def to_wire(frame: Frame, names: Names, conn: RawConnection, tag_of) -> list:
    """The (channel, pamqp frame) pairs that write ``frame``: a publish with its content header and body.
    ``tag_of(channel, tag)`` is the real delivery tag of the execution's ``tag`` on that channel."""
    cls_name, method_name = pamqp_name(frame.method).split(".")
    method: MethodFrame = getattr(getattr(commands, cls_name), method_name)()
    ch = int(frame.get("ch", 0))
    body, persistent = None, False
    for key, value in frame.fields:
        if key == "ch":
            continue
        if key == "msg":
            body = names.body(str(value))
        elif key == "persistent":
            persistent = bool(value)
        elif key in ("queue", "routing_key"):
            setattr(method, key, names.queue(str(value)))
        elif key == "exchange":
            setattr(method, key, names.exchange(str(value)))
        elif key == "consumer_tag":
            setattr(method, key, names.consumer_tag(value))
        elif key == "delivery_tag" and isinstance(method, (commands.Basic.Ack, commands.Basic.Nack,
                                                            commands.Basic.Reject)):
            setattr(method, key, tag_of(ch, int(value)) if value else 0)
        elif hasattr(method, RENAMED.get(key, key)):
            setattr(method, RENAMED.get(key, key), value)
    if isinstance(method, (commands.Channel.Close, commands.Connection.Close)):
        method.class_id, method.method_id = method.class_id or 0, method.method_id or 0
    if isinstance(method, commands.Basic.Publish):
        properties = commands.Basic.Properties(delivery_mode=2 if persistent else 1)
        return conn.content_frames(ch, method, body or b"", properties)
    return [(ch, method)]
