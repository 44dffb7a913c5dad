"""The one command: every subcommand answers --help, the package works installed (not editable) from
another directory, and `rabbitproof trace` judges a recording file."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rabbitproof import DESIGN_CARD
from rabbitproof import cli
from rabbitproof.recording import scenarios
from rabbitproof.recording.file import FORMAT, load, save

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", sorted(cli.SUBCOMMANDS))
def test_every_subcommand_answers_help(name, capsys):
    with pytest.raises(SystemExit) as done:
        cli.main([name, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: rabbitproof {name}") and cli.SUBCOMMANDS[name].summary.split()[0] in out


def test_an_unknown_subcommand_is_one_line_and_exit_code_2(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["explode"])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rabbitproof: error: ") and "'explode'" in err


def test_the_installed_package_runs_from_any_directory(tmp_path):
    """A non-editable install (no repository on the path) has every subcommand and the manifest, and puts
    nothing into site-packages under a generic name: the design card's folders are inside rabbitproof."""
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(ROOT)],
                   check=True, capture_output=True, timeout=300)
    top = {p.name for p in site.iterdir() if not p.name.endswith((".dist-info", ".egg-info")) and p.name != "bin"}
    assert top == {"rabbitproof"}, top
    assert all((site / "rabbitproof" / part / "__init__.py").is_file() for part in DESIGN_CARD)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}

    def rabbitproof(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "rabbitproof", *args], cwd=elsewhere, env=env,
                              capture_output=True, text=True, timeout=300)

    where = subprocess.run([sys.executable, "-c", "import rabbitproof.spec as s; print(s.__file__)"],
                           cwd=elsewhere, env=env, capture_output=True, text=True, check=True).stdout.split()
    assert all(path.startswith(str(site)) for path in where), where
    explored = rabbitproof("explore", "ack_basics", "--no-progress")
    assert explored.returncode == 0, explored.stderr
    assert "as pinned for ack_basics" in explored.stdout           # the manifest came with the package
    listed = rabbitproof("list", "--properties")
    assert listed.returncode == 0 and "confirms_exactly_once" in listed.stdout
    checked = rabbitproof("check", str(ROOT / "examples" / "work-queue.toml"), "--json", "--no-advice",
                          "--no-progress")
    assert checked.returncode in (0, 1) and json.loads(checked.stdout)["answers"], checked.stderr


def _record(broker, path: Path, queue: str) -> None:
    save(path, scenarios.ack_multiple_and_unknown_tag(broker, queue))


def test_trace_accepts_a_recording_of_our_broker_and_rejects_a_tampered_one(impl_broker_module, tmp_path, capsys):
    path = tmp_path / "run.json"
    _record(impl_broker_module, path, "trace_cli")
    assert cli.main(["trace", str(path)]) == 0
    assert capsys.readouterr().out.startswith("accepted: all ")
    data = json.loads(path.read_text())
    assert data["format"] == FORMAT
    # The broker's basic.ack tags rewritten: a delivery tag the spec never issued on that channel.
    entries = [e for slot in data["slots"] for log in slot for e in log]
    delivers = [e for e in entries if e.get("method") == "Basic.Deliver" or e.get("method") == "Basic.GetOk"]
    assert delivers
    delivers[0]["fields"]["delivery_tag"] = 77
    path.write_text(json.dumps(data))
    assert cli.main(["trace", str(path)]) == 1
    assert capsys.readouterr().out.startswith("rejected")


def test_a_recording_survives_a_round_trip_through_its_file(impl_broker_module, tmp_path):
    path = tmp_path / "run.json"
    slots = scenarios.ack_multiple_and_unknown_tag(impl_broker_module, "trace_round_trip")
    save(path, slots)
    again, existing = load(path)
    assert existing == {} and len(again) == len(slots) == 1
    flat = [e for log in slots[0] for e in log]
    read = [e for log in again[0] for e in log]
    assert [(e.direction, e.kind, e.channel, e.name, e.body) for e in read] == \
        [(e.direction, e.kind, e.channel, e.name, e.body) for e in flat]
    assert [dict(e.method) for e in read if e.method] == [dict(e.method) for e in flat if e.method]


@pytest.mark.parametrize("content, message", [
    ("not json", "not JSON"),
    ('{"format": "other"}', "not a recording"),
    ('{"format": "%s", "slots": []}' % FORMAT, "slots must be a non-empty list"),
    ('{"format": "%s", "slots": [[[{"direction": "sent", "at": 0, "method": "Basic.Fly"}]]]}' % FORMAT,
     "slot 0, connection 0, entry 0: unknown AMQP method 'Basic.Fly'"),
    ('{"format": "%s", "slots": [[[{"direction": "up", "at": 0}]]]}' % FORMAT, "direction must be"),
])
def test_a_bad_recording_file_is_one_line_and_exit_code_2(tmp_path, capsys, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    assert cli.main(["trace", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rabbitproof trace: error: ") and message in err


def test_a_trace_text_is_judged_under_the_configuration_named(tmp_path, capsys):
    path = tmp_path / "t.trace"
    path.write_text("c0 received basic.get-empty(ch=1)\n")
    assert cli.main(["trace", str(path)]) == 2
    assert "needs --config NAME" in capsys.readouterr().err
    assert cli.main(["trace", str(path), "--config", "ack_basics"]) == 1     # get-empty answers no basic.get
    assert capsys.readouterr().out.startswith("rejected")
    path.write_text("c0 sent basic.get(ch=1, queue=q0, no_ack=False)\n")
    assert cli.main(["trace", str(path), "--config", "ack_basics"]) == 0


@pytest.mark.parametrize("name, code, start", [
    ("requeue-and-ack.json", 0, "accepted: all 31 observations explained"),
    ("requeue-not-redelivered.json", 1, "rejected: connection c1, observation 11"),
])
def test_the_example_recordings_get_the_verdicts_the_how_to_shows(name, code, start, capsys):
    assert cli.main(["trace", str(ROOT / "examples" / "recordings" / name)]) == code
    assert capsys.readouterr().out.startswith(start)
