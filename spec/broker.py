"""The broker's side of the rules: what it does with each frame it takes, and its own moves
(deliver, confirm, commit-ok, close-ok). Everything that changes broker-held state lives here or in
``spec.storage`` (copies, requeue, settle). Each broker action has its precondition here, beside its
effect (``can_*``); ``spec.machine.enabled`` is built from them.
"""
from __future__ import annotations

from typing import Any

from .frames import (
    ACCESS_REFUSED, BASIC_ACK, BASIC_CANCEL, BASIC_CANCEL_OK, BASIC_CONSUME, BASIC_CONSUME_OK,
    BASIC_DELIVER, BASIC_GET, BASIC_GET_EMPTY, BASIC_GET_OK, BASIC_NACK, BASIC_PUBLISH, BASIC_QOS,
    BASIC_QOS_OK, BASIC_RECOVER, BASIC_RECOVER_OK, BASIC_REJECT, BASIC_RETURN, CHANNEL_CLOSE,
    CHANNEL_CLOSE_OK, CHANNEL_ERROR, CHANNEL_OPEN, CHANNEL_OPEN_OK, COMMAND_INVALID, CONFIRM_SELECT,
    CONFIRM_SELECT_OK, CONNECTION_CLOSE, CONNECTION_CLOSE_OK, DEFAULT_EXCHANGE, FANOUT_EXCHANGE,
    NO_ROUTE, NOT_ALLOWED, NOT_FOUND, NOT_IMPLEMENTED, PRECONDITION_FAILED, QUEUE_BIND, QUEUE_BIND_OK,
    QUEUE_DECLARE, QUEUE_DECLARE_OK, QUEUE_DELETE, QUEUE_DELETE_OK, QUEUE_PURGE, QUEUE_PURGE_OK,
    R_COMMIT_PENDING, R_CONFIRM_TO_TX, R_EXCLUSIVE_USE, R_EXPECTED_OPEN, R_IMMEDIATE, R_IN_USE,
    R_INEQUIVALENT_DURABLE, R_INEQUIVALENT_TRANSIENT, R_LOCKED, R_NO_EXCHANGE, R_NO_QUEUE, R_NOT_EMPTY, R_NOT_TX,
    R_PREFETCH_SIZE, R_RECOVER_NO_REQUEUE, R_SECOND_OPEN,
    R_TAG_REUSED, R_TX_TO_CONFIRM, R_UNIMPLEMENTED, R_UNKNOWN_TAG, RESOURCE_LOCKED,
    TX_COMMIT, TX_COMMIT_OK, TX_ROLLBACK, TX_ROLLBACK_OK, TX_SELECT, TX_SELECT_OK, make_frame,
)
from .state import (
    CH_CLOSED, CH_CLOSING, CH_ENDING, CH_OPEN, CONN_GONE, EV_COMMIT_PUBLISHED, EV_COMMIT_WITH_ACKS,
    EV_CONFIRM_MULTIPLE, EV_MULTIPLE_ACK, EV_ROLLBACK_KEPT, EV_TX_RETURN, FATE_LOST_AUTOACK, FATE_PURGED,
    MODE_CONFIRM, MODE_TX, NEW_CHANNEL, SETTLE_ACK, SETTLE_DROP, SETTLE_REQUEUE, Consumer, Pending, State,
    Unacked, add_sorted, conn_channels, conn_to_broker, conn_to_client, put, with_conn,
)
from . import interleavings, network
from .storage import (
    add_fates, close_channel, close_connection, delete_queue, drop_consumer, enqueue, finish_close, forget_waits,
    next_ready, present, settle, with_channel, with_queue,
)


def send(state: State, c: int, frame: Any) -> State:
    """Append a frame to what the broker has in flight to connection c's client, on its channel; a
    frame to a client that vanished (``faults.vanish``) is lost as it is written."""
    conn = state.conns[c]
    if conn.status == CONN_GONE:
        return state
    return with_conn(state, c, conn_to_client(conn, network.push(conn.to_client, frame.channel, frame)))


def channel_error(state: State, c: int, ch: int, code: int, reason: int, detail: int) -> State:
    """A channel error (ER-1): RQ-4 applies, the channel waits for close-ok, channel.close goes out.
    Only this channel is touched: bad input never disturbs another channel's messages (ER-3)."""
    state = close_channel(state, c, ch, CH_CLOSING)
    return send(state, c, make_frame(CHANNEL_CLOSE, ch, code, reason, detail))


def connection_error(state: State, c: int, code: int, reason: int, detail: int) -> State:
    """A connection error (ER-1): every channel closes (RQ-4), connection.close goes out."""
    state = close_connection(state, c)
    return send(state, c, make_frame(CONNECTION_CLOSE, 0, code, reason, detail))


def route(state: State, exchange: int, routing_key: int) -> tuple:
    """The queues a publish reaches (RT-1): the named queue for the default exchange, the bound ones for fanout."""
    queues = state.queues
    if exchange == DEFAULT_EXCHANGE:
        return (routing_key,) if routing_key < len(queues) and queues[routing_key].exists else ()
    if exchange == FANOUT_EXCHANGE:
        return tuple(q for q in state.bindings if queues[q].exists)
    return ()


def publish(state: State, c: int, ch: int, exchange: int, routing_key: int, mandatory: bool,
            persistent: bool, msg: int, seq: int) -> tuple[State, tuple, bool]:
    """Route one message into its queues (RT-1, RT-2). Returns the state, the copies, and whether it was unroutable."""
    copies = []
    for q in route(state, exchange, routing_key):
        state, key = enqueue(state, q, msg, persistent)
        copies.append((q, key))
    return state, tuple(copies), not copies


