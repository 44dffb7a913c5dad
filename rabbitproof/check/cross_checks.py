"""`check`'s answers held to what decides them another way: the ``setups`` part of `rabbitproof verify`.

`check` answers by argument, from a smaller setup, or by the exhaustive search (rabbitproof.check.methods).
The first two are held here to what is known independently of them:

- **setups drawn at random** (seeded, so the same ones every run; one or two publishers, one or two
  consumers, every kind of failure handling, at most one fault: small enough for the exhaustive search to
  finish in seconds): every answer proved or found must be the one the exhaustive search gives;
- **setups with a consumer that requeues beside one that never fails** (seeded too), where the loop's
  round-robin argument applies (rabbitproof.check.by_argument): the same;
- **the examples and the mixed setups** (examples/, setups/mixed/): the same;
- **the larger setups** (setups/larger/: beyond the exhaustive search, each written from
  RabbitMQ's guide with the guide's answers in its comment, ``# Expected: lost cannot, ...``): every
  answer must be the guide's, obtained without the search, and each "can happen" must replay, step by
  step, in the setup's own machine.

One compared answer is one check. An answer the exhaustive search gave `check` itself is compared with
nothing else and is no check. A loop found for a larger setup is a lasso rebuilt in the setup's own
machine: it is checked there as one (``larger_loops.check_lasso``: every step, the cycle closing, its
fairness).
"""
from __future__ import annotations

import math
import random
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from rabbitproof.spark_check.engine import LocalEngine

from rabbitproof.check.answers import DEFAULT_REDUCTIONS, Prepared, check_setup, config_for, machine_for
from rabbitproof.check.larger_loops import check_lasso
from rabbitproof.check.methods import answer_setup
from rabbitproof.check.questions import QUESTIONS
from rabbitproof.check.setup_file import Setup, SetupError, parse_setup
from rabbitproof.check.setup_model import to_config
from rabbitproof.check.smaller_setups import step_as

ROOT = Path(__file__).resolve().parents[2]          # the checkout: examples/ and setups/
EXAMPLES = ROOT / "examples"
MIXED = ROOT / "setups" / "mixed"
LARGER = ROOT / "setups" / "larger"
SEED = 36
RANDOM_SETUPS = 9               # drawn by `rabbitproof verify` unless --random-setups says otherwise (the tenth
                                # alone takes about 75 s under load: nine keep the part near two minutes there)
ROUND_ROBIN_SETUPS = 6          # drawn by `rabbitproof verify` beside them (``round_robin_setup``)
# The smaller setups' searches get no time limit here: what they find must not depend on the machine's
# speed or load (each is bounded by its size: a smaller setup is at most the search's bounds).
SMALLER_SECONDS = math.inf
KEYS = tuple(q.key for q in QUESTIONS)


# --- setups drawn at random ------------------------------------------------------------------------

FAULT_CHOICES = ("channel_closed", "channel_error", "connection_closed_consumers", "host_vanished_consumers",
                 "connection_closed", "host_vanished", "broker_crash", "queue_refuses")


def setup_text(publishers=({},), consumers=({},), queues=None, faults=()) -> str:
    """A setup file: each publisher and consumer a table of its keys (queue "jobs" unless said), the queues
    (name -> keys; by default one durable "jobs"), these faults (``connection_closed_consumers`` and
    ``host_vanished_consumers``: the fault on the consumers only)."""
    queues = queues or {"jobs": {"durable": True}}
    text = ""
    for name, keys in queues.items():
        text += f'[queues."{name}"]\n' + "".join(f"{k} = {_toml(v)}\n" for k, v in keys.items()) + "\n"
    for kind, tables in (("publishers", publishers), ("consumers", consumers)):
        for keys in tables:
            keys = {"queue": "jobs", **keys}
            text += f"[[{kind}]]\n" + "".join(f"{k} = {_toml(v)}\n" for k, v in keys.items()) + "\n"
    consumer_names = [keys.get("name", f"consumer {i + 1}") for i, keys in enumerate(consumers)]
    return text + "[faults]\n" + "".join(_fault_line(f, consumer_names) for f in faults)


def _fault_line(fault: str, consumers: list[str]) -> str:
    """A fault in the setup file's words: the consumer-only kinds name the consumers."""
    on_consumers = "[" + ", ".join(f'"{n}"' for n in consumers) + "]"
    return {"connection_closed_consumers": f"connection_closed = {on_consumers}\n",
            "host_vanished_consumers": f"host_vanished = {on_consumers}\n"}.get(fault, f"{fault} = true\n")


