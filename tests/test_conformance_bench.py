"""The conformance bench (`make bench`) runs end to end on a small load in process and refuses bad
options with a clear message. Its rates are measured by `make bench`, never asserted here."""
from __future__ import annotations

import pytest
from rich.console import Console

from rabbitproof.bench import conformance as bench
from rabbitproof.conformance import programs as P
from rabbitproof.conformance.targets import InProcessTarget


def test_bench_runs_in_process_and_prints_its_tables():
    console = Console(record=True, width=160)
    assert bench.main(["--programs", "4", "--crash-programs", "2", "--targets", "in-process"], console) == 0
    out = console.export_text()
    assert "conformance steps/s (4 fixed-seed programs per target)" in out and "in-process" in out
    assert "conformance with crashes (2 fixed-seed programs per target)" in out
    assert "not accepted" not in out, out


def test_crash_programs_crash_and_their_restarts_are_timed():
    programs = bench.fixed_crash_programs(4)
    assert len(programs) == 4 and all(any(isinstance(s, P.Crash) for s in p.steps) for p in programs)
    result = bench.measure(programs, InProcessTarget)
    assert result.programs == 4 and result.accepted == 4
    assert result.crashes == sum(isinstance(s, P.Crash) for p in programs for s in p.steps)
    assert len(result.restart_seconds) == result.crashes and all(t > 0 for t in result.restart_seconds)


def test_programs_are_the_same_every_run():
    assert bench.fixed_programs(5) == bench.fixed_programs(5)


@pytest.mark.parametrize("argv, message", [
    (["--programs", "0"], "--programs: 0 is out of range (1 or more)"),
    (["--programs", "many"], "not an integer"),
    (["--crash-programs", "-1"], "--crash-programs: -1 is out of range (0 or more)"),
    (["--targets", "impl,activemq"], "--targets: 'activemq' is not a target; choose from in-process, impl, rabbitmq"),
    (["--quiet", "-1"], "--quiet: -1 is out of range (0 to 10 seconds)"),
])
def test_bad_options_are_refused_clearly(argv, message, capsys):
    with pytest.raises(SystemExit) as exited:
        bench.parse_args(argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err