def take_frame(state: State, c: int, ch: int) -> State:
    """BrokerTakeFrame: the broker acts on the oldest frame in flight on channel ch of connection c
    (each channel in order, channels concurrently: ``spec.network``)."""
    conn = state.conns[c]
    frame = conn.to_broker[ch][0]
    state = with_conn(state, c, conn_to_broker(conn, network.pop(conn.to_broker, ch)))
    method = frame.method
    if method == CONNECTION_CLOSE:
        state = close_connection(state, c)
        return send(state, c, make_frame(CONNECTION_CLOSE_OK, 0))
    channel = state.conns[c].channels[ch - 1]
    status = channel.status
    if status == CH_OPEN:
        if method == CHANNEL_OPEN:
            return connection_error(state, c, CHANNEL_ERROR, R_SECOND_OPEN, 0)
        if channel.commit_pending and method != CHANNEL_CLOSE:
            # TX-7: RabbitMQ 3.10.8's channel refuses every method but channel.close while its
            # tx.commit waits for the queues (and the disk): 504, a connection error. Waiting for the
            # commit-ok before taking the frame (``can_take_frame``) is the other outcome allowed.
            return connection_error(state, c, CHANNEL_ERROR, R_COMMIT_PENDING, 0)
        if method == CHANNEL_CLOSE_OK:
            return connection_error(state, c, COMMAND_INVALID, R_UNIMPLEMENTED, 0)
        return HANDLERS[method](state, c, ch, channel, frame)
    if status == CH_CLOSED:
        if method == CHANNEL_OPEN:
            state = with_channel(state, c, ch, NEW_CHANNEL)
            return send(state, c, make_frame(CHANNEL_OPEN_OK, ch))
        return connection_error(state, c, CHANNEL_ERROR, R_EXPECTED_OPEN, 0)      # never opened, or closed
    # Closing (ER-1): the channel ignores every frame until it is gone, and it is not gone yet.
    if method == CHANNEL_OPEN:
        return connection_error(state, c, CHANNEL_ERROR, R_SECOND_OPEN, 0)
    if method == CHANNEL_CLOSE_OK:
        # ER-1. Closed by the broker (CH_CLOSING): the close-ok it waited for. Closed by the client
        # (CH_ENDING): RabbitMQ 3.10.8's reader forgets a channel on the client's close-ok whoever
        # closed it, and the channel process, already closing, stops on it without writing its own
        # close-ok; so a channel.close and close-ok sent together end the channel with no close-ok
        # (the next frame on it must be channel.open). Had the broker's close-ok gone out first
        # (``close_ok``), the client's close-ok finds the channel closed: 504 (CH_CLOSED above).
        return finish_close(state, c, ch)
    if method == CHANNEL_CLOSE:     # both ends closed at once, or the client closed it twice:
        return send(state, c, make_frame(CHANNEL_CLOSE_OK, ch))       # RabbitMQ 3.10.8 answers each close (ER-1)
    return state


def _channel_close(state, c, ch, channel, frame):
    """channel.close from the client: RQ-4 at once; close-ok follows (``close_ok``), and frames the
    client sent in between are dropped."""
    return close_channel(state, c, ch, CH_ENDING)


def close_ok(state: State, c: int, ch: int) -> State:
    """BrokerCloseOk: the channel the client closed is gone; channel.close-ok goes out."""
    return send(finish_close(state, c, ch), c, make_frame(CHANNEL_CLOSE_OK, ch))


def _publish(state, c, ch, channel, frame):
    """basic.publish: PC-9 on a missing exchange; held back in tx mode (TX-2); numbered in confirm mode (PC-1)."""
    exchange, routing_key, mandatory, persistent, msg = \
        frame.exchange, frame.routing_key, frame.mandatory, frame.persistent, frame.msg
    if frame.immediate:
        return connection_error(state, c, NOT_IMPLEMENTED, R_IMMEDIATE, 0)
    if exchange not in (DEFAULT_EXCHANGE, FANOUT_EXCHANGE):
        return channel_error(state, c, ch, NOT_FOUND, R_NO_EXCHANGE, exchange)     # PC-9, TX-5
    if channel.mode == MODE_TX:
        return with_channel(state, c, ch, channel._replace(
            tx_pubs=channel.tx_pubs + ((exchange, routing_key, mandatory, persistent, msg),)))
    state, copies, unroutable = publish(state, c, ch, exchange, routing_key, mandatory, persistent, msg, 0)
    channel = state.conns[c].channels[ch - 1]
    if channel.mode == MODE_CONFIRM:
        seq = channel.publish_seq + 1
        waits = tuple(pair for pair in copies if persistent and state.queues[pair[0]].durable)  # PC-5
        state = with_channel(state, c, ch, channel._replace(publish_seq=seq, unconfirmed=channel.unconfirmed + (
            Pending(seq, msg, False, waits),)))
    if unroutable and mandatory:
        # RT-3, PC-4: RabbitMQ 3.10.8's channel process writes the basic.return while it handles the
        # publish, so it reaches the client before the reply to any later method of the channel (and
        # before its close-ok) and before the publish's confirm, which can only come later. A return
        # cannot wait, nor be lost with the channel: a broker that never returns is caught in every mode.
        state = send(state, c, make_frame(BASIC_RETURN, ch, NO_ROUTE, msg))
    return state


def settled_tags(outstanding: tuple[int, ...], tag: int, multiple: bool) -> tuple[int, ...] | None:
    """The outstanding tags a basic.ack / nack / reject settles (ACK-1, ACK-2, ACK-3), or None when
    ``tag`` is not outstanding (ACK-4). A channel's tags are distinct and in delivery order.

    pre: all(a < b for a, b in zip(outstanding, outstanding[1:]))
    post: (__return__ is None) == (tag not in outstanding and not (multiple and tag == 0))
    post: __return__ is None or all(t in outstanding for t in __return__)
    post: __return__ is None or multiple or __return__ == (tag,)
    post: __return__ is None or not multiple or tag == 0 or __return__ == tuple(t for t in outstanding if t <= tag)
    post: __return__ is None or not (multiple and tag == 0) or __return__ == outstanding
    """
    if multiple and tag == 0:
        return outstanding                                                          # ACK-3
    if tag not in outstanding:
        return None                                                                 # ACK-4
    if multiple:
        return tuple(t for t in outstanding if t <= tag)                            # ACK-2
    return (tag,)                                                                   # ACK-1


