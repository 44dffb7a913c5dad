"""The ``budgets`` reduction of `rabbitproof check`'s machine: a state is not explored when the same state
with less of the setup's faults spent is.

What it compares
----------------
``split`` cuts a state (rabbitproof.check.questions.Watched) into the rest and the spec's budget counters
(``State.used``: crashes, lost connections, channel errors, refused publishes, ... spent so far). Two
states equal but for their counters are twins; x *covers* y when x has spent no more of any budget, and
less of one. The engines keep, of twins, only those no other covers (spark_check.subsumption says how,
the same way in every engine). Of the 1-message version of the benchmark setup (rabbitproof bench check), a third of the states
are covered by a twin (measured on the complete graph).

Why no answer changes
---------------------
Write x < y when x covers y.

(1) *x can do all y can.* The machine reads the counters in one place only: a step that spends a
    budget is enabled while the counter is below its bound (``spec.machine.enabled``: a crash, a lost
    or vanished connection, a channel error, a refused publish, a close; the budgets the programs
    spend, ``cycles.ENDLESS``, stay at 0, ``unspent``). No other guard, no effect of a step, no
    program (``_programs_take``), the observer (``observe``), no question and no fair class reads
    them. So every step b enabled in y is enabled in x, and ``b(x) < b(y)`` or they are equal (b spent
    the same in each). By induction, every execution from y is one from x, through twins each covering
    the other's state, with the same values of every question, and the same fair classes enabled at
    each step (those are never budget steps: ``cycles.SetupFairness`` makes every fault free never to
    happen, and no fair step is guarded by a counter).
(2) *Safety.* A state that answers "can happen" (lost, twice, order) reached from a left-out y is
    matched, step for step, by one reached from its covering twin x, which is explored, with the same
    verdict (the questions read no counter). The other reductions are sound from every state they
    keep, so this holds on the reduced graph too: whatever y's reduced graph reaches, y's full graph
    does, hence x's full graph, hence x's reduced graph.
(3) *Ends.* An end (no fair step enabled: spark_check.liveness) reached from y is matched by a state
    reached from x with the same fair classes enabled, none, and the same ``publisher_waits``.
(4) *Cycles.* No cycle of the model spends a budget (a counter only grows), and a cycle from y is
    matched from x by a walk through the same states but for smaller counters, which takes no budget
    step either: the same states and steps as a cycle, with the same fair classes enabled and taken.
    In the explored graph, the engines leave out every edge that spends a budget and send an edge to a
    left-out state to its covering twin; such a redirected edge makes the counters fall, so it lies on
    no cycle of the remaining edges, and every cycle the liveness search sees is one of the model's
    (``keeps_fair_cycles``).
(5) *Traces* follow the parents of kept states, each reached by a real step; a lasso's cycle lies
    inside a strongly connected component, whose edges are real steps by (4).

``tests/test_check_spent_budgets.py`` checks (1) on every reachable state of setups with every fault
(each enabled step of a state is enabled in its twin with no counter spent, to twins; and the fair
classes enabled are the same), and that the examples and the two-publisher setups answer the same with
the reduction and without.
"""
from __future__ import annotations

from typing import Any

from rabbitproof.spec.state import Used

NOTHING_SPENT = Used()


class SpentBudgets:
    """``split(watched)``: the state with no budget spent, and the counters (module docstring)."""

    name = "budgets"
    keeps_fair_cycles = True        # (4) in the module docstring

    @staticmethod
    def spent(watched: Any) -> tuple:
        """The counters of ``watched``: those ``split`` gives, without the rest."""
        return tuple(watched[0].used)

    @staticmethod
    def split(watched: Any) -> tuple[Any, tuple]:
        spec = watched[0]
        used = spec.used
        if used == NOTHING_SPENT:
            return watched, tuple(used)
        return type(watched)(spec._replace(used=NOTHING_SPENT), watched[1]), tuple(used)
