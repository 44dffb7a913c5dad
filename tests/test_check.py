"""`rabbitproof check` (rabbitproof.check.answers, .questions, .whatif, .check_cli): the examples' answers and
what-if results are pinned, the observer records what the applications believe, each question can fail
(a machine with a planted fault makes it), and the command line keeps its exit codes and bad-input errors."""
from __future__ import annotations

import io
import json
import signal
import subprocess
import tomllib
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.console import Console

from rabbitproof.spark_check.engine import LocalEngine
from rabbitproof.spec import actions as A

from rabbitproof.check.answers import applies, check_setup, machine_for, names
from rabbitproof.check.questions import LIVENESS, NOTHING_YET, QUESTIONS, SetupMachine, Watched, believed_never_lost
from rabbitproof.check.setup_file import KEYS, SetupError, parse_setup, read_setup
from rabbitproof.check.setup_model import to_config
from rabbitproof.check.whatif import single_changes, try_changes
from rabbitproof.cli import main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
CAN, CANNOT = "can happen", "cannot happen"

# Each example's answers, in question order: lost, twice, order, loop, waits.
EXPECTED = {
    "work-queue": (CANNOT, CAN, CANNOT, CANNOT, CANNOT),
    "fire-and-forget": (CAN, CAN, CANNOT, CANNOT, CANNOT),
    "auto-ack": (CAN, CANNOT, CANNOT, CANNOT, CANNOT),
    "transactional": (CANNOT, CAN, CANNOT, CANNOT, CANNOT),
    "confirms-crash": (CANNOT, CAN, CANNOT, CANNOT, CANNOT),
    "requeue-on-failure": (CANNOT, CANNOT, CAN, CAN, CANNOT),
    "reply-queue": (CAN, CANNOT, CANNOT, CANNOT, CANNOT),
    "safe-pipeline": (CANNOT, CANNOT, CANNOT, CANNOT, CANNOT),
    "two-workers": (CANNOT, CAN, CAN, CANNOT, CANNOT),
    "batch-acks": (CANNOT, CANNOT, CANNOT, CANNOT, CANNOT),
    "dead-letter": (CANNOT, CANNOT, CANNOT, CANNOT, CANNOT),
    "idempotent-worker": (CANNOT, CAN, CANNOT, CANNOT, CANNOT),
    "polling-worker": (CANNOT, CAN, CANNOT, CANNOT, CANNOT),
    "work-before-ack": (CANNOT, CAN, CANNOT, CANNOT, CANNOT),
    # A socket closed is noticed at once; a host that vanishes, late (RQ-3): only then out of order.
    "reconnecting-consumer": (CANNOT, CAN, CANNOT, CANNOT, CANNOT),
    "vanishing-consumer": (CANNOT, CAN, CAN, CANNOT, CANNOT),
    "flaky-hosts": (CANNOT, CAN, CAN, CANNOT, CANNOT),
    # The broker's channel error ignores the acks on their way (ER-1); batch-acks' own close does not.
    "channel-error": (CANNOT, CAN, CANNOT, CANNOT, CANNOT),
    # A confirm lost with the connection: the message is published again, a duplicate, after the later one.
    "republishing-publisher": (CANNOT, CAN, CAN, CANNOT, CANNOT),
}


def checked(name: str):
    """An example checked as `rabbitproof check` does it: with the symmetry reduction (it changes no answer:
    tests/test_reductions_symmetry.py)."""
    return check_setup(read_setup(EXAMPLES / f"{name}.toml"), LocalEngine(reductions=("symmetry",)))


def test_every_example_is_pinned():
    assert sorted(p.stem for p in EXAMPLES.glob("*.toml")) == sorted(EXPECTED)


