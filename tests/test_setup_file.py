"""Setup files (rabbitproof.check.setup_file): a good file reads into a Setup and a spec configuration; every
mistake is one SetupError naming the file's line."""

from __future__ import annotations

import pytest

from rabbitproof.spec.frames import DEFAULT_EXCHANGE
from rabbitproof.spec.machine import enabled, initial_states

from rabbitproof.check.setup_file import SetupError, key_lines, parse_setup, read_setup
from rabbitproof.check.setup_model import notes, to_config

WORK_QUEUE = """\
# a work queue with manual acks
[queues.jobs]
durable = true
dead_letter = "jobs.dead"

[queues."jobs.dead"]
durable = true

[[publishers]]
name = "web"
queue = "jobs"
confirms = true
persistent = true
messages = 2

[[consumers]]
name = "worker"
queue = "jobs"
acks = "manual"
prefetch = 1
on_failure = "nack-drop"

[faults]
broker_crash = true
"""


def test_a_good_file_reads_into_its_setup():
    setup = parse_setup(WORK_QUEUE, "work.toml")
    assert [(q.name, q.durable, q.dead_letter) for q in setup.queues] == [("jobs", True, "jobs.dead"),
                                                                          ("jobs.dead", True, "")]
    (publisher,) = setup.publishers
    assert (publisher.name, publisher.queue, publisher.confirms, publisher.persistent, publisher.messages) == \
        ("web", "jobs", True, True, 2)
    (consumer,) = setup.consumers
    assert (consumer.acks, consumer.prefetch, consumer.on_failure) == ("manual", 1, "nack-drop")
    assert setup.faults.broker_crash and not setup.faults.connection_closed


def test_key_lines_follow_tables_arrays_and_quoted_names():
    lines = key_lines(WORK_QUEUE)
    assert lines[("queues", "jobs")] == 2
    assert lines[("queues", "jobs.dead", "durable")] == 7
    assert lines[("publishers", 0, "confirms")] == 12
    assert lines[("consumers", 0, "on_failure")] == 21


def test_the_setup_becomes_a_spec_configuration_of_roles_and_bounds():
    config = to_config(parse_setup(WORK_QUEUE, "work.toml"))
    assert (config.connections, config.channels, config.messages, config.crashes) == (2, 1, 2, 1)
    assert [(q.durable, q.dead_letter) for q in config.queues] == [(True, 1), (True, -1)]
    publisher, consumer = config.roles[(0, 1)], config.roles[(1, 1)]
    assert (publisher.publish, publisher.confirm, publisher.persistent) == (((DEFAULT_EXCHANGE, 0),), True, (True,))
    assert (consumer.consume, consumer.ack, consumer.nack, consumer.qos) == (((0, False),), True, (False,), ((1, False),))
    state = initial_states(config)[0]
    assert enabled(state, config), "the configuration has something to do"


