"""``enabled`` asks only the candidates one field does not rule out: it must say exactly what asking
every candidate's precondition says, on the reachable states of every standard configuration."""
from __future__ import annotations

import pytest

from rabbitproof.spec import configs, machine


def reachable(config, limit: int):
    """The first ``limit`` states a breadth-first search of ``config`` reaches."""
    seen = dict.fromkeys(machine.initial_states(config))
    frontier = list(seen)
    while frontier and len(seen) < limit:
        nxt = []
        for state in frontier:
            for action in machine.enabled(state, config):
                succ = machine.step(state, action)[0]
                if succ not in seen:
                    seen[succ] = None
                    nxt.append(succ)
        frontier = nxt
    return list(seen)[:limit]


@pytest.mark.parametrize("name", configs.STANDARD)
def test_enabled_is_every_candidate_whose_precondition_holds(name):
    config = configs.get(name)
    for state in reachable(config, 4000):
        every = tuple(a for a in machine.candidates(state, config) if machine.precondition(state, a))
        assert machine.enabled(state, config) == every
