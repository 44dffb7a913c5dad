"""Trace checking (DESIGN.md, "Trace checking"): does some execution of the spec produce what the
clients observed?

An observation is what one connection's client saw, in order: ``("sent", frame)``,
``("received", frame)``, ``("lost",)`` (the connection dropped without a close handshake) or
``("connect",)`` (it connected again). Frames are the spec's tuples (``spec.frames``); ``parse_frame``
reads them from the text ``frame_text`` prints, so traces can be written by hand.

The checker searches the product of spec states and positions in each connection's observations:
unobserved steps (the broker taking frames, delivering, confirming, fsync, crash and restart, a queue
failing) may happen at any time; an observed frame must be exactly what the matching client step
writes or reads. Client steps are built from the observations themselves, so the client is free to
do anything a real client does; the broker is free to make any choice the spec allows and is caught
when it does what the spec does not allow.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from . import actions as A
from . import machine, network
from .frames import (
    BASIC_ACK, BASIC_CANCEL, BASIC_CONSUME, BASIC_GET, BASIC_NACK, BASIC_PUBLISH, BASIC_QOS,
    BASIC_RECOVER, BASIC_REJECT, CHANNEL_CLOSE, CHANNEL_OPEN, CONFIRM_SELECT, CONNECTION_CLOSE,
    EXCHANGE_NAMES, FIELDS, METHOD_CODES, MSG_STRIDE, QUEUE_BIND, QUEUE_DECLARE, TX_COMMIT,
    TX_ROLLBACK, TX_SELECT, frame_text, reply_text,
)
from .state import C_CLOSED, CONN_DOWN, CONN_UP

INTERNAL = (A.BrokerTakeFrame, A.BrokerDeliver, A.BrokerConfirm, A.BrokerReturn, A.BrokerCommitOk,
            A.DiskFsync, A.BrokerQueueFail, A.BrokerCrash, A.BrokerRestart)

# How an observed client frame becomes the client action that writes it.
_CLIENT_ACTIONS = {
    BASIC_PUBLISH: lambda c, f: A.ClientPublish(c, f[1], f[2], f[3], bool(f[4]), bool(f[5])),
    BASIC_CONSUME: lambda c, f: A.ClientConsume(c, f[1], f[2], f[3], bool(f[4])),
    BASIC_CANCEL: lambda c, f: A.ClientCancel(c, f[1], f[2]),
    BASIC_GET: lambda c, f: A.ClientGet(c, f[1], f[2], bool(f[3])),
    BASIC_ACK: lambda c, f: A.ClientAck(c, f[1], f[2], bool(f[3])),
    BASIC_NACK: lambda c, f: A.ClientNack(c, f[1], f[2], bool(f[3]), bool(f[4])),
    BASIC_REJECT: lambda c, f: A.ClientReject(c, f[1], f[2], bool(f[3])),
    BASIC_QOS: lambda c, f: A.ClientQos(c, f[1], f[2], bool(f[3])),
    BASIC_RECOVER: lambda c, f: A.ClientRecover(c, f[1], bool(f[2])),
    CONFIRM_SELECT: lambda c, f: A.ClientConfirmSelect(c, f[1]),
    TX_SELECT: lambda c, f: A.ClientTxSelect(c, f[1]),
    TX_COMMIT: lambda c, f: A.ClientTxCommit(c, f[1]),
    TX_ROLLBACK: lambda c, f: A.ClientTxRollback(c, f[1]),
    QUEUE_DECLARE: lambda c, f: A.ClientDeclareQueue(c, f[1], f[2], bool(f[3]), bool(f[4])),
    QUEUE_BIND: lambda c, f: A.ClientBindQueue(c, f[1], f[2]),
    CHANNEL_CLOSE: lambda c, f: A.ClientChannelClose(c, f[1]),
    CHANNEL_OPEN: lambda c, f: A.ClientChannelOpen(c, f[1]),
    CONNECTION_CLOSE: lambda c, f: A.ClientConnectionClose(c, 0),
}


def observation_text(obs: tuple) -> str:
    """An observation as a person reads it."""
    if obs[0] in ("sent", "received"):
        return f"{obs[0]} {frame_text(obs[1])}"
    return obs[0]


@dataclass
class Verdict:
    """The trace checker's answer."""

    ok: bool
    matched: int                                # observations explained on the furthest path
    total: int
    conn: int = -1                              # where the first unexplained observation is
    index: int = -1
    observation: tuple = ()
    allowed: list = field(default_factory=list)  # what the spec allowed on that connection there
    explored: int = 0

    def explain(self) -> str:
        if self.ok:
            return f"accepted: all {self.total} observations explained ({self.explored} spec states searched)"
        allowed = "; ".join(self.allowed) if self.allowed else "nothing observable"
        return (f"rejected: connection c{self.conn}, observation {self.index + 1} "
                f"({observation_text(self.observation)}) has no explanation; "
                f"the spec allowed there: {allowed}")

    __str__ = explain


