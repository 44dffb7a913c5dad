"""`rabbitproof verify`: bad names are one error line and exit code 2, before any work; parts run side
by side print as they would one after another."""
from __future__ import annotations

import argparse
import json
import io
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from rich.console import Console

from rabbitproof import verify
from rabbitproof.model import budgets


def _run(*args):
    return subprocess.run([sys.executable, "-m", "rabbitproof", "verify", *args], capture_output=True, text=True, timeout=120)


def test_unknown_invariant_action_and_part_are_refused_with_exit_code_2():
    for args, word in ((["--invariant", "nope"], "unknown invariant 'nope'"),
                       (["--action", "BrokerFly"], "unknown action 'BrokerFly'"),
                       (["--part", "everything"], "unknown part 'everything'"),
                       (["--part", "setups", "--random-setups", "-1"], "--random-setups must be 0 or more, not -1")):
        r = _run(*args)
        assert r.returncode == 2, r
        assert r.stdout == ""
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and word in lines[0]


def test_one_part_runs_and_prints_the_summary():
    r = _run("--part", "proofs", "--invariant", "confirm_and_tx_exclusive", "--action", "BrokerConfirm")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "make verify" in r.stdout and "proofs" in r.stdout and "verify: PASS" in r.stdout
    assert r.stdout.rstrip().splitlines()[-1] == "verify: nothing found: proofs PASS (exit 0)"


def test_json_is_one_object_with_each_part_s_counts():
    r = _run("--part", "proofs", "--invariant", "confirm_and_tx_exclusive", "--action", "BrokerConfirm", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads(r.stdout)
    assert (data["schema"], data["exit_code"], data["verdict"], data["interrupted"]) == (
        "rabbitproof.verify/1", 0, "nothing found", False)
    [part] = data["parts"]
    assert (part["part"], part["failed"], part["ok"]) == ("proofs", 0, True) and part["checks"] == part["passed"] > 0


def test_the_exit_code_says_failed_before_undecided():
    ok = verify.PartResult("proofs", 3, 3, 0, 0, 1.0)
    unknown = verify.PartResult("bmc", 3, 2, 0, 1, 1.0)
    failed = verify.PartResult("explore", 3, 2, 1, 0, 1.0)
    assert verify.exit_code([ok]) == 0 and verify.exit_code([ok, unknown]) == 3
    assert verify.exit_code([unknown, failed]) == 1


def _shape(text):
    """The output with its figures, the padding they set and the slowest obligation (which one is the
    slowest depends on the machine's load) taken out: which tables, rows and verdicts."""
    text = re.sub(r"\w+ [\d.]+ s\b", "#", text.split("verify: PASS in")[0])
    return re.sub(r"[\s━─┃│┏┓┗┛┡┩┣┫╇╈┳┻╋└┘┌┐]+", " ", re.sub(r"[\d.,]+", "#", text))


def test_parts_run_side_by_side_print_as_one_after_another_would():
    chosen = ["--part", "proofs", "--invariant", "confirm_and_tx_exclusive", "--action", "BrokerConfirm",
              "--part", "explore", "--config", "ack_basics"]
    alone, together = _run(*chosen, "--jobs", "1"), _run(*chosen, "--jobs", "2")
    for r in (alone, together):
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.index("inductive proofs") < r.stdout.index("ack_basics") < r.stdout.index("make verify")
    assert _shape(alone.stdout) == _shape(together.stdout)
    assert "2 parts at a time" in together.stdout and "at a time" not in alone.stdout


def test_a_bad_number_of_jobs_is_refused_before_any_work():
    r = _run("--part", "proofs", "--jobs", "0")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == "rabbitproof verify: error: --jobs must be 1 or more, not 0"


def test_a_part_that_raises_in_its_process_raises_in_verify():
    args = argparse.Namespace(hazard=["no_such_hazard"], invariant=["confirm_and_tx_exclusive"],
                              action=["BrokerConfirm"], config=[], update_manifest=False, engine="local",
                              master=None, reduce="written")
    console = Console(file=io.StringIO(), width=120)
    with pytest.raises(KeyError, match="no_such_hazard"):
        verify._run_in_processes(args, ["proofs", "bmc"], console, 2, False)
    assert "inductive proofs" in console.file.getvalue()      # the part before it printed all the same


def workers_cpu_seconds(group: int) -> list[float]:
    """The CPU seconds (user and system) each process of the process group ``group`` has used, its leader
    left out (Linux: /proc/PID/stat)."""
    used = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue                    # gone meanwhile
        fields = stat[stat.rindex(")") + 2:].split()     # from the state on: pgrp is [2], utime [11], stime [12]
        if int(fields[2]) == group and int(pid) != group:
            used.append((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"))
    return used


def test_ctrl_c_stops_every_part_and_says_so():
    proc = subprocess.Popen([sys.executable, "-m", "rabbitproof", "verify", "--part", "proofs", "--part", "bmc",
                             "--jobs", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    # Both parts under way in their processes: two workers that have each spent 2 CPU seconds (their
    # imports take under one), however loaded the machine; Ctrl-C never lands in a start-up.
    deadline = time.monotonic() + 300
    while sum(seconds >= 2.0 for seconds in workers_cpu_seconds(proc.pid)) < 2:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the two parts did not start in 300 s"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends the whole group
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 3, out + err         # undecided
    assert "verify: interrupted after" in out and "verify: PASS" not in out and err == ""
    deadline = time.monotonic() + 120           # no part left running (once the system has reaped them)
    while True:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline, "a part is still running after verify was interrupted"
        time.sleep(0.2)


def _args(*argv):
    parser = argparse.ArgumentParser()
    verify.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_an_obligation_left_unknown_is_neither_passed_nor_failed_and_verify_exits_3(monkeypatch):
    """With Z3's budget for an obligation at one unit (and its retry at one unit too) the solver decides
    nothing: the obligations are unknown, the part's verdict is UNKNOWN, not FAIL, and the exit code is
    3 (undecided); with the usual budget the same obligations are proved and it exits 0."""
    chosen = ("--part", "proofs", "--invariant", "confirm_and_tx_exclusive", "--action", "BrokerConfirm",
              "--jobs", "1", "--no-progress")
    out = io.StringIO()
    assert verify.run(_args(*chosen), Console(file=out, width=160)) == 0
    assert "verify: PASS" in out.getvalue()
    monkeypatch.setitem(budgets.BUDGETS, "inductive", 1)
    monkeypatch.setattr(budgets, "RETRY", 1)
    out = io.StringIO()
    assert verify.run(_args(*chosen), Console(file=out, width=160)) == 3
    text = out.getvalue()
    row = next(line for line in text.splitlines() if line.startswith("│ proofs"))
    assert re.search(r"│ proofs\s+│\s+2 │\s+0 │\s+0 │\s+2 │ .* │ UNKNOWN", row), row
    assert "verify: UNKNOWN" in text and "(2 unknown)" in text and "FAIL" not in text


def test_a_part_with_a_failure_fails_whatever_else_is_unknown():
    failed = verify.PartResult("bmc", 3, 1, 1, 1, 0.0)
    unknown = verify.PartResult("agreement", 3, 2, 0, 1, 0.0)
    clean = verify.PartResult("proofs", 3, 3, 0, 0, 0.0)
    assert [r.exit_code for r in (failed, unknown, clean)] == [1, 3, 0]
    assert [str(r.verdict) for r in (failed, unknown, clean)] == ["FAIL", "UNKNOWN", "PASS"]
