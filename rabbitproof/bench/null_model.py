"""The null model of ``rabbitproof.bench.engines``: states and actions that cost almost nothing, so exploring it
measures an engine's own per-state overhead.

It lives in a module of its own so that the Spark engine's executors import it by this name: defined in
``rabbitproof.bench.engines`` run as ``python -m``, it would be ``__main__``'s, which no executor can import.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class NullHop:
    """The null model's only action: go to child ``k`` of the current node."""

    k: int
    actor = "null"


class NullModel:
    """A complete ``fanout``-ary tree of ``n`` int states (heap numbering): n distinct states, each with
    ``fanout`` successors computed by one multiplication, so nearly all the time is the engine's."""

    def __init__(self, n: int, fanout: int = 4) -> None:
        self.n = n
        self.fanout = fanout
        self.actions = tuple(NullHop(k) for k in range(1, fanout + 1))

    def initial_states(self, config: Any) -> tuple[int, ...]:
        return (0,)

    def enabled(self, state: int, config: Any) -> tuple[NullHop, ...]:
        return self.actions

    def step(self, state: int, action: NullHop) -> tuple[int, tuple[()]]:
        return (state * self.fanout + action.k) % self.n, ()

    def terminal_ok(self, state: int, config: Any) -> bool:
        return True


@dataclass(frozen=True)
class NullConfig:
    """A configuration for the null model."""

    name: str = "null model (engine alone)"
    description: str = "engine overhead"
    deadlock_is_error: bool = True
    properties: tuple[str, ...] = ()
    max_states: int = 10**9
