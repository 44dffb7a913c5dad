"""Where copies of messages live and how they move: enqueue, requeue in place, settle, dead-letter,
and what closing a channel or a connection does to them (RQ-1, RQ-4, ACK-6, DU-4).
"""
from __future__ import annotations

from . import network
from .state import (
    CH_CLOSED, CLOSED_CHANNEL, EV_CHANNEL_REQUEUE, EV_REQUEUE_TWICE, FATE_ACKED, FATE_DEAD_LETTERED,
    FATE_DROPPED, FATE_LOST_AUTOACK, FATE_QUEUE_DELETED, SETTLE_ACK, SETTLE_DROP, Entry, Queue, State,
    conn_channels, put, with_conn, with_conns, with_fates, with_queues,
)


def next_ready(queue: Queue) -> int:
    """The index in ``queue.ready`` of the copy a delivery or a basic.get takes: the first that is not away
    (spec.interleavings), or -1 when every ready copy is away or none is ready (DS-1, RQ-1)."""
    if not queue.away:
        return 0 if queue.ready else -1
    away = {key for key, _, _ in queue.away}
    for i, entry in enumerate(queue.ready):
        if entry.key not in away:
            return i
    return -1


def present(queue: Queue) -> tuple:
    """The ready copies the queue's process holds: all but those away behind a resume (spec.interleavings)."""
    if not queue.away:
        return queue.ready
    away = {key for key, _, _ in queue.away}
    return tuple(e for e in queue.ready if e.key not in away)


def with_channel(state: State, c: int, ch: int, channel) -> State:
    """State with broker channel (c, ch) replaced."""
    conn = state.conns[c]
    return with_conn(state, c, conn_channels(conn, put(conn.channels, ch - 1, channel)))


def with_queue(state: State, q: int, queue) -> State:
    """State with queue q replaced."""
    return with_queues(state, put(state.queues, q, queue))


def enqueue(state: State, q: int, msg: int, persistent: bool) -> tuple[State, int]:
    """A new copy at the tail of queue q; its key is the queue's next enqueue position (RQ-1)."""
    queue = state.queues[q]
    key = queue.enqueued + 1
    queue = Queue(queue.exists, queue.durable, queue.owner, queue.dead_letter,
                  queue.ready + (Entry(key, msg, False, bool(persistent)),), key, queue.ring, queue.exclusive,
                  queue.born, queue.away, queue.sending)
    return with_queue(state, q, queue), key


def add_fates(state: State, records) -> State:
    """Record copies gone (ghost). A copy a restart had revived (``State.revived``) that goes again is
    no longer marked: its fates now include this life's."""
    records = tuple(records)
    if not records:
        return state
    state = with_fates(state, tuple(sorted(set(state.fates).union(records))))
    if state.revived:
        gone = {(r[0], r[1]) for r in records}
        revived = tuple(p for p in state.revived if p not in gone)
        if len(revived) != len(state.revived):
            state = state._replace(revived=revived)
    return state


def forget_waits(state: State, pairs) -> State:
    """Copies that left their queue no longer hold up a confirm (PC-5) or a commit-ok (TX-7)."""
    pairs = set(pairs)
    conns = state.conns
    for c, conn in enumerate(conns):
        for channel in conn.channels:
            if channel.committing or channel.unconfirmed:
                break
        else:
            continue                # no channel of this connection waits for anything (common case)
        changed = False
        channels = list(conn.channels)
        for i, channel in enumerate(channels):
            if channel.committing and pairs.intersection(channel.committing):
                channel = channel._replace(committing=tuple(p for p in channel.committing if p not in pairs))
                changed = True
            if channel.unconfirmed and any(pairs.intersection(p.waits) for p in channel.unconfirmed):
                channel = channel._replace(unconfirmed=tuple(
                    p._replace(waits=tuple(w for w in p.waits if w not in pairs)) for p in channel.unconfirmed))
                changed = True
            channels[i] = channel
        if changed:
            conns = put(conns, c, conn._replace(channels=tuple(channels)))
    return state if conns is state.conns else with_conns(state, conns)


