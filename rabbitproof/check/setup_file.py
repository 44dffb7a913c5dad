"""A user's own setup, read from a TOML file: queues, publishers, consumers and the faults to consider.

The file describes what the user runs, in the user's words (queue names, "manual" acks, "nack-requeue"
on failure); `rabbitproof.check.setup_model` translates it into a `spec` configuration, so the spec stays the
single source of truth. Every mistake gets one `SetupError` naming the file, the line and what is wrong:
an unknown key, a value of the wrong type or out of range, a consumer of a queue that does not exist, or
a combination the protocol forbids (confirms and transactions on one channel, PC-8; an exclusive queue
used by two connections, DU-4; nack or reject on an automatic-mode consumer, AM-1).

    [queues.jobs]
    durable = true
    dead_letter = "jobs.dead"

    [queues."jobs.dead"]
    durable = true

    [[publishers]]
    queue = "jobs"
    confirms = true
    persistent = true
    messages = 2

    [[consumers]]
    queue = "jobs"
    acks = "manual"
    prefetch = 1
    on_failure = "nack-requeue"

    [faults]
    broker_crash = true
    connection_closed = ["consumer 1"]
"""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# What a setup file may hold. The exhaustive search takes on less (rabbitproof.check.methods.too_large);
# larger setups are answered by argument and from smaller setups.
MAX_QUEUES = 3          # the spec's routing keys name queues by index
MAX_PUBLISHERS = 10     # one connection each
MAX_CONSUMERS = 10      # one connection each
MAX_MESSAGES = 50       # messages in all, across publishers
MAX_REPUBLISH = 2       # republishes of one publisher, in all
MAX_PUBLISHES = 60      # publishes in all, messages and republishes: each is a message id of the spec
MAX_PREFETCH = 65535      # basic.qos's prefetch-count is a short; one of at least MAX_MESSAGES never binds

ACKS = ("manual", "automatic")
ACK_STYLES = ("single", "multiple")
PREFETCH_SCOPES = ("consumer", "channel")
WORK = ("at-ack", "before-ack")
ON_FAILURE = ("none", "nack-requeue", "nack-drop", "reject-requeue", "reject-drop", "close-channel")
# The faults a setup may name, as users name the failures. The first four hit clients: `true` (every client
# they can hit), or a list of client names; the last two hit the broker or a queue.
CLIENT_FAULTS = ("connection_closed", "host_vanished")          # any client
CONSUMER_FAULTS = ("channel_closed", "channel_error")           # consumers only
FAULTS = CLIENT_FAULTS + CONSUMER_FAULTS + ("broker_crash", "queue_refuses")
# Names the faults had before, each with what to write now.
RENAMED = {
    "network_loss": "connection_closed = true",
    "consumer_connection_lost": "connection_closed = [the consumers' names]",
    "client_vanishes": "host_vanished = true",
    "consumer_vanishes": "host_vanished = [the consumers' names]",
    "consumer_channel_lost": "channel_closed = true",
    "consumer_channel_error": "channel_error = true",
}


@dataclass(frozen=True)
class Key:
    """One key a setup file may hold: its table, default, the values it takes and what it means. The
    reader accepts exactly these keys; docs/reference/setup-file.md is generated from them."""

    table: str
    name: str
    default: str
    values: str
    meaning: str


def _bool(table: str, name: str, meaning: str) -> Key:
    return Key(table, name, "false", "true, false", meaning)


CLIENTS = "true (every client), false, or a list of client names"
CONSUMERS = "true (every consumer), false, or a list of consumer names"