def test_the_examples_use_every_key_of_the_setup_file():
    used = set()
    for path in EXAMPLES.glob("*.toml"):
        data = tomllib.loads(path.read_text())
        used |= {("queues.NAME", key) for queue in data.get("queues", {}).values() for key in queue}
        used |= {(kind, key) for kind in ("publishers", "consumers") for table in data.get(kind, []) for key in table}
        used |= {("faults", key) for key in data.get("faults", {})}
    assert [(k.table, k.name) for k in KEYS if (k.table, k.name) not in used] == []


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_answers(name):
    result = checked(name)
    assert result.result.complete and result.result.error is None
    assert tuple(a.verdict for a in result.answers) == EXPECTED[name]
    for question, a in zip(QUESTIONS, result.answers):
        assert (a.trace is not None) == (a.happens is True)     # every "can happen" shows how
        mine = tuple(r for r in question.rules if applies(r, result.setup))
        assert a.rules[:len(mine)] == mine and all(applies(r, result.setup) for r in a.rules)
        if a.trace is not None:
            assert a.trace.steps


def test_what_if_advice_is_explored_not_looked_up():
    """Confirms save the fire-and-forget publisher's messages; manual acks save the auto-ack consumer's
    and bring duplicates; a dead-letter queue ends the requeue loop, and it or prefetch 1 keeps the
    order; declaring the reply queue up
    front, or mandatory, saves the RPC reply."""
    def outcomes(name):
        return {t.change.key: (t.fixes, t.breaks) for t in try_changes(checked(name), LocalEngine())}

    assert outcomes("fire-and-forget")["confirms"] == (("lost",), ())
    assert outcomes("fire-and-forget")["mandatory"] == ((), ())
    assert outcomes("auto-ack")["manual-acks"] == (("lost",), ("twice",))
    requeue = outcomes("requeue-on-failure")
    assert requeue["dead-letter"] == (("order", "loop"), ()) and requeue["prefetch-1"] == (("order",), ())
    reply = outcomes("reply-queue")
    assert reply["declared"] == (("lost",), ()) and reply["mandatory"] == (("lost",), ())
    assert try_changes(checked("safe-pipeline"), LocalEngine()) == ()     # nothing fails, nothing to try


def test_dead_letter_change_adds_a_queue_where_there_is_none():
    setup = read_setup(EXAMPLES / "requeue-on-failure.toml")
    change = next(c for c in single_changes(setup) if c.key == "dead-letter")
    assert [(q.name, q.dead_letter, q.durable) for q in change.setup.queues] == [
        ("tasks", "tasks.dead", True), ("tasks.dead", "", True)]
    assert change.setup.consumers[0].on_failure == "nack-drop"


# --- the observer ---------------------------------------------------------------------------------

def walk(setup_text: str, pick) -> Watched:
    """Run the observed machine from its initial state, taking at each step the first enabled action
    that ``pick`` accepts, until none does."""
    setup = parse_setup(setup_text, "t.toml")
    machine, config = machine_for(setup, beliefs=True), to_config(setup)       # the observer in full
    (state,) = machine.initial_states(config)
    while True:
        action = next((a for a in machine.enabled(state, config) if pick(a, state)), None)
        if action is None:
            return state
        state = machine.step(state, action)[0]


PUBLISHER = """
[queues.q]
durable = true
[[publishers]]
queue = "q"
confirms = {confirms}
persistent = true
messages = 1
"""
CRASH = "[faults]\nbroker_crash = true\n"


def publisher_only(a, state) -> bool:
    return type(a) in (A.ClientConfirmSelect, A.ClientPublish, A.BrokerTakeFrame, A.ClientReceive,
                       A.DiskFsync, A.BrokerConfirm)


def test_a_fire_and_forget_publisher_believes_at_once_a_confirming_one_at_the_ack():
    plain = walk(PUBLISHER.format(confirms="false"), lambda a, s: type(a) is A.ClientPublish)
    assert plain.ghost.believed and not plain.ghost.awaiting
    before_ack = walk(PUBLISHER.format(confirms="true"),
                      lambda a, s: publisher_only(a, s) and type(a) is not A.BrokerConfirm)
    assert before_ack.ghost.awaiting and not before_ack.ghost.believed
    confirmed = walk(PUBLISHER.format(confirms="true"), publisher_only)
    assert confirmed.ghost.believed == (confirmed.ghost.believed[0],) and not confirmed.ghost.awaiting


