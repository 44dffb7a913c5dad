"""Targets a program runs against, and the runner that records what each connection saw.

Three kinds of target, one recording format (the raw client's `command_log()`, one list of TCP
connections per slot, as rabbitproof/recording/observations.py reads it):
- `InProcessTarget`: the `impl` core driven in this process, sans-IO, through `CoreConnection`, a raw
  client whose socket is the core itself. Durable writes go to a real `impl.store.Store`; a batch is
  committed only when the client finds nothing more to read, so a crash (`Crash`) right after a step's
  replies (or right after its write, before them) drops the batch still open, as a SIGKILL before the
  write would.
- `TcpTarget`: any AMQP 0-9-1 broker at host:port (the `impl` server, a private RabbitMQ node, or the
  broker behind `make conformance URL=...`); it can crash and restart only if given a harness broker.

The runner (`run_program`) sends each step in one write, waits for the reply of every synchronous
method it sent (or for the close of its channel or connection), then reads until the target has been
quiet for `target.quiet` seconds. A channel whose part of the write ends with a method the broker does
not answer (a publish or a settlement) gets a round trip the spec knows and that changes nothing, in
the same write: a basic.get of the run's probe queue, a durable queue no program touches, which is
always empty (basic.get-empty; the probe queue is declared before its first use). Its reply says the
broker's channel has handled everything before it, returns and channel errors included; so the quiet
time only covers what queues send on their own (deliveries, confirms), and can be short; before the
program's first basic.consume or confirm.select (or crash) nothing comes on its own, and no step waits
for quiet (`unasked_possible`). Between steps
it does what every client does: answers a broker's channel.close with close-ok and opens the channel
again, opens a channel it closed again, and connects again after its connection ended. A reply that has
not come within the target's timeout stops the run with "no answer" only if the broker is silent rather
than slow: a round trip on a connection of its own, not recorded, tells them apart (`TcpTarget.slow`).

After the last step every client makes that round trip on each of its channels, reads until the target
has been quiet for `target.final_quiet` seconds, and marks its recording there (an entry of kind
"quiet"): the spec requires the broker to owe nothing at that mark (no delivery within prefetch, no
confirm, no commit-ok or close-ok still to come: `spec/trace.py`), then the client closes.
"""
from __future__ import annotations

import os
import secrets
import select
import shutil
import struct
import tempfile
import time
from dataclasses import dataclass, field

from pamqp import commands, frame

from rabbitproof.spec.frames import METHODS

from rabbitproof.conformance import programs as P
from rabbitproof.recording.observations import pamqp_name
from rabbitproof.recording.rawclient import (ChannelClosed, ConnectionLost, ProtocolViolation, RawConnection,
                                             ServerClosed, TraceEvent, persistent, transient)

# Replies that end the wait for a synchronous method (spec.frames.METHODS, by pamqp's names).
REPLIES = frozenset(pamqp_name(m.name) for m in METHODS if m.answers)


class TargetError(Exception):
    """The target cannot be used (unreachable, refused the credentials, closed the connection at once)."""


# ---------------------------------------------------------------- the in-process core

class CoreConnection(RawConnection):
    """A raw client whose peer is an `impl.core` connection in this process: what it writes is fed to
    the core, what the core writes is parsed as if read from a socket. Recording is the raw client's."""

    def __init__(self, target: "InProcessTarget", label: str) -> None:
        self.target = target
        self.core = target.core_module.Connection(target.broker, True)
        super().__init__("in-process", 0, label=label, timeout=1.0, sock=_CoreSocket(self))
        self.pending = bytearray()          # what the core wrote that the client has not read yet
        self.lost = False

    def pump(self, timeout: float | None = None) -> int:
        if self.eof:
            raise ConnectionLost(f"{self.label}: connection already closed by the broker")
        self.target.move_output()
        if not self.pending and not self.lost:
            self.target.commit()            # nothing to read: the batch reaches the disk
        if self.pending:
            data = bytes(self.pending)
            self.pending.clear()
            self._buffer += data
            self._parse()
            return len(data)
        if self.lost or self.core.should_close:
            self._end_of_stream()
            raise ConnectionLost(f"{self.label}: the broker closed the connection")
        return 0

    def abort(self) -> None:
        if not self.lost:
            self.lost = True
            self.core.connection_lost()
            self.target.move_output()


