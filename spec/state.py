"""The state of the model: broker, clients, network and disk, as immutable, canonical tuples.

Everything here is a NamedTuple of ints, bools and tuples (no str, no None), so a state is
hashable, equal states hash the same in every process, and ``hash(state)`` is the fingerprint the
explorers use. Every collection is kept in one canonical order (sorted, or FIFO where order is
the meaning), so two states that mean the same thing are equal.

Fields marked *ghost* are history variables kept only for the properties (TLA+ style): no guard
and no effect on the modelled system reads them.
"""
from __future__ import annotations

from typing import NamedTuple

from .budgets import SPENT

# Broker-side channel status (ER-1). CH_CLOSING: the broker closed it and waits for close-ok;
# CH_ENDING: the client closed it and the broker has not sent close-ok yet. Frames the client sent
# after the close are dropped in both (RabbitMQ's closing channel process ignores them), but a
# close-ok from the client, which ends the channel in both (``broker.take_frame``).
CH_CLOSED, CH_OPEN, CH_CLOSING, CH_ENDING = 0, 1, 2, 3
# Client-side channel status.
C_CLOSED, C_OPEN, C_CLOSING, C_OPENING = 0, 1, 2, 3
# Channel modes (PC-8: a channel is in at most one of confirm and tx mode).
MODE_NONE, MODE_CONFIRM, MODE_TX = 0, 1, 2
# Connection status. CONN_GONE marks a slot past the configuration's connections that holds the broker's
# side of a connection whose client vanished (``faults.vanish``): its client is gone for good, and the
# broker still holds the connection until it notices (``faults.detect``); free again once it has
# (``broker_closed``).
CONN_DOWN, CONN_UP, CONN_CLOSING, CONN_GONE = 0, 1, 2, 3

# Fates: how a copy of a message left the broker (ghost). A history: a record stays when a restart
# brings the copy back from disk (TX-8: its removal had not reached the disk), and the copy's later
# life may record the same fate again (``State.revived`` tells the lives apart).
(FATE_ACKED, FATE_AUTO, FATE_DROPPED, FATE_DEAD_LETTERED, FATE_LOST_CRASH, FATE_LOST_AUTOACK,
 FATE_QUEUE_FAILED, FATE_QUEUE_DELETED, FATE_PURGED) = range(1, 10)
FATE_NAMES = {FATE_ACKED: "acknowledged", FATE_AUTO: "delivered in automatic mode",
              FATE_DROPPED: "dropped", FATE_DEAD_LETTERED: "dead-lettered",
              FATE_LOST_CRASH: "lost in a crash", FATE_LOST_AUTOACK: "lost in flight (automatic mode)",
              FATE_QUEUE_FAILED: "refused by its queue", FATE_QUEUE_DELETED: "deleted with its queue",
              FATE_PURGED: "purged"}

# Events (ghost bits) that reachability properties look for.
EV_MULTIPLE_ACK = 1 << 0        # one client ack/nack settled two or more deliveries (ACK-2)
EV_REQUEUE_TWICE = 1 << 1       # a copy was requeued a second time (RQ-6)
EV_COMMIT_WITH_ACKS = 1 << 2    # a tx.commit applied acknowledgements (TX-3)
EV_RECOVERED = 1 << 3           # a restart recovered a message from disk (DU-2)
EV_ROLLBACK_KEPT = 1 << 4       # a tx.rollback kept deliveries outstanding (TX-3)
EV_CHANNEL_REQUEUE = 1 << 5     # a channel or connection close requeued deliveries (RQ-4)
EV_CONFIRM_MULTIPLE = 1 << 6    # a confirm with multiple=true covered two or more publishes (PC-3)
EV_COMMIT_PUBLISHED = 1 << 7    # a tx.commit enqueued publishes (TX-2)
EV_TX_RETURN = 1 << 8           # a tx.commit returned an unroutable mandatory message (TX-6)


