"""The three ways `rabbitproof check` answers a question, tried in order, and how each answer was obtained.

1. **Proved for every size** (rabbitproof.check.by_argument): "cannot happen" from the setup file alone,
   by an argument written out in that module or by invariants Z3 proves (rabbitproof.check.for_every_size).
2. **Found in a smaller setup** (rabbitproof.check.smaller_setups): "can happen" for lost, twice and out of
   order, from the first execution of a smaller setup (the same settings, fewer clients, messages or
   faults) that replays in the user's setup; and, for a setup beyond the search's bounds, for a loop
   (rabbitproof.check.larger_loops), from the first loop of a smaller setup that, rebuilt in the user's
   setup with the other clients' work done first, is a fair loop of the user's setup's machine.
3. **The exhaustive search** of the user's setup (rabbitproof.check.answers.check_setup), for what the two
   others leave, where the setup is within the search's bounds (``too_large``); its "cannot happen" holds
   within those bounds. Beyond them, or cut short, a question is undecided, with the reason and what to try.

The engine (``--engine``) runs every search: the smaller setups' and the exhaustive one (on Spark, each
a series of Spark jobs); the answers are the same on every engine.

Each ``Answer`` carries its ``method`` (``proved``, ``found``, ``exhaustive``, ``undecided``) and, in
``how``, the invariants or argument, the smaller setup, the bounds, or the reason.
"""
from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Callable, Mapping

from rabbitproof.spark_check.engine import Engine

from rabbitproof.check.answers import Answer, Checked, applies, check_setup, harmless, prepare, rules_of_trace
from rabbitproof.check.by_argument import ARGUMENTS, argued
from rabbitproof.check.larger_loops import search_loop
from rabbitproof.check.questions import QUESTIONS
from rabbitproof.check.setup_file import Setup
from rabbitproof.check.setup_model import publishes
from rabbitproof.check.smaller_setups import SAFETY, search_smaller

# What the exhaustive search takes on: larger setups are answered by the two other methods alone.
SEARCH_CLIENTS = 4
SEARCH_MESSAGES = 4
SEARCH_PUBLISHES = 6
SMALLER_SECONDS = 120.0         # the smaller setups' searches, in all, unless --time-limit says otherwise
SMALLER_EACH = 60.0             # one smaller setup's search, or half of a longer --time-limit
LIVENESS = ("loop", "waits")


def too_large(setup: Setup) -> str:
    """Why the exhaustive search does not take ``setup`` on ("" when it does)."""
    clients = len(setup.publishers) + len(setup.consumers)
    messages = sum(p.messages for p in setup.publishers)
    if clients > SEARCH_CLIENTS:
        return f"{clients} clients, more than the {SEARCH_CLIENTS} the exhaustive search takes on"
    if messages > SEARCH_MESSAGES:
        return f"{messages} messages, more than the {SEARCH_MESSAGES} the exhaustive search takes on"
    if publishes(setup) > SEARCH_PUBLISHES:
        return f"{publishes(setup)} publishes, more than the {SEARCH_PUBLISHES} the exhaustive search takes on"
    return ""


def unmet(setup: Setup, key: str) -> str:
    """The conditions of ``key``'s arguments that ``setup`` breaks, in words: each argument's, joined by
    "or" where the question has two."""
    broken = ["; ".join(c.text for c in a.conditions if not c.holds(setup)) for a in ARGUMENTS if a.question == key]
    broken = [b for b in broken if b]
    return "it needs " + ", or ".join(broken) if broken else "none applies"


def _what_to_try(key: str) -> str:
    if key in LIVENESS:
        return ("check a smaller setup with the same settings (fewer publishers, consumers, messages or faults) "
                "for an execution to look at, or run the search longer (--time-limit) or on Spark (--engine spark)")
    return "run the search longer (--time-limit) or on Spark (--engine spark), or check one fault at a time"


