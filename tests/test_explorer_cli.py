"""The spark_check command line, on the toy model: bad input is one line and exit code 2."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from spark_check.cli import main

ROOT = Path(__file__).resolve().parent.parent
TOY = ["--model", "tests.toy_model"]


def run(argv, capsys):
    out = Console(width=200, record=True, file=open(os.devnull, "w"))
    try:
        code = main([*argv, *TOY, "--no-progress"] if argv[0] == "explore" else [*argv, *TOY], out=out)
    except SystemExit as e:  # argparse errors
        code = e.code
    captured = capsys.readouterr()
    return code, out.export_text(), captured.err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["explore", "nope"], "unknown configuration 'nope'"),
        (["explore", "manual", "--bound", "messages=99"], "bound messages=99 is out of range 1..8"),
        (["explore", "manual", "--bound", "queues=1"], "unknown bound 'queues'"),
        (["explore", "manual", "--bound", "messages"], "--bound expects NAME=VALUE"),
        (["explore", "manual", "--property", "no_such_property"], "unknown property 'no_such_property'"),
        (["explore", "manual", "--engine", "warp"], "unknown engine 'warp'; available: local, spark"),
        (["explore", "manual", "--max-states", "0"], "--max-states must be positive"),
        (["explore", "manual", "--max-states", "many"], "invalid int value"),
        (["explore", "manual", "--json", "/no/such/dir/out.json"], "no such directory"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_before_any_work(argv, message, capsys):
    code, out, err = run(argv, capsys)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("spark_check: error: ") and message in err
    assert out == ""


def test_bad_input_exit_code_from_the_real_process():
    proc = subprocess.run(
        [sys.executable, "-m", "spark_check", "explore", "nope", *TOY], cwd=ROOT, capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "spark_check: error: unknown configuration 'nope'; known: tiny, nocrash, manual, autoack, "
        "autoack_lenient, medium, large"
    ]
    assert proc.stdout == ""


def test_explore_prints_summary_and_numbered_counterexample(capsys):
    code, out, err = run(["explore", "manual", "--property", "at_most_once", "redelivery_happens"], capsys)
    assert code == 1  # at_most_once is violated
    assert "157" in out and "VIOLATED" in out and "witnessed" in out
    assert "at_most_once VIOLATED (FAIL): shortest trace, 3 steps" in out
    assert "  2. [broker] broker delivers m0 to the consumer\n       broker -> consumer: basic.deliver m0" in out
    assert "never fired: BrokerPurge" in out
    assert "final state" not in out


def test_show_state_prints_the_final_state_of_each_trace(capsys):
    _, out, _ = run(["explore", "manual", "--property", "at_most_once", "--show-state"], capsys)
    assert "final state: State(locs=(1, 0), redelivered=(True, False), crashes_left=0)" in out


def test_explore_passing_configuration_exits_0_and_bounds_apply(capsys):
    code, out, _ = run(["explore", "manual", "--bound", "messages=1"], capsys)
    assert code == 0
    assert "│ distinct states" in out and "17 │" in out


def test_json_holds_figures_verdicts_and_traces(tmp_path, capsys):
    path = tmp_path / "out.json"
    code, _, _ = run(["explore", "autoack", "--json", str(path)], capsys)
    assert code == 1  # deadlocks are errors in this configuration
    data = json.loads(path.read_text())
    assert (data["distinct_states"], data["depth"], data["transitions"]) == (41, 8, 70)
    assert data["deadlocks"]["count"] == 3 and data["deadlocks"]["failed"] is True
    assert len(data["deadlocks"]["trace"]) == 6
    hazard = data["properties"][0]
    assert (hazard["name"], hazard["verdict"], hazard["passed"]) == ("autoack_loses_messages", "found", True)
    assert hazard["trace"][-1] == "3. [consumer] consumer crashes"
    assert data["never_fired"] == ["BrokerPurge", "BrokerSettle", "ConsumerAck"]
    assert data["ok"] is False and data["collision_probability"] == 41**2 / 2**65


def test_max_states_flag_makes_an_error_result(capsys):
    code, out, _ = run(["explore", "manual", "--max-states", "20"], capsys)
    assert code == 1 and "more than 20 distinct states" in out


def test_list_names_configurations_and_properties(capsys):
    code, out, _ = run(["list"], capsys)
    assert code == 0
    assert "autoack_lenient" in out and "autoack_loses_messages" in out and "* manual" in out
