"""RabbitMQ 3.10.8's own interleavings, as steps of the spec's transition relation (DESIGN.md, "One machine").

RabbitMQ runs a connection's reader, each channel, each channel's limiter and each queue as processes of
their own, which talk by messages; where one message can overtake another, RabbitMQ shows outcomes that
a single step of the broker does not. Each such outcome observed on RabbitMQ 3.10.8 is modelled here, so
that the explorer, `rabbitproof check`, the Z3 model and the trace checker share it; what is not (yet) is
listed in docs/reference/differences.md with what a user's answer loses by it.

The queue's priorities. A queue process takes its messages by priority (gen_server2): a channel's
``requeue`` is an ordinary message, the ``resume`` of a channel's limiter a prioritised one. A channel
that requeues deliveries (basic.nack or basic.reject with requeue, basic.recover) sends the requeue to
the queue first, then tells its limiter, which, when the settlement frees a place under a reached
channel-wide limit (PF-2, PF-3), sends ``resume`` to the queues it blocked. When both wait in the
queue's mailbox, the resume goes first: the freed places can go to messages behind the requeued ones
before these are back at their places (RQ-1), so a consumer sees a later message before the one it
requeued (seen in CI: docs/reference/differences.md, "The global limiter resumes before the requeue").
The spec has the requeued copies ready at their places but *away* (``Queue.away``): no delivery, no
basic.get and no purge takes them (``storage.next_ready``), while the queue delivers the copies behind
them; ``BrokerRequeue`` is the queue taking the requeue, after which they are ready like any other.
Frames of other channels may reach the queue before the requeue (a basic.get finds the queue without
the copies, a purge leaves them, a delete loses them with the queue); a basic.get, queue.purge or
queue.delete of the requeueing channel itself reaches the queue behind its requeue, so it waits for it
(``frame_waits``). Left out: that channel's own publishes reach the queue behind the requeue too, but
the spec may deliver them before the copies are back (docs/reference/differences.md). A per-consumer
limit has no such race: the queue counts the requeue itself.
"""
from __future__ import annotations

from .frames import BASIC_GET, QUEUE_DELETE, QUEUE_PURGE
from .state import MODE_TX, State

# The methods of a channel that reach a queue's process and read its ready copies (``frame_waits``).
_READS_THE_QUEUE = (BASIC_GET, QUEUE_PURGE, QUEUE_DELETE)


def resumes_first(before, after) -> bool:
    """Whether the requeue of a settlement that took broker channel ``before`` to ``after`` reaches its
    queues behind its limiter's resume: the channel has a channel-wide limit that was reached and is
    no longer (PF-2, PF-3). A transactional channel's settlements wait for the commit (TX-3), which the
    recorded runs did not show racing, so they are not modelled here."""
    limit = before.global_limit
    return bool(limit) and before.mode != MODE_TX and before.volume >= limit > after.volume


def requeue_waits(state: State) -> bool:
    """Whether some queue has copies away: a requeue waits in its mailbox behind a resume."""
    for queue in state.queues:
        if queue.away:
            return True
    return False


def frame_waits(state: State, c: int, ch: int) -> bool:
    """Whether the oldest frame channel (c, ch) sent reads a queue (basic.get, queue.purge, queue.delete)
    in which copies that channel requeued are away: it reaches the queue behind the requeue, so it is
    taken after the queue took the requeue (``BrokerRequeue``)."""
    fifo = state.conns[c].to_broker[ch]
    if not fifo or fifo[0].method not in _READS_THE_QUEUE:
        return False
    q = fifo[0].queue
    if q >= len(state.queues):
        return False
    for _, by_conn, by_ch in state.queues[q].away:
        if by_conn == c and by_ch == ch:
            return True
    return False


def can_requeue(state: State, a) -> bool:
    """BrokerRequeue: the broker is up and a requeue waits behind a resume."""
    return state.broker_up and requeue_waits(state)


def take_requeue(state: State) -> State:
    """BrokerRequeue: the queues take the requeues that waited behind the resume; the copies, at their
    places since the requeue, can be delivered again (RQ-1, RQ-2)."""
    return state._replace(queues=tuple(queue._replace(away=()) if queue.away else queue for queue in state.queues))