def _collect(channel, tag: int, multiple: bool):
    """The outstanding deliveries a settlement names and those it leaves (``settled_tags``), or None."""
    unacked = channel.unacked
    tags = settled_tags(tuple(u.tag for u in unacked), tag, multiple)
    if tags is None:
        return None
    return tuple(u for u in unacked if u.tag in tags), tuple(u for u in unacked if u.tag not in tags)


def _settle_frame(state, c, ch, channel, tag, multiple, kind):
    """Apply (or, in tx mode, hold back: TX-3) a basic.ack / nack / reject."""
    collected = _collect(channel, tag, multiple)
    if collected is None:
        return channel_error(state, c, ch, PRECONDITION_FAILED, R_UNKNOWN_TAG, tag)  # ACK-4, ACK-7, TX-5
    settled, rest = collected
    if len(settled) >= 2:
        state = state._replace(events=state.events | EV_MULTIPLE_ACK)
    if channel.mode == MODE_TX:
        return with_channel(state, c, ch, channel._replace(
            unacked=rest, tx_settles=channel.tx_settles + tuple((kind, u) for u in settled)))
    after = released(channel._replace(unacked=rest), settled)
    state = with_channel(state, c, ch, after)
    away_by = (c, ch) if kind == SETTLE_REQUEUE and interleavings.resumes_first(channel, after) else ()
    return settle(state, settled, kind, away_by)


def released(channel, settled):
    """The channel after settling ``settled`` at once (one basic.ack / nack / reject, one basic.recover,
    or one run of a commit, ``commit_runs``): the global limit counts its consumer deliveries off
    (PF-3, ``count_off``). As in RabbitMQ's limiter, basic.get deliveries are never counted off."""
    if not channel.global_limit:
        return channel
    n = sum(1 for u in settled if u.consumer)
    return channel._replace(volume=count_off(channel.volume, n)) if n else channel


def count_off(volume: int, n: int) -> int:
    """RabbitMQ 3.10.8's limiter taking one ack of ``n`` consumer deliveries (rabbit_limiter, the ack
    cast): a volume of 0 stays 0, any other drops by n, below 0 if n is larger. It goes below 0
    only on a transactional channel, whose held-back settlements the volume never counted when the
    limit was set from none (``_qos``); the deliveries that follow then take the limit past its count
    (measured: docs/reference/differences.md, "Held-back settlements and prefetch").

    pre: n >= 1
    post: volume != 0 or __return__ == 0
    post: volume == 0 or __return__ == volume - n
    """
    return 0 if volume == 0 else volume - n


def commit_runs(settles: tuple) -> tuple:
    """The held-back settlements of a commit as RabbitMQ 3.10.8's channel counts them off (TX-3): one
    limiter ack per run of consecutive settlements of one kind (ack, requeue, drop), oldest first,
    because rabbit_channel merges a settlement into the previous one of its kind (ack_cons).

    pre: all(isinstance(s, tuple) and len(s) == 2 for s in settles)
    post: sum(len(r) for r in __return__) == len(settles)
    post: all(len({k for k, _ in r}) == 1 for r in __return__)
    post: all(a[-1][0] != b[0][0] for a, b in zip(__return__, __return__[1:]))
    """
    runs: list = []
    for kind, u in settles:
        if runs and runs[-1][-1][0] == kind:
            runs[-1].append((kind, u))
        else:
            runs.append([(kind, u)])
    return tuple(tuple(r) for r in runs)


def _ack(state, c, ch, channel, frame):
    return _settle_frame(state, c, ch, channel, frame.delivery_tag, frame.multiple, SETTLE_ACK)


def _nack(state, c, ch, channel, frame):
    return _settle_frame(state, c, ch, channel, frame.delivery_tag, frame.multiple,
                         SETTLE_REQUEUE if frame.requeue else SETTLE_DROP)               # ACK-5, ACK-6


def _reject(state, c, ch, channel, frame):
    return _settle_frame(state, c, ch, channel, frame.delivery_tag, False,
                         SETTLE_REQUEUE if frame.requeue else SETTLE_DROP)               # ACK-5, ACK-6


def _qos(state, c, ch, channel, frame):
    """basic.qos (PF-2), as RabbitMQ 3.10.8 does it: global=false sets the limit of consumers started
    later AND removes the channel's global limit; global=true with n > 0 limits the channel, its count
    starting, when the channel had no global limit, at every outstanding delivery, basic.get ones
    included, but not those a transaction holds back (TX-3: rabbit_channel counts its unacked queue,
    which a held-back settlement has left); global=true with 0 removes the global limit.
    prefetch_size is not implemented (540).

    Two ghosts bound what the channel may hold (``properties.prefetch_respected``): ``qos_excess``,
    the consumer deliveries outstanding or held back now if more than the new limit (PF-5), and
    ``qos_uncounted``, the held-back ones the count left out, which the commit counts off all the
    same, so that the limit can be exceeded by that many for the rest of its life."""
    count, global_, size = frame.prefetch_count, frame.global_, frame.prefetch_size
    if size:
        return connection_error(state, c, NOT_IMPLEMENTED, R_PREFETCH_SIZE, size)
    if global_ and count:
        held = sum(1 for _, u in channel.tx_settles if u.consumer)
        outstanding = sum(1 for u in channel.unacked if u.consumer) + held
        if channel.global_limit:
            volume, uncounted = channel.volume, channel.qos_uncounted
        else:
            volume, uncounted = len(channel.unacked), held
        channel = channel._replace(global_limit=count, volume=volume, qos_uncounted=uncounted,
                                   qos_excess=outstanding if count < outstanding else 0)
    else:
        channel = channel._replace(global_limit=0, volume=0, qos_excess=0, qos_uncounted=0)
        if not global_:
            channel = channel._replace(prefetch=count)
    return send(with_channel(state, c, ch, channel), c, make_frame(BASIC_QOS_OK, ch))


