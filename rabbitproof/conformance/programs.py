"""Client programs: what a conformance run sends, and the Hypothesis strategies that write them.

A program is data: a few queues with fixed flags, a number of connections (slots), and steps. A step
is one TCP write of one or more methods on one connection (`Step`), or a broker crash (`Crash`: SIGKILL
and restart, where the target allows it). Every method's fields range over their whole domain
(delivery tags 0, tags never issued, tags up to 2^64-1, prefetch counts 0 to 65535, sizes other than
0), weighted towards the values that make a program interesting (small tags that were issued).

What runs a program (rabbitproof/conformance/targets.py) adds the housekeeping a client does: it opens the
channels of a new connection, answers a broker's close with close-ok and opens the channel again, and
connects again after a connection ends. So every step starts with channels 1 and 2 open, and a program
stays productive after an error. Every value has a repr that is valid Python: a failing program prints
as a script (`from rabbitproof.conformance.programs import *`).

Generated programs stay inside what the spec can say (rabbitproof/recording/observations.py): queues are
declared with one set of flags per program (and, by `Redeclare`, with others, which RabbitMQ refuses), without
arguments, auto-delete or passive; exchanges are the default
one, `amq.fanout` and one that does not exist.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import ClassVar, Union

from hypothesis import strategies as st
from rabbitproof.spec import frames as F

CHANNELS = (1, 2)           # every connection uses these two channels
QUEUES = 2                  # queues q0, q1 are declared by programs; q2 never is (404, unroutable)
MAX_TAG = 2**64 - 1         # delivery tags are 64-bit on the wire (DT-3: the largest RabbitMQ issues is 2^63-1)
EXCHANGES = ("", "amq.fanout", "missing")


# ---------------------------------------------------------------- methods a client sends

@dataclass(frozen=True)
class Declare:
    """queue.declare of queue `queue` with the program's flags for it."""
    METHOD: ClassVar[int] = F.QUEUE_DECLARE
    ch: int
    queue: int


@dataclass(frozen=True)
class Redeclare:
    """queue.declare of queue `queue` with flags of its own: where they differ from the queue's, RabbitMQ
    3.10.8 refuses it (405 for the exclusive flag, 406 for the durable flag of a queue that is not
    exclusive)."""
    METHOD: ClassVar[int] = F.QUEUE_DECLARE
    ch: int
    queue: int
    durable: bool = False
    exclusive: bool = False


@dataclass(frozen=True)
class Bind:
    """queue.bind of queue `queue` to amq.fanout."""
    METHOD: ClassVar[int] = F.QUEUE_BIND
    ch: int
    queue: int


@dataclass(frozen=True)
class Purge:
    METHOD: ClassVar[int] = F.QUEUE_PURGE
    ch: int
    queue: int


@dataclass(frozen=True)
class Delete:
    METHOD: ClassVar[int] = F.QUEUE_DELETE
    ch: int
    queue: int
    if_unused: bool = False
    if_empty: bool = False


@dataclass(frozen=True)
class Publish:
    """basic.publish of a new message (its body is numbered when it runs) to `exchange` with the name of
    queue `queue` as routing key."""
    METHOD: ClassVar[int] = F.BASIC_PUBLISH
    ch: int
    queue: int
    exchange: str = ""
    persistent: bool = False
    mandatory: bool = False
    immediate: bool = False


@dataclass(frozen=True)
class Consume:
    """basic.consume; tag "" asks the broker to choose one."""
    METHOD: ClassVar[int] = F.BASIC_CONSUME
    ch: int
    queue: int
    tag: str
    no_ack: bool = False
    exclusive: bool = False


@dataclass(frozen=True)
class Cancel:
    METHOD: ClassVar[int] = F.BASIC_CANCEL
    ch: int
    tag: str


@dataclass(frozen=True)
class Get:
    METHOD: ClassVar[int] = F.BASIC_GET
    ch: int
    queue: int
    no_ack: bool = False


@dataclass(frozen=True)
class Ack:
    METHOD: ClassVar[int] = F.BASIC_ACK
    ch: int
    tag: int
    multiple: bool = False


