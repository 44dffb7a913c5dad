"""The faults of a setup file, named as users name failures (rabbitproof.check.setup_file): a connection
closed (noticed at once) and a host vanished (noticed at the heartbeat timeout) hit every client or the
clients a list names; the names they had before are refused, naming the new one; `check --bound` takes
the same names (rabbitproof.check.setup_model.bound_changes)."""
from __future__ import annotations

import pytest

from rabbitproof.spark_check.engine import LocalEngine
from rabbitproof.spec.configs import ConfigError

from rabbitproof.check.answers import check_setup, config_for
from rabbitproof.check.setup_file import RENAMED, SetupError, fault_words, parse_setup
from rabbitproof.check.setup_model import FAULT_BOUNDS, erring, lossy, to_config, vanishing

SETUP = """
[queues.jobs]

[[publishers]]
name = "web"
queue = "jobs"
confirms = true

[[consumers]]
name = "w1"
queue = "jobs"
{consumer}
[[consumers]]
name = "w2"
queue = "jobs"

[faults]
{faults}
"""


def setup(faults: str, consumer: str = ""):
    return parse_setup(SETUP.format(faults=faults, consumer=consumer), "t.toml")


def test_true_hits_every_client_it_can_and_a_list_only_those_named():
    assert lossy(setup("connection_closed = true")) == (True, True, True)
    assert lossy(setup('connection_closed = ["w2", "web"]')) == (True, False, True)
    assert vanishing(setup("host_vanished = true")) == (True, True, True)
    assert vanishing(setup('host_vanished = ["w1"]')) == (False, True, False)
    assert erring(setup("channel_error = true")) == (False, True, True)       # consumers only
    assert erring(setup('channel_error = ["w2"]')) == (False, False, True)
    closing = setup('channel_closed = ["w1"]')
    roles = to_config(closing).roles
    assert (roles[(1, 1)].close, roles[(2, 1)].close) == (True, False)
    assert setup("connection_closed = false").faults.connection_closed == ()


def test_each_fault_sets_its_budget_once():
    config = to_config(setup('connection_closed = ["w1"]\nhost_vanished = ["w2"]\nchannel_error = true'))
    assert (config.losses, config.vanishes, config.channel_errors, config.reconnects, config.crashes) == (1, 1, 1, 1, 0)
    assert to_config(setup("")).reconnects == 0


@pytest.mark.parametrize("old", sorted(RENAMED))
def test_an_old_name_is_refused_naming_the_new_one(old):
    with pytest.raises(SetupError) as info:
        setup(f"{old} = true")
    assert str(info.value) == f"t.toml:18: faults.{old} is now written {RENAMED[old]}"


@pytest.mark.parametrize("faults, message", [
    ('channel_error = ["web"]', "faults.channel_error names 'web', a publisher: faults.channel_error hits consumers only"),
    ('connection_closed = ["w9"]', "faults.connection_closed names 'w9', not a client of the setup (clients: web, w1, w2)"),
    ("host_vanished = []", "faults.host_vanished must be true, false or a list of client names, not []"),
    ('host_vanished = "w1"', "faults.host_vanished must be true, false or a list of client names, not 'w1'"),
    ('channel_closed = ["w1", "w1"]', "faults.channel_closed names a client twice"),
])
def test_a_wrong_list_is_one_line_naming_what_is_wrong(faults, message):
    with pytest.raises(SetupError) as info:
        setup(faults)
    assert str(info.value) == f"t.toml:18: {message}"


def test_a_consumer_fault_needs_a_consumer():
    text = '[queues.q]\n[[publishers]]\nqueue = "q"\n[faults]\nchannel_closed = true\n'
    with pytest.raises(SetupError, match="t.toml:5: faults.channel_closed needs a consumer"):
        parse_setup(text, "t.toml")


def test_a_fault_that_hits_one_consumer_is_explored_as_such():
    """Only w1 may lose its connection: no state has w2's connection lost, and the search is smaller than
    with both."""
    engine = LocalEngine()
    one = check_setup(setup('connection_closed = ["w1"]'), engine)
    both = check_setup(setup('connection_closed = ["w1", "w2"]'), engine)
    assert one.result.complete and both.result.complete
    assert one.result.distinct_states < both.result.distinct_states


def test_bound_takes_the_fault_names():
    crash = setup("broker_crash = true")
    assert config_for(crash, {"broker_crash": "2"}).crashes == 2
    assert config_for(crash, {"broker_crash": "0"}).crashes == 0
    closing = setup("channel_closed = true")
    assert config_for(closing, {"channel_closed": "2"}).closes == 2
    assert config_for(setup("queue_refuses = true"), {"queue_refuses": "3"}).failures == 3
    assert set(FAULT_BOUNDS) == {"connection_closed", "host_vanished", "channel_closed", "channel_error",
                                 "broker_crash", "queue_refuses"}


@pytest.mark.parametrize("bounds, message", [
    ({"crashes": "2"}, "--bound crashes: a fault is bounded by its name in the setup file: broker_crash=2"),
    ({"losses": "1"}, "--bound losses: a fault is bounded by its name in the setup file: connection_closed=1"),
    ({"host_vanished": "1"}, "--bound host_vanished: the setup has no host_vanished; name it under [faults] first"),
    ({"broker_crash": "x"}, "--bound broker_crash must be a whole number, not 'x'"),
    ({"broker_crash": "3"}, "--bound broker_crash=3 is out of range (0 to 2)"),
])
def test_a_bound_by_an_old_name_or_for_a_missing_fault_is_refused(bounds, message):
    with pytest.raises(ConfigError) as info:
        config_for(setup("broker_crash = true"), bounds)
    assert str(info.value) == message


def test_the_report_names_the_clients_a_fault_is_limited_to():
    assert fault_words(setup('connection_closed = ["w1"]\nbroker_crash = true\nchannel_error = true')) == [
        "connection closed (w1)", "channel error", "broker crash"]
    assert fault_words(setup('host_vanished = ["web", "w1", "w2"]')) == ["host vanished"]
