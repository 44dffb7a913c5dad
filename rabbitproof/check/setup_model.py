"""A user's setup (rabbitproof.check.setup_file) as a `spec` configuration: roles and bounds.

Each publisher and each consumer is a client of its own, one connection with one channel, in the order
they are written (publishers first). What a client may do becomes its `spec.roles.Role`; the explorer
then tries every order of every choice, faults included, within the bounds derived here:

- a publisher publishes to its queue through the default exchange (RT-1), persistent or not (DU-2),
  mandatory or not (RT-3), after confirm.select (PC-1) or tx.select (TX-1, commits and rollbacks);
- a consumer consumes its queue in manual or automatic mode (AM-1), sets its prefetch first (PF-1,
  PF-2), acknowledges one delivery or several (ACK-2), and on failure nacks or rejects with or without
  requeue (ACK-5, ACK-6) or closes its channel (RQ-4); an exclusive queue is declared by its consumer (DU-4);
- faults: a client's connection is closed (and it reconnects), a client's host vanishes, a consumer closes
  its channel, the broker closes a consumer's channel with an error, the broker crashes (DU-3), a queue
  refuses a message (PC-6); the first four hit the clients the setup names. A connection closed, its
  socket closed, is the spec's NetworkLoss: frames in flight either way are gone and the broker notices at
  once (RQ-4, AM-2); `lossy` says which connections it may hit. A host that vanishes is the spec's
  ClientVanish, noticed at the heartbeat timeout (BrokerDetect: RQ-3, RQ-4); `vanishing` says which. A
  broker's channel error is BrokerChannelError (ER-1), on consumers' channels (`erring`).

The spec bounds publishes in all: the publishers' `messages` and `republish` add up to its budget, and
`rabbitproof.check.questions.SetupMachine` holds each publisher to its own (`limits`, `republish`).
"""
from __future__ import annotations

from typing import Mapping

from rabbitproof.spec.configs import BOUNDS, Config, ConfigError
from rabbitproof.spec.frames import DEFAULT_EXCHANGE
from rabbitproof.spec.roles import QueueSpec, Role

from rabbitproof.check.cycles import ENDLESS
from rabbitproof.check.setup_file import ConsumerSetup, PublisherSetup, Setup

# Requeues allowed. The check's machine never spends this budget (rabbitproof.check.cycles.ENDLESS), nor
# those of basic.qos, basic.get and a consumer's closes on failure: any positive value means "without end".
REQUEUE_BUDGET = 2


def queue_specs(setup: Setup) -> tuple[QueueSpec, ...]:
    """The model's queues, in the order the file names them."""
    index = {q.name: i for i, q in enumerate(setup.queues)}
    return tuple(QueueSpec(durable=q.durable, exclusive=q.exclusive, declared=not q.exclusive,
                           dead_letter=index[q.dead_letter] if q.dead_letter else -1) for q in setup.queues)


def publisher_role(publisher: PublisherSetup, queue: int) -> Role:
    """What a publisher's channel may do."""
    return Role(publish=((DEFAULT_EXCHANGE, queue),), persistent=(publisher.persistent,),
                mandatory=(publisher.mandatory,), confirm=publisher.confirms, tx=publisher.transactions)


def binding_prefetch(consumer: ConsumerSetup, messages: int) -> int:
    """The consumer's prefetch as the exploration needs it: a consumer never holds more deliveries than
    there are messages (one copy of each in its queue at a time), so a limit of at least ``messages``
    never binds and is explored as none (0)."""
    return consumer.prefetch if consumer.prefetch < messages else 0


def publishes(setup: Setup) -> int:
    """The publishes of the setup in all, messages and republishes: each is a message of the spec, so no
    queue ever holds more copies than this of one publisher's making at a time."""
    return sum(p.messages + p.republish for p in setup.publishers)


def notes(setup: Setup) -> tuple[str, ...]:
    """What the exploration takes differently from the file's words, and why, for the report."""
    messages = publishes(setup)
    what = "publishes" if any(p.republish for p in setup.publishers) else "message" + "s" * (messages != 1)
    return tuple(f"consumer {c.name!r}: prefetch {c.prefetch} is at least the {messages} {what} "
                 f"of the setup, so it never binds: explored as no limit (PF-1)"
                 for c in setup.consumers if c.prefetch and not binding_prefetch(c, messages))


def consumer_role(consumer: ConsumerSetup, queue: int, exclusive: bool, faults, messages: int) -> Role:
    """What a consumer's channel may do, in a setup of ``messages`` messages."""
    manual = consumer.acks == "manual"
    failure = consumer.on_failure
    prefetch = binding_prefetch(consumer, messages)
    qos = ((prefetch, consumer.prefetch_scope == "channel"),) if prefetch else ()
    receive = {"get": ((queue, not manual),)} if consumer.polls else {"consume": ((queue, not manual),)}
    return Role(**receive, ack=manual, multiple=manual and consumer.ack == "multiple",
                nack=(failure == "nack-requeue",) if failure.startswith("nack") else (),
                reject=(failure == "reject-requeue",) if failure.startswith("reject") else (),
                qos=qos, declare=(queue,) if exclusive else (),
                close=failure == "close-channel" or consumer.name in faults.channel_closed)


def polls(setup: Setup, messages: int, requeues: int) -> int:
    """The basic.get calls explored when a consumer polls: one per message and per requeue, and one that
    finds the queue empty (DS-2), within the spec's bound."""
    if not any(c.polls for c in setup.consumers):
        return 0
    return min(BOUNDS["gets"][1], messages + requeues + 1)