class Entry(NamedTuple):
    """A copy of a message ready in a queue; ``key`` is its enqueue position in that queue (RQ-1)."""

    key: int
    msg: int
    redelivered: bool
    persistent: bool


class Queue(NamedTuple):
    """A queue: its flags, its ready copies in enqueue order, and its consumers in round-robin order."""

    exists: bool
    durable: bool
    owner: int                      # exclusive owner: connection index + 1; 0 when not exclusive (DU-4)
    dead_letter: int                # queue index + 1 to dead-letter into; 0 for none (ACK-6)
    ready: tuple                    # Entry, sorted by key
    enqueued: int                   # copies ever enqueued; the next key is enqueued + 1
    ring: tuple                     # (conn, ch, consumer_tag) in round-robin order (DS-1)
    exclusive: tuple                # (conn, ch, consumer_tag) of its exclusive consumer; () for none
    born: int = 0                   # copies enqueued before it was last declared: keys up to it were
    #                                 copies of a queue of this name since deleted (``storage.orphaned``)
    away: tuple = ()                # (key, conn, ch) of ready copies channel (conn, ch) requeued behind its limiter's
    #                                 resume, sorted: the queue has not taken the requeue yet (spec.interleavings)
    sending: tuple = ()             # (conn, ch, consumer_tag, Entry): its head, which the global limiter of that
    #                                 channel admitted for an automatic-mode consumer of it, on its way to the
    #                                 channel, which has not numbered it yet; () for none (PF-3, ``broker.deliver``)


class Unacked(NamedTuple):
    """An outstanding manual-mode delivery held by a channel (AM-3)."""

    tag: int
    queue: int
    key: int
    msg: int
    redelivered: bool
    persistent: bool
    consumer: int                   # consumer tag, 0 for basic.get (PF-4)


class Consumer(NamedTuple):
    """A consumer as the broker's channel knows it."""

    tag: int
    queue: int
    no_ack: bool
    limit: int                      # per-consumer prefetch, fixed when it started (PF-2); 0 = none


class Pending(NamedTuple):
    """A publish of a confirm-mode channel that the broker has not confirmed yet (PC-2)."""

    seq: int
    msg: int
    nack: bool                      # a queue failed to take it (PC-6): it will be nacked
    waits: tuple                    # (queue, key) copies not yet on disk (PC-5)


class Channel(NamedTuple):
    """A channel as the broker holds it."""

    status: int
    mode: int
    next_tag: int                   # DT-1
    unacked: tuple                  # Unacked, sorted by tag
    consumers: tuple                # Consumer, sorted by tag
    prefetch: int                   # limit for consumers started later (basic.qos global=false)
    global_limit: int               # basic.qos global=true; 0 = none
    volume: int                     # deliveries the global limit counts (RabbitMQ's limiter volume, PF-2);
    #                                 below 0 after a commit counts off more than it held (``broker.count_off``)
    qos_excess: int                 # ghost: consumer deliveries outstanding or held back when the global
    #                                 limit was set, if more than it (PF-5)
    qos_uncounted: int              # ghost: consumer deliveries a transaction held back when the global limit
    #                                 was set from none: never counted, yet counted off at commit (TX-3, PF-5)
    publish_seq: int                # PC-1
    unconfirmed: tuple              # Pending, sorted by seq
    confirmed: tuple                # ghost: seqs the broker has confirmed, sorted (PC-2)
    tx_pubs: tuple                  # held-back publishes: (exchange, routing_key, mandatory, persistent, msg)
    tx_settles: tuple               # held-back settlements: (kind, Unacked), kind SETTLE_*
    committing: tuple               # copies of the commit in progress not yet on disk; () when none
    commit_pending: bool            # a tx.commit is applied and waits for commit-ok (TX-7)


SETTLE_ACK, SETTLE_DROP, SETTLE_REQUEUE = 0, 1, 2


