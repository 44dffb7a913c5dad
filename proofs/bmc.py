"""Bounded model checking of every hazard: Z3 finds an execution of the bounded model
(``model.bounded``) that violates the hazard's property, the execution is replayed step by step through
``spec.machine.step`` (each action checked to be enabled there) and the property is shown false on the
spec's final state; its length is set beside the explorer's shortest counterexample.

The unrolling: one constant per field per step, the initial state fixed to the projection of the
configuration's initial spec state, and at each step one action of the configuration's alphabet
(``model.bounded.instances``) whose relation holds, or HALT (the execution ended). The action chosen at
a step is an 8-bit vector, like the fields, so the whole query is bit-vector logic and Z3 decides it by
bit-blasting (an integer there made every query several times slower). One step is built once over
fresh constants and renamed for each step of the unrolling. ``search`` asks for a violation within
bounds 1, 2, 3, ... in turn (each query in its own solver with Z3's resource budget, ``model.budgets``,
never a time limit), so the first execution found is a shortest one the bounded model has; a bound the
solver does not decide within its budget is passed over, asked again with a larger one once a longer
execution is found, and makes the outcome unknown if it stays undecided and nothing is found.

Interleavings (``independent_pairs``): two actions are independent when neither writes a field the
other reads or writes (read and write sets taken from their relations over a symbolic state). The
unrolling forbids an action to follow an independent one of higher number in the alphabet. This
loses no shortest violation. If a then b is a run from s to s2 with a, b independent, then b then a is
a run from s to s2 too: b's guard and effect read nothing a writes, so b is enabled at s and does there
what it did after a; a's guard and effect read nothing b writes, so a is still enabled after b and does
what it did at s; and they write disjoint fields, so the final states agree. Swapping an adjacent
inverted independent pair lowers the number of inverted pairs in the sequence by one, so repeated
swaps end, and they turn any execution into one of the same length, through valid steps, ending in
the same state, with no adjacent inverted independent pair: it satisfies the constraint, and it
violates the property at its last step as the original did. So "a violation within k steps" is
satisfiable with the constraint exactly when it is without it; only the number of interleavings the
solver has to rule out shrinks. HALT is no action and takes part in no pair.

Commuting pairs (also ``independent_pairs``) extend this to pairs that clash only on a frame FIFO (one
appends a frame, the other takes or reads the oldest), under a condition: the unrolling forbids i < j
to run right after j when i was already enabled in the state j was taken from. Z3 proves for each such
pair, over a state of fresh constants (so in every state), that when i and j are both enabled at s and
j then i runs, i then j runs too and ends in the same state; pairs it refutes or does not decide are
left out. The swap argument above then holds for the adjacent pairs the constraint forbids (the
condition is exactly the premise of the proof), and each swap still lowers the number of inverted
pairs by one.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

import z3

from rabbitproof.model import bounded as B
from rabbitproof.model import budgets
from rabbitproof.model import bounded_state as S
from rabbitproof.spark_check.bundle import load_spec
from rabbitproof.spark_check.engine import LocalEngine
from rabbitproof.spec import configs, machine
from rabbitproof.spec.properties import get

MAX_STEPS = 20

# Each hazard and the standard configuration the explorer exhibits it in (spec.configs.EXPECT).
HAZARD_CONFIGS = {
    "auto_ack_never_loses": "hazard_auto_ack_loss",
    "persistent_never_lost": "hazard_unconfirmed_lost",
    "acked_never_redelivered": "hazard_ack_resurrected",
    "consumer_sees_publication_order": "hazard_consumer_order",
    "tx_commit_atomic": "hazard_tx_not_atomic",
    "confirms_in_publish_order": "hazard_confirm_order",
    "outstanding_within_prefetch": "hazard_prefetch_exceeded",
}

HALT = 255                              # the action number of "the execution has ended"
FOUND, NOT_FOUND, UNKNOWN, REPLAY_FAILED, NOT_DONE = "found", "not found", "unknown", "replay failed", "not done"


@dataclass
class BmcOutcome:
    """One hazard's bounded search and replay."""

    hazard: str
    config: str
    status: str                         # FOUND only when the spec replay confirmed the violation
    length: int | None = None           # steps of the execution Z3 found
    explorer_length: int | None = None  # steps of the explorer's shortest counterexample
    seconds: float = 0.0
    actions: list = field(default_factory=list)
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == FOUND


