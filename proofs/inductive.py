"""Inductive proofs, for every size: Init => Inv, and Inv and Action => Inv' for every invariant of
``model.invariants`` (helpers included, each proved the same way) and every spec action.

Each obligation gets its own solver and Z3's resource budget (``model.budgets``), never a time limit.
An obligation assumes the invariant and its helpers before the step, the relation's guard, and nothing
about the action's fields or oracles (so it holds for any frame, any tag, any queue outcome), and asks
for a channel where the invariant fails after. ``proved``: no such channel (unsat); ``counterexample``:
Z3 found one, shown as the two states around it (every field of ``model.state.FIELDS``, at the indices the witness names: ``_places``);
``unknown``: the solver gave up or ran out of its budget (then it is neither proved nor refuted).
"""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Iterable

import z3

from rabbitproof.model import budgets
from rabbitproof.model.actions import RELATIONS, symbolic
from rabbitproof.model.invariants import HELPERS, INVARIANTS, Invariant, init
from rabbitproof.model.state import (
    BOOL, FIELDS, PER_CHANNEL, PER_CONNECTION, PER_CONSUMER, PER_COPY, PER_COPY_PAIR, PER_MESSAGE, PER_PUBLISH,
    PER_QUEUE, PER_TAG, SCALAR, Field, Z3State, fresh,
)

PROVED, COUNTEREXAMPLE, UNKNOWN = "proved", "counterexample", "unknown"


@dataclass
class Outcome:
    """One obligation's result."""

    invariant: str
    action: str                 # an action class name, or "Init"
    status: str
    seconds: float
    counterexample: list[str] = field(default_factory=list)     # lines: the state before and after


def _state_line(model: z3.ModelRef, label: str, x: Z3State, c, ch, s) -> str:
    """One state of a counterexample on one line: every field (``model.state.FIELDS``), under each
    heading of ``_places`` whose indices are the field's (a field whose indices none has: at the
    witness), the parts separated by " | "."""
    def num(e: z3.ExprRef) -> int:
        return model.eval(e, model_completion=True).as_long()

    def value(f: Field, index: tuple) -> bool | int:
        v = model.eval(getattr(x, f.name)[index] if index else getattr(x, f.name), model_completion=True)
        return z3.is_true(v) if f.sort == BOOL else v.as_long()
    witness = (num(c), num(ch), num(s))
    places = _places(num, x, *witness)
    parts = []
    for heading, kinds in places:
        parts.append(f"{heading}: {' '.join(_show(f, kinds[f.indices], value) for f in FIELDS if f.indices in kinds)}")
    elsewhere = [f for f in FIELDS if all(f.indices not in kinds for _, kinds in places)]
    if elsewhere:
        parts.append(f"witness {witness}: " + " ".join(
            _show(f, tuple([i] for i in witness[:len(f.indices)]), value) for f in elsewhere))
    return f"{label}: " + " | ".join(parts)


def _show(f: Field, positions: tuple[list[int], ...], value) -> str:
    """``name=value`` where every index takes one number; else the entries not at the default, keyed by
    the indices that take several (for a flag: the list of those set)."""
    varying = [k for k, numbers in enumerate(positions) if len(numbers) > 1]
    if not varying:
        return f"{f.name}={value(f, tuple(numbers[0] for numbers in positions))}"
    entries = {}
    for index in itertools.product(*positions):
        v = value(f, index)
        if v != f.default:
            key = tuple(index[k] for k in varying)
            entries[key[0] if len(key) == 1 else key] = v
    return f"{f.name}={sorted(entries) if f.default is False else entries}"


