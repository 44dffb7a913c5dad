"""The spec's transition system over one bounded configuration, in Z3, for bounded model checking
(``proofs.bmc``): the "copies and frames" family.

The channel-modes family (``model.state``) is unbounded and leaves what it does not hold to oracles,
which is right for inductive proofs but lets a search invent executions (an oracle may say a frame is
a publish when the client sent a consume). A bounded search needs every fact its guards read, so this
family holds the spec state itself, field for field (``model.bounded_state``, where each field is
named once), over the sizes of one configuration: the frames
in flight (one fixed-capacity FIFO per channel and direction), queue q0's ready copies and consumer
ring, each channel's outstanding deliveries, consumers, prefetch, publish numbering, confirms and
held-back publishes, each client's view (held tags, confirms seen, last message read), the disk, the
copies' fates, and the budgets. Every field is a Z3 integer (booleans as 0/1), one constant per field
per step of the unrolling.

One relation per spec action, with the same name, its guard (the configuration's choice, as
``spec.machine.candidates`` makes it, and the spec's precondition) beside its effect. The family covers
a subset of the semantics (``SUBSET``): one queue q0 reached through the default exchange, no
mandatory or immediate publish, acks and rejects of single tags outside transactions, no error path
(an unknown tag, a mode switch, a closed channel), and no delivery to an automatic-mode consumer on a
channel with a global limit (the spec makes it two steps, ``Queue.sending``: no hazard's configuration
has one, ``proofs.bmc.HAZARD_CONFIGS``). Each guard also requires its step to stay inside
that subset, so the relation is an under-approximation of the spec: every execution Z3 finds is one
the spec has (``proofs.bmc`` replays it through ``spec.machine.step`` to show it), and a behaviour
outside the subset is missing rather than wrong. Actions with no relation here (``NOT_MODELLED``)
never fire in the search.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import z3

from rabbitproof.spec import actions as A
from rabbitproof.spec.machine import _act
from rabbitproof.spec.frames import (
    BASIC_ACK, BASIC_CONSUME, BASIC_CONSUME_OK, BASIC_DELIVER, BASIC_PUBLISH, BASIC_QOS, BASIC_QOS_OK,
    BASIC_REJECT, CONFIRM_SELECT, CONFIRM_SELECT_OK, DEFAULT_EXCHANGE, MSG_STRIDE, TX_COMMIT, TX_COMMIT_OK,
    TX_SELECT, TX_SELECT_OK,
)
from rabbitproof.spec.state import (
    C_CLOSED, C_OPEN, CH_CLOSED, CH_OPEN, CONN_DOWN, CONN_UP, FATE_ACKED, FATE_AUTO, FATE_LOST_AUTOACK,
    FATE_LOST_CRASH, MODE_CONFIRM, MODE_NONE, MODE_TX,
)

from .bounded_state import (
    FATES, W, Eff, Fields, OutsideSubset, ReadyCopy, Shape, Unacked, bv, merge, names,
)

SUBSET = ("one queue (q0), reached through the default exchange; publishes neither mandatory nor immediate; "
          "acks and rejects of one tag outside transactions; no error path, channel close or reconnect; "
          "no delivery to an automatic-mode consumer on a channel with a global limit (two steps in the spec, "
          "broker.deliver)")
MSG_CODE_STRIDE = 16    # messages per connection a field can name (configurations publish at most 12)


def shape_of(config) -> Shape:
    """The encoding's sizes for ``config``; OutsideSubset when the configuration leaves the subset."""
    if len(config.queues) != 1 or config.bindings or not config.queues[0].declared or \
            config.queues[0].exclusive or config.queues[0].dead_letter >= 0:
        raise OutsideSubset(f"{config.name}: the bounded family holds one plain queue")
    for role in config.roles.values():
        if any(t != (DEFAULT_EXCHANGE, 0) for t in role.publish) or True in role.mandatory:
            raise OutsideSubset(f"{config.name}: a role publishes elsewhere than q0 or mandatory")
        if role.get or role.cancel or role.recover or role.nack or role.multiple or role.ack_all or role.bad_ack \
                or role.mode_errors or role.declare or role.bind or role.purge or role.delete or role.close \
                or role.close_connection or role.protocol_errors or role.exclusive or (role.tx and role.ack) \
                or any(q != 0 for q, _ in role.consume) or False in role.reject:
            raise OutsideSubset(f"{config.name}: a role takes actions outside the bounded family")
    if not config.channels_open or config.failures or config.closes or config.cancels or config.gets or \
            config.admin or config.bad or config.vanishes or config.channel_errors:
        raise OutsideSubset(f"{config.name}: budgets outside the bounded family")
    m = config.messages
    ctags = max([len(r.consume) for r in config.roles.values()] + [0])
    return Shape(conns=config.connections, chans=config.channels, keys=m, tags=m + config.requeues,
                 ctags=ctags, seqs=m, fifo=m + 2)


# ---------------------------------------------------------------- the abstraction function

def project(state, shape: Shape) -> dict[str, int]:
    """A spec ``State`` as this family's values (the abstraction function); OutsideSubset when it
    holds something the family cannot (a frame outside the subset, more than a capacity allows)."""
    out = Fields({n: 0 for n in names(shape)}, shape)
    try:
        _project(state, out)
    except KeyError as e:               # a field the shape does not have: a copy, tag or channel too many
        raise OutsideSubset(f"more than the shape holds: {e.args[0]}") from None
    return out.x