def _symbolic(shape: S.Shape, t: int) -> dict:
    return {n: S.var(f"{n}@{t}") for n in S.names(shape)}


def _concrete(values: dict) -> dict:
    return {n: S.bv(v) for n, v in values.items()}


_TOKEN = re.compile(r"\|([^|]*)\||([^\s()|]+)")


def _free_names(term: z3.ExprRef, fields: set, acc: set) -> set:
    """The fields (among ``fields``) that ``term`` reads, added to ``acc``: the symbols of its SMT-LIB
    text (Z3 prints shared subterms once, so this is far faster than walking the term from Python)."""
    acc.update(m for pair in _TOKEN.findall(term.sexpr()) for m in pair if m in fields)
    return acc


def _read_write(relations: list, x: dict) -> list:
    """Each action's (reads, writes) field sets from its relation over the state ``x`` of fresh
    constants, None for an action whose guard is false in every state."""
    sets = []
    for tr in relations:
        if z3.is_false(z3.simplify(tr.guard)):
            sets.append(None)                       # never enabled: never in the unrolling
            continue
        writes = {n for n, v in tr.after.items() if not v.eq(x[n])}
        fields = set(x)
        reads = _free_names(z3.And(tr.guard, *[tr.after[n] == tr.after[n] for n in writes]), fields, set())
        sets.append((reads, writes))
    return sets


def independent_pairs(config, shape: S.Shape, alphabet: list, conditional: bool = False,
                      built: tuple | None = None) -> tuple[set, set]:
    """(independent, commuting): pairs (i, j), i < j, of alphabet positions.

    Independent: neither relation writes a field the other's guard or effect reads, nor one the other
    writes. The relations are built over a state of fresh constants, so the read and write sets hold
    in every state.

    Commuting (only with ``conditional``): pairs that clash only on the fields of frame FIFOs (one
    appends a frame, the other takes or reads the oldest) for which Z3 proves, over a state of fresh
    constants (so in every state), that when both are enabled and i is still enabled after j, then j is
    enabled after i and both orders end in the same state. Pairs Z3 refutes or does not decide in its
    budget are left out. ``built``: (x, relations) already made, the relations over the state x of
    fresh constants."""
    if built is None:
        x = {n: S.var(n) for n in S.names(shape)}
        built = x, [B.relation(shape, config, action, x) for action in alphabet]
    x, relations = built
    sets = _read_write(relations, x)
    fifos = S.fifo_keys(shape)
    independent, commuting = set(), set()
    for i in range(len(alphabet)):
        for j in range(i + 1, len(alphabet)):
            if sets[i] is None or sets[j] is None:
                continue
            (ri, wi), (rj, wj) = sets[i], sets[j]
            clash = wi & (rj | wj) | wj & ri
            if not clash:
                independent.add((i, j))
            elif conditional and clash <= fifos and _commute(config, shape, alphabet, relations, x, i, j):
                commuting.add((i, j))
    return independent, commuting


def _commute(config, shape, alphabet, relations, x, i, j) -> bool:
    """Z3 proves: g_i(x) and g_j(x) and g_i(j(x)) imply g_j(i(x)) and i(j(x)) = j(i(x))."""
    ti, tj = relations[i], relations[j]
    after_i, after_j = {**x, **ti.after}, {**x, **tj.after}
    i_after_j = B.relation(shape, config, alphabet[i], after_j)
    j_after_i = B.relation(shape, config, alphabet[j], after_i)
    ji, ij = {**after_j, **i_after_j.after}, {**after_i, **j_after_i.after}
    same = [ji[n] == ij[n] for n in x if not ji[n].eq(ij[n])]
    solver = _solver()
    solver.add(ti.guard, tj.guard, i_after_j.guard)
    for claim in [j_after_i.guard, *same]:      # one claim at a time: several times faster than all at once
        if z3.is_true(z3.simplify(claim)):
            continue
        solver.push()
        solver.add(z3.Not(claim))
        result = budgets.check_twice(solver, "commute")
        solver.pop()
        if result != z3.unsat:
            return False
    return True