KEYS: tuple[Key, ...] = (
    _bool("queues.NAME", "durable",
          "the queue survives a broker restart, and so do its persistent messages (DU-1, DU-2)"),
    _bool("queues.NAME", "exclusive", "the queue belongs to the connection of its one consumer, which declares it "
                                      "and loses it with its connection (DU-4), durable or not"),
    Key("queues.NAME", "dead_letter", '""', "a queue of the setup, not itself",
        "where messages rejected or nacked without requeue go (ACK-6); empty: they are dropped"),
    Key("publishers", "name", '"publisher N"', "any string", "the name the report uses"),
    Key("publishers", "queue", "(required)", "a queue of the setup", "the queue it publishes to, through the "
                                                                     "default exchange (RT-1)"),
    Key("publishers", "messages", "1", f"1 to {MAX_MESSAGES} (all publishers together)",
        "how many messages it publishes"),
    _bool("publishers", "confirms", "publisher confirms: the publisher believes a message delivered at its basic.ack "
                                    "(PC-1); not with transactions (PC-8)"),
    _bool("publishers", "transactions", "publishes in transactions: believed delivered at tx.commit-ok (TX-1)"),
    _bool("publishers", "persistent", "delivery mode 2: kept on disk in a durable queue (DU-2)"),
    _bool("publishers", "mandatory", "an unroutable message comes back with basic.return (RT-3)"),
    Key("publishers", "republish", "0", f"0 to {MAX_REPUBLISH}; messages and republishes of all publishers "
                                        f"together at most {MAX_PUBLISHES}",
        "how many times in all it publishes a message again once it knows it was not delivered: nacked (PC-6), "
        "returned (RT-3), or its channel or connection gone before the confirm or the tx.commit-ok came (it "
        "reconnects when it may, then republishes first). The copy is a new publish of the same message: "
        "the questions count processing, loss and order per message, whichever copy it was. Needs confirms, "
        "transactions or mandatory (otherwise the publisher never learns of a failure); the bound keeps the "
        "exploration finite and the report names it"),
    Key("consumers", "name", '"consumer N"', "any string", "the name the report uses"),
    Key("consumers", "queue", "(required)", "a queue of the setup", "the queue it consumes"),
    Key("consumers", "acks", '"manual"', ", ".join(f'"{a}"' for a in ACKS),
        "manual: it acknowledges each delivery; automatic: the broker forgets a message once sent (AM-1, AM-2)"),
    Key("consumers", "prefetch", "0", f"0 to {MAX_PREFETCH} (basic.qos's field is a short)",
        "basic.qos prefetch count; 0 is no limit (PF-1). A consumer never holds more deliveries than the setup "
        "has messages, so a prefetch at least that large is explored as no limit, and the report says so"),
    Key("consumers", "prefetch_scope", '"consumer"', ", ".join(f'"{a}"' for a in PREFETCH_SCOPES),
        "the limit is the consumer's, or the channel's global one (PF-2)"),
    Key("consumers", "ack", '"single"', ", ".join(f'"{a}"' for a in ACK_STYLES),
        "acknowledge one delivery at a time, or several with multiple=true (ACK-2); manual acks only"),
    Key("consumers", "on_failure", '"none"', ", ".join(f'"{a}"' for a in ON_FAILURE),
        "what it does with a message it fails to process: nothing, basic.nack or basic.reject with or without "
        "requeue (ACK-5, ACK-6), or close its channel (RQ-4); nack and reject need manual acks"),
    _bool("consumers", "polls", "it polls the queue with basic.get, one message at a time, instead of consuming "
                                "with basic.consume (DS-2); prefetch does not apply to basic.get (PF-4)"),
    Key("consumers", "work", '"at-ack"', ", ".join(f'"{w}"' for w in WORK),
        "when a message counts as processed: at-ack (the work and the ack are one step) or before-ack (the work "
        "is done, then the ack is sent: a crash between the two means the work is done again after redelivery); "
        "manual acks only"),
    _bool("consumers", "idempotent", "processing a message twice does no harm (the consumer deduplicates, or its "
                                     "work is idempotent): when every consumer is, question 2 can still happen but "
                                     "is reported harmless, not a failure"),
    Key("faults", "connection_closed", "false", CLIENTS,
        "a client's connection may be closed once, its socket closed (the process exits, the connection is "
        "reset), which the broker notices at once: frames in flight either way are lost with it, the broker "
        "requeues what the client held, and the client reconnects (RQ-4, AM-2)"),
    Key("faults", "host_vanished", "false", CLIENTS,
        "a client's host may vanish once without closing its socket (a network partition, a host crash, a "
        "paused process): the client reconnects at once, while the broker keeps the old connection and its "
        "deliveries until a heartbeat timeout (RQ-3, RQ-4)"),
    Key("faults", "channel_closed", "false", CONSUMERS,
        "a consumer may close its own channel once and open it again; what it sent before the close still "
        "counts, and its deliveries come back (RQ-4)"),
    Key("faults", "channel_error", "false", CONSUMERS,
        "the broker may close a consumer's channel once with a channel error (as when another operation on it "
        "fails): the acks the consumer has sent and the broker has not taken yet are ignored, and its "
        "deliveries come back (ER-1, RQ-4); it opens the channel again"),
    _bool("faults", "broker_crash", "the broker may crash and restart once (DU-3, PC-10)"),
    _bool("faults", "queue_refuses", "a queue may fail to take a message once: its publish is nacked (PC-6)"),
)