@dataclass(frozen=True)
class Nack:
    METHOD: ClassVar[int] = F.BASIC_NACK
    ch: int
    tag: int
    multiple: bool = False
    requeue: bool = True


@dataclass(frozen=True)
class Reject:
    METHOD: ClassVar[int] = F.BASIC_REJECT
    ch: int
    tag: int
    requeue: bool = True


@dataclass(frozen=True)
class Qos:
    METHOD: ClassVar[int] = F.BASIC_QOS
    ch: int
    count: int
    global_: bool = False
    size: int = 0


@dataclass(frozen=True)
class Recover:
    METHOD: ClassVar[int] = F.BASIC_RECOVER
    ch: int
    requeue: bool = True


@dataclass(frozen=True)
class ConfirmSelect:
    METHOD: ClassVar[int] = F.CONFIRM_SELECT
    ch: int


@dataclass(frozen=True)
class TxSelect:
    METHOD: ClassVar[int] = F.TX_SELECT
    ch: int


@dataclass(frozen=True)
class TxCommit:
    METHOD: ClassVar[int] = F.TX_COMMIT
    ch: int


@dataclass(frozen=True)
class TxRollback:
    METHOD: ClassVar[int] = F.TX_ROLLBACK
    ch: int


@dataclass(frozen=True)
class CloseChannel:
    """channel.close by the client (the runner opens the channel again once it is closed)."""
    METHOD: ClassVar[int] = F.CHANNEL_CLOSE
    ch: int


@dataclass(frozen=True)
class OpenChannel:
    """channel.open of a channel that is already open: a connection error (504)."""
    METHOD: ClassVar[int] = F.CHANNEL_OPEN
    ch: int


@dataclass(frozen=True)
class CloseOkChannel:
    """channel.close-ok on an open channel: a connection error (503)."""
    METHOD: ClassVar[int] = F.CHANNEL_CLOSE_OK
    ch: int


@dataclass(frozen=True)
class CloseConnection:
    """connection.close by the client (the runner connects again)."""
    METHOD: ClassVar[int] = F.CONNECTION_CLOSE


Op = Union[Declare, Redeclare, Bind, Purge, Delete, Publish, Consume, Cancel, Get, Ack, Nack, Reject, Qos, Recover,
           ConfirmSelect, TxSelect, TxCommit, TxRollback, CloseChannel, OpenChannel, CloseOkChannel,
           CloseConnection]

# Methods the broker answers (the runner waits for the answer, or for the channel's close).
SYNCHRONOUS = (Declare, Redeclare, Bind, Purge, Delete, Consume, Cancel, Get, Qos, Recover, ConfirmSelect, TxSelect,
               TxCommit, TxRollback, CloseChannel)


# ---------------------------------------------------------------- steps and programs

@dataclass(frozen=True)
class Step:
    """The methods `ops`, sent by connection `conn` in one write."""
    conn: int
    ops: tuple


@dataclass(frozen=True)
class Crash:
    """The broker is killed (SIGKILL) and restarted: right after the previous step's replies, or, without
    `wait`, as soon as the previous step is written (the broker may have handled any part of it, and
    written any part of that to disk)."""
    wait: bool = True


@dataclass(frozen=True)
class QueueFlags:
    durable: bool = False
    exclusive: bool = False


@dataclass(frozen=True)
class Program:
    queues: tuple = (QueueFlags(), QueueFlags())
    connections: int = 1
    steps: tuple = ()

    def ops(self) -> list:
        return [op for s in self.steps if isinstance(s, Step) for op in s.ops]

    def numbered(self) -> str:
        """The program as numbered steps, for people."""
        lines = ["queues: " + ", ".join(f"q{i}{' durable' if f.durable else ''}{' exclusive' if f.exclusive else ''}"
                                          for i, f in enumerate(self.queues)),
                 f"connections: {self.connections}"]
        for n, s in enumerate(self.steps, 1):
            if isinstance(s, Crash):
                when = "" if s.wait else " (before the replies to the step before)"
                lines.append(f"{n:3}. the broker is killed and restarted{when}")
            else:
                lines.append(f"{n:3}. c{s.conn}: " + "; ".join(map(repr, s.ops)))
        return "\n".join(lines)


