"""Answers "a message can loop for ever" for a setup beyond the search's bounds: a requeue loop found in a
smaller setup, rebuilt in the user's setup's own machine, and its fairness checked there.

**Why a smaller setup's loop does not simply carry over.** A loop is an infinite execution, and the loop
question counts only fair ones: under ``cycles.SetupFairness`` (the fairness of the exhaustive search,
spark_check.liveness) a class of steps enabled in every state of the repeated part must be taken in it.
The classes are weakly fair, one per channel and kind of step (the broker takes the channel's frames,
confirms its publishes, answers its commits and closes; the client reads, reopens, handles the delivery
it holds, sets up, polls, publishes, reconnects), one per queue for the broker's deliveries to a
consumer with room, and one each for the disk's writes, a restart and the broker noticing a vanished
client. Faults, and what an application may choose not to do, are in no class. In the user's setup the
clients the smaller one lacks are there too: an extra publisher that has not published yet, or whose
confirms are not read yet, has a class enabled all along the smaller setup's cycle that the cycle never
takes, so the smaller setup's lasso, run as it is in the larger setup, is not fair there.

**When it extends**, and how this module extends it. Let the extra clients, and the messages the
smaller setup lacks, do all they have to do before the loop starts: every publisher publishes all its
messages and reads their confirms, the disk writes what is pending, and the consumers process (ack)
every message but the ones that loop. What is then left of them enables no fair class: a publisher with
nothing to publish and nothing in flight, a consumer with room but nothing delivered to it. Delivering
is one class per queue, not per consumer, and the looping consumer's deliveries take it. The loop can
then repeat with the others idle, and it is fair in the larger setup, if the queue's round-robin (DS-1)
still hands the looping message to the consumers that fail on it. What breaks it: a consumer with room
that never fails, which gets the message in its turn (rabbitproof.check.by_argument's second loop
argument answers those setups first), a message that cannot be processed by anyone (its consumers all
fail on it for ever, so the others cannot be done first), a consumer whose only way to fail is a fault or
closing its channel (no fair step of the drive below), a loop that needs a fault again (each fault happens
at most as often as the setup says): in each case no lasso is built and the question stays undecided.

The construction, step by step, in the user's setup's machine (``full_lasso``):

1. the smaller setup's lasso, found by the exhaustive search of the smaller setup (smallest first, as
   rabbitproof.check.smaller_setups); its stem, up to the first repeated state, replayed step by step in
   the larger machine, the extra clients doing nothing (the replay of rabbitproof.check.smaller_setups);
   the messages handed out unprocessed in its cycle are the looping messages;
2. a fair drive: the larger machine's fair steps taken round-robin by class (the class taken longest ago
   first), no fault, no step that processes a looping message, a handling that processes a message
   before one that does not; it stops once every message left is a looping one, every publisher has
   published all its messages and none waits for an answer;
3. a search of the larger machine from there, by the same steps (``LOOP_STATES`` states at most), and in
   its graph a fair cycle through a state with a message handed out unprocessed (spark_check.liveness's
   ``local_lassos``), with each state's fair classes those the larger machine enables there (every step,
   not only those searched), so a cycle fair there is fair in the larger machine.

**The check.** What the construction gives is not taken on trust: ``check_lasso`` steps the trace again
from the larger setup's initial state (rabbitproof.check.lassos), each step one its machine enables (the
same text and frames), checks that the last step comes back to the state where the cycle started (but for
delivery tag numbers, as every cycle of `check`: rabbitproof.check.cycles), that a message is handed out
unprocessed in some state of the cycle, and that every fair class enabled in every state of the cycle is
taken in it, both with the search's classes (interchangeable clients sharing theirs) and with every
client's classes its own. Only a trace that passes answers "can happen"; otherwise the question stays
undecided, as before.
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from rabbitproof.spark_check.engine import LocalEngine, stopped_short
from rabbitproof.spark_check.liveness import atoms_of, local_lassos
from rabbitproof.spark_check.reductions import build_reduction
from rabbitproof.spark_check.results import Trace, TraceStep
from rabbitproof.spec.frames import MSG_STRIDE

from rabbitproof.check.cycles import SetupFairness
from rabbitproof.check.lassos import lasso_problem
from rabbitproof.check.questions import (
    PROCESSED_CAP, Watched, clients_apart, live_messages, original, publisher_waits,
)
from rabbitproof.check.setup_file import Setup
from rabbitproof.check.setup_model import publishes, to_config
from rabbitproof.check.smaller_setups import Smaller, _mapped, smaller_setups, step_as

DRIVE_STEPS = 5_000         # the fair drive's steps at most
LOOP_STATES = 20_000        # the states of the search for the cycle at most


@dataclass(frozen=True)
class FoundLoop:
    """A loop of the larger setup: the lasso (checked by ``check_lasso``), and the smaller setup whose loop
    it was built from."""

    trace: Trace
    smaller: Smaller
    states: int             # the smaller setup's search
    seconds: float          # the smaller setup's search and the construction


def _loop_question():
    from rabbitproof.check.questions import QUESTIONS
    return next(q for q in QUESTIONS if q.key == "loop")


def _processed(watched: Watched) -> dict[int, int]:
    return dict(watched.ghost.counts)


def check_lasso(full: Setup, trace: Trace) -> str:
    """Why ``trace`` is not a fair requeue loop of ``full``'s machine ("" when it is): ``lassos.lasso_problem``
    with the loop question, in the setup's own machine."""
    from rabbitproof.check.answers import machine_for

    return lasso_problem(to_config(full), machine_for(full, beliefs=True), trace, _loop_question().live)