def _solver() -> z3.Solver:
    """A fresh solver for one query: bit-blasting the whole unrolling at once (Z3's QF_BV solver) is far
    faster here than one incremental solver kept across lengths."""
    return z3.SolverFor("QF_BV")


class Unrolling:
    """k steps of the bounded model from the configuration's initial state, built on demand: the
    constraints of each step, the action chosen at each step, and the state after each."""

    def __init__(self, config, canonical: bool = True, conditional: bool = True):
        self.config = config
        self.shape = B.shape_of(config)
        self.alphabet = B.instances(config, self.shape)
        self.states = [_concrete(B.project(machine.initial_states(config)[0], self.shape))]
        self.choices: list = []
        self.constraints: list = []
        self.ends: list[int] = []                   # len(constraints) after each step
        self.guards: list[dict] = []                # per step: action number -> its guard at the state before
        assert len(self.alphabet) < 255, "the action number is an 8-bit vector, 255 is HALT"
        # One step over fresh constants (x, act, y), built once; each step of the unrolling is a copy with
        # x, act and y renamed (z3.substitute), far faster than building every relation again per step.
        x = {n: S.var(n) for n in S.names(self.shape)}
        relations = [B.relation(self.shape, config, action, x) for action in self.alphabet]
        self.independent, self.commuting = independent_pairs(config, self.shape, self.alphabet, conditional,
                                                             (x, relations)) if canonical else (set(), set())
        act, y = z3.BitVec("act", 8), {n: S.var(n + "'") for n in x}
        self._x, self._act, self._y = x, act, y
        self._guards = {i: tr.guard for i, tr in enumerate(relations) if not z3.is_false(z3.simplify(tr.guard))}
        nexts = {n: x[n] for n in x}
        for i in self._guards:                  # each field: its value after whichever action was taken
            for n, value in relations[i].after.items():
                if not value.eq(x[n]):
                    nexts[n] = z3.If(act == i, value, nexts[n])
        # act = HALT: the execution ended before this step (the state stays, and so do later steps), so
        # a bound of k steps also admits shorter executions, even one ending where nothing is enabled.
        self._step = [z3.Or([z3.And(act == i, g) for i, g in self._guards.items()] + [act == HALT])]
        self._step += [y[n] == nexts[n] for n in x]
        self._packed = z3.And(*self._step, *self._guards.values())

    def extend(self, k: int) -> None:
        while len(self.choices) < k:
            t = len(self.choices) + 1
            x, y = self.states[-1], _symbolic(self.shape, t)
            act = z3.BitVec(f"act@{t}", 8)
            rename = [(self._x[n], x[n]) for n in x] + [(self._y[n], y[n]) for n in y] + [(self._act, act)]
            packed = z3.substitute(self._packed, *rename)       # one call: each call converts the whole renaming
            parts = packed.children()
            assert len(parts) == len(self._step) + len(self._guards)
            self.constraints += parts[:len(self._step)]
            enabled = dict(zip(self._guards, parts[len(self._step):]))
            if self.choices:
                prev = self.choices[-1]
                self.constraints.append(z3.Implies(prev == HALT, act == HALT))
                # canonical interleavings: no action right after an independent one of higher number
                self.constraints += [z3.Not(z3.And(prev == j, act == i)) for i, j in sorted(self.independent)]
                # ... nor right after a commuting one of higher number when it was enabled before that one
                before = self.guards[-1]
                self.constraints += [z3.Not(z3.And(prev == j, act == i, before[i])) for i, j in sorted(self.commuting)
                                     if i in before]
            self.states.append(y)
            self.guards.append(enabled)
            self.choices.append(act)
            self.ends.append(len(self.constraints))

    def violation_within(self, prop, k: int, budget: int):
        """(result, model): is the property false at some step 1..k? Asked as "false after step k": an
        execution that violates it at step j <= k and then halts keeps that state to step k, and an
        execution false after step k is false at some step <= k."""
        self.extend(k)
        solver = _solver()
        solver.add(*self.constraints[:self.ends[k - 1]])
        solver.add(z3.Not(prop(self.states[k], self.shape)))
        result = budgets.check(solver, "bmc", budget)
        return result, (solver.model() if result == z3.sat else solver.reason_unknown())

    def first_violation(self, prop, model) -> list:
        """The actions of the model's execution up to the first step where the property is false."""
        for t, y in enumerate(self.states[1:], start=1):
            if t > len(self.choices):
                break
            if z3.is_false(model.eval(prop(y, self.shape), model_completion=True)):
                picks = [model.eval(a, model_completion=True).as_long() for a in self.choices[:t]]
                assert HALT not in picks, "an execution halted before its first violation"
                return [self.alphabet[i] for i in picks]
        raise AssertionError("the model violates the property at no step")


