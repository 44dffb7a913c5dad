"""`rabbitproof bench`: a verdict line at the end of the report, `--json` as one document on stdout with
each part's tables as rows (the part's report on stderr), and the exit code of the worst part."""
from __future__ import annotations

import json
import os

import pytest
from rich.console import Console
from rich.table import Table

from rabbitproof.bench import command as bench
from rabbitproof.bench.document import table_json
from rabbitproof.cli import main
from tests.fixtures.command_line import run

SMALL = ["trace-checker", "--sizes", "10", "--seeds", "1", "--messages", "2"]


def test_the_report_ends_with_the_verdict_line(capsys):
    code = main(["bench", *SMALL])                 # the part's report and the verdict line, both on stdout
    out = capsys.readouterr().out
    assert code == 0 and "trace checker bench" in out
    assert out.splitlines()[-1] == "bench: nothing found: trace-checker met its checks (exit 0)"


def test_json_is_one_document_with_the_part_tables_as_rows(capsys):
    code, out, err = run(["bench", "--json", *SMALL], capsys)
    document = json.loads(out)
    assert code == 0 and (document["schema"], document["exit_code"], document["verdict"]) == (
        "rabbitproof.bench/1", 0, "nothing found")
    [part] = document["parts"]
    assert (part["part"], part["arguments"], part["exit_code"]) == ("trace-checker", SMALL[1:], 0)
    first = part["tables"][0]
    assert first["columns"] == ["asked", "seed", "obs", "verdict", "nodes", "seconds", "ms/obs"]
    [row] = first["rows"]
    assert (row["asked"], row["seed"], row["obs"], row["verdict"]) == (10, 1, 10, "accepted")
    assert "trace checker bench" in err          # the report itself went to stderr


def fake_parts(monkeypatch, codes: dict[str, int | type]) -> None:
    def part(name):
        def main(argv, console):
            (console or Console()).print(f"{name} ran")
            if not isinstance(codes[name], int):
                raise codes[name]()
            return codes[name]
        return main
    monkeypatch.setattr(bench, "PARTS", {name: (part(name), "a part") for name in codes})
    monkeypatch.setattr(bench, "EVERYTHING", tuple((name, ()) for name in codes))


def test_the_worst_part_decides_the_exit_code(monkeypatch, capsys):
    fake_parts(monkeypatch, {"engines": 0, "fuzz": 1, "replay": 3})
    code = main(["bench"])
    out = capsys.readouterr().out
    assert code == 1 and "fuzz ran" in out
    assert out.splitlines()[-1] == ("bench: found: engines met its checks; fuzz found a failure; replay undecided "
                                    "(exit 1)")


def test_json_keeps_stdout_for_the_document_whatever_a_part_prints(monkeypatch, capfd):
    def noisy(argv, console):
        print("a stray print")
        os.write(1, b"a child process writing to its standard output\n")
        return 0
    monkeypatch.setattr(bench, "PARTS", {"engines": (noisy, "a part")})
    code = main(["bench", "--json", "engines"])
    out, err = capfd.readouterr()
    assert code == 0 and json.loads(out)["parts"][0]["part"] == "engines"
    assert "a stray print" in err and "a child process writing to its standard output" in err


def test_an_interrupted_run_is_undecided_and_keeps_the_parts_done(monkeypatch, capsys):
    fake_parts(monkeypatch, {"engines": 0, "fuzz": KeyboardInterrupt, "replay": 0})
    code, out, _ = run(["bench", "--json"], capsys)
    document = json.loads(out)
    assert code == 3 and document["interrupted"] and [p["part"] for p in document["parts"]] == ["engines"]


@pytest.mark.parametrize("argv, message", [
    (["bench", "--json", "fuzz", "--json"], "rabbitproof bench: error: --json once: before PART"),
    (["bench", "trace-checker", "--sizes", "x"], "--sizes must be whole numbers"),
])
def test_bad_input_is_one_line_and_no_document(argv, message, capsys):
    code, out, err = run(argv, capsys)
    assert code == 2 and out == "" and message in err and len(err.strip().splitlines()) == 1


def test_a_table_cell_is_a_number_when_it_is_a_figure():
    table = Table(title="[bold]rates[/]")
    for column in ("target", "msg/s", "ratio", "verdict"):
        table.add_column(column)
    table.add_row("impl", "12,345", "1.8x", "[green]accepted[/]")
    table.add_row("rabbitmq", "0.25", "-", "-3")
    assert table_json(table) == {"title": "rates", "columns": ["target", "msg/s", "ratio", "verdict"], "rows": [
        {"target": "impl", "msg/s": 12345, "ratio": "1.8x", "verdict": "accepted"},
        {"target": "rabbitmq", "msg/s": 0.25, "ratio": "-", "verdict": -3}]}
