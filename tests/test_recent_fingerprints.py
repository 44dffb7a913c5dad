"""spark_check.recent_fingerprints: a state met again gets the fingerprint computed for it before,
computed once; memory stays within two generations."""
from __future__ import annotations

import pytest

from rabbitproof.check.answers import prepare
from rabbitproof.check.setup_file import read_setup
from rabbitproof.spark_check.engine import LocalEngine
from rabbitproof.spark_check.expansion import Expander
from rabbitproof.spark_check.recent_fingerprints import RecentFingerprints


def test_each_state_gets_its_own_fingerprint_computed_once_while_remembered() -> None:
    calls: list[str] = []

    def of(state: str) -> int:
        return len(state) * 1000 + ord(state[0])

    def named(state: str) -> int:
        calls.append(state)
        return of(state)
    recent = RecentFingerprints(named, capacity=2)
    assert [recent(s) for s in ("a", "bb", "a", "ccc")] == [of(s) for s in ("a", "bb", "a", "ccc")]
    assert calls == ["a", "bb", "ccc"] and recent.computed == 3      # "a" the second time: remembered
    # Generations of 2: {a, bb} became the older one when the newer filled, then {a, ccc} did.
    assert recent.remembered() == ({"a": of("a"), "ccc": of("ccc")}, {})
    recent("a")                 # from the older generation into the newer, not computed
    assert recent.computed == 3 and recent.remembered()[1] == {"a": of("a")}
    recent("bb")                # dropped with its generation: computed again
    assert recent.computed == 4 and recent.remembered()[0] == {"a": of("a"), "bb": of("bb")}
    recent("ccc")
    assert recent.computed == 5


class Colliding(str):
    """A state whose hash is the same as every other's: equal states only are one."""

    def __hash__(self) -> int:
        return 7


def test_states_whose_hashes_collide_each_get_their_own_fingerprint() -> None:
    recent = RecentFingerprints(len)
    assert [recent(Colliding(s)) for s in ("a", "bb", "a", "ccc", "bb")] == [1, 2, 1, 3, 2]
    assert recent.computed == 5         # each state met replaced the other one kept under the same hash
    assert recent(Colliding("bb")) == 2 and recent.computed == 5


def test_a_capacity_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="capacity"):
        RecentFingerprints(hash, capacity=0)


def test_under_symmetry_the_remembered_fingerprints_are_the_computed_ones() -> None:
    """On every state a search of a setup with interchangeable clients meets: the engine's fingerprint
    (remembered) is the symmetry's own, and the search computes far fewer than it asks for."""
    setup = read_setup("examples/two-workers.toml")
    engine = LocalEngine(reductions=("por", "symmetry"))
    prepared = prepare(setup, engine, None, None)
    expander = Expander(prepared.machine, prepared.config, (), reductions=("por", "symmetry"))
    recent = expander.fingerprint
    assert isinstance(recent, RecentFingerprints)
    computed_alone = recent.fingerprint
    seen, frontier, asked = set(), list(expander.initial_states()), 0
    while frontier:
        state = frontier.pop()
        _, actions, successors, _ = expander.expand(state)
        for succ in successors:
            asked += 1
            fp = recent(succ)
            assert fp == computed_alone(succ)
            if fp not in seen:
                seen.add(fp)
                frontier.append(succ)
    assert len(seen) > 2000
    assert recent.computed < asked / 2
