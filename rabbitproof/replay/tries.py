"""An answer replayed up to ``tries`` times: each try on fresh names (``Names``), judged (outcome.judge),
its recording saved; a divergence ends the tries and is shrunk to the shortest prefix of the execution
whose replay still diverges (bisection, a few reruns)."""
from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from rabbitproof.check.setup_file import Setup
from rabbitproof.check.answers import names as client_names
from rabbitproof.recording.file import save

from rabbitproof.replay.chart import replay_svg
from rabbitproof.replay.attempt import VANISH_HEARTBEAT, Crasher, Replayer, Where
from rabbitproof.replay.naming import Names
from rabbitproof.replay.observed import AT_ACK, AUTOMATIC, BEFORE_ACK, LOOP_ROUNDS
from rabbitproof.replay.outcome import CANNOT, DIVERGED, REPRODUCED, Judged, Replayed, judge
from rabbitproof.replay.plan import CRASH, RESTART, Plan, make_plan, repeated
from rabbitproof.replay.steps import Step

SHRINK_RERUNS = 6


@dataclass(frozen=True)
class Execution:
    """A "can happen" answer's execution: its question, steps, and where its cycle starts (a lasso)."""

    key: str
    question: str
    steps: tuple[Step, ...]
    cycle_start: int | None = None


@dataclass(frozen=True)
class Target:
    """The broker the replays run on and how: its address, what crashes it, tries per answer, the per-step
    timeout, where the recordings go, the trace checker's budget."""

    where: Where
    crasher: Crasher | None = None
    tries: int = 10
    step_timeout: float = 10.0
    directory: Path = Path(".")
    max_nodes: int = 2_000_000


def processing(setup: Setup) -> dict:
    """When each consumer (by client number, publishers first) processes a message."""
    first = len(setup.publishers)
    return {first + i: AUTOMATIC if c.acks == "automatic" else BEFORE_ACK if c.work == "before-ack" else AT_ACK
            for i, c in enumerate(setup.consumers)}


def cannot_replay(setup: Setup, plan: Plan, target: Target) -> str:
    """Why the execution cannot be replayed on this target ("" when it can)."""
    if plan.cannot:
        return plan.cannot
    if any(q.dead_letter for q in setup.queues):
        return ("a queue dead-letters to another: the recording format cannot carry a queue's arguments, so the "
                "spec could not judge the real run")
    if target.crasher is None and any(a.kind in (CRASH, RESTART) for a in plan.acts):
        return "the execution crashes the broker: give --kill-cmd and --start-cmd to make it crash for real"
    return ""


def replay_answer(execution: Execution, setup: Setup, target: Target, label: str) -> Replayed:
    """Replay ``execution`` on ``target`` (see the module's docstring); ``label`` names its files."""
    rounds = LOOP_ROUNDS if execution.key == "loop" else 1
    steps = repeated(execution.steps, execution.cycle_start, rounds)
    clients = len(setup.publishers) + len(setup.consumers)
    plan = make_plan(steps, clients)
    out = Replayed(execution.key, execution.question, CANNOT,
                   heartbeat=VANISH_HEARTBEAT if plan.heartbeats else 0)
    why = cannot_replay(setup, plan, target)
    if why:
        out.why = why
        return out
    started = time.monotonic()
    judged: Judged | None = None
    for n in range(1, target.tries + 1):
        judged = _try(plan, setup, target, execution.key, n)
        out.tries = n
        if judged.attempt.slots:
            judged.file = str(target.directory / f"{label}-{execution.key}-try{n}.json")
            save(judged.file, judged.attempt.slots, judged.attempt.existing)
            out.recordings.append(judged.file)
        if judged.status in (REPRODUCED, DIVERGED):
            break
        out.ways.append(f"try {n}: {judged.why}")
    assert judged is not None
    out.status, out.why = judged.status, judged.why
    if judged.status == DIVERGED:
        out.shrunk_steps = [s.text() for s in _shrunk(steps, clients, setup, target, execution.key)]
    if judged.recorded is not None:
        out.trace = judged.recorded.text()
        chart = target.directory / f"{label}-{execution.key}.svg"
        title = f"{label}: {execution.question} {judged.status} (try {out.tries})"
        harm = judged.why if judged.status == REPRODUCED else ""
        chart.write_text(replay_svg(title, judged.recorded, judged.verdict, client_names(setup), harm),
                         encoding="utf-8")
        out.chart = str(chart)
    out.seconds = time.monotonic() - started
    return out


def _try(plan: Plan, setup: Setup, target: Target, key: str, attempt: int = 1) -> Judged:
    names = Names(f"rp{secrets.token_hex(3)}", tuple(q.name for q in setup.queues))
    predeclared = tuple(i for i, q in enumerate(setup.queues) if not q.exclusive)
    replayer = Replayer(plan, names, tuple(q.durable for q in setup.queues), processing(setup), target.where,
                        target.crasher, target.step_timeout, predeclared, attempt)
    return judge(replayer.run(), key, target.max_nodes)


def _shrunk(steps: tuple[Step, ...], clients: int, setup: Setup, target: Target, key: str) -> tuple[Step, ...]:
    """The shortest prefix of ``steps`` whose replay still diverges, found by bisection in at most
    SHRINK_RERUNS reruns (the whole execution when none shorter does within them)."""
    low, high = 0, len(steps)            # the prefix of ``high`` steps diverges; of ``low`` is not known to
    for _ in range(SHRINK_RERUNS):
        if high - low <= 1:
            break
        middle = (low + high) // 2
        if _try(make_plan(steps[:middle], clients), setup, target, key).status == DIVERGED:
            high = middle
        else:
            low = middle
    return steps[:high]