# ---------------------------------------------------------------- families

FAMILIES = ("DT", "AM", "ACK", "PF", "RQ", "DS", "PC", "TX", "DU", "ER", "RT")


def families(program: Program) -> set[str]:
    """The rule families (rabbitproof/rules.toml) a program exercises, from what it sends."""
    found: set[str] = set()
    for s in program.steps:
        if isinstance(s, Crash):
            found.add("DU")
            continue
        for op in s.ops:
            found |= _op_families(op, program)
    return found


def _op_families(op: Op, program: Program) -> set[str]:
    if isinstance(op, (Ack, Nack, Reject)):
        out = {"DT", "ACK"}
        if not isinstance(op, Ack) and op.requeue:
            out.add("RQ")
        settles_all = op.tag == 0 and not isinstance(op, Reject) and op.multiple    # tag 0, multiple: every one
        if (op.tag == 0 and not settles_all) or op.tag > 64:
            out.add("ER")
        return out
    if isinstance(op, Get):
        return {"DT", "AM" if op.no_ack else "ACK"} | ({"ER"} if op.queue >= QUEUES else set())
    if isinstance(op, Consume):
        return {"DS", "DT"} | ({"AM"} if op.no_ack else set()) | ({"ER"} if op.queue >= QUEUES else set())
    if isinstance(op, Qos):
        return {"PF"} | ({"ER"} if op.size else set())
    if isinstance(op, Recover):
        return {"RQ"} | (set() if op.requeue else {"ER"})
    if isinstance(op, ConfirmSelect):
        return {"PC"}
    if isinstance(op, (TxSelect, TxCommit, TxRollback)):
        return {"TX"}
    if isinstance(op, Publish):
        out = {"RT"} if op.mandatory or op.exchange or op.queue >= QUEUES else set()
        if op.persistent:
            out.add("DU")
        if op.immediate or op.exchange == "missing":
            out.add("ER")
        return out
    if isinstance(op, Declare):
        flags = program.queues[op.queue]
        return ({"DU"} if flags.durable or flags.exclusive else set())
    if isinstance(op, Redeclare):
        return {"ER"} | ({"DU"} if op.durable or op.exclusive else set())
    if isinstance(op, Bind):
        return {"RT"}
    if isinstance(op, (CloseChannel, CloseConnection)):
        return {"RQ"}
    if isinstance(op, (OpenChannel, CloseOkChannel)):
        return {"ER"}
    return set()


# ---------------------------------------------------------------- strategies

channels = st.sampled_from((1, 1, 1, 2))   # mostly one channel: settlements then name its deliveries
declared_queues = st.integers(0, QUEUES - 1)
queues = st.one_of(declared_queues, declared_queues, declared_queues, st.just(QUEUES))   # QUEUES: never declared
delivery_tags = st.one_of(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4), st.integers(0, 8),
                          st.sampled_from([2**63 - 1, MAX_TAG]), st.integers(0, MAX_TAG))
prefetch_counts = st.one_of(st.integers(0, 3), st.integers(0, 3), st.integers(0, 65535))
prefetch_sizes = st.integers(1, 2**32 - 1)
consumer_tags = st.one_of(st.sampled_from(["a", "b", "c", "d", "e", "f"]), st.just(""))


def _flag(true_weight: int = 1, false_weight: int = 1):
    return st.sampled_from([False] * false_weight + [True] * true_weight)


@dataclass
class Steering:
    """Weights of op kinds set while programs are drawn (`op_strategy`): each kind's weight is multiplied
    by its factor (1 when absent). The conformance command sets them between batches towards the spec
    actions not yet exercised (rabbitproof/conformance/coverage.py)."""
    factors: dict = field(default_factory=dict)       # op class -> factor
    strategies: dict = field(default_factory=dict, compare=False, repr=False)   # `_steps`, built once

    def factor(self, kind: type) -> int:
        return self.factors.get(kind, 1)


