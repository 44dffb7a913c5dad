"""Steps of `rabbitproof check`'s machine that read and change only their own connection, the budgets and
the observer's record, remembered by those.

A client reading a frame (``ClientReceive``), settling a delivery (``ClientAck``, ``ClientNack``,
``ClientReject``) and the broker confirming a publish (``BrokerConfirm``) are taken from many states that
differ only in the other connections, the queues and the disk: on the two-publisher benchmark setup of
`rabbitproof bench check`, 15,008 such steps have 1,482 distinct (action, connection, budgets, record).
``stepped`` computes each once and puts its connection, budgets and record into every state with that key.

Why that key determines the step. The machine's step is the spec's step beside the observer
(rabbitproof.check.questions.SetupMachine.step):

- the spec's ``client.receive`` reads and writes connection c (the frame it reads, its view, the
  automatic-mode deliveries in flight; a connection.close resets it); the fates it records are the
  spec's history, cleared in the same step (``cycles.forget_ghosts``). ``client.client_step`` of a
  settlement reads c's view and writes c's view and its frame to the broker (``client.write``); it is
  charged to the budgets (``machine._spend``: a requeue, or a tag not held), which it reads. The broker's
  ``confirm`` reads c's channel and writes it and its frame to the client (``broker.send``);
- the observer reads its own record, the machine's settings, and the connection before and after the
  step; it drops the entries about channels that are no longer open, and every entry about another
  connection was about an open channel before the step (every step's observer drops the others, so
  every state the machine reaches keeps that) and still is, as the step leaves the other connections
  alone; ``unspent`` and ``forget_ghosts`` read the budgets and c's view.

A step is remembered only once seen to change nothing but connection c and the budgets of the spec's
state, so one that did, against this argument, is recomputed every time rather than misapplied.
``tests/test_check_own_connection.py`` checks the remembered steps against the steps themselves on every
reachable state of setups with every kind of client and fault.
"""
from __future__ import annotations

from typing import Any, Callable

from rabbitproof.spec import actions as A
from rabbitproof.spec.state import with_conn, with_used

OWN = frozenset({A.ClientReceive, A.ClientAck, A.ClientNack, A.ClientReject, A.BrokerConfirm})
CAPACITY = 65_536       # steps remembered

_DONE: dict[tuple, tuple] = {}      # (action, connection, budgets, record) -> (machine, connection, budgets,
#                                     record and labels after the step)


def stepped(machine: Any, watched: Any, action: Any, step: Callable[[Any, Any], tuple]) -> tuple:
    """``step(watched, action)`` for an ``OWN`` action of ``machine``, computed once per distinct action,
    connection, budgets and observer's record (module docstring)."""
    state, ghost = watched
    c = action.conn
    key = (action, state.conns[c], state.used, ghost)
    met = _DONE.get(key)
    if met is not None and met[0] is machine:
        _, conn, used, after, labels = met
        spec = with_conn(state if used is state.used else with_used(state, used), c, conn)
        return type(watched)(spec, after), labels
    done = step(watched, action)
    spec = done[0].spec
    conn, used = spec.conns[c], spec.used
    if spec == with_conn(with_used(state, used), c, conn):
        if len(_DONE) >= CAPACITY:
            _DONE.clear()
        _DONE[key] = (machine, conn, used if used != state.used else state.used, done[0].ghost, done[1])
    return done