class _CoreSocket:
    """What `RawConnection` writes to: the core connection's input."""

    def __init__(self, owner: CoreConnection) -> None:
        self.owner = owner

    def sendall(self, data: bytes) -> None:
        if self.owner.lost or self.owner.core.should_close:
            raise BrokenPipeError("the core closed this connection")
        self.owner.core.receive_data(data)
        self.owner.target.move_output()

    def close(self) -> None:
        self.owner.abort()


class InProcessTarget:
    """The `impl` core in this process, with a real store in a temporary directory (crashes drop the
    batch not yet committed and recover from the store, as `impl.server` does on start)."""

    name = "in-process"
    quiet = 0.0
    final_quiet = 0.0
    crashes = True

    def __init__(self, core_module=None) -> None:
        import rabbitproof.impl.core as core
        from rabbitproof.impl.store import Store
        self.core_module = core_module or core
        self.Store = Store
        self.dir = tempfile.mkdtemp(prefix="rabbitproof-conformance-")
        self.store = Store(self.dir)
        self.broker = self._new_broker()
        self.conns: list[CoreConnection] = []
        self.restart_seconds: list[float] = []     # per crash: until the broker has recovered the store

    def _new_broker(self):
        broker = self.core_module.Broker()
        broker.recover(self.store.load())
        return broker

    def connect(self, label: str) -> RawConnection:
        conn = CoreConnection(self, label)
        self.conns.append(conn)
        conn.handshake("guest", "guest")
        return conn

    def move_output(self) -> None:
        """Hand what the core wrote to each connection's client, and run the core's due timers."""
        self.broker.run_timers()
        for core in self.broker.take_dirty():
            data = core.data_to_send()
            for conn in self.conns:
                if conn.core is core and not conn.lost:
                    conn.pending += data

    def commit(self) -> None:
        batch = self.broker.take_batch()
        if batch is not None:
            ops = batch.writes()
            if ops:
                self.store.write(ops)
            self.broker.batch_committed(batch)
            self.move_output()

    def crash(self) -> None:
        """SIGKILL: the open batch is lost, every connection drops, the broker recovers from the store."""
        started = time.monotonic()
        for conn in self.conns:
            conn.lost = True
        self.conns = []
        self.store.db.close()
        self.store = self.Store(self.dir)
        self.broker = self._new_broker()
        self.restart_seconds.append(time.monotonic() - started)

    def close(self) -> None:
        self.store.db.close()
        shutil.rmtree(self.dir, ignore_errors=True)


# ---------------------------------------------------------------- brokers over TCP

REPLY_TIMEOUT = 5.0        # seconds a reply may take before a run stops with "no answer" (--reply-timeout)
# A reply late by the timeout counts as "no answer" only when the broker is silent, not slow: a round trip
# on a connection of its own (not recorded) that takes more than this share of the timeout shows a slow
# broker (a healthy one answers in milliseconds), and the wait goes on, up to EXTENSIONS timeouts more.
SLOW_SHARE = 0.1
EXTENSIONS = 11