def search(hazard: str, config, max_steps: int = MAX_STEPS, canonical: bool = True, conditional: bool = True,
           budget: int | None = None) -> tuple[str, list, str]:
    """An execution of the bounded model (up to ``max_steps``) that ends where the hazard's property
    is false, a shortest one when every smaller bound was decided: (FOUND, actions, "" or which bound
    is undecided) or (NOT_FOUND / UNKNOWN, [], why).

    Bounds 1, 2, 3, ... are tried in turn until one admits a violation. A query at bound k asks for a
    violation at some step <= k, so when the one at k - 1 admitted none, the execution found (its first
    violation is at step k) is a shortest one. (Each query is a fresh solver: with the step constraints
    this small, a query at bound k costs less than the one at k + 1, and the sum up to the shortest
    length less than jumping past it and coming back down, which was measured.)

    Each query has ``budget`` units of Z3's work (``model.budgets``, the same on any machine at any
    load); a bound it does not decide within them is passed over, not given up on, since the query that
    finds a violation is often far quicker than the one before it that shows there is none. Once one is
    found, the bound just below its length, if it was passed over, is asked again with ``budgets.RETRY``
    times the budget: a violation there is shorter (and is asked about in turn), none makes the one
    found a shortest."""
    prop = B.PROPERTIES[hazard]
    unrolling = Unrolling(config, canonical, conditional)
    per_query = budget if budget is not None else budgets.BUDGETS["bmc"]
    undecided: list[int] = []
    for k in range(1, max_steps + 1):
        result, model = unrolling.violation_within(prop, k, per_query)
        if result == z3.unknown:
            undecided.append(k)
            continue
        if result == z3.unsat:
            continue
        found = unrolling.first_violation(prop, model)
        # Its first violation is at step k, or earlier at a bound passed over (one decided admits none).
        assert len(found) == k or len(found) in undecided, "a violation within a bound that admitted none"
        while len(found) - 1 in undecided:
            result, model = unrolling.violation_within(prop, len(found) - 1, budgets.RETRY * per_query)
            if result == z3.sat:
                found = unrolling.first_violation(prop, model)
            elif result == z3.unsat:
                undecided.remove(len(found) - 1)
            else:
                break
        if len(found) - 1 in undecided:
            return FOUND, found, f"none within {len(found) - 1} steps not shown: the solver gave up at that bound"
        return FOUND, found, ""
    if undecided:
        return UNKNOWN, [], (f"the solver gave up at bound(s) {', '.join(map(str, undecided))} and found none "
                             f"at the others up to {max_steps}")
    return NOT_FOUND, [], f"no violation within {max_steps} steps of the bounded model"