def _queue_usable(state, c, ch, q):
    """None if queue q exists and this connection may use it, else the channel error for it (DU-4)."""
    if q >= len(state.queues) or not state.queues[q].exists:
        return channel_error(state, c, ch, NOT_FOUND, R_NO_QUEUE, q)
    owner = state.queues[q].owner
    if owner and owner != c + 1:
        return channel_error(state, c, ch, RESOURCE_LOCKED, R_LOCKED, q)
    return None


def _consume(state, c, ch, channel, frame):
    """basic.consume: the consumer joins the queue's round-robin (DS-1) with the channel's per-consumer limit (PF-2)."""
    q, tag, no_ack, exclusive = frame.queue, frame.consumer_tag, frame.no_ack, frame.exclusive
    if any(k.tag == tag for k in channel.consumers):
        return connection_error(state, c, NOT_ALLOWED, R_TAG_REUSED, tag)
    refused = _queue_usable(state, c, ch, q)
    if refused is not None:
        return refused
    queue = state.queues[q]
    if queue.exclusive or (exclusive and queue.ring):
        return channel_error(state, c, ch, ACCESS_REFUSED, R_EXCLUSIVE_USE, q)
    channel = channel._replace(consumers=add_sorted(channel.consumers, Consumer(tag, q, no_ack, channel.prefetch)))
    state = with_channel(state, c, ch, channel)
    state = with_queue(state, q, queue._replace(ring=queue.ring + ((c, ch, tag),),
                                                exclusive=(c, ch, tag) if exclusive else ()))
    return send(state, c, make_frame(BASIC_CONSUME_OK, ch, tag))


def _cancel(state, c, ch, channel, frame):
    """basic.cancel: the consumer stops; its outstanding deliveries stay outstanding."""
    tag = frame.consumer_tag
    for consumer in channel.consumers:
        if consumer.tag == tag:
            state = with_queue(state, consumer.queue, drop_consumer(state.queues[consumer.queue], (c, ch, tag)))
            state = with_channel(state, c, ch, without_consumer(channel, tag))
    return send(state, c, make_frame(BASIC_CANCEL_OK, ch, tag))


def without_consumer(channel, tag: int):
    """The channel once consumer ``tag`` is gone. Its outstanding deliveries stay outstanding, marked
    as a former consumer's (-tag): the global limit still counts them off when settled, and a later
    consumer with the same tag starts with none of its own (PF-2)."""
    unacked = tuple(u._replace(consumer=-tag) if u.consumer == tag else u for u in channel.unacked)
    settles = tuple((k, u._replace(consumer=-tag)) if u.consumer == tag else (k, u) for k, u in channel.tx_settles)
    return channel._replace(consumers=tuple(k for k in channel.consumers if k.tag != tag),
                            unacked=unacked, tx_settles=settles)


def _get(state, c, ch, channel, frame):
    """basic.get: the head of the queue (DS-1), or get-empty (DS-2); no prefetch limit (PF-4)."""
    q, no_ack = frame.queue, frame.no_ack
    refused = _queue_usable(state, c, ch, q)
    if refused is not None:
        return refused
    queue = state.queues[q]
    i = next_ready(queue)               # copies away behind a resume are not there yet (spec.interleavings)
    if i < 0:
        return send(state, c, make_frame(BASIC_GET_EMPTY, ch))
    entry = queue.ready[i]
    state = with_queue(state, q, queue._replace(ready=queue.ready[:i] + queue.ready[i + 1:]))
    state = hand_over(state, c, ch, q, entry, no_ack, 0)
    tag = state.conns[c].channels[ch - 1].next_tag - 1
    left = len(queue.ready) - len(queue.away) - 1
    return send(state, c, make_frame(BASIC_GET_OK, ch, tag, entry.redelivered, entry.msg, left))


def hand_over(state: State, c: int, ch: int, q: int, entry, no_ack: bool, consumer: int) -> State:
    """A copy leaves the queue for a client: outstanding on the channel (AM-3) or gone once sent (AM-2).

    It takes the channel's next delivery tag (DT-1, DT-2). An automatic-mode delivery to a client
    that vanished is lost as it is sent (AM-2, ``faults.vanish``)."""
    conn = state.conns[c]
    channel = conn.channels[ch - 1]
    tag = channel.next_tag
    if no_ack:
        channel = channel._replace(next_tag=tag + 1)
        if conn.status == CONN_GONE:
            conn = conn._replace(channels=put(conn.channels, ch - 1, channel))
            state = add_fates(state._replace(conns=put(state.conns, c, conn)),
                              ((q, entry.key, FATE_LOST_AUTOACK, entry.msg, entry.persistent),))
        else:
            conn = conn._replace(auto=conn.auto + ((ch, tag, q, entry.key, entry.msg, entry.persistent),),
                                 channels=put(conn.channels, ch - 1, channel))
            state = state._replace(conns=put(state.conns, c, conn))
        state = forget_waits(state, ((q, entry.key),))
    else:
        channel = channel._replace(next_tag=tag + 1, unacked=channel.unacked + (
            Unacked(tag, q, entry.key, entry.msg, entry.redelivered, entry.persistent, consumer),))
        if consumer and channel.global_limit:
            channel = channel._replace(volume=channel.volume + 1)     # the global limit counts it (PF-3)
        state = with_conn(state, c, conn_channels(conn, put(conn.channels, ch - 1, channel)))
    return state._replace(delivered=add_sorted(state.delivered, (q, entry.key)))