def fault_words(setup: "Setup") -> list[str]:
    """The setup's faults in words, for the report: "connection closed (worker)" where a fault hits only
    the clients its list names, "broker crash" where it hits all it can."""
    everyone = tuple(c.name for c in setup.publishers + setup.consumers)
    consumers = tuple(c.name for c in setup.consumers)
    words = []
    for name in FAULTS:
        hit = getattr(setup.faults, name)
        if not hit:
            continue
        can = consumers if name in CONSUMER_FAULTS else everyone
        only = isinstance(hit, tuple) and hit != can
        words.append(name.replace("_", " ") + (f" ({', '.join(hit)})" if only else ""))
    return words


def key_names(table: str) -> tuple[str, ...]:
    """The keys a table of the setup file may hold, in the order KEYS lists them."""
    return tuple(k.name for k in KEYS if k.table == table)


class SetupError(ValueError):
    """A mistake in a setup file: where it is and what is wrong, in one line."""

    def __init__(self, source: str, line: int, message: str) -> None:
        super().__init__(f"{source}:{line}: {message}" if line else f"{source}: {message}")
        self.source, self.line, self.message = source, line, message


@dataclass(frozen=True)
class QueueSetup:
    """A queue the setup uses: durable (DU-1), exclusive to the connection of its one consumer (DU-4),
    and where rejected messages are dead-lettered (ACK-6)."""

    name: str
    durable: bool = False
    exclusive: bool = False
    dead_letter: str = ""


@dataclass(frozen=True)
class PublisherSetup:
    """A publisher: its own connection and channel, publishing to one queue through the default exchange."""

    name: str
    queue: str
    messages: int = 1
    confirms: bool = False          # PC-1
    transactions: bool = False      # TX-1
    persistent: bool = False        # DU-2
    mandatory: bool = False         # RT-3
    republish: int = 0              # publishes again, at most this many times in all, after a failure it learns of


@dataclass(frozen=True)
class ConsumerSetup:
    """A consumer: its own connection and channel, consuming one queue."""

    name: str
    queue: str
    acks: str = "manual"            # AM-1
    prefetch: int = 0               # PF-1; 0 = no limit
    prefetch_scope: str = "consumer"    # PF-2: per consumer, or the channel's global limit
    ack: str = "single"             # ACK-2: acknowledge one delivery at a time, or several with multiple
    on_failure: str = "none"        # what it does with a message it fails to process
    idempotent: bool = False        # processing a message twice does no harm
    polls: bool = False             # it polls with basic.get instead of consuming (DS-2)
    work: str = "at-ack"            # when its work is done: at the ack, or before it (a crash may come between)


@dataclass(frozen=True)
class Faults:
    """The faults to consider (each may happen once): for those that hit clients, the names of the clients
    it may hit (none: it does not happen)."""

    connection_closed: tuple[str, ...] = ()     # socket closed, noticed at once
    host_vanished: tuple[str, ...] = ()         # socket left open, noticed at the heartbeat timeout
    channel_closed: tuple[str, ...] = ()        # a consumer closes its own channel
    channel_error: tuple[str, ...] = ()         # the broker closes a consumer's channel with an error
    broker_crash: bool = False
    queue_refuses: bool = False


@dataclass(frozen=True)
class Setup:
    """A whole setup file, checked."""

    source: str
    queues: tuple[QueueSetup, ...]
    publishers: tuple[PublisherSetup, ...]
    consumers: tuple[ConsumerSetup, ...]
    faults: Faults = field(default_factory=Faults)
    lines: dict = field(default_factory=dict, compare=False, repr=False)   # key path -> line

    def line_of(self, *path: Any) -> int:
        """The line of a key (or of its table when the key is absent), 0 when unknown."""
        for end in range(len(path), 0, -1):
            if path[:end] in self.lines:
                return self.lines[path[:end]]
        return 0


# --- where each key is written -------------------------------------------------------------------

