"""The Z3 state of the model: six families of fields over the same unbounded indices.

- *channel modes*: what each channel's mode, publish numbering, confirms and held-back transaction
  are, for any number of connections, channels and publishes;
- *deliveries*: each channel's next delivery tag, which tags are outstanding or held back by an
  open transaction and which of those went to a consumer, and the channel's consumer tags, for any
  number of deliveries and consumers (tags are their own index, like publish numbers);
- *connections and queues*: each connection's status as its client sees it, whether a
  connection.close is in flight to it, on which channels frames are and whether a channel.close is
  among them with something other than close-ok after it, each client's view of a channel (its status
  and the last tag it read), whether a channel.open-ok is in flight to it with an older channel's
  frames ahead, which deliveries of the broker's channel are in flight behind it, whether a
  channel.open is in flight to the broker with other frames ahead or behind
  (spec.properties.channel_lifecycle), the view's mode, publish count and confirms seen, the confirms
  of the broker's channel in flight to the client, the publishes and the first select in flight to
  the broker (spec.properties.confirms_in_step), and each queue's existence, durability and
  exclusive owner, for any number of connections and queues;
- *copies*: each queue's ready copies by enqueue position (key) with their redelivered flag and
  their order in the queue (which ready copy is ahead of which), the
  copies ever delivered (ghost), the copies on disk, how many each queue ever took, which consumers
  are in a queue's round-robin, the copy each outstanding or held-back tag names (with how a
  held-back settlement will settle it), the copies in flight in automatic mode with the
  connection they travel on, and the automatic-mode delivery each queue is sending to a channel that
  has not numbered it yet (``Queue.sending``, PF-3: at most one per queue), for any number of copies,
  keys and requeues;
- *messages*: per connection how many messages its client published, and per message (connection,
  n) whether a basic.publish of it is in flight to the broker (and whether two are), which channel's
  open transaction holds it back (and whether it is held back twice), and whether any queue ever
  took a copy of it (ghost), for any number of messages;
- *confirms and disk*: per copy its message, its persistent flag and whether it holds up its
  publish's confirm (PC-5: not yet on disk), per message whether the broker acked it (ghost) and the
  channel and number of its unconfirmed publish still to be acked, and per queue whether it is a
  dead-letter target (confirmed_only_when_on_disk), and per copy whether a crash lost it (ghost: a
  ``FATE_LOST_CRASH`` record, confirmed_survives_crash) and whether it is gone in this life (ghost:
  a fate not of an earlier life, ``State.revived``, or in flight or on its way to its channel in
  automatic mode, whose fate is sure; tx_effects_invisible).

Every field is declared once, in ``FIELDS``: its name, what each of its indices is (connection,
channel, publish number, delivery tag, consumer tag, queue, key, message number), the sort of its
values, its value at an index the spec state does not have, and what it is. ``Z3State``, ``SORTS``,
``DEFAULTS``, ``ARITY``, ``fresh``, the dicts ``project`` fills and the proofs' printing of a
counterexample (``proofs.inductive``) are derived from it.

A spec ``State`` is projected (``abstract``) onto these fields; everything else of the spec state that
an action's guard or effect reads is an *oracle* input of that action (``model.actions``), fixed by the
concrete state when the model is checked against ``spec/`` and left free in the proofs.

Why arrays: every field but the two scalars is a Z3 array indexed by unbounded integers (connection,
channel, publish sequence number), updated with ``Store`` or ``Lambda``. The invariants are universally
quantified over those indices, each a guarded formula in the array property fragment (index comparisons
only, no arithmetic on array values under a quantifier), which Z3 decides by instantiation: no bound on
connections, channels or publishes enters the encoding, and the obligations stay decidable and fast.
Sequences would have kept order we do not need (publish numbers are their own order) and cost
quantifier alternations. The deliveries family follows the same pattern: a channel's outstanding
deliveries are a set of tags (a tag is its own index and its own order, as a publish number is), so
"tags are issued 1, 2, 3, ... and outstanding ones are below the next tag" is one guarded formula per
tag; a multiple ack is the set of outstanding tags <= its tag, a ``Lambda`` again.
"""
from __future__ import annotations

