"""Shrinking a program a broker did not accept: a shorter program the same broker still fails the same way.

A program is a list of steps, each a write of methods, so shrinking deletes: runs of consecutive steps
first (half the steps, then a quarter, ... : greedy), then single steps, then single methods of a step,
and a connection no step uses any more, until no single deletion keeps the failure (or the reruns run
out). Each candidate is run against the broker again; it counts as still failing only if it fails with
the same kind of reason (`reason_kind`: for a rejection, the kind of the observation the spec could not
explain and its method and reply code, as "received channel.close 404"). A broker race may make a
candidate pass where the program it came from failed: that candidate is dropped and the last failing
program kept, with the recording and verdict of its own failing run.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Callable

from rabbitproof.spec.frames import CHANNEL_CLOSE, CONNECTION_CLOSE, frame_text

from rabbitproof.conformance import programs as P

MAX_RERUNS = 40             # candidate runs per program shrunk: a slow broker cannot stall the report
SHRUNK = ("rejected", "no answer", "error")      # what is shrunk: a program the broker failed


@dataclass
class Shrunk:
    """The smallest failing program found, the outcome of its failing run, the candidate runs made, and
    whether the cap on them stopped the shrinking before no single deletion kept the failure."""

    program: P.Program
    outcome: object
    reruns: int
    capped: bool


def reason_kind(outcome) -> str:
    """What a shrunk program must fail with again: the status and, for a rejection, the observation the
    spec could not explain (sent, received, quiet, lost, connect), its method and a close's reply code;
    for an error, its explanation without numbers (which name connections and steps)."""
    if outcome.status == "rejected":
        observation = outcome.judgement.verdict.observation
        if observation[0] not in ("sent", "received"):
            return f"rejected at {observation[0]}"
        frame = observation[1]
        code = f" {frame.reply_code}" if frame.method in (CHANNEL_CLOSE, CONNECTION_CLOSE) else ""
        return f"rejected at {observation[0]} {frame_text(frame).split('(')[0]}{code}"
    if outcome.status == "error":
        return "error: " + re.sub(r"\d+", "N", outcome.explanation.split(":")[0])
    return outcome.status


def shrink(program: P.Program, failed, rerun: Callable[[P.Program], object],
           max_reruns: int = MAX_RERUNS, same: Callable[[P.Program, object], bool] | None = None) -> Shrunk:
    """The shortest program found that fails like ``failed`` (the outcome of running ``program``), by
    running candidates with ``rerun``; at most ``max_reruns`` of them. ``same(candidate, outcome)`` says
    whether a candidate fails the same way (default: the same status and `reason_kind`); ``rerun`` may
    raise to end the shrinking (a broker that stopped answering)."""
    kind = reason_kind(failed)
    if same is None:
        def same(candidate, out):
            return out.status == failed.status and reason_kind(out) == kind
    best, best_outcome, reruns = program, failed, 0
    size = max(1, len(program.steps) // 2)
    while True:
        for candidate in _deletions(best, size):
            if reruns >= max_reruns:
                return Shrunk(best, best_outcome, reruns, True)
            reruns += 1
            out = rerun(candidate)
            if same(candidate, out):
                best, best_outcome = candidate, out
                break
        else:
            if size == 1:
                return Shrunk(best, best_outcome, reruns, False)
            size //= 2


def _deletions(program: P.Program, size: int):
    """Candidates one deletion smaller: each run of ``size`` consecutive steps (``size`` > 1), or each
    step, then each method of a step of several, then the connections no step uses."""
    steps = program.steps
    if size > 1:
        for start in range(0, len(steps) - size + 1, size):
            yield replace(program, steps=steps[:start] + steps[start + size:])
        return
    for i in range(len(steps)):
        yield replace(program, steps=steps[:i] + steps[i + 1:])
    for i, step in enumerate(steps):
        if isinstance(step, P.Step) and len(step.ops) > 1:
            for j in range(len(step.ops)):
                fewer = replace(step, ops=step.ops[:j] + step.ops[j + 1:])
                yield replace(program, steps=steps[:i] + (fewer,) + steps[i + 1:])
    used = max((s.conn for s in steps if isinstance(s, P.Step)), default=0) + 1
    if used < program.connections:
        yield replace(program, connections=used)
