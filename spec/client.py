"""The clients' side: the frames a client writes for each of its actions, and what it does with each
frame it reads. A client here is any AMQP 0-9-1 client library: it tracks the delivery tags it holds,
its publish sequence numbers once in confirm mode (PC-1), and answers a channel.close with close-ok.
"""
from __future__ import annotations

from typing import Any

from .frames import (
    BASIC_ACK, BASIC_CANCEL, BASIC_DELIVER, BASIC_GET_OK, BASIC_NACK, CHANNEL_CLOSE, CHANNEL_CLOSE_OK,
    CHANNEL_OPEN_OK, CONNECTION_CLOSE, CONNECTION_CLOSE_OK, MSG_STRIDE, Wire, make_frame,
)
from . import actions as A
from . import network
from .faults import reset_connection
from .state import (
    C_CLOSED, C_CLOSING, C_OPEN, C_OPENING, CLOSED_CLIENT, CONN_CLOSING, CONN_DOWN, CONN_UP, FATE_AUTO,
    FATE_LOST_AUTOACK, MODE_CONFIRM, MODE_TX, NEW_CLIENT, Conn, State, conn_clients, put, with_conn,
)
from .storage import add_fates


def write(state: State, c: int, ch: int, frame: Any, client=None) -> tuple[State, tuple]:
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
    return write(state, a.conn, a.ch, A.frame_of(a, msg), view)


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


def receive(state: State, c: int, ch: int, answer: bool = True) -> tuple[State, tuple]:
    """ClientReceive: the client reads the oldest frame in flight to it on channel ch (channels reach
    the client in any interleaving: ``spec.network``) and reacts as a client library does."""
    conn = state.conns[c]
    frame = conn.to_client[ch][0]
    conn = Conn(conn.status, conn.broker_closed, conn.published, conn.to_broker, network.pop(conn.to_client, ch),
                conn.auto, conn.channels, conn.clients)
    state = with_conn(state, c, conn)
    label: tuple[Wire, ...] = (Wire(c, False, frame),)
    method = frame.method
    if method in (BASIC_DELIVER, BASIC_GET_OK):
        tag, msg = frame.delivery_tag, frame.msg
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
        tag, multiple = frame.delivery_tag, frame.multiple
        seqs = range(1, min(tag, view.pub_seq) + 1) if multiple else (tag,)
        view = view._replace(confirms=tuple(sorted(set(view.confirms).union(seqs))))
        return with_conn(state, c, conn_clients(conn, put(conn.clients, ch - 1, view))), label
    if method == CHANNEL_CLOSE:
        conn = conn._replace(clients=put(conn.clients, ch - 1, CLOSED_CLIENT))
        state = state._replace(conns=put(state.conns, c, conn))
        if not answer:
            return state, label
        state, sent = write(state, c, ch, make_frame(CHANNEL_CLOSE_OK, ch))
        return state, label + sent
    if method == CHANNEL_CLOSE_OK:
        if conn.clients[ch - 1].status != C_CLOSING:
            return state, label             # both ends closed at once: the channel is already closed
        return with_conn(state, c, conn_clients(conn, put(conn.clients, ch - 1, CLOSED_CLIENT))), label
    if method == BASIC_CANCEL:              # the broker cancelled a consumer: its queue was deleted
        view = conn.clients[ch - 1]
        view = view._replace(consumers=tuple(t for t in view.consumers if t != frame.consumer_tag))
        return with_conn(state, c, conn_clients(conn, put(conn.clients, ch - 1, view))), label
    if method == CHANNEL_OPEN_OK:
        return with_conn(state, c, conn_clients(conn, put(conn.clients, ch - 1, NEW_CLIENT))), label
    if method in (CONNECTION_CLOSE, CONNECTION_CLOSE_OK):
        lost = tuple((q, k, FATE_LOST_AUTOACK, m, p) for _, _, q, k, m, p in conn.auto)
        state = reset_connection(add_fates(state, lost), c, CONN_DOWN)
        if method == CONNECTION_CLOSE:
            label += (Wire(c, True, make_frame(CONNECTION_CLOSE_OK, 0)),)
        return state, label
    return state, label


def client_step(state: State, a) -> tuple[State, tuple]:
    """The effect of every client action other than publish and receive: the frame it writes
    (``spec.actions.frame_of``) and what becomes of the client's view of the channel."""
    c, ch = a.conn, a.ch
    kind = type(a)
    frame = A.frame_of(a)
    if kind is A.ClientAck or kind is A.ClientNack or kind is A.ClientReject:
        return write(state, c, ch, frame, settle_view(client_view(state, c, ch), a.delivery_tag,
                                                      kind is not A.ClientReject and a.multiple))
    view: Any = client_view(state, c, ch) if ch else None     # None: an action on the connection itself
    if kind is A.ClientConsume:
        view = view._replace(consumers=tuple(sorted(view.consumers + (a.consumer_tag,))))
    elif kind is A.ClientCancel:
        view = view._replace(consumers=tuple(t for t in view.consumers if t != a.consumer_tag))
    elif kind is A.ClientRecover:
        view = view._replace(held=())
    elif kind is A.ClientConfirmSelect:
        view = view._replace(mode=view.mode if view.mode == MODE_TX else MODE_CONFIRM)
    elif kind is A.ClientTxSelect:
        view = view._replace(mode=view.mode if view.mode == MODE_CONFIRM else MODE_TX)
    elif kind is A.ClientTxCommit:
        view = view._replace(tx_held=(), tx_dirty=False)
    elif kind is A.ClientTxRollback:
        held = tuple(sorted(view.held + view.tx_held))          # TX-3: they are outstanding again
        view = view._replace(held=held, tx_held=(), tx_dirty=False)
    elif kind is A.ClientDeclareQueue:
        view = view._replace(setup=view.setup | (1 << a.queue))
    elif kind is A.ClientBindQueue:
        view = view._replace(setup=view.setup | (1 << (16 + a.queue)))
    elif kind is A.ClientChannelClose:
        view = CLOSED_CLIENT._replace(status=C_CLOSING)
    elif kind is A.ClientChannelCloseOk:
        # it closed the channel itself and does not wait for the answer, or answers out of turn
        view = CLOSED_CLIENT if view.status == C_CLOSING else None
    elif kind is A.ClientChannelOpen:
        view = CLOSED_CLIENT._replace(status=C_OPENING)
    elif kind is A.ClientConnectionClose:
        conn = state.conns[c]
        state = state._replace(conns=put(state.conns, c, conn._replace(status=CONN_CLOSING)))
    elif kind not in (A.ClientGet, A.ClientQos, A.ClientPurgeQueue, A.ClientDeleteQueue):
        raise AssertionError(f"no client effect for {a!r}")
    return write(state, c, ch, frame, view)


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
    return can_use_channel(state, a) and a.delivery_tag >= 0


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
