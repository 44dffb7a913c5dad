"""One try at an execution on a real broker: the plan's acts, in order, by real clients (the raw client of
rabbitproof.recording.rawclient, one connection at a time per client of the setup, each through its own
``Link``), each wait bounded by the step timeout; then the queues are read for what is left in them and
emptied. The try ends early where the broker went another way: a frame other than the execution's next one
on a channel, nothing within the timeout, a connection the broker closed. Its recording is everything the
clients sent and received, in the recording format of `rabbitproof trace`."""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Protocol

from pamqp import commands, heartbeat

from rabbitproof.recording.rawclient import (
    ChannelClosed, Command, ConnectionClosed, ConnectionLost, ProtocolViolation, RawConnection,
)
from rabbitproof.recording.observations import pamqp_name

from rabbitproof.replay import queues
from rabbitproof.replay.queues import Where
from rabbitproof.replay.naming import Names, to_wire
from rabbitproof.replay.observed import Observed
from rabbitproof.replay.plan import (
    AWAIT, CHANNEL_ERROR, CONNECT, CRASH, DETECT, LOSS, RESTART, SEND, VANISH, WORK, Act, Plan,
)
from rabbitproof.replay.proxy import Link

VANISH_HEARTBEAT = 1    # seconds: negotiated by a client the execution makes vanish, so the broker notices soon
QUIET = 0.5             # seconds without a frame after the last act before the run is read
DISK_PAUSE = 0.05       # seconds before a crash that follows a disk write, doubled at every try (at most 2 s)
UNKNOWN_TAG_GAP = 1000  # a channel error is made with an ack of a delivery tag this far above any given out


def spec_name(name: str) -> str:
    """The AMQP name of a pamqp method name: ``Basic.ConsumeOk`` -> ``basic.consume-ok``."""
    cls, method = name.split(".")
    return cls.lower() + "." + re.sub(r"(?<!^)([A-Z])", r"-\1", method).lower()


class Crasher(Protocol):
    """What kills the broker and starts it again (--kill-cmd / --start-cmd, or a test's own broker)."""

    def kill(self) -> None: ...

    def start(self) -> object: ...


class WentAnotherWay(Exception):
    """The broker did something else than the execution at one act; the message says what."""

    def __init__(self, act: Act, what: str) -> None:
        self.act = act
        super().__init__(f"step {act.step}: {what}")


@dataclass
class Connection:
    """One real connection of a client: its link, its raw connection and the channels open on it."""

    link: Link
    raw: RawConnection
    number: int
    heartbeat: int = 0
    open: set = field(default_factory=set)
    alive: bool = True
    vanished: bool = False
    beat_at: float = 0.0


@dataclass
class Try:
    """What one try did: the acts it finished, why it stopped early ("" when it did them all), its
    recording (slots and the queues that existed before), the applications' side and its seconds."""

    done: int
    stopped: str
    stopped_at: int | None
    slots: list
    existing: dict
    observed: Observed
    seconds: float