def test_a_confirming_publisher_publishes_only_after_confirm_select():
    setup = parse_setup(PUBLISHER.format(confirms="true"), "t.toml")
    machine, config = machine_for(setup), to_config(setup)
    (state,) = machine.initial_states(config)
    kinds = {type(a) for a in machine.enabled(state, config)}
    assert A.ClientConfirmSelect in kinds and A.ClientPublish not in kinds


def test_a_believed_message_gone_unprocessed_is_lost():
    plain = walk(PUBLISHER.format(confirms="false"), lambda a, s: type(a) is A.ClientPublish)
    assert believed_never_lost(plain)                       # still on the wire to the broker
    crashed = plain.spec._replace(conns=tuple(c._replace(to_broker=tuple(() for _ in c.to_broker))
                                              for c in plain.spec.conns))
    assert not believed_never_lost(Watched(crashed, plain.ghost))
    assert believed_never_lost(Watched(crashed, NOTHING_YET))


def answers_of(text: str) -> dict[str, str]:
    """The answers to a setup written in the test, as `rabbitproof check` gives them."""
    result = check_setup(parse_setup(text), LocalEngine(reductions=("symmetry",)))
    return {a.key: a.verdict for a in result.answers}


TX_TWO = """
[queues.ledger]
durable = true
[[publishers]]
name = "bookkeeper"
queue = "ledger"
transactions = true
persistent = true
messages = 2
[[consumers]]
name = "auditor"
queue = "ledger"
[faults]
broker_crash = true
"""


def test_an_answer_cites_only_the_rules_that_apply_to_the_setup():
    """No transaction rule where nothing is transactional, no confirm rule without confirms (the crash
    step of a trace cites TX-8 and TX-9, which bear on transactions only)."""
    result = check_setup(read_setup(EXAMPLES / "confirms-crash.toml"), LocalEngine(reductions=("symmetry",)))
    rules = {r for a in result.answers for r in a.rules}
    assert not any(r.startswith("TX-") for r in rules) and "PC-10" in rules and "DU-3" in rules
    fire = check_setup(read_setup(EXAMPLES / "fire-and-forget.toml"), LocalEngine(reductions=("symmetry",)))
    assert not any(r.startswith(("PC-", "TX-")) for a in fire.answers for r in a.rules)


def test_processing_twice_is_harmless_where_every_consumer_is_idempotent():
    result = checked("idempotent-worker")
    twice = next(a for a in result.answers if a.key == "twice")
    assert twice.happens and twice.trace is not None and "idempotent" in twice.harmless
    assert result.failing == ()                     # nothing fails: exit code 0
    plain = checked("work-queue")                   # the same setup, the worker not idempotent
    assert plain.failing == ("twice",) and not next(a for a in plain.answers if a.key == "twice").harmless


def test_a_polling_consumer_gets_one_message_at_a_time_DS_2():
    result = checked("polling-worker")
    config, fired = result.config, result.result.coverage
    assert config.gets and fired.get("ClientGet") and not fired.get("ClientConsume")
    twice = next(a for a in result.answers if a.key == "twice")
    steps = [s.action for s in twice.trace.steps]
    assert any(s.startswith("get from q0") for s in steps)
    with pytest.raises(SetupError, match="prefetch does not limit"):
        parse_setup((EXAMPLES / "polling-worker.toml").read_text().replace("polls = true", "polls = true\nprefetch = 1"))


def test_work_done_before_the_ack_can_be_done_twice_RQ_4():
    """A channel that closes between the work and the ack: the message is requeued and worked on again;
    with the work and the ack as one step there is no such window."""
    text = (EXAMPLES / "work-before-ack.toml").read_text()
    assert answers_of(text)["twice"] == CAN
    assert answers_of(text.replace('work = "before-ack"', 'work = "at-ack"'))["twice"] == CANNOT
    twice = next(a for a in checked("work-before-ack").answers if a.key == "twice")
    steps = [s.action for s in twice.trace.steps]
    work = steps.index("do the work of delivery tag 1 (not yet acknowledged)")
    assert "close channel" in steps[work:]
    with pytest.raises(SetupError, match="no ack to work before"):
        parse_setup(text.replace('acks = "manual"', 'acks = "automatic"'))