def _project(state, out: Fields) -> None:
    queue = state.queues[0]
    if queue.sending:
        raise OutsideSubset("a delivery on its way to a channel with a global limit (Queue.sending)")
    q, used = out.queue, out.used
    out.broker.up, out.broker.tx_groups = int(state.broker_up), len(state.tx_groups)
    q.exists, q.durable, q.enqueued = int(queue.exists), int(queue.durable), queue.enqueued
    used.requeues, used.reconnects = state.used.requeues, state.used.reconnects
    used.crashes, used.qos = state.used.crashes, state.used.qos
    q.ready.put([(e.key, int(e.redelivered)) for e in queue.ready])
    q.ring.put(list(queue.ring))
    copies = {}
    for e in queue.ready:
        copies[e.key] = (e.msg, e.persistent)
    for conn in state.conns:
        for a in conn.auto:
            copies[a[3]] = (a[4], a[5])
        for channel in conn.channels:
            for u in channel.unacked:
                copies[u.key] = (u.msg, u.persistent)
            if channel.tx_settles:
                raise OutsideSubset("held-back settlements")
            if channel.qos_uncounted:   # only held-back settlements make it, and it outlives them
                raise OutsideSubset("a global limit set over held-back settlements")
    for _, k, fate, msg, pers in state.fates:
        if fate not in FATES:
            raise OutsideSubset(f"fate {fate}")
        copies[k] = (msg, pers)
        setattr(out.copies[k], FATES[fate], 1)
    for _, k, msg in state.disk:
        copies.setdefault(k, (msg, True))
        out.copies[k].on_disk = 1
    for k, (msg, pers) in copies.items():
        out.copies[k].msg, out.copies[k].persistent = msg_code(msg), int(pers)
    for _, k in state.delivered:
        out.copies[k].delivered = 1
    for gid, group in enumerate(state.tx_groups, start=1):
        for _, k in group:
            out.copies[k].tx_group = gid
    for c, conn in enumerate(state.conns):
        fields = out.connections[c]
        fields.status, fields.broker_closed, fields.published = conn.status, int(conn.broker_closed), conn.published
        fields.auto.put([(a[0], a[1], a[3]) for a in conn.auto])
        for ch, fifo in enumerate(conn.to_broker):
            out.to_broker[c, ch].put([frame_slot(f) for f in fifo])
        for ch, fifo in enumerate(conn.to_client):
            out.to_client[c, ch].put([frame_slot(f) for f in fifo])
        for ch, (channel, view) in enumerate(zip(conn.channels, conn.clients), start=1):
            b, v = out.channels[c, ch], out.views[c, ch]
            if channel.committing and not channel.commit_pending:
                raise OutsideSubset("a commit applied and not yet answered")
            b.status, b.mode, b.next_tag, b.prefetch = channel.status, channel.mode, channel.next_tag, channel.prefetch
            b.global_limit, b.volume, b.qos_excess = channel.global_limit, channel.volume, channel.qos_excess
            b.publish_seq, b.commit_pending = channel.publish_seq, int(channel.commit_pending)
            b.unacked.put([(u.tag, u.key, int(u.redelivered), u.consumer) for u in channel.unacked])
            for p in channel.unconfirmed:
                if p.nack or len(p.waits) > 1:
                    raise OutsideSubset("a nacked or multi-queue publish")
            b.unconfirmed.put([(p.seq, msg_code(p.msg), p.waits[0][1] if p.waits else 0) for p in channel.unconfirmed])
            for ex, rk, mand, pers, msg in channel.tx_pubs:
                if (ex, rk, mand) != (DEFAULT_EXCHANGE, 0, False):
                    raise OutsideSubset("a held-back publish outside the subset")
            b.tx_publishes.put([(int(p[3]), msg_code(p[4])) for p in channel.tx_pubs])
            for k in channel.consumers:
                b.consumer[k.tag], b.no_ack[k.tag], b.limit[k.tag] = 1, int(k.no_ack), k.limit
            for s in channel.confirmed:
                b.confirmed[s] = 1
            for _, k in channel.committing:
                b.committing[k] = 1
            if view.tx_held or view.setup:
                raise OutsideSubset("a client view outside the subset")
            v.status, v.mode, v.publish_seq = view.status, view.mode, view.pub_seq
            v.last_tag, v.last_msg = view.last_tag, msg_code(view.last_msg)
            v.disorder, v.tx_dirty = int(view.disorder), int(view.tx_dirty)
            v.held.put([(t,) for t in view.held])
            for t in view.consumers:
                v.consumer[t] = 1
            for s in view.confirms:
                v.confirmed[s] = 1


def frame_slot(frame) -> tuple[int, ...]:
    """A spec frame as a slot: (method, four fields), for the methods of the subset."""
    m = frame.method
    if m == BASIC_PUBLISH:
        if (frame.exchange, frame.routing_key, frame.mandatory, frame.immediate) != (DEFAULT_EXCHANGE, 0, False, False):
            raise OutsideSubset("a publish outside the subset")
        return (m, int(frame.persistent), msg_code(frame.msg), 0, 0)
    if m == BASIC_CONSUME:
        if frame.queue != 0 or frame.exclusive:
            raise OutsideSubset("a consume outside the subset")
        return (m, frame.consumer_tag, int(frame.no_ack), 0, 0)
    if m in (BASIC_ACK, BASIC_REJECT, BASIC_CONSUME_OK):    # their fields (all ints) in order, 0 past them
        return (m, *(int(f) for f in frame[2:]), *(0,) * (6 - len(frame)))
    if m == BASIC_QOS:
        return (m, frame.prefetch_count, int(frame.global_), frame.prefetch_size, 0)
    if m == BASIC_DELIVER:
        return (m, frame.consumer_tag, frame.delivery_tag, int(frame.redelivered), msg_code(frame.msg))
    if m in (CONFIRM_SELECT, CONFIRM_SELECT_OK, TX_SELECT, TX_SELECT_OK, TX_COMMIT, TX_COMMIT_OK, BASIC_QOS_OK):
        return (m, 0, 0, 0, 0)
    raise OutsideSubset(f"frame method {m}")


# ---------------------------------------------------------------- building effects

