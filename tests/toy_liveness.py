"""A toy model for the liveness search (spark_check.liveness), its answers known by hand.

A worker has one job (``done``) and a flag it may flip for ever (``flag``):

- ``Flip`` (fair class 0) flips the flag: (False, 0) <-> (False, 1), a cycle of two states;
- ``Spin`` (never fair) leaves the state as it is: a loop on one state;
- ``Finish`` (fair class 1, unless ``finish_fair`` is off) ends the job; it is enabled in both flag
  states, or only when the flag is 1 (``finish_needs_flag``);
- with ``stuck``, nothing at all is enabled in the start state: the execution ends there;
- with ``idle``, only Finish is enabled in the start state.

The liveness property ``job_done``: no fair execution leaves the job undone for ever. By hand:

- Finish fair and always enabled: every cycle of undone states has Finish enabled throughout and never
  takes it: not fair. Holds.
- Finish not fair: the Flip cycle (or the Spin loop, but Flip is enabled throughout it and not taken)
  is fair. Violated, by the lasso "Flip, Flip" from the start.
- Finish fair but enabled only when the flag is 1: the Flip cycle passes through flag 0 where Finish is
  disabled, so weak fairness does not force it. Violated (strong fairness would not be).
- stuck: the start state is an end with the job undone. Violated, by a path that ends (no cycle).
- idle, Finish not fair: nothing fair is left to happen in the start state, so an execution may stop
  there (Finish need never happen): an end with the job undone. Violated, by a path that ends. With
  Finish fair, it must happen: holds.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from rabbitproof.spec.properties_api import Liveness


class Job(NamedTuple):
    done: bool
    flag: int


@dataclass(frozen=True)
class Flip:
    actor = "worker"

    def __str__(self) -> str:
        return "flip the flag"


@dataclass(frozen=True)
class Spin:
    actor = "worker"

    def __str__(self) -> str:
        return "spin"


@dataclass(frozen=True)
class Finish:
    actor = "worker"

    def __str__(self) -> str:
        return "finish the job"


@dataclass(frozen=True)
class JobConfig:
    name: str = "job"
    finish_fair: bool = True
    finish_needs_flag: bool = False
    stuck: bool = False
    idle: bool = False
    max_states: int = 100
    deadlock_is_error: bool = False


class JobFairness(NamedTuple):
    finish_fair: bool
    classes: tuple[str, ...] = ("the worker flips", "the worker finishes")

    def class_of(self, action) -> int:
        if type(action) is Flip:
            return 0
        if type(action) is Finish and self.finish_fair:
            return 1
        return -1


@dataclass(frozen=True)
class JobModel:
    """The toy model (module docstring); a frozen dataclass, so it ships to Spark executors as it is."""

    def initial_states(self, config: JobConfig) -> tuple[Job, ...]:
        return (Job(False, 0),)

    def enabled(self, state: Job, config: JobConfig) -> tuple:
        if state.done or (config.stuck and state == Job(False, 0)):
            return ()
        if config.idle and state == Job(False, 0):
            return (Finish(),)
        finish = (Finish(),) if state.flag or not config.finish_needs_flag else ()
        return (Flip(), Spin()) + finish

    def step(self, state: Job, action) -> tuple[Job, tuple]:
        if type(action) is Flip:
            return Job(False, 1 - state.flag), ()
        if type(action) is Finish:
            return Job(True, state.flag), ()
        return state, ()

    def terminal_ok(self, state: Job, config: JobConfig) -> bool:
        return state.done

    def fairness(self, config: JobConfig) -> JobFairness:
        return JobFairness(config.finish_fair)


def undone(state: Job) -> bool:
    return not state.done


def always(state: Job) -> bool:
    return True


JOB_DONE = Liveness("job_done", ("T-1",), "No fair execution leaves the job undone for ever.", undone, always,
                    at_end=True)


@dataclass(frozen=True)
class Unrenamed:
    """A symmetry that renames nothing and does not vouch for fair cycles: a stand-in for a reduction that
    may lose them (spark_check.reductions, ``keeps_fair_cycles``)."""

    renamings: tuple = ()
    keeps_fair_cycles: bool = False


@dataclass(frozen=True)
class UnsureJobModel(JobModel):
    """The toy with such a reduction, offered as its ``symmetry``."""

    def symmetry(self, config: JobConfig) -> Unrenamed:
        return Unrenamed()


# --- a ladder: many small components in a row, for the search for fair cycles in Spark ----------------

class Rung(NamedTuple):
    side: int       # which of the two ladders (two start states, at depth 0 both)
    rung: int       # the ladder's top, ``rungs``, is the end: the job is done there
    flag: int       # 0 .. WIDTH-1, turned round by Flip: each rung is a cycle of WIDTH states


WIDTH = 3


@dataclass(frozen=True)
class Climb:
    actor = "worker"

    def __str__(self) -> str:
        return "climb a rung"


@dataclass(frozen=True)
class LadderConfig:
    """``rungs`` rungs a ladder, two ladders; on every ``every``-th rung (0: none) climbing needs the
    flag at its last value, so its cycle is fair (Climb is disabled on it somewhere): a counterexample.
    Elsewhere Climb is enabled all round the rung's cycle and never taken on it: not fair."""

    name: str = "ladder"
    rungs: int = 30
    every: int = 4
    max_states: int = 10_000
    deadlock_is_error: bool = False


class LadderFairness(NamedTuple):
    classes: tuple[str, ...] = ("the worker flips", "the worker climbs")

    def class_of(self, action) -> int:
        return 0 if type(action) is Flip else 1


@dataclass(frozen=True)
class LadderModel:
    """Two ladders of ``rungs`` components each, in a row (LadderConfig): the many small components a
    requeue loop makes, and the worst case for colouring (each component reaches all those after it)."""

    def initial_states(self, config: LadderConfig) -> tuple[Rung, ...]:
        return (Rung(0, 0, 0), Rung(1, 0, 0))

    def enabled(self, state: Rung, config: LadderConfig) -> tuple:
        if state.rung == config.rungs:
            return ()
        needs_flag = config.every and state.rung % config.every == config.every - 1
        climb = (Climb(),) if not needs_flag or state.flag == WIDTH - 1 else ()
        return (Flip(),) + climb

    def step(self, state: Rung, action) -> tuple[Rung, tuple]:
        if type(action) is Flip:
            return state._replace(flag=(state.flag + 1) % WIDTH), ()
        return state._replace(rung=state.rung + 1), ()

    def terminal_ok(self, state: Rung, config: LadderConfig) -> bool:
        return True

    def fairness(self, config: LadderConfig) -> LadderFairness:
        return LadderFairness()


LADDER_TOP = Liveness("ladder_top", ("T-2",), "No fair execution stays below the top of its ladder for ever "
                      "(the top is an end: nothing is enabled there).", always, always)