def test_a_commit_ok_answers_its_own_commit_TX_7():
    """The publisher sends its second publish and commit before reading the first commit-ok: that
    commit-ok makes only the first message believed delivered, so a crash before the second commit is
    done loses nothing the publisher believes delivered (the observer once credited it to both)."""
    assert answers_of(TX_TWO)["lost"] == CANNOT


def test_a_return_on_its_way_keeps_its_message_live_RT_3():
    """A mandatory publish (no confirms) to an exclusive queue its consumer has not declared yet: the
    message comes back with basic.return; while the return is on its way the message is not lost (the
    publisher will know), and once it arrives the publisher no longer believes it delivered."""
    text = """
[queues.replies]
exclusive = true
[[publishers]]
name = "server"
queue = "replies"
mandatory = true
[[consumers]]
name = "client"
queue = "replies"
"""
    assert answers_of(text)["lost"] == CANNOT
    assert answers_of(text.replace("mandatory = true", "mandatory = false"))["lost"] == CAN   # dropped unroutable


@dataclass(frozen=True)
class NeverConfirms(SetupMachine):
    """A planted bug: the broker never sends a confirm."""

    def enabled(self, watched, config):
        return tuple(a for a in super().enabled(watched, config) if type(a) is not A.BrokerConfirm)


def test_a_publisher_left_waiting_is_found():
    """Waiting for ever is a liveness question: here the execution ends with the publisher waiting (an
    end, no cycle), and the end is also the exploration's deadlock."""
    setup = read_setup(EXAMPLES / "safe-pipeline.toml")
    base = machine_for(setup)
    result = LocalEngine().explore(NeverConfirms(base.limits, base.lossy), to_config(setup), (), liveness=LIVENESS)
    assert result.deadlocks > 0
    waits = next(p for p in result.properties if p.name == "publisher_answered")
    assert waits.verdict == "VIOLATED" and waits.trace.cycle_start is None
    steps = waits.trace.steps
    assert any("c0 client->broker basic.publish" in f for s in steps for f in s.frames)
    assert not any("c0 broker->client basic.ack" in f for s in steps for f in s.frames)


# --- liveness: loops are cycles, judged under fairness ------------------------------------------

def test_a_consumer_that_requeues_every_delivery_loops_for_ever_RQ_6():
    """The loop is a lasso whose repeated steps deliver one message again and again, with a new tag each
    time (DT-2), and nack it with requeue; nothing in them acknowledges it. No budget of requeues ends it."""
    loop = next(a for a in checked("requeue-on-failure").answers if a.key == "loop")
    trace = loop.trace
    assert loop.happens and trace.cycle_start is not None and 0 < trace.cycle_start < len(trace.steps)
    repeated = trace.steps[trace.cycle_start:]
    delivered = [f for s in repeated if s.action_type == "BrokerDeliver" for f in s.frames]
    assert len(delivered) == 1 and "redelivered=True" in delivered[0]
    msg = delivered[0].split("msg=")[1].rstrip(")")
    assert any(s.action_type == "ClientNack" and "requeue=True" in s.action for s in repeated)
    assert not any(s.action_type == "ClientAck" for s in repeated)
    assert all(f"msg={msg}" in f for s in repeated for f in s.frames if "basic.deliver" in f)


def test_one_lost_connection_and_one_crash_make_no_loop():
    """The safe pipeline hit by each fault once redelivers a message twice, but no execution goes on
    redelivering it: the faults are spent (the old count of three deliveries called this a loop)."""
    text = (EXAMPLES / "safe-pipeline.toml").read_text() + "\n[faults]\nconnection_closed = true\nbroker_crash = true\n"
    answers = answers_of(text)
    assert answers["loop"] == CANNOT and answers["waits"] == CANNOT and answers["lost"] == CANNOT


