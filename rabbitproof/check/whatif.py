"""What-if advice: the single changes to a setup that RabbitMQ's guides recommend, each checked by exploring the
changed setup with the spec, never looked up in a table.

A change is one setting, applied wherever the setup has it the other way (turn on confirms: for every
publisher without them). ``single_changes`` lists those that apply to a setup; ``try_changes`` explores
each and reports which failing questions it makes pass and which passing ones it makes fail (a change
that trades one risk for another is shown as such: nack without requeue ends a requeue loop and, with no
dead-letter queue, loses the message).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

from rabbitproof.spark_check.engine import Engine

from rabbitproof.check.answers import Checked, check_setup
from rabbitproof.check.setup_file import MAX_QUEUES, QueueSetup, Setup
from rabbitproof.check.setup_model import binding_prefetch


@dataclass(frozen=True)
class Change:
    """One setting changed: how it reads, the rules behind the advice, and the changed setup."""

    key: str
    text: str
    rules: tuple[str, ...]
    setup: Setup


@dataclass(frozen=True)
class Tried:
    """A change, explored: what it fixes and what it breaks, and what the exploration cost."""

    change: Change
    fixes: tuple[str, ...]          # question keys failing before, passing now
    breaks: tuple[str, ...]         # question keys passing before, failing now
    still: tuple[str, ...]          # question keys failing before and still failing
    states: int
    seconds: float


def _names(items) -> str:
    return ", ".join(repr(i.name) for i in items)


def single_changes(setup: Setup) -> tuple[Change, ...]:
    """Every single change RabbitMQ's guides recommend that this setup does not have yet."""
    out: list[Change] = []
    pubs = setup.publishers

    plain = [p for p in pubs if not p.confirms and not p.transactions]
    if plain:
        out.append(Change("confirms", f"turn on publisher confirms ({_names(plain)})", ("PC-1", "PC-5"),
                          replace(setup, publishers=tuple(replace(p, confirms=True) if p in plain else p for p in pubs))))
    transient = [p for p in pubs if not p.persistent]
    if transient:
        out.append(Change("persistent", f"publish persistent messages ({_names(transient)})", ("DU-2", "PC-10"),
                          replace(setup, publishers=tuple(replace(p, persistent=True) for p in pubs))))
    used = {p.queue for p in pubs} | {q.dead_letter for q in setup.queues if q.dead_letter}
    fragile = [q for q in setup.queues if q.name in used and not q.durable and not q.exclusive]
    if fragile:
        out.append(Change("durable", f"make queue{'s' if len(fragile) > 1 else ''} {_names(fragile)} durable",
                          ("DU-1", "DU-2"),
                          replace(setup, queues=tuple(replace(q, durable=True) if q in fragile else q
                                                      for q in setup.queues))))
    loose = [p for p in pubs if not p.mandatory]
    if loose:
        out.append(Change("mandatory", f"publish with mandatory=true ({_names(loose)})", ("RT-3", "PC-4"),
                          replace(setup, publishers=tuple(replace(p, mandatory=True) for p in pubs))))
    exclusive = [q for q in setup.queues if q.exclusive]
    if exclusive:
        out.append(Change("declared", f"declare {_names(exclusive)} before publishing, as a shared queue "
                                      "(not exclusive to its consumer)", ("DU-4", "RT-1"),
                          replace(setup, queues=tuple(replace(q, exclusive=False) for q in setup.queues))))
    cons = setup.consumers
    automatic = [c for c in cons if c.acks == "automatic"]
    if automatic:
        out.append(Change("manual-acks", f"switch to manual acks ({_names(automatic)})", ("AM-2", "AM-3"),
                          replace(setup, consumers=tuple(replace(c, acks="manual") if c in automatic else c
                                                         for c in cons))))
    dead = _dead_letter_change(setup)
    if dead is not None:
        out.append(dead)
    messages = sum(p.messages for p in setup.publishers)
    # Only where a limit of 1 binds (PF-1: a limit of at least the messages never does) and limits (PF-4: not gets).
    unbounded = [c for c in cons if c.acks == "manual" and not c.polls and messages > 1 and
                 binding_prefetch(c, messages) != 1]
    if unbounded:
        out.append(Change("prefetch-1", f"lower prefetch to 1 ({_names(unbounded)})", ("PF-1", "RQ-1"),
                          replace(setup, consumers=tuple(replace(c, prefetch=1, prefetch_scope="consumer")
                                                         if c in unbounded else c for c in cons))))
    batched = [c for c in cons if c.acks == "manual" and c.ack == "multiple"]
    if batched:
        out.append(Change("ack-single", f"acknowledge one delivery at a time ({_names(batched)})", ("ACK-1", "ACK-2"),
                          replace(setup, consumers=tuple(replace(c, ack="single") if c in batched else c
                                                         for c in cons))))
    return tuple(out)