from dataclasses import dataclass, field, make_dataclass
from typing import Iterator

import z3

from rabbitproof.spec.frames import BASIC_PUBLISH, CHANNEL_CLOSE, CONNECTION_CLOSE, CONNECTION_CLOSE_OK, MSG_STRIDE
from rabbitproof.spec.properties import (
    confirms_in_flight, copy_messages, open_ok_in_flight, opens_in_flight, selects_in_flight, sent_after_close,
)
from rabbitproof.spec.state import C_CLOSED, CH_CLOSED, CONN_DOWN, FATE_LOST_CRASH, MODE_NONE

INT = z3.IntSort()
BOOL = z3.BoolSort()

# What an index of a field is: a connection, a channel of it (0: the connection's own frames), a publish
# sequence number, a delivery tag or a consumer tag of that channel, a queue, an enqueue position (key)
# in it, or the n of message (connection, n), the n-th message the connection's client published.
CONNECTION, CHANNEL, PUBLISH, TAG, CONSUMER = "connection", "channel", "publish", "tag", "consumer"
QUEUE, KEY, MESSAGE = "queue", "key", "message"

# The index lists the fields have.
SCALAR: tuple[str, ...] = ()
PER_CONNECTION = (CONNECTION,)
PER_CHANNEL = (CONNECTION, CHANNEL)
PER_PUBLISH = (CONNECTION, CHANNEL, PUBLISH)
PER_TAG = (CONNECTION, CHANNEL, TAG)
PER_CONSUMER = (CONNECTION, CHANNEL, CONSUMER)
PER_QUEUE = (QUEUE,)
PER_COPY = (QUEUE, KEY)
PER_COPY_PAIR = (QUEUE, KEY, KEY)
PER_MESSAGE = (CONNECTION, MESSAGE)


@dataclass(frozen=True)
class Field:
    """One field of the Z3 state: its name, what each of its indices is (none: a scalar), the sort of
    its values (INT or BOOL), its value at an index the spec state does not have (a closed, clean
    channel: spec.state.CLOSED_CHANNEL; None for a scalar, which ``project`` always sets), and what it is."""

    name: str
    indices: tuple[str, ...]
    sort: z3.SortRef
    default: bool | int | None
    doc: str

    @property
    def z3_sort(self) -> z3.SortRef:
        """The sort of the field's term: an array from its indices (all integers) to its values."""
        return z3.ArraySort(*[INT] * len(self.indices), self.sort) if self.indices else self.sort