def test_a_consumer_that_drops_what_it_cannot_process_makes_no_loop():
    text = (EXAMPLES / "requeue-on-failure.toml").read_text().replace("nack-requeue", "nack-drop")
    assert answers_of(text)["loop"] == CANNOT


def test_a_loop_reads_as_a_lasso_in_the_text_the_json_and_the_chart(tmp_path):
    path = str(EXAMPLES / "requeue-on-failure.toml")
    code, text = run("check", path, "--no-progress", "--no-advice", "--chart", str(tmp_path))
    assert code == 1 and "a lasso," in text and "↻ from here, steps" in text and "↻ back to the state before step" in text
    data = json.loads(run("check", path, "--json", "--no-progress", "--no-advice")[1])
    loop = next(a for a in data["answers"] if a["key"] == "loop")["trace"]
    first = loop["loop_from"]
    assert 1 < first <= len(loop["steps"]) and loop["harm_step"] is None
    assert loop["steps"][first - 1]["action"] == "BrokerDeliver" and loop["steps"][first - 1]["text"].startswith("deliver")
    assert [s["repeats"] for s in loop["steps"]] == [s["number"] >= first for s in loop["steps"]]
    assert "weakly fair" in data["checked"] and any("runner" in c for c in data["fair"])
    svg = (tmp_path / "requeue-on-failure-loop.svg").read_text()
    assert f'<g class="loop" data-from="{first}" data-to="{len(loop["steps"])}">' in svg


# --- the command line -----------------------------------------------------------------------------

def run(*argv: str) -> tuple[int, str]:
    buffer = io.StringIO()
    code = main(list(argv), Console(file=buffer, width=120))
    return code, buffer.getvalue()


def test_exit_codes_all_pass_and_one_fails():
    code, text = run("check", str(EXAMPLES / "safe-pipeline.toml"), "--no-progress")
    assert code == 0
    assert text.rstrip().splitlines()[-1] == "check: nothing found: safe-pipeline: none of the 5 questions can happen (exit 0)"
    code, text = run("check", str(EXAMPLES / "requeue-on-failure.toml"), "--no-progress")
    assert code == 1
    assert "requeue loop" in text and "can happen" in text and "nack without requeue to a dead-letter queue" in text
    assert text.rstrip().splitlines()[-1] == \
        "check: found: requeue-on-failure: can happen: out of order, requeue loop (exit 1)"


def test_a_search_cut_short_answers_undecided_and_exits_3(tmp_path):
    code, text = run("check", str(EXAMPLES / "work-queue.toml"), "--json", "--no-progress", "--max-states", "50")
    data = json.loads(text)
    assert not data["complete"] and data["what_if"] == []
    found = any(a["answer"] == "can happen" for a in data["answers"])
    assert code == (1 if found else 3) and (data["schema"], data["exit_code"]) == ("rabbitproof.check/1", code)
    assert data["verdict"] == ("found" if found else "undecided")
    # work-queue's shape has "lost" proved for every size (rabbitproof.check.for_every_size), "loop" and
    # "waits" by argument (rabbitproof.check.by_argument), and "twice" shows in a smaller setup: those
    # answers stand however far the search got; what was left to the search is undecided.
    answers = {a["key"]: a for a in data["answers"]}
    assert answers["lost"]["answer"] == CANNOT and answers["lost"]["for_every_size"]
    assert {key for key, a in answers.items() if a["method"] == "proved"} == {"lost", "loop", "waits"}
    assert answers["twice"]["method"] == "found" and answers["twice"]["trace"]["steps"]
    assert answers["order"]["method"] == "undecided" and answers["order"]["answer"] == "undecided"
    assert "the search stopped at" in answers["order"]["how"]