def answer_setup(setup: Setup, engine: Engine, *, bounds: Mapping[str, Any] | None = None,
                 max_states: int | None = None, progress: Callable | None = None,
                 time_limit: float | None = None, smaller_seconds: float = SMALLER_SECONDS) -> Checked:
    """Every question of ``setup`` answered by the first method that decides it (this module's order).
    ``Checked.result`` is the exhaustive search's, or None where it was not needed or not possible."""
    start = time.monotonic()
    answers: dict[str, Answer] = {}
    for q in QUESTIONS:
        why = argued(setup, q.key)
        if why is not None:
            answers[q.key] = Answer(q.key, q.text, False, None,
                                    tuple(r for r in q.rules if applies(r, setup)), method="proved", how=why.text(),
                                    invariants=why.invariants)
    open_safety = tuple(q.key for q in QUESTIONS if q.key in SAFETY and q.key not in answers)
    said: list[str] = []
    interrupted = None
    if open_safety:
        budget = smaller_seconds if time_limit is None else time_limit
        searched_smaller = search_smaller(setup, open_safety, budget, max(SMALLER_EACH, budget / 2), engine=engine)
        said, interrupted = searched_smaller.said, searched_smaller.interrupted
        for key, f in searched_smaller.found.items():
            q = next(q for q in QUESTIONS if q.key == key)
            rules = tuple(r for r in dict.fromkeys(q.rules + rules_of_trace(f.trace)) if applies(r, setup))
            answers[key] = Answer(key, q.text, True, f.trace, rules, harmless(key, setup), method="found",
                                  how=f"found in the smaller setup {f.smaller.text()} ({f.states:,} states, "
                                      f"{f.seconds:.1f} s), and replayed in this one")
    result, machine, config = None, None, None
    large = too_large(setup)
    if "loop" not in answers and large and not interrupted:
        budget = (smaller_seconds if time_limit is None else time_limit) - (time.monotonic() - start)
        loops = search_loop(setup, max(budget, 0.0), engine=engine)
        said += loops.said
        interrupted = loops.interrupted
        if loops.found is not None:
            f, q = loops.found, next(q for q in QUESTIONS if q.key == "loop")
            rules = tuple(r for r in dict.fromkeys(q.rules + rules_of_trace(f.trace)) if applies(r, setup))
            answers["loop"] = Answer("loop", q.text, True, f.trace, rules, method="found",
                                     how=f"found in the smaller setup {f.smaller.text()} ({f.states:,} states), "
                                         "rebuilt in this one with the other clients' work done first, and checked "
                                         f"there: every step allowed, the cycle fair ({f.seconds:.1f} s)")
    left = [q for q in QUESTIONS if q.key not in answers]
    if left and not large and not interrupted:
        prepared = prepare(setup, engine, bounds, max_states)
        searched = check_setup(setup, engine, progress=progress, prepared=prepared, time_limit=time_limit)
        result, machine, config = searched.result, searched.machine, searched.config
        for a in searched.answers:
            if a.key in answers:
                continue
            if a.happens is None:
                answers[a.key] = replace(a, method="undecided",
                                         how=(a.how or f"the search stopped at {result.distinct_states:,} states "
                                                       f"({result.error})")
                                             + (f"; {'; '.join(said)}" if said else "")
                                             + f"; to try: {_what_to_try(a.key)}")
            else:
                answers[a.key] = replace(a, method="exhaustive", how="the exhaustive search of this setup, within the "
                                                                     "bounds printed" + (f"; {a.how}" if a.how else ""))
    for q in left:
        if q.key not in answers:
            reason = interrupted or large + ("; no smaller setup searched showed it" + "".join(f"; {s}" for s in said)
                                             if q.key in SAFETY else
                                             f"; no argument covers it here ({unmet(setup, q.key)})"
                                             + ("; no loop of a smaller setup searched carried over to this one"
                                                if q.key == "loop" else ""))
            answers[q.key] = Answer(q.key, q.text, None, None, tuple(r for r in q.rules if applies(r, setup)),
                                    method="undecided", how=f"{reason}; to try: {_what_to_try(q.key)}")
    if machine is None:
        from rabbitproof.check.answers import config_for, machine_for
        config = config_for(setup, bounds, max_states) if not large else None
        machine = machine_for(setup) if not large else None
    return Checked(setup, config, result, tuple(answers[q.key] for q in QUESTIONS), machine,
                   seconds=time.monotonic() - start)