def _looping(small_machine: Any, small_config: Any, trace: Trace) -> tuple[list, Watched, set[int]] | None:
    """The smaller lasso stepped in its own machine: the stem's actions, the state it reaches, and the
    messages handed out unprocessed somewhere on the cycle (None if a step does not replay)."""
    (here,) = small_machine.initial_states(small_config)
    stem, looping, at = [], set(), None
    for k, step in enumerate(trace.steps):
        if k == trace.cycle_start:
            at = here
        taken = step_as(small_machine, small_config, here, step)
        if taken is None:
            return None
        if k < trace.cycle_start:
            stem.append(taken[0])
        here = taken[1]
        if k >= trace.cycle_start:
            done = _processed(here)
            looping |= {u.msg for conn in here.spec.conns for ch in conn.channels for u in ch.unacked
                        if done.get(u.msg, 0) < PROCESSED_CAP}
    return (stem, at, looping) if at is not None and looping else None


def _allowed(machine: Any, config: Any, fair: SetupFairness, here: Watched, looping: set[int]) -> list:
    """The drive's and the cycle search's steps from ``here``: fair steps (no fault), none that processes a
    looping message; (class, processes something, action, state after, frames), in the machine's order."""
    out = []
    done = _processed(here)
    for action in machine.enabled(here, config):
        cls = fair.class_of(action)
        if cls < 0:
            continue
        after, frames = machine.step(here, action)
        now = _processed(after)
        if any(now.get(m, 0) > done.get(m, 0) for m in looping):
            continue
        out.append((cls, now != done, action, after, frames))
    return out


def _lets_go(before: Watched, after: Watched, looping: set[int]) -> bool:
    """Whether the step from ``before`` to ``after`` settles a looping message a consumer held (it nacks or
    rejects it: the drive leaves that to the last, so that the other messages go first)."""
    held = {e for e in before.ghost.held if e[3] in looping}
    return bool(held - set(after.ghost.held))


def _settled(here: Watched, limits: tuple[int, ...], looping: set[int]) -> bool:
    """Every message left is a looping one, every publisher has published all, none waits for an answer."""
    ghost = here.ghost
    live = {original(ghost, m) for m in live_messages(here.spec)} if ghost.copies else live_messages(here.spec)
    return (live <= looping and not publisher_waits(here)
            and all(conn.published >= limit for conn, limit in zip(here.spec.conns, limits)))