class ClientChannel(NamedTuple):
    """A channel as the client sees it."""

    status: int
    mode: int                       # the mode the client asked for
    held: tuple                     # manual-mode delivery tags received and not settled, sorted
    tx_held: tuple                  # tags settled inside the open transaction (back on rollback, TX-3)
    consumers: tuple                # consumer tags started and not cancelled, sorted
    pub_seq: int                    # publishes sent since confirm.select (PC-1)
    confirms: tuple                 # ghost: publish seqs the client has seen confirmed, sorted
    last_tag: int                   # ghost: the last delivery tag received (DT-1)
    last_msg: int                   # ghost: the last message received (RQ-3)
    disorder: bool                  # ghost: a message arrived after a later-published one (RQ-3)
    setup: int                      # bits: which of the role's declares (low) and binds (high) were sent
    tx_dirty: bool                  # something was published or settled since the last commit/rollback


class Conn(NamedTuple):
    """One connection slot: the network between a client and the broker, and both ends' channels.

    The frames in flight are kept as one FIFO per channel number (index 0: the connection's own
    frames), in each direction. RabbitMQ runs each channel of a connection as its own process and
    keeps order only within a channel: the broker may act on any channel's oldest frame, and the
    frames of different channels reach the client in any interleaving (``spec.network``).
    """

    status: int                     # as the client sees it
    broker_closed: bool             # the broker has closed its end (connection.close or close-ok sent)
    published: int                  # messages published on this slot so far (names the next msg)
    to_broker: tuple                # per channel number 0..n: frames in flight to the broker, FIFO each
    to_client: tuple                # per channel number 0..n: frames in flight to the client, FIFO each
    auto: tuple                     # (ch, tag, queue, key, msg, persistent) automatic-mode deliveries in flight (AM-2)
    channels: tuple                 # Channel per channel number 1..n
    clients: tuple                  # ClientChannel per channel number 1..n


class Used(NamedTuple):
    """How much of each budget a run has spent, one counter per spent budget of spec.budgets, in its order
    (configurations cap them: RQ-6), all 0 at the start. Written out field by field so that a type checker
    (and mypyc: rabbitproof/compiled.py) knows them; the check below keeps them the budgets' own."""

    requeues: int = 0
    closes: int = 0
    reconnects: int = 0
    crashes: int = 0
    channel_errors: int = 0
    failures: int = 0
    bad: int = 0
    qos: int = 0
    gets: int = 0
    cancels: int = 0
    admin: int = 0


if Used._fields != SPENT:
    raise ImportError(f"spec.state.Used counts {Used._fields}, but spec.budgets spends {SPENT}: "
                      "make them the same, in the same order")


class State(NamedTuple):
    """The whole system."""

    broker_up: bool
    conns: tuple                    # Conn per connection slot
    queues: tuple                   # Queue per model queue
    bindings: tuple                 # queues bound to the fanout exchange, sorted
    disk: tuple                     # (queue, key, msg) persisted copies, sorted (PC-5, DU-2)
    used: Used
    fates: tuple                    # ghost: (queue, key, fate, msg, persistent) of copies gone, sorted (a history)
    delivered: tuple                # ghost: (queue, key) copies delivered at least once, sorted (RQ-2)
    confirmed_msgs: tuple           # ghost: messages the broker confirmed with basic.ack, sorted (PC-10)
    tx_groups: tuple                # ghost: the (queue, key) copies each commit enqueued (TX-9)
    events: int                     # ghost: EV_* bits
    revived: tuple = ()             # ghost: (queue, key) copies a restart recovered from disk although they had
    #                                 a fate, sorted: their fates recorded before it are of an earlier life (TX-8)


NEW_CHANNEL = Channel(CH_OPEN, MODE_NONE, 1, (), (), 0, 0, 0, 0, 0, 0, (), (), (), (), (), False)
CLOSED_CHANNEL = NEW_CHANNEL._replace(status=CH_CLOSED)
NEW_CLIENT = ClientChannel(C_OPEN, MODE_NONE, (), (), (), 0, (), 0, 0, False, 0, False)
CLOSED_CLIENT = NEW_CLIENT._replace(status=C_CLOSED)


