"""The transition system: initial states, enabled actions (guards), and step (effects).

This is the interface every engine uses (spark_check, the trace checker, the Z3 agreement check):
- ``initial_states(config)``: the states exploration starts from;
- ``enabled(state, config)``: the actions enabled in a state, in a deterministic order: those the
  configuration tries (``candidates``: roles and budgets, here and nowhere else) whose precondition
  holds (``PRECONDITIONS``: one function per action, beside its effect);
- ``step(state, action)``: the next state and the frames that crossed the wire (``Wire`` labels:
  what a client wrote, and what it read);
- ``terminal_ok(state, config)``: whether a state with nothing enabled is a proper end;
- the reductions it offers, as hooks the engines call (spark_check.reductions): ``fused_takes(config)``
  (``por``, spec.por) and ``symmetry(config)`` (spec.symmetry), each with its soundness argument;
- ``fairness(config)``: the weakly fair classes of steps its liveness properties are judged under
  (spec.fairness).
"""
from __future__ import annotations

from . import actions as A
from . import broker, client, faults, interleavings, network
from .fairness import Fairness, weakly_fair
from .frames import Wire
from .por import FusedTakes
from .roles import IDLE
from .symmetry import Symmetry
from .state import (
    C_CLOSED, C_OPEN, CH_ENDING, CH_OPEN, CLOSED_CHANNEL, CLOSED_CLIENT, CONN_DOWN, CONN_UP,
    MODE_CONFIRM, MODE_NONE, MODE_TX, NEW_CHANNEL, NEW_CLIENT, Conn, Queue, State, Used, with_used,
)

BAD_TAG = 1000      # a delivery tag no configuration ever issues (ACK-4: "never issued")
ACTIONS = A.all_actions()   # the machine's action classes, for the engines (spark_check.bundle.action_types_of)

_made: dict = {}    # (action class, args) -> the action


def _act(cls, *args):
    """The action ``cls(*args)``, made once and reused: actions are immutable values compared by value,
    and building a frozen dataclass costs more than looking it up (performance)."""
    key = (cls, args)
    action = _made.get(key)
    if action is None:
        action = _made[key] = cls(*args)
    return action


def stale_slots(config) -> int:
    """How many slots past the configuration's connections hold vanished connections the broker has not
    noticed yet (``faults.vanish``): one per reconnect the budget allows, at most one per connection."""
    return min(config.reconnects, config.connections) if config.vanishes else 0


def initial_states(config) -> tuple[State, ...]:
    """Every connection up with all its channels open (or all closed, for a configuration whose
    clients open them: ``channels_open``), and the stale slots free; the configuration's queues and
    bindings exist."""
    fifos = network.empty(config.channels)
    channel, view = (NEW_CHANNEL, NEW_CLIENT) if config.channels_open else (CLOSED_CHANNEL, CLOSED_CLIENT)
    conns = tuple(Conn(CONN_UP, False, 0, fifos, fifos, (), (channel,) * config.channels,
                       (view,) * config.channels) for _ in range(config.connections))
    conns += (faults.free_slot(config.channels),) * stale_slots(config)
    queues = tuple(Queue(spec.declared, spec.durable and not spec.exclusive, 0, spec.dead_letter + 1,
                         (), 0, (), ()) for spec in config.queues)
    return (State(True, conns, queues, tuple(sorted(config.bindings)), (), Used(), (), (), (), (), 0),)


def enabled(state: State, config) -> tuple:
    """The enabled actions: those the configuration tries (``candidates``) whose precondition holds
    (``PRECONDITIONS``): broker, disk, clients, then faults, each in index order.

    Performance: it asks only the candidates that one field does not already rule out (``evident``:
    no frame in flight to take or read, no ready copy or consumer to deliver, a channel not ending or
    owing no commit-ok, a broker up or down); the precondition still decides each one it asks."""
    pre = PRECONDITIONS
    return tuple([a for a in _tried(state, config, True) if pre[type(a)](state, a)])


def precondition(state: State, action) -> bool:
    """Whether ``action`` may fire in ``state``: its precondition, which stands beside its effect."""
    return PRECONDITIONS[type(action)](state, action)


def candidates(state: State, config) -> list:
    """The actions the configuration tries in ``state``, in a deterministic order: every broker, disk
    and network move, and what each client's role and the budgets let it try (the configuration's
    choices live here and nowhere else; whether an action may fire is its precondition's business).
    The agreement check with the Z3 model (model/agreement.py) asks about each, disabled ones too."""
    return _tried(state, config, False)