def requeue_position(keys: tuple[int, ...], key: int) -> int:
    """Where a requeued copy goes back among a queue's ready copies, given their enqueue keys: its
    original place, so the queue stays in enqueue order (RQ-1). Searched from the tail, as a copy
    usually goes back near it.

    pre: all(a < b for a, b in zip(keys, keys[1:]))
    pre: key not in keys
    post: 0 <= __return__ <= len(keys)
    post: all(k < key for k in keys[:__return__])
    post: all(k > key for k in keys[__return__:])
    """
    i = len(keys)
    while i and keys[i - 1] > key:
        i -= 1
    return i


def orphaned(queue: Queue, key: int) -> bool:
    """Whether the outstanding copy ``key`` of ``queue`` lost its queue: the queue was deleted, and
    perhaps declared again since. A queue declared again is a new queue (RabbitMQ 3.10.8: a delivery of
    the deleted one, requeued by a nack, a reject, a recover or a channel close, or acked, never shows
    in it; 10 of 10 runs each); the deletion's outstanding deliveries stay outstanding on their
    channels, and settling them changes no queue."""
    return not queue.exists or key <= queue.born


def requeue(state: State, unacked, away_by: tuple = ()) -> State:
    """Put copies back at their original place among the ready ones, marked redelivered (RQ-1, RQ-2, RQ-6);
    a copy whose queue was deleted is gone with it. ``away_by``: the channel (conn, ch) whose requeue reaches
    the queues behind its limiter's resume, so the copies are away until a queue takes it (spec.interleavings)."""
    events = state.events
    queues = state.queues
    gone = []
    for u in unacked:
        queue = queues[u.queue]
        if orphaned(queue, u.key):
            gone.append((u.queue, u.key, FATE_QUEUE_DELETED, u.msg, u.persistent))
            continue
        if u.redelivered:
            events |= EV_REQUEUE_TWICE
        ready = queue.ready
        entry = Entry(u.key, u.msg, True, u.persistent)
        i = requeue_position(tuple(e.key for e in ready), u.key)
        if away_by:
            queue = queue._replace(away=tuple(sorted(queue.away + ((u.key,) + away_by,))))
        queues = put(queues, u.queue, queue._replace(ready=ready[:i] + (entry,) + ready[i:]))
    state = state._replace(queues=queues, events=events)
    if gone:
        state = forget_waits(add_fates(state, gone), ((g[0], g[1]) for g in gone))
    return state


def settle(state: State, unacked, kind: int, away_by: tuple = ()) -> State:
    """Apply a settlement to outstanding copies: ack removes them (ACK-1), requeue puts them back (ACK-6;
    ``away_by`` as in ``requeue``), drop dead-letters them when their queue has a dead-letter queue, else
    drops them (ACK-6)."""
    if kind == SETTLE_ACK:
        state = add_fates(state, ((u.queue, u.key, FATE_ACKED, u.msg, u.persistent) for u in unacked))
        return forget_waits(state, ((u.queue, u.key) for u in unacked))
    if kind != SETTLE_DROP:
        return requeue(state, unacked, away_by)
    fates = []
    for u in unacked:
        source = state.queues[u.queue]
        target = -1 if orphaned(source, u.key) else source.dead_letter - 1   # a deleted queue dead-letters nothing
        if target >= 0 and state.queues[target].exists:
            state, _ = enqueue(state, target, u.msg, u.persistent)
            fates.append((u.queue, u.key, FATE_DEAD_LETTERED, u.msg, u.persistent))
        else:
            fates.append((u.queue, u.key, FATE_DROPPED, u.msg, u.persistent))
    state = add_fates(state, fates)
    return forget_waits(state, ((u.queue, u.key) for u in unacked))


