"""The clients' side: the frames a client writes for each of its actions, and what it does with each
frame it reads. A client here is any AMQP 0-9-1 client library: it tracks the delivery tags it holds,
its publish sequence numbers once in confirm mode (PC-1), and answers a channel.close with close-ok.
"""
from __future__ import annotations

from typing import Any

from .frames import (
    BASIC_ACK, BASIC_CANCEL, BASIC_CONSUME, BASIC_DELIVER, BASIC_GET, BASIC_GET_OK, BASIC_NACK,
    BASIC_PUBLISH, BASIC_QOS, BASIC_RECOVER, BASIC_REJECT, CHANNEL_CLOSE, CHANNEL_CLOSE_OK,
    CHANNEL_OPEN, CHANNEL_OPEN_OK, CONFIRM_SELECT, CONNECTION_CLOSE, CONNECTION_CLOSE_OK,
    MSG_STRIDE, QUEUE_BIND, QUEUE_DECLARE, QUEUE_DELETE, QUEUE_PURGE, R_NORMAL, REPLY_SUCCESS,
    TX_COMMIT, TX_ROLLBACK, TX_SELECT, Wire,
)
from . import actions as A
from . import network
from .faults import reset_connection
from .state import (
    C_CLOSED, C_CLOSING, C_OPEN, C_OPENING, CLOSED_CLIENT, CONN_CLOSING, CONN_DOWN, CONN_UP, FATE_AUTO,
    FATE_LOST_AUTOACK, MODE_CONFIRM, MODE_TX, NEW_CLIENT, Conn, State, conn_clients, put, with_conn,
)
from .storage import add_fates


def write(state: State, c: int, ch: int, frame: tuple, client=None) -> tuple[State, tuple]:
    """The client on connection c writes a frame (and its channel view becomes ``client``)."""
    conn = state.conns[c]
    clients = conn.clients if client is None else put(conn.clients, ch - 1, client)
    conn = Conn(conn.status, conn.broker_closed, conn.published, network.push(conn.to_broker, ch, frame),
                conn.to_client, conn.auto, conn.channels, clients)
    return with_conn(state, c, conn), (Wire(c, True, frame),)


def client_view(state: State, c: int, ch: int):
    """The client's view of channel (c, ch)."""
    return state.conns[c].clients[ch - 1]


def publish(state: State, a) -> tuple[State, tuple]:
    """ClientPublish: the connection's next message; in confirm mode it gets the next sequence number (PC-1)."""
    conn = state.conns[a.conn]
    msg = a.conn * MSG_STRIDE + conn.published + 1
    state = with_conn(state, a.conn, Conn(conn.status, conn.broker_closed, conn.published + 1, conn.to_broker,
                                          conn.to_client, conn.auto, conn.channels, conn.clients))
    view = client_view(state, a.conn, a.ch)
    if view.mode == MODE_CONFIRM:
        view = view._replace(pub_seq=view.pub_seq + 1)
    elif view.mode == MODE_TX:
        view = view._replace(tx_dirty=True)
    frame = (BASIC_PUBLISH, a.ch, a.exchange, a.routing_key, a.mandatory, a.persistent, msg, a.immediate)
    return write(state, a.conn, a.ch, frame, view)


def settle_view(view, tag: int, multiple: bool):
    """The client's view after it settles ``tag``: the tags it no longer holds (moved aside in tx mode, TX-3)."""
    if multiple:
        gone = view.held if tag == 0 else tuple(t for t in view.held if t <= tag)
    else:
        gone = tuple(t for t in view.held if t == tag)
    held = tuple(t for t in view.held if t not in gone)
    if view.mode == MODE_TX:
        return view._replace(held=held, tx_held=tuple(sorted(view.tx_held + gone)), tx_dirty=True)
    return view._replace(held=held)


def settle_frame(state: State, c: int, ch: int, frame: tuple, tag: int, multiple: bool):
    return write(state, c, ch, frame, settle_view(client_view(state, c, ch), tag, multiple))


