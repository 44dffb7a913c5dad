"""The `rabbitproof explore` and `list` command lines, on the toy model: bad input is one line and exit code 2."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from rabbitproof.cli import main
from rabbitproof.explore.report import ProgressDisplay

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
        (["explore", "manual", "--json-file", "/no/such/dir/out.json"], "no such directory"),
        (["explore", "manual", "--master", "local[2]"], "--master is for the spark engine"),
        (["explore", "manual", "--engine", "spark", "--exact"], "--exact keeps states in one process"),
        (["explore", "manual", "--engine", "spark", "--master", "mesos-ish"], "is not a Spark master URL"),
        (["explore", "manual", "--engine", "spark", "--master", "spark://127.0.0.1:1"],
         "the Spark master spark://127.0.0.1:1 cannot be reached (127.0.0.1:1: Connection refused)"),
        (["explore", "nope", "--engine", "spark"], "unknown configuration 'nope'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_before_any_work(argv, message, capsys):
    code, out, err = run(argv, capsys)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("rabbitproof explore: error: ") and message in err
    assert out == ""


def test_bad_input_exit_code_from_the_real_process():
    proc = subprocess.run(
        [sys.executable, "-m", "rabbitproof", "explore", "nope", *TOY], cwd=ROOT, capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "rabbitproof explore: error: unknown configuration 'nope'; known: tiny, nocrash, manual, autoack, "
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
    assert "| distinct states" in out and "17 |" in out       # plain ASCII: not a terminal
    assert out.rstrip().splitlines()[-1].startswith("explore: nothing found: manual: ")


def test_json_holds_figures_verdicts_and_traces(tmp_path, capsys):
    path = tmp_path / "out.json"
    code, _, _ = run(["explore", "autoack", "--json-file", str(path)], capsys)
    assert code == 1  # deadlocks are errors in this configuration
    data = json.loads(path.read_text())
    assert (data["schema"], data["exit_code"], data["verdict"]) == ("rabbitproof.explore/1", 1, "found")
    assert (data["distinct_states"], data["depth"], data["transitions"]) == (41, 8, 70)
    assert data["deadlocks"]["count"] == 3 and data["deadlocks"]["failed"] is True
    assert len(data["deadlocks"]["trace"]["steps"]) == 5
    hazard = data["properties"][0]
    assert (hazard["name"], hazard["verdict"], hazard["passed"]) == ("autoack_loses_messages", "found", True)
    steps = hazard["trace"]["steps"]
    assert steps[-1] == {"number": 3, "actor": "consumer", "action": "ConsumerCrash", "text": "consumer crashes",
                         "fused": False, "repeats": False, "harm": True, "frames": [],
                         "changes": [{"where": "locs[0]", "before": "2", "after": "6"},
                                     {"where": "crashes_left", "before": "1", "after": "0"}]}
    assert (hazard["trace"]["harm_step"], hazard["trace"]["harm"]) == (3, "autoack_loses_messages happens")
    assert steps[1]["frames"] == [{"from": "broker", "to": "consumer", "text": "broker -> consumer: basic.deliver m0"}]
    assert data["never_fired"] == ["BrokerPurge", "BrokerSettle", "ConsumerAck"]
    assert data["ok"] is False and data["collision_probability"] == 41**2 / 2**65


def test_json_goes_to_stdout_as_one_object_and_the_report_is_left_out(tmp_path, capsys):
    buffer = io.StringIO()
    code = main(["explore", "autoack", "--json", "--no-progress", *TOY], out=Console(file=buffer, width=80))
    data = json.loads(buffer.getvalue())
    assert code == 1 and data["schema"] == "rabbitproof.explore/1" and data["exit_code"] == 1
    assert data["properties"][0]["trace"]["harm_step"] == 3


def test_the_step_that_does_the_harm_is_marked_in_the_text(capsys):
    code, out, _ = run(["explore", "autoack"], capsys)
    assert "  3. [consumer] consumer crashes  <-- here autoack_loses_messages happens" in out


def test_a_state_cap_leaves_the_run_undecided_exit_3(capsys):
    code, out, _ = run(["explore", "manual", "--max-states", "20"], capsys)
    assert code == 3 and "more than 20 distinct states" in out
    assert out.rstrip().splitlines()[-1].startswith("explore: undecided: manual: the search stopped (more than 20")


def test_list_is_a_table_of_configurations_and_properties_is_the_long_form(capsys):
    code, out, _ = run(["list"], capsys)
    assert code == 0
    assert "autoack_lenient" in out and "* manual" in out and "autoack_loses_messages" not in out
    assert "| name " in out and "| states |" in out and "| depth |" in out and "what it exhibits" in out
    assert out.rstrip().splitlines()[-1] == "list: listed: 7 configurations, 5 properties (--properties lists them) (exit 0)"
    code, out, _ = run(["list", "--properties"], capsys)
    assert code == 0 and "autoack_loses_messages" in out


def test_list_json_is_one_object_with_the_schema(capsys):
    buffer = io.StringIO()
    assert main(["list", "--json"], out=Console(file=buffer, width=80)) == 0
    data = json.loads(buffer.getvalue())
    assert data["schema"] == "rabbitproof.list/1" and data["exit_code"] == 0
    spec = {c["name"]: c for c in data["configurations"]}
    pinned = json.loads((ROOT / "rabbitproof" / "explore" / "manifest.json").read_text())["configs"]
    assert spec["ack_basics"]["distinct_states"] == pinned["ack_basics"]["distinct_states"]
    assert spec["ack_basics"]["depth"] == pinned["ack_basics"]["depth"] and spec["ack_basics"]["standard"]
    assert {p["kind"] for p in data["properties"]} >= {"always", "hazard", "liveness"}


def test_a_checkpoint_directory_that_cannot_be_written_is_refused(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    code, out, err = run(["explore", "manual", "--engine", "spark", "--checkpoint", str(blocker / "ckpt")], capsys)
    assert code == 2 and out == ""
    assert err.startswith("rabbitproof explore: error: checkpoint directory ") and "cannot be written: Not a directory" in err


def test_a_checkpoint_url_is_refused_executors_write_into_the_directory_themselves(capsys):
    code, out, err = run(["explore", "manual", "--engine", "spark", "--checkpoint", "hdfs://namenode/run1"], capsys)
    assert code == 2 and out == ""
    assert err.startswith("rabbitproof explore: error: checkpoint directory 'hdfs://namenode/run1' must be a path every "
                          "executor sees")


def test_resume_needs_a_checkpoint_of_the_same_exploration(tmp_path, capsys):
    from rabbitproof.spark_check.assembly import SearchOutcome
    from rabbitproof.spark_check.checkpoint import LevelStore, identity
    from tests import toy_model as toy

    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run(["explore", "manual", "--engine", "spark", "--resume", str(empty)], capsys)
    assert code == 2 and "holds no checkpoint (progress.json is missing)" in err

    other = tmp_path / "other"
    other.mkdir()
    config = toy.get("manual").override({"messages": "3"})
    ident = identity(toy, config, [toy.REGISTRY[n] for n in config.properties], ())
    LevelStore(str(other)).write_progress(ident, 4, SearchOutcome(), [1, 2, 3, 4, 5], {}, 1.0)
    code, out, err = run(["explore", "manual", "--engine", "spark", "--resume", str(other)], capsys)
    assert code == 2 and out == ""
    assert "holds another exploration: bounds messages=3 (now 2)" in err
    code, _, err = run(["explore", "autoack", "--engine", "spark", "--resume", str(other)], capsys)
    assert code == 2 and "holds another exploration: config 'manual', not 'autoack'" in err


def test_the_progress_line_estimates_when_the_level_ends():
    display = ProgressDisplay(Console(file=io.StringIO()), "medium", True)
    assert display.level_estimate(5, 1000, 10.0) == ""                 # a level starts: nothing known yet
    assert display.level_estimate(5, 600, 12.0) == ", level 5 done in ~3 s"    # 400 done in 2 s, 600 left
    assert display.level_estimate(6, 5000, 13.0) == ""                 # the next level starts afresh
    assert display.level_estimate(6, 4000, 14.0) == ", level 6 done in ~4 s"
