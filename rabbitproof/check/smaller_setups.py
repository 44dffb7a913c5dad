"""Answers "can happen" for a setup of any size from a smaller one: the same settings, fewer publishers,
messages, consumers or faults, searched in full, smallest first.

**The argument.** Take an execution of the smaller setup that loses a message, processes one twice or
shows one out of order. The larger setup has the same queues and, for every client of the smaller
one, a client with the same settings (its messages fewer or as many). Run the same steps in the larger
setup, the clients and messages the smaller one lacks doing nothing until after the event: a client
that has not connected its program yet, or a publisher that has not published its further messages,
changes nothing for the others. The broker's steps are the same, since they read only what the steps
before them made. So the event happens in the larger setup, and, since lost, twice and out of order are
each decided in the state where they first hold, what comes after does not matter.

**What breaks it**, and what is done about it:

- a prefetch that the smaller setup never fills but the larger one does: in `check` a prefetch at
  least as large as the messages is no limit, so the two would set it differently; the smaller setup is
  searched with the larger one's prefetches (``setup_model.to_config``'s ``prefetch_for``);
- a limit the extra clients share (a channel's global prefetch, an exclusive queue's one consumer): an
  exclusive queue's consumer is never left out;
- fairness: a loop or a wait for ever is about an infinite execution, in which the clients the smaller
  setup lacks must keep acting if they can (they are fair), so the argument does not carry over to the
  two liveness questions, and none is answered here; a loop is answered by
  rabbitproof.check.larger_loops, which rebuilds the smaller setup's loop in the larger setup, with the
  other clients' work done first, and checks its fairness there.

The argument is not taken on trust: each execution found is replayed, step by step, in the larger
setup's own machine (``replay``), each step checked to be one that machine allows, and the question's
property checked to fail in the state it ends in. An answer comes only from a replay that succeeds;
where it does not, the question is left to the other methods.
"""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, fields, replace
from typing import Any

from rabbitproof.spark_check.engine import Engine, LocalEngine, stopped_short
from rabbitproof.spark_check.reductions import build_reduction
from rabbitproof.spark_check.results import Trace, TraceStep
from rabbitproof.spec.frames import MSG_STRIDE

from rabbitproof.check.setup_file import CLIENT_FAULTS, CONSUMER_FAULTS, FAULTS, Faults, Setup
from rabbitproof.check.setup_model import publishes, to_config

SAFETY = ("lost", "twice", "order")       # the questions decided in a state: the only ones answered here
SUB_PUBLISHES = 3                         # the smaller setups searched: at most this many publishes,
SUB_CONSUMERS = 2                         # consumers,
SUB_FAULTS = 2                            # and faults
HITTING = CLIENT_FAULTS + CONSUMER_FAULTS      # the faults that hit named clients


@dataclass(frozen=True)
class Smaller:
    """A smaller setup of ``full``: which of its publishers (with how many messages each), which of its
    consumers, which of its faults, as indices and names of ``full``."""

    full: Setup
    publishers: tuple[tuple[int, int], ...]     # (index in full, messages)
    consumers: tuple[int, ...]
    faults: tuple[str, ...]

    @property
    def setup(self) -> Setup:
        full = self.full
        names = self.names()
        hit = {f: tuple(n for n in getattr(full.faults, f) if n in names) if f in self.faults else () for f in HITTING}
        return Setup(f"{full.source} (smaller)", full.queues,
                     tuple(replace(full.publishers[i], messages=n) for i, n in self.publishers),
                     tuple(full.consumers[i] for i in self.consumers),
                     Faults(**hit, broker_crash="broker_crash" in self.faults,
                            queue_refuses="queue_refuses" in self.faults))

    def names(self) -> set[str]:
        """The names of the clients the smaller setup keeps."""
        full = self.full
        return {full.publishers[i].name for i, _ in self.publishers} | {full.consumers[i].name for i in self.consumers}

    @property
    def size(self) -> tuple[int, ...]:
        """What "smaller" orders by: publishes, then consumers, faults, publishers."""
        return (publishes(self.setup), len(self.consumers), len(self.faults), len(self.publishers))

    def text(self) -> str:
        """The smaller setup in words, with the larger one's names."""
        full = self.full
        parts = [f"publisher {full.publishers[i].name!r} with {n} message{'s' * (n != 1)}" for i, n in self.publishers]
        parts += [f"consumer {full.consumers[i].name!r}" for i in self.consumers]
        faults = ", ".join(f.replace("_", " ") for f in self.faults)
        return ", ".join(parts) + (f"; faults: {faults}" if faults else "; no faults")

    def connections(self) -> dict[int, int]:
        """Each connection of the smaller setup (publishers first, then consumers, then the slots that hold
        vanished connections) as the larger setup's connection."""
        full = self.full
        ours = [i for i, _ in self.publishers] + [len(full.publishers) + i for i in self.consumers]
        own, theirs = len(ours), len(full.publishers) + len(full.consumers)
        return {**dict(enumerate(ours)), **{own + k: theirs + k for k in range(4)}}