FIELDS: tuple[Field, ...] = (
    Field("broker_up", SCALAR, BOOL, None, "the broker is running"),
    Field("channels_per_connection", SCALAR, INT, None, "channels per connection (rigid: a configuration constant)"),
    Field("broker_end_closed", PER_CONNECTION, BOOL, False, "the broker has closed its end of the connection"),
    Field("channel_status", PER_CHANNEL, INT, CH_CLOSED, "the broker's channel status (CH_*)"),
    Field("channel_mode", PER_CHANNEL, INT, MODE_NONE, "the broker's channel mode (MODE_*, PC-8)"),
    Field("publish_seq", PER_CHANNEL, INT, 0, "the publishes the broker's channel numbered (publish_seq, PC-1)"),
    Field("unconfirmed", PER_PUBLISH, BOOL, False, "the publish is unconfirmed (PC-2)"),
    Field("confirmed", PER_PUBLISH, BOOL, False, "the publish was confirmed (ghost, PC-2)"),
    Field("tx_holds_back", PER_CHANNEL, BOOL, False,
          "the open transaction holds publishes or settlements back (TX-2, TX-3)"),
    Field("commit_pending", PER_CHANNEL, BOOL, False, "a tx.commit waits for its commit-ok (TX-7)"),
    Field("frames_to_broker", PER_CHANNEL, INT, 0, "frames in flight to the broker on the channel"),
    Field("next_tag", PER_CHANNEL, INT, 1, "the next delivery tag (DT-1)"),
    Field("outstanding", PER_TAG, BOOL, False, "the tag is outstanding (unacked, AM-3)"),
    Field("tx_settled", PER_TAG, BOOL, False, "the tag is settled inside the open transaction, held back (TX-3)"),
    Field("delivered_to_consumer", PER_TAG, BOOL, False,
          "the delivery (outstanding or held back) went to a consumer, not to basic.get"),
    Field("consumers", PER_CONSUMER, BOOL, False, "the consumer tag is one of the channel's consumers"),
    Field("client_connection_status", PER_CONNECTION, INT, CONN_DOWN,
          "the connection's status as its client sees it (CONN_*)"),
    Field("connection_close_to_client", PER_CONNECTION, BOOL, False,
          "a connection.close or close-ok is in flight to the client (ER-1)"),
    Field("frames_to_client", PER_CHANNEL, BOOL, False, "frames are in flight to the client on the channel"),
    Field("channel_close_to_client", PER_CHANNEL, BOOL, False,
          "a channel.close is in flight to the client on the channel (ER-1)"),
    Field("sent_after_close", PER_CHANNEL, BOOL, False,
          "a frame other than close-ok follows the last channel.close in flight to the client"),
    Field("view_status", PER_CHANNEL, INT, C_CLOSED, "the status of the client's view of the channel (C_*)"),
    Field("view_last_tag", PER_CHANNEL, INT, 0, "the last delivery tag the client read on the channel (DT-1)"),
    Field("open_ok_to_client", PER_CHANNEL, BOOL, False, "a channel.open-ok is in flight to the client"),
    Field("older_frames_ahead", PER_CHANNEL, BOOL, False, "frames (an older channel's) are ahead of that open-ok"),
    Field("deliveries_to_client", PER_TAG, BOOL, False,
          "a delivery of the tag is in flight to the client behind the open-ok (all of them without one: "
          "the deliveries of the broker's channel now)"),
    Field("open_to_broker", PER_CHANNEL, BOOL, False, "a channel.open is in flight to the broker"),
    Field("frame_ahead_of_open", PER_CHANNEL, BOOL, False,
          "a frame other than close-ok is ahead of the first channel.open in flight to the broker"),
    Field("frame_behind_open", PER_CHANNEL, BOOL, False,
          "a frame other than close-ok and channel.open is behind the first channel.open in flight"),
    Field("other_frames_to_broker", PER_CHANNEL, BOOL, False,
          "a frame other than close-ok and channel.open is in flight to the broker at all"),
    Field("view_mode", PER_CHANNEL, INT, MODE_NONE, "the mode the client asked for (MODE_*)"),
    Field("view_publish_count", PER_CHANNEL, INT, 0, "the client's publish count in confirm mode (PC-1)"),
    Field("view_confirmed", PER_PUBLISH, BOOL, False, "the client saw the publish confirmed"),
    Field("single_confirms_in_flight", PER_PUBLISH, BOOL, False,
          "a confirm of the number, not multiple, is in flight to the client behind the open-ok (all of "
          "them without one: the broker's channel's)"),
    Field("multiple_confirm_in_flight", PER_CHANNEL, INT, 0,
          "the highest number of a multiple confirm in flight to the client behind the open-ok (0: none)"),
    Field("first_select_to_broker", PER_CHANNEL, INT, 0,
          "the first confirm.select or tx.select in flight to the broker (0: none)"),
    Field("publishes_behind_select", PER_CHANNEL, INT, 0,
          "the basic.publish frames behind that select when it is confirm.select (else 0)"),
    Field("publishes_to_broker", PER_CHANNEL, INT, 0, "the basic.publish frames in flight to the broker"),
    Field("queue_exists", PER_QUEUE, BOOL, False, "the queue exists"),
    Field("queue_durable", PER_QUEUE, BOOL, False, "the queue is durable (DU-1)"),
    Field("queue_owner", PER_QUEUE, INT, 0,
          "the queue's exclusive owner, connection index + 1; 0 when not exclusive (DU-4)"),
    Field("in_round_robin", PER_CONSUMER, BOOL, False, "the consumer is in its queue's round-robin (DS-1)"),
    Field("ready", PER_COPY, BOOL, False, "the copy with that enqueue position (key) is ready in the queue (RQ-1)"),
    Field("ahead_in_queue", PER_COPY_PAIR, BOOL, False,
          "both copies are ready in the queue, the first ahead of the second (RQ-1)"),
    Field("redelivered", PER_COPY, BOOL, False, "the ready copy is marked redelivered (RQ-2)"),
    Field("away", PER_COPY, BOOL, False,
          "the ready copy was requeued behind its channel's limiter's resume and its queue has not taken the "
          "requeue yet: no delivery takes it (spec.interleavings)"),
    Field("ever_delivered", PER_COPY, BOOL, False, "the copy was delivered at least once (ghost, RQ-2)"),
    Field("enqueued", PER_QUEUE, INT, 0, "copies ever enqueued in the queue; the next key is enqueued + 1"),
    Field("born", PER_QUEUE, INT, 0,
          "``enqueued`` when the queue was last declared: keys up to it were a deleted queue's"),
    Field("on_disk", PER_COPY, BOOL, False, "the copy's record is on disk (PC-5, DU-2)"),
    Field("tag_queue", PER_TAG, INT, -1, "the queue of the copy outstanding or held back under the tag (-1: none)"),
    Field("tag_key", PER_TAG, INT, 0, "that copy's key (0: none)"),
    Field("tx_settle_kind", PER_TAG, INT, -1, "how a held-back settlement of the tag settles it (SETTLE_*; -1: none)"),
    Field("named_by_connection", PER_COPY, INT, -1, "the connection of the live tag naming the copy (ghost; -1: none)"),
    Field("named_by_channel", PER_COPY, INT, -1, "that tag's channel (ghost; -1: none)"),
    Field("named_by_tag", PER_COPY, INT, 0,
          "that tag (ghost; 0: none): the three are the inverse of (tag_queue, tag_key)"),
    Field("published", PER_CONNECTION, INT, 0,
          "messages the connection's client has published; (connection, n) is its n-th"),
    Field("publish_in_flight", PER_MESSAGE, BOOL, False, "a basic.publish of the message is in flight to the broker"),
    Field("publish_in_flight_twice", PER_MESSAGE, BOOL, False, "two or more are"),
    Field("tx_held_by_channel", PER_MESSAGE, INT, 0,
          "the channel whose open transaction holds the message back (0: none, TX-2)"),
    Field("tx_held_twice", PER_MESSAGE, BOOL, False, "open transactions hold the message back more than once"),
    Field("taken_by_queue", PER_MESSAGE, BOOL, False,
          "some queue took a copy of the message (ghost: a copy carries it)"),
    Field("prefetch", PER_CHANNEL, INT, 0, "the per-consumer limit of consumers started later (PF-2)"),
    Field("global_limit", PER_CHANNEL, INT, 0, "the channel's global limit (0: none, PF-2)"),
    Field("volume", PER_CHANNEL, INT, 0, "the deliveries the global limit counts (may go below 0, PF-3)"),
    Field("qos_excess", PER_CHANNEL, INT, 0, "ghost qos_excess (PF-5)"),
    Field("qos_uncounted", PER_CHANNEL, INT, 0, "ghost qos_uncounted (TX-3, PF-5)"),
    Field("consumer_outstanding", PER_CHANNEL, INT, 0,
          "ghost counter: outstanding consumer deliveries (former consumers' too)"),
    Field("consumer_held_back", PER_CHANNEL, INT, 0,
          "ghost counter: consumer deliveries held back by an open transaction"),
    Field("consumer_deliveries", PER_CONSUMER, INT, 0,
          "ghost counter: the consumer's deliveries, outstanding or held back"),
    Field("consumer_no_ack", PER_CONSUMER, BOOL, False, "the consumer is in automatic mode (no_ack)"),
    Field("consumer_limit", PER_CONSUMER, INT, 0, "the consumer's own limit (0: none, PF-2)"),
    Field("message_connection", PER_COPY, INT, 0,
          "the connection of the copy's message (set at enqueue, never changed)"),
    Field("message_number", PER_COPY, INT, 0, "n of the copy's message (connection, n)"),
    Field("persistent", PER_COPY, BOOL, False, "the copy is persistent (PC-5, DU-2)"),
    Field("holds_confirm", PER_COPY, BOOL, False,
          "the copy holds up its own message's publish's confirm: not on disk (PC-5)"),
    Field("message_acked", PER_MESSAGE, BOOL, False, "the broker confirmed the message with basic.ack (ghost, PC-10)"),
    Field("unconfirmed_publish_channel", PER_MESSAGE, INT, 0,
          "the channel of the message's unconfirmed publish that may still be acked (0: none or nacked, "
          "PC-6); a message is published once, so this is a function"),
    Field("unconfirmed_publish_seq", PER_MESSAGE, INT, 0, "that publish's sequence number (0: none)"),
    Field("dead_letter_target", PER_QUEUE, BOOL, False,
          "the queue is some queue's dead-letter target (rigid: a configuration constant)"),
    Field("lost_in_crash", PER_COPY, BOOL, False, "a crash lost the copy: live and not on disk (ghost, PC-10, DU-2)"),
    Field("auto_in_flight_on", PER_COPY, INT, 0,
          "the connection (index + 1) an automatic-mode delivery of the copy is in flight on, not yet read "
          "(conn.auto, AM-2); 0: none"),
    Field("gone_this_life", PER_COPY, BOOL, False,
          "the copy is gone in this life: a fate since the last restart that recovered it (not in "
          "``revived``), or in flight in automatic mode, or on its way to its channel in automatic mode "
          "(``sending_key``; ghost, TX-3)"),
    # The delivery a queue is sending (spec.state.Queue.sending, broker.deliver): an automatic-mode
    # delivery under a global limit is two steps, the limiter's yes and the channel numbering it (PF-3).
    Field("sending_key", PER_QUEUE, INT, 0,
          "the key of the queue's copy that the global limiter of a channel admitted for an automatic-mode "
          "consumer of it and that the channel has not numbered yet: it left the queue and is on its way "
          "(PF-3, AM-2); 0: none"),
    Field("sending_connection", PER_QUEUE, INT, -1, "the connection of the channel it is on its way to (-1: none)"),
    Field("sending_channel", PER_QUEUE, INT, 0, "that channel (0: none)"),
    Field("sending_consumer", PER_QUEUE, INT, 0,
          "the consumer tag it goes to, on that channel (0: none; the channel writes it even if the consumer "
          "was cancelled since)"),
)

