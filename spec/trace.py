"""Trace checking (DESIGN.md, "Trace checking"): does some execution of the spec produce what the
clients observed?

An observation is what one connection's client saw, in order: ``("sent", frame)``,
``("received", frame)``, ``("lost",)`` (the connection dropped without a close handshake),
``("connect",)`` (it connected again) or ``("quiet",)`` (after a last round trip on each channel the
client waited until nothing more came: the end of a program is quiescence, so the broker must owe
nothing there, ``quiescent``). Frames are the spec's tuples (``spec.frames``);
``spec.trace_text`` reads traces written by hand, ``rabbitproof.recording.observations`` turns frames
recorded from a real broker into observations.

The checker searches the product of spec states and positions in each connection's observations:
unobserved steps (the broker taking frames, delivering, confirming, fsync, crash and restart, a queue
failing) may happen at any time; an observed frame must be exactly what the matching client step
writes or reads. Client steps are built from the observations themselves, so the client is free to
do anything a real client does; the broker is free to make any choice the spec allows and is caught
when it does what the spec does not allow.

The search is exact, and made to scale by never trying what the observations already rule out
(``_Plan``), and by trying one order of steps that commute (partial-order reduction):
- a client step that sends or receives the next observation of its connection is taken as soon as
  it can be, and nothing else is tried there (``_forced``); so are a confirm or commit-ok that its
  client reads next (``_forced_owed``). Broker steps are branched on only where every client waits;
- a broker step that writes a frame onto a channel is kept only when that frame is the one the
  client reads next on that channel (each channel is a FIFO, but for what RabbitMQ's channel process
  reorders: ``spec.network.read_from``), or when the client reads nothing more there (a frame then
  unread is one in flight when the connection dropped or the recording stopped); an unread confirm is
  never tried, since nothing can depend on it;
- the disk is written lazily: an fsync is made when a confirm or tx.commit-ok the client reads needs
  it (PC-5, TX-7), a copy that leaves memory unwritten keeps a record as if written just before
  (``_kept_on_disk``), and at a crash the disk is taken to hold every pending write and no pending
  removal; each copy so recovered whose pending change may have gone either way stays *doubtful*
  and is dropped (the write never reached the disk, or the removal did) when the broker would
  otherwise hand it out (DU-2, TX-8, PC-10). Every choice of the eager disk is one of these;
- a crash is tried only where no connection still up will read anything more before it drops, and
  only when a later connection of some client could see its effects; it comes after the broker took
  the frames in flight whose taking can only add to what the crash leaves (``_crash``);
- states are compared without their ghost variables and the budgets no step taken here is guarded
  by, and without the disk once no crash can come (``_canonical``).

Where RabbitMQ 3.10.8's processes (the connection's reader, each channel, each queue) give outcomes the
spec's single step has not, they are steps of the machine where they have been moved there
(``spec.interleavings``: the queue taking its limiter's resume before a requeue), which the checker
takes as any other; the others it still tries itself, as other outcomes of a take
(``_taken_as_rabbitmq_may``) or a step of their own (``_closed_before_the_connection``); each was
observed on RabbitMQ and is listed in docs/reference/differences.md ("Modelled in trace checking only").
A ``("quiet",)`` observation, the end of a program, requires quiescence (``quiescent``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import actions as A
from . import broker, faults, interleavings, machine, network, storage
from .budgets import SPENT
from .frames import (
    BASIC_ACK, BASIC_CANCEL, BASIC_CONSUME, BASIC_DELIVER, BASIC_GET, BASIC_NACK, BASIC_PUBLISH, BASIC_QOS,
    BASIC_REJECT, CHANNEL_CLOSE_OK, CHANNEL_ERROR, CHANNEL_OPEN, CONFIRM_SELECT, CONNECTION_CLOSE, QUEUE_DELETE,
    QUEUE_PURGE, R_EXPECTED_OPEN, TX_COMMIT_OK, as_frame, frame_text,
)
from .state import (
    CH_CLOSED, CH_CLOSING, CH_ENDING, CH_OPEN, CONN_DOWN, CONN_GONE, CONN_UP, FATE_LOST_CRASH, FATE_QUEUE_DELETED,
    conn_to_broker, conn_to_client, with_conn,
)
from .storage import with_channel, with_queue
from .trace_text import parse, parse_frame  # noqa: F401  (the trace language, re-exported)

INTERNAL = (A.BrokerTakeFrame, A.BrokerDeliver, A.BrokerRequeue, A.BrokerConfirm, A.BrokerCommitOk,
            A.BrokerCloseOk, A.DiskFsync, A.BrokerQueueFail, A.BrokerCrash, A.BrokerRestart, A.BrokerDetect,
            A.BrokerChannelError)

# Internal steps the checker takes from ``machine.enabled``; fsync, crash and restart it makes itself.
_FREE = (A.BrokerTakeFrame, A.BrokerDeliver, A.BrokerRequeue, A.BrokerConfirm, A.BrokerCommitOk,
         A.BrokerCloseOk, A.BrokerQueueFail, A.BrokerDetect, A.BrokerChannelError)
# Broker frames written by a step of their own (a confirm) that no other step depends on: never sent
# when the client does not read them. A basic.return is written by the take of its publish or commit,
# which has other effects, so it may stay unread (RT-3, TX-6).
_UNREAD_USELESS = (BASIC_ACK, BASIC_NACK)
# Client frames whose taking changes what a crash can leave only through copies (``_crash``).
_TAKEN_AT_CRASH = frozenset((BASIC_PUBLISH, BASIC_ACK, BASIC_NACK, BASIC_REJECT, BASIC_CONSUME, BASIC_QOS,
                             BASIC_CANCEL, CONFIRM_SELECT))

ACCEPTED, REJECTED, INCONCLUSIVE = "accepted", "rejected", "inconclusive"

def observation_text(obs: tuple) -> str:
    """An observation as a person reads it."""
    if obs[0] in ("sent", "received"):
        return f"{obs[0]} {frame_text(obs[1])}"
    return obs[0]


@dataclass
class Verdict:
    """The trace checker's answer: accepted, rejected (with the first observation the spec cannot
    explain and what it allowed there), or inconclusive (the search gave up, with the reason)."""

    status: str
    matched: int                                # observations explained on the furthest path
    total: int
    conn: int = -1                              # where the first unexplained observation is
    index: int = -1
    observation: tuple = ()
    allowed: list = field(default_factory=list)  # what the spec allowed on that connection there
    explored: int = 0
    reason: str = ""
    path: tuple = ()                            # accepted: the spec actions of the explanation found, in order

    @property
    def ok(self) -> bool:
        return self.status == ACCEPTED

    def explain(self) -> str:
        if self.ok:
            return f"accepted: all {self.total} observations explained ({self.explored} spec states searched)"
        if self.status == INCONCLUSIVE:
            return (f"inconclusive: {self.reason}; {self.matched} of {self.total} observations explained "
                    f"on the furthest path ({self.explored} spec states searched)")
        allowed = "; ".join(self.allowed) if self.allowed else "nothing observable"
        return (f"rejected: connection c{self.conn}, observation {self.index + 1} "
                f"({observation_text(self.observation)}) has no explanation; "
                f"the spec allowed there: {allowed}")

    __str__ = explain


class _Plan:
    """What the observations say of every position in them: which connection epoch it is in (a
    ``connect`` starts a new one), how many frames each channel has read so far in that epoch, the
    frames each channel reads in each epoch, and whether anything is still read ahead."""

    def __init__(self, obs: tuple, channels: int) -> None:
        self.epoch: list = []           # [c][p] -> epoch number at position p
        self.read: list = []            # [c][p] -> per channel 0..n, frames read in the epoch before p
        self.frames: list = []          # [c][epoch][ch] -> the frames channel ch reads in that epoch
        self.reads_ahead: list = []     # [c][p] -> a frame is read at or after p in the same epoch
        self.reveals: list = []         # [c][p] -> a frame is read at or after p in a later epoch
        self.published_on: dict = {}    # msg -> (connection, channel) of its publish
        for c, seq in enumerate(obs):
            for o in seq:
                if o[0] == "sent" and o[1].method == BASIC_PUBLISH:
                    self.published_on[o[1].msg] = (c, o[1].channel)
        for seq in obs:
            epochs = [[[] for _ in range(channels + 1)]]
            counts = [0] * (channels + 1)
            epoch_at, read_at = [], []
            for o in seq:
                epoch_at.append(len(epochs) - 1)
                read_at.append(tuple(counts))
                if o[0] == "connect":
                    epochs.append([[] for _ in range(channels + 1)])
                    counts = [0] * (channels + 1)
                elif o[0] == "received" and 0 <= o[1].channel <= channels:
                    epochs[-1][o[1].channel].append(o[1])
                    counts[o[1].channel] += 1
            epoch_at.append(len(epochs) - 1)
            read_at.append(tuple(counts))
            ahead = [False] * (len(seq) + 1)
            reveals = [False] * (len(seq) + 1)
            later = same = False
            for p in range(len(seq) - 1, -1, -1):
                kind = seq[p][0]
                if kind == "received":
                    same = True
                elif kind == "connect":
                    later, same = later or same, False
                ahead[p], reveals[p] = same, later
            self.epoch.append(epoch_at)
            self.read.append(read_at)
            self.frames.append(tuple(tuple(tuple(f) for f in chans) for chans in epochs))
            self.reads_ahead.append(ahead)
            self.reveals.append(reveals)

    def next_read(self, c: int, p: int, ch: int, fifo: tuple):
        """The first frame channel ch of connection c reads that the frames in flight there (``fifo``)
        do not account for (``network.read_from``), or None when the observations read nothing more
        there in this epoch."""
        frames = self.frames[c][self.epoch[c][p]][ch]
        i = self.read[c][p][ch]
        while i < len(frames):
            fifo = network.read_from(fifo, frames[i])
            if fifo is None:
                return frames[i]
            i += 1
        return None

    def fits(self, before, after, pos: tuple) -> bool:
        """Whether the frames a broker step wrote can be read as the observations read them: every frame
        in flight on a channel it wrote to is read next, in an order ``network.read_from`` allows,
        until what is read next is still to be written, or but deliveries that a frame in flight to the
        channel may yet be taken before (``_taken_before_numbering``); a frame read by no one is one in
        flight when the connection dropped or the recording stopped, unless nothing else may depend on it."""
        for c, (new, old) in enumerate(zip(after.conns, before.conns)):
            if new.to_client is old.to_client:
                continue
            p = pos[c]
            frames = self.frames[c][self.epoch[c][p]]
            read = self.read[c][p]
            for ch, (new_fifo, old_fifo) in enumerate(zip(new.to_client, old.to_client)):
                if len(new_fifo) <= len(old_fifo):
                    continue
                fifo, reads, i = new_fifo, frames[ch], read[ch]
                while fifo and i < len(reads):
                    left = network.read_from(fifo, reads[i])
                    if left is None:
                        numbered_later = new.to_broker[ch] and all(
                            f.method == BASIC_DELIVER or f.method in network.QUEUE_REPLIES for f in fifo)
                        if not network.may_come_first(fifo, reads[i]) and not numbered_later:
                            return False        # deliveries a take may yet number later stay (DT-1)
                        break
                    fifo, i = left, i + 1
                if i >= len(reads):
                    written = new_fifo[len(old_fifo):]
                    if any(f.method in _UNREAD_USELESS and f in written for f in fifo):
                        return False
        return True

    def crash_useful(self, state, pos: tuple) -> bool:
        """A crash is tried only where no live connection reads anything more before it drops, and some
        client reads something after connecting again (where the crash's effects can show)."""
        useful = False
        for c, conn in enumerate(state.conns):
            if conn.status == CONN_GONE:         # a vanished connection's slot: no client reads there
                continue
            if conn.status != CONN_DOWN and self.reads_ahead[c][pos[c]]:
                return False
            useful = useful or self.reveals[c][pos[c]]
        return useful


def quiescent(state, c: int) -> bool:
    """Whether the broker owes nothing, where connection c's client marked the end of its program
    (``("quiet",)``): every frame a client sent has been taken, every frame written to c has been read,
    and no step the broker owes is left: a delivery to a consumer with room (DS-1, PF-1), a confirm of
    a publish on an open channel (PC-2), a commit-ok (TX-7), a close-ok (ER-1). A return is written
    with its publish (RT-3), so it has been read. A broker that drops any of them is caught here. And
    the broker has noticed every connection its client dropped (``faults.detect``): a program ends with
    a round trip, and a client of the suite drops a connection by closing its socket, which a broker
    notices at once; so one that keeps a dropped connection's deliveries for ever is caught too."""
    if not state.broker_up or interleavings.requeue_waits(state):
        return False
    if any(state.conns[c].to_client):
        return False
    for conn in state.conns:
        if conn.status == CONN_GONE and not conn.broker_closed:
            return False
        if conn.status == CONN_DOWN or conn.broker_closed:
            continue
        if any(conn.to_broker):
            return False
        for channel in conn.channels:
            if channel.status == CH_ENDING:
                return False
            if channel.status == CH_OPEN and (channel.unconfirmed or channel.commit_pending):
                return False
    return all(not queue.sending and (not queue.ready or broker.next_consumer(state, q) is None)
               for q, queue in enumerate(state.queues))


def _apply_client(state, c: int, obs: tuple, channels_open: bool = True):
    """Match observation ``obs`` on connection c against a client step: the state after it and the
    actions taken (none for an observation that changes nothing), or None. A client's answers (a
    close-ok) are observations of their own."""
    conn = state.conns[c]
    kind = obs[0]
    if kind == "connect":
        if conn.status == CONN_DOWN and state.broker_up:
            connect = A.ClientConnect(c, 0, channels_open)
            return machine.step(state, connect)[0], (connect,)
        return None
    if kind == "lost":
        if conn.status == CONN_DOWN:
            return state, ()
        # The broker notices late (a heartbeat timeout) unless no slot can hold the connection meanwhile;
        # noticing at once is one of the ways on (BrokerDetect right after).
        vanish = A.ClientVanish(c)
        if faults.can_vanish(state, vanish):
            return machine.step(state, vanish)[0], (vanish,)
        return machine.step(state, A.NetworkLoss(c))[0], (A.NetworkLoss(c),)
    if kind == "quiet":
        return (state, ()) if quiescent(state, c) else None
    if kind == "received":
        ch = obs[1].channel
        fifos = conn.to_client
        if ch >= len(fifos):
            return None
        if ch == 0:
            fifos = network.end_of_connection(fifos)
            if fifos is None or not fifos[0] or not network.same_frame(fifos[0][0], obs[1]):
                return None
        else:
            status = conn.channels[ch - 1].status if 0 < ch <= len(conn.channels) else CH_OPEN
            left = network.read_from(fifos[ch], obs[1], conn.broker_closed or status != CH_OPEN,
                                     status == CH_CLOSING)
            if left is None:
                return None
            fifos = fifos[:ch] + ((obs[1],) + left,) + fifos[ch + 1:]    # as written, had it come first
        if fifos is not conn.to_client:
            state = with_conn(state, c, conn_to_client(conn, fifos))
        # The client's own answers are observations of their own: a channel.close-ok it sends (and
        # every frame it sends before that), and the connection.close-ok it may send once closed.
        receive = A.ClientReceive(c, ch, False)
        state, _ = machine.step(state, receive)
        return state, (receive,)
    if kind == "sent":
        if conn.status == CONN_DOWN:
            return state, ()                    # written into a connection that is already gone
        if conn.status != CONN_UP:
            return None
        frame = obs[1]
        action = A.action_of(c, frame)
        if action is None or frame.channel > len(conn.clients):
            return None
        state, labels = machine.step(state, action)
        if not labels or labels[0].frame != frame:
            return None
        return state, (action,)
    raise ValueError(f"unknown observation kind {kind!r}")


def _synced(state, pairs) -> tuple:
    """The state with the pending disk writes of these (queue, key) copies made durable (PC-5, TX-7),
    and the fsyncs made."""
    live = faults.live_copies(state)
    on_disk = {(q, k) for q, k, _ in state.disk}
    fsyncs = []
    for q, k in sorted(set(pairs)):
        if (q, k) in live and (q, k) not in on_disk:
            state = faults.fsync(state, q, k, live[(q, k)][0], True)
            fsyncs.append(A.DiskFsync(q, k, live[(q, k)][0], True))
    return state, tuple(fsyncs)


def _owed(state, plan: _Plan, pos: tuple):
    """Confirms and commit-oks that a client reads next and that the spec allows once the disk has
    written what they wait for: each with those fsyncs made first (the state after the fsyncs, the
    fsyncs, and the action). The guards are ``machine.enabled``'s for BrokerConfirm and BrokerCommitOk."""
    if not state.broker_up:
        return
    for c, conn in enumerate(state.conns):
        if conn.broker_closed or conn.status in (CONN_DOWN, CONN_GONE):
            continue
        for ch, channel in enumerate(conn.channels, start=1):
            if channel.status != CH_OPEN or not (channel.unconfirmed or channel.commit_pending):
                continue
            want = plan.next_read(c, pos[c], ch, conn.to_client[ch])
            if want is None:
                continue
            if want.method in (BASIC_ACK, BASIC_NACK) and channel.unconfirmed:
                seq, multiple = want.delivery_tag, bool(want.multiple)
                covered = [p for p in channel.unconfirmed if (p.seq <= seq if multiple else p.seq == seq)]
                synced, fsyncs = _synced(state, [w for p in covered for w in p.waits])
                channel = synced.conns[c].channels[ch - 1]
                action = A.BrokerConfirm(c, ch, seq, multiple)
                if broker.can_confirm(synced, action):
                    yield synced, fsyncs, action
                elif multiple and covered and seq == channel.unconfirmed[0].seq:
                    # The oldest alone, batched with a later publish past the next (broker.oldest_batched):
                    # the disk may have written that one's copies first, each later one a way.
                    for later in channel.unconfirmed[2:]:
                        batched, more = _synced(synced, later.waits)
                        if more and broker.can_confirm(batched, action):
                            yield batched, fsyncs + more, action
            elif want.method == TX_COMMIT_OK and channel.commit_pending:
                synced, fsyncs = _synced(state, channel.committing)
                yield synced, fsyncs, A.BrokerCommitOk(c, ch)


def _forced_owed(state, plan: _Plan, pos: tuple):
    """The state after the first confirm or commit-ok of ``_owed`` whose frame is the one its client
    reads next, and the actions taken (fsyncs, then it), when there is one: then it is the only step tried (partial-order reduction). Exact:
    every explanation of the trace writes that frame, and with no other step writing on that channel
    before it (its client reads this frame next); it touches only its own channel's publishes and the
    disk, so it commutes with every step that can come before it there and disables none of them; and
    no crash, the one step that allows more before an fsync than after, is tried while a client reads."""
    for synced, fsyncs, action in _owed(state, plan, pos):
        nstate, _ = machine.step(synced, action)
        if plan.fits(state, nstate, pos):
            return nstate, fsyncs + (action,)
    return None


def _crash(state, doubt: frozenset):
    """BrokerCrash with the disk holding every pending write and no pending removal; returns the state,
    the doubtful copies, (queue, key, was a pending write), whose fate a later observation decides, and
    the actions taken (the fsyncs of those writes, then the crash; the takes before it are left out).

    First the broker takes every frame in flight to it whose effect reaches the disk only through
    copies (``_TAKEN_AT_CRASH``): a taken publish leaves a doubtful copy where an untaken one leaves
    none, a taken settlement leaves a doubtful copy where an untaken one leaves it as it was, and a
    doubtful copy can be found missing wherever the missing one shows. So crashing after these takes
    allows everything crashing before them does, and crash states reached by different takes are one."""
    state = _kept_on_disk(_taken_before_crash(state))
    for conn in state.conns:                # automatic-mode deliveries in flight left memory when sent
        if conn.auto:
            on_disk = {(q, k) for q, k, _ in state.disk}
            records = [(q, k, m) for _, _, q, k, m, p in conn.auto
                       if p and state.queues[q].durable and (q, k) not in on_disk]
            if records:
                state = state._replace(disk=tuple(sorted(set(state.disk).union(records))))
    sending = [(q, queue.sending[3]) for q, queue in enumerate(state.queues) if queue.sending]
    if sending:                             # so did those on their way to their channel (PF-3)
        on_disk = {(q, k) for q, k, _ in state.disk}
        records = [(q, e.key, e.msg) for q, e in sending
                   if e.persistent and state.queues[q].durable and (q, e.key) not in on_disk]
        if records:
            state = state._replace(disk=tuple(sorted(set(state.disk).union(records))))
    pending = faults.pending_disk(state)
    fsyncs = []
    for q, k, m, write in pending:
        if write:
            state = faults.fsync(state, q, k, m, True)
            fsyncs.append(A.DiskFsync(q, k, m, True))
    state = machine.step(state, A.BrokerCrash())[0]
    return state, doubt | frozenset((q, k, write) for q, k, _, write in pending), (*fsyncs, A.BrokerCrash())


def _taken_before_crash(state):
    """The state after the broker took, on every channel, the frames at the head of its FIFO whose
    method is in ``_TAKEN_AT_CRASH`` (each channel in order, TX-7 respected)."""
    progress = True
    while progress:
        progress = False
        for c, conn in enumerate(state.conns):
            if conn.broker_closed:
                continue
            for ch in range(1, len(conn.to_broker)):
                while True:
                    conn = state.conns[c]
                    fifo = conn.to_broker[ch]
                    if not fifo or fifo[0].method not in _TAKEN_AT_CRASH or conn.channels[ch - 1].commit_pending:
                        break
                    state = machine.step(state, A.BrokerTakeFrame(c, ch))[0]
                    progress = True
    return state


def _kept_on_disk(state):
    """The state with a disk record for every persistent copy of a durable queue that left memory since
    the last call (the ghost ``fates``) without being written: the disk may have written it before it
    left and not yet removed it (PC-5, TX-8). The record is a pending removal, so a crash leaves the copy
    doubtful. Adding it after the step is the same as an fsync just before it: nothing else reads it."""
    fates = state.fates
    if not fates:
        return state
    on_disk = {(q, k) for q, k, _ in state.disk}
    queues = state.queues
    records = [(q, k, m) for q, k, fate, m, persistent in fates
               if persistent and fate != FATE_LOST_CRASH and queues[q].durable and (q, k) not in on_disk]
    if not records:
        return state
    return state._replace(disk=tuple(sorted(state.disk + tuple(records))))


# The spent budgets no step the checker takes is guarded by (all but crashes, queue failures and admin),
# each reset to 0.
_UNGUARDED = {name: 0 for name in SPENT if name not in ("crashes", "failures", "admin")}


def _canonical(state, crashes_left: bool):
    """The state as the search keys it: disk records kept for copies that left memory (``_kept_on_disk``),
    no disk at all once the broker is up and no crash can happen (only a restart reads it), and the ghost variables and the
    budgets no step the checker takes is guarded by reset: none of them changes what can be observed."""
    state = _kept_on_disk(state)
    used = state.used
    disk = state.disk if crashes_left else ()
    unguarded = used._replace(**_UNGUARDED)
    if not (state.fates or state.delivered or state.confirmed_msgs or state.tx_groups or state.events
            or unguarded != used or disk is not state.disk):
        return state
    return state._replace(disk=disk, fates=(), delivered=(), confirmed_msgs=(), tx_groups=(), events=0,
                          used=unguarded)


def _droppable(state, doubt: frozenset):
    """Doubtful copies that may be found missing now: any of a queue that a channel's next frame asks a
    basic.get, a purge or a delete of (the reply tells how many are ready). Deliveries decide their own
    (``_deliveries``)."""
    if not doubt:
        return
    getting = set()
    for conn in state.conns:
        for fifo in conn.to_broker:
            if fifo and fifo[0].method in (BASIC_GET, QUEUE_PURGE, QUEUE_DELETE):
                getting.add(fifo[0].queue)
    for q, k, write in sorted(doubt):
        if q in getting:
            yield q, k, write


def _deliveries(state, q: int, doubt: frozenset, plan: _Plan, pos: tuple):
    """BrokerDeliver from queue q with its doubtful head copies decided on the way: for each i, the first
    i doubtful heads are found missing and the next copy is delivered. Returns (state before the
    delivery, doubt left) pairs; a copy delivered is no longer doubtful. When the consumer next in turn
    reads a delivery next, only the i that brings its message to the head is kept (the rest would not
    fit), and none when it reads something else first. Dropping copies changes neither the consumers
    nor their room, so the delivery stays enabled while the queue has a copy (``machine.enabled``)."""
    c, ch, consumer = broker.next_consumer(state, q)
    # A vanished connection's consumer (``faults.vanish``) reads nothing: what it is sent is lost. The first
    # step of a delivery to an automatic-mode consumer under a global limit writes nothing yet (PF-3).
    first_of_two = consumer.no_ack and state.conns[c].channels[ch - 1].global_limit and \
        state.conns[c].status != CONN_GONE
    want = None if c >= len(pos) or first_of_two else plan.next_read(c, pos[c], ch, state.conns[c].to_client[ch])
    if want is not None and want.method != BASIC_DELIVER:
        return []
    out = []
    while True:
        queue = state.queues[q]
        i = storage.next_ready(queue)
        if i < 0:
            return out
        if want is None:
            out.append((state, doubt))
        elif queue.ready[i].msg == want.msg:
            return [(state, doubt)]
        head = next((d for d in doubt if d[0] == q and d[1] == queue.ready[i].key), None)
        if head is None:
            return out
        state, doubt = faults.drop_recovered(state, *head), doubt - {head}


def _settle_doubt(before, after, action, doubt: frozenset) -> frozenset:
    """Doubt left after a step: a copy handed out was there after all, and so was every doubtful copy of a
    queue whose count a basic.get-ok just told the client."""
    if not doubt:
        return doubt
    counted = -1
    if type(action) is A.BrokerTakeFrame:
        frame = before.conns[action.conn].to_broker[action.ch][0]
        if frame.method == BASIC_GET:
            counted = frame.queue
    ready = [{e.key for e in queue.ready} for queue in after.queues]
    keep = frozenset(d for d in doubt if d[0] != counted and d[1] in ready[d[0]])
    return doubt if len(keep) == len(doubt) else keep


def _read(obs: tuple) -> tuple:
    """An observation with its frame read by name (``spec.frames.as_frame``): traces written by hand or
    by tests give frames as plain tuples."""
    return (obs[0], as_frame(obs[1])) + obs[2:] if len(obs) > 1 else obs


def check(observations: dict, config, max_nodes: int = 2_000_000, order=None) -> Verdict:
    """Whether some execution of the spec under ``config`` produces these per-connection observations.

    ``order``, when known, is the real-time order of the observations across connections: one
    connection index per observation (a recording's timestamps give it,
    ``rabbitproof.recording.observations``). A client's write happens before the broker can read it, so the
    real run took its writes, connects and lost connections in that order, and the search tries only that
    interleaving of them (the broker's own steps still go anywhere between them). A read is the exception:
    the time a client parses a frame is no earlier than the spec's ``ClientReceive`` of it, which can be
    any time after the broker wrote it: the bytes may wait in the client's socket buffer, even past a
    broker crash that ends the connection (DU-2: a frame written before the crash still reaches the
    client). So a read may be taken ahead of its place in the order (``_Order``)."""
    for c in sorted(observations):
        if not 0 <= c < config.connections:
            raise ValueError(f"observations name connection c{c}, the configuration has {config.connections}")
    obs = tuple(tuple(_read(o) for o in observations.get(c, ())) for c in range(config.connections))
    total = sum(len(o) for o in obs)
    if order is not None:
        order = tuple(order)
        if sorted(order) != sorted(c for c in range(len(obs)) for _ in obs[c]):
            raise ValueError("order must name each connection once per observation of it")
        order = _Order(order, obs)
    plan = _Plan(obs, config.channels)
    # An entry is a node and its trail: (the actions into it, the trail of the node it came from), so an
    # acceptance can name the path of spec actions that explains the observations (``Verdict.path``).
    stack = [(s, (0,) * len(obs), frozenset(), None) for s in machine.initial_states(config)]
    seen = set()
    best = -1
    best_nodes: list = []
    explored = 0
    while stack:
        state, pos, doubt, trail = stack.pop()
        state = _canonical(state, not state.broker_up or state.used.crashes < config.crashes)
        node = (state, pos, doubt)
        if node in seen:
            continue
        seen.add(node)
        explored += 1
        progress = sum(pos)
        if progress == total:
            return Verdict(ACCEPTED, total, total, explored=explored, path=_path(trail))
        if progress > best:
            best, best_nodes = progress, []
        if progress == best and len(best_nodes) < 200:
            best_nodes.append(node)
        if explored >= max_nodes:
            return Verdict(INCONCLUSIVE, best, total, explored=explored,
                           reason=f"the search gave up after {max_nodes} spec states")
        eligible = range(len(obs)) if order is None else order.eligible(pos)
        forced = _forced_client_step(state, pos, doubt, obs, plan, state.used.crashes < config.crashes,
                                     eligible, config.channels_open)
        if forced is None:
            owed = _forced_owed(state, plan, pos)
            forced = None if owed is None else (owed[0], pos, doubt, owed[1])
        if forced is not None:
            stack.append((*forced[:3], (forced[3], trail)))
            continue
        pushed = len(stack)
        _push_choices(stack, state, pos, doubt, obs, config, plan, eligible)
        for i in range(pushed, len(stack)):
            nstate, npos, ndoubt, actions = stack[i]
            stack[i] = (nstate, npos, ndoubt, (actions, trail))
    state, pos, doubt = best_nodes[0]
    c = next(i for i in range(len(obs)) if pos[i] < len(obs[i])) if order is None else order.eligible(pos)[0]
    return Verdict(REJECTED, best, total, c, pos[c], obs[c][pos[c]],
                   _allowed([n for n in best_nodes if n[1] == pos], c, config), explored)


def _path(trail) -> tuple:
    """The spec actions of a trail (``check``), first to last."""
    steps = []
    while trail is not None:
        actions, trail = trail
        steps.extend(reversed(actions))
    return tuple(reversed(steps))


class _Order:
    """A real-time order of the observations (``check``): which connections may take their next
    observation at a search position ``pos``. The next observation in the order may; so may any
    connection whose next observation is a read (a frame read may have been received earlier)."""

    def __init__(self, order: tuple, obs: tuple) -> None:
        self.obs = obs
        self.index: list = [[] for _ in obs]       # [c][k] -> where c's k-th observation is in the order
        for i, c in enumerate(order):
            self.index[c].append(i)

    def eligible(self, pos: tuple) -> tuple:
        """The connection whose next observation comes first in the order, then the others that read next."""
        obs = self.obs
        left = [c for c in range(len(obs)) if pos[c] < len(obs[c])]
        if not left:
            return ()
        first = min(left, key=lambda c: self.index[c][pos[c]])
        return (first,) + tuple(c for c in left if c != first and obs[c][pos[c]][0] == "received")


def _push_choices(stack, state, pos, doubt, obs, config, plan: _Plan, eligible) -> None:
    """Push every way on from a node where no step is forced (every client waits), each as (state,
    positions, doubt, the actions taken). What is pushed last is tried first: a crash where one is useful, then connects, then broker steps, then lost
    connections (a crash may yet explain them) while a crash can still happen."""
    crashes_left = state.used.crashes < config.crashes
    lost, connects = [], []
    for c in eligible:                      # every connection, or the one a real-time order names
        if pos[c] < len(obs[c]):
            applied = _apply_client(state, c, obs[c][pos[c]], config.channels_open)
            if applied is not None:
                child = (applied[0], pos[:c] + (pos[c] + 1,) + pos[c + 1:], doubt, applied[1])
                (lost if obs[c][pos[c]][0] == "lost" and crashes_left else connects).append(child)
    stack.extend(lost)
    _push_internal(stack, state, pos, doubt, config, plan)
    stack.extend(connects)
    if state.broker_up and crashes_left and plan.crash_useful(state, pos):
        crashed, ndoubt, actions = _crash(state, doubt)
        stack.append((crashed, pos, ndoubt, actions))


def _forced_client_step(state, pos: tuple, doubt: frozenset, obs: tuple, plan: _Plan,
                        crashes_left: bool, eligible, channels_open: bool = True):
    """The node after the first client step of ``_forced``, and the actions taken, when there is one:
    then it is the only step tried (partial-order reduction). Exact: such a step stays possible whatever else happens until it
    is taken, it commutes with every broker step and every other connection's step, and every
    execution that explains the trace takes it; so some explanation takes it first."""
    for c in eligible:
        seq = obs[c]
        p = pos[c]
        if p < len(seq) and _forced(state.conns[c], seq[p], crashes_left and not plan.reads_ahead[c][p]):
            applied = _apply_client(state, c, seq[p], channels_open)
            if applied is not None:
                return applied[0], pos[:c] + (p + 1,) + pos[c + 1:], doubt, applied[1]
    return None


def _forced(conn, ob: tuple, may_crash_first: bool) -> bool:
    """Whether the client step of observation ``ob`` is one the search takes as soon as it can
    (``may_crash_first``: a crash may still come before it, which drops this connection):
    - receiving: the client reads a frame in flight (``network.read_from``) from FIFOs the broker only
      appends to, and no crash is tried while a live connection still reads (``_Plan.crash_useful``);
    - sending: the client appends to a FIFO the broker only takes the head of. A crash allows at least
      as much after a send as before it (``_crash``), except after a publish, which names the next
      message (``Conn.published``) where a publish into a connection already down does not; so a
      publish a crash may come before is searched both ways;
    - a lost connection already down (nothing happens);
    - connecting again once no crash can happen: no broker step touches a connection that is down.
    A lost connection still up (which a crash may explain instead) and a connect before a crash
    decide between explanations, and are searched."""
    kind = ob[0]
    if kind == "received":
        return True
    if kind == "sent":
        return not (may_crash_first and ob[1].method == BASIC_PUBLISH and conn.status == CONN_UP)
    if kind == "quiet":
        return True
    if kind == "lost":
        return conn.status == CONN_DOWN
    return kind == "connect" and not may_crash_first


def _push_internal(stack, state, pos, doubt, config, plan: _Plan | None) -> None:
    """Push the unobserved steps worth trying from this node (see the module docstring), each as (state,
    positions, doubt, the action taken). A copy a crash left doubtful and that is found missing is the
    crash's outcome, no action of its own; a RabbitMQ outcome of a take is that BrokerTakeFrame. Without
    a plan (the diagnosis of a rejection), every enabled step is pushed as the spec has it."""
    if plan is None:
        for action in machine.enabled(state, config):
            if isinstance(action, INTERNAL):
                stack.append((machine.step(state, action)[0], pos, doubt, (action,)))
        return
    # The stack is last in, first out: what is pushed last is tried first. A real broker takes frames
    # and delivers promptly, so those go last; which is tried first changes speed, never the verdict.
    if state.broker_up:
        for q, k, write in _droppable(state, doubt):
            stack.append((faults.drop_recovered(state, q, k, write), pos, doubt - {(q, k, write)}, ()))
        for nstate in _closed_before_the_connection(state):
            stack.append((nstate, pos, _settle_doubt(state, nstate, None, doubt), ()))
    for action in reversed(machine.enabled(state, config)):
        kind = type(action)
        if kind is A.BrokerDeliver and doubt and not state.queues[action.queue].sending:
            for before, left in _deliveries(state, action.queue, doubt, plan, pos):
                nstate, _ = machine.step(before, action)
                if plan.fits(state, nstate, pos):
                    stack.append((nstate, pos, _settle_doubt(before, nstate, action, left), (action,)))
        elif kind in _FREE:
            nstate, _ = machine.step(state, action)
            if plan.fits(state, nstate, pos):
                stack.append((nstate, pos, _settle_doubt(state, nstate, action, doubt), (action,)))
            if kind is A.BrokerTakeFrame:
                for nstate in _taken_as_rabbitmq_may(state, action, plan):
                    if plan.fits(state, nstate, pos):
                        stack.append((nstate, pos, _settle_doubt(state, nstate, action, doubt), (action,)))
        elif kind is A.BrokerRestart:
            stack.append((machine.step(state, action)[0], pos, doubt, (action,)))


def _closed_before_the_connection(state):
    """A channel closed ahead of its connection: when a client's connection.close is in flight, RabbitMQ
    3.10.8's reader stops every channel process of the connection at once, so a channel with nothing
    more to take closes (RQ-4: its deliveries go back to their queues) while another channel still
    handles the frames the client sent before the close (seen in generated programs: a basic.get sent
    with the connection.close got a message another channel of the connection held, redelivered). The
    spec closes the channels when it takes the connection.close, after every frame in flight."""
    for c, conn in enumerate(state.conns):
        if conn.broker_closed or conn.status == CONN_DOWN or not conn.to_broker[0] or \
                conn.to_broker[0][0].method != CONNECTION_CLOSE:
            continue
        for ch, channel in enumerate(conn.channels, start=1):
            if channel.status == CH_OPEN and not conn.to_broker[ch] and (channel.unacked or channel.consumers):
                yield storage.close_channel(state, c, ch, CH_CLOSED)


def _taken_as_rabbitmq_may(state, action, plan: _Plan):
    """The other outcomes of a BrokerTakeFrame that RabbitMQ 3.10.8's reader and channel processes,
    working one after the other, allow where the spec takes a frame in one step (trace checking only:
    the explorer keeps the spec's single outcome)."""
    yield from _taken_before_numbering(state, action)
    yield from _close_ok_overtaken(state, action)
    yield from _deleted_before_enqueued(state, action, plan)


def _deleted_before_enqueued(state, action, plan: _Plan):
    """A queue.delete that comes between a publish's routing and its enqueueing: RabbitMQ 3.10.8's channel
    routes a publish (so a mandatory one is not returned) and then sends the copy to the queue's process,
    so a delete from another channel can reach the queue first; the copies still on their way are not
    counted by delete-ok (nor by if_empty) and are lost with the queue (seen in generated programs: a
    mandatory publish on one channel and a delete on another in one write: delete-ok one short, no
    return). The copies so taken are the queue's newest, never delivered (RT-2, ER-3)."""
    c, ch = action.conn, action.ch
    conn = state.conns[c]
    fifo = conn.to_broker[ch]
    if not fifo or fifo[0].method != QUEUE_DELETE or conn.broker_closed or conn.channels[ch - 1].status != CH_OPEN:
        return
    q = fifo[0].queue
    if q >= len(state.queues) or not state.queues[q].exists:
        return
    queue = state.queues[q]
    j = 0
    while j < len(queue.ready) and not queue.ready[-1 - j].redelivered and \
            plan.published_on.get(queue.ready[-1 - j].msg) != (c, ch):
        j += 1
    for n in range(1, j + 1):
        away = queue.ready[-n:]
        taken, _ = machine.step(with_queue(state, q, queue._replace(ready=queue.ready[:-n])), action)
        if taken.queues[q].exists:
            continue                                # refused: the copies reach the queue after all
        taken = storage.add_fates(taken, ((q, e.key, FATE_QUEUE_DELETED, e.msg, e.persistent) for e in away))
        yield storage.forget_waits(taken, ((q, e.key) for e in away))


def _close_ok_overtaken(state, action):
    """A channel.close-ok on an open channel is 503 (ER-1), raised by the channel process; RabbitMQ's
    reader forgets the channel as it passes the close-ok on, so the next frame the client sent on that
    channel may meet the reader's 504 `expected 'channel.open'` first (seen once in 100 generated
    programs, docs/explanation/conformance-suite.md). Either is the connection error."""
    c, ch = action.conn, action.ch
    conn = state.conns[c]
    fifo = conn.to_broker[ch]
    if len(fifo) < 2 or fifo[0].method != CHANNEL_CLOSE_OK or fifo[1].method == CHANNEL_OPEN or conn.broker_closed or \
            conn.channels[ch - 1].status != CH_OPEN:
        return
    popped = with_conn(state, c, conn_to_broker(conn, network.pop(network.pop(conn.to_broker, ch), ch)))
    yield broker.connection_error(popped, c, CHANNEL_ERROR, R_EXPECTED_OPEN, 0)


def _taken_before_numbering(state, action):
    """BrokerTakeFrame as RabbitMQ 3.10.8's channel process may do it while the last k deliveries of the
    channel, dispatched by their queues, still wait in its mailbox behind the frame (DT-1, RabbitMQ's
    side): the spec numbers a delivery in the step where its queue dispatches it, RabbitMQ's channel
    only when it handles the queue's message, after the client's frames already waiting. So the frame
    is taken as if those deliveries were not yet the channel's (a settlement naming one of their tags
    is an unknown tag, 406; ``ack(0, multiple)`` settles the others; a basic.get-ok takes the next tag),
    then the channel numbers them: with the next tags after what the frame wrote, or, when the frame
    closed the channel or the connection, they are written as they were (read after the channel.close,
    ``network.read_from``, or never) and requeued (RQ-4) when manual-mode. The deliveries are those the
    client has not read: the last frames in flight on the channel, with the channel's last tags
    (measured: publish or consume of a ready message + a settlement of the tag its delivery will get, in
    one write: 406 unknown delivery tag, then the delivery after the channel.close, 100 of 100); an
    automatic-mode one too (AM-2: it holds no tag to settle, but a frame may still overtake it: consume
    with no-ack of a queue with a ready message + a basic.get of it, in one write: get-empty, then
    consume-ok and the delivery; seen in 1,000 generated programs against RabbitMQ 3.10.8)."""
    c, ch = action.conn, action.ch
    conn = state.conns[c]
    channel = conn.channels[ch - 1]
    fifo = conn.to_client[ch]
    if channel.status != CH_OPEN or not fifo or fifo[-1].method != BASIC_DELIVER or conn.broker_closed:
        return
    by_tag = {u.tag: u for u in channel.unacked}
    k = 0
    while k < len(fifo) and fifo[-1 - k].method == BASIC_DELIVER:
        k += 1
    for n in range(1, k + 1):
        frames = fifo[-n:]
        if any(f.delivery_tag != channel.next_tag - n + i for i, f in enumerate(frames)):
            break                                   # not the channel's last tags: numbered before
        hidden = tuple(by_tag[f.delivery_tag] for f in frames if f.delivery_tag in by_tag)    # manual-mode
        before = channel._replace(unacked=tuple(u for u in channel.unacked if u not in hidden),
                                  next_tag=channel.next_tag - n)
        start = with_conn(state, c, conn_to_client(conn, conn.to_client[:ch] + (fifo[:-n],) + conn.to_client[ch + 1:]))
        taken, _ = machine.step(with_channel(start, c, ch, before), action)
        tconn = taken.conns[c]
        after = tconn.channels[ch - 1]
        out = tconn.to_client[ch]
        if after.status == CH_OPEN and not tconn.broker_closed:
            tag = after.next_tag
            retag = {f.delivery_tag: tag + i for i, f in enumerate(frames)}
            numbered = tuple(u._replace(tag=retag[u.tag]) for u in hidden)
            out = out + tuple(f._replace(delivery_tag=tag + i) for i, f in enumerate(frames))
            taken = with_channel(taken, c, ch, after._replace(next_tag=tag + n, unacked=after.unacked + numbered))
        else:
            out = out[:len(fifo) - n] + frames + out[len(fifo) - n:]
            taken = storage.requeue(taken, hidden)
        tconn = taken.conns[c]
        yield with_conn(taken, c, conn_to_client(tconn, tconn.to_client[:ch] + (out,) + tconn.to_client[ch + 1:]))


def _allowed(nodes, c: int, config, limit: int = 8, budget: int = 20_000) -> list:
    """What the client of connection c could have observed next from these furthest search nodes: what
    the broker could have in flight to it after any unobserved steps, and whether it could send or connect. The search behind it is
    the spec's own, unpruned, and bounded by ``budget`` states (a diagnosis, not a verdict)."""
    stack = list(nodes)
    visited = set()
    reached = []
    while stack and len(visited) < budget:
        node = stack.pop()
        key = (hash(node[0]), node[1], node[2])
        if key in visited:
            continue
        visited.add(key)
        reached.append(node)
        _push_internal(stack, node[0], node[1], node[2], config, None)
    seen = []
    for state, *_ in reached:
        conn = state.conns[c]
        for ch in network.movable(conn.to_client):
            text = f"received {frame_text(conn.to_client[ch][0])}"
            if text not in seen:
                seen.append(text)
        if conn.status == CONN_UP and "sent (any client frame)" not in seen:
            seen.append("sent (any client frame)")
        if conn.status == CONN_DOWN and "connect" not in seen:
            seen.append("connect")
        if len(seen) >= limit:
            break
    rank = {"sent (any client frame)": 1, "connect": 2}
    return sorted(seen, key=lambda text: rank.get(text, 0))
