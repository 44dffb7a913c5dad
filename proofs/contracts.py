"""CrossHair over the contracts of the spec's pure functions (`rabbitproof verify --part crosshair`).

Each function in ``CONTRACTS`` states a rule in its docstring (``pre:`` / ``post:`` lines, PEP 316).
``crosshair check --analysis_kind PEP316 --report_all`` runs over each one, in a subprocess; with
``--report_all`` CrossHair prints one line per postcondition:

- ``error: false when calling f(...)``: a counterexample (the check fails);
- ``info: Confirmed over all paths.``: every path was explored, the condition holds for every input;
- ``info: Not confirmed.``: no counterexample within the budget (inputs are unbounded tuples,
  so most conditions end here: this is a bounded search, not a proof).

A postcondition CrossHair printed nothing for is counted as not checked (a failure), so a silent
CrossHair never passes for a checked one.

The budget is counted in work, not time, so the outcome is the same on a quiet machine and a loaded
one: each condition's search stops after ``ITERATIONS`` paths in a row that found nothing new
(CrossHair picks paths with a seeded random generator), and each Z3 query inside is bounded by Z3's
deterministic resource limit (``SMT_RLIMIT``, CrossHair's ``CROSSHAIR_SMT_RLIMIT``), its wall-clock
limit (half the per-path cap) far beyond it. CrossHair's limits of CPU time stay only as a cap no run reaches
(``CPU_CAP``).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import Sequence

from rich.table import Table
from rich.text import Text

# The spec functions with contracts, each with the rule it states.
CONTRACTS: tuple[tuple[str, str], ...] = (
    ("rabbitproof.spec.broker.settled_tags", "ACK-1..4: which tags an ack settles"),
    ("rabbitproof.spec.storage.requeue_position", "RQ-1: where a requeued copy goes back"),
    ("rabbitproof.spec.broker.confirm_covers", "PC-3: which seqs a confirm covers"),
    ("rabbitproof.spec.broker.prefetch_room", "PF-1, PF-5: room a prefetch leaves"),
    ("rabbitproof.spec.broker.rollback_outstanding", "TX-3, TX-4: what a rollback gives back"),
    ("rabbitproof.spec.faults.lost_in_crash", "DU-2, PC-10, TX-8: what a crash keeps"),
    ("rabbitproof.spec.broker.count_off", "PF-3, TX-3: what a settlement takes off the global count"),
)

# Measured on the seven functions and the planted bug: 50 paths without news take 0.3 to 0.6 CPU s a
# condition (about what the 1 s a condition of CPU time used to give); every outcome is the same with a
# limit of 3,000 Z3 resource units a query as with 10,000,000, so no query comes near it.
ITERATIONS = 50
SMT_RLIMIT = 10_000_000
CPU_CAP = 600.0            # CPU seconds a condition and a path may take: a cap, not the budget
ROOT = Path(__file__).resolve().parent.parent
_LINE = re.compile(r"^(?P<file>.+?):(?P<line>\d+): (?P<kind>error|info|warning): (?P<message>.*)$")


@dataclass
class Outcome:
    """What CrossHair reported for one function."""

    target: str
    conditions: int                                      # post: lines in its docstring
    confirmed: int = 0                                   # over all paths
    not_confirmed: int = 0                               # no counterexample within the time limit
    counterexamples: list[str] = field(default_factory=list)   # "line N: message"
    other: list[str] = field(default_factory=list)       # anything else (errors, unparsed lines)
    seconds: float = 0.0
    returncode: int = 0

    @property
    def reported(self) -> int:
        return self.confirmed + self.not_confirmed + len(self.counterexamples)

    @property
    def ok(self) -> bool:
        return (not self.counterexamples and not self.other and self.returncode == 0
                and self.conditions > 0 and self.reported == self.conditions)


def conditions_of(target: str) -> int:
    """The number of ``post:`` lines in the target function's docstring."""
    module, _, name = target.rpartition(".")
    doc = getattr(import_module(module), name).__doc__ or ""
    return sum(1 for line in doc.splitlines() if line.strip().startswith("post:"))


def check(target: str, iterations: int = ITERATIONS) -> Outcome:
    """Run ``crosshair check`` on one function, each condition searched until ``iterations`` paths in a
    row find nothing new, and parse its report."""
    outcome = Outcome(target, conditions_of(target))
    started = time.perf_counter()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))),
               CROSSHAIR_SMT_RLIMIT=str(SMT_RLIMIT), PYTHONHASHSEED="0")
    proc = subprocess.run(
        [sys.executable, "-m", "crosshair", "check", target, "--analysis_kind", "PEP316", "--report_all",
         "--max_uninteresting_iterations", str(iterations),
         "--per_condition_timeout", str(CPU_CAP), "--per_path_timeout", str(CPU_CAP)],
        capture_output=True, text=True, cwd=ROOT, env=env)
    outcome.seconds = time.perf_counter() - started
    outcome.returncode = proc.returncode
    for line in proc.stdout.splitlines():
        m = _LINE.match(line.strip())
        if m is None:
            if line.strip():
                outcome.other.append(line.strip())
            continue
        message = m["message"]
        if m["kind"] == "error" and message.startswith("false when calling"):
            outcome.counterexamples.append(f"line {m['line']}: {message}")
        elif message == "Confirmed over all paths.":
            outcome.confirmed += 1
        elif message == "Not confirmed.":
            outcome.not_confirmed += 1
        else:
            outcome.other.append(f"line {m['line']}: {m['kind']}: {message}")
    outcome.other.extend(line for line in proc.stderr.splitlines() if line.strip())
    if outcome.counterexamples and outcome.returncode == 1:
        outcome.returncode = 0                           # exit 1 means "counterexample found": counted above
    return outcome


def check_all(targets: Sequence[str] = tuple(t for t, _ in CONTRACTS), jobs: int = 2,
              iterations: int = ITERATIONS) -> list[Outcome]:
    """``check`` on every target, ``jobs`` CrossHair processes at a time, in the order given."""
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(lambda t: check(t, iterations), targets))


def print_outcomes(console, outcomes: Sequence[Outcome]) -> None:
    rules = dict(CONTRACTS)
    table = Table(title="CrossHair contracts (PEP 316)")
    for col in ("function", "rule", "posts", "all paths", "no cex", "cex", "seconds"):
        table.add_column(col, justify="left" if col in ("function", "rule") else "right")
    for o in outcomes:
        table.add_row(o.target.removeprefix("rabbitproof.spec."), rules.get(o.target, "").split(":")[0], str(o.conditions), str(o.confirmed), str(o.not_confirmed),
                      str(len(o.counterexamples)), f"{o.seconds:.1f}")
    console.print(table)
    for o in outcomes:
        for cex in o.counterexamples:
            console.print(Text(f"{o.target}: {cex}", "bold red"))
        for line in o.other:
            console.print(Text(f"{o.target}: {line}", "red"))
        if o.reported != o.conditions:
            console.print(Text(f"{o.target}: {o.conditions} postconditions, CrossHair reported {o.reported}", "red"))