class TcpTarget:
    """A broker at host:port. `broker` (a harness broker, rabbitproof/brokers/__init__.py) lets programs crash
    it (SIGKILL) and restart it; `quiet` is how long a step reads after its last reply, `final_quiet`
    how long the end of a program reads after its last round trips, `timeout` how long a reply may take
    before the run stops with "no answer"."""

    def __init__(self, name: str, host: str, port: int, user: str = "guest", password: str = "guest",
                 vhost: str = "/", *, broker=None, quiet: float = 0.003, final_quiet: float = 0.02,
                 timeout: float = REPLY_TIMEOUT) -> None:
        self.name, self.host, self.port = name, host, port
        self.user, self.password, self.vhost = user, password, vhost
        self.broker = broker
        self.crashes = broker is not None
        self.quiet = quiet
        self.final_quiet = final_quiet
        self.timeout = timeout
        self.restart_seconds: list[float] = []     # per crash: SIGKILL until the broker is up again

    @classmethod
    def of(cls, name: str, broker, quiet: float = 0.003, timeout: float = REPLY_TIMEOUT) -> "TcpTarget":
        return cls(name, broker.host, broker.port, broker.user, broker.password, broker=broker, quiet=quiet,
                   timeout=timeout)

    def connect(self, label: str) -> RawConnection:
        return RawConnection.connect(self.host, self.port, self.user, self.password, vhost=self.vhost,
                                     label=label, timeout=self.timeout)

    def slow(self) -> bool:
        """Whether the broker is slow rather than silent: a new connection's handshake, a channel opened and
        the connection closed take more than SLOW_SHARE of the timeout. A broker that does not answer
        them within the timeout is silent, not slow."""
        started = time.monotonic()
        try:
            conn = self.connect(f"{self.name} is it slow")
            try:
                conn.channel_open(1)
            finally:
                conn.close(timeout=self.timeout)
        except (OSError, ConnectionLost, ProtocolViolation, ServerClosed, TimeoutError):
            return False
        return time.monotonic() - started > SLOW_SHARE * self.timeout

    def crash(self) -> None:
        """SIGKILL the broker's process (impl.server, or RabbitMQ's beam: what it has not written to disk
        is lost) and start it again on the same port and data; the clients find their connections ended
        and connect again (`run_program`)."""
        started = time.monotonic()
        self.broker.kill()
        self.broker.start()
        self.restart_seconds.append(time.monotonic() - started)

    def close(self) -> None:
        pass


# ---------------------------------------------------------------- the runner

def slow(target) -> bool:
    """Whether a reply late by the target's timeout is worth waiting on (`TcpTarget.slow`); a target
    that cannot tell (in process) is never slow."""
    return hasattr(target, "slow") and target.slow()


@dataclass
class Run:
    """What running a program recorded: per slot, the command log of each TCP connection it made."""

    program: P.Program
    target: str
    slots: list
    names: dict                             # queue index -> real name
    seconds: float = 0.0
    steps: int = 0
    crashes: int = 0                        # crashes the target went through (a target may not crash)
    step_marks: list = field(default_factory=list)  # (slot, connection, log length) at each step's start
    no_answer: str = ""                     # "no answer within N s after step k": the run stopped there


