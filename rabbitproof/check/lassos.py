"""A lasso (the steps to a cycle, then the steps that repeat) held to a setup's machine: stepped again from
the initial state, the cycle closing, the question's states all along it, and fair with every client's
classes its own.

The exhaustive search judges the liveness questions (a requeue loop, a publisher waiting for ever) with
the fairness of ``cycles.SetupFairness``, where interchangeable clients share their classes; that is what
lets the symmetry reduction keep fair cycles (spec.symmetry). A "cannot happen" under that fairness holds
under the stronger one where each client's classes are its own, since every cycle fair under the
stronger fairness is fair under the weaker. A "can happen" need not: the search may offer a cycle in which
one twin polls, or closes and opens its channel, again and again while the other never reads the
delivery sent to it. The shared class "one of the twins reads" is taken, so the cycle counts as fair, yet
no client of RabbitMQ stops reading its own socket because another one reads its. ``lasso_problem`` says
what is wrong with a lasso ("" when nothing is); `check` answers "can happen" to a liveness question only
with a lasso that passes it (rabbitproof.check.answers.check_setup, rabbitproof.check.larger_loops).
"""
from __future__ import annotations

from typing import Any

from rabbitproof.spark_check.results import Trace
from rabbitproof.spec.properties_api import Liveness

from rabbitproof.check.cycles import SetupFairness
from rabbitproof.check.questions import clients_apart
from rabbitproof.check.smaller_setups import step_as


def fairnesses(config: Any, machine: Any) -> tuple[SetupFairness, ...]:
    """The two ways of grouping fair steps a lasso must be fair under: the search's (interchangeable
    clients sharing their classes), and every client's its own."""
    return machine.fairness(config), clients_apart(machine).fairness(config)


def lasso_problem(config: Any, machine: Any, trace: Trace, live: Liveness) -> str:
    """Why ``trace`` is not a fair lasso of ``live`` in ``machine`` ("" when it is): every step enabled in
    turn from the initial state (the same text and frames), the last step back at the state where the cycle
    started (but for tag numbers, as every cycle of `check`: rabbitproof.check.cycles), ``live.stays`` in
    every state of the cycle and ``live.recurs`` in one, and every fair class enabled in every state of
    the cycle taken in it, under both groupings of ``fairnesses``."""
    if trace.cycle_start is None or trace.cycle_start >= len(trace.steps):
        return "the trace has no cycle"
    (here,) = machine.initial_states(config)
    states, actions = [here], []
    for step in trace.steps:
        taken = step_as(machine, config, here, step)
        if taken is None:
            return f"step {step.number} ({step.action}) is not one the setup's machine takes there"
        actions.append(taken[0])
        here = taken[1]
        states.append(here)
    first = trace.cycle_start
    cycle_states, cycle_actions = states[first:-1], actions[first:]
    if machine.canonical(states[-1]) != machine.canonical(states[first]):
        return "the cycle does not come back to the state it started from"
    if not all(live.stays(s) for s in cycle_states):
        return "the cycle leaves the question's states"
    if not any(live.recurs(s) for s in cycle_states):
        return "no state of the cycle is one the question's cycles must pass through"
    for fair in fairnesses(config, machine):
        taken = {fair.class_of(a) for a in cycle_actions}
        always = None
        for s in cycle_states:
            on = {fair.class_of(a) for a in machine.enabled(s, config)} - {-1}
            always = on if always is None else always & on
        starved = sorted((always or set()) - taken)
        if starved:
            return f"the cycle is not fair: {fair.classes[starved[0]]} is always possible on it and never taken"
    return ""