def _apply_client(state, c: int, obs: tuple, pending: tuple):
    """Match observation ``obs`` on connection c against a client step. Returns (state, labels still
    to be matched) or None. ``pending`` are labels a previous client step produced that the next
    observations must match (a close-ok the client library sent by itself)."""
    conn = state.conns[c]
    kind = obs[0]
    if pending:
        return (state, pending[1:]) if obs == pending[0] else None
    if kind == "connect":
        if conn.status == CONN_DOWN and state.broker_up:
            return machine.step(state, A.ClientConnect(c, 0))[0], ()
        return None
    if kind == "lost":
        if conn.status == CONN_DOWN:
            return state, ()
        return machine.step(state, A.NetworkLoss(c))[0], ()
    if kind == "received":
        ch = obs[1][1]
        fifos = conn.to_client
        if ch >= len(fifos) or not network.can_move(fifos, ch) or fifos[ch][0] != obs[1]:
            return None
        state, labels = machine.step(state, A.ClientReceive(c, ch))
        return state, tuple(("sent" if w.to_broker else "received", w.frame) for w in labels[1:])
    if kind == "sent":
        if conn.status == CONN_DOWN:
            return state, ()                    # written into a connection that is already gone
        if conn.status != CONN_UP:
            return None
        frame = obs[1]
        make = _CLIENT_ACTIONS.get(frame[0])
        if make is None:
            return None
        action = make(c, frame)
        ch = frame[1]
        if ch:
            view = conn.clients[ch - 1]
            if (frame[0] == CHANNEL_OPEN) != (view.status == C_CLOSED):
                return None
        state, labels = machine.step(state, action)
        if not labels or labels[0].frame != frame:
            return None
        return state, ()
    raise ValueError(f"unknown observation kind {kind!r}")


def _allowed(nodes, c: int, limit: int = 8) -> list:
    """What the client of connection c could have observed next, in any of these search nodes: the
    frame its library owes (a close-ok) when there is one, else what the broker has in flight to it
    and whether it could send or connect."""
    seen = []
    for state, pend in nodes:
        if pend[c]:
            text = observation_text(pend[c][0])
            if text not in seen:
                seen.append(text)
            continue
        conn = state.conns[c]
        for ch in network.movable(conn.to_client):
            text = f"received {frame_text(conn.to_client[ch][0])}"
            if text not in seen:
                seen.append(text)
        if conn.status == CONN_UP and "sent (any client frame)" not in seen:
            seen.append("sent (any client frame)")
        if conn.status == CONN_DOWN and "connect" not in seen:
            seen.append("connect")
        if len(seen) >= limit:
            break
    return seen


