"""The disk and the faults: fsync of one copy, connection loss, broker crash and restart, a queue
failing to take a message, a client vanishing and the broker noticing late, a channel error (DU-1..3,
PC-6, PC-10, TX-8, TX-9, AM-2, RQ-3, RQ-4, ER-1).

The disk holds ``(queue, key, msg)`` for persistent copies in durable queues. What is pending is
derived, not stored: a live persistent copy in a durable queue that is not on disk waits to be
written; a disk record whose copy is no longer live waits to be removed. ``DiskFsync`` makes one
such difference durable; a batch fsync is a run of these with nothing observable between, so
modelling them one by one loses no behaviour and exhibits every partial batch a crash can leave (TX-9).
"""
from __future__ import annotations

from . import broker, network
from .frames import CHANNEL_OPEN, MISSING_EXCHANGE, NOT_FOUND, R_NO_EXCHANGE
from .state import (
    C_OPEN, CH_CLOSED, CH_OPEN, CLOSED_CHANNEL, CLOSED_CLIENT, CONN_CLOSING, CONN_DOWN, CONN_GONE, CONN_UP,
    EV_RECOVERED, FATE_LOST_AUTOACK, FATE_LOST_CRASH, FATE_QUEUE_FAILED, NEW_CHANNEL, NEW_CLIENT, Channel, Conn, Entry,
    State, put,
)
from .storage import add_fates, close_connection, forget_waits, with_channel


def live_copies(state: State) -> dict:
    """Every copy the broker holds in memory: (queue, key) -> (msg, persistent) (ready, outstanding, held back by tx)."""
    live = {}
    for q, queue in enumerate(state.queues):
        for e in queue.ready:
            live[(q, e.key)] = (e.msg, e.persistent)
    for conn in state.conns:
        for channel in conn.channels:
            for u in channel.unacked:
                live[(u.queue, u.key)] = (u.msg, u.persistent)
            for _, u in channel.tx_settles:
                live[(u.queue, u.key)] = (u.msg, u.persistent)
    return live


def pending_disk(state: State) -> list:
    """The fsyncs that would change the disk: (queue, key, msg, write), in a canonical order (PC-5, TX-8)."""
    disk = state.disk
    if not disk:
        # Common case, checked cheaply: an empty disk and no durable queue means nothing to write.
        for queue in state.queues:
            if queue.durable:
                break
        else:
            return []
    on_disk = {(q, k): m for q, k, m in disk}
    queues = state.queues
    out = []
    live = live_copies(state)
    for (q, k), (msg, persistent) in live.items():
        if persistent and queues[q].durable and k > queues[q].born and (q, k) not in on_disk:
            out.append((q, k, msg, True))
    for (q, k), msg in on_disk.items():
        if (q, k) not in live:
            out.append((q, k, msg, False))
    out.sort()
    return out


def fsync(state: State, q: int, key: int, msg: int, write: bool) -> State:
    """DiskFsync: write (or remove) one copy's record durably; a written copy no longer holds up confirms."""
    if write:
        state = state._replace(disk=tuple(sorted(state.disk + ((q, key, msg),))))
        return forget_waits(state, ((q, key),))
    return state._replace(disk=tuple(r for r in state.disk if (r[0], r[1]) != (q, key)))


def reset_connection(state: State, c: int, status: int, channels_open: bool = True) -> State:
    """Connection slot c with nothing in flight and its channels in their initial state for ``status``
    (closed when the connection is down, or when the client opens them itself)."""
    conn = state.conns[c]
    n = len(conn.channels)
    if status == CONN_DOWN or not channels_open:
        channels, clients = (CLOSED_CHANNEL,) * n, (CLOSED_CLIENT,) * n
    else:
        channels, clients = (NEW_CHANNEL,) * n, (NEW_CLIENT,) * n
    fifos = network.empty(n)
    return state._replace(conns=put(state.conns, c, Conn(status, False, conn.published, fifos, fifos, (), channels,
                                                          clients)))


def lose_connection(state: State, c: int) -> State:
    """NetworkLoss: frames in flight are gone; the broker closes everything of the connection (RQ-4);
    automatic-mode deliveries still in flight are lost (AM-2)."""
    if not state.conns[c].broker_closed:
        state = close_connection(state, c)
    lost = tuple((q, k, FATE_LOST_AUTOACK, m, p) for _, _, q, k, m, p in state.conns[c].auto)
    return reset_connection(add_fates(state, lost), c, CONN_DOWN)