NAMES = tuple(f.name for f in FIELDS)
SORTS: dict[str, z3.SortRef] = {f.name: f.z3_sort for f in FIELDS}
# What an index the spec state does not have maps to, per array field: a closed, clean channel.
DEFAULTS: dict[str, bool | int] = {f.name: f.default for f in FIELDS if f.indices}
ARITY: dict[str, int] = {f.name: len(f.indices) for f in FIELDS if f.indices}


def _items(self) -> Iterator[tuple[str, z3.ExprRef]]:
    """Each field's name and term, in the order of ``FIELDS``."""
    for name in NAMES:
        yield name, getattr(self, name)


def _replace(self, **changes: z3.ExprRef) -> "Z3State":
    """This state with the fields named in ``changes`` replaced."""
    values = dict(self.items())
    values.update(changes)
    return Z3State(**values)


def _term_type(f: Field) -> type:
    return z3.ArrayRef if f.indices else z3.BoolRef if f.sort == BOOL else z3.ArithRef


# A frozen dataclass with a field per entry of ``FIELDS``, in that order (``fresh`` and the relations make
# their terms in it, and Z3's search follows the order terms were made in).
Z3State = make_dataclass(
    "Z3State", [(f.name, _term_type(f), field(metadata={"indices": f.indices, "doc": f.doc})) for f in FIELDS],
    frozen=True,
    namespace={"__doc__": "One state of the family as Z3 terms (symbolic, or concrete from ``abstract``); "
                          "its fields are ``FIELDS``.",
               "__module__": __name__, "items": _items, "replace": _replace})