def _places(num, x: Z3State, c: int, ch: int, s: int) -> list[tuple[str, dict]]:
    """Where a counterexample shows a state, for the witness (c, ch, s) of the invariant: headings, each
    with the numbers every index takes there, per list of index kinds (a field is shown under a heading
    if its indices are one of them). The witness is a channel and a publish number, tag or consumer tag,
    or a queue and two keys, or a connection and a message number: every reading is shown, and the copy
    tag s names, and the messages of the copies shown."""
    publishes = _window(0, num(x.publish_seq[c, ch]), s)
    tags = _window(-2, num(x.next_tag[c, ch]), s)
    named = (num(x.tag_queue[c, ch, s]), num(x.tag_key[c, ch, s]))

    def copy(q: int, key: int, heading: str) -> list[tuple[str, dict]]:
        message = (num(x.message_connection[q, key]), num(x.message_number[q, key]))
        return [(heading, {PER_COPY: ([q], [key])}), (f"queue {q}", {PER_QUEUE: ([q],)}),
                (f"message {message}", {PER_MESSAGE: tuple([i] for i in message)})]
    places = [
        ("broker", {SCALAR: ()}),
        (f"connection {c}", {PER_CONNECTION: ([c],)}),
        (f"channel ({c}, {ch})", {PER_CHANNEL: ([c], [ch]), PER_PUBLISH: ([c], [ch], publishes),
                                  PER_TAG: ([c], [ch], tags)}),
        (f"consumer {s} of channel ({c}, {ch})", {PER_CONSUMER: ([c], [ch], [s])}),
        (f"queue {s}", {PER_QUEUE: ([s],)}),
        (f"message ({c}, {ch})", {PER_MESSAGE: ([c], [ch])}),
        *copy(c, ch, f"copy ({c}, {ch})"),
        *copy(c, s, f"copy ({c}, {s})"),
        (f"queue {c}, keys {ch} and {s}", {PER_COPY_PAIR: ([c], sorted({ch, s}), sorted({ch, s}))}),
        *copy(*named, f"tag {s} names copy {named}"),
    ]
    seen, out = set(), []
    for heading, kinds in places:               # each once (a copy's queue, or message, may be one shown)
        if heading not in seen:
            seen.add(heading)
            out.append((heading, kinds))
    return out


def _window(low: int, top: int, witness: int) -> list[int]:
    """The numbers a counterexample line lists: low .. low + 4, around top (a next tag or publish
    number) and the witness index. A model may pick a next tag in the tens of thousands, and reading
    every array entry below it took seconds."""
    return sorted({*range(low, low + 5), *range(top - 3, top + 3), witness})


def _decide(solver: z3.Solver, inv: Invariant, action: str, x: Z3State, y: Z3State, c0, ch0, s0,
            started: float, extra: Iterable[str] = (), budget: int | None = None) -> Outcome:
    result = budgets.check(solver, "inductive", budget)
    seconds = time.perf_counter() - started
    if result == z3.unsat:
        return Outcome(inv.name, action, PROVED, seconds)
    if result == z3.sat:
        m = solver.model()
        lines = [f"channel ({m.eval(c0, model_completion=True)}, {m.eval(ch0, model_completion=True)}), "
                 f"index {m.eval(s0, model_completion=True)}", *extra]
        if action != "Init":
            lines.append(_state_line(m, "before", x, c0, ch0, s0))
        lines.append(_state_line(m, "after" if action != "Init" else "initial", y, c0, ch0, s0))
        return Outcome(inv.name, action, COUNTEREXAMPLE, seconds, lines)
    return Outcome(inv.name, action, UNKNOWN, seconds, [solver.reason_unknown()])


def prove_init(inv: Invariant, budget: int | None = None) -> Outcome:
    """Init => Inv, asked once more with a larger budget if the first runs out."""
    budget = budget if budget is not None else budgets.BUDGETS["inductive"]
    started = time.perf_counter()
    x = fresh("x")
    c0, ch0, s0 = z3.Ints("c0 ch0 s0")
    for limit in (budget, budgets.RETRY * budget):
        solver = z3.Solver()
        solver.add(init(x), z3.Not(inv.at(x, c0, ch0, s0)))
        outcome = _decide(solver, inv, "Init", x, x, c0, ch0, s0, started, budget=limit)
        if outcome.status != UNKNOWN:
            break
    return outcome


# The frame methods a step may read (``o.method``): relations that read a frame are proved one method
# at a time (each case in a solver of its own), then for every other method at once.
_METHODS = tuple(range(1, 40))


def prove_step(inv: Invariant, cls: type, helpers: Iterable[Invariant], budget: int | None = None) -> Outcome:
    """Inv and helpers and Action => Inv'. A relation that reads a frame is split by the frame's method,
    each case in its own solver with the budget; the obligation is proved when every case is."""
    budget = budget if budget is not None else budgets.BUDGETS["inductive"]
    helpers = list(helpers)
    o = _transition(cls)[2]     # the shared terms, not a second set: term order sways Z3's search
    if "method" not in o:
        return _prove_step_case(inv, cls, helpers, budget, None)
    started = time.perf_counter()
    for m in _METHODS:
        outcome = _prove_step_case(inv, cls, helpers, budget, m)
        if outcome.status != PROVED:
            outcome.seconds = time.perf_counter() - started
            outcome.counterexample.insert(0, f"case: frame method {m}")
            return outcome
    outcome = _prove_step_case(inv, cls, helpers, budget, 0)
    outcome.seconds = time.perf_counter() - started
    return outcome


