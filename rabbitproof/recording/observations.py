"""Recorded runs: frames a raw client recorded from a real broker, turned into a trace the spec judges.

A recording is one sequence of *slots* (the spec's connections c0, c1, ...); each slot is the
sequence of TCP connections a client made one after another in it (after a crash or a lost
connection it connects again), and each of those is the list of commands that connection sent and
received, in order: what ``rabbitproof.recording.rawclient.RawConnection.command_log()`` returns. Entries
are read by duck typing (``direction``, ``kind``, ``channel``, ``method``, ``properties``, ``body``,
with pamqp's method objects and their field names). It speaks pamqp's names and RabbitMQ's, so it lives
beside the recording format (``rabbitproof.recording``), not in the spec, which stays free of them.

The real names become the model's (``from_recording``): queues are numbered in the order they are
first named, consumer tags too (a server-chosen tag is read from its consume-ok), messages are named
by their bodies (each publish's body must be unique), ``amq.fanout`` is the model's fanout exchange
and any other named exchange one that does not exist; reply texts are rewritten with the model's
names, so a text RabbitMQ writes must be one the spec renders (``spec.frames.reply_text``). What the
model cannot say (passive declares, queue arguments, nowait, exchange declarations, ...) is refused
with an ``Unsupported`` error naming the command. The configuration the trace needs is derived from
it: the connections, channels (closed until the client opens them) and queues it uses, and budgets
large enough for what it shows (crashes where connections were lost). The entries' times (``at``, one
clock for every connection of the recording) give the real-time order of the observations across
connections, which the checker then follows (``spec.trace.check``'s ``order``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from rabbitproof.spec import trace
from rabbitproof.spec.configs import Config
from rabbitproof.spec.frames import (
    CHANNEL_CLOSE, CHANNEL_OPEN_OK, CONNECTION_CLOSE, CONNECTION_CLOSE_OK, DEFAULT_EXCHANGE, EXCHANGE_NAMES,
    FANOUT_EXCHANGE, METHODS, MISSING_EXCHANGE, MSG_STRIDE, R_ANY, R_NORMAL, REPLY_SUCCESS, make_frame, queue_name,
)
from rabbitproof.spec.roles import QueueSpec
from rabbitproof.spec.trace_text import reply_reason

FANOUT_NAME = "amq.fanout"          # RabbitMQ declares it in every vhost: the model's fanout exchange


def pamqp_name(name: str) -> str:
    """pamqp's name of an AMQP method: ``basic.get-ok`` -> ``Basic.GetOk``."""
    cls, method = name.split(".")
    return f"{cls.capitalize()}.{''.join(part.capitalize() for part in method.split('-'))}"


# What RabbitMQ 3.10.8 may write after its own connection.close (a connection error): a channel.open-ok
# that the channel's writer process sends while the connection's writer sends the close (seen once in
# about 40 runs of ``errors_and_refusals``; RabbitMQ otherwise drops it, 2 of 150). The connection is
# over for the client once it read the close (it answers close-ok, and no channel of it is used again),
# so the open-ok reaches no one: the spec drops it (spec.network.end_of_connection, at an error), and
# the recording leaves out one read after the close (docs/reference/differences.md).
WRITTEN_AFTER_THE_CLOSE = (CHANNEL_OPEN_OK,)

# The model's methods by pamqp's names (spec.frames.METHODS).
BY_PAMQP_NAME = {pamqp_name(m.name): m for m in METHODS}

# Connection-level methods of the handshake and keep-alive, which the model leaves out.
_HANDSHAKE = {"Connection.Start", "Connection.StartOk", "Connection.Tune", "Connection.TuneOk",
              "Connection.Open", "Connection.OpenOk", "Connection.Secure", "Connection.SecureOk",
              "Connection.Blocked", "Connection.Unblocked", "Connection.UpdateSecret",
              "Connection.UpdateSecretOk"}


class Unsupported(ValueError):
    """A recorded command the model cannot express; the message names it and says why."""


class UnknownBody(Unsupported):
    """A message the broker sent carries a body no publish of the recording carried (``body``): no message
    of the model is that one, so the recording cannot be judged, and the broker made a message up."""

    def __init__(self, where: str, body: bytes) -> None:
        super().__init__(f"{where}: carries a body no publish of the recording carried: {body!r}")
        self.where, self.body = where, body


