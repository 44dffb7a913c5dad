"""``rabbitproof bench check`` (rabbitproof/bench/check.py): the benchmark setup checked in a process of its
own, with its figures; bad options refused."""
from __future__ import annotations

import pytest

from rabbitproof.bench import check


def test_the_one_message_setup_is_answered_in_full_with_its_figures(capsys):
    answer = check.run_check(1, "local", 600)   # a limit any run meets, on any load (it takes seconds)
    assert answer["complete"] and answer["engine"] == "local"
    assert [a["answer"] for a in answer["answers"]] == ["cannot happen", "can happen", "cannot happen",
                                                        "cannot happen", "cannot happen"]
    assert answer["peak_mb"] > 10 and answer["wall"] > 0
    assert check.main(["--messages", "1", "--engine", "local", "--time-limit", "600"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"{answer['distinct_states']:,}" in out and "yes" in out


def test_a_run_stopped_by_its_time_limit_is_recorded_not_failed():
    # A limit no run can meet: the setup's "lost", "loop" and "waits" are argued in no time, but what is left
    # to a search (a smaller setup's or the whole one's) is stopped, whatever the machine's load.
    answer = check.run_check(2, "local", 1e-9)
    assert not answer["complete"] and answer["error"].startswith("time limit of 1e-09 s reached"), answer["error"]
    assert answer["exit_code"] in (1, 3) and answer["wall"] > 0


@pytest.mark.parametrize("argv", [["--time-limit", "0"], ["--messages", "0"], ["--engine", "cluster"]])
def test_bad_options_are_refused(argv, capsys):
    with pytest.raises(SystemExit) as stop:
        check.main(argv)
    assert stop.value.code == 2 and "rabbitproof bench check" in capsys.readouterr().err