def _dead_letter_change(setup: Setup) -> Change | None:
    """On failure, nack without requeue to a dead-letter queue (one is added where the queue has none)."""
    failing = [c for c in setup.consumers if c.acks == "manual" and c.on_failure not in ("none", "nack-drop")
               or c.on_failure == "nack-drop" and not _queue(setup, c.queue).dead_letter]
    if not failing:
        return None
    queues = list(setup.queues)
    for c in failing:
        q = _queue(setup, c.queue)
        if not q.dead_letter and not any(x.name == q.name and x.dead_letter for x in queues):
            if len(queues) >= MAX_QUEUES:
                return None
            dlq = QueueSetup(_free_name(queues, f"{q.name}.dead"), durable=q.durable)
            queues = [replace(x, dead_letter=dlq.name) if x.name == q.name else x for x in queues] + [dlq]
    consumers = tuple(replace(c, on_failure="nack-drop") if c in failing else c for c in setup.consumers)
    targets = ", ".join(f"{x.name} -> {x.dead_letter}" for x in queues if x.dead_letter)
    return Change("dead-letter", f"on failure, nack without requeue to a dead-letter queue ({_names(failing)}; "
                                 f"{targets})", ("ACK-6", "RQ-6"),
                  replace(setup, queues=tuple(queues), consumers=consumers))


class _Silent:
    """No progress display."""

    callback = None

    def __enter__(self) -> "_Silent":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


def _queue(setup: Setup, name: str) -> QueueSetup:
    return next(q for q in setup.queues if q.name == name)


def _free_name(queues: list[QueueSetup], wanted: str) -> str:
    taken = {q.name for q in queues}
    name, n = wanted, 2
    while name in taken:
        name, n = f"{wanted}{n}", n + 1
    return name


def try_changes(checked: Checked, engine: Engine, *, bounds: Mapping[str, Any] | None = None,
                max_states: int | None = None, time_limit: float | None = None,
                display_for: Callable[[Change], Any] | None = None) -> tuple[Tried, ...]:
    """Explore every single change of ``checked``'s setup when a question fails; none when all pass, or
    when the search was cut short (an undecided question cannot be compared with anything); the changes
    stop at the first whose search is cut short (its state cap, ``time_limit``, Ctrl-C).
    ``display_for(change)`` gives a context manager whose ``callback`` receives the progress."""
    failing = set(checked.failing)
    if not failing or checked.result is None or not checked.result.complete:
        return ()
    out = []
    for change in single_changes(checked.setup):
        with display_for(change) if display_for else _Silent() as display:
            after = check_setup(change.setup, engine, bounds=bounds, max_states=max_states,
                                progress=display.callback, time_limit=time_limit)
        if not after.result.complete:
            break
        now = set(after.failing)
        keys = [a.key for a in checked.answers]
        out.append(Tried(change, tuple(k for k in keys if k in failing and k not in now),
                         tuple(k for k in keys if k not in failing and k in now),
                         tuple(k for k in keys if k in failing and k in now),
                         after.result.distinct_states, after.result.seconds))
    return tuple(out)
