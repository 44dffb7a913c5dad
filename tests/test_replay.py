"""`rabbitproof replay` and `check --replay` against our own broker: the examples' "can happen" answers
acted out with real faults (a cut connection, a vanished client, a crash), reproduced and accepted by the
spec; what cannot be replayed says why; bad input is refused before any work (exit 2)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rabbitproof.check.answers import DEFAULT_REDUCTIONS, check_setup
from rabbitproof.check.setup_file import read_setup
from rabbitproof.cli import main
from rabbitproof.exits import schema
from rabbitproof.options import build_engine
from rabbitproof.recording import observations
from rabbitproof.recording.file import load
from rabbitproof.replay.attempt import Where
from rabbitproof.replay.observed import AT_ACK, Observed
from rabbitproof.replay.plan import SEND, make_plan
from rabbitproof.replay.report import exit_code
from rabbitproof.replay.saved import from_checked
from rabbitproof.replay.steps import parse_step
from rabbitproof.replay.tries import Execution, Target, replay_answer

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def executions(example: str) -> tuple:
    setup = read_setup(str(EXAMPLES / f"{example}.toml"))
    engine = build_engine("local", reductions=DEFAULT_REDUCTIONS)
    try:
        checked = check_setup(setup, engine)
    finally:
        engine.close()
    return setup, {e.key: e for e in from_checked(checked)}


def target(broker, tmp_path: Path, crash: bool = False, tries: int = 8) -> Target:
    """Up to 8 tries: a real broker's interleaving may take a few on a loaded machine (a try that
    reproduces ends the replay, so a quiet machine pays nothing for them)."""
    return Target(Where(broker.host, broker.port, broker.user, broker.password), broker if crash else None,
                  tries=tries, step_timeout=8.0, directory=tmp_path)


def assert_reproduced(replayed, shows: str) -> None:
    assert replayed.status == "reproduced", (replayed.why, replayed.ways)
    assert shows in replayed.why
    slots, existing = load(replayed.recordings[-1])
    assert observations.check_recording(slots, existing, judge_texts=False).ok


def test_a_step_is_read_back_from_its_text():
    step = parse_step("7. [client c0.ch1] publish to exchange '' key q0 persistent | frames: c0 client->broker "
                      "basic.publish(ch=1, exchange='', routing_key='q0', mandatory=False, persistent=True, msg=m0.1)")
    assert (step.number, step.client, step.frames[0].method) == (7, (0, 1), "basic.publish")
    assert dict(step.frames[0].fields) == {"ch": 1, "exchange": "", "routing_key": "q0", "mandatory": False,
                                           "persistent": True, "msg": "m0.1"}


def test_an_ack_the_broker_never_takes_before_the_client_vanishes_is_lost_on_the_way():
    setup, found = executions("vanishing-consumer")
    plan = make_plan(found["twice"].steps, 2)
    dropped = [a for a in plan.acts if a.kind == SEND and a.dropped]
    assert [(a.conn, a.frame.method) for a in dropped] == [(1, "basic.ack")]
    assert plan.heartbeats == {1}


def test_a_channel_error_is_made_before_the_frames_it_discards():
    setup, found = executions("channel-error")
    acts = [(a.kind, a.frame.method if a.frame else "") for a in make_plan(found["twice"].steps, 2).acts]
    error = acts.index(("channel error", ""))
    assert acts[error + 1] == ("send", "basic.ack")     # the ack the execution's broker discards comes after


@pytest.mark.parametrize("example, key, shows", [
    ("auto-ack", "lost", "never processed, not in its queue"),
    ("vanishing-consumer", "twice", "processed 2 times"),
    ("vanishing-consumer", "order", "received m0.1 after m0.2"),
    ("requeue-on-failure", "order", "received m0.1 after m0.2"),
    ("requeue-on-failure", "loop", "handed out 4 times, never processed"),
    ("work-before-ack", "twice", "processed 2 times"),
    ("channel-error", "twice", "processed 2 times"),
    ("republishing-publisher", "order", "received m0.1 after m0.2"),
])
def test_the_examples_answers_are_reproduced_on_our_broker(example, key, shows, impl_broker_module, tmp_path):
    setup, found = executions(example)
    replayed = replay_answer(found[key], setup, target(impl_broker_module, tmp_path), example)
    assert_reproduced(replayed, shows)


@pytest.mark.parametrize("key, shows", [("lost", "never processed, not in its queue"), ("twice", "processed 2 times")])
def test_a_crash_is_made_for_real_on_our_broker(key, shows, impl_broker, tmp_path):
    setup, found = executions("fire-and-forget")
    replayed = replay_answer(found[key], setup, target(impl_broker, tmp_path, crash=True, tries=8), "fire-and-forget")
    assert_reproduced(replayed, shows)


def test_a_crash_without_kill_and_start_commands_cannot_be_replayed(tmp_path):
    setup, found = executions("fire-and-forget")
    replayed = replay_answer(found["lost"], setup, Target(Where("127.0.0.1", 1), None, directory=tmp_path), "x")
    assert (replayed.status, replayed.tries) == ("cannot be replayed", 0)
    assert "--kill-cmd and --start-cmd" in replayed.why


def test_a_queue_refusing_one_publish_cannot_be_replayed(tmp_path):
    setup = read_setup(str(EXAMPLES / "auto-ack.toml"))
    steps = (parse_step("1. [client c0.ch1] publish to exchange '' key q0 persistent | frames: c0 client->broker "
                        "basic.publish(ch=1, exchange='', routing_key='q0', mandatory=False, persistent=True, msg=m0.1)"),
             parse_step("2. [broker] queue fails to take c0.ch1 seq 1"))
    replayed = replay_answer(Execution("lost", "q", steps), setup, Target(Where("127.0.0.1", 1), directory=tmp_path),
                             "x")
    assert replayed.status == "cannot be replayed"
    assert replayed.why.startswith("step 2 (queue fails to take c0.ch1 seq 1): a queue refusing one publish")


def url(broker) -> str:
    return f"amqp://{broker.user}:{broker.password}@{broker.host}:{broker.port}/"


def test_replay_reads_a_saved_check_and_prints_json(impl_broker_module, tmp_path, capsys):
    assert main(["check", str(EXAMPLES / "auto-ack.toml"), "--json", "--no-advice"]) == 1
    saved = tmp_path / "answers.json"
    saved.write_text(capsys.readouterr().out)
    code = main(["replay", str(saved), url(impl_broker_module), "--json", "--recordings", str(tmp_path / "r")])
    document = json.loads(capsys.readouterr().out)
    assert code == 0
    assert (document["schema"], document["exit_code"], document["verdict"]) == (schema("replay"), 0, "nothing found")
    [answer] = document["answers"]
    assert (answer["key"], answer["status"], answer["tries"]) == ("lost", "reproduced", 1)
    assert Path(answer["recordings"][0]).is_file()
    chart = Path(answer["chart"]).read_text()
    assert "shown on the real run: m0.1: believed delivered" in chart and "(the harm)" in chart
    assert "c1: consumer &#x27;mailer&#x27;" in chart
    assert main(["trace", answer["recordings"][0]]) == 0


def test_replay_report_ends_with_its_verdict_line(impl_broker_module, tmp_path, capsys):
    assert main(["check", str(EXAMPLES / "auto-ack.toml"), "--json", "--no-advice"]) == 1
    saved = tmp_path / "answers.json"
    saved.write_text(capsys.readouterr().out)
    code = main(["replay", str(saved), url(impl_broker_module), "--recordings", str(tmp_path / "r")])
    last = capsys.readouterr().out.splitlines()[-1]
    assert code == 0
    assert last == "replay: nothing found: 1 reproduced, 0 not reproduced, 0 diverged, 0 cannot be replayed (exit 0)"


def test_check_replays_its_answers_with_the_replay_option(impl_broker_module, tmp_path, capsys):
    code = main(["check", str(EXAMPLES / "requeue-on-failure.toml"), "--no-advice", "--replay",
                 url(impl_broker_module), "--recordings", str(tmp_path)])
    text = capsys.readouterr().out
    assert code == 1                # check's own exit code: answers that can happen
    assert "Can a consumer see messages out of publication order? reproduced (1 try" in text
    assert "Can a message stay in the queue for ever (a requeue loop)? reproduced (1 try" in text


@pytest.mark.parametrize("extra, message", [
    (["--tries", "0"], "--tries must be at least 1"),
    (["--step-timeout", "0"], "--step-timeout must be a positive number"),
    (["--kill-cmd", "true"], "--kill-cmd and --start-cmd go together"),
])
def test_bad_options_are_refused_before_any_work(extra, message, tmp_path, capsys):
    saved = tmp_path / "answers.json"
    saved.write_text(json.dumps({"schema": schema("check"), "setup": str(EXAMPLES / "auto-ack.toml"), "answers": []}))
    assert main(["replay", str(saved), "amqp://127.0.0.1:1/", *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_a_file_that_is_not_checks_output_and_an_unreachable_broker_are_refused(tmp_path, capsys):
    saved = tmp_path / "answers.json"
    saved.write_text("{}")
    assert main(["replay", str(saved), "amqp://127.0.0.1:1/"]) == 2
    assert "not the output of `rabbitproof check --json`" in capsys.readouterr().err
    saved.write_text(json.dumps({"schema": schema("check"), "setup": str(EXAMPLES / "auto-ack.toml"), "answers": []}))
    assert main(["replay", str(saved), "amqp://127.0.0.1:1/"]) == 2
    assert "cannot reach 127.0.0.1:1" in capsys.readouterr().err
    assert main(["check", str(EXAMPLES / "auto-ack.toml"), "--replay", "http://x/"]) == 2
    assert "the scheme must be amqp://" in capsys.readouterr().err
    assert main(["check", str(EXAMPLES / "auto-ack.toml"), "--tries", "3"]) == 2
    assert "--tries is an option of the replay: give --replay URL too" in capsys.readouterr().err


def test_what_the_applications_believe_and_do_decides_whether_the_event_shows():
    channel = (0, 0, 1)
    seen = Observed({1: AT_ACK})
    seen.select(channel, "confirm")
    seen.publish(channel, "m0.1")
    seen.publish(channel, "m0.2")
    seen.confirmed(channel, 1, False, True)
    seen.open_channels.add(channel)
    assert seen.shows("waits") == (True, "c0.ch1: m0.2 never answered")
    assert seen.shows("lost") == (True, "m0.1: believed delivered by its publisher, never processed, not in its queue")
    seen.left.add("m0.1")
    assert seen.shows("lost")[0] is False
    seen.publish(channel, "m0.3", again="m0.2")       # m0.2 published again: its copy counts as m0.2
    seen.receive((1, 0, 1), "m0.3", 7)
    seen.settle((1, 0, 1), 7, False, True)
    assert seen.processed["m0.2"] == 1 and seen.shows("twice")[0] is False


def test_a_step_the_broker_never_takes_is_not_reproduced_and_says_where(impl_broker_module, tmp_path):
    setup = read_setup(str(EXAMPLES / "auto-ack.toml"))
    steps = (parse_step("1. [client c1.ch1] consume q0 as ctag 1 (automatic ack) | frames: c1 client->broker "
                        "basic.consume(ch=1, queue=q0, consumer_tag=1, no_ack=True)"),
             parse_step("2. [client c1.ch1] receive the next frame of channel 1 | frames: c1 broker->client "
                        "basic.consume-ok(ch=1, consumer_tag=1)"),
             parse_step("3. [client c1.ch1] receive the next frame of channel 1 | frames: c1 broker->client "
                        "basic.deliver(ch=1, consumer_tag=1, delivery_tag=1, redelivered=False, msg=m0.1)"))
    # The steps before the last must come within the step timeout: 2 s, for a loaded machine.
    quick = Target(Where(impl_broker_module.host, impl_broker_module.port), tries=2, step_timeout=2.0,
                   directory=tmp_path)
    replayed = replay_answer(Execution("lost", "q", steps), setup, quick, "x")
    assert (replayed.status, replayed.tries, len(replayed.recordings)) == ("not reproduced", 2, 2)
    assert replayed.ways == [f"try {n}: step 3: c1.ch1 waited 2 s for basic.deliver(ch=1, consumer_tag=1, "
                             "delivery_tag=1, redelivered=False, msg=m0.1); it did not come" for n in (1, 2)]
    assert exit_code([replayed]) == 3


def test_check_json_carries_the_replay(impl_broker_module, tmp_path, capsys):
    assert main(["check", str(EXAMPLES / "auto-ack.toml"), "--json", "--no-advice", "--replay",
                 url(impl_broker_module), "--recordings", str(tmp_path)]) == 1
    document = json.loads(capsys.readouterr().out)
    assert [a["answer"] for a in document["answers"]][0] == "can happen"
    assert document["replay"]["schema"] == schema("replay")
    assert [(a["key"], a["status"]) for a in document["replay"]["answers"]] == [("lost", "reproduced")]
