"""Recordings as files: what a raw client saw, saved as JSON so that `rabbitproof trace FILE` can judge
it later (docs/reference/recording-format.md).

A file is one JSON object::

    {"format": "rabbitproof-recording/1",
     "existing": {"jobs": {"durable": true}},          # queues that exist before the run (optional)
     "slots": [                                        # one per client (the spec's c0, c1, ...)
       [                                               # the TCP connections it made, one after another
         [                                             # one connection: what it sent and received, in order
           {"at": 0.0012, "direction": "sent", "kind": "method", "channel": 1,
            "method": "Basic.Publish", "fields": {"exchange": "", "routing_key": "jobs", "mandatory": false},
            "properties": {"delivery_mode": 2}, "body": "m1"},
           {"at": 0.0031, "direction": "received", "kind": "eof", "channel": 0}
         ]]]}

``method`` is pamqp's name of the AMQP method, ``fields`` its arguments as pamqp names them (missing
ones take pamqp's defaults), ``properties`` the content header's (for methods that carry content),
``body`` the content as text (UTF-8) or ``{"base64": "..."}``, ``at`` seconds on one clock for every
connection of the recording. ``kind`` is ``method``, ``eof`` (the broker closed the TCP connection),
``raw`` (bytes that are not a frame, ``{"base64": ...}`` in ``body``) or ``quiet`` (the client's mark that
it waited after a last round trip: the broker must owe nothing there). ``save`` writes what
``RawConnection.command_log()`` returns; ``load`` reads a file back into the same entries, refusing a
malformed one with a ``RecordingError`` naming the place.
"""
from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any, Sequence

from pamqp import commands

from rabbitproof.spec.roles import QueueSpec

from rabbitproof.recording.rawclient import LoggedCommand

FORMAT = "rabbitproof-recording/1"
KINDS = ("method", "raw", "eof", "protocol-header", "quiet")


class RecordingError(ValueError):
    """A recording file that cannot be read; the message names the file and the place."""


def _body_json(body: bytes | None) -> Any:
    if body is None:
        return None
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(body).decode("ascii")}


def _json_safe(value: Any) -> Any:
    """A field value as JSON: bytes as base64, nested tables and lists kept."""
    if isinstance(value, bytes):
        return {"base64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def entry_json(entry: LoggedCommand) -> dict:
    """One logged command as a JSON object."""
    out: dict[str, Any] = {"at": entry.at, "direction": entry.direction, "kind": entry.kind, "channel": entry.channel}
    if entry.method is not None:
        out["method"] = entry.method.name
        out["fields"] = {k: _json_safe(v) for k, v in dict(entry.method).items()}
    if entry.properties is not None:
        out["properties"] = {k: _json_safe(v) for k, v in dict(entry.properties).items() if v not in (None, "")}
    if entry.body is not None:
        out["body"] = _body_json(entry.body)
    return out


def save(path: str | Path, slots: Sequence[Sequence[Sequence[LoggedCommand]]],
         existing: dict[str, QueueSpec] | None = None) -> None:
    """Write a recording: per slot, the command logs of its connections, in order."""
    data = {"format": FORMAT,
            "existing": {name: {"durable": q.durable} for name, q in (existing or {}).items()},
            "slots": [[[entry_json(e) for e in log] for log in slot] for slot in slots]}
    Path(path).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def _bytes(value: Any, where: str) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, dict) and set(value) == {"base64"}:
        try:
            return base64.b64decode(value["base64"], validate=True)
        except ValueError:
            raise RecordingError(f"{where}: body is not valid base64") from None
    raise RecordingError(f"{where}: body must be a string or {{\"base64\": ...}}")


def _from_json(value: Any) -> Any:
    """A field value read back: ``{"base64": ...}`` as bytes, tables and lists kept."""
    if isinstance(value, dict):
        if set(value) == {"base64"} and isinstance(value["base64"], str):
            return base64.b64decode(value["base64"])
        return {k: _from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    return value


def _filled(obj: Any, fields: Any, what: str, where: str) -> Any:
    """``obj`` (pamqp's defaults) with ``fields`` set as recorded; a recording keeps what the broker sent,
    even where pamqp's own checks of an outgoing frame would refuse it."""
    if not isinstance(fields, dict):
        raise RecordingError(f"{where}: {what} must be an object")
    known = dict(obj)
    for key, value in fields.items():
        if key not in known:
            raise RecordingError(f"{where}: {what}: no field {key!r} (known: {', '.join(known)})")
        setattr(obj, key, _from_json(value))
    return obj


def _method(name: Any, fields: Any, where: str) -> Any:
    if not isinstance(name, str) or "." not in name:
        raise RecordingError(f"{where}: method must name an AMQP method such as \"Basic.Ack\", not {name!r}")
    klass, _, method = name.partition(".")
    cls = getattr(getattr(commands, klass, None), method, None)
    if cls is None or not isinstance(cls, type):
        raise RecordingError(f"{where}: unknown AMQP method {name!r}")
    return _filled(cls(), fields, f"{name} fields", where)


def entry_from_json(item: Any, where: str) -> LoggedCommand:
    """One entry of a recording file as a logged command; RecordingError naming ``where`` if malformed."""
    if not isinstance(item, dict):
        raise RecordingError(f"{where}: an entry must be an object")
    direction, kind = item.get("direction"), item.get("kind", "method")
    if direction not in ("sent", "received"):
        raise RecordingError(f"{where}: direction must be \"sent\" or \"received\", not {direction!r}")
    if kind not in KINDS:
        raise RecordingError(f"{where}: kind must be one of {', '.join(KINDS)}, not {kind!r}")
    channel, at = item.get("channel", 0), item.get("at")
    if not isinstance(channel, int) or channel < 0:
        raise RecordingError(f"{where}: channel must be a whole number >= 0")
    if not isinstance(at, (int, float)):
        raise RecordingError(f"{where}: at (seconds) is required and must be a number")
    method = properties = body = None
    if kind == "method":
        method = _method(item.get("method"), item.get("fields", {}), where)
        if "properties" in item:
            properties = _filled(commands.Basic.Properties(), item["properties"], "properties", where)
    if item.get("body") is not None:
        body = _bytes(item["body"], where)
    return LoggedCommand(direction, kind, channel, method, properties, body, float(at))


def load(path: str | Path) -> tuple[list[list[list[LoggedCommand]]], dict[str, QueueSpec]]:
    """The slots and the queues existing before the run, read from a recording file."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise RecordingError(f"{path}: {e.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RecordingError(f"{path}: not JSON: {e}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise RecordingError(f"{path}: not a recording (\"format\" must be {FORMAT!r})")
    existing = data.get("existing", {})
    if not isinstance(existing, dict) or not all(isinstance(v, dict) for v in existing.values()):
        raise RecordingError(f"{path}: existing must map queue names to {{\"durable\": true|false}}")
    slots_data = data.get("slots")
    if not isinstance(slots_data, list) or not slots_data:
        raise RecordingError(f"{path}: slots must be a non-empty list (one per client)")
    slots = []
    for c, slot in enumerate(slots_data):
        if not isinstance(slot, list) or not all(isinstance(log, list) for log in slot):
            raise RecordingError(f"{path}: slot {c} must be a list of connections, each a list of entries")
        slots.append([[entry_from_json(item, f"{path}: slot {c}, connection {n}, entry {i}")
                       for i, item in enumerate(log)] for n, log in enumerate(slot)])
    return slots, {name: QueueSpec(durable=bool(v.get("durable", False))) for name, v in existing.items()}