def _classes(items: tuple, faults: Faults, fixed=lambda i: False) -> list[list[int]]:
    """Indices of ``items`` grouped by their settings (all but the name) and the faults that may hit them; a
    fixed item is a class alone."""
    groups: dict[Any, list[int]] = {}
    for i, item in enumerate(items):
        key = (i,) if fixed(i) else (replace(item, name=""), tuple(f for f in HITTING if item.name in getattr(faults, f)))
        groups.setdefault(key, []).append(i)
    return list(groups.values())


def smaller_setups(full: Setup) -> list[Smaller]:
    """The smaller setups of ``full`` worth searching, smallest first: one of each up to interchangeable
    clients (clients with the same settings are taken first to last), each at most SUB_PUBLISHES
    publishes, SUB_CONSUMERS consumers and SUB_FAULTS faults, each a setup the file's rules allow (an
    exclusive queue's consumer always kept, a consumer's fault only with a consumer), ``full`` itself
    left out."""
    exclusive = {q.name for q in full.queues if q.exclusive}
    kept = [i for i, c in enumerate(full.consumers) if c.queue in exclusive]
    on = [name for name in FAULTS if getattr(full.faults, name)]
    publisher_choices = []
    for members in _classes(full.publishers, full.faults):
        top = full.publishers[members[0]].messages
        options = [()]
        for k in range(1, len(members) + 1):
            options += [tuple(zip(members, counts)) for counts in
                        itertools.combinations_with_replacement(range(top, 0, -1), k)]
        publisher_choices.append(options)
    consumer_choices = [[tuple(members[:k]) for k in range(len(members) + 1)]
                        for members in _classes(full.consumers, full.faults, lambda i: i in kept)]
    out = []
    for pubs in itertools.product(*publisher_choices):
        chosen = tuple(sorted(p for group in pubs for p in group))
        if not chosen:
            continue
        total = sum(n + full.publishers[i].republish for i, n in chosen)
        if total > SUB_PUBLISHES + sum(full.publishers[i].republish for i, _ in chosen):
            continue
        for cons in itertools.product(*consumer_choices):
            consumers = tuple(sorted(c for group in cons for c in group))
            if len(consumers) > max(SUB_CONSUMERS, len(kept)) or not set(kept) <= set(consumers):
                continue
            for k in range(min(SUB_FAULTS, len(on)) + 1):
                for faults in itertools.combinations(on, k):
                    smaller = Smaller(full, chosen, consumers, faults)
                    names = smaller.names()
                    if any(f in HITTING and not names & set(getattr(full.faults, f)) for f in faults):
                        continue            # a fault that hits none of the clients kept: the same as without it
                    if (len(chosen) == len(full.publishers) and all(n == full.publishers[i].messages for i, n in chosen)
                            and len(consumers) == len(full.consumers) and len(faults) == len(on)):
                        continue
                    out.append(smaller)
    return sorted(out, key=lambda s: s.size)


@dataclass(frozen=True)
class Found:
    """A "can happen" found in a smaller setup: the execution, as one of the larger setup (its names),
    and the smaller setup it came from."""

    question: str
    trace: Trace
    smaller: Smaller
    states: int
    seconds: float


def _mapped(action: Any, conns: dict[int, int]) -> Any:
    """``action`` of the smaller setup as the larger one's: its connection, and the message it names."""
    changes = {}
    for f in fields(action):
        value = getattr(action, f.name)
        if f.name == "conn":
            changes["conn"] = conns[value]
        elif f.name in ("msg", "again"):
            c, n = divmod(value, MSG_STRIDE)
            changes[f.name] = conns[c] * MSG_STRIDE + n
    return replace(action, **changes) if changes else action


def step_as(machine: Any, config: Any, here: Any, step: TraceStep) -> tuple | None:
    """The step of ``machine`` enabled in ``here`` that ``step`` (a trace's step in words) says was taken:
    the same actor, text and frames; (action, the state after), or None when no step does. The actor
    counts: the text alone does not name the connection of every step ("connect")."""
    for action in machine.enabled(here, config):
        if str(action) != step.action or str(getattr(action, "actor", "?")) != step.actor:
            continue
        after, out = machine.step(here, action)
        if tuple(str(f) for f in out) == step.frames:
            return action, after
    return None