_HEADER = re.compile(r"^\s*(\[\[?)\s*(.+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r'^\s*("(?:[^"\\]|\\.)*"|\'[^\']*\'|[A-Za-z0-9_.-]+)\s*=')


def _split_dotted(text: str) -> tuple[str, ...]:
    """A TOML dotted key (`queues."jobs.dead"`) as its parts."""
    parts, current, quote = [], "", ""
    for ch in text:
        if quote:
            if ch == quote:
                quote = ""
            else:
                current += ch
        elif ch in "\"'":
            quote = ch
        elif ch == ".":
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    parts.append(current.strip())
    return tuple(parts)


def key_lines(text: str) -> dict[tuple, int]:
    """Map each table and key path to its line: ("queues", "jobs") for `[queues.jobs]`,
    ("publishers", 0, "confirms") for `confirms = ...` in the first `[[publishers]]`."""
    lines: dict[tuple, int] = {}
    counts: dict[tuple, int] = {}
    table: tuple = ()
    for number, line in enumerate(text.splitlines(), 1):
        header = _HEADER.match(line)
        if header and not _KEY.match(line):
            path = _split_dotted(header.group(2))
            if header.group(1) == "[[":
                index = counts.get(path, 0)
                counts[path] = index + 1
                path = path + (index,)
            table = path
            lines.setdefault(table, number)
            continue
        key = _KEY.match(line)
        if key:
            lines.setdefault(table + _split_dotted(key.group(1)), number)
    return lines


# --- reading and checking --------------------------------------------------------------------------

class _Reader:
    """Checks one parsed file, raising SetupError at the first mistake, with its line."""

    def __init__(self, source: str, lines: dict[tuple, int]) -> None:
        self.source, self.lines = source, lines

    def line_of(self, *path: Any) -> int:
        """The line of the key at ``path``, or of the nearest table holding it (0: unknown)."""
        for end in range(len(path), 0, -1):
            if path[:end] in self.lines:
                return self.lines[path[:end]]
        return 0

    def fail(self, path: tuple, message: str) -> SetupError:
        return SetupError(self.source, self.line_of(*path), message)

    def table(self, value: Any, path: tuple, allowed: tuple[str, ...]) -> dict:
        where = _name(path)
        if not isinstance(value, dict):
            raise self.fail(path, f"{where} must be a table")
        for key in value:
            if key not in allowed:
                raise self.fail(path + (key,), f"unknown key {key!r} in {where} (known: {', '.join(allowed)})")
        return value

    def boolean(self, table: dict, path: tuple, key: str, default: bool = False) -> bool:
        value = table.get(key, default)
        if not isinstance(value, bool):
            raise self.fail(path + (key,), f"{_name(path + (key,))} must be true or false, not {value!r}")
        return value

    def integer(self, table: dict, path: tuple, key: str, default: int, low: int, high: int) -> int:
        value = table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path + (key,), f"{_name(path + (key,))} must be a whole number, not {value!r}")
        if not low <= value <= high:
            raise self.fail(path + (key,), f"{_name(path + (key,))} = {value} is out of range ({low} to {high})")
        return value

    def choice(self, table: dict, path: tuple, key: str, default: str, choices: tuple[str, ...]) -> str:
        value = table.get(key, default)
        if value not in choices:
            raise self.fail(path + (key,), f"{_name(path + (key,))} must be one of "
                                           f"{', '.join(repr(c) for c in choices)}, not {value!r}")
        return value

    def text(self, table: dict, path: tuple, key: str, default: str | None = None) -> str:
        if key not in table and default is None:
            raise self.fail(path, f"{_name(path)} needs {key} = \"...\"")
        value = table.get(key, default)
        if not isinstance(value, str) or (key in table and not value):
            raise self.fail(path + (key,), f"{_name(path + (key,))} must be a non-empty string, not {value!r}")
        return value

    def read(self, data: dict) -> Setup:
        self.table(data, (), ("queues", "publishers", "consumers", "faults"))
        queues = self.read_queues(data.get("queues"))
        names = {q.name for q in queues}
        publishers = self.read_clients(data, "publishers", names, self.read_publisher)
        consumers = self.read_clients(data, "consumers", names, self.read_consumer)
        if not publishers:
            raise self.fail(("publishers",), "the setup needs at least one [[publishers]] table")
        if len(publishers) > MAX_PUBLISHERS:
            raise self.fail(("publishers", MAX_PUBLISHERS), f"{len(publishers)} publishers: at most {MAX_PUBLISHERS} "
                                                            "can be checked")
        if len(consumers) > MAX_CONSUMERS:
            raise self.fail(("consumers", MAX_CONSUMERS), f"{len(consumers)} consumers: at most {MAX_CONSUMERS} "
                                                          "can be checked")
        total = sum(p.messages for p in publishers)
        if total > MAX_MESSAGES:
            raise self.fail(("publishers", len(publishers) - 1, "messages"),
                            f"{total} messages in all: at most {MAX_MESSAGES} can be checked")
        publishes = total + sum(p.republish for p in publishers)
        if publishes > MAX_PUBLISHES:
            last = max(i for i, p in enumerate(publishers) if p.republish)
            raise self.fail(("publishers", last, "republish"),
                            f"{total} messages and {publishes - total} republishes: at most {MAX_PUBLISHES} "
                            "publishes in all can be checked")
        self.check_together(queues, publishers, consumers)
        faults = self.read_faults(data.get("faults", {}), publishers, consumers)
        return Setup(self.source, queues, publishers, consumers, faults, self.lines)

    def read_queues(self, value: Any) -> tuple[QueueSetup, ...]:
        if value is None:
            raise self.fail((), "the setup needs at least one queue: [queues.NAME]")
        if not isinstance(value, dict):
            raise self.fail(("queues",), "queues must be tables: [queues.NAME]")
        if not value:
            raise self.fail(("queues",), "the setup needs at least one queue: [queues.NAME]")
        if len(value) > MAX_QUEUES:
            raise self.fail(("queues",), f"{len(value)} queues: at most {MAX_QUEUES} can be checked")
        queues = []
        for name, table in value.items():
            path = ("queues", name)
            self.table(table, path, key_names("queues.NAME"))
            queues.append(QueueSetup(name, self.boolean(table, path, "durable"),
                                     self.boolean(table, path, "exclusive"),
                                     self.text(table, path, "dead_letter", "")))
        names = {q.name for q in queues}
        for q in queues:
            if q.dead_letter and q.dead_letter not in names:
                raise self.fail(("queues", q.name, "dead_letter"),
                                f"queue {q.name!r} dead-letters into {q.dead_letter!r}, which is not a queue "
                                f"of the setup (queues: {', '.join(sorted(names))})")
            if q.dead_letter == q.name:
                raise self.fail(("queues", q.name, "dead_letter"), f"queue {q.name!r} dead-letters into itself")
        return tuple(queues)

    def read_clients(self, data: dict, kind: str, queues: set[str], read_one) -> tuple:
        value = data.get(kind, [])
        if not isinstance(value, list):
            raise self.fail((kind,), f"{kind} must be written as [[{kind}]] tables")
        clients = tuple(read_one(table, (kind, i)) for i, table in enumerate(value))
        for i, client in enumerate(clients):
            if client.queue not in queues:
                raise self.fail((kind, i, "queue"), f"{kind[:-1]} {client.name!r} uses queue {client.queue!r}, "
                                                    f"which is not a queue of the setup (queues: "
                                                    f"{', '.join(sorted(queues))})")
        return clients

    def read_publisher(self, table: Any, path: tuple) -> PublisherSetup:
        self.table(table, path, key_names("publishers"))
        publisher = PublisherSetup(
            self.text(table, path, "name", f"publisher {path[1] + 1}"), self.text(table, path, "queue"),
            self.integer(table, path, "messages", 1, 1, MAX_MESSAGES), self.boolean(table, path, "confirms"),
            self.boolean(table, path, "transactions"), self.boolean(table, path, "persistent"),
            self.boolean(table, path, "mandatory"), self.integer(table, path, "republish", 0, 0, MAX_REPUBLISH))
        if publisher.republish and not (publisher.confirms or publisher.transactions or publisher.mandatory):
            raise self.fail(path + ("republish",), f"publisher {publisher.name!r} republishes, but with neither "
                                                   "confirms, transactions nor mandatory it never learns that a "
                                                   "message was not delivered (PC-1, TX-1, RT-3)")
        if publisher.confirms and publisher.transactions:
            raise self.fail(path + ("transactions",), f"publisher {publisher.name!r}: confirms and transactions "
                                                      "on one channel are refused by the broker (PC-8)")
        return publisher

    def read_consumer(self, table: Any, path: tuple) -> ConsumerSetup:
        self.table(table, path, key_names("consumers"))
        consumer = ConsumerSetup(
            self.text(table, path, "name", f"consumer {path[1] + 1}"), self.text(table, path, "queue"),
            self.choice(table, path, "acks", "manual", ACKS),
            self.integer(table, path, "prefetch", 0, 0, MAX_PREFETCH),
            self.choice(table, path, "prefetch_scope", "consumer", PREFETCH_SCOPES),
            self.choice(table, path, "ack", "single", ACK_STYLES),
            self.choice(table, path, "on_failure", "none", ON_FAILURE), self.boolean(table, path, "idempotent"),
            self.boolean(table, path, "polls"), self.choice(table, path, "work", "at-ack", WORK))
        if consumer.polls and consumer.prefetch:
            raise self.fail(path + ("prefetch",), f"consumer {consumer.name!r} polls with basic.get, which prefetch "
                                                  "does not limit (PF-4)")
        if consumer.acks == "automatic":
            if consumer.on_failure.startswith(("nack", "reject")):
                raise self.fail(path + ("on_failure",), f"consumer {consumer.name!r} acknowledges automatically: "
                                                        f"it cannot {consumer.on_failure.split('-')[0]} (AM-1)")
            if "work" in table and consumer.work == "before-ack":
                raise self.fail(path + ("work",), f"consumer {consumer.name!r} acknowledges automatically: there is "
                                                  "no ack to work before (AM-2)")
            if "ack" in table and consumer.ack == "multiple":
                raise self.fail(path + ("ack",), f"consumer {consumer.name!r} acknowledges automatically: "
                                                 "it sends no acknowledgements (AM-1)")
        return consumer

    def read_faults(self, value: Any, publishers: tuple, consumers: tuple) -> Faults:
        if isinstance(value, dict):
            for old in value:
                if old in RENAMED:
                    raise self.fail(("faults", old), f"faults.{old} is now written {RENAMED[old]}")
        self.table(value, ("faults",), key_names("faults"))
        everyone = tuple(c.name for c in publishers + consumers)
        hit = {name: self.clients(value, name, everyone, tuple(c.name for c in consumers) if name in CONSUMER_FAULTS
                                  else everyone) for name in CLIENT_FAULTS + CONSUMER_FAULTS}
        return Faults(**hit, broker_crash=self.boolean(value, ("faults",), "broker_crash"),
                      queue_refuses=self.boolean(value, ("faults",), "queue_refuses"))

    def clients(self, table: dict, key: str, everyone: tuple[str, ...], allowed: tuple[str, ...]) -> tuple[str, ...]:
        """The clients a fault may hit: true is every client it can hit, a list names them, false none."""
        path = ("faults", key)
        kind = "consumer" if key in CONSUMER_FAULTS else "client"
        value = table.get(key, False)
        if isinstance(value, bool):
            if value and not allowed:
                raise self.fail(path, f"faults.{key} needs a {kind}")
            return allowed if value else ()
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise self.fail(path, f"faults.{key} must be true, false or a list of {kind} names, not {value!r}")
        for name in value:
            if name not in allowed:
                what = (f"a publisher: faults.{key} hits consumers only" if name in everyone
                        else f"not a {kind} of the setup ({kind}s: {', '.join(allowed) or 'none'})")
                raise self.fail(path, f"faults.{key} names {name!r}, {what}")
        if len(set(value)) != len(value):
            raise self.fail(path, f"faults.{key} names a client twice")
        return tuple(n for n in allowed if n in value)

    def check_together(self, queues, publishers, consumers) -> None:
        for q in queues:
            if not q.exclusive:
                continue
            users = [i for i, c in enumerate(consumers) if c.queue == q.name]
            if len(users) != 1:
                where = ("consumers", users[1], "queue") if users else ("queues", q.name, "exclusive")
                raise self.fail(where, f"exclusive queue {q.name!r} belongs to the connection of one consumer; "
                                       f"{len(users)} consumers use it (DU-4)")
        seen: dict[str, tuple] = {}
        for kind, clients in (("publishers", publishers), ("consumers", consumers)):
            for i, client in enumerate(clients):
                path = (kind, i, "name")
                if client.name in seen:
                    first = self.line_of(*seen[client.name])
                    raise self.fail(path, f"two clients are named {client.name!r} (the other on line {first}): "
                                          "the report tells them apart by name")
                seen[client.name] = path


def _name(path: tuple) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "the file"


def parse_setup(text: str, source: str = "<setup>") -> Setup:
    """A setup from the text of a TOML file; SetupError at the first mistake."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        found = re.search(r"\(at line (\d+), column \d+\)", str(error))
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(error))
        raise SetupError(source, int(found.group(1)) if found else 0, f"not valid TOML: {message}") from None
    return _Reader(source, key_lines(text)).read(data)


def read_setup(path: str | Path) -> Setup:
    """The setup in a TOML file; SetupError when it cannot be read or has a mistake."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise SetupError(str(path), 0, f"cannot read the file: {error}") from None
    return parse_setup(text, str(path))