class _Slot:
    """One client: its current connection and the logs of the connections it made before."""

    def __init__(self, target, index: int, run_id: str) -> None:
        self.target, self.index, self.run_id = target, index, run_id
        self.logs: list = []
        self.conn: RawConnection | None = None
        self.closing: set[int] = set()      # channels the client closed, awaiting close-ok
        self.unanswered = False             # the last write's replies did not all come within the timeout
        self.connect()

    def label(self) -> str:
        return f"{self.target.name} c{self.index}"

    def connect(self) -> None:
        if self.conn is not None:
            self.logs.append(self.conn.command_log())
        self.conn = self.target.connect(self.label())
        self.closing = set()
        self.write([(ch, commands.Channel.Open()) for ch in P.CHANNELS], {ch: 1 for ch in P.CHANNELS})

    def dead(self) -> bool:
        return self.conn.eof or getattr(self.conn, "lost", False)

    def write(self, frames: list, waiting: dict, quiet: float | None = None) -> None:
        """Send frames in one write; read until every channel in `waiting` got its replies (or closed),
        then until quiet."""
        try:
            send_frames(self.conn, frames)
        except OSError:
            self.settle(0.0)
            return
        self.read(waiting, quiet)

    def read(self, waiting: dict, quiet: float | None) -> None:
        conn = self.conn
        seen = len(conn.trace)
        deadline = time.monotonic() + self.target.timeout if hasattr(self.target, "timeout") else None
        extensions = 0
        try:
            while any(waiting.values()):
                for event in conn.trace[seen:]:
                    seen_name = event.name
                    if event.direction != "received" or event.kind != "frame":
                        continue
                    if seen_name in REPLIES and waiting.get(event.channel):
                        waiting[event.channel] -= 1
                    if seen_name in ("Channel.Close", "Channel.CloseOk"):
                        waiting[event.channel] = 0
                    if seen_name in ("Connection.Close", "Connection.CloseOk"):
                        waiting.clear()
                seen = len(conn.trace)
                if not any(waiting.values()):
                    break
                if deadline is not None and time.monotonic() > deadline:
                    if conn.pump(0):
                        continue            # frames came while this process was not running: read them first
                    if extensions == EXTENSIONS or not slow(self.target):
                        break               # silent, not slow (TcpTarget.slow)
                    extensions += 1
                    deadline = time.monotonic() + self.target.timeout
                if not conn.pump(0.05) and deadline is None:
                    break                   # in process: nothing more will come
            if quiet is not None:
                self.settle(quiet)
        except ConnectionLost:
            pass
        self.unanswered = any(waiting.values()) and not self.dead()     # an ended connection answers nothing

    def settle(self, quiet: float) -> None:
        try:
            while not self.conn.eof and self.conn.pump(quiet):
                pass
        except ConnectionLost:
            pass

    def housekeeping(self) -> None:
        """Answer what the broker closed, open again what is closed, connect again if the connection ended."""
        conn = self.conn
        received = [c for c in conn.inbox]
        conn.inbox.clear()
        broker_closed: list[int] = []
        for command in received:
            name = command.method.name
            if name == "Connection.Close":
                try:
                    conn.send(0, commands.Connection.CloseOk())
                except OSError:
                    pass
                self.settle(0.0)
                conn.abort()
                self.connect()
                return
            if name == "Connection.CloseOk":
                conn.abort()
                self.connect()
                return
            if name == "Channel.Close" and command.channel not in broker_closed:
                broker_closed.append(command.channel)
            if name == "Channel.CloseOk":
                self.closing.discard(command.channel)
                if command.channel not in broker_closed and -command.channel not in broker_closed:
                    broker_closed.append(-command.channel)      # closed by the client: open again
        if self.dead():
            conn.abort()
            self.connect()
            return
        frames: list = []
        for ch in broker_closed:
            if ch > 0:
                if ch in self.closing:
                    continue            # it answers our own close: its close-ok follows
                frames.append((ch, commands.Channel.CloseOk()))
            frames.append((abs(ch), commands.Channel.Open()))
        if frames:
            self.write(frames, {abs(ch): 1 for ch in broker_closed if not (ch > 0 and ch in self.closing)},
                       self.target.quiet)
            self.housekeeping()

    def finish(self) -> list:
        if self.conn is not None:
            try:    # the target's own timeout: a loaded broker may take more than a second to close
                self.conn.close(timeout=getattr(self.target, "timeout", 1.0))
            except (OSError, ProtocolViolation):
                self.conn.abort()
            self.logs.append(self.conn.command_log())
            self.conn = None
        return self.logs


def send_frames(conn: RawConnection, frames: list) -> None:
    """`RawConnection.send_frames`, but delivery tags above 2^63-1 are written too (pamqp encodes the
    64-bit tag as a signed number and refuses them); each frame is recorded as the raw client does."""
    data = b"".join(_marshal(ch, f) for ch, f in frames)
    now = time.monotonic()
    conn.trace.extend(TraceEvent("sent", "frame", ch, f, None, now) for ch, f in frames)
    conn.sock.sendall(data)


_SETTLE_METHODS = {commands.Basic.Ack: (60, 80), commands.Basic.Reject: (60, 90), commands.Basic.Nack: (60, 120)}


def _marshal(ch: int, value) -> bytes:
    ids = _SETTLE_METHODS.get(type(value))
    if ids is None or value.delivery_tag < 2**63:
        return frame.marshal(value, ch)
    if isinstance(value, commands.Basic.Ack):
        bits = int(value.multiple)
    elif isinstance(value, commands.Basic.Reject):
        bits = int(value.requeue)
    else:
        bits = int(value.multiple) | int(value.requeue) << 1
    payload = struct.pack(">HHQB", ids[0], ids[1], value.delivery_tag, bits)
    return struct.pack(">BHI", 1, ch, len(payload)) + payload + b"\xce"


def frames_of(op, conn: RawConnection, names: dict, bodies: list) -> list:
    """The frames of one method, with its real names; publishes get the next body."""
    if isinstance(op, P.Publish):
        bodies.append(f"{names['run']}.{len(bodies) + 1}".encode())
        exchange = {"": "", "amq.fanout": "amq.fanout", "missing": names["exchange"]}[op.exchange]
        method = commands.Basic.Publish(exchange=exchange, routing_key=names[op.queue], mandatory=op.mandatory,
                                        immediate=op.immediate)
        return conn.content_frames(op.ch, method, bodies[-1], persistent() if op.persistent else transient())
    return [(getattr(op, "ch", 0), method_of(op, names))]