def _tried(state: State, config, evident: bool) -> list:
    """``candidates``, or with ``evident`` only those whose precondition one field does not rule out
    (the same order; ``enabled`` asks these)."""
    used = state.used
    conns = state.conns
    broker_up = state.broker_up
    out: list = []
    add = out.append
    for c, conn in enumerate(conns):
        open_end = broker_up and not conn.broker_closed
        for ch, fifo in enumerate(conn.to_broker):
            if not evident or open_end and fifo:                        # can_take_frame
                add(_act(A.BrokerTakeFrame, c, ch))
    for q, queue in enumerate(state.queues):
        if not evident or broker_up and (queue.ready and queue.ring or queue.sending):      # can_deliver
            add(_act(A.BrokerDeliver, q))
    if not evident or broker_up and interleavings.requeue_waits(state):   # can_requeue
        add(_act(A.BrokerRequeue))
    for c, conn in enumerate(conns):
        for ch, channel in enumerate(conn.channels, start=1):
            if not evident or channel.status == CH_ENDING:               # can_close_ok
                add(_act(A.BrokerCloseOk, c, ch))
            if channel.unconfirmed:
                for p in channel.unconfirmed:
                    add(_act(A.BrokerConfirm, c, ch, p.seq, False))
                if broker.oldest_batched(channel):      # the oldest alone, in a batch with a later one (PC-3)
                    add(_act(A.BrokerConfirm, c, ch, channel.unconfirmed[0].seq, True))
                prefix = broker.confirm_prefix(channel)
                if prefix:                      # any part of the ready run that covers two or more (PC-3)
                    for p in channel.unconfirmed[1:]:
                        if p.seq > prefix:
                            break
                        add(_act(A.BrokerConfirm, c, ch, p.seq, True))
            if not evident or channel.commit_pending:                    # can_commit_ok
                add(_act(A.BrokerCommitOk, c, ch))
    if broker_up:
        for q, key, msg, write in faults.pending_disk(state):
            add(_act(A.DiskFsync, q, key, msg, write))
    messages_left = config.messages
    for conn in conns:
        messages_left -= conn.published
    for c, conn in enumerate(conns):
        for ch, fifo in enumerate(conn.to_client):
            if not evident or fifo:                                      # can_receive
                add(_act(A.ClientReceive, c, ch))
        if conn.status == CONN_DOWN:
            add(_act(A.ClientConnect, c, 0, config.channels_open))
            continue
        if conn.status != CONN_UP:
            continue
        closes_connection = False
        for ch, view in enumerate(conn.clients, start=1):
            role = config.roles.get((c, ch), IDLE)
            closes_connection |= role.close_connection
            if view.status == C_CLOSED:
                add(_act(A.ClientChannelOpen, c, ch))
                continue
            if view.status != C_OPEN:
                continue
            _client_actions(out, state, config, c, ch, view, role, messages_left)
        if closes_connection and used.reconnects < config.reconnects:
            add(_act(A.ClientConnectionClose, c, 0))
    if used.failures < config.failures:
        for c, conn in enumerate(conns):
            for ch, channel in enumerate(conn.channels, start=1):
                for p in channel.unconfirmed:
                    add(_act(A.BrokerQueueFail, c, ch, p.seq))
    if used.reconnects < config.reconnects and config.losses:
        for c in range(config.connections):
            add(_act(A.NetworkLoss, c))
    if used.reconnects < config.reconnects and config.vanishes:
        for c in range(config.connections):
            add(_act(A.ClientVanish, c))
    for d in range(config.connections, len(conns)):
        if not evident or not conns[d].broker_closed:                    # can_detect
            add(_act(A.BrokerDetect, d))
    if used.channel_errors < config.channel_errors:
        for c in range(config.connections):
            for ch, channel in enumerate(conns[c].channels, start=1):
                if not evident or channel.status == CH_OPEN:             # can_channel_error
                    add(_act(A.BrokerChannelError, c, ch))
    if used.crashes < config.crashes and (not evident or broker_up):    # can_crash
        add(_act(A.BrokerCrash))
    if not evident or not broker_up:                                     # can_restart
        add(_act(A.BrokerRestart))
    return out


def client_candidates(state: State, config, c: int, ch: int) -> list:
    """What the client of the open channel (c, ch) tries (``candidates`` of that channel only, in the same
    order): for a caller that wants one client's next step without building everyone's."""
    messages_left = config.messages - sum(conn.published for conn in state.conns)
    out: list = []
    _client_actions(out, state, config, c, ch, state.conns[c].clients[ch - 1], config.roles.get((c, ch), IDLE),
                    messages_left)
    return out