def fresh(prefix: str) -> Z3State:
    """A symbolic state whose fields are new constants named ``prefix.field``."""
    return Z3State(**{f.name: z3.Const(f"{prefix}.{f.name}", f.z3_sort) for f in FIELDS})


def same(x: Z3State, y: Z3State) -> z3.BoolRef:
    """The two states are equal, field by field (arrays extensionally)."""
    return z3.And([a == b for (_, a), (_, b) in zip(x.items(), y.items())])


_CONST: dict = {}


def _const_array(name: str, arity: int) -> z3.ArrayRef:
    """The array of ``name`` that maps every index to its default (made once: terms are immutable)."""
    got = _CONST.get(name)
    if got is None:
        got = _CONST[name] = _make_const_array(name, arity)
    return got


def _make_const_array(name: str, arity: int) -> z3.ArrayRef:
    default = DEFAULTS[name]
    value = z3.BoolVal(default) if isinstance(default, bool) else z3.IntVal(default)
    idx = [z3.Int(f"i{k}") for k in range(arity)]
    return z3.Lambda(idx, value) if arity > 1 else z3.K(INT, value)


def _array(name: str, arity: int, entries: dict) -> z3.ArrayRef:
    """A concrete array: the default everywhere but at ``entries`` (index tuple -> value).

    Built with Z3's C API directly (``Z3_mk_store_n``) and cached numerals: the agreement check
    abstracts every state it visits, and ``z3.Store``'s Python-side sort checks cost most of that."""
    arr = _const_array(name, arity)
    default = DEFAULTS[name]
    ctx = arr.ctx
    ref = ctx.ref()
    idx = (z3.Ast * arity)()
    for index, value in sorted(entries.items()):
        if value != default:
            for k, i in enumerate(index):
                idx[k] = _numeral(i)
            # Wrapped at once: the wrapper holds a reference, so Z3 keeps the term alive.
            arr = z3.ArrayRef(z3.Z3_mk_store_n(ref, arr.as_ast(), arity, idx, _numeral(value)), ctx)
    return arr