def close_channel(state: State, c: int, ch: int, status: int) -> State:
    """The broker closes channel (c, ch): its consumers stop; unconfirmed publishes are never
    confirmed (PC-9); held-back publishes are dropped (TX-2); every outstanding delivery, including
    those held back by an open transaction, is requeued (RQ-4). As in RabbitMQ 3.10.8, a channel that
    is only closing (``status`` CH_CLOSING or CH_ENDING, waiting for a close-ok) gives back at once the
    deliveries its consumers took and those of queues it consumes from, and keeps a basic.get
    delivery of any other queue until it is gone (``finish_close``)."""
    channel = state.conns[c].channels[ch - 1]
    state = lose_sent(state, lambda q, to: to[:2] == (c, ch))
    queues = state.queues
    consumed = set()
    for consumer in channel.consumers:
        consumed.add(consumer.queue)
        queues = put(queues, consumer.queue, drop_consumer(queues[consumer.queue], (c, ch, consumer.tag)))
    state = state._replace(queues=queues)
    outstanding = tuple(sorted(channel.unacked + tuple(u for _, u in channel.tx_settles)))
    kept = () if status == CH_CLOSED else tuple(u for u in outstanding if not u.consumer and u.queue not in consumed)
    state = with_channel(state, c, ch, CLOSED_CHANNEL._replace(status=status, unacked=kept,
                                                               next_tag=channel.next_tag if kept else 1))
    outstanding = tuple(u for u in outstanding if u not in kept)
    if outstanding:
        state = state._replace(events=state.events | EV_CHANNEL_REQUEUE)
        state = requeue(state, outstanding)
    return state


def lose_sent(state: State, which) -> State:
    """The automatic-mode deliveries queues were sending (``Queue.sending``) that ``which(queue, sending)``
    picks, lost on their way (AM-2): RabbitMQ's queue discarded the message when it fetched it for a
    consumer that needs no ack, and a channel process that stops first never writes it."""
    lost = []
    queues = state.queues
    for q, queue in enumerate(queues):
        if queue.sending and which(q, queue.sending):
            e = queue.sending[3]
            lost.append((q, e.key, FATE_LOST_AUTOACK, e.msg, e.persistent))
            queues = put(queues, q, queue._replace(sending=()))
    return add_fates(state._replace(queues=queues), lost) if lost else state


def finish_close(state: State, c: int, ch: int) -> State:
    """A closing channel is gone: what it still held is requeued (RQ-4)."""
    return close_channel(state, c, ch, CH_CLOSED)


def close_connection(state: State, c: int) -> State:
    """The broker closes connection c: every channel closes (RQ-4), then its exclusive queues are
    deleted (DU-4). What the broker had already sent stays in flight to the client."""
    conn = state.conns[c]
    for ch, channel in enumerate(conn.channels, start=1):
        if channel.status != CH_CLOSED:
            state = close_channel(state, c, ch, CH_CLOSED)
    for q, queue in enumerate(state.queues):
        if queue.exists and queue.owner == c + 1:
            state = delete_queue(state, q)
    conn = state.conns[c]
    to_broker = network.empty(len(conn.channels))
    return state._replace(conns=put(state.conns, c, conn._replace(broker_closed=True, to_broker=to_broker)))


def drop_consumer(queue: Queue, consumer: tuple) -> Queue:
    """Queue without the consumer ``(conn, ch, tag)`` in its round-robin, nor as its exclusive consumer."""
    return queue._replace(ring=tuple(r for r in queue.ring if r != consumer),
                          exclusive=() if queue.exclusive == consumer else queue.exclusive)


def delete_queue(state: State, q: int) -> State:
    """Queue q is deleted with its ready copies (DU-4, queue.delete); the deletion is durable at once,
    so its records leave the disk with it. Its consumers are not told here. A delivery it was still
    sending (``Queue.sending``) went out first (``broker._queue_delete``) or was lost with its channel."""
    state = lose_sent(state, lambda q2, to: q2 == q) if state.queues[q].sending else state
    queue = state.queues[q]
    gone = tuple((q, e.key, FATE_QUEUE_DELETED, e.msg, e.persistent) for e in queue.ready)
    state = with_queue(state, q, queue._replace(exists=False, durable=False, ready=(), ring=(), owner=0, exclusive=(),
                                                away=()))
    state = state._replace(bindings=tuple(b for b in state.bindings if b != q),
                           disk=tuple(r for r in state.disk if r[0] != q))
    state = add_fates(state, gone)
    return forget_waits(state, ((g[0], g[1]) for g in gone))
