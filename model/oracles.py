"""The oracle inputs of the Z3 relations (``model.actions``), declared once per action class: each
oracle's name, its Z3 sort, the value the agreement check (``model.agreement``) gives it when a step
does not set it, and what it is.

An oracle is a fact of the spec state outside the families of ``model.state`` that a relation's guard
or effect reads: which frame the broker takes, whether a tag is outstanding, whether the client's view
lets it send. ``model.actions`` makes a Z3 constant of each (``sorts``), the proofs leave them free, and
``model.agreement`` reads them from the concrete state (``values``). An oracle of BrokerTakeFrame named
as a field of the frame taken (``queue``, ``requeue``, ``prefetch_count``, ...: ``spec.frames.METHODS``)
is that field, copied by name.
"""
from __future__ import annotations

from dataclasses import dataclass

import z3

from rabbitproof.spec import actions as A

from .state import BOOL, CONSUMER, INT, MESSAGE, PER_CONSUMER, PER_COPY, QUEUE, TAG

# The broker's answer to a frame where it depends on state outside the families (ER-1): the values of
# BrokerTakeFrame's ``verdict``.
OK, CHANNEL_ERR, CONNECTION_ERR = 0, 1, 2


def _array(indices: tuple[str, ...], sort: z3.SortRef) -> z3.SortRef:
    """An oracle that is a Z3 array from ``indices`` (model.state's kinds of index) to ``sort``."""
    return z3.ArraySort(*[INT] * len(indices), sort)


@dataclass(frozen=True)
class Oracle:
    """One oracle of an action: its name, its Z3 sort, its value in the agreement check when the step
    does not set it (a bool, an int, a frozenset for an array of bools, a dict for an array of ints that
    is 0 elsewhere), and what it is."""

    name: str
    sort: z3.SortRef
    default: bool | int | frozenset | dict
    doc: str


# What a channel that is only closing keeps (storage.close_channel): BrokerTakeFrame's channel.close or
# channel error, and BrokerChannelError.
_KEEPS = (
    Oracle("keeps_any", BOOL, False, "the closing channel keeps some deliveries (``kept_tags`` is not empty)"),
    Oracle("kept_tags", _array((TAG,), BOOL), frozenset(),
           "the tags it keeps until close-ok: basic.get deliveries of queues it does not consume from (RQ-4)"),
)