def receive(state: State, c: int, ch: int, answer: bool = True) -> tuple[State, tuple]:
    """ClientReceive: the client reads the oldest frame in flight to it on channel ch (channels reach
    the client in any interleaving: ``spec.network``) and reacts as a client library does."""
    conn = state.conns[c]
    frame = conn.to_client[ch][0]
    conn = Conn(conn.status, conn.broker_closed, conn.published, conn.to_broker, network.pop(conn.to_client, ch),
                conn.auto, conn.channels, conn.clients)
    state = with_conn(state, c, conn)
    label: tuple[Wire, ...] = (Wire(c, False, frame),)
    method = frame[0]
    if method in (BASIC_DELIVER, BASIC_GET_OK):
        tag, msg = (frame[3], frame[5]) if method == BASIC_DELIVER else (frame[2], frame[4])
        auto = next((a for a in conn.auto if a[0] == ch and a[1] == tag), None)
        view = conn.clients[ch - 1]
        disorder = view.disorder or msg < view.last_msg
        view = view._replace(last_tag=tag, last_msg=msg, disorder=disorder)
        if auto is not None:
            conn = conn._replace(auto=tuple(a for a in conn.auto if a is not auto))
            state = state._replace(conns=put(state.conns, c, conn))
            state = add_fates(state, ((auto[2], auto[3], FATE_AUTO, auto[4], auto[5]),))
        elif view.status == C_OPEN:
            view = view._replace(held=view.held + (tag,))
        conn = state.conns[c]
        return with_conn(state, c, conn_clients(conn, put(conn.clients, ch - 1, view))), label
    if method in (BASIC_ACK, BASIC_NACK):
        view = conn.clients[ch - 1]
        tag, multiple = frame[2], frame[3]
        seqs = range(1, min(tag, view.pub_seq) + 1) if multiple else (tag,)
        view = view._replace(confirms=tuple(sorted(set(view.confirms).union(seqs))))
        return with_conn(state, c, conn_clients(conn, put(conn.clients, ch - 1, view))), label
    if method == CHANNEL_CLOSE:
        conn = conn._replace(clients=put(conn.clients, ch - 1, CLOSED_CLIENT))
        state = state._replace(conns=put(state.conns, c, conn))
        if not answer:
            return state, label
        state, sent = write(state, c, ch, (CHANNEL_CLOSE_OK, ch))
        return state, label + sent
    if method == CHANNEL_CLOSE_OK:
        if conn.clients[ch - 1].status != C_CLOSING:
            return state, label             # both ends closed at once: the channel is already closed
        return with_conn(state, c, conn_clients(conn, put(conn.clients, ch - 1, CLOSED_CLIENT))), label
    if method == BASIC_CANCEL:              # the broker cancelled a consumer: its queue was deleted
        view = conn.clients[ch - 1]
        view = view._replace(consumers=tuple(t for t in view.consumers if t != frame[2]))
        return with_conn(state, c, conn_clients(conn, put(conn.clients, ch - 1, view))), label
    if method == CHANNEL_OPEN_OK:
        return with_conn(state, c, conn_clients(conn, put(conn.clients, ch - 1, NEW_CLIENT))), label
    if method in (CONNECTION_CLOSE, CONNECTION_CLOSE_OK):
        lost = tuple((q, k, FATE_LOST_AUTOACK, m, p) for _, _, q, k, m, p in conn.auto)
        state = reset_connection(add_fates(state, lost), c, CONN_DOWN)
        if method == CONNECTION_CLOSE:
            label += (Wire(c, True, (CONNECTION_CLOSE_OK, 0)),)
        return state, label
    return state, label