@pytest.mark.parametrize("text, line, words", [
    ("[queues.jobs]\ndurable = yes\n", 2, "not valid TOML"),
    ("[queues.jobs]\ndurible = true\n[[publishers]]\nqueue = \"jobs\"\n", 2, "unknown key 'durible'"),
    ("[queues.jobs]\n[[publishers]]\nqueue = \"jobz\"\n", 3, "'jobz', which is not a queue"),
    ("[queues.jobs]\n[[publishers]]\nqueue = \"jobs\"\nconfirms = true\ntransactions = true\n", 5, "PC-8"),
    ("[queues.jobs]\n[[publishers]]\nqueue = \"jobs\"\nmessages = 51\n", 4, "out of range (1 to 50)"),
    ("[queues.jobs]\n[[publishers]]\nqueue = \"jobs\"\n[[consumers]]\nqueue = \"jobs\"\nacks = \"auto\"\n", 6,
     "must be one of 'manual', 'automatic'"),
    ("[queues.jobs]\n[[publishers]]\nqueue = \"jobs\"\n[[consumers]]\nqueue = \"jobs\"\nacks = \"automatic\"\n"
     "on_failure = \"nack-requeue\"\n", 7, "cannot nack (AM-1)"),
    ("[queues.jobs]\nexclusive = true\n[[publishers]]\nqueue = \"jobs\"\n[[consumers]]\nqueue = \"jobs\"\n"
     "[[consumers]]\nqueue = \"jobs\"\n", 8, "DU-4"),
    ("[queues.jobs]\ndead_letter = \"nowhere\"\n[[publishers]]\nqueue = \"jobs\"\n", 2, "'nowhere'"),
    ("[queues.jobs]\n[faults]\nbroker_crash = 1\n[[publishers]]\nqueue = \"jobs\"\n", 3, "true or false"),
    ("[queues.jobs]\n[[consumers]]\nqueue = \"jobs\"\n", 0, "at least one [[publishers]]"),
    ("[[publishers]]\nqueue = \"jobs\"\n", 0, "at least one queue"),
    ("[queues.jobs]\n[[publishers]]\nroute = \"jobs\"\n", 3, "unknown key 'route'"),
    ("[queues.jobs]\n[[publishers]]\nname = \"w\"\nqueue = \"jobs\"\n[[consumers]]\nname = \"w\"\n"
     "queue = \"jobs\"\n", 6, "two clients are named 'w' (the other on line 3)"),
    ("[queues.jobs]\n[[publishers]]\nqueue = \"jobs\"\n[[consumers]]\nqueue = \"jobs\"\nprefetch = 65536\n", 6,
     "out of range (0 to 65535)"),
    ("[queues.jobs]\n[[publishers]]\nqueue = \"jobs\"\nrepublish = 1\n", 4, "never learns that a message"),
    ("[queues.jobs]\n[[publishers]]\nqueue = \"jobs\"\nconfirms = true\nrepublish = 3\n", 5,
     "out of range (0 to 2)"),
    ("[queues.jobs]\n" + "".join(f"[[publishers]]\nqueue = \"jobs\"\nmessages = {n}\nconfirms = true\nrepublish = 2\n"
                                  for n in (45, 1, 1, 1, 1, 1)), 31, "50 messages and 12 republishes: at most 60 publishes"),
])
def test_each_mistake_is_one_error_with_its_line(text, line, words):
    with pytest.raises(SetupError) as error:
        parse_setup(text, "my.toml")
    assert error.value.line == line
    assert words in str(error.value)
    assert str(error.value).startswith(f"my.toml:{line}: " if line else "my.toml: ")


def test_an_unreadable_file_is_a_setup_error(tmp_path):
    with pytest.raises(SetupError, match="cannot read the file"):
        read_setup(tmp_path / "absent.toml")


def test_exclusive_and_durable_go_together_DU_4():
    text = "[queues.replies]\nexclusive = true\ndurable = true\n[[publishers]]\nqueue = \"replies\"\n" \
           "[[consumers]]\nqueue = \"replies\"\n"
    config = to_config(parse_setup(text))
    assert (config.queues[0].durable, config.queues[0].exclusive) == (True, True)


def test_a_prefetch_the_messages_cannot_fill_is_no_limit_PF_1():
    text = "[queues.jobs]\n[[publishers]]\nqueue = \"jobs\"\nmessages = 2\n[[consumers]]\nname = \"w\"\n" \
           "queue = \"jobs\"\nprefetch = {}\n"
    assert to_config(parse_setup(text.format(100))) == to_config(parse_setup(text.format(0)))
    assert to_config(parse_setup(text.format(1))).roles[(1, 1)].qos == ((1, False),)
    assert notes(parse_setup(text.format(2))) == (
        "consumer 'w': prefetch 2 is at least the 2 messages of the setup, so it never binds: explored as no limit "
        "(PF-1)",)
    assert notes(parse_setup(text.format(1))) == ()