def method_of(op, names: dict):
    """The pamqp method of one program method (publishes aside)."""
    if isinstance(op, P.Declare):
        flags = names["flags"][op.queue]
        return commands.Queue.Declare(queue=names[op.queue], durable=flags.durable, exclusive=flags.exclusive)
    if isinstance(op, P.Redeclare):
        return commands.Queue.Declare(queue=names[op.queue], durable=op.durable, exclusive=op.exclusive)
    if isinstance(op, P.Bind):
        return commands.Queue.Bind(queue=names[op.queue], exchange="amq.fanout", routing_key="")
    if isinstance(op, P.Purge):
        return commands.Queue.Purge(queue=names[op.queue])
    if isinstance(op, P.Delete):
        return commands.Queue.Delete(queue=names[op.queue], if_unused=op.if_unused, if_empty=op.if_empty)
    if isinstance(op, P.Consume):
        tag = f"{names['run']}-{op.tag}" if op.tag else ""
        return commands.Basic.Consume(queue=names[op.queue], consumer_tag=tag, no_ack=op.no_ack,
                                      exclusive=op.exclusive)
    if isinstance(op, P.Cancel):
        return commands.Basic.Cancel(consumer_tag=f"{names['run']}-{op.tag}" if op.tag else "")
    if isinstance(op, P.Get):
        return commands.Basic.Get(queue=names[op.queue], no_ack=op.no_ack)
    if isinstance(op, P.Ack):
        return commands.Basic.Ack(delivery_tag=op.tag, multiple=op.multiple)
    if isinstance(op, P.Nack):
        return commands.Basic.Nack(delivery_tag=op.tag, multiple=op.multiple, requeue=op.requeue)
    if isinstance(op, P.Reject):
        return commands.Basic.Reject(delivery_tag=op.tag, requeue=op.requeue)
    if isinstance(op, P.Qos):
        return commands.Basic.Qos(prefetch_size=op.size, prefetch_count=op.count, global_=op.global_)
    if isinstance(op, P.Recover):
        return commands.Basic.Recover(requeue=op.requeue)
    if isinstance(op, P.ConfirmSelect):
        return commands.Confirm.Select()
    if isinstance(op, P.TxSelect):
        return commands.Tx.Select()
    if isinstance(op, P.TxCommit):
        return commands.Tx.Commit()
    if isinstance(op, P.TxRollback):
        return commands.Tx.Rollback()
    if isinstance(op, P.CloseChannel):
        return commands.Channel.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0)
    if isinstance(op, P.OpenChannel):
        return commands.Channel.Open()
    if isinstance(op, P.CloseOkChannel):
        return commands.Channel.CloseOk()
    if isinstance(op, P.CloseConnection):
        return commands.Connection.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0)
    raise TypeError(f"not a program method: {op!r}")


# Methods the broker does not answer: a channel whose part of a write ends with one gets a probe.
_UNANSWERED = (P.Publish, P.Ack, P.Nack, P.Reject)


class _Probe:
    """The run's probe queue (module docstring): its name, and whether a declare-ok has shown it exists."""

    def __init__(self, names: dict) -> None:
        self.name = f"{names['run']}-probe"
        self.declared = False

    def frames(self, channels) -> list:
        """The round trip on each channel (with the probe queue's declare first, until it exists)."""
        out: list = []
        for ch in channels:
            if not self.declared:
                out.append((ch, commands.Queue.Declare(queue=self.name, durable=True)))
            out.append((ch, commands.Basic.Get(queue=self.name, no_ack=True)))
        return out

    def replies(self, channels) -> dict:
        return {ch: 1 if self.declared else 2 for ch in channels}

    def seen(self, conn: RawConnection) -> None:
        """Note a declare-ok of the probe queue (a declare on a closing channel is dropped)."""
        if not self.declared:
            self.declared = any(e.direction == "received" and e.name == "Queue.DeclareOk" and
                                getattr(e.frame, "queue", "") == self.name for e in conn.trace)


