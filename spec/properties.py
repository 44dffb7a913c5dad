"""Properties of the model, each citing the rules it checks (rabbitproof/rules.toml; the registry is REGISTRY).

- always: invariants, split into named conjuncts; every reachable state must satisfy them.
- sometimes: reachability; each guards an invariant against vacuity (some state must satisfy it).
- hazard: what the rules warn does NOT hold; exploration must reach a state that falsifies it.

Liveness properties (``eventually``: what must happen in every fair execution) are a registry of their
own, ``LIVENESS`` (spec.properties_api.Liveness), judged on the explored graph under the machine's
fairness (spec.fairness): a fair cycle, or an end state, where the bad condition holds for ever is the
counterexample.

Invariants registered with ``helper=True`` are proof helpers (spec.properties_api): each makes another
invariant inductive for the Z3 proofs (proofs/), ``make verify`` checks them on every standard
configuration, and a user's run leaves them out unless it names them (``HELPERS``).
"""
from __future__ import annotations

from typing import Any

from . import network
from .faults import live_copies
from .frames import (
    BASIC_ACK, BASIC_CANCEL, BASIC_DELIVER, BASIC_GET_EMPTY, BASIC_GET_OK, BASIC_NACK, BASIC_PUBLISH,
    BASIC_RETURN, CHANNEL_CLOSE, CHANNEL_CLOSE_OK, CHANNEL_OPEN, CHANNEL_OPEN_OK, CONNECTION_CLOSE,
    CONFIRM_SELECT, CONNECTION_CLOSE_OK, MSG_STRIDE, R_COMMIT_PENDING,
    R_CONFIRM_TO_TX, R_EXCLUSIVE_USE, R_IMMEDIATE, R_IN_USE, R_LOCKED,
    R_NO_EXCHANGE, R_NOT_EMPTY, R_NOT_TX, R_PREFETCH_SIZE, R_RECOVER_NO_REQUEUE, R_SECOND_OPEN,
    R_TAG_REUSED, R_TX_TO_CONFIRM, R_UNIMPLEMENTED, R_UNKNOWN_TAG, TX_SELECT,
)
from .properties_api import Liveness, Property
from .state import (
    C_CLOSED, C_OPEN, C_OPENING, CH_CLOSED, CH_CLOSING, CH_OPEN, CONN_DOWN, CONN_GONE, CONN_UP, EV_CHANNEL_REQUEUE,
    EV_COMMIT_PUBLISHED, EV_COMMIT_WITH_ACKS,
    EV_CONFIRM_MULTIPLE, EV_MULTIPLE_ACK, EV_RECOVERED, EV_REQUEUE_TWICE, EV_ROLLBACK_KEPT,
    EV_TX_RETURN, FATE_ACKED, FATE_AUTO, FATE_DEAD_LETTERED, FATE_LOST_AUTOACK, FATE_LOST_CRASH, FATE_PURGED,
    MODE_CONFIRM, MODE_NONE, MODE_TX, State,
)

MAX_DELIVERY_TAG = 9223372036854775807

REGISTRY: dict[str, Property] = {}


def _register(kind: str, *rules: str, helper: bool = False):
    def wrap(fn):
        REGISTRY[fn.__name__] = Property(fn.__name__, kind, rules, fn, (fn.__doc__ or "").strip(), helper)
        return fn
    return wrap


def always(*rules: str, helper: bool = False):
    """Register an invariant; ``helper=True`` for a proof helper (made for proofs/, not checked by default)."""
    return _register("always", *rules, helper=helper)


def sometimes(*rules: str):
    """Register a reachability property."""
    return _register("sometimes", *rules)


def hazard(*rules: str):
    """Register a hazard: a property exploration must falsify."""
    return _register("hazard", *rules)