_BROKER_TAKE_FRAME = (
    Oracle("method", INT, 0, "the method of the frame taken, the oldest in flight on the channel"),
    Oracle("immediate", BOOL, False, "basic.publish's immediate flag"),
    Oracle("exchange", INT, 0, "the exchange the frame names (basic.publish's; queue.bind's, the fanout one)"),
    Oracle("verdict", INT, OK, "the broker's answer where queues or tags decide it: OK, CHANNEL_ERR or CONNECTION_ERR"),
    Oracle("settled", BOOL, False, "a basic.ack, nack or reject settles at least one delivery"),
    Oracle("waits_for_requeue", BOOL, False,
           "a get, purge or delete waits for the channel's own requeue, behind a resume (spec.interleavings)"),
    Oracle("prefetch_size", INT, 0, "basic.qos's prefetch-size"),
    Oracle("requeue", BOOL, False, "a basic.nack or reject requeues, or basic.recover's requeue flag"),
    Oracle("commit_waits", BOOL, False, "tx.commit's commit-ok is a step of its own: a publish of it reaches a queue"),
    Oracle("tag", INT, 0, "the delivery tag a basic.ack, nack or reject names"),
    Oracle("multiple", BOOL, False, "the settlement's multiple flag"),
    Oracle("no_ack", BOOL, False, "basic.get's or basic.consume's no-ack flag"),
    Oracle("get_ok", BOOL, False, "a basic.get found a ready copy (basic.get-ok)"),
    *_KEEPS,
    Oracle("consumer_tag", INT, 0, "the consumer tag of basic.consume or basic.cancel"),
    Oracle("cancelled_consumers", _array(PER_CONSUMER, BOOL), frozenset(),
           "the consumers a queue.delete cancels (the deleted queue's), each told with basic.cancel"),
    Oracle("queue", INT, 0, "the queue the frame names (queue.declare, bind, purge, delete, basic.get, consume)"),
    Oracle("durable", BOOL, False, "queue.declare's durable flag"),
    Oracle("exclusive", BOOL, False, "queue.declare's or basic.consume's exclusive flag"),
    Oracle("answered", BOOL, False, "the broker wrote a frame on this channel (an answer, a channel.close)"),
    Oracle("copy_key", INT, 0, "the key of the copy a basic.get takes (the next ready one of its queue)"),
    Oracle("copies_added", _array((QUEUE,), INT), {},
           "how many new copies each queue takes (publishes, a commit's publishes, dead-lettered copies)"),
    Oracle("message_number", INT, 0, "the number n of the message (connection, n) a basic.publish carries"),
    Oracle("routed_messages", _array((MESSAGE,), BOOL), frozenset(),
           "the numbers of the connection's messages a queue took a first copy of (the publish's, a commit's)"),
    Oracle("prefetch_count", INT, 0, "basic.qos's prefetch-count"),
    Oracle("global_", BOOL, False, "basic.qos's global flag"),
    Oracle("outstanding_count", INT, 0,
           "the channel's outstanding deliveries, basic.get ones included (where a new global limit's volume starts)"),
    Oracle("consumer_deliveries_settled", INT, 0, "how many deliveries to consumers a settlement settles"),
    Oracle("settled_per_consumer", _array((CONSUMER,), INT), {},
           "per consumer tag, how many of its deliveries a settlement, basic.recover or tx.commit settles"),
    Oracle("volume_after_commit", INT, 0, "the channel's volume after a commit's runs (broker.commit_runs)"),
    Oracle("new_copy_message_connection", _array(PER_COPY, INT), {}, "the connection of each new copy's message"),
    Oracle("new_copy_message_number", _array(PER_COPY, INT), {}, "the number of each new copy's message"),
    Oracle("new_copy_persistent", _array(PER_COPY, BOOL), frozenset(), "the new copies that are persistent"),
    Oracle("open_to_broker_left", BOOL, False, "after the frame taken: a channel.open is in flight to the broker"),
    Oracle("frame_ahead_of_open_left", BOOL, False, "after it: a frame is ahead of the first channel.open in flight"),
    Oracle("frame_behind_open_left", BOOL, False, "after it: a frame is behind the first channel.open in flight"),
    Oracle("other_frames_to_broker_left", BOOL, False, "after it: a frame other than the lifecycle's is in flight"),
    Oracle("first_select_to_broker_left", INT, 0, "after it: the method of the first select in flight (0: none)"),
    Oracle("publishes_behind_select_left", INT, 0, "after it: the publishes in flight behind that select"),
)

_CLIENT_RECEIVE = (
    Oracle("readable", BOOL, False, "the client can read a frame on the channel (client.can_receive)"),
    Oracle("method", INT, 0, "the method of the frame read"),
    Oracle("more", BOOL, False, "another frame follows it on that channel"),
    Oracle("close_left", BOOL, False, "another channel.close is still in flight on that channel after it"),
    Oracle("auto", BOOL, False, "the frame is an automatic-mode delivery in flight on this connection (AM-2)"),
    Oracle("auto_queue", INT, 0, "the queue of that delivery's copy"),
    Oracle("auto_key", INT, 0, "the key of that delivery's copy"),
    Oracle("tag", INT, 0, "the delivery tag of a delivery read, or the number a confirm read acks"),
    Oracle("older_frames_ahead_left", BOOL, False, "after it: an older channel's frames are ahead of the open-ok"),
    Oracle("multiple", BOOL, False, "the multiple flag of a confirm read"),
    Oracle("multiple_confirm_in_flight_left", INT, 0, "after it: the highest multiple confirm in flight (0: none)"),
)