def op_strategy(*, errors: bool = True, steering: Steering | None = None):
    """One method a client sends, any field over its domain, weighted towards what makes a program
    productive (publishes to declared queues, gets, consumes, settlements of small tags). `errors=False`
    leaves out the methods that always end the connection (a second channel.open, close-ok on an open
    channel, immediate, prefetch_size, recover without requeue); `programs` then also gives every
    consumer a tag of its own (a reused one is a connection error). `steering`: weights read as each
    method is drawn."""
    publish = st.builds(Publish, channels, declared_queues, st.just(""), st.booleans(), _flag(1, 3))
    weighted = [
        (8, Publish, publish),
        (1, Publish, st.builds(Publish, channels, queues, st.sampled_from(["", "amq.fanout", "missing"]),
                               st.booleans(), st.booleans())),
        (4, Get, st.builds(Get, channels, queues, _flag(1, 3))),
        (2, Consume, st.builds(Consume, channels, queues, consumer_tags, _flag(1, 3), _flag(1, 5))),
        (4, Ack, st.builds(Ack, channels, delivery_tags, _flag(1, 2))),
        (2, Nack, st.builds(Nack, channels, delivery_tags, _flag(1, 2), st.booleans())),
        (1, Reject, st.builds(Reject, channels, delivery_tags, st.booleans())),
        (2, Qos, st.builds(Qos, channels, prefetch_counts, st.booleans())),
        (1, Recover, st.builds(Recover, channels)),
        (1, Cancel, st.builds(Cancel, channels, consumer_tags)),
        (1, Declare, st.builds(Declare, channels, declared_queues)),
        (1, Redeclare, st.builds(Redeclare, channels, declared_queues, st.booleans(), st.booleans())),
        (2, ConfirmSelect, st.builds(ConfirmSelect, channels)),
        (1, TxSelect, st.builds(TxSelect, channels)),
        (2, TxCommit, st.builds(TxCommit, channels)),
        (1, TxRollback, st.builds(TxRollback, channels)),
        (1, Purge, st.builds(Purge, channels, queues)),
        (1, Delete, st.builds(Delete, channels, queues, _flag(1, 2), _flag(1, 2))),
        (1, Bind, st.builds(Bind, channels, declared_queues)),
        (1, CloseChannel, st.builds(CloseChannel, channels)),
    ]
    rare = [st.builds(CloseConnection)]
    if errors:
        rare += [st.builds(OpenChannel, channels), st.builds(CloseOkChannel, channels),
                 st.builds(Publish, channels, queues, st.just(""), st.booleans(), st.booleans(), st.just(True)),
                 st.builds(Qos, channels, prefetch_counts, st.booleans(), prefetch_sizes),
                 st.builds(Recover, channels, st.just(False))]
    weighted.append((1, CloseConnection, st.one_of(rare)))
    if steering is None:
        table = [strategy for weight, _, strategy in weighted for _ in range(weight)]
        return st.integers(0, len(table) - 1).flatmap(table.__getitem__)

    tables: dict = {}       # the steering's factors -> (the weighted table, the strategy of an index into it)

    @st.composite
    def steered(draw):
        key = tuple(sorted((kind.__name__, factor) for kind, factor in steering.factors.items()))
        if key not in tables:       # built once per weighting: a strategy made anew per draw costs more than it
            table = [strategy for weight, kind, strategy in weighted for _ in range(weight * steering.factor(kind))]
            tables[key] = (table, st.integers(0, len(table) - 1))
        table, index = tables[key]
        return draw(table[draw(index)])
    return steered()


