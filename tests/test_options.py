"""The option types every subcommand shares (rabbitproof.options): one wording for a number out of range,
a number of seconds, and a list of names."""
from __future__ import annotations

import argparse

import pytest

from rabbitproof.options import int_in, names_in, seconds_in


@pytest.mark.parametrize("kind, text, value", [
    (int_in(1), "7", 7),
    (int_in(0, 2), "2", 2),
    (seconds_in(0, 10), "0", 0.0),
    (seconds_in(0, above=True), "0.5", 0.5),
    (names_in(("impl", "rabbitmq"), "a broker"), "rabbitmq, impl,rabbitmq", ("rabbitmq", "impl")),
])
def test_good_values_are_read(kind, text, value):
    assert kind(text) == value


@pytest.mark.parametrize("kind, text, message", [
    (int_in(1), "0", "0 is out of range (1 or more)"),
    (int_in(0, 2), "3", "3 is out of range (0 to 2)"),
    (int_in(1), "many", "not an integer: 'many'"),
    (seconds_in(0, 10), "11", "11 is out of range (0 to 10 seconds)"),
    (seconds_in(0, above=True), "0", "0 is out of range (more than 0 seconds)"),
    (seconds_in(0, above=True), "nan", "nan is out of range (more than 0 seconds)"),
    (seconds_in(0), "soon", "not a number of seconds: 'soon'"),
    (names_in(("impl", "rabbitmq"), "a broker"), "impl,activemq", "'activemq' is not a broker; choose from impl, rabbitmq"),
    (names_in(("impl", "rabbitmq"), "a broker"), ",", "',' is not a broker; choose from impl, rabbitmq"),
])
def test_bad_values_are_named_in_one_line(kind, text, message):
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        kind(text)
    assert str(refused.value) == message
