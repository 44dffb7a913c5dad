"""What a broker crash leaves of a state of `rabbitproof check`'s machine, and the state after the crash
remembered by it.

A crash is enabled in nearly every state a search keeps (whenever the broker is up and the setup's
crashes are not spent), and it wipes out nearly everything: on the two-publisher benchmark setup of
`rabbitproof bench check`, 7,622 crash steps lead to a few dozen states. ``crashed`` computes the step
once for each distinct ``survivors`` of the state and gives the remembered result to the others.

Why ``survivors`` determines the result. The machine's step of ``BrokerCrash`` is
``forget_ghosts(unspent(crash(spend(spec))))`` beside ``observe(ghost, spec, after, crash, ())``
(rabbitproof.check.questions.SetupMachine.step). ``spec.faults.crash`` reads of the state:

- each connection slot: a vanished one (``CONN_GONE``) becomes a free slot with as many channels; any
  other is reset down, keeping only its ``published`` and its number of channels;
- each queue: ``exists`` and ``durable`` (it survives if both), and it keeps ``durable``,
  ``dead_letter``, ``enqueued`` and ``born``; everything else of it is emptied; the bindings are kept
  for the queues that survive;
- the disk and the budgets, kept (a crash spent);
- the live copies, the deliveries in flight and the copies on their way to a channel: only for the
  spec's history of fates (and ``revived``, which those fates update), which ``forget_ghosts`` clears
  in the same step, with the spec's other histories.

The observer reads the ghost, the machine's settings, and of the state after the crash only whether
each channel is open (none is: every connection is down): all it recorded about channels is dropped,
and what publishers waited for fails. So the state after a crash, and its labels (none), are a
function of the machine and of ``survivors``; ``tests/test_check_after_crash.py`` checks the remembered
step against the step itself on every reachable state of setups with a crash.
"""
from __future__ import annotations

from typing import Any, Callable

from rabbitproof.spec.state import CONN_GONE

CAPACITY = 4_096        # distinct survivors remembered; a search meets few

_AFTER: dict[tuple, tuple[Any, Any]] = {}       # survivors -> (the machine, its step's result)


def survivors(watched: Any) -> tuple:
    """What the state after a crash of ``watched`` (a rabbitproof.check.questions.Watched) depends on
    (module docstring)."""
    state, ghost = watched
    return (tuple((conn.status == CONN_GONE, conn.published, len(conn.channels)) for conn in state.conns),
            tuple((q.exists, q.durable, q.dead_letter, q.enqueued, q.born) for q in state.queues),
            state.bindings, state.disk, state.used, ghost)


def crashed(machine: Any, watched: Any, action: Any, step: Callable[[Any, Any], tuple]) -> tuple:
    """``step(watched, action)`` for the crash ``action`` of ``machine``, computed once per distinct
    ``survivors`` of the state (and machine)."""
    key = survivors(watched)
    met = _AFTER.get(key)
    if met is not None and met[0] is machine:
        return met[1]
    done = step(watched, action)
    if len(_AFTER) >= CAPACITY:
        _AFTER.clear()
    _AFTER[key] = (machine, done)
    return done