def get(name: str) -> Property:
    """The property called ``name``; an unknown name is a KeyError whose message lists the known ones."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown property {name!r} (known: {', '.join(REGISTRY)})") from None


def _dead_letter_targets(state: State) -> set:
    return {queue.dead_letter - 1 for queue in state.queues if queue.dead_letter}


def client_in_step(view) -> bool:
    """The client's view of a channel is of the broker's channel of that number, when the broker holds
    it open: the client holds it open too (its channel.open was answered). What the client saw is
    compared with what the broker did only then. A client that sends channel.open for a channel it
    holds open, or channel.close-ok before it has read the broker's channel.close (frames out of turn,
    protocol errors), starts a view of a channel the broker has not opened yet, or lets the broker
    open a new channel while frames of the old one are still in flight to it: until it reads the
    channel.open-ok, its view and the broker's channel are of different channels
    (``tests/test_closed_channel.py`` shows both)."""
    return view.status == C_OPEN


# Performance: the predicates below run on every reachable state, so they exit early when the
# collections they inspect are empty and use plain loops (no generators) in their inner loops.


# ---------------------------------------------------------------- invariants

@always("DT-1", "DT-2")
def delivery_tags_increase(state: State) -> bool:
    """Per channel, tags are issued 1, 2, 3, ... and never reused: outstanding ones are below the next
    tag and increasing, and the client reads tags in increasing order (while it holds the channel open:
    ``client_in_step``)."""
    for conn in state.conns:
        for ch, channel in enumerate(conn.channels, start=1):
            last = 0
            for u in channel.unacked:
                if u.tag <= last or u.tag >= channel.next_tag:
                    return False
                last = u.tag
            view = conn.clients[ch - 1]
            if channel.status != CH_OPEN or not client_in_step(view):
                continue
            last = view.last_tag
            for frame in conn.to_client[ch]:
                if frame.method in (BASIC_DELIVER, BASIC_GET_OK):
                    tag = frame.delivery_tag
                    if tag <= last or tag >= channel.next_tag:
                        return False
                    last = tag
    return True


@always("DT-3")
def delivery_tags_in_range(state: State) -> bool:
    """Delivery tags stay within 64-bit signed range."""
    for conn in state.conns:
        for channel in conn.channels:
            if channel.next_tag - 1 > MAX_DELIVERY_TAG:
                return False
    return True


@always("AM-2", "AM-3", "ACK-1", "ACK-6", "RQ-4", "DU-2", "ER-3")
def copies_conserved(state: State) -> bool:
    """Every copy a queue ever took is in at most one live place (ready, outstanding on one channel,
    held by an open transaction, in flight in automatic mode), and in one unless it is gone for good
    with a recorded fate (or waits on disk while the broker is down)."""
    pairs = []                      # (queue, key) of every live place, one entry per place
    for q, queue in enumerate(state.queues):
        for e in queue.ready:
            pairs.append((q, e.key))
        if queue.sending:           # on its way to its channel in automatic mode (broker.deliver)
            pairs.append((q, queue.sending[3].key))
    for conn in state.conns:
        for a in conn.auto:
            pairs.append((a[2], a[3]))
        for channel in conn.channels:
            for u in channel.unacked:
                pairs.append((u.queue, u.key))
            for _, u in channel.tx_settles:
                pairs.append((u.queue, u.key))
    places = set(pairs)
    if len(places) != len(pairs):   # some copy is in two places
        return False
    fated: set | None = None        # built only when some copy is not live
    stored: Any = None
    for q, queue in enumerate(state.queues):
        for key in range(1, queue.enqueued + 1):
            pair = (q, key)
            if pair in places:
                continue
            if fated is None:
                fated = {(f[0], f[1]) for f in state.fates}
                stored = {(r[0], r[1]) for r in state.disk} if not state.broker_up else ()
            if pair not in fated and pair not in stored:
                return False
    return True


@always("RQ-1")
def queue_in_publication_order(state: State) -> bool:
    """Every queue holds its ready copies in enqueue order, requeued ones included."""
    for queue in state.queues:
        last = 0
        for e in queue.ready:
            if e.key <= last:
                return False
            last = e.key
    return True


@always("RQ-2", "DT-2")
def redelivered_flag_set(state: State) -> bool:
    """A ready copy that was delivered before carries redelivered=true."""
    if not state.delivered:
        return True
    delivered: set | None = None                # built only when a ready copy is not marked redelivered
    for q, queue in enumerate(state.queues):
        for e in queue.ready:
            if not e.redelivered:
                if delivered is None:
                    delivered = set(state.delivered)
                if (q, e.key) in delivered:
                    return False
    return True


@always("PF-1", "PF-2", "PF-3", "PF-4", "PF-5", "AM-2", "TX-3")
def prefetch_respected(state: State) -> bool:
    """No manual consumer holds more than its own limit; a channel holds no more consumer deliveries
    than its global limit, or than it held when that limit was set (PF-5). basic.get is not counted.
    Deliveries a transaction holds back are still held (TX-3). The global limit may be exceeded by
    the held-back deliveries that it did not count when it was set from none (``qos_uncounted``):
    RabbitMQ 3.10.8 counts them off at the commit all the same, and its channel then holds that
    many more than its limit (measured: docs/reference/differences.md, "Held-back settlements and prefetch")."""
    for conn in state.conns:
        for channel in conn.channels:
            if not channel.consumers and not channel.global_limit:
                continue            # nothing to hold the counts against
            counts: dict = {}
            total = 0
            for u in channel.unacked + tuple(u for _, u in channel.tx_settles):
                if u.consumer:
                    counts[u.consumer] = counts.get(u.consumer, 0) + 1
                    total += 1
            for consumer in channel.consumers:
                if consumer.no_ack and counts.get(consumer.tag):
                    return False
                if consumer.limit and counts.get(consumer.tag, 0) > consumer.limit:
                    return False
            if channel.global_limit and \
                    total > max(channel.global_limit + channel.qos_uncounted, channel.qos_excess):
                return False
    return True


@always("PC-1", "PC-2", "PC-3")
def confirms_exactly_once(state: State) -> bool:
    """On a confirm channel, publishes are numbered 1..n and each is either still unconfirmed or
    confirmed once; what the client saw confirmed the broker did confirm (while the client holds the
    channel open: ``client_in_step``)."""
    for conn in state.conns:
        for ch, channel in enumerate(conn.channels, start=1):
            view = conn.clients[ch - 1]
            in_step = channel.status == CH_OPEN and not conn.broker_closed and client_in_step(view)
            if not channel.publish_seq and not channel.unconfirmed and not channel.confirmed:
                # Nothing published in confirm mode: the client must have seen no confirm either.
                if in_step and (view.confirms or view.pub_seq < 0):
                    return False
                continue
            pending = [p.seq for p in channel.unconfirmed]
            if set(pending) & set(channel.confirmed):
                return False
            if sorted(pending + list(channel.confirmed)) != list(range(1, channel.publish_seq + 1)):
                return False
            if in_step and (not set(view.confirms) <= set(channel.confirmed) or view.pub_seq < channel.publish_seq):
                return False
    return True


@always("PC-5", "PC-4")
def confirmed_only_when_on_disk(state: State) -> bool:
    """A persistent message confirmed with basic.ack has every live copy in a durable queue on disk (a
    copy outstanding from a deleted queue is in none, even once a queue of its name is declared again)."""
    confirmed = set(state.confirmed_msgs)
    if not confirmed:
        return True
    on_disk = {(r[0], r[1]) for r in state.disk}
    skip = _dead_letter_targets(state)
    for (q, key), (msg, persistent) in live_copies(state).items():
        if msg in confirmed and persistent and state.queues[q].durable and key > state.queues[q].born \
                and q not in skip and (q, key) not in on_disk:
            return False
    return True


@always("PC-10", "DU-2")
def confirmed_survives_crash(state: State) -> bool:
    """No persistent message confirmed with basic.ack and routed to a durable queue is lost in a crash (a
    copy outstanding from a deleted queue is in none, even once a queue of its name is declared again)."""
    if not state.fates or not state.confirmed_msgs:
        return True
    confirmed = set(state.confirmed_msgs)
    skip = _dead_letter_targets(state)
    queues = state.queues
    return not any(f[2] == FATE_LOST_CRASH and f[4] and f[3] in confirmed and queues[f[0]].durable
                   and f[1] > queues[f[0]].born and f[0] not in skip for f in state.fates)


@always("TX-2", "TX-3", "TX-4")
def tx_effects_invisible(state: State) -> bool:
    """Held-back publishes are in no queue and in flight to no one; held-back settlements have not
    taken effect: their copies are still held and have no fate in this life (a fate recorded before a
    restart brought the copy back, TX-8, is of an earlier one: ``State.revived``)."""
    held_back = set()
    settles = False
    for conn in state.conns:
        for channel in conn.channels:
            for pub in channel.tx_pubs:
                held_back.add(pub[4])
            if channel.tx_settles:
                settles = True
    if held_back:
        if any(e.msg in held_back for queue in state.queues for e in queue.ready):
            return False
        if any(f[3] in held_back for f in state.fates):
            return False
    if not settles or not state.fates:
        return True
    fated = {(f[0], f[1]) for f in state.fates}
    fated.difference_update(state.revived)
    if not fated:
        return True
    for conn in state.conns:
        for channel in conn.channels:
            for _, u in channel.tx_settles:
                if (u.queue, u.key) in fated:
                    return False
    return True


@always("TX-3", "TX-4", "AM-2", helper=True)
def live_copies_unfated(state: State) -> bool:
    """No live copy (ready, outstanding, held back by an open transaction) is gone in this life: it
    has no fate but of an earlier life (``State.revived``) and is not in flight in automatic mode;
    and every copy gone in this life has a key its queue issued (at most its count). The helper that
    makes the second half of tx_effects_invisible inductive (proofs/)."""
    if not state.fates and not any(conn.auto for conn in state.conns) and not any(q.sending for q in state.queues):
        return True
    fated = {(f[0], f[1]) for f in state.fates}
    fated.difference_update(state.revived)
    for conn in state.conns:
        fated.update((d[2], d[3]) for d in conn.auto)
    fated.update((q, queue.sending[3].key) for q, queue in enumerate(state.queues) if queue.sending)
    queues = state.queues
    if any(key > queues[q].enqueued for q, key in fated):
        return False
    for q, queue in enumerate(queues):
        if any((q, e.key) in fated for e in queue.ready):
            return False
    for conn in state.conns:
        for channel in conn.channels:
            if any((u.queue, u.key) in fated for u in channel.unacked):
                return False
            if any((u.queue, u.key) in fated for _, u in channel.tx_settles):
                return False
    return True


@always("PC-8", "TX-1")
def confirm_and_tx_exclusive(state: State) -> bool:
    """A tx channel has no publish numbering; a confirm channel holds nothing back."""
    for conn in state.conns:
        for channel in conn.channels:
            if channel.mode == MODE_TX and (channel.unconfirmed or channel.confirmed or channel.publish_seq):
                return False
            if channel.mode == MODE_CONFIRM and (channel.tx_pubs or channel.tx_settles or channel.commit_pending):
                return False
    return True


def sent_after_close(fifo) -> bool:
    """Frames in flight to the client on one channel: a frame other than channel.close-ok follows the
    last channel.close among them."""
    last = max((i for i, frame in enumerate(fifo) if frame.method == CHANNEL_CLOSE), default=None)
    return last is not None and any(frame.method != CHANNEL_CLOSE_OK for frame in fifo[last + 1:])


def delivery_tag(frame: Any) -> int | None:
    """The delivery tag of a basic.deliver or basic.get-ok, else None."""
    return frame.delivery_tag if frame.method in (BASIC_DELIVER, BASIC_GET_OK) else None


def _last_open_ok(fifo) -> int | None:
    """The position of the last channel.open-ok in flight to the client on one channel, if any: the
    frames behind it (all of them without one) are the broker's channel's of that number now."""
    return max((i for i, frame in enumerate(fifo) if frame.method == CHANNEL_OPEN_OK), default=None)


def open_ok_in_flight(fifo) -> tuple[bool, bool, tuple]:
    """Of the frames in flight to the client on one channel: whether a channel.open-ok is among them,
    whether frames are ahead of the last one (an older channel's), and the delivery tags behind it
    (of every delivery when there is none), in the order they travel: the deliveries of the broker's
    channel of that number now (the Z3 model's fields ``ook``, ``old`` and ``dif``)."""
    last = _last_open_ok(fifo)
    start = 0 if last is None else last + 1
    tags = tuple(t for t in map(delivery_tag, fifo[start:]) if t is not None)
    return last is not None, bool(last), tags


def confirms_in_flight(fifo) -> tuple[frozenset, int]:
    """Of the confirms (basic.ack, basic.nack) in flight to the client on one channel behind the last
    channel.open-ok (all of them when there is none): the numbers of those that are not multiple, and
    the highest number of those that are (0: none) (the Z3 model's fields ``cif`` and ``cmx``)."""
    last = _last_open_ok(fifo)
    single, top = set(), 0
    for frame in fifo[0 if last is None else last + 1:]:
        if frame.method in (BASIC_ACK, BASIC_NACK):
            if frame.multiple:
                top = max(top, frame.delivery_tag)
            else:
                single.add(frame.delivery_tag)
    return frozenset(single), top


def selects_in_flight(fifo) -> tuple[int, int, int]:
    """Of the frames in flight to the broker on one channel: the first confirm.select or tx.select
    among them (0: none), how many basic.publish frames are behind it when it is confirm.select (else
    0), and how many are in flight at all (the Z3 model's fields ``fsel``, ``nbh`` and ``npb``)."""
    first = next((i for i, frame in enumerate(fifo) if frame.method in (CONFIRM_SELECT, TX_SELECT)), None)
    if first is None:
        return 0, 0, sum(1 for frame in fifo if frame.method == BASIC_PUBLISH)
    select = fifo[first][0]
    behind = sum(1 for frame in fifo[first + 1:] if frame.method == BASIC_PUBLISH) if select == CONFIRM_SELECT else 0
    return select, behind, sum(1 for frame in fifo if frame.method == BASIC_PUBLISH)


def numbered_in_flight(selects: tuple[int, int, int], mode: int) -> int:
    """How many basic.publish frames in flight to the broker on one channel (``selects``: what
    selects_in_flight says of them) its channel, in ``mode``, will number if it takes them while open:
    every one in confirm mode; in neither mode those behind the first select when that is
    confirm.select (PC-1, PC-8)."""
    _, behind, total = selects
    return total if mode == MODE_CONFIRM else behind if mode == MODE_NONE else 0


def opens_in_flight(fifo) -> tuple[bool, bool, bool, bool]:
    """Of the frames in flight to the broker on one channel: whether a channel.open is among them,
    whether a frame other than close-ok is ahead of the first one, whether a frame other than close-ok
    and channel.open is behind it, and whether such a frame is in flight at all (the Z3 model's fields
    ``tbo``, ``pre``, ``post`` and ``tbx``; both middle ones are false when no channel.open is)."""
    first = next((i for i, frame in enumerate(fifo) if frame.method == CHANNEL_OPEN), None)
    other = any(frame.method != CHANNEL_OPEN and frame.method != CHANNEL_CLOSE_OK for frame in fifo)
    if first is None:
        return False, False, False, other
    return (True, any(frame.method != CHANNEL_CLOSE_OK for frame in fifo[:first]),
            any(frame.method != CHANNEL_OPEN and frame.method != CHANNEL_CLOSE_OK for frame in fifo[first + 1:]), other)


@always("ER-1", "DT-1", helper=True)
def channel_lifecycle(state: State) -> bool:
    """How channel.open and its open-ok travel (the helper that proves the client-side conjunct of
    delivery_tags_increase for every size: proofs/). A channel the broker has closed its end of is
    closed. Otherwise, per channel:
    - at most one channel.open-ok is in flight to the client; while one is, the broker's channel is
      open, the client waits (its view is opening, or closed after it read an older channel.close),
      and nothing but close-ok and channel.open is in flight to the broker (the client sent nothing
      else since its channel.open), so the broker's channel cannot close before the client reads it;
    - when the broker may open the channel for the first channel.open in flight to it (its channel is
      not open, or frames ahead of that channel.open may close it), the client waits too, and sent
      nothing but close-ok and channel.open after it;
    - the deliveries behind the open-ok (all of them, without one) travel in increasing tag order.
    So the client's view is open only once every frame of an older channel is read, and the broker
    never opens a channel while the client holds it open."""
    for conn in state.conns:
        for ch, channel in enumerate(conn.channels, start=1):
            if conn.broker_closed:
                if channel.status != CH_CLOSED:
                    return False
                continue
            to_client, to_broker = conn.to_client[ch], conn.to_broker[ch]
            if not to_client and not to_broker:
                continue
            oks = sum(1 for frame in to_client if frame.method == CHANNEL_OPEN_OK)
            waiting = conn.clients[ch - 1].status in (C_OPENING, C_CLOSED)
            opens, pre, post, other = opens_in_flight(to_broker)
            if oks > 1 or oks and (channel.status != CH_OPEN or not waiting or other):
                return False
            if opens and (channel.status != CH_OPEN or pre) and (not waiting or post):
                return False
            tags = open_ok_in_flight(to_client)[2]
            for i in range(1, len(tags)):
                if tags[i] <= tags[i - 1]:
                    return False
    return True


@always("PC-1", "PC-2", "PC-8", helper=True)
def confirms_in_step(state: State) -> bool:
    """Helper (proofs/): what makes the client's view of its confirms agree with the broker's channel
    (confirms_exactly_once) for every size. Per channel, on a connection whose broker end is open:
    - while the broker's channel is open, every confirm of it in flight to the client covers only
      publishes it confirmed (a multiple one, every number up to its own);
    - while a channel.open-ok is in flight, the broker's channel has numbered and confirmed nothing,
      is in neither mode, and has no confirm in flight behind the open-ok;
    - while the client holds the channel open too (``client_in_step``): in neither mode, so is the
      broker's channel, with no select in flight; in confirm mode, the broker's channel is in confirm
      mode or the first select in flight is confirm.select; in tx mode, the broker's channel is in tx
      mode or the first select in flight is tx.select; and the client has published, in confirm mode,
      at least what the broker's channel numbered plus what it will number of the publishes in flight."""
    for conn in state.conns:
        if conn.broker_closed:
            continue
        for ch, channel in enumerate(conn.channels, start=1):
            to_client = conn.to_client[ch]
            if to_client:
                single, top = confirms_in_flight(to_client)
                confirmed = set(channel.confirmed)
                if channel.status == CH_OPEN and (not single <= confirmed or not set(range(1, top + 1)) <= confirmed):
                    return False
                if any(frame.method == CHANNEL_OPEN_OK for frame in to_client) and (
                        channel.publish_seq or channel.unconfirmed or confirmed or channel.mode != MODE_NONE
                        or single or top):
                    return False
            view = conn.clients[ch - 1]
            if channel.status != CH_OPEN or not client_in_step(view):
                continue
            selects = selects_in_flight(conn.to_broker[ch])
            select, numbered = selects[0], numbered_in_flight(selects, channel.mode)
            if view.mode == MODE_NONE and (channel.mode != MODE_NONE or select or numbered):
                return False
            if view.mode == MODE_CONFIRM and not (
                    channel.mode == MODE_CONFIRM or channel.mode == MODE_NONE and select == CONFIRM_SELECT):
                return False
            if view.mode == MODE_TX and (numbered or not (
                    channel.mode == MODE_TX or channel.mode == MODE_NONE and select == TX_SELECT)):
                return False
            if view.pub_seq < channel.publish_seq + numbered:
                return False
    return True


@always("ER-1", "RQ-4")
def closed_channel_is_silent(state: State) -> bool:
    """While the broker waits for the close-ok of a channel.close it sent (the channel is closing), it
    sends nothing more on that channel but the close-ok answering a client's own channel.close (both
    ends closed at once); and a channel that is not open holds no consumer and no consumer delivery
    (they were stopped and requeued); a closing one may still hold basic.get deliveries of queues it
    did not consume from, a closed one nothing.

    Only while it waits: a client that sends channel.close-ok before it has read the broker's
    channel.close (out of turn, a protocol error) ends the channel at once, and a channel.open then
    opens a new one whose channel.open-ok and frames follow the old channel.close (RabbitMQ 3.10.8 does
    the same: its reader forgets the channel on any close-ok). ``tests/test_closed_channel.py`` shows
    it: a frame other than close-ok after channel.close is reachable with two such frames."""
    for conn in state.conns:
        for ch, channel in enumerate(conn.channels, start=1):
            if channel.status == CH_CLOSING and sent_after_close(conn.to_client[ch]):
                return False
            if channel.status != CH_OPEN and (channel.consumers or channel.tx_settles or any(
                    u.consumer or channel.status == CH_CLOSED for u in channel.unacked)):
                return False
    return True


@always("PF-3", "AM-2", helper=True)
def sent_to_open_channels(state: State) -> bool:
    """No queue is sending a delivery (``Queue.sending``: admitted by a global limit for an automatic-mode
    consumer, not numbered yet) to a channel that is not open, or of a connection the broker has closed:
    closing the channel or the connection loses it (``storage.lose_sent``), a vanish moves it with the
    channel (the helper that makes two choices of the Z3 model exact: a queue.delete's numbering writes
    only to an open channel, a slot made new loses what was on its way to it; proofs/)."""
    for queue in state.queues:
        if queue.sending:
            conn = state.conns[queue.sending[0]]
            if conn.broker_closed or conn.channels[queue.sending[1] - 1].status != CH_OPEN:
                return False
    return True


@always("DU-4")
def exclusive_queue_has_owner(state: State) -> bool:
    """An exclusive queue exists only while the connection that declared it is open, and is never durable."""
    for queue in state.queues:
        if queue.exists and queue.owner:
            conn = state.conns[queue.owner - 1]
            if conn.broker_closed or conn.status == CONN_DOWN or queue.durable:
                return False
    return True


@always("DU-1", "DU-3")
def down_broker_holds_only_disk(state: State) -> bool:
    """While the broker is down nothing is outstanding, ready or in flight, only durable queues exist,
    and what it will recover is what the disk holds."""
    if state.broker_up:
        return True
    for queue in state.queues:
        if queue.ready or queue.ring or (queue.exists and not queue.durable):
            return False
    return all((conn.status == CONN_DOWN or conn.status == CONN_GONE and conn.broker_closed)
               and not any(conn.to_client) and not any(conn.to_broker) for conn in state.conns)


@always("PC-8", "TX-1", "PC-1", helper=True)
def plain_channel_holds_nothing(state: State) -> bool:
    """A channel is in one of the three modes, and one in neither confirm nor tx mode numbers no
    publish and holds nothing back (the helper that makes confirm_and_tx_exclusive inductive: proofs/)."""
    for conn in state.conns:
        for channel in conn.channels:
            mode = channel.mode
            if mode == MODE_NONE:
                if channel.publish_seq or channel.unconfirmed or channel.confirmed or channel.tx_pubs or \
                        channel.tx_settles or channel.commit_pending:
                    return False
            elif mode != MODE_CONFIRM and mode != MODE_TX:
                return False
    return True


@always("DT-1", "TX-3", helper=True)
def held_back_tags_issued(state: State) -> bool:
    """A channel's next tag is at least 1, and a delivery settled inside an open transaction has a tag
    already issued (below the next tag) that is no longer outstanding as well (the helper that makes
    delivery_tags_increase inductive with rollbacks: proofs/)."""
    for conn in state.conns:
        for channel in conn.channels:
            if channel.next_tag < 1:
                return False
            if channel.tx_settles:
                outstanding = {u.tag for u in channel.unacked}
                for _, u in channel.tx_settles:
                    if u.tag < 1 or u.tag >= channel.next_tag or u.tag in outstanding:
                        return False
    return True


@always("DU-4", "ER-1", helper=True)
def down_connection_is_silent(state: State) -> bool:
    """A connection whose client is down has no frame in flight either way and every broker channel
    closed (the helper that makes exclusive_queue_has_owner inductive: proofs/)."""
    for conn in state.conns:
        if conn.status != CONN_DOWN:
            continue
        if any(conn.to_broker) or any(conn.to_client):
            return False
        for channel in conn.channels:
            if channel.status != CH_CLOSED:
                return False
    return True


@always("DU-4", "ER-1", helper=True)
def close_sent_only_when_closed(state: State) -> bool:
    """A connection.close or close-ok is in flight to a client only once the broker has closed its end
    of that connection (the helper that makes exclusive_queue_has_owner inductive: proofs/)."""
    for conn in state.conns:
        if conn.broker_closed:
            continue
        for frame in conn.to_client[0]:
            if frame.method == CONNECTION_CLOSE or frame.method == CONNECTION_CLOSE_OK:
                return False
    return True


@always("RQ-1", "RQ-2", helper=True)
def copy_keys_issued(state: State) -> bool:
    """A queue's keys are issued 1, 2, 3, ...: every ready, delivered or stored copy has a key between 1
    and the number of copies its queue took (the helper that makes redelivered_flag_set inductive:
    a new copy's key was never delivered; proofs/)."""
    queues = state.queues
    for queue in queues:
        if queue.enqueued < 0:
            return False
        for e in queue.ready:
            if e.key < 1 or e.key > queue.enqueued:
                return False
    for q, key in state.delivered:
        if key < 1 or key > queues[q].enqueued:
            return False
    for q, key, _ in state.disk:
        if key < 1 or key > queues[q].enqueued:
            return False
    return True


@always("DU-1", "PC-5", helper=True)
def stored_copies_in_durable_queues(state: State) -> bool:
    """A durable queue exists, and every copy on disk is of a durable queue: an fsync writes only
    into a durable queue, a delete takes the queue's records with it and makes it not durable, and a
    crash keeps the durable queues (the helper that lets copies_conserved's second half through a
    restart: a stored copy comes back ready; proofs/)."""
    queues = state.queues
    for queue in queues:
        if queue.durable and not queue.exists:
            return False
    for q, _, _ in state.disk:
        if not queues[q].durable:
            return False
    return True


@always("RQ-2", "AM-3", helper=True)
def outstanding_copies_were_delivered(state: State) -> bool:
    """The copy an outstanding or held-back delivery names was delivered (the helper that makes
    copy_keys_issued inductive: a requeued copy's key was issued; proofs/)."""
    delivered: set | None = None
    for conn in state.conns:
        for channel in conn.channels:
            if not channel.unacked and not channel.tx_settles:
                continue
            if delivered is None:
                delivered = set(state.delivered)
            for u in channel.unacked:
                if (u.queue, u.key) not in delivered:
                    return False
            for _, u in channel.tx_settles:
                if (u.queue, u.key) not in delivered:
                    return False
    return True


def copy_messages(state: State) -> set:
    """The messages some copy carries: ready, outstanding, held back as a settlement, in flight in
    automatic mode, on disk, or gone with a recorded fate. A copy never leaves all of these (a copy
    that goes records a fate), so this is every message any queue ever took (the Z3 model's ghost
    ``em``, model.state)."""
    out = {r[3] for r in state.fates}
    out.update(r[2] for r in state.disk)
    for queue in state.queues:
        out.update(e.msg for e in queue.ready)
        if queue.sending:
            out.add(queue.sending[3].msg)
    for conn in state.conns:
        out.update(d[4] for d in conn.auto)
        for channel in conn.channels:
            out.update(u.msg for u in channel.unacked)
            out.update(u.msg for _, u in channel.tx_settles)
    return out


@always("TX-2", "PC-1", helper=True)
def publishes_in_flight_fresh(state: State) -> bool:
    """Every basic.publish in flight to the broker carries a message of its own connection, numbered
    1..published, that no copy carries and no transaction holds back, and no two of them carry one
    message; nor is a message held back twice (the helper that makes tx_effects_invisible inductive:
    a publish the broker takes is a new message; proofs/)."""
    held = set()
    for conn in state.conns:
        for channel in conn.channels:
            for pub in channel.tx_pubs:
                if pub[4] in held:
                    return False
                held.add(pub[4])
    copies: set | None = None
    for c, conn in enumerate(state.conns):
        for fifo in conn.to_broker:
            for frame in fifo:
                if frame.method != BASIC_PUBLISH:
                    continue
                if copies is None:
                    copies = copy_messages(state)
                owner, n = divmod(frame.msg, MSG_STRIDE)
                if owner != c or not 1 <= n <= conn.published or frame.msg in copies or frame.msg in held:
                    return False
                held.add(frame.msg)
    return True


@always("TX-2", "PC-1", helper=True)
def messages_numbered(state: State) -> bool:
    """Every message a copy carries or a transaction holds back is the n-th of its connection, with
    1 <= n <= the messages that connection has published (the helper that makes
    publishes_in_flight_fresh inductive: the client's next message is new; proofs/)."""
    messages = copy_messages(state)
    for conn in state.conns:
        for channel in conn.channels:
            messages.update(pub[4] for pub in channel.tx_pubs)
    conns = state.conns
    for msg in messages:
        c, n = divmod(msg, MSG_STRIDE)
        if not 0 <= c < len(conns) or not 1 <= n <= conns[c].published:
            return False
    return True


def _pending_messages(state: State) -> dict:
    """Every unconfirmed publish that is still to be acked (not nacked, PC-6): its message -> its waits."""
    out = {}
    for conn in state.conns:
        for channel in conn.channels:
            for p in channel.unconfirmed:
                if not p.nack:
                    out[p.msg] = p.waits
    return out


def _unsent_messages(state: State) -> set:
    """The messages of every basic.publish in flight to the broker or held back by a transaction."""
    out = set()
    for conn in state.conns:
        for fifo in conn.to_broker:
            for frame in fifo:
                if frame.method == BASIC_PUBLISH:
                    out.add(frame.msg)
        for channel in conn.channels:
            for pub in channel.tx_pubs:
                out.add(pub[4])
    return out


def _counted(queue, q: int, key: int, persistent: bool, skip) -> bool:
    """Whether copy (q, key) is one PC-5 and PC-10 count: persistent, in a durable queue that is no
    dead-letter target (``skip``) and not a deleted queue's (key above ``born``)."""
    return persistent and queue.durable and key > queue.born and q not in skip


def _acked_or_unnumbered(state: State, msg: int, confirmed: set) -> bool:
    """Whether message ``msg`` was confirmed with basic.ack, or is not numbered 1..published."""
    c, n = divmod(msg, MSG_STRIDE)
    return msg in confirmed or not 0 <= c < len(state.conns) or n > state.conns[c].published


@always("PC-5", "PC-4", helper=True)
def unwritten_copies_hold_their_confirm(state: State) -> bool:
    """Every live or stored copy's key was issued (at most its queue's count), and a live copy that
    is persistent, in a durable queue that is no dead-letter target, not a deleted queue's and not on
    disk carries a message not confirmed with basic.ack, numbered 1..published, in flight to no one
    and held back by no transaction, and either holds up its publish's confirm (in its waits) or its
    message has no publish left to ack (the helper that makes confirmed_only_when_on_disk inductive:
    a confirm waits for every such copy; proofs/)."""
    queues = state.queues
    for q, key, _ in state.disk:
        if key > queues[q].enqueued:
            return False
    live = live_copies(state)
    if not live:
        return True
    on_disk = {(r[0], r[1]) for r in state.disk}
    skip = _dead_letter_targets(state)
    confirmed = set(state.confirmed_msgs)
    pending: dict | None = None
    unsent: Any = None
    for (q, key), (msg, persistent) in live.items():
        queue = queues[q]
        if key > queue.enqueued:
            return False
        if not _counted(queue, q, key, persistent, skip) or (q, key) in on_disk:
            continue
        if _acked_or_unnumbered(state, msg, confirmed):
            return False
        if pending is None:
            pending, unsent = _pending_messages(state), _unsent_messages(state)
        if msg in unsent or (msg in pending and (q, key) not in pending[msg]):
            return False
    return True


@always("PC-10", "DU-2", helper=True)
def lost_copies_stay_unconfirmed(state: State) -> bool:
    """Every copy a crash lost has a key that was issued (at most its queue's count), and one that is
    persistent, in a durable queue that is no dead-letter target and not a deleted queue's carries a
    message not confirmed with basic.ack, with no unconfirmed publish still to be acked, in flight to
    no one, held back by no transaction, and numbered 1..published (the helper that makes
    confirmed_survives_crash inductive: the crash drops every unconfirmed publish, so nothing acks
    such a message later; proofs/)."""
    lost = [f for f in state.fates if f[2] == FATE_LOST_CRASH]
    if not lost:
        return True
    queues = state.queues
    skip = _dead_letter_targets(state)
    confirmed = set(state.confirmed_msgs)
    pending: dict | None = None
    unsent: Any = None
    for q, key, _, msg, persistent in lost:
        queue = queues[q]
        if key > queue.enqueued:
            return False
        if not _counted(queue, q, key, persistent, skip):
            continue
        if _acked_or_unnumbered(state, msg, confirmed):
            return False
        if pending is None:
            pending, unsent = _pending_messages(state), _unsent_messages(state)
        if msg in pending or msg in unsent:
            return False
    return True


@always("PC-5", "PC-1", helper=True)
def pending_messages_numbered(state: State) -> bool:
    """A message in flight to the broker or held back by a transaction is neither confirmed with
    basic.ack nor carried by an unconfirmed publish still to be acked; one that is either is numbered
    1..published (the helper that makes unwritten_copies_hold_their_confirm inductive: a copy the
    broker enqueues carries a message no confirm has covered; proofs/)."""
    pending = _pending_messages(state)
    if not pending and not state.confirmed_msgs:
        return True
    unsent = _unsent_messages(state)
    for msg in (*pending, *state.confirmed_msgs):
        c, n = divmod(msg, MSG_STRIDE)
        if msg in unsent or not 0 <= c < len(state.conns) or not 1 <= n <= state.conns[c].published:
            return False
    return True


def _consumer_deliveries(channel) -> tuple:
    """The deliveries of a channel that went to a consumer (a former one's too), outstanding or held back."""
    return tuple(u for u in channel.unacked + tuple(u for _, u in channel.tx_settles) if u.consumer)


@always("PF-2", "PF-3", helper=True)
def prefetch_counts_sane(state: State) -> bool:
    """The limits are never below 0, nor ``qos_uncounted``, and a delivery marked with a consumer tag
    belongs to a consumer of its channel (a cancel marks its deliveries -tag): the helper that makes
    a new consumer start with no delivery of its own (prefetch_respected; proofs/)."""
    for conn in state.conns:
        for channel in conn.channels:
            if channel.prefetch < 0 or channel.global_limit < 0 or channel.qos_uncounted < 0:
                return False
            tags = {k.tag for k in channel.consumers}
            if any(k.limit < 0 for k in channel.consumers):
                return False
            if any(u.consumer > 0 and u.consumer not in tags for u in _consumer_deliveries(channel)):
                return False
    return True


@always("PF-3", "TX-3", helper=True)
def prefetch_volume_covers(state: State) -> bool:
    """Under a global limit, the consumer deliveries outstanding or held back are no more than the
    limit's volume plus ``qos_uncounted`` (the helper that makes prefetch_respected inductive: a
    delivery needs volume < limit; proofs/)."""
    for conn in state.conns:
        for channel in conn.channels:
            if channel.global_limit and \
                    len(_consumer_deliveries(channel)) > channel.volume + channel.qos_uncounted:
                return False
    return True


ALWAYS = tuple(name for name, p in REGISTRY.items() if p.kind == "always")
HELPERS = tuple(name for name, p in REGISTRY.items() if p.helper)


# ---------------------------------------------------------------- hazards

@hazard("AM-2")
def auto_ack_never_loses(state: State) -> bool:
    """(Does not hold.) A message delivered in automatic mode always reaches its consumer."""
    for f in state.fates:
        if f[2] == FATE_LOST_AUTOACK:
            return False
    return True


@hazard("DU-2", "PC-10")
def persistent_never_lost(state: State) -> bool:
    """(Does not hold.) A persistent message in a durable queue is never lost in a crash, confirmed or not."""
    for f in state.fates:
        if f[2] == FATE_LOST_CRASH and f[4] and state.queues[f[0]].durable:
            return False
    return True


@hazard("TX-8", "DU-3")
def acked_never_redelivered(state: State) -> bool:
    """(Does not hold.) A message acknowledged by a consumer never comes back."""
    if not state.fates:
        return True
    acked = {(f[0], f[1]) for f in state.fates if f[2] == FATE_ACKED}
    if not acked:
        return True
    return not any(pair in acked for pair in live_copies(state))


@hazard("RQ-3")
def consumer_sees_publication_order(state: State) -> bool:
    """(Does not hold.) Every consumer receives a queue's messages in publication order."""
    for conn in state.conns:
        for view in conn.clients:
            if view.disorder:
                return False
    return True


@hazard("TX-9")
def tx_commit_atomic(state: State) -> bool:
    """(Does not hold.) After a crash, a committed transaction's publishes are all there or all gone."""
    if not state.tx_groups:
        return True
    lost = {(f[0], f[1]) for f in state.fates if f[2] == FATE_LOST_CRASH}
    for group in state.tx_groups:
        gone = sum(1 for pair in group if pair in lost)
        if 0 < gone < len(group):
            return False
    return True


@hazard("PC-7")
def confirms_in_publish_order(state: State) -> bool:
    """(Does not hold.) A publisher receives its confirms in publish order."""
    for conn in state.conns:
        for view in conn.clients:
            if view.confirms and view.confirms[-1] != len(view.confirms):
                return False
    return True


@hazard("PF-5")
def outstanding_within_prefetch(state: State) -> bool:
    """(Does not hold.) A channel never holds more consumer deliveries than its current global prefetch."""
    for conn in state.conns:
        for channel in conn.channels:
            if channel.global_limit and sum(1 for u in channel.unacked if u.consumer) > channel.global_limit:
                return False
    return True


# ---------------------------------------------------------------- reachability

def _event(bit: int):
    return lambda state: bool(state.events & bit)


def _close_frame(method: int, reason: int):
    def check(state: State) -> bool:
        for conn in state.conns:
            for f in network.all_frames(conn.to_client):
                if f.method == method and f.reason == reason:
                    return True
        return False
    return check


def _frame_sent(method: int):
    """Whether a frame of ``method`` is in flight to some client."""
    def check(state: State) -> bool:
        for conn in state.conns:
            for f in network.all_frames(conn.to_client):
                if f.method == method:
                    return True
        return False
    return check


def _fate_recorded(fate: int):
    """Whether some copy left the broker with ``fate``."""
    def check(state: State) -> bool:
        for f in state.fates:
            if f[2] == fate:
                return True
        return False
    return check


def _requeued_in_place(state: State) -> bool:
    for queue in state.queues:
        for e in queue.ready:
            if e.redelivered:
                return True
    return False


def _redelivery_seen(state: State) -> bool:
    for conn in state.conns:
        for f in network.all_frames(conn.to_client):
            if f.method in (BASIC_DELIVER, BASIC_GET_OK) and f.redelivered:
                return True
    return False


def _reach(name: str, rules: tuple, check, doc: str) -> None:
    REGISTRY[name] = Property(name, "sometimes", rules, check, doc)


_reach("requeued_in_place", ("RQ-1", "ACK-6"), _requeued_in_place,
       "A requeued copy is back among the ready ones.")
_reach("redelivery_seen", ("RQ-2",), _redelivery_seen,
       "A delivery with redelivered=true is on its way to a client.")
_reach("multiple_ack_settles_several", ("ACK-2", "ACK-3"), _event(EV_MULTIPLE_ACK),
       "One settlement with multiple=true settled two or more deliveries.")
_reach("requeued_twice", ("RQ-6",), _event(EV_REQUEUE_TWICE), "A copy was requeued a second time.")
_reach("channel_close_requeues", ("RQ-4",), _event(EV_CHANNEL_REQUEUE),
       "Closing a channel or connection requeued outstanding deliveries.")
_reach("unknown_tag_refused", ("ACK-4", "ACK-7", "ER-1"), _close_frame(CHANNEL_CLOSE, R_UNKNOWN_TAG),
       "A settlement of a tag that is not outstanding closed the channel with 406.")
_reach("get_empty", ("DS-2",), _frame_sent(BASIC_GET_EMPTY),
       "basic.get on an empty queue answered get-empty.")
_reach("auto_delivered", ("AM-2",), _fate_recorded(FATE_AUTO),
       "A message delivered in automatic mode reached its consumer.")
_reach("prefetch_full", ("PF-3",), lambda s: _prefetch_full(s),
       "A consumer is at its prefetch limit while its queue has ready messages.")
_reach("confirm_multiple", ("PC-3",), _event(EV_CONFIRM_MULTIPLE),
       "A confirm with multiple=true covered two or more publishes.")
_reach("return_before_ack", ("PC-4", "RT-3"), lambda s: _return_then_ack(s),
       "A basic.return is in flight ahead of the basic.ack confirming the same publish.")
_reach("publish_nacked", ("PC-6",), _frame_sent(BASIC_NACK),
       "The broker nacked a publish its queue failed to take.")
_reach("missing_exchange_refused", ("PC-9", "TX-5"), _close_frame(CHANNEL_CLOSE, R_NO_EXCHANGE),
       "A publish to a missing exchange closed the channel with 404.")
_tx_to_confirm_refused = _close_frame(CHANNEL_CLOSE, R_TX_TO_CONFIRM)
_confirm_to_tx_refused = _close_frame(CHANNEL_CLOSE, R_CONFIRM_TO_TX)
_reach("mode_switch_refused", ("PC-8",), lambda s: _tx_to_confirm_refused(s) or _confirm_to_tx_refused(s),
       "Switching between confirm and tx mode was refused with 406.")
_reach("not_transactional_refused", ("TX-10",), _close_frame(CHANNEL_CLOSE, R_NOT_TX),
       "tx.commit on a channel that is not transactional was refused with 406.")
_reach("commit_applied_acks", ("TX-3",), _event(EV_COMMIT_WITH_ACKS), "A tx.commit applied held-back acks.")
_reach("commit_published", ("TX-2", "TX-7"), _event(EV_COMMIT_PUBLISHED), "A tx.commit enqueued held-back publishes.")
_reach("rollback_kept_outstanding", ("TX-3", "TX-4"), _event(EV_ROLLBACK_KEPT),
       "A tx.rollback left acked deliveries outstanding.")
_reach("commit_returned", ("TX-6",), _event(EV_TX_RETURN), "A tx.commit returned an unroutable mandatory message.")
_reach("recovered_after_crash", ("DU-2", "DU-3", "PC-10"), _event(EV_RECOVERED),
       "A restart recovered persisted messages.")
_reach("recover_without_requeue_refused", ("RQ-5", "ER-2"), _close_frame(CONNECTION_CLOSE, R_RECOVER_NO_REQUEUE),
       "basic.recover(requeue=false) closed the connection with 540.")
_reach("exclusive_queue_locked", ("DU-4", "ER-2"), _close_frame(CHANNEL_CLOSE, R_LOCKED),
       "Another connection's use of an exclusive queue was refused with 405.")
_reach("dead_lettered", ("ACK-6",), _fate_recorded(FATE_DEAD_LETTERED),
       "A rejected message went to its queue's dead-letter queue.")
_reach("fanout_copies", ("RT-1", "RT-2"), lambda s: _copies_in_two_queues(s),
       "One message has independent copies ready in two queues.")


_reach("queue_purged", ("ER-3",), _fate_recorded(FATE_PURGED),
       "queue.purge dropped a ready message (its outstanding deliveries stayed).")
_reach("deleted_queue_cancels_consumer", ("DU-4",), _frame_sent(BASIC_CANCEL),
       "queue.delete cancelled a consumer of another channel (basic.cancel from the broker).")
_in_use_refused = _close_frame(CHANNEL_CLOSE, R_IN_USE)
_not_empty_refused = _close_frame(CHANNEL_CLOSE, R_NOT_EMPTY)
_reach("delete_refused", ("ER-1", "ER-2"), lambda s: _in_use_refused(s) or _not_empty_refused(s),
       "queue.delete with if-unused or if-empty was refused with 406.")
_reach("exclusive_consumer_refused", ("ER-2",), _close_frame(CHANNEL_CLOSE, R_EXCLUSIVE_USE),
       "A consumer of a queue with an exclusive consumer was refused with 403.")
_connection_refusals = [_close_frame(CONNECTION_CLOSE, r) for r in
                        (R_IMMEDIATE, R_PREFETCH_SIZE, R_TAG_REUSED, R_SECOND_OPEN, R_UNIMPLEMENTED)]
_reach("protocol_error_closes_connection", ("ER-1", "ER-2"), lambda s: any(f(s) for f in _connection_refusals),
       "A frame RabbitMQ refuses (immediate, prefetch_size, a reused consumer tag, a second channel.open, "
       "close-ok out of turn) closed the connection.")
_reach("commit_pending_refused", ("TX-7", "ER-1"), _close_frame(CONNECTION_CLOSE, R_COMMIT_PENDING),
       "A frame the broker took while its channel's commit-ok was owed closed the connection with 504 "
       "(RabbitMQ 3.10.8's channel refuses all but channel.close while its tx.commit waits).")
_reach("global_limit_counts_gets", ("PF-2", "PF-4"), lambda s: _global_full_of_gets(s),
       "A channel's global limit is reached by basic.get deliveries counted when it was set.")


def _global_full_of_gets(state: State) -> bool:
    for conn in state.conns:
        for channel in conn.channels:
            if channel.global_limit and channel.volume >= channel.global_limit and \
                    any(not u.consumer for u in channel.unacked):
                return True
    return False


def _prefetch_full(state: State) -> bool:
    for conn in state.conns:
        for channel in conn.channels:
            if not channel.unacked:
                continue
            for consumer in channel.consumers:
                if consumer.limit and state.queues[consumer.queue].ready:
                    if sum(1 for u in channel.unacked if u.consumer == consumer.tag) >= consumer.limit:
                        return True
    return False


def _return_then_ack(state: State) -> bool:
    for conn in state.conns:
        for fifo in conn.to_client:
            returned = False
            for frame in fifo:
                if frame.method == BASIC_RETURN:
                    returned = True
                elif frame.method == BASIC_ACK and returned:
                    return True
    return False


def _copies_in_two_queues(state: State) -> bool:
    if len(state.queues) < 2:
        return False
    seen: dict = {}
    for q, queue in enumerate(state.queues):
        for e in queue.ready:
            seen.setdefault(e.msg, set()).add(q)
    return any(len(qs) >= 2 for qs in seen.values())


SOMETIMES = tuple(name for name, p in REGISTRY.items() if p.kind == "sometimes")
HAZARDS = tuple(name for name, p in REGISTRY.items() if p.kind == "hazard")


# --- liveness (eventually) ----------------------------------------------------------------------------

LIVENESS: dict[str, Liveness] = {}


def waiting_for_confirm(state: State) -> bool:
    """Some client waits for the confirm of a publish on a channel it holds open: the channel is open
    in the client's eyes (its view is open, on a connection it has not closed), in confirm mode, and one
    of the sequence numbers 1..n it gave its publishes (PC-1) has been neither acked nor nacked in a
    frame it read (PC-2, PC-3: a multiple one counts for every number up to its tag; PC-6: a nack is an
    answer). A channel the broker closed (PC-9: its publishes are never confirmed) stops waiting when
    the client reads the channel.close (its view is then closed, its numbers forgotten), and a connection
    that is lost or closed, or a broker crash, resets the client's views (spec.faults).

    As the ``stays`` of a liveness property it needs no per-channel form: no publish is on a cycle of the
    graph (a connection's count of publishes only grows), so a view's numbers and the answers it read
    cannot change along a cycle either, and a client that waits in one state of a cycle waits for the
    same publish in all of them."""
    for conn in state.conns:
        if conn.status != CONN_UP:
            continue
        for view in conn.clients:
            if view.status == C_OPEN and view.mode == MODE_CONFIRM and view.pub_seq and \
                    len([s for s in view.confirms if s <= view.pub_seq]) < view.pub_seq:
                return True
    return False


LIVENESS["confirms_eventually_answered"] = Liveness(
    "confirms_eventually_answered", ("PC-2", "PC-3", "PC-6"),
    "Every publish a client made in confirm mode is eventually acked or nacked while its channel stays "
    "open: no fair execution stays for ever (a fair cycle) or ends (nothing fair left to happen) with a client "
    "waiting for a confirm on a channel it holds open.",
    waiting_for_confirm, waiting_for_confirm, at_end=True)
