"""Traces written by hand: one observation per line, frames as ``spec.frames.frame_text`` prints them.

``c0 sent basic.ack(ch=1, delivery_tag=2, multiple=False)``, ``c1 received basic.get-empty(ch=1)``,
``c0 lost`` (the connection dropped without a close handshake), ``c0 connect`` (it connected again),
``c0 quiet`` (the client waited after a last round trip: the broker owes nothing there, ``spec.trace``).
Blank lines and ``#`` comments are ignored. ``parse`` returns the per-connection observations that
``spec.trace.check`` judges.
"""
from __future__ import annotations

import re
from typing import Any

from .frames import (
    CHANNEL_CLOSE, CONNECTION_CLOSE, EXCHANGE_NAMES, FIELDS, METHOD_CODES, MSG_STRIDE, OPTIONAL_BY_METHOD,
    REASONS, make_frame, reply_text,
)

_FRAME = re.compile(r"^\s*([a-z]+\.[a-z-]+)\((.*)\)\s*$")
_QUEUE = re.compile(r"^'?q(\d+)'?$")
_MSG = re.compile(r"^m(\d+)\.(\d+)$")


def _unquote(raw: str) -> str:
    """A value without one pair of matching outer quotes (the text inside may hold quotes of its own)."""
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        return raw[1:-1]
    return raw


def _value(name: str, raw: str):
    raw = raw.strip()
    if raw in ("True", "False"):
        return int(raw == "True")
    if name == "msg":
        m = _MSG.match(raw)
        if not m:
            raise ValueError(f"msg must read m<connection>.<n>, not {raw!r}")
        n = int(m.group(2))
        if not 1 <= n < MSG_STRIDE:
            raise ValueError(f"message number {n} of {raw!r} is out of range (1 to {MSG_STRIDE - 1})")
        return int(m.group(1)) * MSG_STRIDE + n
    if name in ("queue", "routing_key"):
        m = _QUEUE.match(raw)
        if not m:
            raise ValueError(f"{name} must name a model queue such as 'q0', not {raw!r}")
        return int(m.group(1))
    if name == "exchange":
        for code, ex_name in EXCHANGE_NAMES.items():
            if _unquote(raw) == ex_name:
                return code
        raise ValueError(f"unknown exchange {raw!r}")
    return int(raw)


def _split(args: str) -> list:
    parts, depth, cur, quote = [], 0, "", None
    for ch in args:
        if quote:
            cur += ch
            if ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        cur += ch
    if cur.strip():
        parts.append(cur)
    return parts


def reply_reason(code: int, text: str, truncated: bool = False) -> tuple[int, int]:
    """The (reason, detail) that ``reply_text`` renders as ``text`` with this reply code; with
    ``truncated``, one whose rendering starts with ``text`` (a broker cuts texts to 255 bytes)."""
    for reason in range(REASONS):
        for detail in [0] + [int(n) for n in re.findall(r"\d+", text)] + list(range(len(EXCHANGE_NAMES))):
            rendered = reply_text(code, reason, detail)
            if rendered == text or (truncated and rendered.startswith(text)):
                return reason, detail
    raise ValueError(f"unknown reply text {text!r}")


def parse_frame(text: str) -> Any:
    """The frame that ``frame_text`` prints as ``text`` (e.g. ``basic.ack(ch=1, delivery_tag=2, multiple=False)``)."""
    m = _FRAME.match(text)
    if not m or m.group(1) not in METHOD_CODES:
        raise ValueError(f"not a frame: {text!r}")
    method = METHOD_CODES[m.group(1)]
    values = {}
    for part in _split(m.group(2)):
        name, _, raw = part.partition("=")
        name = name.strip()
        values[name + "_" if name == "global" else name] = raw.strip()      # AMQP's global is global_
    names = ("reply_code", "text") if method in (CHANNEL_CLOSE, CONNECTION_CLOSE) else FIELDS.get(method, ())
    optional = OPTIONAL_BY_METHOD.get(method)
    if optional is not None:
        values.setdefault(optional, "0")
    missing = [name for name in ("ch",) + tuple(names) if name not in values]
    if missing:
        raise ValueError(f"{m.group(1)} lacks field {', '.join(missing)}")
    ch = int(values.pop("ch"))
    if method in (CHANNEL_CLOSE, CONNECTION_CLOSE):
        code = int(values["reply_code"])
        return make_frame(method, ch, code, *reply_reason(code, _unquote(values["text"])))
    return make_frame(method, ch, *(_value(name, values[name]) for name in FIELDS.get(method, ())))


def parse(text: str) -> dict:
    """Observations from text, one per line: ``c0 sent <frame>``, ``c1 received <frame>``,
    ``c0 lost``, ``c0 connect``, ``c0 quiet``; blank lines and ``#`` comments are ignored."""
    out: dict = {}
    for n, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].strip() if not line.strip().startswith("c") or "#" in line.split(")")[-1] \
            else line.strip()
        if not line:
            continue
        m = re.match(r"^c(\d+)\s+(sent|received|lost|connect|quiet)\b\s*(.*)$", line)
        if not m:
            raise ValueError(f"line {n}: cannot read {line!r}")
        c, kind, rest = int(m.group(1)), m.group(2), m.group(3)
        try:
            obs = (kind, parse_frame(rest)) if kind in ("sent", "received") else (kind,)
        except ValueError as e:
            raise ValueError(f"line {n}: {e}") from None
        out.setdefault(c, []).append(obs)
    return out
