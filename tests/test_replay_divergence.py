"""A broker with a planted divergence (tests/fixtures/mutants.py, served with RABBITPROOF_IMPL): the replay
says "diverged", not "not reproduced": the trace checker rejects the real run (a requeued message handed
out again without its redelivered flag, RQ-2), the execution is shrunk to a shorter beginning that still
diverges, and `rabbitproof replay` exits 1."""
from __future__ import annotations

import json

from rabbitproof.brokers.impl_broker import ImplBroker
from rabbitproof.cli import main
from rabbitproof.substitute import IMPL_ENV

from tests.fixtures.mutants import ALL_MUTANTS, make_copy
from tests.test_replay import EXAMPLES, url
from rabbitproof.replay.steps import step_from_object


def test_a_planted_divergence_is_diverged_and_shrunk(tmp_path, monkeypatch, capsys):
    assert main(["check", str(EXAMPLES / "requeue-on-failure.toml"), "--json", "--no-advice"]) == 1
    saved = tmp_path / "answers.json"
    saved.write_text(capsys.readouterr().out)
    mutant = next(m for m in ALL_MUTANTS if m.name == "requeued_message_not_marked_redelivered")
    monkeypatch.setenv(IMPL_ENV, str(make_copy(mutant, tmp_path / "mutant") / "impl"))
    with ImplBroker(tmp_path / "data") as broker:
        code = main(["replay", str(saved), url(broker), "--json", "--tries", "3", "--recordings", str(tmp_path)])
    answers = {a["key"]: a for a in json.loads(capsys.readouterr().out)["answers"]}
    assert code == 1
    loop = answers["loop"]
    assert (loop["status"], loop["tries"]) == ("diverged", 1), loop["why"]
    assert loop["why"].startswith("rejected: connection c1") and "redelivered=True" in loop["why"]
    saved_steps = [step_from_object(s).text()
                   for s in next(a for a in json.loads(saved.read_text())["answers"] if a["key"] == "loop")["trace"]["steps"]]
    assert 0 < len(loop["shrunk_steps"]) and loop["shrunk_steps"] == saved_steps[:len(loop["shrunk_steps"])]
    assert main(["trace", loop["recordings"][0]]) == 1          # the recording shows it to `trace` too