def _client_actions(out, state, config, c, ch, view, role, messages_left) -> None:
    """The actions the client of channel (c, ch) tries under its role and the budgets."""
    used = state.used
    if role.publish and messages_left > 0:
        for exchange, routing_key in role.publish:
            for mandatory in role.mandatory:
                for persistent in role.persistent:
                    out.append(_act(A.ClientPublish, c, ch, exchange, routing_key, mandatory, persistent))
    consumes = not role.qos_first or used.qos >= config.qos
    for i, (q, no_ack) in enumerate(role.consume, start=1):
        if consumes and i not in view.consumers:
            out.append(_act(A.ClientConsume, c, ch, q, i, no_ack, role.exclusive))
    if role.cancel and used.cancels < config.cancels:
        for tag in view.consumers:
            out.append(_act(A.ClientCancel, c, ch, tag))
    if used.gets < config.gets:
        for q, no_ack in role.get:
            out.append(_act(A.ClientGet, c, ch, q, no_ack))
    requeue_left = used.requeues < config.requeues
    for tag in view.held:
        if role.ack:
            out.append(_act(A.ClientAck, c, ch, tag, False))
            if role.multiple and tag != view.held[0]:
                out.append(_act(A.ClientAck, c, ch, tag, True))
        for requeue in role.nack:
            if requeue and not requeue_left:
                continue
            out.append(_act(A.ClientNack, c, ch, tag, False, requeue))
            if role.multiple and tag != view.held[0]:
                out.append(_act(A.ClientNack, c, ch, tag, True, requeue))
        for requeue in role.reject:
            if requeue and not requeue_left:
                continue
            out.append(_act(A.ClientReject, c, ch, tag, requeue))
    if role.ack_all and len(view.held) >= 2:
        out.append(_act(A.ClientAck, c, ch, 0, True))
    bad_left = used.bad < config.bad
    if role.bad_ack and bad_left:
        out.append(_act(A.ClientAck, c, ch, BAD_TAG, False))
        for t in range(view.last_tag, 0, -1):           # the latest tag already settled, if any
            if t not in view.held and t not in view.tx_held:
                out.append(_act(A.ClientAck, c, ch, t, False))               # ACK-7: a second ack
                break
    if used.qos < config.qos:
        for count, global_ in role.qos:
            out.append(_act(A.ClientQos, c, ch, count, global_))
    for requeue in role.recover:
        if (requeue and requeue_left) or (not requeue and bad_left):
            out.append(_act(A.ClientRecover, c, ch, requeue))
    if view.mode == MODE_NONE:
        if role.confirm:
            out.append(_act(A.ClientConfirmSelect, c, ch))
        if role.tx:
            out.append(_act(A.ClientTxSelect, c, ch))
    elif role.mode_errors and bad_left:
        if view.mode == MODE_TX:
            out.append(_act(A.ClientConfirmSelect, c, ch))                   # PC-8
        else:
            out.append(_act(A.ClientTxSelect, c, ch))                        # PC-8
            out.append(_act(A.ClientTxCommit, c, ch))                        # TX-10
    if view.mode == MODE_TX and view.tx_dirty:
        out.append(_act(A.ClientTxCommit, c, ch))
        if role.tx and requeue_left:
            out.append(_act(A.ClientTxRollback, c, ch))             # RQ-6: settled deliveries outstanding again
    for q in role.declare:
        if not view.setup & (1 << q):
            spec = config.queues[q]
            out.append(_act(A.ClientDeclareQueue, c, ch, q, spec.durable, spec.exclusive))
    for q in role.bind:
        if not view.setup & (1 << (16 + q)):
            out.append(_act(A.ClientBindQueue, c, ch, q))
    if used.admin < config.admin:
        for q in role.purge:
            out.append(_act(A.ClientPurgeQueue, c, ch, q))
        for q, if_unused, if_empty in role.delete:
            out.append(_act(A.ClientDeleteQueue, c, ch, q, if_unused, if_empty))
    if role.protocol_errors and bad_left:
        # Frames RabbitMQ answers with a connection error (ER-1): publish immediate, a prefetch_size,
        # a consumer tag the channel already uses, channel.open of an open channel, close-ok out of turn.
        if role.publish and messages_left > 0:
            exchange, routing_key = role.publish[0]
            out.append(_act(A.ClientPublish, c, ch, exchange, routing_key, False, False, True))
        out.append(_act(A.ClientQos, c, ch, 0, False, 1))
        if view.consumers and role.consume:
            out.append(_act(A.ClientConsume, c, ch, role.consume[0][0], view.consumers[0], role.consume[0][1]))
        out.append(_act(A.ClientChannelOpen, c, ch))
        out.append(_act(A.ClientChannelCloseOk, c, ch))
    if role.close and used.closes < config.closes:
        out.append(_act(A.ClientChannelClose, c, ch))