def commutation_problem(config, pairs, states, conditional: bool = False) -> str:
    """The premise of the canonical interleavings, checked on the spec itself at each spec state s
    given, for each pair (i, j) of alphabet positions: independent pairs (``conditional`` false):
    whenever one order of the two actions runs from s, the other runs too; commuting pairs: whenever j
    then i runs from s and i is enabled at s, i then j runs. In both orders the end states must have the
    same projection on the bounded model (the order of the spec's history tuples, such as its list of
    fates, is not a field of the model). Returns "" or the first pair that fails."""
    shape = B.shape_of(config)
    alphabet = B.instances(config, shape)
    for s in states:
        enabled = set(machine.enabled(s, config))
        for i, j in sorted(pairs):
            orders = ((alphabet[j], alphabet[i]),) if conditional else \
                ((alphabet[i], alphabet[j]), (alphabet[j], alphabet[i]))
            for a, b in orders:
                if a not in enabled or conditional and b not in enabled:
                    continue
                sa = machine.step(s, a)[0]
                if b not in machine.enabled(sa, config):
                    continue
                if b not in enabled:
                    return f"{a!r} then {b!r} runs, but {b!r} is not enabled first"
                sb = machine.step(s, b)[0]
                if a not in machine.enabled(sb, config):
                    return f"{a!r} then {b!r} runs, but not {b!r} then {a!r}"
                if B.project(machine.step(sb, a)[0], shape) != B.project(machine.step(sa, b)[0], shape):
                    return f"{a!r} and {b!r} end in different states in the two orders"
    return ""


def replay(hazard: str, config, actions: list) -> str:
    """Replay ``actions`` through spec.machine from the configuration's initial state: each must be
    enabled there, and the hazard's property must be false at the end. Returns "" or what went wrong."""
    state = machine.initial_states(config)[0]
    for n, action in enumerate(actions, start=1):
        if action not in machine.enabled(state, config):
            return f"step {n}: {action!r} is not enabled in the spec"
        state = machine.step(state, action)[0]
    if get(hazard).holds(state):
        return f"the spec's {hazard} holds after the {len(actions)} steps"
    return ""


def follows(config, actions: list) -> str:
    """Whether the bounded model follows the spec along ``actions``: at each step the relation's guard
    holds on the projection of the spec state and its effect is the projection of the next spec state.
    Returns "" or the first disagreement (the agreement check of ``model.bounded`` with ``spec/``)."""
    shape = B.shape_of(config)
    state = machine.initial_states(config)[0]
    for n, action in enumerate(actions, start=1):
        x = B.project(state, shape)
        t = B.relation(shape, config, action, _concrete(x))
        nxt = machine.step(state, action)[0]
        if not z3.is_true(z3.simplify(t.guard)):
            return f"step {n}: {action!r}: the relation's guard is false"
        y = B.project(nxt, shape)
        for name, value in t.after.items():
            got = z3.simplify(value)
            if not z3.is_bv_value(got) or got.as_long() != y[name]:
                return f"step {n}: {action!r}: {name} is {got} in the model, {y[name]} in the spec"
        state = nxt
    return ""


def explorer_length(hazard: str, config) -> int | None:
    """The length of the explorer's shortest counterexample (the local engine, breadth first)."""
    result = LocalEngine().explore(load_spec().model, config, [get(hazard)])
    trace = result.properties[0].trace
    return len(trace.steps) if result.properties[0].found and trace is not None else None


def check_hazard(hazard: str, max_steps: int = MAX_STEPS, budget: int | None = None) -> BmcOutcome:
    """Search, replay and compare for one hazard in its standard configuration."""
    started = time.perf_counter()
    config = configs.get(HAZARD_CONFIGS[hazard])
    out = BmcOutcome(hazard, config.name, NOT_DONE)
    try:
        B.shape_of(config)
    except B.OutsideSubset as e:
        out.detail = f"outside the bounded model: {e}"
        out.seconds = time.perf_counter() - started
        return out
    out.explorer_length = explorer_length(hazard, config)
    status, actions, why = search(hazard, config, max_steps, budget=budget)
    out.status, out.actions, out.detail = status, actions, why
    if status == FOUND:
        out.length = len(actions)
        problem = replay(hazard, config, actions)
        if problem:
            out.status, out.detail = REPLAY_FAILED, problem
    out.seconds = time.perf_counter() - started
    return out
