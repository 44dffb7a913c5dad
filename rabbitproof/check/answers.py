"""`rabbitproof check`: a user's setup file, explored with the spec, and its five questions answered.

``check_setup`` translates the setup into a spec configuration (``setup_model.to_config``), explores it
with the observer of ``rabbitproof.check.questions`` on any engine, and turns the result into one ``Answer``
per question: "cannot happen" with what was checked, or "can happen" with the shortest execution and the
rules it involves. ``rabbitproof.check.whatif`` then tries the single changes that could make a failing answer
pass.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

from rabbitproof.spark_check.engine import Engine, stopped_short
from rabbitproof.spark_check.reductions import build_reduction
from rabbitproof.spark_check.results import ExplorationResult, Trace
from rabbitproof.spec import actions as A
from rabbitproof.spec.configs import Config, ConfigError

from rabbitproof.check.cycles import ENDLESS
from rabbitproof.check.for_every_size import proved_for
from rabbitproof.check.lassos import lasso_problem
from rabbitproof.check.questions import (
    LIVENESS, PROPERTIES, QUESTIONS, ConsumerWork, Question, Republish, SetupMachine, clients_apart,
)
from rabbitproof.check.setup_file import Setup
from rabbitproof.check.setup_model import bound_changes, erring, lossy, to_config, vanishing

# What `rabbitproof check` reduces by default: none changes an answer (rabbitproof.check.pure_reads and the
# other parts of ``por``, rabbitproof.check.interchangeable, rabbitproof.check.spent_budgets).
DEFAULT_REDUCTIONS = ("por", "symmetry", "budgets")

_RULE = re.compile(r"\b(?:DT|AM|ACK|PF|RQ|DS|PC|TX|DU|ER|RT)-\d+\b")
ACTION_TYPES = (ConsumerWork, Republish) + A.all_actions()


@dataclass(frozen=True)
class Answer:
    """One question answered for one setup. ``happens`` is None when the search was cut short first."""

    key: str
    question: str
    happens: bool | None
    trace: Trace | None
    rules: tuple[str, ...]          # the question's rules, then those of the actions its trace takes
    harmless: str = ""              # why a "can happen" does no harm in this setup (not a failure)
    method: str = "exhaustive"      # how it was obtained: proved, found, exhaustive, undecided (rabbitproof.check.methods)
    how: str = ""                   # the argument or invariants, the smaller setup, or the reason, in words
    invariants: tuple[str, ...] = ()    # the proved invariants a "proved" answer rests on, if any

    @property
    def verdict(self) -> str:
        return {True: "can happen", False: "cannot happen", None: "undecided"}[self.happens]


@dataclass(frozen=True)
class Checked:
    """A setup, the configuration it explored as, the exploration, and the answers. ``result`` (and
    ``config``, ``machine`` for a setup beyond the search's bounds) is None where no exhaustive search ran:
    every answer came from an argument or a smaller setup (rabbitproof.check.methods)."""

    setup: Setup
    config: Config | None
    result: ExplorationResult | None
    answers: tuple[Answer, ...]
    machine: SetupMachine | None
    seconds: float | None = None        # all methods together, where rabbitproof.check.methods answered

    @property
    def failing(self) -> tuple[str, ...]:
        """The questions that do not pass: can happen (unless harmless in this setup), or undecided."""
        return tuple(a.key for a in self.answers if a.happens is not False and not (a.happens and a.harmless))


def machine_for(setup: Setup, beliefs: bool | None = None) -> SetupMachine:
    """The observed machine of a setup: publishers first, each held to its own message count; the budgets
    its programs spend without end (rabbitproof.check.cycles.ENDLESS), and the consumers that close their
    channel on failure, without end too (``SetupMachine.closing``: their closes are not the fault's).

    ``beliefs``: whether the observer keeps what the publishers believe delivered; by default
    (``keeps_beliefs``) not where "lost" is proved for every size and no publisher republishes."""
    publishers = (False,) * len(setup.publishers)
    return SetupMachine(tuple(p.messages for p in setup.publishers) + (0,) * len(setup.consumers), lossy(setup),
                        publishers + tuple(c.work == "before-ack" for c in setup.consumers),
                        ENDLESS, vanishing(setup), erring(setup),
                        tuple(p.republish for p in setup.publishers) + (0,) * len(setup.consumers),
                        keeps_beliefs(setup) if beliefs is None else beliefs,
                        publishers + tuple(c.on_failure == "close-channel" for c in setup.consumers))


def keeps_beliefs(setup: Setup) -> bool:
    """Whether the search must keep what the publishers believe delivered (``Ghost.believed`` and
    ``returned``). Only "lost" reads them, and a republish (to know which message failed). Where "lost"
    is proved for every size (rabbitproof.check.for_every_size) and no publisher republishes, the search
    need not look for a lost message: it keeps no beliefs, every other answer is the same (the other
    fields of the ghost and the programs never read them), and states that differed only by what a
    publisher believed are one (a quarter fewer states on the benchmark setup with 1 message a publisher).
    tests/test_check_for_every_size.py searches the covered examples with beliefs kept, to hold the
    proof's implication to the search."""
    return proved_for(setup, "lost") is None or any(p.republish for p in setup.publishers)


def config_for(setup: Setup, bounds: Mapping[str, Any] | None = None, max_states: int | None = None) -> Config:
    """The spec configuration of a setup, with bounds the command line overrides (ConfigError if bad)."""
    config = to_config(setup, name=setup_name(setup))
    changes = bound_changes(setup, bounds or {})
    endless = [name for name in machine_for(setup).endless if name in changes]
    if endless:
        raise ConfigError(f"bound {endless[0]}: `check` sets no bound on what the applications' programs do "
                          "(requeue, set a prefetch, poll, and close the channel when that is how a consumer fails): "
                          "a requeue loop is judged on its cycle, not cut off by a count; the faults keep theirs")
    if max_states is not None:
        changes["max_states"] = max_states
    return config.override(changes) if changes else config


def setup_name(setup: Setup) -> str:
    """The file's stem: how results, charts and JSON name this setup."""
    stem = re.split(r"[\\/]", setup.source)[-1]
    return stem[:-5] if stem.endswith(".toml") else stem


# The steps that decide an execution's outcome: faults, negative settlements, closes. Their rules are
# the ones an answer names beside the question's own; the routine steps (publish, deliver, receive)
# would name every rule of the protocol.
DECISIVE = (A.BrokerCrash, A.BrokerRestart, A.NetworkLoss, A.ClientVanish, A.BrokerDetect, A.BrokerChannelError,
            A.BrokerQueueFail, A.ClientNack, A.ClientReject, A.ClientRecover, A.ClientChannelClose,
            A.ClientConnectionClose, A.ClientTxRollback)


def _named(setup: Setup) -> list[tuple[str, str, str]]:
    """(spec name, kind, the file's name): c0, c1, ... the clients (publishers first, one connection
    each), q0, q1, ... the queues, in the file's order."""
    out = [(f"c{i}", "publisher", p.name) for i, p in enumerate(setup.publishers)]
    out += [(f"c{i}", "consumer", c.name) for i, c in enumerate(setup.consumers, len(setup.publishers))]
    return out + [(f"q{i}", "queue", q.name) for i, q in enumerate(setup.queues)]


def names(setup: Setup) -> dict[str, str]:
    """What the spec's names in the steps stand for: ``{"c0": "publisher 'app'", ...}``."""
    return {key: f"{kind} {name!r}" for key, kind, name in _named(setup)}


def plain_names(setup: Setup) -> dict[str, str]:
    """The file's names of the spec's clients and queues: ``{"c0": "app", ...}``."""
    return {key: name for key, _, name in _named(setup)}


def rules_of_trace(trace: Trace | None) -> tuple[str, ...]:
    """The rule IDs the decisive steps of a trace cite in the spec (their docstrings), in order."""
    if trace is None:
        return ()
    by_name = {c.__name__: c for c in DECISIVE + (Republish,)}
    seen: dict[str, None] = {}
    for step in trace.steps:
        cls = by_name.get(step.action_type)
        for rule in _RULE.findall(cls.__doc__ or "") if cls else ():
            seen.setdefault(rule)
    return tuple(seen)


def applies(rule: str, setup: Setup) -> bool:
    """Whether a rule can bear on ``setup`` at all: the rules of a feature (transactions, confirms,
    automatic acks, prefetch, durability, mandatory returns) only where the setup uses it."""
    publishers, consumers = setup.publishers, setup.consumers
    if rule == "RT-3":
        return any(p.mandatory for p in publishers)
    if rule == "AM-2":              # automatic mode; AM-3 is manual mode, AM-1 the choice between them
        return any(c.acks == "automatic" for c in consumers)
    if rule == "AM-3":
        return any(c.acks == "manual" for c in consumers)
    uses = {"TX": any(p.transactions for p in publishers), "PC": any(p.confirms for p in publishers),
            "PF": any(c.prefetch for c in consumers),
            "DU": (any(q.durable for q in setup.queues) or any(p.persistent for p in publishers)
                   or setup.faults.broker_crash)}
    return uses.get(rule.split("-")[0], True)


def answer(question: Question, result: ExplorationResult, setup: Setup) -> Answer:
    """What ``result`` says about ``question`` for ``setup``: the rules are the question's and those of
    its trace's steps, each only where it applies to the setup. A question the search left undecided
    (cut short) is answered "cannot happen" where invariants proved for every size imply it for this
    setup (``for_every_size``): they hold in every reachable state, however far the search got."""
    verdict = next(p for p in result.properties if p.name == question.name)
    trace = verdict.trace
    happens = True if verdict.found else (False if verdict.decided else None)
    proved = proved_for(setup, question.key)
    if happens is None and proved is not None:
        happens = False
    rules = tuple(r for r in dict.fromkeys(question.rules + rules_of_trace(trace if happens else None))
                  if applies(r, setup))
    method = "proved" if proved is not None and happens is False else \
        ("undecided" if happens is None else "exhaustive")
    return Answer(question.key, question.text, happens, trace if happens else None, rules,
                  harmless(question.key, setup) if happens else "", method=method,
                  invariants=proved.invariants if method == "proved" else ())


def harmless(key: str, setup: Setup) -> str:
    """Why the answer "can happen" to question ``key`` does no harm in ``setup`` ("" when it does): a
    message processed twice, where every consumer is idempotent."""
    if key == "twice" and setup.consumers and all(c.idempotent for c in setup.consumers):
        return "every consumer is idempotent: a message processed twice does no harm"
    return ""


@dataclass(frozen=True)
class Prepared:
    """A setup made ready to explore: its configuration and its machine, each built once per run."""

    config: Config
    machine: SetupMachine


def prepare(setup: Setup, engine: Engine, bounds: Mapping[str, Any] | None = None,
            max_states: int | None = None) -> Prepared:
    """Everything checked before any work: the bounds (ConfigError), and what the engine must be able to
    ship (ValueError); the configuration and machine to explore."""
    config = config_for(setup, bounds, max_states)
    machine = machine_for(setup)
    build_reduction(engine.reductions, machine, config)
    engine.prepare(machine, config, PROPERTIES, LIVENESS)
    return Prepared(config, machine)


def check_setup(setup: Setup, engine: Engine, *, bounds: Mapping[str, Any] | None = None,
                max_states: int | None = None, progress: Callable | None = None,
                prepared: Prepared | None = None, time_limit: float | None = None) -> Checked:
    """Explore ``setup`` on ``engine`` and answer every question (``prepared``: what ``prepare`` made of
    it, so that nothing is built twice). A search stopped short (its state cap, ``time_limit`` seconds,
    Ctrl-C) still answers: "can happen" where it found how, "undecided" elsewhere."""
    prepared = prepared or prepare(setup, engine, bounds, max_states)
    config, machine = prepared.config, prepared.machine
    result = engine.explore(machine, config, PROPERTIES, progress=progress, action_types=ACTION_TYPES,
                            time_limit=time_limit, liveness=LIVENESS)
    if result.error is not None and not stopped_short(result.error):
        raise RuntimeError(f"exploring {setup.source} failed: {result.error}")
    answers = tuple(answer(q, result, setup) for q in QUESTIONS)
    return Checked(setup, config, result, every_client_fair(setup, engine, prepared, answers, progress, time_limit),
                   machine)


def every_client_fair(setup: Setup, engine: Engine, prepared: Prepared, answers: tuple[Answer, ...],
                      progress: Callable | None = None, time_limit: float | None = None) -> tuple[Answer, ...]:
    """``answers`` with each liveness "can happen" whose lasso is fair only with interchangeable clients
    sharing their classes (rabbitproof.check.lassos) searched again with every client's classes its own
    (``clients_apart``: no symmetry reduction): the answer of that search, "can happen" with a lasso fair
    for every client, "cannot happen", or undecided if it stops short."""
    config, machine = prepared.config, prepared.machine
    live = {q.key: q for q in QUESTIONS if q.live is not None}
    again = [a.key for a in answers if a.key in live and a.happens and a.trace is not None
             and a.trace.cycle_start is not None and lasso_problem(config, machine, a.trace, live[a.key].live)]
    if not again:
        return answers
    apart, properties = clients_apart(machine), tuple(live[k].live for k in again)
    engine.prepare(apart, config, (), properties)
    result = engine.explore(apart, config, (), progress=progress, action_types=ACTION_TYPES, time_limit=time_limit,
                            liveness=properties)
    if result.error is not None and not stopped_short(result.error):
        raise RuntimeError(f"exploring {setup.source} again with every client apart failed: {result.error}")
    why = ("the first search's cycle was fair only with interchangeable clients taking each other's turns, so the "
           f"search ran again with every client's turns its own ({result.distinct_states:,} states")
    redone = {}
    for key in again:
        a = answer(live[key], result, setup)
        redone[key] = replace(a, how=why + (f", stopped: {result.error})" if a.happens is None else ")"))
    return tuple(redone.get(a.key, a) for a in answers)