def _spend(state: State, action) -> State:
    """Charge the action to its budget (Used), so that every configuration stays finite (RQ-6)."""
    kind = type(action)
    used = state.used
    if kind in (A.ClientNack, A.ClientReject):
        if action.requeue:
            used = used._replace(requeues=used.requeues + 1)
    elif kind is A.ClientTxRollback:
        used = used._replace(requeues=used.requeues + 1)
    elif kind is A.ClientRecover:
        used = used._replace(requeues=used.requeues + 1) if action.requeue else used._replace(bad=used.bad + 1)
    elif kind is A.ClientAck:
        view = state.conns[action.conn].clients[action.ch - 1]
        if action.delivery_tag and action.delivery_tag not in view.held:
            used = used._replace(bad=used.bad + 1)
    elif kind in (A.ClientConfirmSelect, A.ClientTxSelect, A.ClientTxCommit):
        view = state.conns[action.conn].clients[action.ch - 1]
        bad = (kind is A.ClientConfirmSelect and view.mode == MODE_TX) or \
              (kind is A.ClientTxSelect and view.mode == MODE_CONFIRM) or \
              (kind is A.ClientTxCommit and view.mode != MODE_TX)
        if bad:
            used = used._replace(bad=used.bad + 1)
    elif kind is A.ClientQos:
        used = used._replace(qos=used.qos + 1, bad=used.bad + bool(action.prefetch_size))
    elif kind is A.ClientPublish:
        if not action.immediate:
            return state
        used = used._replace(bad=used.bad + 1)
    elif kind is A.ClientConsume:
        if action.consumer_tag not in state.conns[action.conn].clients[action.ch - 1].consumers:
            return state
        used = used._replace(bad=used.bad + 1)
    elif kind in (A.ClientChannelCloseOk, A.ClientChannelOpen):
        if state.conns[action.conn].clients[action.ch - 1].status != C_OPEN:
            return state
        used = used._replace(bad=used.bad + 1)
    elif kind in (A.ClientPurgeQueue, A.ClientDeleteQueue):
        used = used._replace(admin=used.admin + 1)
    elif kind is A.ClientGet:
        used = used._replace(gets=used.gets + 1)
    elif kind is A.ClientCancel:
        used = used._replace(cancels=used.cancels + 1)
    elif kind is A.ClientChannelClose:
        used = used._replace(closes=used.closes + 1)
    elif kind in (A.ClientConnectionClose, A.NetworkLoss, A.ClientVanish):
        used = used._replace(reconnects=used.reconnects + 1)
    elif kind is A.BrokerChannelError:
        used = used._replace(channel_errors=used.channel_errors + 1)
    elif kind is A.BrokerCrash:
        used = used._replace(crashes=used.crashes + 1)
    elif kind is A.BrokerQueueFail:
        used = used._replace(failures=used.failures + 1)
    else:
        return state
    return with_used(state, used)


def step(state: State, action) -> tuple[State, tuple]:
    """The next state after ``action`` and the frames that crossed the wire (Wire labels)."""
    kind = type(action)
    effect = EFFECTS.get(kind)
    if effect is not None:
        return effect(state, action)
    return client.client_step(_spend(state, action), action)


EFFECTS = {
    A.BrokerTakeFrame: lambda s, a: _broker_wrote(broker.take_frame(s, a.conn, a.ch), s),
    A.BrokerDeliver: lambda s, a: _broker_wrote(broker.deliver(s, a.queue), s),
    A.BrokerRequeue: lambda s, a: (interleavings.take_requeue(s), ()),
    A.BrokerConfirm: lambda s, a: _broker_wrote(broker.confirm(s, a.conn, a.ch, a.seq, a.multiple), s),
    A.BrokerCommitOk: lambda s, a: _broker_wrote(broker.commit_ok(s, a.conn, a.ch), s),
    A.BrokerCloseOk: lambda s, a: _broker_wrote(broker.close_ok(s, a.conn, a.ch), s),
    A.DiskFsync: lambda s, a: (faults.fsync(s, a.queue, a.key, a.msg, a.write), ()),
    A.BrokerQueueFail: lambda s, a: (faults.queue_fail(_spend(s, a), a.conn, a.ch, a.seq), ()),
    A.BrokerCrash: lambda s, a: (faults.crash(_spend(s, a)), ()),
    A.BrokerRestart: lambda s, a: (faults.restart(s), ()),
    A.NetworkLoss: lambda s, a: (faults.lose_connection(_spend(s, a), a.conn), ()),
    A.ClientVanish: lambda s, a: (faults.vanish(_spend(s, a), a.conn), ()),
    A.BrokerDetect: lambda s, a: (faults.detect(s, a.conn), ()),
    A.BrokerChannelError: lambda s, a: _broker_wrote(faults.channel_error(_spend(s, a), a.conn, a.ch), s),
    A.ClientPublish: lambda s, a: client.publish(s, a),
    A.ClientReceive: lambda s, a: client.receive(s, a.conn, a.ch, a.answer),
    A.ClientConnect: lambda s, a: (faults.reset_connection(s, a.conn, CONN_UP, a.channels_open), ()),
}


