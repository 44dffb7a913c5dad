"""Differential test, where the spec leaves no choice: for programs of one connection with one method per
write, the impl server must send exactly the frames a private RabbitMQ 3.10.8 sends, up to the
normalisations rabbitproof/conformance/differential.py names (names made for the run, the handshake, the
interleaving of channels, confirm batching). Each difference found was fixed in impl/ with a test of its
own (tests/impl/test_differential_findings.py) or is written in docs/reference/differences.md beside its rule."""
from __future__ import annotations

import pytest
from hypothesis import given
from pamqp import commands

from rabbitproof.conformance import budget
from rabbitproof.conformance import programs as P
from rabbitproof.conformance.differential import first_difference, normalised, normalised_connection
from rabbitproof.conformance.judge import program_text
from rabbitproof.conformance.targets import TcpTarget, run_program
from rabbitproof.recording.rawclient import LoggedCommand
from tests.fixtures.patience import REPLY_PATIENCE


@pytest.fixture(scope="module")
def impl_target(impl_broker_module):
    return TcpTarget.of("impl over TCP", impl_broker_module, quiet=0.02, timeout=REPLY_PATIENCE)


@pytest.fixture(scope="module")
def rabbitmq_target(rabbitmq_node):
    return TcpTarget.of("rabbitmq", rabbitmq_node, quiet=0.05, timeout=REPLY_PATIENCE)


@budget(25)
@given(program=P.programs(synchronous=True, rabbitmq_safe=True))
def test_impl_sends_rabbitmqs_frames_for_synchronous_programs(impl_target, rabbitmq_target, program):
    ours, theirs = normalised(run_program(program, impl_target)), normalised(run_program(program, rabbitmq_target))
    first_on_channel_1 = [item[0] for item in ours[0][0][1][:3]]     # the recording is not empty
    assert first_on_channel_1 == ["Channel.OpenOk", "Queue.DeclareOk", "Queue.DeclareOk"], first_on_channel_1
    difference = first_difference(ours, theirs)
    assert difference is None, f"impl and RabbitMQ differ\n{program_text(program)}\n{difference}"


# ---------------------------------------------------------------- the normalisation itself

def received(channel: int, method, body: bytes | None = None) -> LoggedCommand:
    return LoggedCommand("received", "method", channel, method, None, body, 0.0)


def sent(channel: int, method) -> LoggedCommand:
    return LoggedCommand("sent", "method", channel, method, None, None, 0.0)


HANDSHAKE = [received(0, commands.Connection.OpenOk())]


def test_batched_confirms_compare_equal_to_single_ones():
    batched = HANDSHAKE + [received(1, commands.Channel.OpenOk()), sent(1, commands.Confirm.Select()),
                           received(1, commands.Confirm.SelectOk()),
                           received(1, commands.Basic.Ack(delivery_tag=3, multiple=True))]
    single = batched[:-1] + [received(1, commands.Basic.Ack(delivery_tag=t)) for t in (2, 1, 3)]
    assert normalised_connection(batched, "r") == normalised_connection(single, "r")
    assert normalised_connection(batched, "r")[1][-1] == ("confirms", [1, 2, 3], [])
    nacked = single[:-1] + [received(1, commands.Basic.Nack(delivery_tag=3))]
    assert normalised_connection(nacked, "r") != normalised_connection(single, "r")


def test_run_names_and_server_chosen_tags_are_normalised_but_fields_are_not():
    def log(run: str, tag: str, delivery_tag: int) -> list:
        return HANDSHAKE + [received(1, commands.Channel.OpenOk()),
                            received(1, commands.Basic.ConsumeOk(consumer_tag=tag)),
                            received(1, commands.Basic.Deliver(consumer_tag=tag, delivery_tag=delivery_tag,
                                                               routing_key=f"{run}-q0"), f"{run}.1".encode())]
    a = normalised_connection(log("rpA", "amq.ctag-abc", 1), "rpA")
    assert a == normalised_connection(log("rpB", "amq.ctag-XYZ_9", 1), "rpB")
    assert a != normalised_connection(log("rpB", "amq.ctag-XYZ_9", 2), "rpB")
    assert first_difference([[a]], [[normalised_connection(log("rpB", "x", 1), "rpB")]]).startswith(
        "slot 0, connection 0, channel 1, frame 1")


def test_the_probe_and_its_replies_are_left_out_of_the_comparison():
    """The runner's probe (a basic.get of the run's empty probe queue) can answer before or after a delivery
    from another queue: the order is no difference between brokers."""
    def log(deliver_first: bool) -> list:
        sent = [LoggedCommand("sent", "method", 1, commands.Basic.Get(queue="R-probe", no_ack=True), None, None, 0.0)]
        deliver = LoggedCommand("received", "method", 1, commands.Basic.Deliver(consumer_tag="R-a", delivery_tag=1),
                                commands.Basic.Properties(), b"R.1", 0.0)
        empty = LoggedCommand("received", "method", 1, commands.Basic.GetEmpty(), None, None, 0.0)
        opened = [LoggedCommand("received", "method", 0, commands.Connection.OpenOk(), None, None, 0.0)]
        return opened + sent + ([deliver, empty] if deliver_first else [empty, deliver])

    assert normalised_connection(log(True), "R") == normalised_connection(log(False), "R")
    assert [item[0] for item in normalised_connection(log(True), "R")[1]] == ["Basic.Deliver"]


def test_deliveries_are_compared_among_themselves_not_in_their_place_among_the_replies():
    """A delivery that comes after the next method's reply (still on its way when that method was
    written) compares equal to one that came before it; deliveries in another order, or with another
    body, do not."""
    def deliver(tag: int) -> LoggedCommand:
        return LoggedCommand("received", "method", 1, commands.Basic.Deliver(consumer_tag="a", delivery_tag=tag),
                             commands.Basic.Properties(), f"R.{tag}".encode(), 0.0)
    consume_ok = received(1, commands.Basic.ConsumeOk(consumer_tag="a"))
    empty = received(1, commands.Basic.GetEmpty())
    early = HANDSHAKE + [consume_ok, deliver(1), empty, deliver(2)]
    late = HANDSHAKE + [consume_ok, empty, deliver(1), deliver(2)]
    assert normalised_connection(early, "R") == normalised_connection(late, "R")
    assert [item[0] for item in normalised_connection(late, "R")[1]] == [
        "Basic.ConsumeOk", "Basic.GetEmpty", "Basic.Deliver", "Basic.Deliver"]
    swapped = HANDSHAKE + [consume_ok, empty, deliver(2), deliver(1)]
    assert normalised_connection(swapped, "R") != normalised_connection(early, "R")