def client_step(state: State, a) -> tuple[State, tuple]:
    """The effect of every client action other than publish and receive."""
    c, ch = a.conn, a.ch
    kind = type(a)
    if kind is A.ClientAck:
        return settle_frame(state, c, ch, (BASIC_ACK, ch, a.tag, a.multiple), a.tag, a.multiple)
    if kind is A.ClientNack:
        return settle_frame(state, c, ch, (BASIC_NACK, ch, a.tag, a.multiple, a.requeue), a.tag, a.multiple)
    if kind is A.ClientReject:
        return settle_frame(state, c, ch, (BASIC_REJECT, ch, a.tag, a.requeue), a.tag, False)
    view: Any = client_view(state, c, ch) if ch else None     # None: an action on the connection itself
    if kind is A.ClientConsume:
        view = view._replace(consumers=tuple(sorted(view.consumers + (a.consumer_tag,))))
        return write(state, c, ch, (BASIC_CONSUME, ch, a.queue, a.consumer_tag, a.no_ack, a.exclusive), view)
    if kind is A.ClientCancel:
        view = view._replace(consumers=tuple(t for t in view.consumers if t != a.consumer_tag))
        return write(state, c, ch, (BASIC_CANCEL, ch, a.consumer_tag), view)
    if kind is A.ClientGet:
        return write(state, c, ch, (BASIC_GET, ch, a.queue, a.no_ack))
    if kind is A.ClientQos:
        return write(state, c, ch, (BASIC_QOS, ch, a.prefetch_count, a.global_, a.prefetch_size))
    if kind is A.ClientRecover:
        return write(state, c, ch, (BASIC_RECOVER, ch, a.requeue), view._replace(held=()))
    if kind is A.ClientConfirmSelect:
        mode = view.mode if view.mode == MODE_TX else MODE_CONFIRM
        return write(state, c, ch, (CONFIRM_SELECT, ch), view._replace(mode=mode))
    if kind is A.ClientTxSelect:
        mode = view.mode if view.mode == MODE_CONFIRM else MODE_TX
        return write(state, c, ch, (TX_SELECT, ch), view._replace(mode=mode))
    if kind is A.ClientTxCommit:
        return write(state, c, ch, (TX_COMMIT, ch), view._replace(tx_held=(), tx_dirty=False))
    if kind is A.ClientTxRollback:
        held = tuple(sorted(view.held + view.tx_held))          # TX-3: they are outstanding again
        return write(state, c, ch, (TX_ROLLBACK, ch), view._replace(held=held, tx_held=(), tx_dirty=False))
    if kind is A.ClientDeclareQueue:
        view = view._replace(setup=view.setup | (1 << a.queue))
        return write(state, c, ch, (QUEUE_DECLARE, ch, a.queue, a.durable, a.exclusive), view)
    if kind is A.ClientBindQueue:
        view = view._replace(setup=view.setup | (1 << (16 + a.queue)))
        return write(state, c, ch, (QUEUE_BIND, ch, a.queue, 1), view)
    if kind is A.ClientPurgeQueue:
        return write(state, c, ch, (QUEUE_PURGE, ch, a.queue))
    if kind is A.ClientDeleteQueue:
        return write(state, c, ch, (QUEUE_DELETE, ch, a.queue, a.if_unused, a.if_empty))
    if kind is A.ClientChannelClose:
        view = CLOSED_CLIENT._replace(status=C_CLOSING)
        return write(state, c, ch, (CHANNEL_CLOSE, ch, REPLY_SUCCESS, R_NORMAL, 0), view)
    if kind is A.ClientChannelCloseOk:
        if view.status == C_CLOSING:        # it closed the channel itself and does not wait for the answer
            return write(state, c, ch, (CHANNEL_CLOSE_OK, ch), CLOSED_CLIENT)
        return write(state, c, ch, (CHANNEL_CLOSE_OK, ch))
    if kind is A.ClientChannelOpen:
        return write(state, c, ch, (CHANNEL_OPEN, ch), CLOSED_CLIENT._replace(status=C_OPENING))
    if kind is A.ClientConnectionClose:
        conn = state.conns[c]
        state = state._replace(conns=put(state.conns, c, conn._replace(status=CONN_CLOSING)))
        return write(state, c, 0, (CONNECTION_CLOSE, 0, REPLY_SUCCESS, R_NORMAL, 0))
    raise AssertionError(f"no client effect for {a!r}")



# ---------------------------------------------------------------- preconditions
# Each client action's precondition, beside its effect: what any client library may send at all.
# Which of these a channel does try is its role's business (``spec.roles``, ``spec.machine``).


def _view(state: State, c: int, ch: int):
    """Client view of channel (c, ch) on a connection that is up, else None."""
    if not 0 <= c < len(state.conns):
        return None
    conn = state.conns[c]
    if conn.status != CONN_UP or not 1 <= ch <= len(conn.clients):
        return None
    return conn.clients[ch - 1]


def can_use_channel(state: State, a) -> bool:
    """A method on a channel: the connection is up and the client holds the channel open."""
    view = _view(state, a.conn, a.ch)
    return view is not None and view.status == C_OPEN


def can_settle(state: State, a) -> bool:
    """basic.ack / nack / reject: on an open channel, with any tag (one that is not outstanding is the
    broker's to refuse: ACK-4)."""
    return can_use_channel(state, a) and a.tag >= 0


def can_cancel(state: State, a) -> bool:
    """basic.cancel: of a consumer the client started on this channel."""
    view = _view(state, a.conn, a.ch)
    return view is not None and view.status == C_OPEN and a.consumer_tag in view.consumers


def can_open_channel(state: State, a) -> bool:
    """channel.open: of a closed channel, or (a protocol error, ER-1) of an open one."""
    view = _view(state, a.conn, a.ch)
    return view is not None and view.status in (C_CLOSED, C_OPEN)


def can_send_close_ok(state: State, a) -> bool:
    """channel.close-ok by the client: answering a channel.close it read, right after its own
    channel.close (RabbitMQ then forgets the channel without answering: ER-1), or out of turn."""
    view = _view(state, a.conn, a.ch)
    return view is not None and view.status in (C_CLOSED, C_OPEN, C_CLOSING)


def can_close_connection(state: State, a) -> bool:
    """connection.close: the connection is up."""
    return a.ch == 0 and 0 <= a.conn < len(state.conns) and state.conns[a.conn].status == CONN_UP


def can_connect(state: State, a) -> bool:
    """A new connection in a slot that is down, to a broker that is up."""
    return state.broker_up and a.ch == 0 and 0 <= a.conn < len(state.conns) and \
        state.conns[a.conn].status == CONN_DOWN


def can_receive(state: State, a) -> bool:
    """The client reads: a frame is in flight to it on that channel and may be read now (``spec.network``)."""
    if not 0 <= a.conn < len(state.conns):
        return False
    fifos = state.conns[a.conn].to_client
    return 0 <= a.ch < len(fifos) and network.can_move(fifos, a.ch)