@dataclass
class Recorded:
    """A recording as the spec reads it: observations per slot, the configuration they need, and the
    real names behind the model's (for people reading a verdict)."""

    observations: dict
    config: Config
    order: tuple = ()                                   # real-time order: a slot index per observation
    queues: dict = field(default_factory=dict)          # real queue name -> model queue index
    consumer_tags: dict = field(default_factory=dict)   # real consumer tag -> model tag
    messages: dict = field(default_factory=dict)        # body -> model message id

    def size(self) -> int:
        return sum(len(v) for v in self.observations.values())

    def check(self, max_nodes: int = 2_000_000) -> trace.Verdict:
        """The spec's verdict on this recording."""
        return trace.check(self.observations, self.config, max_nodes=max_nodes, order=self.order or None)

    def text(self) -> str:
        """The trace in the language of ``spec.trace_text``, with a legend of the real names."""
        legend = [f"# {queue_name(q)} = {name!r}" for name, q in self.queues.items()]
        legend += [f"# consumer tag {t} = {name!r}" for name, t in self.consumer_tags.items()]
        lines = []
        for c in sorted(self.observations):
            lines += [f"c{c} {trace.observation_text(o)}" for o in self.observations[c]]
        return "\n".join(legend + lines)


def check_recording(slots, existing: dict | None = None, max_nodes: int = 2_000_000,
                    judge_texts: bool = True) -> trace.Verdict:
    """The spec's verdict on a recording, in one call (``from_recording`` then ``Recorded.check``)."""
    return from_recording(slots, existing, judge_texts).check(max_nodes)


def from_recording(slots, existing: dict | None = None, judge_texts: bool = True) -> Recorded:
    """The trace and configuration of a recording (see the module's docstring). ``existing`` names the
    queues that exist before the recording starts, with their flags: ``{"jobs": QueueSpec(durable=True)}``.
    ``judge_texts``: a close's reply text must be RabbitMQ 3.10.8's (the default); without it, only its
    reply code is judged (AMQP 0-9-1 fixes codes, not texts: any broker), as reason ``R_ANY``."""
    reader = _Reader(existing or {}, judge_texts)
    slots = [[list(slot)] if _is_log(slot) else [list(log) for log in slot] for slot in slots]
    for c, connections in enumerate(slots):     # messages are named first: any slot may receive them
        for log in connections:
            reader.name_publishes(c, log)
    observations = {}
    stamps = []                                         # (time, slot, index) of every observation
    for c, connections in enumerate(slots):
        seq: list = []
        for n, log in enumerate(connections):
            start = log[0].at if log else (stamps[-1][0] if stamps else 0.0)
            if n:
                if not seq or (seq[-1][0] != "lost" and not _closed(seq[-1])):
                    seq.append(("lost",))           # the client dropped it without a word
                    stamps.append((start, c, len(seq) - 1))
                seq.append(("connect",))
                stamps.append((start, c, len(seq) - 1))
            for obs, at in reader.connection(c, log):
                seq.append(obs)
                stamps.append((at, c, len(seq) - 1))
        observations[c] = seq
    order = tuple(c for _, c, _ in sorted(stamps))
    return Recorded(observations, reader.config(len(observations), observations), order, dict(reader.queues),
                    dict(reader.tags), dict(reader.bodies))


def _closed(obs: tuple) -> bool:
    """Whether an observation ends its connection with the close handshake."""
    return obs[0] in ("sent", "received") and obs[1].method in (CONNECTION_CLOSE, CONNECTION_CLOSE_OK)


def _is_log(value) -> bool:
    """Whether ``value`` is one connection's log (a list of commands) rather than a list of logs."""
    value = list(value)
    return not value or hasattr(value[0], "direction")


