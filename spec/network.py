"""The network between a client and the broker: one FIFO per channel number, in each direction.

RabbitMQ 3.10.8 runs every channel of a connection in a process of its own. The frames of one
channel are acted on, and reach the client, in the order they were sent; frames of different
channels are not ordered with respect to each other. So a basic.get on channel 1 can take effect
before a publish sent earlier on channel 2, and deliveries to consumers on two channels can reach
the wire in another order than the one they were dispatched in.

Connection-level frames (channel 0: connection.close and its close-ok) come after everything sent
before them on every channel: RabbitMQ's reader closes a connection only once each channel process
has handled what it was handed, and a client sends nothing on a channel after its connection.close
(ER-1). So a channel-0 frame is taken, or read, only when no channel frame is in flight.

A direction of a connection is a tuple of FIFOs indexed by channel number (0..n); every function
here is pure and keeps that shape.

What reaches the client on one channel is the spec's FIFO but for two things RabbitMQ 3.10.8's channel
process does, which the spec's atomic steps cannot: ``read_from`` lets the trace checker read them so
(the explorer keeps each FIFO strict; nothing the properties read depends on these frames' order).
- basic.consume-ok is sent by the queue process through the channel's mailbox: what the channel writes
  while it handles the methods already waiting behind the consume (their replies, a confirm, a
  return) reaches the client first, and a channel or connection that closes in between never sends it
  (measured with one write each: consume + get: get-empty first, 30 of 30; consume + qos: qos-ok first,
  100 of 100; consume + a 406, + channel.close, + a 530: no consume-ok, 30 of 30 each). A
  basic.cancel-ok goes the same way (cancel + get: get-empty first; cancel + a 406, + channel.close,
  + connection.close: no cancel-ok; 30 of 30 each). So does the basic.cancel a deleted queue sends its
  consumers (DS-1): another channel's queue.delete reaches the consumer's channel as a message in its
  mailbox, behind the methods waiting there (this channel's delete of another queue sent in the same
  write as the other channel's delete: this channel's delete-ok, then the cancel of the first queue's
  consumer; seen once in 1,000 generated programs against RabbitMQ 3.10.8). The queue's
  deliveries to the consumer follow its consume-ok, unless the channel closed first: a closing channel
  drops the consume-ok but still writes the deliveries (consume of a queue with a ready message +
  channel.close: the delivery, then close-ok).
- After a channel error the channel process still writes the deliveries its queues dispatched to it
  before the error, which wait in its mailbox behind the offending method: they reach the client after
  the channel.close (publish + ack of an unknown tag in one write to a consuming channel: close, then
  the delivery, 100 of 100), and after the close-ok it answers a client's channel.close with while it
  waits for the client's close-ok (tx.rollback on a channel not transactional + channel.close, a
  publish to its consumer's queue on another channel in the same write: close, close-ok, then the
  delivery; seen in generated programs). The spec made them before the error, which requeued them (RQ-4).
- When the connection ends, deliveries still in the channel's mailbox are never written (publish to a
  consumed queue + a 530, or + the client's connection.close, in one write: no delivery, and the
  message comes back redelivered, 20 of 20 each): the spec made them, and the close requeued them (RQ-4;
  in automatic mode they are lost, AM-2).
"""
from __future__ import annotations

from typing import Any

from .frames import (
    BASIC_CANCEL, BASIC_CANCEL_OK, BASIC_CONSUME_OK, BASIC_DELIVER, CHANNEL_CLOSE, CHANNEL_CLOSE_OK, CHANNEL_OPEN_OK,
    CONNECTION_CLOSE, R_ANY,
)

_CLOSES = (CHANNEL_CLOSE, CONNECTION_CLOSE)
# Replies the queue process sends through the channel's mailbox: later frames overtake them, and a close
# of their channel or connection drops them (module docstring).
QUEUE_REPLIES = (BASIC_CONSUME_OK, BASIC_CANCEL_OK, BASIC_CANCEL)


def same_frame(written: Any, read: Any) -> bool:
    """Whether a client reading ``read`` reads the frame the spec ``written``: the same frame, or, for a
    close whose text the recording does not judge (reason ``R_ANY``: the standard fixes reply codes, not
    texts, ER-1), a close of the same channel with the same reply code."""
    return written == read or (read.method in _CLOSES and read.reason == R_ANY and written.method == read.method
                               and written.channel == read.channel and written.reply_code == read.reply_code)


def _index(fifo: tuple, frame: Any) -> int:
    """The position of the first frame in flight the client reads as ``frame``; ValueError for none."""
    try:
        return fifo.index(frame)
    except ValueError:
        if frame.method in _CLOSES and frame.reason == R_ANY:
            for i, written in enumerate(fifo):
                if same_frame(written, frame):
                    return i
        raise