@st.composite
def programs(draw, *, max_connections: int = 2, max_steps: int = 16, crashes: bool = False,
             min_crashes: int = 0, errors: bool = True, rabbitmq_safe: bool = False,
             synchronous: bool = False, steering: Steering | None = None) -> Program:
    """A program. `crashes`: may kill and restart the broker; `min_crashes`: at least that many crashes,
    at drawn places (a broker over TCP restarts in seconds, so its programs are few and each must crash).
    `rabbitmq_safe`: as run against RabbitMQ 3.10.8 (`safe_for_rabbitmq`). `synchronous`: one connection,
    one method per step, no crash (the differential test's programs). `steering`: weights of op kinds
    (`op_strategy`)."""
    flags = tuple(draw(_QUEUE_FLAGS) for _ in range(QUEUES))
    connections = 1 if synchronous else draw(st.integers(1, max_connections))
    prelude = Step(0, tuple(Declare(1, q) for q in range(QUEUES)))
    drawn = draw(_steps(connections, max_steps, crashes, errors, synchronous, steering))
    while crashes and sum(isinstance(s, Crash) for s in drawn) < min_crashes:
        drawn.insert(draw(st.integers(1, len(drawn))), Crash(wait=draw(st.booleans())))
    body = []
    for s in drawn:
        body += [_ends_at_close(s)] if isinstance(s, Step) else [s, prelude]
    program = Program(flags, connections, (prelude, *body))
    if not errors:
        program = replace(program, steps=_fresh_consumer_tags(program.steps))
    return safe_for_rabbitmq(program, errors) if rabbitmq_safe else program


_QUEUE_FLAGS = st.builds(QueueFlags, _flag(1, 2), _flag(1, 4))
_UNSTEERED: dict = {}       # `_steps` without steering


def _steps(connections: int, max_steps: int, crashes: bool, errors: bool, synchronous: bool,
           steering: Steering | None):
    """The strategy of a program's steps after its prelude, built once per kind of program (kept in the
    steering, or in _UNSTEERED): strategies made anew for every program cost more to build and validate
    than the program costs to draw."""
    cache = _UNSTEERED if steering is None else steering.strategies
    key = (connections, max_steps, crashes, errors, synchronous)
    if key not in cache:
        ops = op_strategy(errors=errors, steering=steering)
        step = st.builds(Step, st.integers(0, connections - 1), st.lists(ops, min_size=1, max_size=4).map(tuple))
        if synchronous:
            step = st.builds(Step, st.just(0), ops.map(lambda op: (op,)))
        if crashes:     # about one step in twelve; the queues are declared again after it
            step = st.tuples(step, st.integers(0, 11)).map(
                lambda pair: pair[0] if pair[1] != 5 else Crash())
        cache[key] = st.lists(step, min_size=4, max_size=max_steps)
    return cache[key]


def safe_for_rabbitmq(program: Program, errors: bool = False) -> Program:
    """The program as it runs against RabbitMQ 3.10.8:
    - a basic.cancel of a consumer started in the same write starts a write of its own: RabbitMQ 3.10.8's
      channel crashes when it takes the cancel before its queue's consume-ok (`badkey` in
      `rabbit_channel:consumer_monitor`), and the connection closes with 541 INTERNAL_ERROR (20 of 20:
      consume + cancel of its tag in one write), a broker fault the suite rightly rejects;
    - without `errors`, a write ends at each tx.commit (a method pipelined behind the commit is a
      connection error in RabbitMQ, 504, which the spec accepts: TX-7, and which `errors=False` leaves out).
    The races docs/reference/differences.md lists (a settlement written with the method that causes the
    delivery it names, DT-1; a frame behind a channel.close-ok on an open channel, ER-1; a global limit
    resumed before the requeue that freed it, RQ-1; ...) are modelled by the trace checker
    (`spec/trace.py`, `_taken_as_rabbitmq_may`): programs keep them."""
    steps = tuple(part for s in program.steps for part in _split(s, _cancels_a_consumer_of_the_write))
    if not errors:
        steps = tuple(part for s in steps for part in _split(s, _follows_a_commit))
    return replace(program, steps=steps)


def _cancels_a_consumer_of_the_write(write: list, op) -> bool:
    """`op` cancels a consumer that a basic.consume in the write started."""
    return isinstance(op, Cancel) and bool(op.tag) and any(
        isinstance(before, Consume) and before.ch == op.ch and before.tag == op.tag for before in write)


def _follows_a_commit(write: list, op) -> bool:
    return isinstance(write[-1], TxCommit)


