"""The observer of `rabbitproof check`'s machine (rabbitproof.check.questions.SetupMachine): what the
applications believe and have done (``Ghost``), updated beside every step of the spec (``observe``), and
where each message still is (``live_messages``).

It is a history variable, as the spec's own ghosts are: the spec decides what can happen, the observer only
records it. Its rules are those rabbitproof.check.questions states (when a publisher believes a message
delivered, when a consumer has processed one). It runs for every step of every search `check` makes, so it
is a module of plain functions over tuples, one the compiled spec (rabbitproof/compiled.py) compiles too.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

from rabbitproof.spec import actions as A
from rabbitproof.spec.frames import (
    BASIC_ACK, BASIC_DELIVER, BASIC_GET_OK, BASIC_NACK, BASIC_PUBLISH, BASIC_RETURN, BROKER, METHODS, MSG_STRIDE,
    TX_COMMIT_OK,
)
from rabbitproof.spec.state import C_OPEN, CONN_UP, MODE_CONFIRM, MODE_TX, State, add_sorted

PROCESSED_CAP = 2       # processed twice is the answer to question 2: counting further adds only states


class Ghost(NamedTuple):
    """What the applications believe and have done: canonical sorted tuples, like the spec's state."""

    tx_open: tuple          # (conn, ch, msg) published in the transaction still open
    committing: tuple       # (conn, ch, k, msgs): the k-th tx.commit sent on the channel and not yet answered,
                            # with the messages it commits; a commit-ok answers k = 1, the oldest (TX-7)
    awaiting: tuple         # (conn, ch, seq, msg) confirm-mode publishes not yet confirmed (PC-1)
    believed: tuple         # msgs the publisher believes delivered
    returned: tuple         # msgs that came back to their publisher (RT-3)
    held: tuple             # (conn, ch, tag, msg) manual-mode deliveries a consumer holds
    counts: tuple           # (msg, processed) of the messages processed, capped at PROCESSED_CAP; how often a
                            # message was delivered is no question's (the loop question's is judged on cycles)
    last: tuple             # (conn, ch, publisher, msg): the latest message of each publisher a consumer
                            # saw on the channel it has open now
    disorder: bool          # a consumer received a message after a later one of the same publisher
    prepared: tuple         # (conn, ch) that sent their basic.qos on the channel they have open now
    worked: tuple = ()      # (conn, ch, tag): held deliveries whose work is done, not yet acked (work before ack)
    copies: tuple = ()      # (msg, original): a republished message and the message it publishes again
    redo: tuple = ()        # (conn, original): messages their publisher knows failed and will publish again


NOTHING_YET = Ghost((), (), (), (), (), (), (), (), False, (), ())


def original(ghost: Ghost, msg: int) -> int:
    """The message ``msg`` is a copy of, republished (itself when it is no republish): the questions count
    per message, whichever of its publishes a copy came from."""
    for copy, first in ghost.copies:
        if copy == msg:
            return first
    return msg


