"""Conformance throughput: steps per second of generated programs against each target, and of the judge.

    rabbitproof bench conformance [--programs N] [--crash-programs N] [--targets in-process,impl,rabbitmq]
                                      [--quiet S]

The same N fixed-seed programs (the ones `make conformance` runs: no connection errors, no crash) run
against each target: the `impl` core in this process, the `impl` server over
TCP and a private RabbitMQ 3.10.8 node, both started here. For each target it reports the steps (one
step is one write of methods, with its replies), the seconds spent running them and the rate, then the
seconds the spec took to judge the recordings and the rate of the whole (running and judging). A step
against a broker over TCP ends when every reply has come (a channel that would not answer gets a
round trip of its own, rabbitproof/conformance/targets.py), then 3 ms of quiet; a program ends with a
round trip on every channel and 20 ms of quiet (`--quiet` changes the 3 ms).

A second table runs programs with crashes (`--crash-programs`, default 10 per target, the same fixed-seed
ones on each: half general programs with at least one crash, half episodes that end in one, as in
tests/test_conformance_crashes.py): the crashes each target went through, and the seconds from the
SIGKILL until the broker was up again (in process: until the core recovered its store), which is what
a crash costs a test.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from rich.console import Console
from rich.table import Table

from rabbitproof.brokers.impl_broker import ImplBroker
from rabbitproof.brokers.rabbitmq import RabbitMQNode
from rabbitproof.conformance import programs as P
from rabbitproof.conformance.judge import judge
from rabbitproof.conformance.targets import InProcessTarget, TcpTarget, run_program
from rabbitproof.options import OneLineParser, int_in, names_in, seconds_in

TARGETS = ("in-process", "impl", "rabbitmq")
QUIET = {"in-process": 0.0, "impl": 0.003, "rabbitmq": 0.003}


@dataclass
class Result:
    programs: int = 0
    steps: int = 0
    run_seconds: float = 0.0
    judge_seconds: float = 0.0
    accepted: int = 0
    first_rejection: str | None = None
    crashes: int = 0
    restart_seconds: list = field(default_factory=list)

    def rate(self, seconds: float) -> float:
        return self.steps / seconds if seconds > 0 else 0.0


def fixed_programs(count: int) -> list:
    """`count` programs drawn with a fixed seed (the same every run)."""
    drawn: list = []

    @settings(max_examples=count, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck), phases=[Phase.generate])
    @given(P.programs(rabbitmq_safe=True, errors=False))
    def collect(program):
        drawn.append(program)

    collect()
    return drawn


def fixed_crash_programs(count: int) -> list:
    """`count` programs with crashes drawn with a fixed seed: general ones with at least one crash, then
    focused ones made of the episodes that end in a crash; all kept away from RabbitMQ's races."""
    drawn: list = []
    for strategy, n in ((P.programs(crashes=True, min_crashes=1, rabbitmq_safe=True, errors=False), count // 2),
                        (P.focused_programs(max_episodes=2, episodes=P.CRASH_EPISODES, rabbitmq_safe=True),
                         count - count // 2)):
        if n == 0:
            continue

        @settings(max_examples=n, derandomize=True, database=None, deadline=None,
                  suppress_health_check=list(HealthCheck), phases=[Phase.generate])
        @given(strategy)
        def collect(program):
            drawn.append(program)

        collect()
    return drawn


def measure(programs: list, make_target) -> Result:
    """Run every program on the target made by make_target(); judge each recording."""
    result = Result()
    for program in programs:
        target = make_target()
        restarts = len(target.restart_seconds)
        try:
            started = time.perf_counter()
            run = run_program(program, target)
            result.run_seconds += time.perf_counter() - started
            result.crashes += run.crashes
            result.restart_seconds += target.restart_seconds[restarts:]
        finally:
            if isinstance(target, InProcessTarget):
                target.close()
        started = time.perf_counter()
        verdict = judge(run)
        result.judge_seconds += time.perf_counter() - started
        result.programs += 1
        result.steps += run.steps
        result.accepted += verdict.ok
        if not verdict.ok and result.first_rejection is None:
            result.first_rejection = verdict.report()
    return result


def run_targets(programs: list, targets: tuple, console: Console, quiet: dict,
                crash_programs: list = ()) -> tuple[dict, dict]:
    """The results of `programs` per target, and of `crash_programs` per target (the same broker,
    killed and restarted by them)."""
    results: dict = {}
    crash_results: dict = {}
    with tempfile.TemporaryDirectory(prefix="rabbitproof-conformance-bench-") as workdir:
        for name in targets:
            console.print(f"running {len(programs)} programs against {name} ...")
            if name == "in-process":
                results[name] = measure(programs, InProcessTarget)
                if crash_programs:
                    console.print(f"running {len(crash_programs)} programs with crashes against {name} ...")
                    crash_results[name] = measure(crash_programs, InProcessTarget)
                continue
            broker = ImplBroker(Path(workdir) / "impl") if name == "impl" else RabbitMQNode()
            broker.start()
            try:
                target = TcpTarget.of(name, broker, quiet=quiet.get(name, QUIET[name]))
                results[name] = measure(programs, lambda: target)
                if crash_programs:
                    console.print(f"running {len(crash_programs)} programs with crashes against {name} ...")
                    crash_results[name] = measure(crash_programs, lambda: target)
            finally:
                broker.close()
    return results, crash_results


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = OneLineParser(prog="rabbitproof bench conformance", description=__doc__.split("\n")[0])
    parser.add_argument("--programs", type=int_in(1), default=60, help="programs per target (default 60)")
    parser.add_argument("--crash-programs", type=int_in(0), default=10,
                        help="programs with crashes per target (default 10; 0: none)")
    parser.add_argument("--targets", type=names_in(TARGETS, "a target"), default=TARGETS, help="in-process,impl,rabbitmq")
    parser.add_argument("--quiet", type=seconds_in(0, 10), default=None,
                        help="seconds a step waits after its last reply over TCP (default 0.003)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None, console: Console | None = None) -> int:
    """Run the bench and print its table, and the first recording of each target the spec did not accept
    (a finding for the conformance tests to pin; the rates stand, so the exit code is 0)."""
    options = parse_args(argv)
    console = console if console is not None else Console(width=max(110, Console().width))
    programs = fixed_programs(options.programs)
    quiet = {name: options.quiet for name in ("impl", "rabbitmq")} if options.quiet is not None else {}
    crash_programs = fixed_crash_programs(options.crash_programs) if options.crash_programs else []
    results, crash_results = run_targets(programs, options.targets, console, quiet, crash_programs)
    table = Table(title=f"conformance steps/s ({len(programs)} fixed-seed programs per target)")
    for column in ("target", "programs", "steps", "accepted", "run s", "steps/s running", "judge s",
                   "steps/s with judging"):
        table.add_column(column, justify="left" if column == "target" else "right")
    for name, r in results.items():
        table.add_row(name, str(r.programs), str(r.steps), str(r.accepted), f"{r.run_seconds:.1f}",
                      f"{r.rate(r.run_seconds):,.0f}", f"{r.judge_seconds:.1f}",
                      f"{r.rate(r.run_seconds + r.judge_seconds):,.0f}")
    console.print(table)
    waits = {name: quiet.get(name, QUIET[name]) for name in ("impl", "rabbitmq")}
    console.print("A step is one write of methods and its replies; over TCP it ends once every reply has come "
                  f"and the broker has been quiet for {waits['impl']} s (impl) or {waits['rabbitmq']} s "
                  "(RabbitMQ), on every connection.")
    if crash_results:
        console.print(crash_table(crash_results, len(crash_programs)))
    for label, table_results in (("", results), (" (with crashes)", crash_results)):
        for name, r in table_results.items():
            if r.first_rejection:
                console.print(f"\n[bold red]{name}{label}: {r.programs - r.accepted} recording(s) not accepted; "
                              "the first:[/]", highlight=False)
                console.print(r.first_rejection, markup=False, highlight=False)
    return 0


def crash_table(results: dict, programs: int):
    """Programs with crashes per target: steps, crashes, and the seconds each restart took."""
    table = Table(title=f"conformance with crashes ({programs} fixed-seed programs per target)")
    for column in ("target", "programs", "steps", "crashes", "accepted", "run s", "steps/s running",
                   "restart s median", "restart s max", "judge s"):
        table.add_column(column, justify="left" if column == "target" else "right")
    for name, r in results.items():
        restarts = r.restart_seconds
        table.add_row(name, str(r.programs), str(r.steps), str(r.crashes), str(r.accepted),
                      f"{r.run_seconds:.1f}", f"{r.rate(r.run_seconds):,.0f}",
                      f"{statistics.median(restarts):.3f}" if restarts else "-",
                      f"{max(restarts):.3f}" if restarts else "-", f"{r.judge_seconds:.1f}")
    return table
