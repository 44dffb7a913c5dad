"""`rabbitproof bench replay` on two fast examples against our broker only (the whole part, every example on
both brokers, is `make bench`'s): the answers are reproduced, a broker crash made for real; the table gives
each answer's status and why; a divergence makes the exit code 1; bad input is refused before any work."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from rabbitproof.bench import replay as bench_replay
from rabbitproof.cli import main as cli_main
from rabbitproof.exits import BAD_INPUT, FOUND, NOTHING_FOUND, schema
from rabbitproof.recording import observations
from rabbitproof.recording.file import load
from rabbitproof.replay.outcome import Replayed


def test_two_examples_are_replayed_on_our_broker_with_a_real_crash(tmp_path, capsys):
    code = bench_replay.main(["--brokers", "impl", "--examples", "auto-ack,fire-and-forget", "--tries", "5",
                              "--recordings", str(tmp_path), "--json"])
    document = json.loads(capsys.readouterr().out)
    assert code == NOTHING_FOUND
    assert document["schema"] == schema("bench.replay")
    assert document["brokers"] == ["impl"] and set(document["seconds"]) == {"impl"}
    assert [e["example"] for e in document["examples"]] == ["auto-ack", "fire-and-forget"]
    replays = {(e["example"], r["key"]): r for e in document["examples"] for r in e["replays"]["impl"]}
    assert set(replays) == {("auto-ack", "lost"), ("fire-and-forget", "lost"), ("fire-and-forget", "twice")}
    for (example, key), r in replays.items():
        assert r["status"] == "reproduced", (example, key, r["why"], r["went_another_way"])
        assert 1 <= r["tries"] <= 5
        slots, existing = load(r["recordings"][-1])
        assert Path(r["recordings"][-1]).parent == tmp_path / "impl"
        assert observations.check_recording(slots, existing, judge_texts=False).ok
    assert "processed 2 times" in replays[("fire-and-forget", "twice")]["why"]      # lost to a real crash


def row(example: str, key: str, status: str, why: str, tries: int = 1) -> bench_replay.Row:
    return bench_replay.Row(example, "impl", Replayed(key, f"the {key} question?", status, tries=tries, why=why,
                                                      seconds=0.5 * tries))


def test_the_table_gives_each_status_with_its_reason():
    console = Console(width=200, record=True)
    console.print(bench_replay.table([
        row("auto-ack", "lost", "reproduced", "m0.1: never processed"),
        row("two-workers", "order", "not reproduced", "step 9: c2 received m0.2 instead", tries=10),
        row("dead-letter", "lost", "cannot be replayed", "a queue dead-letters to another", tries=0),
    ], tries=10))
    text = console.export_text()
    assert "up to 10 tries each" in text
    lines = {line.split("│")[1].strip(): line for line in text.splitlines() if line.count("│") > 6}
    assert "reproduced" in lines["auto-ack"] and "m0.1: never processed" in lines["auto-ack"]
    assert "not reproduced" in lines["two-workers"] and "│    10 │" in lines["two-workers"]
    assert "cannot be replayed" in lines["dead-letter"] and "dead-letters" in lines["dead-letter"]


def test_a_divergence_makes_the_exit_code_1(monkeypatch, tmp_path, capsys):
    example = bench_replay.Example("auto-ack", None, (), 0.0)
    monkeypatch.setattr(bench_replay, "checked", lambda name: example)
    monkeypatch.setattr(bench_replay, "replay_on", lambda *args: [
        row("auto-ack", "lost", "reproduced", "m0.1: never processed"),
        row("auto-ack", "twice", "diverged", "rejected at step 4")])
    assert bench_replay.main(["--brokers", "impl", "--examples", "auto-ack", "--recordings", str(tmp_path)]) == FOUND
    assert "1 reproduced, 0 not reproduced, 1 diverged" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--examples", "auto-ack,no-such-example"], "'no-such-example' is not an example of examples/"),
    (["--brokers", "activemq"], "'activemq' is not a broker; choose from impl, rabbitmq"),
    (["--tries", "0"], "--tries: 0 is out of range (1 or more)"),
    (["--step-timeout", "-1"], "--step-timeout: -1 is out of range (more than 0 seconds)"),
])
def test_bad_options_are_refused_before_any_work(argv, message, capsys):
    with pytest.raises(SystemExit) as stopped:
        cli_main(["bench", "replay", *argv])
    assert stopped.value.code == BAD_INPUT
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_a_recordings_folder_that_cannot_be_written_is_refused(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code = bench_replay.main(["--brokers", "impl", "--examples", "auto-ack", "--recordings", str(blocker / "sub")])
    assert code == BAD_INPUT
    assert capsys.readouterr().err.startswith(f"rabbitproof bench replay: error: --recordings {blocker / 'sub'}: ")
