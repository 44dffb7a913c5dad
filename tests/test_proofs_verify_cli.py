"""`rabbitproof verify`: bad names are one error line and exit code 2, before any work."""
from __future__ import annotations

import subprocess
import sys


def _run(*args):
    return subprocess.run([sys.executable, "-m", "rabbitproof", "verify", *args], capture_output=True, text=True, timeout=120)


def test_unknown_invariant_action_and_part_are_refused_with_exit_code_2():
    for args, word in ((["--invariant", "nope"], "unknown invariant 'nope'"),
                       (["--action", "BrokerFly"], "unknown action 'BrokerFly'"),
                       (["--part", "everything"], "unknown part 'everything'")):
        r = _run(*args)
        assert r.returncode == 2, r
        assert r.stdout == ""
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and word in lines[0]


def test_one_part_runs_and_prints_the_summary():
    r = _run("--part", "proofs", "--invariant", "confirm_and_tx_exclusive", "--action", "BrokerConfirm")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "make verify" in r.stdout and "proofs" in r.stdout and "verify: PASS" in r.stdout