def _recover(state, c, ch, channel, frame):
    """basic.recover: requeue=true requeues every outstanding delivery (RQ-5); requeue=false is 540."""
    if not frame.requeue:
        return connection_error(state, c, NOT_IMPLEMENTED, R_RECOVER_NO_REQUEUE, 0)
    after = released(channel._replace(unacked=()), channel.unacked)
    state = with_channel(state, c, ch, after)
    away_by = (c, ch) if interleavings.resumes_first(channel, after) else ()
    state = settle(state, channel.unacked, SETTLE_REQUEUE, away_by)
    return send(state, c, make_frame(BASIC_RECOVER_OK, ch))


def _confirm_select(state, c, ch, channel, frame):
    """confirm.select (PC-1); refused on a tx channel (PC-8)."""
    if channel.mode == MODE_TX:
        return channel_error(state, c, ch, PRECONDITION_FAILED, R_TX_TO_CONFIRM, 0)
    state = with_channel(state, c, ch, channel._replace(mode=MODE_CONFIRM))
    return send(state, c, make_frame(CONFIRM_SELECT_OK, ch))


def _tx_select(state, c, ch, channel, frame):
    """tx.select (TX-1); refused on a confirm channel (PC-8)."""
    if channel.mode == MODE_CONFIRM:
        return channel_error(state, c, ch, PRECONDITION_FAILED, R_CONFIRM_TO_TX, 0)
    state = with_channel(state, c, ch, channel._replace(mode=MODE_TX))
    return send(state, c, make_frame(TX_SELECT_OK, ch))


def _tx_commit(state, c, ch, channel, frame):
    """tx.commit: settlements then publishes take effect (TX-2, TX-3); returns go out now (TX-6);
    commit-ok waits until the commit's persistent copies are on disk (TX-7), which is not atomic (TX-9).
    A commit that enqueued copies owes its commit-ok as a step of its own (``commit_ok``) even when
    nothing waits for the disk: RabbitMQ 3.10.8's channel waits for every queue's confirm, and a queue
    delivers to a consumer on the committing channel before it confirms."""
    if channel.mode != MODE_TX:
        return channel_error(state, c, ch, PRECONDITION_FAILED, R_NOT_TX, 0)       # TX-10
    if channel.tx_settles:
        state = state._replace(events=state.events | EV_COMMIT_WITH_ACKS)
    for kind, unacked in channel.tx_settles:
        state = settle(state, (unacked,), kind)
    for run in commit_runs(channel.tx_settles):
        state = with_channel(state, c, ch, released(state.conns[c].channels[ch - 1], tuple(u for _, u in run)))
    waits = []
    group = []
    for exchange, routing_key, mandatory, persistent, msg in channel.tx_pubs:
        state, copies, unroutable = publish(state, c, ch, exchange, routing_key, mandatory, persistent, msg, 0)
        if unroutable and mandatory:
            state = send(state, c, make_frame(BASIC_RETURN, ch, NO_ROUTE, msg))
            state = state._replace(events=state.events | EV_TX_RETURN)
        group.extend(copies)
        waits.extend(pair for pair in copies if persistent and state.queues[pair[0]].durable)
    if group:
        state = state._replace(events=state.events | EV_COMMIT_PUBLISHED)
    if len(group) >= 2:
        state = state._replace(tx_groups=add_sorted(state.tx_groups, tuple(sorted(group))))
    channel = state.conns[c].channels[ch - 1]._replace(tx_pubs=(), tx_settles=())
    if group:
        return with_channel(state, c, ch, channel._replace(committing=tuple(sorted(waits)), commit_pending=True))
    return send(with_channel(state, c, ch, channel), c, make_frame(TX_COMMIT_OK, ch))


def rollback_outstanding(outstanding: tuple[int, ...], held: tuple[int, ...]) -> tuple[int, ...]:
    """The tags outstanding after tx.rollback: the held-back settlements are dropped, so the deliveries
    they named are outstanding again, beside those never settled, in tag order (TX-3, TX-4).

    pre: len(set(outstanding + held)) == len(outstanding) + len(held)
    post: set(__return__) == set(outstanding) | set(held)
    post: len(__return__) == len(outstanding) + len(held)
    post: all(a < b for a, b in zip(__return__, __return__[1:]))
    """
    return tuple(sorted(outstanding + held))


def _tx_rollback(state, c, ch, channel, frame):
    """tx.rollback: held-back publishes are dropped, held-back settlements undone (TX-2, TX-3, TX-4)."""
    if channel.mode != MODE_TX:
        return channel_error(state, c, ch, PRECONDITION_FAILED, R_NOT_TX, 0)       # TX-10
    if channel.tx_settles:
        state = state._replace(events=state.events | EV_ROLLBACK_KEPT)
    by_tag = {u.tag: u for u in channel.unacked + tuple(u for _, u in channel.tx_settles)}
    tags = rollback_outstanding(tuple(u.tag for u in channel.unacked), tuple(u.tag for _, u in channel.tx_settles))
    unacked = tuple(by_tag[t] for t in tags)
    state = with_channel(state, c, ch, channel._replace(unacked=unacked, tx_pubs=(), tx_settles=()))
    return send(state, c, make_frame(TX_ROLLBACK_OK, ch))


def _queue_declare(state, c, ch, channel, frame):
    """queue.declare: creates the queue if missing (never transactional: TX-11); an exclusive queue
    belongs to this connection and its durable flag is ignored (DU-4). A queue that exists is declared
    again only with its own flags, as RabbitMQ 3.10.8 checks them (each of the 12 pairs of flags
    recorded): another connection's exclusive queue, or an exclusive flag other than the queue's, is
    405 RESOURCE_LOCKED, checked first; then, for a queue that is not exclusive, another durable flag
    is 406 `inequivalent arg 'durable'` (an exclusive queue's durable flag is never compared)."""
    q, durable, exclusive = frame.queue, frame.durable, frame.exclusive
    queue = state.queues[q]
    if queue.exists:
        if queue.owner and queue.owner != c + 1 or bool(queue.owner) != bool(exclusive):
            return channel_error(state, c, ch, RESOURCE_LOCKED, R_LOCKED, q)
        if not queue.owner and bool(queue.durable) != bool(durable):
            reason = R_INEQUIVALENT_DURABLE if durable else R_INEQUIVALENT_TRANSIENT
            return channel_error(state, c, ch, PRECONDITION_FAILED, reason, q)
    else:
        state = with_queue(state, q, queue._replace(       # a new queue: older keys were another's
            exists=True, durable=bool(durable) and not exclusive, owner=c + 1 if exclusive else 0,
            born=queue.enqueued))
    return send(state, c, make_frame(QUEUE_DECLARE_OK, ch, q))