def msg_code(msg: int) -> int:
    """A spec message id (connection * MSG_STRIDE + number) in the few bits of a field, order kept."""
    return (msg // MSG_STRIDE) * MSG_CODE_STRIDE + msg % MSG_STRIDE


def _b(v) -> z3.BoolRef:
    """An 0/1 field as a Z3 condition."""
    return v != 0


@dataclass(frozen=True)
class Transition:
    """A relation in functional form: enabled when ``guard``; the state after is ``after``."""

    guard: z3.BoolRef
    after: dict


# ---------------------------------------------------------------- shared pieces of the effects

def _send(e: Eff, c: int, ch, frame, when=True) -> None:
    """The broker appends a frame for the client (broker.send)."""
    e.to_client[c, ch].push(tuple(frame) + (0,) * (W - len(frame)), when)


def _write(e: Eff, c: int, ch: int, frame) -> None:
    """The client writes a frame (client.write)."""
    e.to_broker[c, ch].push(tuple(frame) + (0,) * (W - len(frame)))


def _broker_end_open(e: Eff, c: int) -> z3.BoolRef:
    return z3.And(_b(e.broker.up), z3.Not(_b(e.connections[c].broker_closed)))


def _channel_open(e: Eff, c: int, ch: int) -> z3.BoolRef:
    return z3.And(_broker_end_open(e, c), e.channels[c, ch].status == CH_OPEN)


def _live(e: Eff, k: int) -> z3.BoolRef:
    """Copy k is live (faults.live_copies): ready, or outstanding on some channel."""
    return z3.Or(e.queue.ready.any(lambda r: r.key == k),
                 *[e.channels[c, ch].unacked.any(lambda r: r.key == k) for c, ch in e.shape.channels()])


def _forget_waits(e: Eff, k, when=True) -> None:
    """Copy k no longer holds up a confirm or a commit-ok (storage.forget_waits)."""
    when = z3.BoolVal(when) if isinstance(when, bool) else when
    for c, ch in e.shape.channels():
        b = e.channels[c, ch]
        for i in range(b.unconfirmed.capacity):
            row = b.unconfirmed.row(i)
            b.unconfirmed.set_row(i, row._replace(waits=z3.If(z3.And(when, row.waits == k), 0, row.waits)))
        for kk in range(1, e.shape.keys + 1):
            b.committing[kk] = z3.If(z3.And(when, bv(k) == kk), 0, b.committing[kk])


def _enqueue(e: Eff, msg, pers, when=True) -> z3.ArithRef:
    """A new copy at the tail of q0 (storage.enqueue); its key is returned."""
    when = z3.BoolVal(when) if isinstance(when, bool) else when
    key = e.queue.enqueued + 1
    e.need(z3.Implies(when, key <= e.shape.keys))
    for k in range(1, e.shape.keys + 1):
        at = z3.And(when, key == k)
        copy = e.copies[k]
        copy.msg = z3.If(at, bv(msg), copy.msg)
        copy.persistent = z3.If(at, bv(pers), copy.persistent)
    e.queue.ready.push((key, 0), when)
    e.queue.enqueued = z3.If(when, key, e.queue.enqueued)
    return key


def _fate(e: Eff, k, fate: int, when=True) -> None:
    """Copy k has the fate ``fate`` (spec.state.FATE_*) when ``when``."""
    when = z3.BoolVal(when) if isinstance(when, bool) else when
    name = FATES[fate]
    for kk in range(1, e.shape.keys + 1):
        copy = e.copies[kk]
        setattr(copy, name, z3.If(z3.And(when, bv(k) == kk), 1, getattr(copy, name)))


def _release(e: Eff, c: int, ch: int, settled_consumer) -> None:
    """broker.released for one settled delivery: the global limit counts a consumer delivery off
    (broker.count_off: a count of 0 stays 0)."""
    b = e.channels[c, ch]
    counted = z3.And(_b(b.global_limit), settled_consumer != 0)
    b.volume = z3.If(z3.And(counted, b.volume != 0), b.volume - 1, b.volume)


def _reset_connection(e: Eff, c: int) -> None:
    """faults.reset_connection to CONN_DOWN: nothing in flight, every channel and view closed."""
    conn = e.connections[c]
    conn.status, conn.broker_closed = CONN_DOWN, 0
    clean = conn.auto.keys()
    for ch in range(e.shape.chans + 1):
        clean += e.to_broker[c, ch].keys() + e.to_client[c, ch].keys()
    for ch in range(1, e.shape.chans + 1):
        clean += e.channels[c, ch].all_keys() + e.views[c, ch].all_keys()
    for key in clean:
        e[key] = 0
    for ch in range(1, e.shape.chans + 1):
        e.channels[c, ch].status, e.channels[c, ch].next_tag = CH_CLOSED, 1
        e.views[c, ch].status = C_CLOSED


def _drop_consumers_of(e: Eff, c: int) -> None:
    """Connection c's consumers leave q0's ring (storage.drop_consumer)."""
    e.queue.ring.remove(lambda r: r.conn == c)


# ---------------------------------------------------------------- the candidates of a configuration

def instances(config, shape: Shape) -> list:
    """Every action ``spec.machine.candidates`` can try in this configuration, in any state: the
    finite alphabet of the unrolling (each step picks one)."""
    out = []
    for c in range(shape.conns):
        for ch in range(shape.chans + 1):
            out.append(_act(A.BrokerTakeFrame, c, ch))
    out.append(_act(A.BrokerDeliver, 0))
    for c, ch in shape.channels():
        out.append(_act(A.BrokerCloseOk, c, ch))
        for s in range(1, shape.seqs + 1):
            out += [_act(A.BrokerConfirm, c, ch, s, False), _act(A.BrokerConfirm, c, ch, s, True)]
        out.append(_act(A.BrokerCommitOk, c, ch))
    msgs = [c * MSG_STRIDE + n for c in range(shape.conns) for n in range(1, config.messages + 1)]
    for k in range(1, shape.keys + 1):
        for msg in msgs:
            out += [_act(A.DiskFsync, 0, k, msg, True), _act(A.DiskFsync, 0, k, msg, False)]
    for c in range(shape.conns):
        for ch in range(shape.chans + 1):
            out.append(_act(A.ClientReceive, c, ch))
        out.append(_act(A.ClientConnect, c, 0, config.channels_open))
        for ch in range(1, shape.chans + 1):
            role = config.roles.get((c, ch))
            if role is None:
                continue
            for ex, rk in role.publish:
                for mand in role.mandatory:
                    for pers in role.persistent:
                        out.append(_act(A.ClientPublish, c, ch, ex, rk, mand, pers))
            for i, (q, no_ack) in enumerate(role.consume, start=1):
                out.append(_act(A.ClientConsume, c, ch, q, i, no_ack, role.exclusive))
            for tag in range(1, shape.tags + 1):
                if role.ack:
                    out.append(_act(A.ClientAck, c, ch, tag, False))
                for requeue in role.reject:
                    out.append(_act(A.ClientReject, c, ch, tag, requeue))
            for count, global_ in role.qos:
                out.append(_act(A.ClientQos, c, ch, count, global_))
            if role.confirm:
                out.append(_act(A.ClientConfirmSelect, c, ch))
            if role.tx:
                out += [_act(A.ClientTxSelect, c, ch), _act(A.ClientTxCommit, c, ch), _act(A.ClientTxRollback, c, ch)]
    if config.failures:
        out += [_act(A.BrokerQueueFail, c, ch, s) for c, ch in shape.channels() for s in range(1, shape.seqs + 1)]
    if config.reconnects and config.losses:
        out += [_act(A.NetworkLoss, c) for c in range(shape.conns)]
    if config.crashes:
        out.append(_act(A.BrokerCrash))
    out.append(_act(A.BrokerRestart))
    return list(dict.fromkeys(out))


# ---------------------------------------------------------------- client actions (spec.client)

def _client_may(e: Eff, a) -> z3.BoolRef:
    """The candidate condition every client channel action shares (machine.candidates) and its
    precondition (client.can_use_channel): the connection is up and the client holds the channel open."""
    return z3.And(e.connections[a.conn].status == CONN_UP, e.views[a.conn, a.ch].status == C_OPEN)


def ClientPublish(e: Eff, a, config) -> Transition:
    """basic.publish of the connection's next message (client.publish); a candidate while messages are left."""
    c, ch, v, conn = a.conn, a.ch, e.views[a.conn, a.ch], e.connections[a.conn]
    published = z3.Sum([e.connections[i].published for i in range(e.shape.conns)])
    guard = z3.And(_client_may(e, a), published < config.messages,
                   z3.BoolVal((a.exchange, a.routing_key, a.mandatory, a.immediate) == (DEFAULT_EXCHANGE, 0, False, False)))
    msg = c * MSG_CODE_STRIDE + conn.published + 1
    conn.published = conn.published + 1
    v.publish_seq = z3.If(v.mode == MODE_CONFIRM, v.publish_seq + 1, v.publish_seq)
    v.tx_dirty = z3.If(v.mode == MODE_TX, 1, v.tx_dirty)
    _write(e, c, ch, (BASIC_PUBLISH, int(a.persistent), msg))
    return Transition(guard, e)


def ClientConsume(e: Eff, a, config) -> Transition:
    """basic.consume with the role's tag; a candidate while the client has no consumer of that tag."""
    c, ch, v = a.conn, a.ch, e.views[a.conn, a.ch]
    guard = z3.And(_client_may(e, a), v.consumer[a.consumer_tag] == 0, z3.BoolVal(a.queue == 0 and not a.exclusive))
    v.consumer[a.consumer_tag] = 1
    _write(e, c, ch, (BASIC_CONSUME, a.consumer_tag, int(a.no_ack)))
    return Transition(guard, e)


def _held(e: Eff, c: int, ch: int, tag: int) -> z3.BoolRef:
    return e.views[c, ch].held.any(lambda r: r.tag == tag)


def ClientAck(e: Eff, a, config) -> Transition:
    """basic.ack of one held tag (client.client_step), outside a transaction."""
    c, ch, v = a.conn, a.ch, e.views[a.conn, a.ch]
    guard = z3.And(_client_may(e, a), _held(e, c, ch, a.delivery_tag), v.mode != MODE_TX, z3.BoolVal(not a.multiple))
    v.held.remove(lambda r: r.tag == a.delivery_tag)
    _write(e, c, ch, (BASIC_ACK, a.delivery_tag, 0))
    return Transition(guard, e)


def ClientReject(e: Eff, a, config) -> Transition:
    """basic.reject of one held tag; requeue=true only while the requeue budget lasts (RQ-6)."""
    c, ch, v = a.conn, a.ch, e.views[a.conn, a.ch]
    budget = e.used.requeues < config.requeues if a.requeue else z3.BoolVal(True)
    guard = z3.And(_client_may(e, a), _held(e, c, ch, a.delivery_tag), v.mode != MODE_TX, budget)
    if a.requeue:
        e.used.requeues = e.used.requeues + 1
    v.held.remove(lambda r: r.tag == a.delivery_tag)
    _write(e, c, ch, (BASIC_REJECT, a.delivery_tag, int(a.requeue)))
    return Transition(guard, e)


def ClientQos(e: Eff, a, config) -> Transition:
    """basic.qos; a candidate while the qos budget lasts."""
    guard = z3.And(_client_may(e, a), e.used.qos < config.qos, z3.BoolVal(a.prefetch_size == 0))
    e.used.qos = e.used.qos + 1
    _write(e, a.conn, a.ch, (BASIC_QOS, a.prefetch_count, int(a.global_), 0))
    return Transition(guard, e)


def ClientConfirmSelect(e: Eff, a, config) -> Transition:
    """confirm.select, tried by a confirm role on a channel in no mode."""
    v = e.views[a.conn, a.ch]
    guard = z3.And(_client_may(e, a), v.mode == MODE_NONE)
    v.mode = MODE_CONFIRM
    _write(e, a.conn, a.ch, (CONFIRM_SELECT,))
    return Transition(guard, e)


def ClientTxSelect(e: Eff, a, config) -> Transition:
    """tx.select, tried by a tx role on a channel in no mode."""
    v = e.views[a.conn, a.ch]
    guard = z3.And(_client_may(e, a), v.mode == MODE_NONE)
    v.mode = MODE_TX
    _write(e, a.conn, a.ch, (TX_SELECT,))
    return Transition(guard, e)


def ClientTxCommit(e: Eff, a, config) -> Transition:
    """tx.commit, tried once something was published or settled since the last commit."""
    v = e.views[a.conn, a.ch]
    guard = z3.And(_client_may(e, a), v.mode == MODE_TX, v.tx_dirty == 1)
    v.tx_dirty = 0
    _write(e, a.conn, a.ch, (TX_COMMIT,))
    return Transition(guard, e)


def ClientReceive(e: Eff, a, config) -> Transition:
    """The client reads the oldest frame of channel ch (client.receive): a delivery is held (manual
    mode) or settles its automatic-mode copy (AM-2), and marks disorder when its message is older
    than the last one read (RQ-3); a confirm joins the confirms seen; the other replies change nothing."""
    c, ch = a.conn, a.ch
    if ch == 0:
        return Transition(z3.BoolVal(False), e)             # connection.close frames: outside the subset
    fifo = e.to_client[c, ch]
    m, f1, f2, f3, f4 = fifo.row(0)
    guard = z3.And(fifo.length > 0, z3.Or([m == x for x in (BASIC_DELIVER, BASIC_ACK, BASIC_CONSUME_OK,
                                                            CONFIRM_SELECT_OK, TX_SELECT_OK, BASIC_QOS_OK,
                                                            TX_COMMIT_OK)]))
    fifo.pop()
    deliver = e.copy()
    tag, msg = f2, f4
    auto = deliver.connections[c].auto
    is_auto = auto.any(lambda r: z3.And(r.ch == ch, r.tag == tag))
    auto_key = z3.Sum([z3.If(z3.And(present, r.ch == ch, r.tag == tag), r.key, 0) for present, r in auto.live()]
                      + [bv(0)])
    auto.remove(lambda r: z3.And(r.ch == ch, r.tag == tag))
    _fate(deliver, auto_key, FATE_AUTO, is_auto)
    v = deliver.views[c, ch]
    v.held.push((tag,), z3.And(z3.Not(is_auto), v.status == C_OPEN))
    v.disorder = z3.If(z3.Or(_b(v.disorder), msg < v.last_msg), bv(1), bv(0))
    v.last_tag, v.last_msg = tag, msg
    confirm = e.copy()
    v = confirm.views[c, ch]
    for s in range(1, e.shape.seqs + 1):                    # multiple: 1..min(tag, pub_seq); else tag alone
        covered = z3.If(_b(f2), z3.And(s <= f1, s <= v.publish_seq), f1 == s)
        v.confirmed[s] = z3.If(covered, 1, v.confirmed[s])
    e.need(z3.Implies(m == BASIC_ACK, f1 <= e.shape.seqs))
    out = merge(m == BASIC_DELIVER, deliver, merge(m == BASIC_ACK, confirm, e))
    return Transition(guard, out)


# ---------------------------------------------------------------- broker actions (spec.broker)

def BrokerTakeFrame(e: Eff, a, config) -> Transition:
    """The broker takes the oldest frame of channel ch and acts on it (broker.take_frame) for the
    methods of the subset, on an open channel, taking no error path."""
    c, ch = a.conn, a.ch
    if ch == 0:
        return Transition(z3.BoolVal(False), e)             # connection.close: outside the subset
    fifo, b = e.to_broker[c, ch], e.channels[c, ch]
    m, f1, f2, f3, f4 = fifo.row(0)
    guard = z3.And(_broker_end_open(e, c), fifo.length > 0, b.commit_pending == 0,     # can_take_frame
                   b.status == CH_OPEN)
    fifo.pop()
    mode = b.mode
    cases = []

    # basic.publish: held back in tx mode (TX-2); else enqueued, numbered in confirm mode (PC-1, PC-5)
    pub = e.copy()
    b = pub.channels[c, ch]
    pub.need(pub.queue.exists == 1)
    tx = mode == MODE_TX
    b.tx_publishes.push((f1, f2), tx)
    key = _enqueue(pub, f2, f1, z3.Not(tx))
    confirm = mode == MODE_CONFIRM
    seq = b.publish_seq + 1
    pub.need(z3.Implies(confirm, seq <= e.shape.seqs))
    waits = z3.If(z3.And(_b(f1), _b(pub.queue.durable)), key, 0)
    b.unconfirmed.push((seq, f2, waits), confirm)
    b.publish_seq = z3.If(confirm, seq, b.publish_seq)
    cases.append((m == BASIC_PUBLISH, pub))

    # basic.consume: joins the ring with the channel's per-consumer limit (DS-1, PF-2)
    con = e.copy()
    b = con.channels[c, ch]
    con.need(con.queue.exists == 1)
    for t in range(1, e.shape.ctags + 1):
        at = f1 == t
        con.need(z3.Implies(at, b.consumer[t] == 0))                       # a reused tag: outside the subset
        b.consumer[t] = z3.If(at, 1, b.consumer[t])
        b.no_ack[t] = z3.If(at, f2, b.no_ack[t])
        b.limit[t] = z3.If(at, b.prefetch, b.limit[t])
    con.need(z3.And(1 <= f1, f1 <= e.shape.ctags))
    con.queue.ring.push((c, ch, f1))
    _send(con, c, ch, (BASIC_CONSUME_OK, f1))
    cases.append((m == BASIC_CONSUME, con))

    # basic.ack / basic.reject of one outstanding tag, outside tx mode (ACK-1, ACK-5, RQ-1, RQ-2)
    for method in (BASIC_ACK, BASIC_REJECT):
        st = e.copy()
        unacked = st.channels[c, ch].unacked
        st.need(unacked.any(lambda r: r.tag == f1), mode != MODE_TX)
        if method == BASIC_ACK:
            st.need(f2 == 0)                                                  # multiple: outside the subset
        settled = Unacked(*[z3.Sum([z3.If(z3.And(present, r.tag == f1), r[j], 0) for present, r in unacked.live()]
                                   + [bv(0)]) for j in range(len(Unacked._fields))])
        unacked.remove(lambda r: r.tag == f1)
        _release(st, c, ch, settled.consumer)
        if method == BASIC_ACK:
            _fate(st, settled.key, FATE_ACKED)
            _forget_waits(st, settled.key)
        else:
            st.need(f2 == 1)                                                  # requeue=false: outside the subset
            st.need(st.queue.exists == 1)
            st.queue.ready.insert_sorted((settled.key, 1))
        cases.append((m == method, st))

    # basic.qos (PF-2), as RabbitMQ 3.10.8 does it
    qos = e.copy()
    b = qos.channels[c, ch]
    qos.need(f3 == 0)
    outstanding = b.unacked.count(lambda r: r.consumer != 0)
    total = b.unacked.length
    set_global = z3.And(_b(f2), f1 != 0)
    b.volume = z3.If(set_global, z3.If(_b(b.global_limit), b.volume, total), 0)
    b.qos_excess = z3.If(set_global, z3.If(f1 < outstanding, outstanding, 0), 0)
    b.global_limit = z3.If(set_global, f1, 0)
    b.prefetch = z3.If(z3.Not(_b(f2)), f1, b.prefetch)
    _send(qos, c, ch, (BASIC_QOS_OK,))
    cases.append((m == BASIC_QOS, qos))

    # confirm.select (PC-1) and tx.select (TX-1), never switching modes (PC-8: outside the subset)
    for method, new, other, ok in ((CONFIRM_SELECT, MODE_CONFIRM, MODE_TX, CONFIRM_SELECT_OK),
                                   (TX_SELECT, MODE_TX, MODE_CONFIRM, TX_SELECT_OK)):
        sel = e.copy()
        sel.need(mode != other)
        sel.channels[c, ch].mode = new
        _send(sel, c, ch, (ok,))
        cases.append((m == method, sel))

    # tx.commit: held-back publishes take effect; once copies are enqueued, commit-ok is a step of its own
    # and waits for them on disk (TX-2, TX-7, TX-9)
    com = e.copy()
    b = com.channels[c, ch]
    com.need(mode == MODE_TX, com.queue.exists == 1)
    rows = b.tx_publishes.live()
    base = com.queue.enqueued
    waits = []
    for i, (present, r) in enumerate(rows):
        key = _enqueue(com, r.msg, r.persistent, present)
        waits.append((z3.And(present, _b(r.persistent), _b(com.queue.durable)), key))
    n = b.tx_publishes.length
    gid = com.broker.tx_groups + 1
    for k in range(1, e.shape.keys + 1):
        in_group = z3.And(n >= 2, base < k, k <= base + n)
        com.copies[k].tx_group = z3.If(in_group, gid, com.copies[k].tx_group)
        b.committing[k] = z3.If(z3.Or([z3.And(w, key == k) for w, key in waits] + [z3.BoolVal(False)]), bv(1), bv(0))
    com.broker.tx_groups = z3.If(n >= 2, gid, com.broker.tx_groups)
    b.tx_publishes.clear()
    owed = z3.Or([present for present, _ in rows] + [z3.BoolVal(False)])     # a copy enqueued: commit-ok is a step
    b.commit_pending = z3.If(owed, bv(1), bv(0))
    _send(com, c, ch, (TX_COMMIT_OK,), z3.Not(owed))
    cases.append((m == TX_COMMIT, com))

    out = e.copy()
    out.need(z3.BoolVal(False))                             # any other method: outside the subset
    for cond, case in reversed(cases):
        out = merge(cond, case, out)
    return Transition(guard, out)


def _room(e: Eff, c: int, ch: int, t: int) -> z3.BoolRef:
    """broker.has_room for consumer t of channel (c, ch) (PF-1, PF-2, PF-3)."""
    b = e.channels[c, ch]
    limit = b.limit[t]
    mine = b.unacked.count(lambda r: r.consumer == t)
    blocked = z3.And(_b(b.global_limit), b.volume >= b.global_limit)
    return z3.And(z3.Not(blocked), z3.Or(_b(b.no_ack[t]), limit == 0, mine < limit))


def _admits_in_two_steps(config, c: int, ch: int) -> bool:
    """Whether channel (c, ch) may have an automatic-mode consumer and a global limit at once (its role
    consumes with no_ack and sends basic.qos with global and a count), where broker.deliver takes two
    steps (``Queue.sending``): only then does the guard need to leave such a delivery out."""
    role = config.roles.get((c, ch))
    return role is not None and any(no_ack for _, no_ack in role.consume) and \
        any(count and global_ for count, global_ in role.qos)


def BrokerDeliver(e: Eff, a, config) -> Transition:
    """The head of q0 to the first consumer of the ring with room, which moves to the back (broker.deliver,
    DS-1); the copy is outstanding (manual mode, AM-3) or in flight in automatic mode (AM-2). Not to an
    automatic-mode consumer on a channel with a global limit: the spec takes two steps there
    (``Queue.sending``), outside the subset."""
    ring = e.queue.ring.live()
    consumers = [(c, ch, t) for c, ch in e.shape.channels() for t in range(1, e.shape.ctags + 1)]

    def ok(c, ch, t):
        return z3.And(z3.Not(_b(e.connections[c].broker_closed)), e.channels[c, ch].status == CH_OPEN,
                      e.channels[c, ch].consumer[t] == 1, _room(e, c, ch, t))
    ok_slot = [z3.And(present, z3.Or([z3.And(r.conn == c, r.ch == ch, r.consumer_tag == t, ok(c, ch, t))
                                      for c, ch, t in consumers] + [z3.BoolVal(False)])) for present, r in ring]
    first = [z3.And(ok_slot[i], *[z3.Not(ok_slot[j]) for j in range(i)]) for i in range(len(ring))]
    chosen = {k: z3.Or([z3.And(first[i], r.conn == k[0], r.ch == k[1], r.consumer_tag == k[2])
                        for i, (_, r) in enumerate(ring)] + [z3.BoolVal(False)]) for k in consumers}
    guard = z3.And(_b(e.broker.up), e.queue.ready.length > 0, z3.Or(list(chosen.values()) + [z3.BoolVal(False)]))
    head = e.queue.ready.row(0)
    key, red = head.key, head.redelivered
    out = e.copy()
    for c, ch, t in consumers:
        d = e.copy()
        b = d.channels[c, ch]
        d.queue.ready.pop()
        d.queue.ring.remove(lambda r: z3.And(r.conn == c, r.ch == ch, r.consumer_tag == t))
        d.queue.ring.push((c, ch, t))
        tag = b.next_tag
        d.need(tag <= e.shape.tags)
        b.next_tag = tag + 1
        noack = _b(b.no_ack[t])
        if _admits_in_two_steps(config, c, ch):                      # two steps in the spec: outside the subset
            d.need(z3.Not(z3.And(noack, _b(b.global_limit))))
        d.connections[c].auto.push((ch, tag, key), noack)
        _forget_waits(d, key, noack)
        b.unacked.push((tag, key, red, t), z3.Not(noack))
        b.volume = z3.If(z3.And(z3.Not(noack), _b(b.global_limit)), b.volume + 1, b.volume)
        for k in range(1, e.shape.keys + 1):
            d.copies[k].delivered = z3.If(key == k, 1, d.copies[k].delivered)
        msg = z3.Sum([z3.If(key == k, d.copies[k].msg, 0) for k in range(1, e.shape.keys + 1)])
        _send(d, c, ch, (BASIC_DELIVER, t, tag, red, msg))
        out = merge(chosen[(c, ch, t)], d, out)
    return Transition(guard, out)


def _in_ready_run(b, seq: z3.ArithRef) -> z3.BoolRef:
    """broker.can_confirm with multiple: ``seq`` is an unconfirmed publish of channel ``b``, not the
    oldest, whose publishes up to it are all ready (no publish is nacked in the subset, so every ready
    run has one outcome)."""
    rows = b.unconfirmed.live()
    found, run = z3.BoolVal(False), z3.BoolVal(True)
    for i, (present, r) in enumerate(rows):
        run = z3.And(run, present, r.waits == 0)
        if i >= 1:
            found = z3.Or(found, z3.And(run, r.seq == seq))
    return found


def _oldest_batched(b, seq: z3.ArithRef) -> z3.BoolRef:
    """broker.oldest_batched for ``seq``: it is the oldest unconfirmed publish of channel ``b``, ready,
    and so is a later one that is not the next (RabbitMQ's batch confirms it alone with multiple)."""
    rows = b.unconfirmed.live()
    if len(rows) < 3:
        return z3.BoolVal(False)
    (first_present, first), later = rows[0], rows[2:]
    return z3.And(first_present, first.seq == seq, first.waits == 0,
                  z3.Or(*[z3.And(present, r.waits == 0) for present, r in later]))


def BrokerConfirm(e: Eff, a, config) -> Transition:
    """basic.ack for publish seq, or with multiple every unconfirmed one up to it (broker.confirm, PC-2,
    PC-3); enabled once it is ready (no copy waits for the disk, PC-5)."""
    c, ch, b = a.conn, a.ch, e.channels[a.conn, a.ch]
    unconfirmed = b.unconfirmed
    if a.multiple:
        ready = z3.And(unconfirmed.length > 0, z3.Or(_in_ready_run(b, a.seq), _oldest_batched(b, a.seq)))
    else:
        ready = unconfirmed.any(lambda r: z3.And(r.seq == a.seq, r.waits == 0))
    guard = z3.And(_channel_open(e, c, ch), ready)

    def covered(r):
        return r.seq <= a.seq if a.multiple else r.seq == a.seq
    for s in range(1, e.shape.seqs + 1):
        b.confirmed[s] = z3.If(unconfirmed.any(lambda r: z3.And(covered(r), r.seq == s)), 1, b.confirmed[s])
    unconfirmed.remove(covered)
    _send(e, c, ch, (BASIC_ACK, a.seq, int(a.multiple)))
    return Transition(guard, e)


def BrokerCommitOk(e: Eff, a, config) -> Transition:
    """tx.commit-ok once the commit's copies are on disk (broker.commit_ok, TX-7)."""
    c, ch, b = a.conn, a.ch, e.channels[a.conn, a.ch]
    waiting = z3.Or([b.committing[k] == 1 for k in range(1, e.shape.keys + 1)])
    guard = z3.And(_channel_open(e, c, ch), b.commit_pending == 1, z3.Not(waiting))
    b.commit_pending = 0
    _send(e, c, ch, (TX_COMMIT_OK,))
    return Transition(guard, e)


def DiskFsync(e: Eff, a, config) -> Transition:
    """One pending write (a live persistent copy of a durable queue not on disk) or removal (a record
    whose copy is not live) becomes durable (faults.fsync, PC-5, TX-8)."""
    k = a.key
    copy = e.copies[k]
    live = _live(e, k)
    pending = z3.And(live, _b(copy.persistent), _b(e.queue.durable), copy.on_disk == 0) if a.write else \
        z3.And(copy.on_disk == 1, z3.Not(live))
    guard = z3.And(_b(e.broker.up), copy.msg == msg_code(a.msg), pending, z3.BoolVal(a.queue == 0))
    copy.on_disk = int(a.write)
    if a.write:
        _forget_waits(e, k)
    return Transition(guard, e)


def BrokerCrash(e: Eff, a, config) -> Transition:
    """The broker dies (faults.crash): live copies not on disk are lost (DU-2, PC-10, TX-9), automatic
    deliveries in flight too; every connection drops; q0 survives only if durable."""
    guard = z3.And(_b(e.broker.up), e.used.crashes < config.crashes)
    e.used.crashes = e.used.crashes + 1
    for k in range(1, e.shape.keys + 1):
        _fate(e, k, FATE_LOST_CRASH, z3.And(_live(e, k), e.copies[k].on_disk == 0))
    for c in range(e.shape.conns):
        for present, r in e.connections[c].auto.live():
            _fate(e, r.key, FATE_LOST_AUTOACK, present)
    for c in range(e.shape.conns):
        _reset_connection(e, c)
    e.queue.ready.clear()
    e.queue.ring.clear()
    e.queue.exists = z3.If(z3.And(_b(e.queue.exists), _b(e.queue.durable)), bv(1), bv(0))
    e.broker.up = 0
    return Transition(guard, e)


def BrokerRestart(e: Eff, a, config) -> Transition:
    """The broker starts again; q0, if it exists, holds its disk records, ready and redelivered, in
    key order (faults.restart, DU-1..3)."""
    guard = z3.Not(_b(e.broker.up))
    e.broker.up = 1
    keys = range(1, e.shape.keys + 1)
    on = {k: z3.And(_b(e.queue.exists), e.copies[k].on_disk == 1) for k in keys}
    pos = {k: z3.Sum([z3.If(on[j], bv(1), bv(0)) for j in keys if j < k] + [bv(0)]) for k in keys}
    ready = e.queue.ready
    for i in range(ready.capacity):
        key = bv(0)
        for k in keys:
            key = z3.If(z3.And(on[k], pos[k] == i), k, key)
        ready.set_row(i, ReadyCopy(key=key, redelivered=z3.If(key != 0, bv(1), bv(0))))
    ready.length = z3.Sum([z3.If(on[k], bv(1), bv(0)) for k in keys])
    return Transition(guard, e)


def NetworkLoss(e: Eff, a, config) -> Transition:
    """Connection c is lost (faults.lose_connection): its consumers stop, its automatic deliveries in flight
    are lost (AM-2), the slot is down. A connection holding outstanding deliveries or a transaction is
    outside the subset (their requeue is not modelled here)."""
    c = a.conn
    guard = z3.And(_b(e.broker.up), e.connections[c].status != CONN_DOWN, e.used.reconnects < config.reconnects)
    for ch in range(1, e.shape.chans + 1):
        b = e.channels[c, ch]
        e.need(b.unacked.length == 0, b.tx_publishes.length == 0, b.unconfirmed.length == 0, b.commit_pending == 0)
    e.used.reconnects = e.used.reconnects + 1
    _drop_consumers_of(e, c)
    for present, r in e.connections[c].auto.live():
        _fate(e, r.key, FATE_LOST_AUTOACK, present)
    _reset_connection(e, c)
    return Transition(guard, e)


def _never(e: Eff, a, config) -> Transition:
    return Transition(z3.BoolVal(False), e)


# Actions the bounded family has no relation for (outside SUBSET): they never fire in a search.
NOT_MODELLED = ("ClientConnect", "ClientTxRollback", "BrokerCloseOk", "BrokerQueueFail", "ClientVanish", "BrokerDetect",
                "BrokerRequeue",
                "BrokerChannelError",
                "ClientCancel", "ClientGet", "ClientNack", "ClientRecover", "ClientDeclareQueue", "ClientBindQueue",
                "ClientPurgeQueue", "ClientDeleteQueue", "ClientChannelClose", "ClientChannelOpen",
                "ClientChannelCloseOk", "ClientConnectionClose")

RELATIONS: dict[str, Callable] = {cls.__name__: globals().get(cls.__name__, _never)
                                  if cls.__name__ not in NOT_MODELLED else _never for cls in A.all_actions()}


def relation(shape: Shape, config, action, x: dict) -> Transition:
    """The relation of ``action`` (a spec action object) from state ``x`` (field -> Z3 term): its guard,
    with the subset's and the capacities' conditions, and the state after."""
    t = RELATIONS[type(action).__name__](Eff(x, shape), action, config)
    after = t.after
    guard = z3.And(t.guard, *after.req) if isinstance(after, Eff) and after.req else t.guard
    return Transition(guard, after.x if isinstance(after, Eff) else after)


# ---------------------------------------------------------------- the hazards' properties

def auto_ack_never_loses(x: dict, shape: Shape) -> z3.BoolRef:
    """No copy was lost in flight in automatic mode (AM-2)."""
    s = Fields(x, shape)
    return z3.And([s.copies[k].lost_auto == 0 for k in range(1, shape.keys + 1)])


def persistent_never_lost(x: dict, shape: Shape) -> z3.BoolRef:
    """No persistent copy of durable q0 was lost in a crash (DU-2, PC-10)."""
    s = Fields(x, shape)
    return z3.And([z3.Not(z3.And(s.copies[k].lost_crash == 1, s.copies[k].persistent == 1, s.queue.durable == 1))
                   for k in range(1, shape.keys + 1)])


def acked_never_redelivered(x: dict, shape: Shape) -> z3.BoolRef:
    """No acknowledged copy is live again (TX-8, DU-3)."""
    e = Eff(x, shape)
    return z3.And([z3.Not(z3.And(e.copies[k].acked == 1, _live(e, k))) for k in range(1, shape.keys + 1)])


def consumer_sees_publication_order(x: dict, shape: Shape) -> z3.BoolRef:
    """No client read a message after a later-published one (RQ-3)."""
    s = Fields(x, shape)
    return z3.And([s.views[c, ch].disorder == 0 for c, ch in shape.channels()])


def tx_commit_atomic(x: dict, shape: Shape) -> z3.BoolRef:
    """No committed group is partly lost in a crash (TX-9)."""
    s = Fields(x, shape)
    keys = range(1, shape.keys + 1)
    out = []
    for g in range(1, shape.keys + 1):
        size = z3.Sum([z3.If(s.copies[k].tx_group == g, bv(1), bv(0)) for k in keys])
        gone = z3.Sum([z3.If(z3.And(s.copies[k].tx_group == g, s.copies[k].lost_crash == 1), bv(1), bv(0))
                       for k in keys])
        out.append(z3.Not(z3.And(gone > 0, gone < size)))
    return z3.And(out)


def confirms_in_publish_order(x: dict, shape: Shape) -> z3.BoolRef:
    """Every publisher's confirms seen are 1..n (PC-7): the largest is their count."""
    s = Fields(x, shape)
    out = []
    for c, ch in shape.channels():
        seen = [s.views[c, ch].confirmed[seq] == 1 for seq in range(1, shape.seqs + 1)]
        count = z3.Sum([z3.If(is_seen, bv(1), bv(0)) for is_seen in seen])
        top = bv(0)
        for seq, is_seen in enumerate(seen, start=1):
            top = z3.If(is_seen, seq, top)
        out.append(top == count)
    return z3.And(out)


def outstanding_within_prefetch(x: dict, shape: Shape) -> z3.BoolRef:
    """No channel holds more consumer deliveries than its global prefetch (PF-5)."""
    e = Eff(x, shape)
    out = []
    for c, ch in shape.channels():
        b = e.channels[c, ch]
        n = b.unacked.count(lambda r: r.consumer != 0)
        out.append(z3.Not(z3.And(b.global_limit != 0, n > b.global_limit)))
    return z3.And(out)


PROPERTIES: dict[str, Callable[[dict, Shape], z3.BoolRef]] = {
    f.__name__: f for f in (auto_ack_never_loses, persistent_never_lost, acked_never_redelivered,
                            consumer_sees_publication_order, tx_commit_atomic, confirms_in_publish_order,
                            outstanding_within_prefetch)
}