def stale_slot(state: State) -> int | None:
    """The first slot free to hold a vanished connection until the broker notices (``vanish``), or None."""
    for d, conn in enumerate(state.conns):
        if conn.status == CONN_GONE and conn.broker_closed:
            return d
    return None


def vanish(state: State, c: int) -> State:
    """ClientVanish: the client of connection c is gone without closing its socket (RQ-3, RQ-4 late).

    The client's side is gone at once: what was in flight to it is lost (automatic-mode deliveries
    among it: AM-2), and slot c is down, free to connect again. The broker's side is not: the
    connection, as the broker holds it, moves to a free stale slot d, its consumers and exclusive
    queues renamed with it, and stays there until the broker notices (``detect``). Meanwhile the
    broker dispatches to its consumers within their prefetch (AM-3, PF-3), and what it sends there is
    lost as it is written (``broker.send``).

    What the broker can still get from the vanished client: the frames it had sent are taken before
    the vanish or not at all (they are dropped here). The broker takes frames at any time, so every
    prefix of them taken is among the runs; what is left out is only a frame taken *after* some step
    that follows the vanish: overtaken by the reconnected client's frames, say, which takes TCP
    retransmitting it after a partition more slowly than a new connection opens
    (docs/reference/differences.md, "Where the spec differs"). A paused process's kernel delivers at once what it had written, as the recording
    ``silent_consumer_replaced`` shows. With no frame to come, nothing owed to the client can reach
    it: its open transactions are rolled back (the settlements held back are outstanding again, TX-3;
    the broker would discard them at the close anyway, RQ-4) and its confirms and commit-ok are no
    longer owed (``abandoned``)."""
    conn = state.conns[c]
    d = stale_slot(state)
    if d is None:
        raise ValueError(f"ClientVanish of connection {c} with no slot free to hold it (its precondition, can_vanish)")
    lost = tuple((q, k, FATE_LOST_AUTOACK, m, p) for _, _, q, k, m, p in conn.auto)
    n = len(conn.channels)
    fifos = network.empty(n)
    held = Conn(CONN_GONE, False, 0, fifos, fifos, (), tuple(abandoned(ch) for ch in conn.channels),
                (CLOSED_CLIENT,) * n)
    state = rename_connection(state._replace(conns=put(state.conns, d, held)), c, d)
    return reset_connection(add_fates(state, lost), c, CONN_DOWN)


def abandoned(channel: Channel) -> Channel:
    """A broker channel as it stays once its client vanished (``vanish``): its open transaction rolled
    back, no confirm or commit-ok owed; deliveries, consumers and limits kept."""
    if channel.status == CH_CLOSED:
        return channel
    unacked = channel.unacked
    if channel.tx_settles:
        unacked = tuple(sorted(unacked + tuple(u for _, u in channel.tx_settles)))
    return channel._replace(unacked=unacked, publish_seq=0, unconfirmed=(), confirmed=(), tx_pubs=(), tx_settles=(),
                            committing=(), commit_pending=False)


def rename_connection(state: State, c: int, d: int) -> State:
    """The queues' references to connection c (its consumers in round-robins and as exclusive
    consumers, its exclusive queues, its channels' requeues that copies away wait for, a delivery on its way
    to one of its channels) made to slot d."""
    def moved(consumer: tuple) -> tuple:
        return (d,) + consumer[1:] if consumer and consumer[0] == c else consumer

    def away(a: tuple) -> tuple:
        return (a[0], d, a[2]) if a[1] == c else a
    queues = tuple(queue._replace(ring=tuple(moved(r) for r in queue.ring), exclusive=moved(queue.exclusive),
                                  owner=d + 1 if queue.owner == c + 1 else queue.owner,
                                  away=tuple(sorted(away(a) for a in queue.away)) if queue.away else (),
                                  sending=moved(queue.sending))
                   for queue in state.queues)
    return state._replace(queues=queues)


def detect(state: State, d: int) -> State:
    """BrokerDetect: the broker notices that the client of the connection held in slot d vanished and
    closes it as it closes any connection (RQ-4: every delivery still outstanding is requeued; DU-4:
    its exclusive queues are deleted); the slot is free again."""
    return close_connection(state, d)


def free_slot(channels: int) -> Conn:
    """A slot free to hold a vanished connection: no client (gone), the broker's end closed, nothing in it."""
    fifos = network.empty(channels)
    return Conn(CONN_GONE, True, 0, fifos, fifos, (), (CLOSED_CHANNEL,) * channels, (CLOSED_CLIENT,) * channels)


def free_stale(state: State, d: int) -> State:
    """Stale slot d empty and free (after a crash)."""
    return state._replace(conns=put(state.conns, d, free_slot(len(state.conns[d].channels))))