def put(t: tuple, i: int, value) -> tuple:
    """Tuple t with element i replaced."""
    return t[:i] + (value,) + t[i + 1:]


# Performance: NamedTuple._replace costs several microseconds (a kwargs dict, a map over every
# field, _make's length check); the hot paths below build the new tuple once instead. ``_new``
# makes a NamedTuple from a ready tuple of all its fields, exactly what _replace ends in.
_new = tuple.__new__


def _quick_replace(cls: type):
    """A ``_replace`` for the NamedTuple ``cls`` that gives what the standard one gives, faster: one
    field by slicing, several into a list, each looked up by name in a table made once (the standard
    one pops every field from the keywords and checks the length). A name that is not a field is the
    same ValueError. Installed below on every state class, so that every ``_replace`` of the spec,
    readable as it is, runs near the speed of the hand-built tuples above (with the engine's freezing of
    each level, 1.06x to 1.14x on a search of ``medium``: docs/results.md)."""
    index = {name: i for i, name in enumerate(cls._fields)}     # type: ignore[attr-defined]

    def _replace(self, /, **changes):
        if len(changes) == 1:
            for name, value in changes.items():
                i = index.get(name)
                if i is not None:
                    return _new(type(self), self[:i] + (value,) + self[i + 1:])
        values = list(self)
        for name, value in changes.items():
            i = index.get(name)
            if i is None:
                raise ValueError(f"Got unexpected field names: {[n for n in changes if n not in index]!r}")
            values[i] = value
        return _new(type(self), values)

    _replace.__doc__ = f"Return a new {cls.__name__} object replacing specified fields with new values"
    return _replace


for _cls in (Entry, Queue, Unacked, Consumer, Pending, Channel, ClientChannel, Conn, Used, State):
    setattr(_cls, "_replace", _quick_replace(_cls))


def with_conns(state: State, conns: tuple) -> State:
    """State with its conns (field 1) replaced."""
    return _new(State, (state[0], conns) + state[2:])


def with_conn(state: State, c: int, conn: Conn) -> State:
    """State with connection slot c replaced."""
    conns = state[1]
    return _new(State, (state[0], conns[:c] + (conn,) + conns[c + 1:]) + state[2:])


def with_queues(state: State, queues: tuple) -> State:
    """State with its queues (field 2) replaced."""
    return _new(State, state[:2] + (queues,) + state[3:])


def with_used(state: State, used: Used) -> State:
    """State with its budgets (field 5) replaced."""
    return _new(State, state[:5] + (used,) + state[6:])


def with_fates(state: State, fates: tuple) -> State:
    """State with its fates (field 6) replaced."""
    return _new(State, state[:6] + (fates,) + state[7:])


def conn_channels(conn: Conn, channels: tuple) -> Conn:
    """Conn with its broker channels replaced."""
    return Conn(conn.status, conn.broker_closed, conn.published, conn.to_broker, conn.to_client, conn.auto,
                channels, conn.clients)


def conn_clients(conn: Conn, clients: tuple) -> Conn:
    """Conn with its client channel views replaced."""
    return Conn(conn.status, conn.broker_closed, conn.published, conn.to_broker, conn.to_client, conn.auto,
                conn.channels, clients)


def conn_to_client(conn: Conn, to_client: tuple) -> Conn:
    """Conn with its broker-to-client frames replaced."""
    return Conn(conn.status, conn.broker_closed, conn.published, conn.to_broker, to_client, conn.auto,
                conn.channels, conn.clients)


def conn_to_broker(conn: Conn, to_broker: tuple) -> Conn:
    """Conn with its client-to-broker frames replaced."""
    return Conn(conn.status, conn.broker_closed, conn.published, to_broker, conn.to_client, conn.auto,
                conn.channels, conn.clients)


def add_sorted(t: tuple, item) -> tuple:
    """Sorted tuple t with item added (kept sorted, no duplicates)."""
    if item in t:
        return t
    return tuple(sorted(t + (item,)))
