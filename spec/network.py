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
"""
from __future__ import annotations


def empty(channels: int) -> tuple:
    """No frame in flight on any of channels 0..channels."""
    return ((),) * (channels + 1)


def push(fifos: tuple, ch: int, frame: tuple) -> tuple:
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
