"""`explore --bound` on the spec takes the setup file's fault names (broker_crash, connection_closed,
host_vanished, ...) and maps them to the spec's budgets; a budget's own name for a fault, an unknown name
or a value out of range is one line on stderr and exit code 2, before any exploration."""
from __future__ import annotations

import pytest

from rabbitproof.cli import main
from rabbitproof.explore.bounds import NAMES, spec_bounds
from rabbitproof.spark_check.bundle import InputError, load_spec


def test_fault_names_map_to_the_spec_budgets():
    assert spec_bounds({"broker_crash": "2", "connection_closed": "1", "host_vanished": "1", "channel_closed": "1",
                        "channel_error": "2", "queue_refuses": "3", "messages": "3"}) == {
        "crashes": "2", "losses": "1", "vanishes": "1", "closes": "1", "channel_errors": "2", "failures": "3",
        "messages": "3"}


def test_the_configuration_explored_has_the_mapped_bounds():
    config = load_spec().config("ack_basics", spec_bounds({"broker_crash": "2", "host_vanished": "1"}))
    assert (config.crashes, config.vanishes) == (2, 1)


@pytest.mark.parametrize("bound, message", [
    ("crashes=1", "--bound crashes: a fault is bounded by its name in the setup file: broker_crash=1"),
    ("losses=1", "--bound losses: a fault is bounded by its name in the setup file: connection_closed=1"),
    ("colour=1", "unknown bound 'colour'; the bounds: connection_closed, host_vanished, channel_closed, "
                 "channel_error, broker_crash, queue_refuses, messages, requeues"),
    ("broker_crash=5", "--bound broker_crash=5 is out of range (0 to 2)"),
    ("host_vanished=x", "--bound host_vanished must be a whole number, not 'x'"),
])
def test_bad_bounds_are_refused_in_one_line(bound, message, capsys):
    assert main(["explore", "ack_basics", "--bound", bound, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"rabbitproof explore: error: {message}") and len(err.splitlines()) == 1


def test_every_name_is_a_fault_of_the_setup_file_or_a_bound_of_the_spec():
    with pytest.raises(InputError):
        spec_bounds({"vanishes": "1"})
    assert {"broker_crash", "connection_closed", "host_vanished", "messages", "max_states"} <= set(NAMES)
    assert not {"crashes", "losses", "vanishes"} & set(NAMES)