def republished(ghost: Ghost, c: int) -> int:
    """How many republishes publisher ``c`` has made or owes: at most its ``republish``."""
    return sum(1 for copy, _ in ghost.copies if copy // MSG_STRIDE == c) + sum(1 for e in ghost.redo if e[0] == c)


def _open(state: State, c: int, ch: int) -> bool:
    conn = state.conns[c]
    return conn.status == CONN_UP and conn.clients[ch - 1].status == C_OPEN


def _still_held(state: State, e: tuple) -> bool:
    """Whether the delivery (conn, ch, tag, ...) is still held by its client, on a channel still open."""
    return _open(state, e[0], e[1]) and e[2] in state.conns[e[0]].clients[e[1] - 1].held


def bump(counts: tuple, msg: int) -> tuple:
    """counts with msg processed once more (capped)."""
    for i, (m, p) in enumerate(counts):
        if m == msg:
            if p >= PROCESSED_CAP:
                return counts
            return counts[:i] + ((m, p + 1),) + counts[i + 1:]
    return tuple(sorted(counts + ((msg, 1),)))


def observe(g: Ghost, before: State, after: State, action: Any, labels: tuple, works: tuple = (),
            republish: tuple = ()) -> Ghost:
    """The ghost after ``action`` took ``before`` to ``after`` with ``labels`` on the wire (``works``:
    per connection, whether its consumer did the work before the ack, so the ack processes nothing;
    ``republish``: per connection, how many times in all its publisher publishes a message again).

    Beliefs, processing and order are per message: a republished copy counts as the message it publishes
    again (``original``). A publisher learns that a message failed when it is nacked, returned, or its
    channel goes before the answer came (the publish or the commit holding it); with republishes left,
    it owes the message again (``redo``) and its next publish is that copy."""
    tx_open, committing, awaiting, believed, returned, held, counts, last, disorder, prepared, worked, copies, redo = g
    of: Callable[[int], int] = (lambda m: m) if not copies else (lambda m: original(g, m))
    failed: list[tuple[int, int]] = []          # (conn, original) learned failed at this step
    kind = type(action)
    if kind is A.ClientQos:
        prepared = add_sorted(prepared, (action.conn, action.ch))
    elif isinstance(action, A.ClientPublish):      # the spec's publish, or the machine's republish of a message
        c, ch = action.conn, action.ch
        msg = next(w.frame.msg for w in labels if w.to_broker and w.frame.method == BASIC_PUBLISH)
        again = next((e for e in redo if e[0] == c), None)
        if again is not None:                 # the message it owes again: this publish is its copy
            redo = tuple(e for e in redo if e is not again)
            copies = add_sorted(copies, (msg, again[1]))
        view = after.conns[c].clients[ch - 1]
        if view.mode == MODE_CONFIRM:
            awaiting = tuple(sorted(awaiting + ((c, ch, view.pub_seq, msg),)))
        elif view.mode == MODE_TX:
            tx_open = tuple(sorted(tx_open + ((c, ch, msg),)))
        else:
            believed = add_sorted(believed, again[1] if again is not None else msg)   # fire and forget
        of = (lambda m: m) if not copies else (lambda m: original(g._replace(copies=copies), m))
    elif kind is A.ClientTxCommit:
        c, ch = action.conn, action.ch
        mine = tuple(e[2] for e in tx_open if e[:2] == (c, ch))
        tx_open = tuple(e for e in tx_open if e[:2] != (c, ch))
        unanswered = sum(1 for e in committing if e[:2] == (c, ch))
        committing = tuple(sorted(committing + ((c, ch, unanswered + 1, mine),)))
    elif kind is A.ClientTxRollback:
        tx_open = tuple(e for e in tx_open if e[:2] != (action.conn, action.ch))
    elif kind is A.ClientAck and not (works and works[action.conn]):
        c, ch = action.conn, action.ch
        still = set(after.conns[c].clients[ch - 1].held)
        for e in held:
            if e[:2] == (c, ch) and e[2] not in still:
                counts = bump(counts, of(e[3]))            # acknowledged: the work was done
    elif kind is A.ClientReceive:
        for wire in labels:
            if wire.to_broker:
                continue
            frame, c = wire.frame, wire.conn
            method, ch = frame.method, frame.channel
            if method in (BASIC_DELIVER, BASIC_GET_OK):
                tag, msg = frame.delivery_tag, frame.msg
                processed = False
                if before.conns[c].clients[ch - 1].status == C_OPEN:
                    if tag in after.conns[c].clients[ch - 1].held:
                        held = tuple(sorted(held + ((c, ch, tag, msg),)))
                    else:
                        processed = True        # automatic acks: received is processed
                msg = of(msg)
                if processed:
                    counts = bump(counts, msg)
                publisher = msg // MSG_STRIDE
                key = (c, ch, publisher)
                seen = next((e for e in last if e[:3] == key), None)
                if seen is None:
                    last = tuple(sorted(last + (key + (msg,),)))
                elif msg < seen[3]:
                    disorder = True
                elif msg > seen[3]:
                    last = tuple(sorted(tuple(e for e in last if e is not seen) + (key + (msg,),)))
            elif method in (BASIC_ACK, BASIC_NACK):
                tag, multiple = frame.delivery_tag, frame.multiple
                covered = tuple(e for e in awaiting if e[:2] == (c, ch) and (e[2] <= tag if multiple else e[2] == tag))
                awaiting = tuple(e for e in awaiting if e not in covered)
                for e in covered:
                    if e[3] in returned:
                        continue                # its return told the publisher already (RT-3)
                    if method == BASIC_ACK:
                        believed = add_sorted(believed, of(e[3]))
                    else:
                        failed.append((c, of(e[3])))       # nacked: not delivered (PC-6)
            elif method == BASIC_RETURN:
                msg = frame.msg
                returned = add_sorted(returned, msg)
                believed = tuple(m for m in believed if m != of(msg))
                failed.append((c, of(msg)))
            elif method == TX_COMMIT_OK:          # it answers the oldest commit of its channel (TX-7)
                oldest = next((e for e in committing if e[:3] == (c, ch, 1)), None)
                if oldest is not None:
                    committing = tuple(sorted((e[0], e[1], e[2] - 1, e[3]) if e[:2] == (c, ch) else e
                                              for e in committing if e is not oldest))
                    for msg in oldest[3]:
                        if msg not in returned:
                            believed = add_sorted(believed, of(msg))
    # A channel or connection gone: its publisher stops waiting (it knows: what it waited for failed, or
    # may have), its consumer's tags are void.
    if awaiting:
        gone = [e for e in awaiting if not _open(after, e[0], e[1])]
        if gone:
            awaiting = tuple(e for e in awaiting if e not in gone)
            failed.extend((e[0], of(e[3])) for e in gone if e[3] not in returned)
    if committing:
        gone = [e for e in committing if not _open(after, e[0], e[1])]
        if gone:
            committing = tuple(e for e in committing if e not in gone)
            failed.extend((e[0], of(m)) for e in gone for m in e[3] if m not in returned)
    if tx_open:
        gone = [e for e in tx_open if not _open(after, e[0], e[1])]
        if gone:
            tx_open = tuple(e for e in tx_open if e not in gone)
            failed.extend((e[0], of(e[2])) for e in gone)
    if held:
        held = tuple(e for e in held if _still_held(after, e))
    if last:
        last = tuple(e for e in last if _open(after, e[0], e[1]))
    if prepared:
        prepared = tuple(e for e in prepared if _open(after, e[0], e[1]))
    if worked:
        worked = tuple(e for e in worked if _still_held(after, e))
    if failed and republish:
        for c, msg in failed:
            made = sum(1 for copy, _ in copies if copy // MSG_STRIDE == c) + sum(1 for e in redo if e[0] == c)
            if made < republish[c] and (c, msg) not in redo and msg not in believed:
                redo = add_sorted(redo, (c, msg))
    return Ghost(tx_open, committing, awaiting, believed, returned, held, counts, last, disorder, prepared, worked,
                 copies, redo)

# --- where a message still is --------------------------------------------------------------------

# What the broker writes carrying a message: a delivery, a get-ok, a return.
_CARRY_MESSAGES = frozenset(m.code for m in METHODS if "msg" in m.fields and m.sender == BROKER)


def live_messages(state: State) -> set[int]:
    """Every message of which a copy is still somewhere, or whose fate is still on its way to its
    publisher: ready in a queue, outstanding on a channel, in flight either way, held in a transaction,
    on disk (a restart brings it back, DU-2), or coming back in a basic.return (RT-3: the publisher will
    know it was not delivered)."""
    live = {msg for _, _, msg in state.disk}
    for queue in state.queues:
        live.update(e.msg for e in queue.ready)
    for conn in state.conns:
        live.update(a[4] for a in conn.auto)
        for fifo in conn.to_client:
            live.update(frame.msg for frame in fifo if frame.method in _CARRY_MESSAGES)
        for fifo in conn.to_broker:
            live.update(frame.msg for frame in fifo if frame.method == BASIC_PUBLISH)
        for channel in conn.channels:
            live.update(u.msg for u in channel.unacked)
            live.update(p[4] for p in channel.tx_pubs)
            live.update(u.msg for _, u in channel.tx_settles)
    return live