# Every action class that reads oracles other than ``may_send`` (every client method: ``_CLIENT_METHOD``),
# in the order its constants are made (Z3's search follows the order terms were made in).
ORACLES: dict[type, tuple[Oracle, ...]] = {
    A.BrokerTakeFrame: _BROKER_TAKE_FRAME,
    A.BrokerDeliver: (
        Oracle("can_deliver", BOOL, False, "the queue has a ready copy and a consumer with room (broker.can_deliver)"),
        Oracle("conn", INT, 0, "the connection of the consumer delivered to (broker.next_consumer)"),
        Oracle("ch", INT, 0, "the channel of that consumer"),
        Oracle("consumer_tag", INT, 0, "the consumer tag of that consumer"),
        Oracle("copy_key", INT, 0, "the key of the copy delivered (the next ready one of the queue)"),
    ),
    A.BrokerCloseOk: (),
    A.BrokerRequeue: (),
    A.BrokerConfirm: (
        Oracle("ready_to_confirm", BOOL, False,
               "publish seq's queues took it and its return went out (broker.ready_to_confirm)"),
        Oracle("confirm_prefix", INT, 0, "the end of the longest ready run of one outcome (broker.confirm_prefix)"),
        Oracle("unconfirmed_below", BOOL, False, "an unconfirmed publish of the channel is below seq"),
        Oracle("oldest_batched", BOOL, False,
               "the oldest unconfirmed publish is ready, and so is a later one, not the next (broker.oldest_batched)"),
    ),
    A.BrokerCommitOk: (Oracle("written", BOOL, False,
                              "the commit's copies are on disk (the channel is not committing)"),),
    A.BrokerQueueFail: (
        Oracle("failable", BOOL, False, "a queue holds a copy of publish seq's message (faults.failable)"),
        Oracle("failed_copies", _array(PER_COPY, BOOL), frozenset(), "the ready copies of that publish's message"),
    ),
    A.BrokerCrash: (),
    A.BrokerRestart: (),
    A.DiskFsync: (Oracle("pending", BOOL, False, "a write or removal of the copy is pending (faults.can_fsync)"),),
    A.NetworkLoss: (Oracle("connected", BOOL, False, "the connection is not down (faults.can_lose_connection)"),),
    A.ClientVanish: (Oracle("free_slot", INT, -1, "a slot free to hold the connection (faults.stale_slot; -1: none)"),),
    A.BrokerDetect: (),
    A.BrokerChannelError: _KEEPS,
    A.ClientConnect: (Oracle("down", BOOL, False, "the connection's slot is down"),),
    A.ClientReceive: _CLIENT_RECEIVE,
}

_CLIENT_METHOD = (Oracle("may_send", BOOL, False,
                         "the rest of the client's view lets it send the method (spec.client: a consumer it started)"),)


def declared(cls: type) -> tuple[Oracle, ...]:
    """The oracles of an action class's relation."""
    return ORACLES.get(cls, _CLIENT_METHOD)


def sorts(cls: type) -> dict[str, z3.SortRef]:
    """Each oracle of ``cls`` and its Z3 sort."""
    return {o.name: o.sort for o in declared(cls)}


class Values(dict):
    """An action's oracle values by name, one for every oracle it declares: setting a name it does not
    declare is a KeyError (a typo, not a new oracle)."""

    def __setitem__(self, name: str, value) -> None:
        if name not in self:
            raise KeyError(f"no oracle {name!r}")
        super().__setitem__(name, value)

    def update(self, *args, **kwargs) -> None:
        for name, value in dict(*args, **kwargs).items():
            self[name] = value


def values(cls: type, **given) -> Values:
    """Every oracle of ``cls`` at its default, but those ``given``."""
    out = Values({o.name: o.default for o in declared(cls)})
    out.update(given)
    return out
