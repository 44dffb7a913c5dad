"""One conformance run: the probes first (a program per catalogue rule, probes.py), then generated programs
(programs.py, none twice), every outcome diagnosed (findings.py) and grouped into findings, one program
per finding shrunk, and the coverage of the catalogue.

- A method the broker does not implement (540, or no answer while a fresh connection still gets answers)
  is one finding of kind "unsupported"; later programs are run without that method, so the rest of the
  semantics is still tested.
- A broker that stops answering every connection is a finding ("stopped answering", with the last
  program); with ``restart`` (the user's start command) it is started again and the run goes on, without
  it the run stops there and reports what it has.
- ``time_limit`` bounds the whole run, shrinking included; ``progress`` is called after every program.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Callable

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed

from rabbitproof.brokers.commanded import CommandFailed
from rabbitproof.conformance import programs as P
from rabbitproof.conformance.catalogue import NEED_CRASHES, RULES, UNOBSERVABLE, family
from rabbitproof.conformance.coverage import Coverage, steer
from rabbitproof.conformance.findings import STOPPED, UNSUPPORTED, Diagnosis, allowed_difference, diagnose, method_of
from rabbitproof.conformance.probes import PROBES
from rabbitproof.conformance.shrink import MAX_RERUNS, Shrunk, shrink

BATCH = 25                  # generated programs between two steerings


class _BatchDone(Exception):
    """A batch has drawn its programs (or the run is over): raised to end its Hypothesis run early."""


class StoppedAnswering(Exception):
    """The broker answers no new connection."""


@dataclass
class Finding:
    """Programs that failed the same way: the diagnosis, the first such program and its outcome, how many
    programs showed it, and its shrinking (None: not shrunk)."""

    diagnosis: Diagnosis
    program: P.Program
    outcome: object
    count: int = 1
    shrunk: Shrunk | None = None
    shrink_note: str = ""

    def shown(self):
        return (self.shrunk.program, self.shrunk.outcome) if self.shrunk else (self.program, self.outcome)


@dataclass
class Run:
    """What a run found and ran."""

    findings: dict = field(default_factory=dict)        # diagnosis key -> Finding, in order found
    table: dict = field(default_factory=dict)           # family -> counts
    totals: dict = field(default_factory=dict)
    coverage: Coverage = field(default_factory=Coverage)
    probe_rules: set = field(default_factory=set)       # rules of the probes the broker passed
    excluded: list = field(default_factory=list)        # methods left out of later programs
    differences: dict = field(default_factory=dict)     # a difference AMQP 0-9-1 allows -> programs showing it
    stopped: str = ""                                   # why the run stopped early ("" : it did not)


def without(program: P.Program, methods: set) -> P.Program | None:
    """``program`` with the ops sending one of ``methods`` left out (None when nothing is left to run)."""
    steps = []
    for step in program.steps:
        if isinstance(step, P.Step):
            ops = tuple(op for op in step.ops if method_of(op) not in methods)
            if ops:
                steps.append(replace(step, ops=ops))
        else:
            steps.append(step)
    if len(steps) <= 1:
        return None
    return replace(program, steps=tuple(steps))


class Suite:
    """Runs programs with ``outcome_of`` (program -> Outcome) and keeps the findings; ``alive()`` says
    whether the broker still answers a new connection, ``restart()`` (or None) starts it again."""

    def __init__(self, outcome_of: Callable, alive: Callable[[], bool], restart: Callable | None = None,
                 time_limit: float | None = None, progress: Callable | None = None,
                 shrink_reruns: int = MAX_RERUNS, standard: bool = True, started: float | None = None) -> None:
        self.outcome_of, self.alive, self.restart = outcome_of, alive, restart
        self.standard = standard            # the standard dialect: what AMQP 0-9-1 leaves open is allowed
        # The time limit counts from ``started`` (the command's start: connecting to the broker counts too).
        self.deadline = (time.monotonic() if started is None else started) + time_limit if time_limit else None
        self.progress = progress or (lambda run: None)
        self.shrink_reruns = shrink_reruns
        self.run = Run(table={f: {"programs": 0, "steps": 0, "accepted": 0, "found": 0} for f in P.FAMILIES},
                       totals={"programs": 0, "steps": 0, "accepted": 0, "found": 0, "crashes": 0,
                               "seconds": 0.0, "probes": 0, "generated": 0, "duplicates": 0})
        self.seen: set = set()
        self.failed: CommandFailed | None = None        # the user's kill or start command failed: the run ends

    def out_of_time(self) -> bool:
        return self.deadline is not None and time.monotonic() > self.deadline

    def over(self) -> bool:
        return bool(self.run.stopped) or self.failed is not None or self.out_of_time()

    # ------------------------------------------------------------ one program

    def one(self, program: P.Program, home: str, probe_rules: tuple = ()) -> None:
        """Run ``program`` (its family ``home`` when accepted) and file what became of it."""
        run = self.run
        program = without(program, set(run.excluded)) if run.excluded else program
        if program is None or program in self.seen:
            run.totals["duplicates"] += program is not None
            return
        self.seen.add(program)
        try:
            out = self.outcome_of(program)
        except CommandFailed as error:
            self.failed = error
            return
        if out.status in ("no answer", "error") and not self.alive():
            out = out._replace(status=STOPPED, explanation=f"the broker stopped answering during this program "
                                                           f"({out.explanation})")
        difference = allowed_difference(out, program) if self.standard else ""
        if difference:      # judged up to the difference: what follows it is not judged
            run.differences[difference] = run.differences.get(difference, 0) + 1
            out = out._replace(status="accepted")
        totals = run.totals
        totals["programs"] += 1
        totals["probes" if probe_rules else "generated"] += 1
        totals["steps"] += out.steps
        totals["seconds"] += out.seconds
        totals["crashes"] += out.crashes
        if out.status == "accepted":
            totals["accepted"] += 1
            if not difference:
                run.coverage.add(out.judgement.verdict.path)
                run.probe_rules.update(probe_rules)
            row = run.table[home]
        else:
            totals["found"] += 1
            diagnosed = self.diagnosed(out, program)
            for diagnosis, shown in diagnosed:
                finding = run.findings.get(diagnosis.key)
                if finding is None:
                    run.findings[diagnosis.key] = Finding(diagnosis, program, shown)
                else:
                    finding.count += 1
                    if len(program.steps) < len(finding.program.steps) and diagnosis.kind != STOPPED:
                        # the shortest is shrunk and shown (a broker that stopped: the first program it stopped in)
                        finding.diagnosis, finding.program, finding.outcome = diagnosis, program, shown
                if diagnosis.kind == UNSUPPORTED and diagnosis.method not in run.excluded:
                    run.excluded.append(diagnosis.method)
            diagnosis = diagnosed[0][0]
            row = run.table[diagnosis.family]
            row["found"] += 1
            if diagnosis.kind == STOPPED:
                self.stopped_answering(program)
        row["programs"] += 1
        row["steps"] += out.steps
        if out.status == "accepted":
            row["accepted"] += 1
        self.progress(run)

    def diagnosed(self, out, program: P.Program) -> list:
        """Each way ``out`` (not accepted) shows the broker failing, with the outcome that shows it: its
        first rejection, then those later in the same recording (judge.later), each kind once; a later
        one the standard dialect allows ends the list, as the first one would have ended the judging."""
        found = [(diagnose(out, program), out)]
        for more in getattr(out, "later", ()):
            if self.standard and allowed_difference(more, program):
                break
            diagnosis = diagnose(more, program)
            if all(diagnosis.key != d.key for d, _ in found):
                found.append((diagnosis, more))
        return found

    def stopped_answering(self, program: P.Program) -> None:
        if self.restart is None:
            self.run.stopped = "the broker stopped answering (no --start-cmd to start it again)"
            return
        try:
            self.restart()
        except CommandFailed as error:
            self.run.stopped = f"the broker stopped answering and could not be started again: {error}"

    # ------------------------------------------------------------ the phases

    def probes(self) -> None:
        for probe in PROBES:
            if self.over():
                return
            self.one(probe.program, family(probe.rules[0]), probe.rules)

    def generated(self, count: int, seed: int | None, steering: bool, crashes: bool = False) -> None:
        """``count`` generated programs (none twice, none with a method left out), steered every BATCH."""
        weights = P.Steering()
        drawn = [0]
        quota = [0]

        def one(program):
            if self.over() or drawn[0] >= quota[0]:
                raise _BatchDone()      # ends the Hypothesis run: no example is drawn for nothing
            before = self.run.totals["programs"]
            crashed = any(isinstance(step, P.Crash) for step in program.steps)
            self.one(program, "DU" if crashed else min(P.families(program) or {"ER"}, key=P.FAMILIES.index))
            drawn[0] += self.run.totals["programs"] - before

        # Each batch is a Hypothesis run of its own (a strategy must not change within a run); it draws
        # more examples than it needs, since every run starts from the simplest program (a duplicate).
        k = 0
        while drawn[0] < count and not self.over() and k < 4 * count // BATCH + 8:
            factors = dict(weights.factors) if steering else {}
            for method in self.run.excluded:
                for kind in P.Op.__args__:
                    if method_of(kind) == method:
                        factors[kind] = 0
            strategy = P.programs(rabbitmq_safe=True, errors=False, crashes=crashes, min_crashes=int(crashes),
                                  steering=P.Steering(factors))
            quota[0] = drawn[0] + min(BATCH, count - drawn[0])
            draw = settings(max_examples=2 * BATCH, deadline=None, database=None,
                            derandomize=seed is None and k == 0, suppress_health_check=list(HealthCheck),
                            phases=[Phase.generate], verbosity=Verbosity.quiet)(given(strategy)(one))
            if seed is not None or k:
                draw = hypothesis_seed(k if seed is None else seed if k == 0 else seed * 1000 + k)(draw)
            try:
                draw()
            except _BatchDone:
                pass
            if steering:
                steer(weights, self.run.coverage)
            k += 1

    def shrink_all(self) -> None:
        """Shrink the first program of each finding (rejections and errors), while time is left."""
        for finding in self.run.findings.values():
            if self.shrink_reruns <= 0 or finding.diagnosis.kind in (STOPPED, UNSUPPORTED):
                continue
            if self.out_of_time():
                finding.shrink_note = "not shrunk: the time limit was reached"
                continue
            if self.run.stopped:
                finding.shrink_note = "not shrunk: the broker stopped answering"
                continue
            key = finding.diagnosis.key

            def rerun(candidate):
                if self.out_of_time():
                    raise TimeoutError("the time limit was reached")
                return self.outcome_of(candidate)

            def same(candidate, out):
                return out.status not in ("accepted", "inconclusive") and any(
                    d.key == key for d, _ in self.diagnosed(out, candidate))
            try:
                finding.shrunk = shrink(finding.program, finding.outcome, rerun, self.shrink_reruns, same)
                # shown: the outcome that shows this finding (a later rejection of the recording, maybe)
                shown = [o for d, o in self.diagnosed(finding.shrunk.outcome, finding.shrunk.program) if d.key == key]
                finding.shrunk.outcome = shown[0] if shown else finding.shrunk.outcome
            except TimeoutError:
                finding.shrink_note = "shrinking stopped: the time limit was reached"
            if finding.shrunk is None and not self.alive():
                finding.shrink_note = "shrinking stopped: the broker stopped answering"
                return


def catalogue_coverage(run: Run, crashes: bool) -> dict:
    """Coverage over the whole rule catalogue: the rules an accepted program showed (a probe written for
    it, or a spec action of an accepted run citing it), the rules a finding names, and for each other
    rule why no program showed it."""
    shown = set(run.probe_rules) | set(run.coverage.rules())
    found = {rule for f in run.findings.values() for rule in f.diagnosis.rules}
    rules = {}
    for rule in RULES:
        if rule in found:
            rules[rule] = "finding"
        elif rule in UNOBSERVABLE:
            rules[rule] = "unobservable: " + UNOBSERVABLE[rule]
        elif rule in NEED_CRASHES and not crashes:
            rules[rule] = "not run: it needs broker crashes (--kill-cmd and --start-cmd)"
        elif rule in shown:
            rules[rule] = "covered"
        else:
            rules[rule] = "not shown: no accepted program of this run exercised it"
    return {"total": len(RULES), "covered": sum(v == "covered" for v in rules.values()),
            "findings": sum(v == "finding" for v in rules.values()),
            "unobservable": sum(v.startswith("unobservable") for v in rules.values()), "rules": rules,
            "actions": run.coverage.report()["actions"]}