def probed_channels(ops: tuple) -> list:
    """The channels whose part of a write ends with a method the broker does not answer; none when the
    write closes its connection."""
    last: dict = {}
    for op in ops:
        if isinstance(op, P.CloseConnection):
            return []
        if hasattr(op, "ch"):
            last[op.ch] = op
    return [ch for ch, op in sorted(last.items()) if isinstance(op, _UNANSWERED)]


def quiesce(slots: list, target, probe: _Probe, unasked: bool = True) -> None:
    """The end of a program: a round trip on every channel of every client, the confirms still owed
    (PC-2: `unconfirmed`; for no longer than the target's timeout, or longer while the broker is slow:
    `TcpTarget.slow`), then reading until the target has
    been quiet for `target.final_quiet` (when the broker may send something unasked: `unasked_possible`;
    otherwise the round trips have brought everything); each recording gets its "quiet" mark there."""
    for slot in slots:
        if slot.dead():
            continue
        slot.write(probe.frames(P.CHANNELS), probe.replies(P.CHANNELS), None)
        probe.seen(slot.conn)
    deadline = time.monotonic() + getattr(target, "timeout", 0.0)
    extensions = 0
    while any(not slot.dead() and unconfirmed(slot.conn) for slot in slots):
        if time.monotonic() >= deadline:
            if extensions == EXTENSIONS or not slow(target):
                break                   # silent, not slow (TcpTarget.slow)
            extensions += 1
            deadline = time.monotonic() + target.timeout
        settle_together(slots, 0.001)
    settle_together(slots, target.final_quiet if unasked else 0.0)
    now = time.monotonic()
    for slot in slots:
        if not slot.dead():
            slot.conn.trace.append(TraceEvent("sent", "quiet", 0, None, None, now))


def unconfirmed(conn: RawConnection) -> int:
    """How many publishes on the connection's confirm-mode channels still open no basic.ack or basic.nack
    has confirmed (PC-1, PC-2, PC-3); a channel that closed owes nothing more (PC-9)."""
    channels: dict = {}                 # ch -> [publishes since confirm.select, confirmed sequence numbers]
    for event in conn.trace:
        if event.kind != "frame":
            continue
        name, ch, sent = event.name, event.channel, event.direction == "sent"
        if name in ("Channel.Open", "Channel.Close", "Channel.CloseOk"):
            channels.pop(ch, None)
        elif name == "Confirm.Select" and sent:
            channels.setdefault(ch, [0, set()])
        elif name == "Basic.Publish" and sent and ch in channels:
            channels[ch][0] += 1
        elif name in ("Basic.Ack", "Basic.Nack") and not sent and ch in channels:
            tag, done = event.frame.delivery_tag, channels[ch][1]
            done.update(range(1, tag + 1) if event.frame.multiple else (tag,))
    return sum(published - len(done & set(range(1, published + 1))) for published, done in channels.values())


def settle_together(slots: list, quiet: float) -> None:
    """Read every client's connection until none has received anything for `quiet` seconds (in process,
    until nothing more is there)."""
    if quiet <= 0 or not all(hasattr(slot.conn, "sock") and hasattr(slot.conn.sock, "fileno") for slot in slots):
        for slot in slots:
            slot.settle(quiet)
        return
    end = time.monotonic() + quiet
    while True:
        live = {slot.conn.sock: slot for slot in slots if not slot.dead()}
        left = end - time.monotonic()
        if not live or left <= 0:
            return
        readable, _, _ = select.select(list(live), [], [], left)
        for sock in readable:
            try:
                live[sock].conn.pump(0)
            except ConnectionLost:
                pass
        if readable:
            end = time.monotonic() + quiet


# What makes a broker send frames no client method asks for: a consumer (deliveries, a cancel when its
# queue goes), confirm mode (confirms) and a crash (what recovery brings). Before any of them the round
# trips of a step (its replies, and the probe's on every channel that sent a publish or a settlement)
# bring everything the broker sends, and the quiet time after it would only wait.
_UNASKED = (P.Consume, P.ConfirmSelect)