def replay(smaller: Smaller, trace: Trace, question: str) -> Trace | None:
    """``trace``, found in ``smaller``, replayed in the larger setup's own machine: each step the one the
    smaller machine took (the same text and frames), renamed to the larger setup's connections and
    messages, checked to be allowed there; the trace in the larger setup's names when every step is and
    ``question``'s property fails in the state it ends in; None otherwise."""
    from rabbitproof.check.answers import machine_for
    from rabbitproof.check.questions import QUESTIONS

    prop = next(q.prop for q in QUESTIONS if q.key == question)
    full = smaller.full
    small_config = to_config(smaller.setup, prefetch_for=publishes(full))
    small_machine = machine_for(smaller.setup, beliefs=True)
    full_config = to_config(full)
    full_machine = machine_for(full, beliefs=True)
    conns = smaller.connections()
    (here,), (there,) = small_machine.initial_states(small_config), full_machine.initial_states(full_config)
    steps = []
    for step in trace.steps:
        taken = step_as(small_machine, small_config, here, step)
        if taken is None:
            return None
        action, here = taken
        action = _mapped(action, conns)
        if action not in full_machine.enabled(there, full_config):
            return None
        there, frames = full_machine.step(there, action)
        steps.append(TraceStep.of(len(steps) + 1, action, frames, step.fused))
    if prop.holds(there):
        return None
    return Trace(tuple(steps), repr(there))


@dataclass
class Searched:
    """What the smaller setups gave: the executions found, what the searches could not do (a setup cut
    short, a replay refused), in words, and the interruption (Ctrl-C) that stopped them, if one did."""

    found: dict[str, Found]
    said: list[str]
    interrupted: str | None = None
    setups: int = 0


def search_smaller(full: Setup, questions: tuple[str, ...], time_limit: float,
                   each: float = 60.0, engine: Engine | None = None) -> Searched:
    """Search the smaller setups of ``full``, smallest first, for an execution of each of ``questions``
    (of SAFETY), within ``time_limit`` seconds in all and ``each`` seconds a setup; a question is answered
    by the first execution that replays in ``full``. Each smaller setup is one exploration on ``engine``
    (`check`'s own, with its reductions: on Spark, Spark jobs; by default the local engine with `check`'s
    default reductions); every engine finds the same executions, so the answers do not depend on it."""
    from rabbitproof.check.answers import ACTION_TYPES, DEFAULT_REDUCTIONS, machine_for
    from rabbitproof.check.questions import PROPERTIES, QUESTIONS

    wanted = [q for q in questions if q in SAFETY]
    out = Searched({}, [])
    found, said = out.found, out.said
    start = time.monotonic()
    names = {q.key: q.prop.name for q in QUESTIONS if q.prop is not None}
    engine = engine or LocalEngine(reductions=DEFAULT_REDUCTIONS)
    for smaller in smaller_setups(full):
        left = time_limit - (time.monotonic() - start)
        if wanted and left <= 0:
            said.append(f"the smaller setups' searches took their {time_limit:g} s before the larger ones were "
                        "searched (--time-limit gives them more)")
        if not wanted or left <= 0:
            break
        setup = smaller.setup
        config = to_config(setup, name="smaller", prefetch_for=publishes(full))
        machine = machine_for(setup, beliefs=True)
        build_reduction(engine.reductions, machine, config)
        result = engine.explore(machine, config, PROPERTIES, action_types=ACTION_TYPES, time_limit=min(each, left))
        out.setups += 1
        if result.error is not None and not stopped_short(result.error):
            raise RuntimeError(f"exploring a smaller setup of {full.source} failed: {result.error}")
        if result.error is not None and result.error.startswith("interrupted"):
            out.interrupted = f"the search of a smaller setup ({smaller.text()}) was {result.error}"
            break
        if not result.complete:
            said.append(f"the smaller setup ({smaller.text()}) was cut short at {result.distinct_states:,} states")
        verdicts = {p.name: p for p in result.properties}
        for question in list(wanted):
            verdict = verdicts[names[question]]
            if not verdict.found or verdict.trace is None:
                continue
            trace = replay(smaller, verdict.trace, question)
            if trace is None:
                said.append(f"{question}: the execution of the smaller setup ({smaller.text()}) does not replay in "
                            "the larger one")
                continue
            found[question] = Found(question, trace, smaller, result.distinct_states, result.seconds)
            wanted.remove(question)
    return out