def _ends_at_close(step):
    """A client sends nothing after its connection.close: the methods after it in a step are left out."""
    if isinstance(step, Step):
        for i, op in enumerate(step.ops):
            if isinstance(op, CloseConnection):
                return replace(step, ops=step.ops[:i + 1])
    return step


def _fresh_consumer_tags(steps: tuple) -> tuple:
    """Every basic.consume with a tag of its own ("a", "a1", "a2", ...), each basic.cancel naming the
    latest consumer of its letter: a tag a channel already uses is a connection error (530), which
    `errors=False` leaves out."""
    count: dict[str, int] = {}
    latest: dict[str, str] = {}

    def renamed(op):
        if isinstance(op, Consume) and op.tag:
            n = count.get(op.tag, 0)
            count[op.tag] = n + 1
            latest[op.tag] = op.tag + (str(n) if n else "")
            return replace(op, tag=latest[op.tag])
        if isinstance(op, Cancel) and op.tag:
            return replace(op, tag=latest.get(op.tag, op.tag))
        return op

    return tuple(replace(s, ops=tuple(renamed(op) for op in s.ops)) if isinstance(s, Step) else s for s in steps)


def _split(step, starts_a_write) -> list:
    """A step cut into several writes: a new one starts at each method for which `starts_a_write(the
    write so far, the method)` holds."""
    if not isinstance(step, Step):
        return [step]
    parts, current = [], []
    for op in step.ops:
        if current and starts_a_write(current, op):
            parts.append(replace(step, ops=tuple(current)))
            current = []
        current.append(op)
    if current:
        parts.append(replace(step, ops=tuple(current)))
    return parts


# ---------------------------------------------------------------- focused programs

# The general generator above reaches some situations too rarely for a fixed budget: most settlements name
# a tag that is not outstanding (a channel error that requeues everything), and a transaction, a
# confirm or a prefetch window is seldom followed by what would show it was broken. Focused programs are
# sequences of episodes, each a short situation of one rule family with random parameters, separated by
# general methods. An episode starts with the close of its channel, which the runner opens again: the
# channel then has no deliveries, consumers, prefetch or mode, and its delivery tags start at 1 (DT-1),
# so the episode can name the tags it will be given. Nothing says what the broker must answer: the spec
# judges the recording, as for every program.

def _writes(draw, ops: list) -> list:
    """Methods cut into writes of one to three methods (on connection 0)."""
    steps, i = [], 0
    while i < len(ops):
        n = draw(st.integers(1, 3))
        steps.append(Step(0, tuple(ops[i:i + n])))
        i += n
    return steps


def _observe_outstanding(draw, ch: int, q: int, n: int, tag: int) -> list:
    """Methods that show which of the channel's deliveries (tags 1..n from queue q) are still
    outstanding: a settlement of `tag` again (406 unless outstanding), a recover then gets, or the
    channel's close then gets on the other channel."""
    way = draw(st.sampled_from(["again", "recover", "close"]))
    other = 3 - ch
    if way == "again":
        return [Ack(ch, tag), Get(ch, q)]
    if way == "recover":
        return [Recover(ch)] + [Get(ch, q)] * (n + 1)
    return [CloseChannel(ch)] + [Get(other, q)] * (n + 1)


@st.composite
def multiple_settlement(draw, ch: int, q: int) -> list:
    """ACK-2, ACK-3: n deliveries by basic.get, an ack or nack with multiple=true naming one of them."""
    n = draw(st.integers(1, 4))
    tag = draw(st.integers(1, n))
    settle = draw(st.sampled_from([Ack(ch, tag, True), Nack(ch, tag, True, True), Nack(ch, tag, True, False)]))
    ops = [Publish(ch, q, persistent=draw(st.booleans())) for _ in range(n)] + [Get(ch, q)] * n + [settle]
    return _writes(draw, ops + _observe_outstanding(draw, ch, q, n, tag))


