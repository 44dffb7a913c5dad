"""Random executions of the spec, and what their clients observed: traces the spec itself produces.

Every such trace must be accepted by ``spec.trace.check`` under the same configuration (the checker is
complete for the spec's own behaviour); tests and the trace benchmark use them. A run is a seeded
random walk over ``machine.enabled``: reproducible, and biased so that runs make progress (clients
read what is in flight, the broker takes frames) instead of wandering.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from . import actions as A
from . import machine
from .state import CONN_DOWN

# Relative weights of the actions a random run picks from; the rest weigh 1.
_WEIGHTS = {A.ClientReceive: 6, A.BrokerTakeFrame: 6, A.BrokerDeliver: 3, A.BrokerConfirm: 2,
            A.DiskFsync: 2, A.BrokerRestart: 50, A.ClientConnect: 50}


@dataclass
class Run:
    """A random execution: its actions in order, and each connection's observations."""

    actions: list
    observations: dict

    def size(self) -> int:
        """How many observations the run's clients made."""
        return sum(len(o) for o in self.observations.values())


def random_run(config, seed: int, max_steps: int = 10_000, crash_at: int | None = None,
               max_observations: int | None = None) -> Run:
    """A random execution of the spec under ``config``. Faults other than the crash come as the walk
    picks them; with ``crash_at``, the broker crashes at that step (if it is up) and at no other."""
    rng = random.Random(seed)
    state = machine.initial_states(config)[0]
    actions: list = []
    observations: dict = {c: [] for c in range(config.connections)}
    for n in range(max_steps):
        if max_observations is not None and sum(map(len, observations.values())) >= max_observations:
            break
        enabled = machine.enabled(state, config)
        if crash_at is not None:
            crash = [a for a in enabled if isinstance(a, A.BrokerCrash)]
            enabled = tuple(a for a in enabled if not isinstance(a, A.BrokerCrash))
            if n >= crash_at and crash:
                enabled = tuple(crash)
                crash_at = None
        if not enabled:
            break
        action = rng.choices(enabled, [_WEIGHTS.get(type(a), 1) for a in enabled])[0]
        before = state
        state, labels = machine.step(state, action)
        actions.append(action)
        _observe(observations, before, state, action, labels)
    return Run(actions, observations)


def _observe(observations: dict, before, after, action, labels) -> None:
    """What the clients saw of one step: frames they wrote or read, a lost connection, a reconnection."""
    kind = type(action)
    if kind is A.ClientConnect:
        observations[action.conn].append(("connect",))
        return
    if kind in (A.NetworkLoss, A.ClientVanish, A.BrokerCrash):
        for c, (old, new) in enumerate(zip(before.conns, after.conns)):
            if old.status != CONN_DOWN and new.status == CONN_DOWN:
                observations[c].append(("lost",))
        return
    if isinstance(action, A.ClientAction):            # ClientReceive included
        for wire in labels:
            observations[wire.conn].append(("sent" if wire.to_broker else "received", wire.frame))