class Replayer:
    """The try itself: ``run()`` acts the plan out and returns a ``Try``."""

    def __init__(self, plan: Plan, names: Names, durable: tuple[bool, ...], processing: dict, where: Where,
                 crasher: Crasher | None, step_timeout: float, predeclared: tuple[int, ...],
                 attempt: int = 1) -> None:
        self.plan, self.names, self.where, self.crasher = plan, names, where, crasher
        self.durable, self.step_timeout, self.predeclared = durable, step_timeout, predeclared
        self.observed = Observed(processing)
        self.connections: dict[int, list[Connection]] = {c: [] for c in range(plan.clients)}
        self.broker_down = False
        self.attempt = attempt

    # -- the acts -----------------------------------------------------------------------------------

    def run(self) -> Try:
        started = time.monotonic()
        try:
            existing = queues.declare(self.where, self.names, self.durable, self.predeclared, self.step_timeout)
        except queues.BrokerUnusable as e:
            return Try(0, f"the queues could not be declared: {e}", 0, [], {}, self.observed,
                       time.monotonic() - started)
        if any(a.kind == CRASH for a in self.plan.acts):
            queues.settle_declarations(self.crasher)
        done, stopped, stopped_at = 0, "", None
        try:
            for c in range(self.plan.clients):
                self.connect(c, -1)
            for i, act in enumerate(self.plan.acts):
                self.do(i, act)
                done += 1
            self.quiet()
        except WentAnotherWay as e:
            stopped, stopped_at = str(e), e.act.step
        finally:
            self.hang_up()
            if self.broker_down:        # the execution ends with the broker down: up again for the next
                self.crasher.start()
                self.broker_down = False
        self.observed.left = queues.read_and_empty(self.where, self.names, self.step_timeout)
        slots = [[c.raw.command_log() for c in self.connections[client]] for client in range(self.plan.clients)]
        for client, logs in enumerate(slots):
            for number, log in enumerate(logs):
                for entry in log:
                    if entry.direction == "received" and entry.name in ("Basic.Deliver", "Basic.GetOk"):
                        msg = self.names.message_of(entry.body)
                        self.observed.arrived.setdefault((client, number, entry.channel), []).append(msg or "")
        return Try(done, stopped, stopped_at, slots, existing, self.observed, time.monotonic() - started)

    def do(self, index: int, act: Act) -> None:
        if act.kind == CONNECT:
            self.connect(act.conn, index, act)
        elif act.kind == SEND:
            self.send(act)
        elif act.kind == AWAIT:
            self.receive(act)
        elif act.kind == WORK:
            self.observed.work(self.key(act), self.real_tag(act, act.tag))
        elif act.kind == LOSS:
            conn = self.current(act)
            conn.link.cut()
            conn.raw.abort()
            conn.alive = False
        elif act.kind == VANISH:
            conn = self.current(act)
            conn.link.freeze()
            conn.vanished = True
        elif act.kind == DETECT:
            self.detect(act)
        elif act.kind == CRASH:
            self.crash(act)
        elif act.kind == RESTART:
            try:
                self.crasher.start()
            except Exception as e:      # the user's start command: its failure is the replay's to report
                raise WentAnotherWay(act, f"the broker did not start again: {e}") from None
            self.broker_down = False
        elif act.kind == CHANNEL_ERROR:
            conn = self.current(act)
            given = [t for (c, n, ch, _), t in self.names.delivery_tags.items()
                     if (c, n, ch) == (act.conn, conn.number, act.channel)]
            self.write(act, conn, [(act.channel, commands.Basic.Ack(delivery_tag=max(given, default=0)
                                                                    + UNKNOWN_TAG_GAP))])

    def connect(self, client: int, index: int, act: Act | None = None) -> None:
        number = len(self.connections[client])
        beat = VANISH_HEARTBEAT if client in self.plan.heartbeats else 0
        link = Link(self.where.host, self.where.port)
        try:
            raw = RawConnection.connect("127.0.0.1", link.port, self.where.user, self.where.password,
                                        vhost=self.where.vhost, heartbeat=beat, label=f"c{client}",
                                        timeout=self.step_timeout)
        except (OSError, ConnectionLost, ConnectionClosed, TimeoutError) as e:
            link.cut()
            raise WentAnotherWay(act or Act(CONNECT, 0, client), f"c{client} could not connect: {e}") from None
        conn = Connection(link, raw, number, raw.heartbeat, beat_at=time.monotonic())
        self.connections[client].append(conn)
        for ch in self.plan.opens.get((client, index), ()):
            try:
                raw.channel_open(ch)
            except (ConnectionLost, ConnectionClosed, ChannelClosed, TimeoutError) as e:
                raise WentAnotherWay(act or Act(CONNECT, 0, client), f"c{client} could not open channel {ch}: {e}")
            conn.open.add(ch)

    def send(self, act: Act) -> None:
        conn = self.current(act)
        frames = to_wire(act.frame, self.names, conn.raw, lambda ch, tag: self.real_tag(act, tag))
        if act.dropped:
            conn.link.drop_from_client()
        self.write(act, conn, frames)
        key, method = self.key(act), act.frame.method
        if method == "confirm.select":
            self.observed.select(key, "confirm")
        elif method == "tx.select":
            self.observed.select(key, "tx")
        elif method == "tx.commit":
            self.observed.commit(key)
        elif method == "basic.publish":
            self.observed.publish(key, str(act.frame.get("msg")), act.again)
        elif method in ("basic.ack", "basic.nack", "basic.reject"):
            method_frame = frames[0][1]
            self.observed.settle(key, int(method_frame.delivery_tag), bool(getattr(method_frame, "multiple", False)),
                                 method == "basic.ack")
        elif method == "channel.open":
            conn.open.add(act.channel)
        elif method in ("channel.close", "channel.close-ok"):
            conn.open.discard(act.channel)

    def write(self, act: Act, conn: Connection, frames: list) -> None:
        if not conn.alive:
            raise WentAnotherWay(act, f"c{act.conn}'s connection is already closed")
        try:
            conn.raw.send_frames(frames)
        except OSError as e:
            raise WentAnotherWay(act, f"c{act.conn} could not write: the connection is closed ({e})") from None

    def receive(self, act: Act) -> None:
        conn = self.current(act)
        command = self.next_command(act, conn)
        expected = pamqp_name(act.frame.method)
        msg = act.frame.get("msg")
        got = self.names.message_of(command.body)
        if command.name != expected or (msg is not None and got != str(msg)):
            raise WentAnotherWay(act, f"c{act.conn}.ch{act.channel} received {self.shown(command)} where the "
                                      f"execution receives {act.frame.text()}")
        key, m = self.key(act), command.method
        if isinstance(m, (commands.Basic.Deliver, commands.Basic.GetOk)):
            self.names.delivery_tags[key + (int(act.frame.get("delivery_tag", 0)),)] = int(m.delivery_tag)
            self.observed.receive(key, got or "", int(m.delivery_tag))
        elif isinstance(m, (commands.Basic.Ack, commands.Basic.Nack)):
            self.observed.confirmed(key, int(m.delivery_tag), bool(m.multiple), isinstance(m, commands.Basic.Ack))
        elif isinstance(m, commands.Tx.CommitOk):
            self.observed.commit_ok(key)
        elif isinstance(m, commands.Channel.Close):
            conn.open.discard(act.channel)

    def next_command(self, act: Act, conn: Connection) -> Command:
        """The next command on the act's channel, in arrival order, within the step timeout. Deliveries
        the execution has its client receive later (or never) are passed over and stay unread in the
        inbox, as an application leaves a delivery it is not ready for in its client's buffer; anything
        else is the channel's next frame."""
        deadline = time.monotonic() + self.step_timeout
        awaited = pamqp_name(act.frame.method)
        msg = act.frame.get("msg")
        while True:
            for command in conn.raw.inbox:
                if command.channel != act.channel and not isinstance(command.method, commands.Connection.Close):
                    continue
                if (isinstance(command.method, commands.Basic.Deliver)
                        and not (command.name == awaited and self.names.message_of(command.body) == msg)):
                    continue
                conn.raw.inbox.remove(command)
                return command
            if time.monotonic() > deadline:
                passed = [self.shown(c) for c in conn.raw.inbox if c.channel == act.channel]
                raise WentAnotherWay(act, f"c{act.conn}.ch{act.channel} waited {self.step_timeout:g} s for "
                                          f"{act.frame.text()}; it did not come"
                                          + (f" (it received {', '.join(passed)} instead)" if passed else ""))
            self.beat()
            try:
                conn.raw.pump(0.05)
            except ConnectionLost:
                raise WentAnotherWay(act, f"the broker closed c{act.conn}'s connection while it waited for "
                                          f"{act.frame.text()}") from None
            except ProtocolViolation as e:
                raise WentAnotherWay(act, f"c{act.conn} received what it cannot decode: {e}") from None

    def detect(self, act: Act) -> None:
        """Wait for the broker to close the connection of the client that vanished first and is not yet
        noticed (the execution names it by the slot it holds it in, not by its client)."""
        vanished = [c for conns in self.connections.values() for c in conns if c.vanished and c.alive]
        if not vanished:
            raise WentAnotherWay(act, "no vanished connection is left for the broker to notice")
        conn = vanished[0]
        deadline = time.monotonic() + self.step_timeout + 3 * max(conn.heartbeat, 1)
        while not conn.link.broker_closed.wait(0.05):
            self.beat()
            if time.monotonic() > deadline:
                raise WentAnotherWay(act, f"the broker did not close the vanished connection within "
                                          f"{deadline - time.monotonic() + self.step_timeout:g} s")
        conn.alive = False

    def crash(self, act: Act) -> None:
        if self.crasher is None:
            raise WentAnotherWay(act, "the broker cannot be crashed: give --kill-cmd and --start-cmd")
        if act.written:         # the real disk is written when the broker chooses: more time at every try
            self.wait(min(2.0, DISK_PAUSE * 2 ** (self.attempt - 1)))
        try:
            self.crasher.kill()
        except Exception as e:
            raise WentAnotherWay(act, f"the broker could not be killed: {e}") from None
        self.broker_down = True
        for conns in self.connections.values():
            for conn in conns:
                if conn.alive:
                    conn.link.cut()
                    conn.raw.abort()
                    conn.alive = False

    def wait(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.beat()
            time.sleep(min(0.05, max(0.0, end - time.monotonic())))

    def beat(self) -> None:
        """A heartbeat from every live client that negotiated one, every half interval (a vanished one is
        silent: that is how the broker notices it)."""
        now = time.monotonic()
        for conns in self.connections.values():
            for conn in conns:
                if conn.heartbeat and conn.alive and not conn.vanished and now - conn.beat_at >= conn.heartbeat / 2:
                    try:
                        conn.raw.send(0, heartbeat.Heartbeat())
                    except OSError:
                        pass
                    conn.beat_at = now

    def quiet(self) -> None:
        """After the last act: read what the live clients are sent until the broker is quiet, so that a
        publish still unanswered is seen unanswered (the "waits" question)."""
        end = time.monotonic() + QUIET
        while time.monotonic() < end:
            self.beat()
            for conns in self.connections.values():
                for conn in conns:
                    if conn.alive and not conn.vanished:
                        try:
                            conn.raw.pump(0.02)
                        except (ConnectionLost, ProtocolViolation):
                            conn.alive = False
        for client, conns in self.connections.items():
            for conn in conns:
                for command in conn.raw.inbox:
                    m = command.method
                    if isinstance(m, (commands.Basic.Ack, commands.Basic.Nack)):
                        self.observed.confirmed((client, conn.number, command.channel), int(m.delivery_tag),
                                                bool(m.multiple), isinstance(m, commands.Basic.Ack))
                if conn.alive and not conn.vanished:
                    self.observed.open_channels.update((client, conn.number, ch) for ch in conn.open)

    # -- at the end -------------------------------------------------------------------------------

    def hang_up(self) -> None:
        for conns in self.connections.values():
            for conn in conns:
                conn.raw.abort()
                conn.link.cut()
                conn.alive = False

    # -- names --------------------------------------------------------------------------------------

    def current(self, act: Act) -> Connection:
        conns = self.connections[act.conn]
        if not conns:
            raise WentAnotherWay(act, f"c{act.conn} has no connection")
        return conns[-1]

    def key(self, act: Act) -> tuple:
        return (act.conn, self.current(act).number, act.channel)

    def real_tag(self, act: Act, tag: int) -> int:
        return self.names.delivery_tags.get(self.key(act) + (tag,), tag)

    def shown(self, command: Command) -> str:
        """A received command in the execution's words: ``basic.deliver of m0.2``."""
        msg = self.names.message_of(command.body)
        return spec_name(command.name) + (f" of {msg}" if msg else "")