@st.composite
def settlement_rolled_back(draw, ch: int, q: int) -> list:
    """TX-3: settlements inside a transaction, then tx.rollback: the deliveries stay outstanding."""
    n = draw(st.integers(1, 3))
    tag = draw(st.integers(1, n))
    settle = draw(st.sampled_from([Ack(ch, tag, draw(st.booleans())), Reject(ch, tag, draw(st.booleans())),
                                   Nack(ch, tag, draw(st.booleans()), draw(st.booleans()))]))
    ops = [Publish(ch, q) for _ in range(n)] + [TxSelect(ch)] + [Get(ch, q)] * n + [settle, TxRollback(ch)]
    return _writes(draw, ops + _observe_outstanding(draw, ch, q, n, tag))


@st.composite
def confirmed_then_crash(draw, ch: int, q: int) -> list:
    """PC-5, DU-2: persistent publishes in confirm mode, a synchronous method in the same write (the
    client reads whatever confirms are out by its reply), a crash, then gets of the queue."""
    n = draw(st.integers(1, 2))
    sync = draw(st.sampled_from([Get(ch, 1 - q), Qos(ch, draw(prefetch_counts)), Declare(ch, 1 - q)]))
    return [Step(0, (ConfirmSelect(ch),)),
            Step(0, tuple(Publish(ch, q, persistent=True) for _ in range(n)) + (sync,)),
            Crash(), Step(0, tuple(Declare(1, i) for i in range(QUEUES))),
            Step(0, (Get(ch, q),) * (n + 1))]


@st.composite
def prefetch_filled(draw, ch: int, q: int) -> list:
    """PF-1: a per-consumer limit, a manual-mode consumer, and more messages than the limit."""
    n = draw(st.integers(1, 3))
    ops = [Qos(ch, n), Consume(ch, q, draw(st.sampled_from("abc")))]
    ops += [Publish(ch, q) for _ in range(n + draw(st.integers(1, 2)))]
    ops += draw(st.sampled_from([[], [Ack(ch, 1)], [Ack(ch, n, True)], [Nack(ch, 1)]]))
    return _writes(draw, ops)


@st.composite
def global_limit_over_outstanding(draw, ch: int, q: int) -> list:
    """PF-2: a global limit set while deliveries are outstanding counts them from the start."""
    k = draw(st.integers(1, 3))
    limit = draw(st.integers(1, k + 1))
    ops = [Publish(ch, q) for _ in range(k)] + [Get(ch, q)] * k
    ops += [Qos(ch, limit, True), Consume(ch, q, "g")] + [Publish(ch, q) for _ in range(2)]
    ops += draw(st.sampled_from([[], [Ack(ch, 1)], [Ack(ch, k, True)]]))
    return _writes(draw, ops)


@st.composite
def requeued_then_got(draw, ch: int, q: int) -> list:
    """ACK-6, RQ-1, RQ-2: a nack or reject with requeue=true, then gets of the queue."""
    n = draw(st.integers(1, 3))
    tag = draw(st.integers(1, n))
    settle = draw(st.sampled_from([Nack(ch, tag, draw(st.booleans()), True), Reject(ch, tag, True)]))
    ops = [Publish(ch, q) for _ in range(n)] + [Get(ch, q)] * n + [settle] + [Get(ch, q)] * (n + 1)
    return _writes(draw, ops)


@st.composite
def committed_in_order(draw, ch: int, q: int) -> list:
    """TX-2: several publishes in a transaction, committed, then read back by gets or a consumer."""
    n = draw(st.integers(2, 4))
    ops = [TxSelect(ch)] + [Publish(ch, q, persistent=draw(st.booleans())) for _ in range(n)] + [TxCommit(ch)]
    ops += draw(st.sampled_from([[Get(ch, q)] * (n + 1), [Consume(ch, q, "t", True)]]))
    return _writes(draw, ops)


@st.composite
def mandatory_unroutable(draw, ch: int, q: int) -> list:
    """RT-3, PC-4, TX-6: an unroutable mandatory publish in confirm or tx mode, then a synchronous method."""
    mode = draw(st.sampled_from([ConfirmSelect(ch), TxSelect(ch)]))
    where = draw(st.sampled_from([Publish(ch, QUEUES, mandatory=True),
                                  Publish(ch, q, "amq.fanout", mandatory=True)]))
    after = [TxCommit(ch)] if isinstance(mode, TxSelect) else [Get(ch, q)]
    return _writes(draw, [mode, Publish(ch, q), where, Publish(ch, q)] + after)