def empty(channels: int) -> tuple:
    """No frame in flight on any of channels 0..channels."""
    return ((),) * (channels + 1)


def push(fifos: tuple, ch: int, frame: Any) -> tuple:
    """The FIFOs with ``frame`` appended to channel ch's."""
    return fifos[:ch] + (fifos[ch] + (frame,),) + fifos[ch + 1:]


def pop(fifos: tuple, ch: int) -> tuple:
    """The FIFOs without channel ch's oldest frame."""
    return fifos[:ch] + (fifos[ch][1:],) + fifos[ch + 1:]


def channels_in_flight(fifos: tuple) -> bool:
    """Whether a frame of some channel (not channel 0) is in flight."""
    for fifo in fifos[1:]:
        if fifo:
            return True
    return False


def movable(fifos: tuple) -> tuple:
    """The channel numbers whose oldest frame may be taken (or read) now, ascending."""
    out = tuple(ch for ch in range(1, len(fifos)) if fifos[ch])
    if not out and fifos[0]:
        return (0,)
    return out


def can_move(fifos: tuple, ch: int) -> bool:
    """Whether channel ch's oldest frame may be taken (or read) now."""
    if not fifos[ch]:
        return False
    return ch != 0 or not channels_in_flight(fifos)


def all_frames(fifos: tuple):
    """Every frame in flight in one direction of a connection, channel by channel."""
    for fifo in fifos:
        yield from fifo


def read_from(fifo: tuple, frame: Any, closing: bool = True, errored: bool = True):
    """The frames left in flight on one channel after the client reads ``frame``, or None when it cannot
    read it now: the oldest frame; or one behind consume-oks it overtakes (a delivery to one of those
    consumers only once the channel is ``closing``, which means they are never sent); or a
    channel.close or channel.close-ok, which drop the consume-oks ahead of them, and a channel.close
    overtakes the deliveries ahead of it too, and so does the close-ok of a channel the broker closed
    (module docstring; DS-1, ER-1). ``closing``: the broker has closed the channel or the connection,
    or may yet do so; ``errored``: the broker closed the channel (a channel error) and waits for the
    client's close-ok, or may yet do so (the defaults, for what is still to be written)."""
    if not fifo:
        return None
    if fifo[0] == frame:
        return fifo[1:]
    try:
        i = _index(fifo, frame)
    except ValueError:
        return None
    ahead, behind = fifo[:i], fifo[i + 1:]
    method = frame.method
    if method == CHANNEL_CLOSE or method == CHANNEL_CLOSE_OK:
        kept = tuple(f for f in ahead if f.method not in QUEUE_REPLIES)
        if not kept or ((method == CHANNEL_CLOSE or errored) and all(f.method == BASIC_DELIVER for f in kept)):
            return kept + behind
        return None
    for f in ahead:
        if f.method not in QUEUE_REPLIES or (f.method == BASIC_CONSUME_OK and method == BASIC_DELIVER and
                                             f.consumer_tag == frame.consumer_tag and not closing):
            return None
    return ahead + behind


def may_come_first(fifo: tuple, frame: Any) -> bool:
    """Whether ``frame``, not yet written, may still be read before every frame in flight (``read_from``)."""
    return not fifo or read_from(fifo + (frame,), frame) is not None


def end_of_connection(fifos: tuple):
    """The FIFOs once a connection-level frame (channel 0) can be read: consume-oks and deliveries still
    in flight are never sent (module docstring), and neither is a channel.open-ok when the broker closes
    the connection with an error; anything else must be read before it; None when it cannot.

    RabbitMQ 3.10.8 writes a channel's frames through that channel's writer process and a connection
    error's connection.close through the connection's own: a channel.open sent with a method that is a
    connection error (a qos with prefetch_size, a publish with immediate) got the connection.close
    without the open-ok in 2 of 150 runs of ``errors_and_refusals`` (ER-1)."""
    if not channels_in_flight(fifos):
        return fifos
    dropped = _DROPPED_AT_AN_ERROR if fifos[0] and fifos[0][0].method == CONNECTION_CLOSE else _DROPPED_AT_A_CLOSE
    for fifo in fifos[1:]:
        for f in fifo:
            if f.method not in dropped:
                return None
    return (fifos[0],) + ((),) * (len(fifos) - 1)


# What a connection that ends never writes of what is in flight on its channels (``end_of_connection``):
# at the close-ok of the client's connection.close, and at the broker's connection.close (an error).
_DROPPED_AT_A_CLOSE = QUEUE_REPLIES + (BASIC_DELIVER,)
_DROPPED_AT_AN_ERROR = _DROPPED_AT_A_CLOSE + (CHANNEL_OPEN_OK,)
