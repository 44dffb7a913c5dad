"""Replays against a private RabbitMQ 3.10.8: the examples' answers that need no crash (a cut connection, a
vanished consumer noticed by its heartbeat timeout, a requeue loop) are reproduced on the real broker and
its recordings accepted by the spec. (The crashing ones take a restart of RabbitMQ per try, tens of seconds:
docs/how-to/replay.md gives their figures; tests/test_replay.py crashes our broker for real.)"""
from __future__ import annotations

import pytest

from tests.test_replay import assert_reproduced, executions, target
from rabbitproof.replay.tries import replay_answer


@pytest.mark.parametrize("example, key, shows", [
    ("auto-ack", "lost", "never processed, not in its queue"),
    ("vanishing-consumer", "twice", "processed 2 times"),
    ("requeue-on-failure", "loop", "handed out 4 times, never processed"),
])
def test_the_examples_answers_are_reproduced_on_rabbitmq(example, key, shows, rabbitmq_node, tmp_path):
    setup, found = executions(example)
    replayed = replay_answer(found[key], setup, target(rabbitmq_node, tmp_path), example)
    assert_reproduced(replayed, shows)
