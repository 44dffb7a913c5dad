"""A publisher that republishes (``republish`` in the setup file; rabbitproof.check.questions.Republish):
it publishes a message again once it knows it failed (nacked, PC-6; returned, RT-3; its channel gone before
the answer, PC-9), within its bound, and the questions count every copy as the message it publishes again."""
from __future__ import annotations

import pytest

from rabbitproof.spark_check.engine import LocalEngine
from rabbitproof.spec import actions as A

from rabbitproof.check.answers import check_setup, machine_for
from rabbitproof.check.questions import NOTHING_YET, Republish, lost_messages, original
from rabbitproof.check.setup_file import parse_setup
from rabbitproof.check.setup_model import to_config
from tests.test_check import CAN, CANNOT, EXAMPLES
from tests.test_reductions_symmetry import breadth_first

CONFIRMED = """
[queues.orders]
durable = true

[[publishers]]
name = "checkout"
queue = "orders"
confirms = true
persistent = true
messages = 1
republish = 1

[[consumers]]
name = "billing"
queue = "orders"
acks = "automatic"

[faults]
"""


def answers(text: str) -> tuple:
    checked = check_setup(parse_setup(text, "republish.toml"), LocalEngine(reductions=("por", "symmetry")))
    assert checked.result.complete and checked.result.error is None
    return checked, tuple(a.verdict for a in checked.answers)


def states(text: str) -> list:
    setup = parse_setup(text, "republish.toml")
    return list(breadth_first(machine_for(setup), to_config(setup)))


def test_a_confirm_lost_with_the_connection_makes_a_republished_duplicate_PC_9():
    """Automatic acks never redeliver, so without republishing nothing is processed twice; a publisher that
    republishes what its lost connection left unconfirmed delivers a message the broker had taken already
    once more, after the later one (the guide's reason for idempotent consumers)."""
    lossy = CONFIRMED.replace("messages = 1", "messages = 2") + "connection_closed = true\n"
    _, without = answers(lossy.replace("republish = 1", "republish = 0"))
    checked, with_ = answers(lossy)
    assert without[1:3] == (CANNOT, CANNOT)
    assert with_[1:3] == (CAN, CAN)
    twice = checked.answers[1].trace
    assert any(s.action_type == "Republish" for s in twice.steps)
    assert "publish m0.1 again" in "\n".join(s.action for s in twice.steps)
    assert {"PC-6", "PC-9"} <= set(checked.answers[1].rules)


def test_a_nacked_message_is_published_again_and_processed_once_PC_6():
    """The queue refuses the message once: nacked, the publisher publishes it again, and the copy is
    processed as that message; nothing is lost, nothing twice."""
    text = CONFIRMED + "queue_refuses = true\n"
    _, verdicts = answers(text)
    assert verdicts == (CANNOT,) * 5
    seen = states(text)
    republished = [w for w in seen if w.ghost.copies]
    assert republished, "the nacked message is published again"
    copy, first = republished[0].ghost.copies[0]
    assert first == 1 and copy == 2                    # m0.2 is m0.1 again
    assert any(w.ghost.copies and (1, 1) in w.ghost.counts for w in seen), "the copy is processed as m0.1"
    assert all(m != copy for w in seen for m, _ in w.ghost.counts), "no count is kept for the copy itself"
    assert all(w.spec.conns[0].published <= 2 for w in seen), "one republish at most"


def test_a_returned_message_is_published_again_RT_3():
    """A mandatory publish to the consumer's exclusive queue before it is declared comes back; the
    publisher republishes it, and once the queue exists the copy can be processed."""
    text = """
[queues.replies]
exclusive = true

[[publishers]]
name = "server"
queue = "replies"
mandatory = true
republish = 1

[[consumers]]
name = "client"
queue = "replies"
acks = "automatic"
"""
    seen = states(text)
    assert any(w.ghost.redo for w in seen), "the return makes the publisher owe the message again"
    assert any(w.ghost.copies and (1, 1) in w.ghost.counts for w in seen)
    setup = parse_setup(text, "returned.toml")
    machine, config = machine_for(setup), to_config(setup)
    owing = [w for w in seen if w.ghost.redo]
    publishes = [a for w in owing for a in machine.enabled(w, config) if isinstance(a, A.ClientPublish)]
    assert publishes and all(type(a) is Republish and a.again == 1 for a in publishes), \
        "a publisher that owes a message publishes that one first"


def test_the_bound_holds_and_a_publisher_that_cannot_learn_never_republishes():
    """Two failures, one republish: the second failed message is not published again; and without a
    republish bound the ghost never owes anything."""
    text = CONFIRMED.replace("messages = 1", "messages = 2") + "connection_closed = true\n"
    seen = states(text)
    assert max(len(w.ghost.copies) + len(w.ghost.redo) for w in seen) == 1
    assert all(w.spec.conns[0].published <= 3 for w in seen)
    plain = states(text.replace("republish = 1", "republish = 0"))
    assert not any(w.ghost.copies or w.ghost.redo for w in plain)


def test_original_names_the_message_a_copy_publishes_again():
    ghost = NOTHING_YET._replace(copies=((3, 1),))
    assert original(ghost, 3) == 1 and original(ghost, 2) == 2


@pytest.mark.parametrize("name", ["auto-ack", "fire-and-forget", "reply-queue", "republishing"])
def test_a_lost_message_stays_lost_so_one_state_decides_the_question(name):
    """"Lost" is about the whole execution (the message never reaches a consumer), judged in one state:
    sound because on every step of these setups (each of which can lose a message) a message lost stays
    lost, whatever happens next."""
    if name == "republishing":
        text = CONFIRMED.replace("messages = 1", "messages = 2") + "connection_closed = true\n"
    else:
        text = (EXAMPLES / f"{name}.toml").read_text()
    setup = parse_setup(text, f"{name}.toml")
    machine, config = machine_for(setup), to_config(setup)
    ever_lost = 0
    for w in breadth_first(machine, config):
        lost = lost_messages(w)
        if not lost:
            continue
        ever_lost += 1
        for a in machine.enabled(w, config):
            assert lost <= lost_messages(machine.step(w, a)[0]), f"{a} brought a lost message back"
    assert ever_lost, "the setup can lose a message"