def lossy(setup: Setup) -> tuple[bool, ...]:
    """Per connection (publishers first): whether the setup's faults may drop it, socket closed (NetworkLoss)."""
    return tuple(c.name in setup.faults.connection_closed for c in setup.publishers + setup.consumers)


def vanishing(setup: Setup) -> tuple[bool, ...]:
    """Per connection (publishers first): whether its client may vanish, noticed late (ClientVanish)."""
    return tuple(c.name in setup.faults.host_vanished for c in setup.publishers + setup.consumers)


def erring(setup: Setup) -> tuple[bool, ...]:
    """Per connection (publishers first): whether the broker may close its channel with an error."""
    return tuple(c.name in setup.faults.channel_error for c in setup.publishers + setup.consumers)


def to_config(setup: Setup, name: str = "setup", prefetch_for: int | None = None) -> Config:
    """The spec configuration that explores this setup; ``prefetch_for``: the number of publishes that
    decides whether a prefetch binds (by default the setup's own): a smaller setup searched on behalf of a
    larger one (rabbitproof.check.smaller_setups) sets its consumers' prefetch as the larger one does."""
    queues = queue_specs(setup)
    index = {q.name: i for i, q in enumerate(setup.queues)}
    exclusive = {q.name for q in setup.queues if q.exclusive}
    faults = setup.faults
    messages = publishes(setup)
    binding = messages if prefetch_for is None else prefetch_for
    roles = {}
    for c, publisher in enumerate(setup.publishers):
        roles[(c, 1)] = publisher_role(publisher, index[publisher.queue])
    for n, consumer in enumerate(setup.consumers, start=len(setup.publishers)):
        roles[(n, 1)] = consumer_role(consumer, index[consumer.queue], consumer.queue in exclusive, faults, binding)
    requeueing = any(c.on_failure.endswith("requeue") or c.on_failure == "close-channel" for c in setup.consumers)
    # A consumer that closes its channel on failure does so at every failure, without end: its closes spend
    # nothing (SetupMachine.closing), but the spec's budget keeps one for them. The fault's close comes on top,
    # and only the fault's closes count (a close by a consumer that does not close on failure is the fault).
    closes = int(any(c.on_failure == "close-channel" for c in setup.consumers)) + int(bool(faults.channel_closed))
    reconnects = int(bool(faults.connection_closed or faults.host_vanished))
    channel_errors = int(bool(faults.channel_error))
    requeues = REQUEUE_BUDGET if requeueing or closes or reconnects or channel_errors or faults.broker_crash else 0
    return Config(
        name, f"the setup of {setup.source}",
        connections=len(setup.publishers) + len(setup.consumers), channels=1, queues=queues, roles=roles,
        messages=messages,
        requeues=requeues,
        closes=closes, reconnects=reconnects,
        losses=int(bool(faults.connection_closed)),
        vanishes=int(bool(faults.host_vanished)), channel_errors=channel_errors,
        crashes=int(faults.broker_crash), failures=int(faults.queue_refuses),
        qos=sum(1 for c in setup.consumers if binding_prefetch(c, binding))
        * (1 + closes + reconnects + channel_errors + int(faults.broker_crash)),
        gets=polls(setup, messages, requeues),
        deadlock_is_error=False, category="setup")


# `check --bound NAME=N` names a fault as the setup file does; each sets one budget of the spec.
FAULT_BOUNDS = {"connection_closed": "losses", "host_vanished": "vanishes", "channel_closed": "closes",
                "channel_error": "channel_errors", "broker_crash": "crashes", "queue_refuses": "failures"}
# Bounds that are not faults: how often a client may connect again, and what check refuses to bound (ENDLESS).
OTHER_BOUNDS = ("reconnects",) + ENDLESS


def bound_changes(setup: Setup, bounds: Mapping[str, str]) -> dict[str, object]:
    """`--bound` as changes to the spec's budgets: a fault of the setup file, by its name, may happen N
    times. ConfigError (one line) for a budget's own name where a fault's is meant (crashes for
    broker_crash), a fault the setup does not have, a value out of range, or an unknown name."""
    config = to_config(setup)
    changes: dict[str, object] = {}
    for name, raw in bounds.items():
        fault = next((f for f, budget in FAULT_BOUNDS.items() if budget == name), None)
        if fault:
            raise ConfigError(f"--bound {name}: a fault is bounded by its name in the setup file: {fault}={raw}")
        if name in OTHER_BOUNDS:
            changes[name] = raw
            continue
        if name not in FAULT_BOUNDS:
            raise ConfigError(f"unknown bound {name!r} (the faults: {', '.join(FAULT_BOUNDS)}; and reconnects)")
        if not getattr(setup.faults, name):
            raise ConfigError(f"--bound {name}: the setup has no {name}; name it under [faults] first")
        try:
            value = int(raw)
        except ValueError:
            raise ConfigError(f"--bound {name} must be a whole number, not {raw!r}") from None
        budget = FAULT_BOUNDS[name]
        # A consumer that closes its channel on failure spends closes too: the fault's come on top.
        base = getattr(config, budget) - 1 if budget == "closes" else 0
        most = BOUNDS[budget][1] - base
        if not 0 <= value <= most:
            raise ConfigError(f"--bound {name}={value} is out of range (0 to {most})")
        changes[budget] = base + value
    return changes