@st.composite
def committed_then_crash(draw, ch: int, q: int) -> list:
    """TX-8, DU-2: persistent publishes committed, maybe more left uncommitted, a crash, then gets of
    the queue: the committed ones survive in a durable queue, the uncommitted ones never appear."""
    n = draw(st.integers(1, 3))
    ops = [TxSelect(ch)] + [Publish(ch, q, persistent=True) for _ in range(n)] + [TxCommit(ch)]
    ops += [Publish(ch, q, persistent=True) for _ in range(draw(st.integers(0, 2)))]
    return _writes(draw, ops) + [Crash(wait=draw(st.booleans())),
                                 Step(0, tuple(Declare(1, i) for i in range(QUEUES))),
                                 Step(0, (Get(ch, q),) * (n + 1))]


@st.composite
def outstanding_then_crash(draw, ch: int, q: int) -> list:
    """DU-3, DU-2: persistent messages delivered by gets or a manual-mode consumer and not all acked, a
    crash, then gets: no delivery is outstanding after the restart, the unacked messages are ready
    again and redelivered, the acked ones are gone (once the ack reached the disk) or back."""
    n = draw(st.integers(1, 3))
    ops = [ConfirmSelect(ch)] + [Publish(ch, q, persistent=True) for _ in range(n)]
    ops += draw(st.sampled_from([[Get(ch, q)] * n, [Consume(ch, q, "k")]]))
    ops += draw(st.sampled_from([[], [Ack(ch, 1)], [Ack(ch, n, True)]])) + [Declare(ch, 1 - q)]
    return _writes(draw, ops) + [Crash(wait=draw(st.booleans())),
                                 Step(0, tuple(Declare(1, i) for i in range(QUEUES))),
                                 Step(0, (Get(ch, q),) * (n + 1))]


EPISODES = (multiple_settlement, settlement_rolled_back, confirmed_then_crash, prefetch_filled,
            global_limit_over_outstanding, requeued_then_got, committed_in_order, mandatory_unroutable)

# The episodes that end in a crash: what the programs against a broker over TCP that can be killed run
# (tests/test_conformance_crashes.py), since each restart costs that broker a second (impl) or several
# (RabbitMQ).
CRASH_EPISODES = (confirmed_then_crash, committed_then_crash, outstanding_then_crash)


@st.composite
def focused_programs(draw, *, max_episodes: int = 4, episodes: tuple = EPISODES,
                     rabbitmq_safe: bool = False) -> Program:
    """A program of one connection: episodes (above, drawn from `episodes`) on channel 1 or 2 and queue
    q0 or q1, each after the close of its channel, with general methods (no connection errors) between
    them. `rabbitmq_safe`: every consumer has a tag of its own, and `safe_for_rabbitmq`."""
    flags = (QueueFlags(draw(_flag(2, 1)), False), QueueFlags(draw(_flag(1, 2)), False))
    prelude = Step(0, tuple(Declare(1, q) for q in range(QUEUES)))
    steps: list = [prelude]
    noise = st.lists(op_strategy(errors=False), min_size=1, max_size=3).map(lambda ops: Step(0, tuple(ops)))
    for _ in range(draw(st.integers(1, max_episodes))):
        steps += [_ends_at_close(s) for s in draw(st.lists(noise, max_size=2))]
        episode = draw(st.sampled_from(episodes))
        ch, q = draw(st.sampled_from(CHANNELS)), draw(declared_queues)
        steps.append(Step(0, (CloseChannel(ch),)))
        steps += draw(episode(ch, q))
    program = Program(flags, 1, tuple(steps))
    if rabbitmq_safe:
        program = safe_for_rabbitmq(replace(program, steps=_fresh_consumer_tags(program.steps)))
    return program