def _queue_bind(state, c, ch, channel, frame):
    """queue.bind to the fanout exchange (RT-1; never transactional: TX-11)."""
    q = frame.queue
    refused = _queue_usable(state, c, ch, q)
    if refused is not None:
        return refused
    state = state._replace(bindings=add_sorted(state.bindings, q))
    return send(state, c, make_frame(QUEUE_BIND_OK, ch))


def _queue_purge(state, c, ch, channel, frame):
    """queue.purge: the ready copies are gone; outstanding deliveries stay outstanding."""
    q = frame.queue
    refused = _queue_usable(state, c, ch, q)
    if refused is not None:
        return refused
    queue = state.queues[q]
    purged = present(queue)             # copies away behind a resume come back after (spec.interleavings)
    left = tuple(e for e in queue.ready if e not in purged) if queue.away else ()
    state = with_queue(state, q, queue._replace(ready=left))
    state = add_fates(state, ((q, e.key, FATE_PURGED, e.msg, e.persistent) for e in purged))
    state = forget_waits(state, ((q, e.key) for e in purged))
    return send(state, c, make_frame(QUEUE_PURGE_OK, ch, len(purged)))


def _queue_delete(state, c, ch, channel, frame):
    """queue.delete: a missing queue is no error; if_unused refuses a queue with consumers (basic.get
    deliveries do not count), if_empty one with ready copies (outstanding ones do not count). The
    queue goes with its ready copies, durably; its outstanding deliveries stay outstanding and can
    still be settled; each consumer's client gets basic.cancel, after delete-ok on this channel."""
    q, if_unused, if_empty = frame.queue, frame.if_unused, frame.if_empty
    if q >= len(state.queues) or not state.queues[q].exists:
        return send(state, c, make_frame(QUEUE_DELETE_OK, ch, 0))
    queue = state.queues[q]
    if queue.owner and queue.owner != c + 1:
        return channel_error(state, c, ch, RESOURCE_LOCKED, R_LOCKED, q)
    if queue.sending:           # the queue's process sends it before it takes the delete (PF-3, ``deliver``)
        state = number(state, q)
        queue = state.queues[q]
    count = len(queue.ready) - len(queue.away)              # copies away behind a resume are lost with it
    if if_empty and count:                                  # RabbitMQ checks if_empty first
        return channel_error(state, c, ch, PRECONDITION_FAILED, R_NOT_EMPTY, q)
    if if_unused and queue.ring:
        return channel_error(state, c, ch, PRECONDITION_FAILED, R_IN_USE, q)
    state = send(delete_queue(state, q), c, make_frame(QUEUE_DELETE_OK, ch, count))
    for c2, ch2, tag in queue.ring:
        state = with_channel(state, c2, ch2, without_consumer(state.conns[c2].channels[ch2 - 1], tag))
        state = send(state, c2, make_frame(BASIC_CANCEL, ch2, tag))
    return state


HANDLERS = {
    CHANNEL_CLOSE: _channel_close,
    BASIC_PUBLISH: _publish, BASIC_ACK: _ack, BASIC_NACK: _nack, BASIC_REJECT: _reject,
    BASIC_QOS: _qos, BASIC_CONSUME: _consume, BASIC_CANCEL: _cancel, BASIC_GET: _get,
    BASIC_RECOVER: _recover, CONFIRM_SELECT: _confirm_select, TX_SELECT: _tx_select,
    TX_COMMIT: _tx_commit, TX_ROLLBACK: _tx_rollback, QUEUE_DECLARE: _queue_declare,
    QUEUE_BIND: _queue_bind, QUEUE_PURGE: _queue_purge, QUEUE_DELETE: _queue_delete,
}


def has_room(state: State, c: int, ch: int, consumer) -> bool:
    """Whether a consumer may take one more delivery (PF-1, PF-2, PF-3). The channel's global limit
    stops every consumer once its count is reached, automatic-mode ones too, though their deliveries
    are never counted (RabbitMQ's limiter); a per-consumer limit counts the consumer's own outstanding
    manual-mode deliveries (AM-2: none in automatic mode). Deliveries a transaction holds back stay
    counted by both until the commit (TX-3): RabbitMQ 3.10.8 tells neither the limiter nor the queue
    before (measured: docs/reference/differences.md, "Held-back settlements and prefetch")."""
    channel = state.conns[c].channels[ch - 1]
    if channel.global_limit and channel.volume >= channel.global_limit:
        return False
    if consumer.no_ack or not consumer.limit:
        return True
    tag = consumer.tag
    mine = sum(1 for u in channel.unacked if u.consumer == tag)
    mine += sum(1 for _, u in channel.tx_settles if u.consumer == tag)
    return prefetch_room(consumer.limit, mine) > 0


def prefetch_room(limit: int, outstanding: int) -> int:
    """How many more deliveries a prefetch limit leaves room for, given ``outstanding`` counted ones
    (PF-1): -1 when unbounded (limit 0); never negative otherwise, even when lowering the limit left
    more outstanding than it allows (PF-5: nothing is taken back).

    pre: limit >= 0 and outstanding >= 0
    post: (__return__ == -1) == (limit == 0)
    post: limit == 0 or 0 <= __return__ <= limit
    post: limit == 0 or (__return__ > 0) == (outstanding < limit)
    post: limit == 0 or outstanding >= limit or __return__ + outstanding == limit
    """
    if not limit:
        return -1
    return max(0, limit - outstanding)