class _Reader:
    """Reads command logs, naming queues, consumer tags and messages as it first meets them."""

    def __init__(self, existing: dict, judge_texts: bool = True) -> None:
        self.judge_texts = judge_texts
        self.queues: dict = {}
        self.specs: dict = {}
        self.tags: dict = {}
        self.bodies: dict = {}
        self.published: dict = {}       # slot -> publishes so far (names its next message)
        self.routes: dict = {}          # body -> the queue names its publish can reach (None: any)
        self.claimed: set = set()       # server-chosen tags read from deliveries (``_server_tag``)
        self.channels = 1
        self.losses: dict = {}          # slot -> connections that ended without a close handshake
        self.nacks = 0
        for name, spec in existing.items():
            self.specs[self.queue(name)] = spec

    # -- names ------------------------------------------------------------------------------------

    def queue(self, name: str) -> int:
        if name not in self.queues:
            self.queues[name] = len(self.queues)
        return self.queues[name]

    def tag(self, name: str) -> int:
        if name not in self.tags:
            self.tags[name] = len(self.tags) + 1
        return self.tags[name]

    def message(self, body, where: str) -> int:
        key = bytes(body or b"")
        if key not in self.bodies:
            raise UnknownBody(where, key)
        return self.bodies[key]

    def name_publishes(self, c: int, log: list) -> None:
        """Name the messages slot c publishes in this log: its n-th publish is m<c>.<n>."""
        for i, entry in enumerate(log):
            if entry.kind == "method" and entry.direction == "sent" and entry.method.name == "Basic.Publish":
                body = bytes(entry.body or b"")
                if body in self.bodies:
                    raise Unsupported(f"c{c}, command {i + 1} (sent Basic.Publish): the body {body!r} was "
                                      f"already published; bodies name messages")
                n = self.published.get(c, 0) + 1
                self.published[c] = n
                self.bodies[body] = c * MSG_STRIDE + n
                m = entry.method
                self.routes[body] = (m.routing_key,) if m.exchange == "" else None

    def exchange(self, name: str) -> int:
        return DEFAULT_EXCHANGE if name == "" else FANOUT_EXCHANGE if name == FANOUT_NAME else MISSING_EXCHANGE

    def text(self, code: int, text: str, where: str) -> tuple[int, int]:
        """(reason, detail) of a reply text, once its real names are replaced by the model's; any text
        is ``R_ANY`` when texts are not judged."""
        if not self.judge_texts:
            return R_ANY, 0
        model = text
        for name, q in sorted(self.queues.items(), key=lambda item: -len(item[0])):
            model = model.replace(f"queue '{name}'", f"queue '{queue_name(q)}'")
        for name, t in self.tags.items():
            model = model.replace(f"consumer tag '{name}'", f"consumer tag '{t}'")
        if model.startswith("NOT_FOUND - no exchange '") and model.split("'")[1] not in ("", FANOUT_NAME):
            model = f"NOT_FOUND - no exchange '{EXCHANGE_NAMES[MISSING_EXCHANGE]}' in vhost '/'"
        truncated = len(text.encode()) >= 255           # AMQP short strings end at 255 bytes: cut short
        if truncated and model.endswith("..."):
            model = model[:-3]
        try:
            return reply_reason(code, model, truncated)
        except ValueError:
            raise Unsupported(f"{where}: reply text {text!r} is not one the spec renders") from None

    # -- commands ---------------------------------------------------------------------------------

    def connection(self, c: int, log: list) -> list:
        """The observations of one connection's log, each with its time."""
        out: list = []
        closed = False
        errored = False                             # the broker's connection.close was read
        for i, entry in enumerate(log):
            where = f"c{c}, command {i + 1} ({entry.direction} {getattr(entry, 'name', entry.kind)})"
            if entry.kind == "protocol-header":
                continue
            if entry.kind == "raw":
                raise Unsupported(f"{where}: raw bytes (bad input) cannot be written as a trace")
            if entry.kind == "quiet":               # the client's mark: the broker owes nothing here
                out.append((("quiet",), entry.at))
                continue
            if entry.kind == "eof":
                if not closed:
                    out.append((("lost",), entry.at))
                    self.losses[c] = self.losses.get(c, 0) + 1
                closed = True
                break
            name = entry.method.name
            if name in _HANDSHAKE:
                continue
            frame = self.frame(c, entry, log, i, where)
            if errored and entry.direction == "received" and frame.method in WRITTEN_AFTER_THE_CLOSE:
                continue
            self.channels = max(self.channels, frame.channel)
            out.append((("sent" if entry.direction == "sent" else "received", frame), entry.at))
            if frame.method in (CONNECTION_CLOSE, CONNECTION_CLOSE_OK) and entry.direction == "received":
                closed = True
                errored = errored or frame.method == CONNECTION_CLOSE
        return out

    def frame(self, c: int, entry, log: list, i: int, where: str):
        """The model's frame of one recorded method: its fields (``spec.frames.METHODS``) read by name
        from pamqp's method, with the model's names for queues, consumer tags, exchanges and messages."""
        m, ch, name, sent = entry.method, entry.channel, entry.method.name, entry.direction == "sent"
        method = BY_PAMQP_NAME.get(name)
        if method is None:
            raise Unsupported(f"{where}: {name} is outside the model")
        if sent and getattr(m, "nowait", False):
            raise Unsupported(f"{where}: nowait=True (the model always answers)")
        if name == "Basic.Consume" and (m.no_local or m.arguments):
            raise Unsupported(f"{where}: no_local and consumer arguments are outside the model")
        if name == "Queue.Declare":
            if m.passive or m.auto_delete or m.arguments or not m.queue:
                raise Unsupported(f"{where}: passive, auto-delete, server-named or argument-carrying "
                                  f"declares are outside the model")
            self.specs.setdefault(self.queue(m.queue), QueueSpec(declared=False))
        if name == "Queue.Bind" and (m.exchange != FANOUT_NAME or m.arguments):
            raise Unsupported(f"{where}: only bindings to {FANOUT_NAME!r}, without arguments, are modelled")
        if method.code in (CHANNEL_CLOSE, CONNECTION_CLOSE):
            if not sent:
                return make_frame(method.code, ch, m.reply_code, *self.text(m.reply_code, m.reply_text, where))
            if m.reply_code != REPLY_SUCCESS:
                raise Unsupported(f"{where}: a client closes with reply code 200 in the model")
            return make_frame(method.code, ch, REPLY_SUCCESS, R_NORMAL, 0)
        if name == "Basic.Nack" and not sent:
            self.nacks += 1
        return make_frame(method.code, ch, *(self.value(f, entry, sent, log, i, where) for f in method.fields))

    def value(self, field: str, entry, sent: bool, log: list, i: int, where: str) -> int:
        """One field of a recorded method, as the model writes it."""
        m = entry.method
        if field == "msg":
            return self.bodies[bytes(entry.body or b"")] if sent else self.message(entry.body, where)
        if field == "persistent":
            return int(getattr(entry.properties, "delivery_mode", None) == 2)
        if field == "queue":
            return self.queue(m.queue)
        if field == "exchange":
            return self.exchange(m.exchange)
        if field == "routing_key":                  # names a queue through the default exchange only
            return self.queue(m.routing_key) if m.exchange == "" else 0
        if field == "consumer_tag" and not m.consumer_tag and m.name == "Basic.Consume":
            return self.tag(self._server_tag(log, i, entry.channel, where))     # the one the server chose
        if field == "consumer_tag":
            return self.tag(m.consumer_tag)
        if field == "requeue" and not sent:         # a broker's nack (a confirm) says nothing of requeueing
            return 0
        return int(getattr(m, field))

    def _server_tag(self, log: list, i: int, ch: int, where: str) -> str:
        """The tag the server chose for a consume with an empty tag: the consume-ok that answers it (consumes
        of a channel are answered in order, so the earlier ones still unanswered are skipped). When the
        channel closes first, RabbitMQ drops the consume-ok but the consumer may exist for a moment: its
        deliveries, written before the close reached the queue, come before the close-ok or after the
        channel.close (DS-1, ER-1).
        Their tag is then the one no consume and no consume-ok of the log names, that no earlier consume
        took, and whose messages were all published where this consume's queue gets them. Without such a
        delivery, a tag of its own that no other command names."""
        def on_channel(entry, name: str, direction: str) -> bool:
            return entry.kind == "method" and entry.channel == ch and entry.direction == direction and \
                entry.method.name == name
        opened = max((j for j in range(i) if on_channel(log[j], "Channel.OpenOk", "received")), default=0)
        waiting = sum(on_channel(e, "Basic.Consume", "sent") for e in log[opened:i]) - \
            sum(on_channel(e, "Basic.ConsumeOk", "received") for e in log[opened:i])
        for entry in log[i + 1:]:
            if on_channel(entry, "Basic.ConsumeOk", "received"):
                if waiting <= 0:
                    return entry.method.consumer_tag
                waiting -= 1
            if on_channel(entry, "Channel.Close", "received") or on_channel(entry, "Channel.CloseOk", "received"):
                break
        named = {e.method.consumer_tag for e in log if e.kind == "method" and
                 e.method.name in ("Basic.Consume", "Basic.ConsumeOk")}
        queue = log[i].method.queue
        delivered: dict = {}                    # unnamed tag -> the bodies delivered with it, in order
        for entry in log[i + 1:]:
            if on_channel(entry, "Channel.OpenOk", "received"):
                break                           # the channel opened again: a consumer of the old one is gone
            if on_channel(entry, "Basic.Deliver", "received") and entry.method.consumer_tag not in named:
                delivered.setdefault(entry.method.consumer_tag, []).append(bytes(entry.body or b""))
        for tag, bodies in delivered.items():
            if tag not in self.claimed and all(self.routes.get(b) in (None, (queue,)) for b in bodies):
                self.claimed.add(tag)
                return tag
        return f"{where}: never named"

    # -- configuration ----------------------------------------------------------------------------

    def config(self, slots: int, observations: dict) -> Config:
        queues = tuple(self.specs.get(q, QueueSpec(declared=False)) for q in range(len(self.queues)))
        crashes = max(self.losses.values(), default=0)
        connects = max((sum(1 for o in seq if o[0] == "connect") for seq in observations.values()), default=0)
        # A lost connection is one whose client vanished: the broker may notice at once or late (RQ-4), and
        # holds it meanwhile in a slot of its own, one per connection that may be lost.
        lost = sum(1 for seq in observations.values() if any(o[0] == "lost" for o in seq))
        total = sum(self.published.values())
        return Config("recorded", "a recorded run", connections=max(slots, 1), channels=self.channels,
                      queues=queues or (QueueSpec(declared=False),), messages=total, requeues=total,
                      crashes=crashes, reconnects=max(connects, lost), vanishes=int(lost > 0),
                      failures=self.nacks, bad=0,
                      channels_open=False, deadlock_is_error=False)