def test_json_and_charts(tmp_path):
    code, text = run("check", str(EXAMPLES / "auto-ack.toml"), "--json", "--no-progress", "--chart", str(tmp_path))
    assert code == 1
    data = json.loads(text)
    answers = {a["key"]: a for a in data["answers"]}
    assert answers["lost"]["answer"] == CAN and answers["lost"]["prevented_by"] == ["manual-acks"]
    trace = answers["lost"]["trace"]
    steps = trace["steps"]
    lost = max(i for i, step in enumerate(steps) if step["text"] == "connection c1 LOST")
    assert all(step["actor"].startswith("client c1") for step in steps[lost + 1:])   # then it sets up again, at once
    assert trace["harm_step"] == steps[lost]["number"] and trace["harm"] == "a message the publisher believes delivered is gone"
    assert [s["number"] for s in steps if s["harm"]] == [trace["harm_step"]]
    deliver = next(f for s in steps for f in s["frames"] if f.get("method") == "basic.deliver")
    assert deliver["connection"] == "c1" and deliver["direction"] == "broker->client"
    assert deliver["fields"] == {"ch": 1, "consumer_tag": 1, "delivery_tag": 1, "redelivered": False, "msg": "m0.1"}
    assert data["names"] == names(read_setup(EXAMPLES / "auto-ack.toml"))
    svg = Path(answers["lost"]["chart"]).read_text()
    assert svg.startswith("<svg") and "basic.deliver" in svg and "LOST" in svg
    assert svg.index("basic.publish") < svg.index("basic.deliver") < svg.index("LOST")
    assert [p.name for p in tmp_path.iterdir()] == ["auto-ack-lost.svg"]
    # Lifelines by the setup's names; the fault names the client it hits.
    assert '<g class="lifeline" data-name="c0">' in svg and ">app (c0)</text>" in svg and ">mailer (c1)</text>" in svg
    assert "connection mailer (c1) LOST" in svg
    # The step where the message is lost is marked, in the chart as in the text.
    assert f'<g class="harm" data-row="{trace["harm_step"]}">' in svg and "here a message the publisher believes delivered is gone" in svg
    assert "mailer (c1): consumer &#x27;mailer&#x27;" in svg          # the legend


@pytest.mark.parametrize("text, argv, message", [
    ("[queues.q]\n[[publishers]]\nqueue = \"r\"\n", (), "t.toml:3: publisher 'publisher 1' uses queue 'r'"),
    ("[queues.q]\n[[publishers]]\nqueue = \"q\"\ncolour = 1\n", (), "t.toml:4: unknown key 'colour'"),
    (PUBLISHER.format(confirms="true") + CRASH, ("--bound", "broker_crash=99"),
     "--bound broker_crash=99 is out of range (0 to 2)"),
    (PUBLISHER.format(confirms="true") + CRASH, ("--bound", "crashes=2"),
     "--bound crashes: a fault is bounded by its name in the setup file: broker_crash=2"),
    (PUBLISHER.format(confirms="true"), ("--bound", "broker_crash=2"), "the setup has no broker_crash"),
    (PUBLISHER.format(confirms="true"), ("--bound", "colour=2"), "unknown bound 'colour' (the faults: connection_closed"),
    (PUBLISHER.format(confirms="true"), ("--bound", "requeues=1"), "bound requeues: `check` sets no bound"),
    (PUBLISHER.format(confirms="true"), ("--bound", "messages=3"), "set each publisher's messages in the setup file"),
    (PUBLISHER.format(confirms="true"), ("--engine", "warp"), "unknown engine 'warp'"),
    (PUBLISHER.format(confirms="true"), ("--master", "local[2]"), "--master is for the spark engine"),
    (PUBLISHER.format(confirms="true"), ("--driver-core-edges", "0"), "--driver-core-edges is for the spark engine"),
    (PUBLISHER.format(confirms="true"), ("--engine", "spark", "--driver-core-edges", "-1"),
     "--driver-core-edges must be 0 or more"),
    (PUBLISHER.format(confirms="true"), ("--max-states", "0"), "--max-states must be positive"),
    (PUBLISHER.format(confirms="true"), ("--reduce", "sym"), "unknown reduction 'sym'; available: por, symmetry, budgets"),
])
def test_bad_input_is_one_line_and_exit_code_2(tmp_path, capsys, text, argv, message):
    path = tmp_path / "t.toml"
    path.write_text(text)
    code, out = run("check", str(path), "--no-progress", *argv)
    err = capsys.readouterr().err
    assert code == 2 and out == ""
    assert err.startswith("rabbitproof check: error: ") and message in err and err.count("\n") == 1


