"""What a replay does, step by step, made from an execution's steps: the client steps become writes and
waits of real clients, the fault steps real faults, and the broker's and the disk's own steps nothing at all
(the real broker takes them itself; the clients' waits hold the replay to their order).

A client frame the execution's broker never takes before the connection is lost, vanishes or the broker
crashes was lost on the way: the replay writes it into a network that drops it (``Act.dropped``), so the
client's recording says it sent it and the broker never sees it, as in the execution."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

from rabbitproof.replay.steps import Frame, Step

SEND, AWAIT, CONNECT, WORK = "send", "await", "connect", "work"
LOSS, VANISH, DETECT, CRASH, RESTART, CHANNEL_ERROR = "loss", "vanish", "detect", "crash", "restart", "channel error"
FAULTS = (LOSS, VANISH, DETECT, CRASH, RESTART, CHANNEL_ERROR)

_TAKE = re.compile(r"^take the next frame from c(\d+)")
_CHANNEL_ERROR = re.compile(r"^CHANNEL ERROR: the broker closes c(\d+)\.ch(\d+)")
_DETECT = re.compile(r"held as c(\d+)\)$")
_NETWORK = re.compile(r"^connection c(\d+) (LOST|VANISHES)")
_WORK = re.compile(r"^do the work of delivery tag (\d+)")
_AGAIN = re.compile(r"^publish (m\d+\.\d+) again:")

# Why a fault cannot be made for real; the answer names it (docs/how-to/replay.md).
CANNOT = {
    "queue fails": "a queue refusing one publish while taking the others cannot be made on demand: a length "
                   "limit with reject-publish refuses every publish past the limit, not the one the execution "
                   "names, and the recording format cannot carry the queue's arguments for the spec to judge",
}


@dataclass(frozen=True)
class Act:
    """One thing the replay does: ``kind`` (send, await, connect, work, or a fault), at the execution's step
    ``step``, on client ``conn`` and ``channel``, with the ``frame`` written or awaited."""

    kind: str
    step: int
    conn: int = -1
    channel: int = 0
    frame: Frame | None = None
    dropped: bool = False       # a send the network loses (the execution's broker never takes it)
    tag: int = 0                # work: the delivery tag whose work is done
    written: bool = False       # a crash after the execution's disk wrote: the replay gives the disk time first
    again: str = ""             # a publish of a message once more (a republish): the message it publishes again

    def describe(self) -> str:
        who = f"c{self.conn}" + (f".ch{self.channel}" if self.channel else "")
        if self.kind == SEND:
            return f"{who} sends {self.frame.text()}" + (" (lost on the way)" if self.dropped else "")
        if self.kind == AWAIT:
            return f"{who} waits for {self.frame.text()}"
        if self.kind == WORK:
            return f"{who} does the work of delivery tag {self.tag}"
        return {CONNECT: f"{who} connects", LOSS: f"{who}'s connection is cut",
                VANISH: f"{who}'s network stops forwarding", DETECT: f"the broker notices {who} vanished",
                CRASH: "the broker is killed", RESTART: "the broker is started again",
                CHANNEL_ERROR: f"the broker closes {who} with a channel error"}[self.kind]


@dataclass(frozen=True)
class Plan:
    """The acts of a replay, the channels each client opens when it connects (by act index of the
    connect, -1 for the start), and why it cannot be replayed ("" when it can)."""

    acts: tuple[Act, ...]
    clients: int
    opens: dict = field(default_factory=dict)       # (conn, act index or -1) -> channels opened on connecting
    cannot: str = ""
    heartbeats: frozenset = frozenset()             # the clients that vanish: a short heartbeat is negotiated


def repeated(steps: Sequence[Step], cycle_start: int | None, rounds: int) -> tuple[Step, ...]:
    """The steps of a lasso with its cycle gone round ``rounds`` times (a path as it is)."""
    if cycle_start is None:
        return tuple(steps)
    return tuple(steps[:cycle_start]) + tuple(steps[cycle_start:]) * rounds


def make_plan(steps: Sequence[Step], clients: int) -> Plan:
    """The acts of an execution's steps (see the module's docstring)."""
    acts: list[Act] = []
    sends: dict[int, list[int]] = {c: [] for c in range(clients)}     # act indexes of sends since connecting
    taken = {c: 0 for c in range(clients)}
    heartbeats: set[int] = set()
    cannot = ""
    written = False             # the disk wrote since the start or the last crash
    before: dict[int, list[Act]] = {}   # acts that must come before act i (a channel error ahead of what it discards)

    def lose_in_flight(c: int) -> None:
        untaken = len(sends[c]) - taken[c]
        for i in sends[c][len(sends[c]) - untaken:] if untaken > 0 else ():
            acts[i] = Act(SEND, acts[i].step, acts[i].conn, acts[i].channel, acts[i].frame, dropped=True)
        sends[c], taken[c] = [], 0

    for step in steps:
        client = step.client
        if client is not None:
            c, ch = client
            if step.action == "connect":
                acts.append(Act(CONNECT, step.number, c))
                sends[c], taken[c] = [], 0
                continue
            m = _WORK.match(step.action)
            if m:
                acts.append(Act(WORK, step.number, c, ch, tag=int(m.group(1))))
            again = _AGAIN.match(step.action)
            for f in step.frames:
                if f.sent_by_client:
                    sends[c].append(len(acts))
                    acts.append(Act(SEND, step.number, c, int(f.get("ch", 0)), f, again=again.group(1) if again else ""))
                elif step.action.startswith("receive"):
                    acts.append(Act(AWAIT, step.number, c, int(f.get("ch", 0)), f))
            continue
        if (m := _TAKE.match(step.action)) and step.actor == "broker":
            taken[int(m.group(1))] += 1
        elif step.action == "CRASH":
            for c in range(clients):
                lose_in_flight(c)
            acts.append(Act(CRASH, step.number, written=written))
            written = False
        elif step.actor == "disk" and step.action.startswith("fsync: write"):
            written = True
        elif step.action.startswith("restart"):
            acts.append(Act(RESTART, step.number))
        elif m := _CHANNEL_ERROR.match(step.action):
            # The frames of the connection the execution's broker has not taken yet reach it after the
            # error, which discards them: the request that makes the error is written before them.
            c, error = int(m.group(1)), Act(CHANNEL_ERROR, step.number, int(m.group(1)), int(m.group(2)))
            untaken = sends[c][taken[c]:]
            if untaken:
                before.setdefault(untaken[0], []).append(error)
            else:
                acts.append(error)
        elif step.action.startswith("heartbeat timeout") and (m := _DETECT.search(step.action)):
            acts.append(Act(DETECT, step.number, int(m.group(1))))
        elif step.action.startswith("queue fails"):
            cannot = cannot or f"step {step.number} ({step.action}): {CANNOT['queue fails']}"
        elif m := _NETWORK.match(step.action):
            c = int(m.group(1))
            lose_in_flight(c)
            acts.append(Act(LOSS if m.group(2) == "LOST" else VANISH, step.number, c))
            if m.group(2) == "VANISHES":
                heartbeats.add(c)
    ordered = [a for i, act in enumerate(acts) for a in (*before.get(i, ()), act)]
    return Plan(tuple(ordered), clients, _opens(ordered, clients), cannot, frozenset(heartbeats))


def _opens(acts: Sequence[Act], clients: int) -> dict:
    """The channels each connection opens as it connects: those it uses before its next connection whose
    first frame is not its own channel.open (the execution's clients start with their channels open)."""
    opens: dict = {}
    current = {c: (c, -1) for c in range(clients)}
    first: dict = {}
    for i, act in enumerate(acts):
        if act.kind == CONNECT:
            current[act.conn] = (act.conn, i)
        elif act.kind in (SEND, AWAIT) and act.channel:
            key = current[act.conn]
            seen = first.setdefault(key, {})
            if act.channel not in seen:
                seen[act.channel] = act.kind == SEND and act.frame.method == "channel.open"
    for c in range(clients):
        opens.setdefault((c, -1), ())
    for key, seen in first.items():
        opens[key] = tuple(sorted(ch for ch, opened_by_itself in seen.items() if not opened_by_itself))
    for i, act in enumerate(acts):
        if act.kind == CONNECT:
            opens.setdefault((act.conn, i), ())
    return opens