def unasked_possible(step) -> bool:
    """Whether after ``step`` the broker may send frames no client asked for (_UNASKED)."""
    return isinstance(step, P.Crash) or any(isinstance(op, _UNASKED) for op in step.ops)


def run_program(program: P.Program, target) -> Run:
    """Run a program on a target and return its recording. Queue names are unique to this run (a broker
    over TCP is shared by many runs); the run's queues are deleted at the end, outside the recording."""
    run_id = f"rp{os.getpid()}x{secrets.token_hex(3)}"
    names: dict = {q: f"{run_id}-q{q}" for q in range(P.QUEUES + 1)}
    names.update(run=run_id, exchange=f"{run_id}-missing", flags=program.queues)
    probe = _Probe(names)
    bodies: list = []
    started = time.monotonic()
    slots = [_Slot(target, c, run_id) for c in range(program.connections)]
    steps = crashes = 0
    crash_next = [s if isinstance(s, P.Crash) else None for s in program.steps[1:]] + [None]
    no_answer = ""
    unasked = False                 # the broker may send frames unasked from here on (unasked_possible)
    for step, crash_follows in zip(program.steps, crash_next):
        steps += 1
        unasked = unasked or unasked_possible(step)
        if isinstance(step, P.Crash):
            if not target.crashes:
                continue
            target.crash()
            crashes += 1
            for slot in slots:      # what the broker sent before it died is read before anyone reconnects
                slot.settle(0.0)
                if not slot.dead():
                    slot.conn.abort()
                    slot.settle(0.0)
            for slot in slots:
                slot.connect()
            continue
        slot = slots[step.conn]
        frames: list = []
        waiting: dict = {}
        for op in step.ops:
            frames += frames_of(op, slot.conn, names, bodies)
            if isinstance(op, P.SYNCHRONOUS):
                waiting[op.ch] = waiting.get(op.ch, 0) + 1
            if isinstance(op, P.CloseChannel):
                slot.closing.add(op.ch)
            if isinstance(op, P.CloseConnection):
                waiting[0] = 1
        # A crash is seen only by the connections it ends: one the client closed is opened again first,
        # so the recording always shows the crash (a client's close waits for its close-ok).
        closes = any(isinstance(op, P.CloseConnection) for op in step.ops)
        if crash_follows is not None and not crash_follows.wait and not closes:
            waiting = {}                    # the crash comes as soon as the write is sent
        elif crash_follows is None:
            probed = probed_channels(step.ops)
            frames += probe.frames(probed)
            for ch, n in probe.replies(probed).items():
                waiting[ch] = waiting.get(ch, 0) + n
        slot.unanswered = False
        slot.write(frames, waiting, None)
        probe.seen(slot.conn)
        if slot.unanswered and hasattr(target, "timeout") and not no_answer:
            no_answer = f"no answer within {target.timeout:g} s after step {steps} (connection {step.conn})"
        if crash_follows is None:
            settle_together(slots, target.quiet if unasked else 0.0)
            for s in slots:
                s.housekeeping()
        elif closes:
            slot.housekeeping()
    if not no_answer:
        quiesce(slots, target, probe, unasked)
    recorded = [slot.finish() for slot in slots]
    seconds = time.monotonic() - started
    _cleanup(target, names, probe)
    return Run(program, target.name, recorded, names, seconds, steps, crashes, no_answer=no_answer)


def _cleanup(target, names: dict, probe: _Probe) -> None:
    """Delete the run's queues (not part of the recording)."""
    if isinstance(target, InProcessTarget):
        return
    try:
        conn = target.connect(f"{target.name} cleanup")
    except (OSError, ConnectionLost, ProtocolViolation, Exception):
        return
    queues = [names[q] for q in range(P.QUEUES)] + ([probe.name] if probe.declared else [])
    try:
        for ch, name in enumerate(queues, 1):
            # a channel per queue: a delete the broker refuses (a queue the program deleted, on a broker
            # that answers 404) closes its own channel only, and the other queues still go; a queue left
            # bound to amq.fanout would take the fanout publishes of later programs
            conn.channel_open(ch)
            try:
                conn.rpc(ch, commands.Queue.Delete(queue=name))
            except ChannelClosed:
                pass
    except Exception:
        pass
    finally:
        conn.close(timeout=1.0)