def next_consumer(state: State, q: int):
    """The consumer the queue's head goes to: the first in round-robin order with room (DS-1), or None."""
    for c, ch, tag in state.queues[q].ring:
        conn = state.conns[c]
        if conn.broker_closed:
            continue
        channel = conn.channels[ch - 1]
        if channel.status != CH_OPEN:
            continue
        for consumer in channel.consumers:
            if consumer.tag == tag:
                if has_room(state, c, ch, consumer):
                    return c, ch, consumer
                break
    return None


def deliver(state: State, q: int) -> State:
    """BrokerDeliver: the head of queue q to the next consumer with room, which moves to the back (DS-1);
    the head but for copies away behind a resume (spec.interleavings, ``storage.next_ready``).

    To an automatic-mode consumer on a channel with a global limit it takes two of these steps (PF-3),
    as in RabbitMQ 3.10.8: the queue's process asks the channel's limiter (rabbit_limiter:can_send,
    which counts nothing for a consumer that needs no ack but says no once the limit is reached),
    fetches the head and sends it to the channel process (rabbit_queue_consumers:deliver_to_consumer),
    which numbers it when it handles that message (rabbit_channel:handle_deliver). The first step is
    the limiter's yes: the head leaves the queue and is on its way (``Queue.sending``); the second, the
    queue's next one (``number``), is the channel numbering it. In between, another queue of the
    channel may deliver to a manual-mode consumer and reach the limit, and the channel then numbers
    that delivery first, the one admitted before it after it (seen on a private RabbitMQ 3.10.8: after
    an ack freed the one place of qos(1, global), a manual consumer got the next message and then an
    automatic-mode consumer of another queue got one, in 5 of 50 runs). The queue does nothing else
    until it has sent it (one process): at most one such delivery per queue. A manual-mode delivery
    needs no such split: the limiter counts it when it admits it, so however the channel orders
    deliveries admitted together, each finds the count below the limit."""
    queue = state.queues[q]
    if queue.sending:
        return number(state, q)
    c, ch, consumer = next_consumer(state, q)
    i = next_ready(queue)
    entry = queue.ready[i]
    ring = tuple(r for r in queue.ring if r != (c, ch, consumer.tag)) + ((c, ch, consumer.tag),)
    state = with_queue(state, q, queue._replace(ready=queue.ready[:i] + queue.ready[i + 1:], ring=ring))
    if consumer.no_ack and state.conns[c].channels[ch - 1].global_limit and state.conns[c].status != CONN_GONE:
        state = with_queue(state, q, state.queues[q]._replace(sending=(c, ch, consumer.tag, entry)))
        state = forget_waits(state, ((q, entry.key),))
        return state._replace(delivered=add_sorted(state.delivered, (q, entry.key)))
    tag = state.conns[c].channels[ch - 1].next_tag
    state = hand_over(state, c, ch, q, entry, consumer.no_ack, consumer.tag)
    return send(state, c, make_frame(BASIC_DELIVER, ch, consumer.tag, tag, entry.redelivered, entry.msg))


def number(state: State, q: int) -> State:
    """The channel numbers the automatic-mode delivery queue q was sending it (``deliver``'s second
    step): it takes the channel's next tag and goes out (AM-2, DT-1), whether or not its consumer has
    been cancelled since (rabbit_channel writes what its queues send)."""
    queue = state.queues[q]
    c, ch, ctag, entry = queue.sending
    state = with_queue(state, q, queue._replace(sending=()))
    tag = state.conns[c].channels[ch - 1].next_tag
    state = hand_over(state, c, ch, q, entry, True, ctag)
    return send(state, c, make_frame(BASIC_DELIVER, ch, ctag, tag, entry.redelivered, entry.msg))


def ready_to_confirm(pending: Pending) -> bool:
    """A publish can be confirmed once every queue took it (PC-5); its basic.return, if any, went out
    when the broker took the publish (PC-4, ``_publish``)."""
    return not pending.waits


def confirm_prefix(channel) -> int:
    """The largest seq s such that every unconfirmed publish up to s is ready and of one outcome,
    when that covers two or more publishes (a multiple=true confirm may cover any part of it that
    covers two or more, PC-3: ``can_confirm``); else 0."""
    best = 0
    count = 0
    nack: bool | None = None
    for p in channel.unconfirmed:
        if not ready_to_confirm(p) or (nack is not None and p.nack != nack):
            break
        nack = p.nack
        count += 1
        best = p.seq
    return best if count >= 2 else 0


def oldest_batched(channel) -> bool:
    """The oldest unconfirmed publish may be confirmed alone with multiple=true (PC-3): it is ready, and
    so is a later one that is not the next. RabbitMQ 3.10.8's channel sends the confirms its queues
    returned since it last sent some as one batch: one of them as ``basic.ack(n)``, two or more as one
    ``basic.ack(n, multiple=true)`` for those below the oldest still unconfirmed and one ``basic.ack(m)``
    for each later one; the oldest batched with a later one past an unconfirmed publish goes out alone
    with multiple=true (seen once in 70 runs of a generated program, docs/reference/differences.md)."""
    unconfirmed = channel.unconfirmed
    return bool(unconfirmed) and ready_to_confirm(unconfirmed[0]) and \
        any(ready_to_confirm(p) for p in unconfirmed[2:])


def confirm_covers(unconfirmed: tuple[int, ...], seq: int, multiple: bool) -> tuple[int, ...]:
    """The publish sequence numbers a basic.ack / basic.nack from the broker confirms (PC-3): with
    multiple, exactly the still-unconfirmed ones <= seq; without, seq alone if it is unconfirmed.
    Nothing confirmed already is confirmed again (PC-2).

    pre: all(a < b for a, b in zip(unconfirmed, unconfirmed[1:]))
    post: all(s in unconfirmed for s in __return__)
    post: all(s <= seq for s in __return__)
    post: not multiple or all(s in __return__ for s in unconfirmed if s <= seq)
    post: multiple or __return__ == ((seq,) if seq in unconfirmed else ())
    """
    if multiple:
        return tuple(s for s in unconfirmed if s <= seq)
    return (seq,) if seq in unconfirmed else ()


