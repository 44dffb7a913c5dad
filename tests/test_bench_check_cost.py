"""``rabbitproof bench check-cost`` (rabbitproof/bench/check_cost.py): the exhaustive search of `check` timed in
a process started in the checkout it measures, both sides alternately; runs that disagree on a count fail it;
bad options refused."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rabbitproof import compiled
from rabbitproof.bench import check_cost
from rabbitproof.bench.check import SETUP

CAP = 300       # states: each search is cut there, the same way in every run


def copy_of_this_checkout(tmp_path: Path) -> Path:
    """The folders a checkout runs from, copied: another checkout of the same code."""
    other = tmp_path / "other"
    for name in ("rabbitproof", "spec", "model", "impl", "proofs", "spark_check"):
        shutil.copytree(compiled.ROOT / name, other / name, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copy(compiled.ROOT / "pyproject.toml", other)
    return other


def test_a_run_measures_the_checkout_it_is_started_in(tmp_path):
    setup = tmp_path / "benchmark.toml"
    setup.write_text(SETUP.format(messages=1))
    other = copy_of_this_checkout(tmp_path)
    here = check_cost.measure(compiled.ROOT, False, setup, CAP)
    there = check_cost.measure(other, False, setup, CAP)
    assert Path(here["package"]).is_relative_to(compiled.ROOT) and Path(there["package"]).is_relative_to(other)
    assert {k: here[k] for k in check_cost.AGREED} == {k: there[k] for k in check_cost.AGREED}
    assert 0 < here["states"] <= CAP and here["error"].startswith(f"more than {CAP} distinct states")
    assert here["us_per_state"] == here["seconds"] / here["states"] * 1e6


def test_a_side_that_does_not_run_what_it_was_asked_to_fails_the_benchmark(tmp_path):
    other = copy_of_this_checkout(tmp_path)         # no compiled build there: refused, not run pure
    setup = tmp_path / "benchmark.toml"
    setup.write_text(SETUP.format(messages=1))
    with pytest.raises(RuntimeError, match="RABBITPROOF_FAST is set, but there is no compiled spec"):
        check_cost.measure(other, True, setup, CAP)


def test_the_table_gives_both_sides_and_their_ratio(tmp_path, capsys):
    other = copy_of_this_checkout(tmp_path)
    assert check_cost.main(["--against", str(other), "--rounds", "1", "--max-states", str(CAP)]) == 0
    out = capsys.readouterr().out
    assert f"A: {other}, pure Python\n" in out and f"B: {compiled.ROOT}, pure Python\n" in out
    assert "B costs" in out and "of A a state" in out


@pytest.mark.parametrize("argv, message", [
    ([], "nothing to compare"),
    (["--fast", "--against-compiled"], "nothing to compare"),
    (["--against", "/"], "is not a checkout of rabbitproof"),
    (["--fast", "--rounds", "0"], "must be positive"),
    (["--fast", "--max-states", "0"], "must be positive"),
])
def test_bad_options_are_refused(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        check_cost.main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "rabbitproof bench check-cost" in err and message in err