def channel_error(state: State, c: int, ch: int) -> State:
    """BrokerChannelError: the broker closes channel ch with an error, as when an operation of the
    application on it fails (a publish to a missing exchange: 404): ``broker.channel_error``, ER-1."""
    return broker.channel_error(state, c, ch, NOT_FOUND, R_NO_EXCHANGE, MISSING_EXCHANGE)


def lost_in_crash(live: tuple[tuple[int, int], ...], on_disk: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    """The copies, as (queue, key), a crash loses: every live one whose record is not on disk. A crash
    keeps exactly what is on disk (DU-2, PC-10), records of copies acknowledged since included (TX-8).

    pre: len(set(live)) == len(live)
    post: all(c in live and c not in on_disk for c in __return__)
    post: all(c in __return__ or c in on_disk for c in live)
    post: len(set(__return__)) == len(__return__)
    """
    disk = set(on_disk)
    return tuple(c for c in live if c not in disk)


def crash(state: State) -> State:
    """BrokerCrash: every connection drops, and everything only in memory is gone: transient
    messages, copies not yet written, held-back transactions (DU-2, PC-10, TX-9). Disk records stay,
    including those of copies acknowledged since their last fsync (TX-8)."""
    live = live_copies(state)
    gone = lost_in_crash(tuple(live), tuple((q, k) for q, k, _ in state.disk))
    lost = [(q, k, FATE_LOST_CRASH) + live[(q, k)] for q, k in gone]
    for conn in state.conns:
        lost.extend((q, k, FATE_LOST_AUTOACK, m, p) for _, _, q, k, m, p in conn.auto)
    for q, queue in enumerate(state.queues):        # sent to a channel that has not numbered it (PF-3)
        if queue.sending:
            e = queue.sending[3]
            lost.append((q, e.key, FATE_LOST_AUTOACK, e.msg, e.persistent))
    for c, conn in enumerate(state.conns):
        state = free_stale(state, c) if conn.status == CONN_GONE else reset_connection(state, c, CONN_DOWN)
    queues = tuple(queue._replace(ready=(), ring=(), exists=queue.exists and queue.durable, owner=0, exclusive=(),
                                  away=(), sending=()) for queue in state.queues)
    state = state._replace(broker_up=False, queues=queues, bindings=tuple(
        b for b in state.bindings if queues[b].exists))
    return add_fates(state, lost)


def restart(state: State) -> State:
    """BrokerRestart: durable queues come back with their persisted copies, all ready, in enqueue
    order (DU-1, DU-2, DU-3). RabbitMQ 3.10.8 marks what it recovers after an unclean shutdown as
    redelivered; DU-3 allows that, and the spec does the same for every recovered copy.

    A copy recovered although it had gone with a fate (acknowledged before its removal reached the
    disk: TX-8) lives again; the ghost ``revived`` records it, so that a property can tell the fates
    of its earlier life (kept: ``acked_never_redelivered`` is about them) from an effect in this one."""
    by_queue: dict = {}
    for q, k, m in state.disk:
        by_queue.setdefault(q, []).append(Entry(k, m, True, True))
    queues = tuple(queue._replace(ready=tuple(sorted(by_queue.get(q, ())))) if queue.exists else queue
                   for q, queue in enumerate(state.queues))
    events = state.events | (EV_RECOVERED if state.disk else 0)
    return state._replace(broker_up=True, queues=queues, events=events,
                          revived=revived_copies(state.revived, state.fates, queues))


def revived_copies(revived: tuple, fates: tuple, queues: tuple) -> tuple:
    """``revived`` with every ready copy of ``queues`` (those a restart recovered) that has a fate, sorted."""
    if not fates:
        return revived
    fated = {(f[0], f[1]) for f in fates}
    back = [(q, e.key) for q, queue in enumerate(queues) for e in queue.ready if (q, e.key) in fated]
    return tuple(sorted(set(revived).union(back))) if back else revived


def queue_fail(state: State, c: int, ch: int, seq: int) -> State:
    """BrokerQueueFail: the queues holding an unconfirmed publish drop it; it will be nacked (PC-6)."""
    channel = state.conns[c].channels[ch - 1]
    pending = next(p for p in channel.unconfirmed if p.seq == seq)
    gone: list[tuple] = []
    queues = state.queues
    for q, queue in enumerate(queues):
        keep = tuple(e for e in queue.ready if e.msg != pending.msg)
        if len(keep) != len(queue.ready):
            gone.extend((q, e.key, FATE_QUEUE_FAILED, e.msg, e.persistent) for e in queue.ready if e.msg == pending.msg)
            queues = put(queues, q, queue._replace(ready=keep))
    state = state._replace(queues=queues)
    channel = channel._replace(unconfirmed=tuple(
        p._replace(nack=True, waits=()) if p.seq == seq else p for p in channel.unconfirmed))
    state = with_channel(state, c, ch, channel)
    state = add_fates(state, gone)
    return forget_waits(state, ((g[0], g[1]) for g in gone))


def failable(state: State, pending) -> bool:
    """Whether a queue still holds a ready copy of this unconfirmed publish that it could fail to take."""
    return not pending.nack and any(e.msg == pending.msg for queue in state.queues for e in queue.ready)



def drop_recovered(state: State, q: int, key: int, was_write: bool) -> State:
    """A recovered copy found missing after all: its write never reached the disk before the crash
    (it was lost: DU-2, PC-10), or its removal did (it stays gone: TX-8 shows the other outcome).

    The trace checker crashes with every pending write on disk and no pending removal made, then
    decides each such copy lazily with this; together the two give every disk a crash can leave."""
    queue = state.queues[q]
    entry = next(e for e in queue.ready if e.key == key)
    state = state._replace(queues=put(state.queues, q, queue._replace(ready=tuple(e for e in queue.ready
                                                                                  if e.key != key))),
                           disk=tuple(r for r in state.disk if (r[0], r[1]) != (q, key)))
    if was_write:
        state = add_fates(state, ((q, key, FATE_LOST_CRASH, entry.msg, True),))
    return state


# ---------------------------------------------------------------- preconditions
# Each disk and fault action's precondition, beside its effect (``spec.machine.enabled`` asks these;
# the configuration's budgets decide how many faults are tried).


def can_fsync(state: State, a) -> bool:
    """DiskFsync: the broker is up and this write (or removal) is pending (PC-5, TX-8)."""
    return state.broker_up and (a.queue, a.key, a.msg, a.write) in pending_disk(state)


def can_queue_fail(state: State, a) -> bool:
    """BrokerQueueFail: the publish is unconfirmed on an open channel and a queue still holds a copy (PC-6)."""
    if not state.broker_up or not 0 <= a.conn < len(state.conns):
        return False
    conn = state.conns[a.conn]
    if conn.broker_closed or not 1 <= a.ch <= len(conn.channels):
        return False
    channel = conn.channels[a.ch - 1]
    if channel.status != CH_OPEN:
        return False
    return any(p.seq == a.seq and failable(state, p) for p in channel.unconfirmed)


def can_crash(state: State, a) -> bool:
    """BrokerCrash: the broker is up."""
    return state.broker_up


def can_restart(state: State, a) -> bool:
    """BrokerRestart: the broker is down."""
    return not state.broker_up


def can_lose_connection(state: State, a) -> bool:
    """NetworkLoss: the broker is up and the client's connection is up (or closing)."""
    return state.broker_up and 0 <= a.conn < len(state.conns) and state.conns[a.conn].status in (CONN_UP,
                                                                                                 CONN_CLOSING)


def can_vanish(state: State, a) -> bool:
    """ClientVanish: as NetworkLoss, of a connection the broker still holds open (once it has closed its
    end, the client reads the close or loses the connection, ``NetworkLoss``), and a slot is free to
    hold it until the broker notices."""
    return can_lose_connection(state, a) and not state.conns[a.conn].broker_closed and \
        stale_slot(state) is not None


def can_detect(state: State, a) -> bool:
    """BrokerDetect: the broker is up and slot ``conn`` holds a vanished connection it has not closed."""
    if not state.broker_up or not 0 <= a.conn < len(state.conns):
        return False
    conn = state.conns[a.conn]
    return conn.status == CONN_GONE and not conn.broker_closed


def can_channel_error(state: State, a) -> bool:
    """BrokerChannelError: the broker's end of the connection is open, the channel open at both ends (an
    operation of the application on it fails: its client holds it open), and no channel.open is in
    flight on it (a client re-opening an open channel makes a connection error of its own, ER-1)."""
    if not state.broker_up or not 0 <= a.conn < len(state.conns):
        return False
    conn = state.conns[a.conn]
    if conn.broker_closed or conn.status == CONN_GONE or not 1 <= a.ch <= len(conn.channels):
        return False
    return conn.channels[a.ch - 1].status == CH_OPEN and conn.clients[a.ch - 1].status == C_OPEN and \
        all(f.method != CHANNEL_OPEN for f in conn.to_broker[a.ch])