def full_lasso(smaller: Smaller, small_trace: Trace, deadline: float = float("inf")) -> Trace | None:
    """The smaller setup's lasso rebuilt in the larger setup's machine (the module docstring's steps 1 to 3),
    or None where a step of the construction finds nothing, or it is past ``deadline`` (time.monotonic()).
    Not checked here: ``check_lasso`` does."""
    from rabbitproof.check.answers import machine_for

    full = smaller.full
    small_config = to_config(smaller.setup, prefetch_for=publishes(full))
    small_machine = machine_for(smaller.setup, beliefs=True)
    stepped = _looping(small_machine, small_config, small_trace)
    if stepped is None:
        return None
    stem, _, small_looping = stepped
    conns = smaller.connections()
    looping = {conns[m // MSG_STRIDE] * MSG_STRIDE + m % MSG_STRIDE for m in small_looping}
    config, machine = to_config(full), machine_for(full, beliefs=True)
    fair = clients_apart(machine).fairness(config)
    (here,) = machine.initial_states(config)
    steps: list[TraceStep] = []
    for action in stem:                                         # 1. the stem, the extra clients idle
        action = _mapped(action, conns)
        if action not in machine.enabled(here, config):
            return None
        here, frames = machine.step(here, action)
        steps.append(TraceStep.of(len(steps) + 1, action, frames))
    last_taken: dict[int, int] = {}                             # 2. the fair drive
    for n in range(DRIVE_STEPS):
        if _settled(here, machine.limits, looping):
            break
        if time.monotonic() > deadline:
            return None
        options = _allowed(machine, config, fair, here, looping)
        if not options:
            return None
        options = [o + (_lets_go(here, o[3], looping),) for o in options]
        if all(o[5] for o in options):
            break                       # only the loop itself is left to do
        cls, _, action, after, frames, _ = min(options, key=lambda o: (o[5], last_taken.get(o[0], -1), not o[1]))
        last_taken[cls] = n
        here = after
        steps.append(TraceStep.of(len(steps) + 1, action, frames))
    else:
        return None
    cycle = _cycle_from(machine, config, fair, here, looping, deadline)     # 3. the cycle, searched from there
    if cycle is None:
        return None
    to_cycle, repeated = cycle
    for action, frames in to_cycle:
        steps.append(TraceStep.of(len(steps) + 1, action, frames))
    start = len(steps)
    for action, frames in repeated:
        steps.append(TraceStep.of(len(steps) + 1, action, frames))
    return Trace(tuple(steps), "", cycle_start=start)


def _cycle_from(machine: Any, config: Any, fair: SetupFairness, start: Watched, looping: set[int],
                deadline: float = float("inf")):
    """A fair cycle through a state with a message handed out unprocessed, reachable from ``start`` by
    ``_allowed`` steps: the steps to it and the repeated steps, concrete (tags as they fall), or None (none
    within LOOP_STATES states, or past ``deadline``)."""
    live = _loop_question().live
    key = machine.canonical
    ids: dict[Any, int] = {key(start): 0}
    fps, rep, depth = [key(start)], [start], [0]
    src, dst, cls, enabled, atoms, terminal = [], [], [], [], [], []
    queue = deque([0])
    while queue:
        k = queue.popleft()
        here = rep[k]
        mask = 0
        for a in machine.enabled(here, config):
            c = fair.class_of(a)
            if c >= 0:
                mask |= 1 << c
        enabled.append(mask)
        atoms.append(atoms_of((live,), here))
        terminal.append(not mask)
        for c, _, _, after, _ in _allowed(machine, config, fair, here, looping):
            fp = key(after)
            if fp not in ids:
                if len(fps) >= LOOP_STATES or time.monotonic() > deadline:
                    return None
                ids[fp] = len(fps)
                fps.append(fp)
                rep.append(after)
                depth.append(depth[k] + 1)
                queue.append(ids[fp])
            src.append(k)
            dst.append(ids[fp])
            cls.append(c)
    lassos = local_lassos((live,), src, dst, cls, enabled, atoms, terminal, depth, fps)
    if 0 not in lassos or not lassos[0].cycle:
        return None
    lasso = lassos[0]
    path = _path(machine, config, fair, start, looping, lasso.stem_target, key)
    if path is None:
        return None
    to_cycle, here = path
    repeated = []
    for target, c in zip(lasso.cycle, lasso.classes):
        nxt = next(((a, after, frames) for ci, _, a, after, frames in _allowed(machine, config, fair, here, looping)
                    if ci == c and key(after) == target), None)
        if nxt is None:
            return None
        repeated.append((nxt[0], nxt[2]))
        here = nxt[1]
    return to_cycle, repeated


def _path(machine: Any, config: Any, fair: SetupFairness, start: Watched, looping: set[int], target: Any, key):
    """The shortest run of ``_allowed`` steps from ``start`` to a state whose fingerprint is ``target``:
    its (action, frames) and the state it ends in, concrete."""
    parent: dict[Any, Any] = {key(start): None}
    queue = deque([start])
    while queue:
        here = queue.popleft()
        fp = key(here)
        if fp == target:
            steps = []
            while parent[fp] is not None:
                fp, action, frames = parent[fp]
                steps.append((action, frames))
            return steps[::-1], here
        for _, _, action, after, frames in _allowed(machine, config, fair, here, looping):
            nxt = key(after)
            if nxt not in parent:
                parent[nxt] = (fp, action, frames)
                queue.append(after)
    return None


@dataclass
class SearchedLoops:
    """What the search for a loop gave: the loop, what it could not do (in words), and an interruption."""

    found: FoundLoop | None
    said: list[str]
    interrupted: str | None = None


def search_loop(full: Setup, time_limit: float, each: float = 60.0, engine: Any = None) -> SearchedLoops:
    """Search the smaller setups of ``full``, smallest first, for a requeue loop, within ``time_limit``
    seconds in all and ``each`` a setup; the first whose lasso is rebuilt in ``full`` and passes
    ``check_lasso`` answers. Each smaller setup is one exploration on ``engine`` (`check`'s own: on Spark,
    Spark jobs; by default the local engine with `check`'s default reductions); the rebuilding and the
    check are steps of ``full``'s machine, here."""
    from rabbitproof.check.answers import ACTION_TYPES, DEFAULT_REDUCTIONS, machine_for

    live = _loop_question().live
    out = SearchedLoops(None, [])
    start = time.monotonic()
    engine = engine or LocalEngine(reductions=DEFAULT_REDUCTIONS)
    for smaller in smaller_setups(full):
        left = time_limit - (time.monotonic() - start)
        if left <= 0:
            break
        began = time.monotonic()
        setup = smaller.setup
        config = to_config(setup, name="smaller", prefetch_for=publishes(full))
        machine = machine_for(setup, beliefs=True)
        build_reduction(engine.reductions, machine, config)
        result = engine.explore(machine, config, (), action_types=ACTION_TYPES, time_limit=min(each, left),
                                liveness=(live,))
        if result.error is not None and not stopped_short(result.error):
            raise RuntimeError(f"exploring a smaller setup of {full.source} failed: {result.error}")
        if result.error is not None and result.error.startswith("interrupted"):
            out.interrupted = f"the search of a smaller setup ({smaller.text()}) was {result.error}"
            break
        verdict = next(p for p in result.properties if p.name == live.name)
        if not verdict.found or verdict.trace is None:
            continue
        trace = full_lasso(smaller, verdict.trace, start + time_limit)
        why = "no fair loop of this setup was built from it" if trace is None else check_lasso(full, trace)
        if why:
            out.said.append(f"loop: the one of the smaller setup ({smaller.text()}) does not carry over ({why})")
            continue
        out.found = FoundLoop(trace, smaller, result.distinct_states, time.monotonic() - began)
        break
    return out