def _toml(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else \
        (f'"{value}"' if isinstance(value, str) else str(value))


def random_setup(rng: random.Random, small: bool = False) -> str:
    """One or two publishers of one or two messages in all, one or two consumers (three clients at most),
    one queue (a dead-letter queue sometimes), at most one fault: small enough to search in full in
    seconds. ``small``: one publisher and one consumer."""
    publishers = []
    for n in range(1 if small else rng.choice((1, 1, 2))):
        mode = rng.choice(("confirms", "confirms", "transactions", "none"))
        keys: dict[str, Any] = {"persistent": rng.random() < 0.7}
        if mode != "none":
            keys[mode] = True
            if rng.random() < 0.2:
                keys["republish"] = 1
        publishers.append(keys)
    if len(publishers) == 1 and rng.random() < 0.5:
        publishers[0]["messages"] = 2
    consumers = []
    for n in range(rng.choice((1, 1, 2)) if len(publishers) == 1 and not small else 1):
        keys = {"acks": rng.choice(("manual", "manual", "manual", "automatic"))}
        if keys["acks"] == "manual":
            keys["on_failure"] = rng.choice(("none", "none", "nack-requeue", "reject-drop", "close-channel"))
            if rng.random() < 0.2:
                keys["work"] = "before-ack"
        if rng.random() < 0.5:
            keys["prefetch"] = 1
        consumers.append(keys)
    queues: dict[str, dict] = {"jobs": {"durable": rng.random() < 0.7}}
    if rng.random() < 0.2:
        queues = {"jobs": {**queues["jobs"], "dead_letter": "parked"}, "parked": {"durable": True}}
    faults = (rng.choice(FAULT_CHOICES),) if rng.random() < 0.8 else ()
    return setup_text(tuple(publishers), tuple(consumers), queues, faults)


def round_robin_setup(rng: random.Random, small: bool = False) -> str:
    """A consumer that requeues what it fails on (a nack or reject with requeue, or closing its channel),
    and one or two of the same queue that subscribe and never requeue, each with settings drawn at random;
    one publisher of one or two messages (one: ``small``), at most one fault: a setup the loop's
    round-robin argument covers, small enough to search in full."""
    publisher: dict[str, Any] = {"persistent": rng.random() < 0.7,
                                 "messages": 1 if small else rng.choice((1, 2))}
    mode = rng.choice(("confirms", "transactions", "none"))
    if mode != "none":
        publisher[mode] = True
    consumers: list[dict[str, Any]] = [{"on_failure": rng.choice(("nack-requeue", "reject-requeue", "close-channel"))}]
    for n in range(1 if small else rng.choice((1, 1, 2))):
        keys: dict[str, Any] = {"acks": rng.choice(("manual", "manual", "automatic"))}
        if keys["acks"] == "manual":
            keys["on_failure"] = rng.choice(("none", "none", "nack-drop", "reject-drop"))
            if rng.random() < 0.3:
                keys["work"] = "before-ack"
        consumers.append(keys)
    for keys in consumers:
        if rng.random() < 0.5:
            keys["prefetch"] = 1
    rng.shuffle(consumers)
    faults = (rng.choice(FAULT_CHOICES),) if rng.random() < 0.7 else ()
    return setup_text((publisher,), tuple(consumers), {"jobs": {"durable": rng.random() < 0.7}}, faults)


def random_setups(count: int, small: bool = False, seed: int = SEED,
                  draw: Callable[[random.Random, bool], str] = random_setup) -> list[str]:
    """The first ``count`` valid setups drawn by ``draw`` with ``seed`` (the same each run; those the
    file's rules refuse are drawn again)."""
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < count:
        text = draw(rng, small)
        try:
            parse_setup(text, "random.toml")
        except SetupError:
            continue
        out.append(text)
    return out


# --- the comparisons ---------------------------------------------------------------------------------

@dataclass
class Held:
    """What one setup's comparison gave: the answers compared (checks), those that differ (in words),
    those left unknown (the exhaustive search stopped at its state cap: nothing to compare with), those
    the exhaustive search gave `check` itself, and the time it took."""

    name: str
    checks: int = 0
    failures: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    by_search: int = 0
    seconds: float = 0.0


def _engine() -> LocalEngine:
    return LocalEngine(reductions=DEFAULT_REDUCTIONS)


def searched(setup: Setup, machine: Any = None) -> tuple[dict[str, str], str | None]:
    """The exhaustive search's answers to the five questions, by key, with what the publishers believe
    kept (``machine``: another machine of the setup), and why the search stopped short (None when it
    finished)."""
    prepared = Prepared(config_for(setup), machine or machine_for(setup, beliefs=True))
    checked = check_setup(setup, _engine(), prepared=prepared)
    return {a.key: a.verdict for a in checked.answers}, checked.result.error


def held_to_the_search(setup: Setup, name: str) -> Held:
    """Every answer `check` proves or finds for ``setup`` against the exhaustive search's."""
    started = time.perf_counter()
    road = answer_setup(setup, _engine(), smaller_seconds=SMALLER_SECONDS)
    truth, stopped = searched(setup)
    out = Held(name)
    for a in road.answers:
        if stopped and a.method != "exhaustive":
            out.unknown.append(f"{name}: {a.key}: {a.verdict} ({a.method}), the search stopped short ({stopped})")
        elif a.method in ("proved", "found"):
            out.checks += 1
            if a.verdict != truth[a.key]:
                out.failures.append(f"{name}: {a.key}: {a.verdict} ({a.method}: {a.how}), the search: {truth[a.key]}")
        elif a.method == "exhaustive":
            out.by_search += 1
        else:
            out.checks += 1
            out.failures.append(f"{name}: {a.key}: undecided ({a.how}), the search: {truth[a.key]}")
    out.seconds = time.perf_counter() - started
    return out


def expected(path: Path) -> dict[str, str]:
    """The answers a larger setup's comment gives, from RabbitMQ's guide: ``# Expected: lost cannot, ...``."""
    line = next((l for l in path.read_text().splitlines() if l.startswith("# Expected:")), "")
    return {key: ("can happen" if word == "can" else "cannot happen")
            for key, word in re.findall(r"(\w+) (can|cannot)\b", line)}


def fails_in_full(setup: Setup, key: str, trace: Any) -> str:
    """Why ``trace`` is not an execution of ``setup``'s own machine that ends with ``key``'s property
    false ("" when it is): each step one the machine allows (matched by its text and frames)."""
    config, machine = to_config(setup), machine_for(setup, beliefs=True)
    (state,) = machine.initial_states(config)
    for step in trace.steps:
        taken = step_as(machine, config, state, step)
        if taken is None:
            return f"step {step.number} ({step.action}) is not one the setup's machine allows"
        state = taken[1]
    prop = next(q.prop for q in QUESTIONS if q.key == key)
    return "" if not prop.holds(state) else "the question's property still holds where the execution ends"


def held_to_the_guide(path: Path) -> Held:
    """A larger setup's answers against the guide's (its comment), each obtained without the exhaustive
    search, each "can happen" replayed in the setup's own machine."""
    started = time.perf_counter()
    name = path.stem
    out = Held(name)
    want = expected(path)
    if set(want) != set(KEYS):
        out.checks += 1
        out.failures.append(f"{name}: its '# Expected:' comment does not answer every question ({', '.join(KEYS)})")
        return out
    setup = parse_setup(path.read_text(), path.name)
    checked = answer_setup(setup, _engine(), smaller_seconds=SMALLER_SECONDS)
    for a in checked.answers:
        out.checks += 1
        if a.verdict != want[a.key] or a.method not in ("proved", "found"):
            out.failures.append(f"{name}: {a.key}: {a.verdict} ({a.method}: {a.how}), the guide: {want[a.key]}")
        elif a.method == "found":
            why = check_lasso(setup, a.trace) if a.key == "loop" else fails_in_full(setup, a.key, a.trace)
            if why:
                out.failures.append(f"{name}: {a.key}: the execution found does not replay in the setup: {why}")
    out.seconds = time.perf_counter() - started
    return out


def larger_setups() -> list[Path]:
    """The larger setups, by name; FileNotFoundError when the checkout has none."""
    paths = sorted(LARGER.glob("*.toml"))
    if not paths:
        raise FileNotFoundError(f"no larger setups in {LARGER.relative_to(ROOT)}")
    return paths


def known_setups() -> list[Path]:
    """The examples and the mixed setups; FileNotFoundError when the checkout has none."""
    paths = sorted(EXAMPLES.glob("*.toml")) + sorted(MIXED.glob("*.toml"))
    if not paths:
        raise FileNotFoundError("no examples and no mixed setups in this checkout")
    return paths


def run_all(random_count: int, report: Callable[[str, Held], None] = lambda kind, held: None,
            known: bool = True, round_robin_count: int | None = None) -> list[tuple[str, Held]]:
    """Every comparison of this module, as (kind, result), each given to ``report`` once done: the
    larger setups, the examples and mixed setups (``known``), then ``random_count`` setups drawn at
    random and ``round_robin_count`` (by default ``ROUND_ROBIN_SETUPS``) with a consumer that requeues beside
    one that never fails."""
    out: list[tuple[str, Held]] = []

    def done(kind: str, held: Held) -> None:
        out.append((kind, held))
        report(kind, held)
    for path in larger_setups():
        done("larger", held_to_the_guide(path))
    for path in known_setups() if known else ():
        done("known", held_to_the_search(parse_setup(path.read_text(), path.name), path.stem))
    for n, text in enumerate(random_setups(random_count)):
        done("random", held_to_the_search(parse_setup(text, f"random-{n + 1}.toml"), f"random {n + 1}"))
    round_robin_count = ROUND_ROBIN_SETUPS if round_robin_count is None else round_robin_count
    for n, text in enumerate(random_setups(round_robin_count, draw=round_robin_setup)):
        done("round robin", held_to_the_search(parse_setup(text, f"round-robin-{n + 1}.toml"), f"round robin {n + 1}"))
    return out