# Each action's precondition, defined beside its effect (the guard and the effect read side by side;
# ``model/`` mirrors both, one Z3 relation per action).
PRECONDITIONS = {
    A.BrokerTakeFrame: broker.can_take_frame,
    A.BrokerDeliver: broker.can_deliver,
    A.BrokerRequeue: interleavings.can_requeue,
    A.BrokerConfirm: broker.can_confirm,
    A.BrokerCommitOk: broker.can_commit_ok,
    A.BrokerCloseOk: broker.can_close_ok,
    A.DiskFsync: faults.can_fsync,
    A.BrokerQueueFail: faults.can_queue_fail,
    A.BrokerCrash: faults.can_crash,
    A.BrokerRestart: faults.can_restart,
    A.NetworkLoss: faults.can_lose_connection,
    A.ClientVanish: faults.can_vanish,
    A.BrokerDetect: faults.can_detect,
    A.BrokerChannelError: faults.can_channel_error,
    A.ClientPublish: client.can_use_channel,
    A.ClientReceive: client.can_receive,
    A.ClientConnect: client.can_connect,
    A.ClientConsume: client.can_use_channel,
    A.ClientCancel: client.can_cancel,
    A.ClientGet: client.can_use_channel,
    A.ClientAck: client.can_settle,
    A.ClientNack: client.can_settle,
    A.ClientReject: client.can_settle,
    A.ClientQos: client.can_use_channel,
    A.ClientRecover: client.can_use_channel,
    A.ClientConfirmSelect: client.can_use_channel,
    A.ClientTxSelect: client.can_use_channel,
    A.ClientTxCommit: client.can_use_channel,
    A.ClientTxRollback: client.can_use_channel,
    A.ClientDeclareQueue: client.can_use_channel,
    A.ClientBindQueue: client.can_use_channel,
    A.ClientPurgeQueue: client.can_use_channel,
    A.ClientDeleteQueue: client.can_use_channel,
    A.ClientChannelClose: client.can_use_channel,
    A.ClientChannelOpen: client.can_open_channel,
    A.ClientChannelCloseOk: client.can_send_close_ok,
    A.ClientConnectionClose: client.can_close_connection,
}


def _broker_wrote(after: State, before: State) -> tuple[State, tuple]:
    """A broker step with the frames it wrote as its labels (those appended to a to_client FIFO)."""
    labels: list[Wire] = []
    for c, (new, old) in enumerate(zip(after.conns, before.conns)):
        if new.to_client is not old.to_client and new.status == old.status:
            for new_fifo, old_fifo in zip(new.to_client, old.to_client):
                if len(new_fifo) > len(old_fifo):
                    labels.extend(Wire(c, False, f) for f in new_fifo[len(old_fifo):])
    return after, tuple(labels)


def terminal_ok(state: State, config) -> bool:
    """A state where nothing is enabled is a proper end when nothing is in flight or owed:
    no frame on the wire, no publish waiting for its confirm (PC-2), no commit-ok owed."""
    for conn in state.conns:
        if any(conn.to_broker) or any(conn.to_client):
            return False
        for channel in conn.channels:
            if channel.unconfirmed or channel.commit_pending:
                return False
    return True


def fused_takes(config) -> FusedTakes:
    """The ``por`` reduction of ``config``: a client's frame and the broker's take of it fused into one
    step where nothing can tell the difference (spec.por)."""
    return FusedTakes(config, step, _act)


def symmetry(config) -> Symmetry:
    """The ``symmetry`` reduction of ``config``: states that differ by a renaming of interchangeable
    connections and channels share one fingerprint (spec.symmetry)."""
    return Symmetry(config)


def fairness(config) -> Fairness:
    """The weakly fair classes of ``config``'s steps (spec.fairness): the broker keeps taking frames,
    confirming, answering, delivering and writing to disk, the network delivers and clients keep reading."""
    return weakly_fair(config, config.connections + stale_slots(config))