def confirm(state: State, c: int, ch: int, seq: int, multiple: bool) -> State:
    """BrokerConfirm: basic.ack (or basic.nack, PC-6) for one publish or, with multiple, every one up to seq (PC-3)."""
    channel = state.conns[c].channels[ch - 1]
    seqs = confirm_covers(tuple(p.seq for p in channel.unconfirmed), seq, multiple)
    covered = tuple(p for p in channel.unconfirmed if p.seq in seqs)
    nack = covered[0].nack
    channel = channel._replace(
        unconfirmed=tuple(p for p in channel.unconfirmed if p not in covered),
        confirmed=tuple(sorted(channel.confirmed + tuple(p.seq for p in covered))))
    state = with_channel(state, c, ch, channel)
    if multiple:
        state = state._replace(events=state.events | EV_CONFIRM_MULTIPLE)
    if not nack:
        state = state._replace(confirmed_msgs=tuple(sorted(set(state.confirmed_msgs).union(p.msg for p in covered))))
    frame = make_frame(BASIC_NACK, ch, seq, multiple, False) if nack else make_frame(BASIC_ACK, ch, seq, multiple)
    return send(state, c, frame)


def commit_ok(state: State, c: int, ch: int) -> State:
    """BrokerCommitOk: the commit's copies are on disk; tx.commit-ok goes out (TX-7)."""
    channel = state.conns[c].channels[ch - 1]
    state = with_channel(state, c, ch, channel._replace(commit_pending=False))
    return send(state, c, make_frame(TX_COMMIT_OK, ch))



# ---------------------------------------------------------------- preconditions
# Each broker action's precondition, beside its effect: the action may fire in ``state`` exactly when
# it holds (``spec.machine.enabled`` asks these; the configuration only chooses which actions to try).


def _open_broker_end(state: State, c: int) -> bool:
    """The broker is up and has not closed its end of connection c."""
    return state.broker_up and 0 <= c < len(state.conns) and not state.conns[c].broker_closed


def _open_channel(state: State, c: int, ch: int):
    """Broker channel (c, ch) if the broker end is up and the channel is open, else None."""
    if not _open_broker_end(state, c) or not 1 <= ch <= len(state.conns[c].channels):
        return None
    channel = state.conns[c].channels[ch - 1]
    return channel if channel.status == CH_OPEN else None


def can_take_frame(state: State, a) -> bool:
    """BrokerTakeFrame: a frame is in flight on that channel and may be taken now (``spec.network``).
    While the channel's commit-ok is owed (TX-7) the frame may wait for it or be taken first: a
    channel.close then closes the channel and the commit-ok never comes, any other frame is a
    connection error (``take_frame``); RabbitMQ 3.10.8 does both. A basic.get, purge or delete of a queue
    in which the channel's own requeue waits behind a resume reaches the queue behind it, so it waits too
    (spec.interleavings)."""
    if not _open_broker_end(state, a.conn):
        return False
    conn = state.conns[a.conn]
    if not (0 <= a.ch < len(conn.to_broker) and network.can_move(conn.to_broker, a.ch)):
        return False
    return not (interleavings.requeue_waits(state) and interleavings.frame_waits(state, a.conn, a.ch))


def can_deliver(state: State, a) -> bool:
    """BrokerDeliver: the queue has a ready copy and some consumer has room for it (DS-1, PF-3), or it
    is sending a delivery its channel has not numbered yet (PF-3: ``deliver``), which that open
    channel numbers next."""
    if not state.broker_up or not 0 <= a.queue < len(state.queues):
        return False
    queue = state.queues[a.queue]
    if queue.sending:
        c, ch = queue.sending[0], queue.sending[1]
        return not state.conns[c].broker_closed and state.conns[c].channels[ch - 1].status == CH_OPEN
    return bool(queue.ready and queue.ring) and next_ready(queue) >= 0 and next_consumer(state, a.queue) is not None


def can_close_ok(state: State, a) -> bool:
    """BrokerCloseOk: the client closed the channel and the broker has not answered yet (ER-1)."""
    if not _open_broker_end(state, a.conn) or not 1 <= a.ch <= len(state.conns[a.conn].channels):
        return False
    return state.conns[a.conn].channels[a.ch - 1].status == CH_ENDING


def can_confirm(state: State, a) -> bool:
    """BrokerConfirm: the publish ``seq`` is ready to confirm (PC-5); with multiple, ``seq`` is an
    unconfirmed publish, not the oldest, within the longest ready run of one outcome (PC-3): the
    broker may confirm part of that run at once. RabbitMQ 3.10.8 does: its channel confirms what its
    queues have confirmed so far, and a queue may not have confirmed the run's later publishes yet
    (docs/rabbitmq-3.10.8-observations.md, "A multiple confirm short of the ready run"). Or ``seq`` is
    the oldest, confirmed alone with multiple=true in a batch with a later one (``oldest_batched``)."""
    channel = _open_channel(state, a.conn, a.ch)
    if channel is None or not channel.unconfirmed:
        return False
    if a.multiple:
        if a.seq == channel.unconfirmed[0].seq:
            return oldest_batched(channel)
        return a.seq != 0 and a.seq <= confirm_prefix(channel) and any(p.seq == a.seq for p in channel.unconfirmed)
    for p in channel.unconfirmed:
        if p.seq == a.seq:
            return ready_to_confirm(p)
    return False


def can_commit_ok(state: State, a) -> bool:
    """BrokerCommitOk: a commit is applied and every persistent copy it enqueued is on disk (TX-7)."""
    channel = _open_channel(state, a.conn, a.ch)
    return channel is not None and channel.commit_pending and not channel.committing