def check(observations: dict, config, max_nodes: int = 2_000_000) -> Verdict:
    """Whether some execution of the spec under ``config`` produces these per-connection observations."""
    conns = sorted(observations)
    for c in conns:
        if not 0 <= c < config.connections:
            raise ValueError(f"observations name connection c{c}, the configuration has {config.connections}")
    obs = tuple(tuple(observations.get(c, ())) for c in range(config.connections))
    total = sum(len(o) for o in obs)
    start = [(s, (0,) * len(obs), ((),) * len(obs)) for s in machine.initial_states(config)]
    seen = set()
    stack = list(start)
    best = -1
    best_nodes: list = []
    explored = 0
    while stack:
        state, pos, pend = stack.pop()
        key = (hash(state), pos, pend)
        if key in seen:
            continue
        seen.add(key)
        explored += 1
        if explored > max_nodes:
            raise RuntimeError(f"trace check gave up after {max_nodes} search nodes")
        progress = sum(pos)
        if progress == total:
            return Verdict(True, total, total, explored=explored)
        if progress > best:
            best, best_nodes = progress, []
        if progress == best and len(best_nodes) < 200:
            best_nodes.append((state, pos, pend))
        for c in range(len(obs)):
            if pos[c] < len(obs[c]):
                result = _apply_client(state, c, obs[c][pos[c]], pend[c])
                if result is not None:
                    nstate, npend = result
                    stack.append((nstate, pos[:c] + (pos[c] + 1,) + pos[c + 1:], pend[:c] + (npend,) + pend[c + 1:]))
        if any(pend):
            continue                            # a close-ok the client sends by itself comes first
        for action in machine.enabled(state, config):
            if isinstance(action, INTERNAL):
                stack.append((machine.step(state, action)[0], pos, pend))
    state, pos, pend = best_nodes[0]
    c = next(i for i in range(len(obs)) if pos[i] < len(obs[i]))
    return Verdict(False, best, total, c, pos[c], obs[c][pos[c]],
                   _allowed([(n[0], n[2]) for n in best_nodes if n[1] == pos], c), explored)


# ---------------------------------------------------------------- reading traces written by hand

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
        return int(m.group(1)) * MSG_STRIDE + int(m.group(2))
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


def parse_frame(text: str) -> tuple:
    """The frame that ``frame_text`` prints as ``text`` (e.g. ``basic.ack(ch=1, delivery_tag=2, multiple=False)``)."""
    m = _FRAME.match(text)
    if not m or m.group(1) not in METHOD_CODES:
        raise ValueError(f"not a frame: {text!r}")
    method = METHOD_CODES[m.group(1)]
    values = {}
    for part in _split(m.group(2)):
        name, _, raw = part.partition("=")
        values[name.strip()] = raw.strip()
    names = ("reply_code", "text") if method in (CHANNEL_CLOSE, CONNECTION_CLOSE) else FIELDS.get(method, ())
    missing = [name for name in ("ch",) + tuple(names) if name not in values]
    if missing:
        raise ValueError(f"{m.group(1)} lacks field {', '.join(missing)}")
    ch = int(values.pop("ch"))
    if method in (CHANNEL_CLOSE, CONNECTION_CLOSE):
        code = int(values["reply_code"])
        text_value = _unquote(values["text"])
        for reason in range(9):
            for detail in [0] + [int(n) for n in re.findall(r"\d+", text_value)] + \
                    list(range(len(EXCHANGE_NAMES))):
                if reply_text(code, reason, detail) == text_value:
                    return (method, ch, code, reason, detail)
        raise ValueError(f"unknown reply text {text_value!r}")
    return (method, ch) + tuple(_value(name, values[name]) for name in FIELDS.get(method, ()))


def parse(text: str) -> dict:
    """Observations from text, one per line: ``c0 sent <frame>``, ``c1 received <frame>``,
    ``c0 lost``, ``c0 connect``; blank lines and ``#`` comments are ignored."""
    out: dict = {}
    for n, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].strip() if not line.strip().startswith("c") or "#" in line.split(")")[-1] \
            else line.strip()
        if not line:
            continue
        m = re.match(r"^c(\d+)\s+(sent|received|lost|connect)\b\s*(.*)$", line)
        if not m:
            raise ValueError(f"line {n}: cannot read {line!r}")
        c, kind, rest = int(m.group(1)), m.group(2), m.group(3)
        try:
            obs = (kind, parse_frame(rest)) if kind in ("sent", "received") else (kind,)
        except ValueError as e:
            raise ValueError(f"line {n}: {e}") from None
        out.setdefault(c, []).append(obs)
    return out
