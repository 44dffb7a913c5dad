"""A toy model with the shape of ``spec.machine``, for testing spark_check on numbers known by hand.

One producer publishes ``messages`` messages to a broker queue; the broker delivers them to one
consumer over the network; the consumer acknowledges them (manual ack) or the broker forgets each
message as it sends it (auto-ack); the consumer may crash ``crashes`` times. Each message is
independent of the others except at a crash, which is what keeps the counts computable by hand:

A message is in one place (``LOC_*``). With manual ack its life is
UNPUBLISHED -> READY -> DELIVERING -> HELD -> ACKING -> DONE (6 places), and a crash requeues every
message in DELIVERING, HELD or ACKING to READY, marking it redelivered. With auto-ack its life is
UNPUBLISHED -> READY -> DELIVERING -> DONE (4 places), and a crash loses the message in DELIVERING
(the broker forgot it when it sent it): the planted hazard, as in the seeds.

Distinct states, for M messages and at most one crash:
- manual, no crash: 6^M. Depth (BFS levels) 5M + 1.
- manual, one crash: before the crash 6^M; after it each message is either not redelivered (any of the
  6 places) or redelivered (READY..DONE, 5 places), independently: 11^M. Total 6^M + 11^M. The farthest
  state has every message redelivered and DONE: 2 steps to DELIVERING, the crash, 4 steps back to DONE,
  so 6M + 1 steps, depth 6M + 2.
- auto-ack, one crash: before the crash 4^M; after it each message is in one of its 4 places or LOST:
  5^M. Total 4^M + 5^M. The farthest state has every message DONE after the crash: 3M + 1 steps, depth
  3M + 2. The 2^M - 1 states where every message is DONE or LOST and some are LOST are deadlocks.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

from rabbitproof.spec.properties_api import Property

LOC_UNPUBLISHED, LOC_READY, LOC_DELIVERING, LOC_HELD, LOC_ACKING, LOC_DONE, LOC_LOST = range(7)


class State(NamedTuple):
    """Where each message is, which were redelivered, and how many crashes remain."""

    locs: tuple[int, ...]
    redelivered: tuple[bool, ...]
    crashes_left: int


@dataclass(frozen=True)
class Frame:
    """A frame on the wire between two parties."""

    sender: str
    receiver: str
    method: str
    message: int

    def __str__(self) -> str:
        return f"{self.sender} -> {self.receiver}: {self.method} m{self.message}"


@dataclass(frozen=True)
class ProducerPublish:
    """The producer publishes message ``m``."""

    m: int
    actor = "producer"

    def __str__(self) -> str:
        return f"producer publishes m{self.m}"


@dataclass(frozen=True)
class BrokerDeliver:
    """The broker sends ready message ``m`` to the consumer."""

    m: int
    actor = "broker"

    def __str__(self) -> str:
        return f"broker delivers m{self.m} to the consumer"


@dataclass(frozen=True)
class ConsumerReceive:
    """The consumer reads the delivery of ``m``; with auto-ack that settles it."""

    m: int
    auto_ack: bool
    actor = "consumer"

    def __str__(self) -> str:
        return f"consumer receives m{self.m}" + (" (auto-ack)" if self.auto_ack else "")


@dataclass(frozen=True)
class ConsumerAck:
    """The consumer acknowledges ``m``."""

    m: int
    actor = "consumer"

    def __str__(self) -> str:
        return f"consumer acks m{self.m}"


@dataclass(frozen=True)
class BrokerSettle:
    """The broker reads the ack of ``m`` and forgets the message."""

    m: int
    actor = "broker"

    def __str__(self) -> str:
        return f"broker settles m{self.m}"


@dataclass(frozen=True)
class ConsumerCrash:
    """The consumer's connection drops; unacked messages are requeued, or lost with auto-ack."""

    auto_ack: bool
    actor = "consumer"

    def __str__(self) -> str:
        return "consumer crashes"


@dataclass(frozen=True)
class BrokerPurge:
    """Never enabled: an action class that exists to show up in coverage as never fired."""

    actor = "broker"

    def __str__(self) -> str:
        return "broker purges the queue"


ACTIONS = (ProducerPublish, BrokerDeliver, ConsumerReceive, ConsumerAck, BrokerSettle, ConsumerCrash, BrokerPurge)


# The bounds `Config.override` may change, with their inclusive ranges.
BOUND_RANGES = {"messages": (1, 8), "crashes": (0, 3)}


class ConfigError(ValueError):
    """An unknown configuration name or a bad bound."""


@dataclass(frozen=True)
class Config:
    """Bounds of one exploration of the toy model."""

    name: str
    description: str
    messages: int
    auto_ack: bool
    crashes: int
    deadlock_is_error: bool
    properties: tuple[str, ...]
    max_states: int = 5_000_000

    def override(self, changes: dict[str, str]) -> "Config":
        """A copy with the named integer bounds changed."""
        values = {}
        for key, text in changes.items():
            if key not in BOUND_RANGES:
                raise ConfigError(f"unknown bound {key!r}; bounds: {', '.join(BOUND_RANGES)}")
            lo, hi = BOUND_RANGES[key]
            try:
                value = int(text)
            except ValueError:
                raise ConfigError(f"bound {key} must be an integer, not {text!r}") from None
            if not lo <= value <= hi:
                raise ConfigError(f"bound {key}={value} is out of range {lo}..{hi}")
            values[key] = value
        return replace(self, **values)