def test_options_go_before_or_after_the_file(tmp_path):
    path = tmp_path / "t.toml"
    path.write_text(PUBLISHER.format(confirms="true") + CRASH)
    before = run("check", "--bound", "broker_crash=2", str(path), "--json", "--no-advice")
    after = run("check", str(path), "--json", "--no-advice", "--bound", "broker_crash=2")
    assert before[0] == after[0] == 0 and json.loads(before[1])["answers"] == json.loads(after[1])["answers"]


def test_a_missing_file_is_bad_input(tmp_path, capsys):
    assert run("check", str(tmp_path / "none.toml"))[0] == 2
    assert "cannot read the file" in capsys.readouterr().err


def test_the_console_script_runs_the_check():
    done = subprocess.run([sys.executable, "-m", "rabbitproof", "check", str(EXAMPLES / "requeue-on-failure.toml"),
                           "--json", "--no-advice"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 1, done.stderr
    assert [a["answer"] for a in json.loads(done.stdout)["answers"]] == list(EXPECTED["requeue-on-failure"])


def test_a_search_stopped_short_answers_what_it_found_and_leaves_the_rest_undecided(tmp_path):
    code, text = run("check", str(EXAMPLES / "two-workers.toml"), "--time-limit", "1e-9", "--json", "--no-progress")
    answers = json.loads(text)
    assert not answers["complete"] and answers["error"].startswith("time limit of 1e-09 s reached")
    assert all(a["answer"] in ("undecided", "can happen") or a["method"] == "proved" for a in answers["answers"])
    assert all(a["trace"]["steps"] for a in answers["answers"] if a["answer"] == "can happen")
    found = any(a["answer"] == "can happen" for a in answers["answers"])
    assert code == (1 if found else 3) == answers["exit_code"]


def test_ctrl_c_prints_the_answers_so_far_without_a_traceback(tmp_path):
    """Two publishers of two confirmed messages each, two consumers, a crash and a lost connection: far
    more than a few seconds of search, stopped by SIGINT as a person would with Ctrl-C."""
    path = tmp_path / "big.toml"
    path.write_text("[queues.jobs]\ndurable = true\n"
                    + "".join(f'[[publishers]]\nname = "p{i}"\nqueue = "jobs"\nconfirms = true\npersistent = true\n'
                              f"messages = 2\n" for i in (1, 2))
                    + "".join(f'[[consumers]]\nname = "w{i}"\nqueue = "jobs"\nprefetch = 1\n'
                              f'on_failure = "nack-requeue"\n' for i in (1, 2))
                    + "[faults]\nbroker_crash = true\nconnection_closed = true\n")
    # A shell that runs the tests in the background (`make test &`) starts them with SIGINT ignored, and
    # a child inherits that: give the command the terminal's default, as Ctrl-C in a terminal finds it.
    child = subprocess.Popen([sys.executable, "-m", "rabbitproof", "check", str(path), "--progress"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    # The first progress line (written every 2 s into a pipe) says the search is under way, however slow
    # the machine: Ctrl-C comes then, never during the imports.
    first = child.stderr.readline()
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=300)
    err = first + err
    assert "Traceback" not in err, err
    flat = " ".join(out.split())
    assert "interrupted at depth" in flat and "undecided" in flat
    # Ctrl-C leaves the run undecided (exit 3), unless what it found before already answers "can happen".
    verdict = out[out.rindex("\ncheck: ") + 1:].split(":")[1].strip()
    assert (child.returncode, verdict) in ((3, "undecided"), (1, "found")), out
