"""The trace checker is complete for the spec's own behaviour: every trace a random execution of the
spec produces (spec/simulate.py) is accepted under the same configuration, crashes, lost connections,
confirms, transactions and requeues included. This is what keeps the checker's pruning honest (a
pruned step that was needed shows here as a rejection); its soundness is held by the rejected traces
of the other test_spec_trace_* files."""
from __future__ import annotations

from dataclasses import replace

import pytest

from rabbitproof.spec import configs, simulate, trace

SMALL = [name for name in configs.STANDARD if name != "medium"]


@pytest.mark.parametrize("name", SMALL)
def test_random_executions_of_the_spec_are_accepted(name):
    config = configs.get(name)
    for seed in range(25):
        run = simulate.random_run(config, seed, max_steps=500)
        verdict = trace.check(run.observations, config, max_nodes=200_000)
        assert verdict.ok, f"{name} seed {seed}: {verdict.explain()}"


@pytest.mark.parametrize("name,messages", [("crash", 7), ("crash", 12), ("confirms", 12)])
def test_longer_runs_with_a_crash_are_decided_DU_2_PC_10(name, messages):
    # Formerly out of reach: crash with 7 messages and confirms with 12 gave up after 2M search nodes.
    config = replace(configs.get(name), messages=messages)
    for seed in range(5):
        run = simulate.random_run(config, seed, max_steps=3000)
        verdict = trace.check(run.observations, config, max_nodes=200_000)
        assert verdict.ok, f"{name} seed {seed}: {verdict.explain()}"


def test_a_search_that_gives_up_is_inconclusive_not_an_error():
    config = replace(configs.get("crash"), messages=12)
    run = simulate.random_run(config, 3, max_steps=3000)
    verdict = trace.check(run.observations, config, max_nodes=5)
    assert verdict.status == trace.INCONCLUSIVE and not verdict.ok
    assert verdict.explain().startswith("inconclusive: the search gave up after 5 spec states")


def test_message_ids_of_two_connections_never_collide():
    # With 100 as the stride, connection 0's 101st message was named like connection 1's first.
    text = ("c0 sent basic.publish(ch=1, exchange='', routing_key='q0', mandatory=False, persistent=False, "
            "msg=m0.101)")
    [[(_, frame)]] = trace.parse(text).values()
    [[(_, other)]] = trace.parse(text.replace("c0 sent", "c1 sent").replace("m0.101", "m1.1")).values()
    assert frame[6] != other[6]
    with pytest.raises(ValueError, match="out of range"):
        trace.parse(text.replace("m0.101", f"m0.{1 << 32}"))