def initial_states(config: Config) -> tuple[State, ...]:
    """Nothing published, nothing redelivered, every crash still to come."""
    m = config.messages
    return (State((LOC_UNPUBLISHED,) * m, (False,) * m, config.crashes),)


def enabled(state: State, config: Config) -> tuple[object, ...]:
    """The actions enabled in ``state``, message by message, then the crash."""
    out: list[object] = []
    auto = config.auto_ack
    for m, loc in enumerate(state.locs):
        if loc == LOC_UNPUBLISHED:
            out.append(ProducerPublish(m))
        elif loc == LOC_READY:
            out.append(BrokerDeliver(m))
        elif loc == LOC_DELIVERING:
            out.append(ConsumerReceive(m, auto))
        elif loc == LOC_HELD:
            out.append(ConsumerAck(m))
        elif loc == LOC_ACKING:
            out.append(BrokerSettle(m))
    if state.crashes_left:
        out.append(ConsumerCrash(auto))
    return tuple(out)


def _move(state: State, m: int, loc: int) -> State:
    locs = state.locs[:m] + (loc,) + state.locs[m + 1 :]
    return state._replace(locs=locs)


def step(state: State, action: object) -> tuple[State, tuple[Frame, ...]]:
    """The successor of ``state`` under ``action`` and the frames that crossed the wire."""
    t = type(action)
    if t is ProducerPublish:
        return _move(state, action.m, LOC_READY), (Frame("producer", "broker", "basic.publish", action.m),)
    if t is BrokerDeliver:
        return _move(state, action.m, LOC_DELIVERING), (Frame("broker", "consumer", "basic.deliver", action.m),)
    if t is ConsumerReceive:
        return _move(state, action.m, LOC_DONE if action.auto_ack else LOC_HELD), ()
    if t is ConsumerAck:
        return _move(state, action.m, LOC_ACKING), (Frame("consumer", "broker", "basic.ack", action.m),)
    if t is BrokerSettle:
        return _move(state, action.m, LOC_DONE), ()
    if t is ConsumerCrash:
        outstanding = (LOC_DELIVERING,) if action.auto_ack else (LOC_DELIVERING, LOC_HELD, LOC_ACKING)
        locs = []
        redelivered = []
        for loc, again in zip(state.locs, state.redelivered):
            if loc in outstanding:
                locs.append(LOC_LOST if action.auto_ack else LOC_READY)
                redelivered.append(not action.auto_ack)
            else:
                locs.append(loc)
                redelivered.append(again)
        return State(tuple(locs), tuple(redelivered), state.crashes_left - 1), ()
    raise TypeError(f"not a toy action: {action!r}")


def terminal_ok(state: State, config: Config) -> bool:
    """A final state is fine when every message was settled."""
    return all(loc == LOC_DONE for loc in state.locs)


def _prop(name: str, kind: str, holds, doc: str) -> Property:
    return Property(name=name, kind=kind, rules=("TOY-1",), holds=holds, doc=doc)


REGISTRY: dict[str, Property] = {
    p.name: p
    for p in (
        _prop("no_loss", "always", lambda s: LOC_LOST not in s.locs, "No message is ever lost."),
        _prop(
            "at_most_once",
            "always",
            lambda s: True not in s.redelivered,
            "No message is delivered twice (false once a crash requeues a delivered message).",
        ),
        _prop("redelivery_happens", "sometimes", lambda s: True in s.redelivered, "Some message is redelivered."),
        _prop("all_done", "sometimes", lambda s: all(x == LOC_DONE for x in s.locs), "Every message is settled."),
        _prop(
            "autoack_loses_messages",
            "hazard",
            lambda s: LOC_LOST not in s.locs,
            "With auto-ack, a consumer crash loses the message in flight.",
        ),
    )
}

_NOCRASH = ("no_loss", "at_most_once", "all_done")
_MANUAL = ("no_loss", "redelivery_happens", "all_done")
CONFIGS: dict[str, Config] = {
    c.name: c
    for c in (
        Config("tiny", "one message, manual ack, no crash", 1, False, 0, True, ("no_loss", "all_done")),
        Config("nocrash", "two messages, manual ack, no crash", 2, False, 0, True, _NOCRASH),
        Config("manual", "two messages, manual ack, one crash", 2, False, 1, True, _MANUAL),
        Config("autoack", "two messages, auto-ack, one crash", 2, True, 1, True, ("autoack_loses_messages", "all_done")),
        Config("autoack_lenient", "as autoack, final states with lost messages allowed", 2, True, 1, False,
               ("autoack_loses_messages", "all_done")),
        Config("medium", "five messages, manual ack, one crash", 5, False, 1, True, _MANUAL),
        Config("large", "six messages, manual ack, one crash", 6, False, 1, True, _MANUAL),
    )
}

# The configurations whose checks all pass: what the toy's `make verify` would run.
STANDARD: tuple[str, ...] = ("tiny", "nocrash", "manual", "autoack_lenient")


def get(name: str) -> Config:
    """The configuration called ``name``."""
    try:
        return CONFIGS[name]
    except KeyError:
        raise ConfigError(f"unknown configuration {name!r}; known: {', '.join(CONFIGS)}") from None
