"""Differential comparison: where the spec leaves no choice, `impl` must send exactly RabbitMQ's frames.

A program of one connection with one method per write (`programs(synchronous=True)`) leaves the broker
almost no freedom: every reply comes before the next method is sent. Two recordings of it, one per
broker, are compared after normalising what differs by construction or by a choice the spec allows:
- names made for the run (queue names, bodies, consumer tags carry the run's id) and names the broker
  chooses (`amq.ctag-...`) are replaced by placeholders;
- the connection handshake (server properties, tune values) is left out: the spec does not model it;
- frames are compared channel by channel (connection-level frames and the end of the stream as channel
  0): channels run concurrently, and the spec, like RabbitMQ, lets frames of different channels reach
  the client in any interleaving (docs/explanation/trace-checking.md, "Channels run concurrently"), e.g. the open-oks of channels 1
  and 2 opened in one write, or a delivery on one channel and a reply on the other;
- the end of the TCP stream after a connection.close or close-ok is left out: whether the client sees
  it before it drops the connection itself is a matter of timing;
- the runner's probes (rabbitproof/conformance/targets.py: a basic.get of the run's empty probe queue,
  and that queue's declare) and their replies are left out: the probe queue's get-empty and a delivery
  from another queue come in either order, as they go through different queues;
- a channel's deliveries and the cancels the broker sends on its own come to the client between the
  replies as timing has it (a delivery still on its way when the next method is written comes after
  that method's reply, one read sooner before it), so they are compared in their order among themselves,
  after the channel's other frames, not in their place among them;
- confirms (PC-3, PC-7): a broker may batch them into one basic.ack multiple=true, so the confirms of a
  channel become the set of publish sequence numbers acknowledged and the set negatively acknowledged,
  compared once for each time the channel was opened, not in their place among the other frames.
Everything else the broker sends is compared, method by method, with all its fields (reply codes and
texts, delivery tags, redelivered flags, message counts, consumer tags) and its content (properties
and body).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from pamqp import commands

from rabbitproof.conformance.targets import Run

GENERATED = re.compile(r"amq\.ctag-[A-Za-z0-9_-]+")
# What a broker sends a channel without a method of the client's to answer: compared apart (module docstring).
UNASKED = ("Basic.Deliver", "Basic.Cancel")


@dataclass
class ChannelConfirms:
    """The confirms received on one opening of a channel, as sets of publish sequence numbers."""

    acked: set = field(default_factory=set)
    nacked: set = field(default_factory=set)

    def settle(self, tag: int, multiple: bool, positive: bool) -> None:
        settled = self.acked | self.nacked
        seqs = set(range(1, tag + 1)) - settled if multiple else {tag}
        (self.acked if positive else self.nacked).update(seqs)


def _text(value, run_id: str):
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        return GENERATED.sub("amq.ctag-*", value.replace(run_id, "RUN"))
    return value


def normalised_connection(log: list, run_id: str) -> dict:
    """What a broker sent on one TCP connection, normalised (module docstring): per channel, a list of
    tuples (method name, fields[, body]) and, at the end, the confirms of each opening of the channel."""
    out: list = []
    opened = closed = False
    confirm_mode: dict[int, bool] = {}
    confirms: list = []                     # (channel, opening number, ChannelConfirms)
    current: dict[int, ChannelConfirms] = {}
    gets: dict[int, list] = {}              # channel -> for each basic.get not yet answered: a probe's?
    probe = f"{run_id}-probe"
    for entry in log:
        if entry.direction == "sent":
            if entry.kind == "method" and isinstance(entry.method, commands.Confirm.Select):
                confirm_mode[entry.channel] = True
            if entry.kind == "method" and isinstance(entry.method, commands.Basic.Get):
                gets.setdefault(entry.channel, []).append(entry.method.queue == probe)
            continue
        if entry.kind != "method":
            if not (entry.kind == "eof" and closed):
                out.append((0, entry.kind))
            continue
        method = entry.method
        if not opened:
            opened = isinstance(method, commands.Connection.OpenOk)
            continue                        # the handshake
        ch = entry.channel
        closed = closed or isinstance(method, (commands.Connection.Close, commands.Connection.CloseOk))
        if isinstance(method, commands.Channel.OpenOk):
            confirm_mode[ch] = False
            current[ch] = ChannelConfirms()
            confirms.append((ch, len(confirms), current[ch]))
        if isinstance(method, commands.Channel.Close):
            gets.pop(ch, None)              # gets not answered yet never will be
        if isinstance(method, (commands.Basic.GetOk, commands.Basic.GetEmpty)) and gets.get(ch):
            if gets[ch].pop(0):
                continue                    # a probe's reply
        if isinstance(method, commands.Queue.DeclareOk) and method.queue == probe:
            continue
        if isinstance(method, (commands.Basic.Ack, commands.Basic.Nack)) and confirm_mode.get(ch):
            current[ch].settle(method.delivery_tag, method.multiple, isinstance(method, commands.Basic.Ack))
            continue
        fields = tuple(sorted((k, _text(v, run_id)) for k, v in dict(method).items()))
        item = (ch, method.name, fields)
        if entry.body is not None:
            properties = tuple(sorted((k, v) for k, v in dict(entry.properties or {}).items() if v is not None))
            item += (properties, _text(entry.body, run_id))
        out.append(item)
    out += [(ch, "confirms", sorted(c.acked), sorted(c.nacked)) for ch, _, c in confirms if c.acked or c.nacked]
    per_channel: dict[int, list] = {}
    for item in sorted(out, key=lambda item: item[1] in UNASKED):   # stable: each part keeps its order
        per_channel.setdefault(item[0], []).append(item[1:])
    return dict(sorted(per_channel.items()))


def normalised(run: Run) -> list:
    """A run's normalised recording: per slot, per TCP connection."""
    run_id = run.names["run"]
    return [[normalised_connection(log, run_id) for log in slot] for slot in run.slots]


def first_difference(a: list, b: list) -> str | None:
    """Where two normalised recordings first differ, for people; None if they are equal."""
    if a == b:
        return None
    for s, (slot_a, slot_b) in enumerate(zip(a, b)):
        for c, (conn_a, conn_b) in enumerate(zip(slot_a, slot_b)):
            for ch in sorted(set(conn_a) | set(conn_b)):
                seq_a, seq_b = conn_a.get(ch, []), conn_b.get(ch, [])
                where = f"slot {s}, connection {c}, channel {ch}"
                for i, (x, y) in enumerate(zip(seq_a, seq_b)):
                    if x != y:
                        return f"{where}, frame {i}:\n  impl:     {x}\n  rabbitmq: {y}"
                if len(seq_a) != len(seq_b):
                    longer, who = (seq_a, "impl") if len(seq_a) > len(seq_b) else (seq_b, "rabbitmq")
                    shorter = min(len(seq_a), len(seq_b))
                    return f"{where}: only {who} sent more, from frame {shorter}: {longer[shorter:][:3]}"
        if len(slot_a) != len(slot_b):
            return f"slot {s}: impl made {len(slot_a)} connections, rabbitmq {len(slot_b)}"
    return "the recordings differ"