_NUMERALS: dict = {}


def _numeral(value) -> z3.Ast:
    """The Z3 term of an int or a bool, made once (the Python object is kept so the term stays alive)."""
    key = (type(value) is bool, value)
    got = _NUMERALS.get(key)
    if got is None:
        got = _NUMERALS[key] = z3.BoolVal(value) if isinstance(value, bool) else z3.IntVal(value)
    return got.as_ast()


def message(msg: int) -> tuple[int, int]:
    """A spec message id as the model's pair (connection, n): the n-th message published on that
    connection (spec.frames names it c * MSG_STRIDE + n). A pair keeps "a connection's next message is
    new" linear and free of the stride, which the spec needs only to keep ids apart below 2**32."""
    return divmod(msg, MSG_STRIDE)


def project(state) -> dict:
    """The family's fields of a spec ``State`` as plain Python values (index tuple -> value dicts)."""
    values: dict = {name: {} for name in DEFAULTS}
    for c, conn in enumerate(state.conns):
        values["broker_end_closed"][(c,)] = conn.broker_closed
        values["client_connection_status"][(c,)] = conn.status
        values["connection_close_to_client"][(c,)] = any(f.method in (CONNECTION_CLOSE, CONNECTION_CLOSE_OK)
                                                         for f in conn.to_client[0])
        for ch, fifo in enumerate(conn.to_client):
            values["frames_to_client"][(c, ch)] = bool(fifo)
            values["channel_close_to_client"][(c, ch)] = any(f.method == CHANNEL_CLOSE for f in fifo)
            values["sent_after_close"][(c, ch)] = sent_after_close(fifo)
        for ch, fifo in enumerate(conn.to_broker):
            values["frames_to_broker"][(c, ch)] = len(fifo)
            (values["open_to_broker"][(c, ch)], values["frame_ahead_of_open"][(c, ch)],
             values["frame_behind_open"][(c, ch)], values["other_frames_to_broker"][(c, ch)]) = opens_in_flight(fifo)
        for ch, fifo in enumerate(conn.to_client):
            values["open_ok_to_client"][(c, ch)], values["older_frames_ahead"][(c, ch)], tags = open_ok_in_flight(fifo)
            for t in tags:
                values["deliveries_to_client"][(c, ch, t)] = True
            single, values["multiple_confirm_in_flight"][(c, ch)] = confirms_in_flight(fifo)
            for n in single:
                values["single_confirms_in_flight"][(c, ch, n)] = True
        for ch, view in enumerate(conn.clients, start=1):
            values["view_status"][(c, ch)], values["view_last_tag"][(c, ch)] = view.status, view.last_tag
            values["view_mode"][(c, ch)], values["view_publish_count"][(c, ch)] = view.mode, view.pub_seq
            for s in view.confirms:
                values["view_confirmed"][(c, ch, s)] = True
            (values["first_select_to_broker"][(c, ch)], values["publishes_behind_select"][(c, ch)],
             values["publishes_to_broker"][(c, ch)]) = selects_in_flight(conn.to_broker[ch])
        for ch, channel in enumerate(conn.channels, start=1):
            values["channel_status"][(c, ch)] = channel.status
            values["channel_mode"][(c, ch)] = channel.mode
            values["publish_seq"][(c, ch)] = channel.publish_seq
            for p in channel.unconfirmed:
                values["unconfirmed"][(c, ch, p.seq)] = True
            for s in channel.confirmed:
                values["confirmed"][(c, ch, s)] = True
            values["tx_holds_back"][(c, ch)] = bool(channel.tx_pubs or channel.tx_settles)
            values["commit_pending"][(c, ch)] = channel.commit_pending
            values["next_tag"][(c, ch)] = channel.next_tag
            for u in channel.unacked:
                values["outstanding"][(c, ch, u.tag)] = True
                values["tag_queue"][(c, ch, u.tag)], values["tag_key"][(c, ch, u.tag)] = u.queue, u.key
            for kind, u in channel.tx_settles:
                values["tx_settled"][(c, ch, u.tag)] = True
                values["tag_queue"][(c, ch, u.tag)], values["tag_key"][(c, ch, u.tag)] = u.queue, u.key
                values["tx_settle_kind"][(c, ch, u.tag)] = kind
            for u in channel.unacked + tuple(u for _, u in channel.tx_settles):
                # The ghost inverse: the tag naming each copy (were two to name one copy, the last
                # would win, and copies_conserved would be false of the abstraction, as of the state).
                values["named_by_connection"][(u.queue, u.key)], values["named_by_channel"][(u.queue, u.key)] = c, ch
                values["named_by_tag"][(u.queue, u.key)] = u.tag
                if u.consumer:
                    values["delivered_to_consumer"][(c, ch, u.tag)] = True
            for k in channel.consumers:
                values["consumers"][(c, ch, k.tag)] = True
                values["consumer_no_ack"][(c, ch, k.tag)], values["consumer_limit"][(c, ch, k.tag)] = k.no_ack, k.limit
            values["prefetch"][(c, ch)], values["global_limit"][(c, ch)], values["volume"][(c, ch)] = \
                channel.prefetch, channel.global_limit, channel.volume
            values["qos_excess"][(c, ch)], values["qos_uncounted"][(c, ch)] = channel.qos_excess, channel.qos_uncounted
            # The ghost counters (prefetch_respected's counts): consumer deliveries outstanding, held
            # back, and per consumer tag (a former consumer's are marked -tag and counted by no tag).
            values["consumer_outstanding"][(c, ch)] = sum(1 for u in channel.unacked if u.consumer)
            values["consumer_held_back"][(c, ch)] = sum(1 for _, u in channel.tx_settles if u.consumer)
            for u in channel.unacked + tuple(u for _, u in channel.tx_settles):
                if u.consumer > 0:
                    counted = values["consumer_deliveries"]
                    counted[(c, ch, u.consumer)] = counted.get((c, ch, u.consumer), 0) + 1
    for q, queue in enumerate(state.queues):
        values["queue_exists"][(q,)] = queue.exists
        values["queue_durable"][(q,)] = queue.durable
        values["queue_owner"][(q,)] = queue.owner
        values["enqueued"][(q,)] = queue.enqueued
        values["born"][(q,)] = queue.born
        for i, e in enumerate(queue.ready):
            values["ready"][(q, e.key)] = True
            values["redelivered"][(q, e.key)] = e.redelivered
            for later in queue.ready[i + 1:]:
                values["ahead_in_queue"][(q, e.key, later.key)] = True
        for key, _, _ in queue.away:
            values["away"][(q, key)] = True
        for c, ch, k in queue.ring:
            values["in_round_robin"][(c, ch, k)] = True
    for q, key in state.delivered:
        values["ever_delivered"][(q, key)] = True
    for q, key, _ in state.disk:
        values["on_disk"][(q, key)] = True
    for c, conn in enumerate(state.conns):
        values["published"][(c,)] = conn.published
        for fifo in conn.to_broker:
            for frame in fifo:
                if frame.method == BASIC_PUBLISH:
                    msg = message(frame.msg)
                    values["publish_in_flight_twice"][msg] = values["publish_in_flight"].get(msg, False)
                    values["publish_in_flight"][msg] = True
        for ch, channel in enumerate(conn.channels, start=1):
            for pub in channel.tx_pubs:
                values["tx_held_twice"][message(pub[4])] = message(pub[4]) in values["tx_held_by_channel"]
                values["tx_held_by_channel"][message(pub[4])] = ch
    for msg in copy_messages(state):
        values["taken_by_queue"][message(msg)] = True
    # Each copy's message and persistent flag, wherever it is now (a copy that left records a fate, so
    # every copy ever enqueued is somewhere below; a disk record is of a persistent copy).
    carried = [(f[0], f[1], f[3], f[4]) for f in state.fates]
    carried += [(q, key, msg, True) for q, key, msg in state.disk]
    for conn in state.conns:
        carried += [(d[2], d[3], d[4], d[5]) for d in conn.auto]
        for channel in conn.channels:
            carried += [(u.queue, u.key, u.msg, u.persistent) for u in channel.unacked]
            carried += [(u.queue, u.key, u.msg, u.persistent) for _, u in channel.tx_settles]
    for q, queue in enumerate(state.queues):
        carried += [(q, e.key, e.msg, e.persistent) for e in queue.ready]
        if queue.sending:
            e = queue.sending[3]
            carried.append((q, e.key, e.msg, e.persistent))
        if queue.dead_letter:
            values["dead_letter_target"][(queue.dead_letter - 1,)] = True
    for q, key, msg, persistent in carried:
        values["message_connection"][(q, key)], values["message_number"][(q, key)] = message(msg)
        values["persistent"][(q, key)] = bool(persistent)
    for msg in state.confirmed_msgs:
        values["message_acked"][message(msg)] = True
    for c, conn in enumerate(state.conns):
        for ch, channel in enumerate(conn.channels, start=1):
            for p in channel.unconfirmed:
                for w in p.waits:
                    # a copy holds up its own message's publish (a copy of another message in the
                    # waits would not count: unwritten_copies_hold_their_confirm asks for its own)
                    if (values["message_connection"].get(w), values["message_number"].get(w)) == message(p.msg):
                        values["holds_confirm"][w] = True
                if not p.nack:
                    values["unconfirmed_publish_channel"][message(p.msg)] = ch
                    values["unconfirmed_publish_seq"][message(p.msg)] = p.seq
    for f in state.fates:
        if f[2] == FATE_LOST_CRASH:
            values["lost_in_crash"][(f[0], f[1])] = True
    revived = set(state.revived)
    for f in state.fates:
        if (f[0], f[1]) not in revived:
            values["gone_this_life"][(f[0], f[1])] = True
    for c, conn in enumerate(state.conns):
        for d in conn.auto:
            values["gone_this_life"][(d[2], d[3])] = True
            values["auto_in_flight_on"][(d[2], d[3])] = c + 1
    for q, queue in enumerate(state.queues):
        if queue.sending:           # on its way to its channel in automatic mode: its fate is sure (AM-2)
            c, ch, ctag, e = queue.sending
            values["gone_this_life"][(q, e.key)] = True
            values["sending_key"][(q,)], values["sending_connection"][(q,)] = e.key, c
            values["sending_channel"][(q,)], values["sending_consumer"][(q,)] = ch, ctag
    values["broker_up"] = state.broker_up
    values["channels_per_connection"] = len(state.conns[0].channels) if state.conns else 0
    return values


def abstract(state) -> Z3State:
    """The abstraction function: a spec ``State`` as a concrete Z3 state of this family."""
    values = project(state)
    return Z3State(**{f.name: _array(f.name, len(f.indices), values[f.name]) if f.indices
                      else z3.BoolVal(values[f.name]) if f.sort == BOOL else z3.IntVal(values[f.name])
                      for f in FIELDS})