# A step case Z3 gives up on is tried again with other random seeds. With "incomplete quantifiers" it
# found a candidate model it could not check against a quantified hypothesis (usually a true
# counterexample through a Lambda array); out of its budget, its search went down a long path. Which
# candidate or path it meets first depends on the order its terms were made in, so the same
# obligation could come back proved in 3 s in one process and unknown after 20 s in another that had
# built other terms before (the whole test suite before tests/test_proofs_inductive.py); another seed
# is another search, and an answer from any of them is as good as the first.
#
# The random seeds' work is far apart: one planted fault's counterexample came in 0.06 s with one seed, in
# 3 to 9 s with three others, and not within 60 s with two. So each random seed first gets the budget,
# and only then the first ones ``budgets.RETRY`` times the budget (the retry).
_SEEDS = (0, 1, 2, 3)
_FULL_SEEDS = (0, 1, 2)


def _attempts(budget: int) -> list[tuple[int, int]]:
    """(seed, budget) pairs, in the order tried: every seed with the budget, then the first ones with
    the larger one."""
    return [(seed, budget) for seed in _SEEDS] + [(seed, budgets.RETRY * budget) for seed in _FULL_SEEDS]


def _prove_step_case(inv: Invariant, cls: type, helpers: list[Invariant], budget: int,
                     method: int | None) -> Outcome:
    """One case of a step obligation: ``method`` fixes the frame read (0: any method outside _METHODS)."""
    started = time.perf_counter()
    x, a, o, t = _transition(cls)
    c0, ch0, s0 = z3.Ints("c0 ch0 s0")
    hints = [i.at(x, c0, ch0, s0) for i in (inv, *helpers)]         # the hypotheses at the witness
    for seed, limit in _attempts(budget):
        solver = z3.Solver()
        solver.set("random_seed", seed)
        solver.add(inv.holds(x), *[h.holds(x) for h in helpers], *hints, t.guard,
                   z3.Not(inv.at(t.after, c0, ch0, s0)))
        if method:
            solver.add(o.method == method)
        elif method == 0:
            solver.add(*[o.method != m for m in _METHODS])
        outcome = _decide(solver, inv, cls.__name__, x, t.after, c0, ch0, s0, started, budget=limit)
        if outcome.status != UNKNOWN:
            break
    if outcome.status == COUNTEREXAMPLE:
        m = solver.model()
        fields = ", ".join(f"{n}={m.eval(v, model_completion=True)}" for n, v in {**a, **o}.items())
        outcome.counterexample.insert(1, f"{cls.__name__}({fields})")
    return outcome


_TRANSITIONS: dict = {}


def _transition(cls: type):
    """The relation of ``cls`` over symbolic x, fields and oracles, built once per relation function:
    building the terms (every field of the state after, case by case) took far longer than solving,
    and Z3 terms are immutable, so every obligation of every invariant shares them."""
    relation = RELATIONS[cls]
    key = (cls, relation)
    got = _TRANSITIONS.get(key)
    if got is None:
        x = fresh("x")
        a, o = symbolic(cls, "a")
        got = _TRANSITIONS[key] = (x, a, o, relation(x, a, o))
    return got


def invariants_named(names: Iterable[str] = ()) -> list[Invariant]:
    """The invariants to prove (all, helpers included, when ``names`` is empty); KeyError for an unknown one."""
    known = {**INVARIANTS, **HELPERS}
    chosen = list(names) or list(known)
    unknown = [n for n in chosen if n not in known]
    if unknown:
        raise KeyError(f"unknown invariant {unknown[0]!r}; known: {', '.join(known)}")
    return [known[n] for n in chosen]


def prove_all(invariants: Iterable[Invariant], actions: Iterable[type] | None = None,
              budget: int | None = None) -> list[Outcome]:
    """Every obligation of these invariants: Init, then each action (all spec actions by default).

    A helper may itself lean on the invariant it helps (``held_back_tags_issued`` and
    ``delivery_tags_increase``): each step obligation assumes the whole group before the step and
    concludes one member after it, so once every member's obligations are proved the group's
    conjunction is inductive, and each member holds."""
    classes = list(actions) if actions is not None else sorted(RELATIONS, key=lambda k: k.__name__)
    known = {**INVARIANTS, **HELPERS}
    out = []
    for inv in invariants:
        helpers = [known[h] for h in inv.helpers]
        out.append(prove_init(inv, budget))
        for cls in classes:
            out.append(prove_step(inv, cls, helpers, budget))
    return out
