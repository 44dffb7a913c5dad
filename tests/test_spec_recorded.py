"""Recorded runs judged by the spec: the scenarios of tests/harness/scenarios.py (one or more per rule
family) run with the raw client against RabbitMQ 3.10.8 and against impl, and every recording must be
a trace the spec accepts (``spec.recorded``). The README's table of recorded traces comes from here.
Also: the adapter's own rules (names, derived configuration, refusals)."""
from __future__ import annotations

import pytest
from pamqp import commands

from spec import recorded, trace
from spec.frames import BASIC_PUBLISH, MSG_STRIDE
from tests.harness import scenarios
from tests.harness.rawclient import LoggedCommand

BROKERS = ("rabbitmq", "impl")


@pytest.fixture
def broker_for(request, broker_factory):
    """broker_for(kind, restartable): the session's RabbitMQ node or the module's impl broker, or a
    broker of the test's own when the scenario kills and restarts it."""
    def pick(kind: str, restartable: bool):
        if restartable:
            return broker_factory(kind)
        return request.getfixturevalue("rabbitmq_node" if kind == "rabbitmq" else "impl_broker_module")
    return pick


@pytest.mark.parametrize("kind", BROKERS)
@pytest.mark.parametrize("name", sorted(scenarios.SCENARIOS))
def test_recorded_scenario_is_a_trace_the_spec_accepts(name, kind, broker_for, queue_name):
    family, scenario, restartable = scenarios.SCENARIOS[name]
    broker = broker_for(kind, restartable)
    slots = scenario(broker, queue_name)
    run = recorded.from_recording(slots)
    assert run.size() >= 8, run.text()
    verdict = run.check()
    assert verdict.ok, f"{family}: {verdict.explain()}\n{run.text()}"


# ---------------------------------------------------------------- the adapter's rules

def entry(direction, method, channel=1, body=None, properties=None, kind="method"):
    return LoggedCommand(direction, kind, channel, method, properties, body, 0.0)


def test_names_and_configuration_are_derived_from_the_recording():
    log = [
        entry("sent", commands.Channel.Open()), entry("received", commands.Channel.OpenOk()),
        entry("sent", commands.Queue.Declare(queue="jobs", durable=True)),
        entry("received", commands.Queue.DeclareOk(queue="jobs", message_count=0, consumer_count=0)),
        entry("sent", commands.Basic.Publish(exchange="", routing_key="jobs"), body=b"x",
              properties=commands.Basic.Properties(delivery_mode=2)),
        entry("sent", commands.Basic.Consume(queue="jobs", consumer_tag=""), channel=2),
        entry("received", commands.Basic.ConsumeOk(consumer_tag="amq.ctag-1"), channel=2),
        entry("received", commands.Basic.Deliver(consumer_tag="amq.ctag-1", delivery_tag=1,
                                                  routing_key="jobs"), channel=2, body=b"x"),
        entry("received", None, kind="eof", channel=0),
    ]
    run = recorded.from_recording([[log], [[], []]])
    assert run.queues == {"jobs": 0} and run.consumer_tags == {"amq.ctag-1": 1}
    assert run.messages == {b"x": 1}
    sent = run.observations[0][4][1]
    assert sent[0] == BASIC_PUBLISH and sent[5] == 1 and sent[6] == 0 * MSG_STRIDE + 1
    assert run.observations[0][-1] == ("lost",)
    assert run.observations[1] == [("lost",), ("connect",)]
    config = run.config
    assert (config.connections, config.channels, config.channels_open, config.crashes) == (2, 2, False, 1)
    assert "consumer tag 1 = 'amq.ctag-1'" in run.text()


@pytest.mark.parametrize("method, why", [
    (commands.Queue.Declare(queue="q", passive=True), "passive"),
    (commands.Exchange.Declare(exchange="e"), "Exchange.Declare is outside the model"),
    (commands.Basic.Qos(prefetch_count=1, global_=False), None),
    (commands.Basic.Cancel(consumer_tag="t", nowait=True), "nowait"),
])
def test_what_the_model_cannot_say_is_refused_with_the_command_named(method, why):
    log = [entry("sent", method)]
    if why is None:
        assert recorded.from_recording([[log]]).size() == 1
        return
    with pytest.raises(recorded.Unsupported, match=why) as error:
        recorded.from_recording([[log]])
    assert "c0, command 1 (sent " in str(error.value)


def test_a_reply_text_the_spec_does_not_render_is_refused():
    log = [entry("received", commands.Channel.Close(reply_code=406, reply_text="PRECONDITION_FAILED - odd",
                                                    class_id=0, method_id=0))]
    with pytest.raises(recorded.Unsupported, match="not one the spec renders"):
        recorded.from_recording([[log]])


def test_a_delivery_of_a_body_never_published_is_refused():
    log = [entry("received", commands.Basic.GetOk(delivery_tag=1, message_count=0), body=b"?")]
    with pytest.raises(recorded.Unsupported, match="no publish of the recording carried"):
        recorded.from_recording([[log]])


def test_a_recorded_trace_the_broker_got_wrong_is_rejected():
    # An ack of tag 1 and then a redelivery of the same message: the spec rejects it (ACK-1).
    log = [
        entry("sent", commands.Channel.Open()), entry("received", commands.Channel.OpenOk()),
        entry("sent", commands.Queue.Declare(queue="w")),
        entry("received", commands.Queue.DeclareOk(queue="w", message_count=0, consumer_count=0)),
        entry("sent", commands.Basic.Publish(exchange="", routing_key="w"), body=b"m"),
        entry("sent", commands.Basic.Get(queue="w")),
        entry("received", commands.Basic.GetOk(delivery_tag=1, message_count=0), body=b"m"),
        entry("sent", commands.Basic.Ack(delivery_tag=1)),
        entry("sent", commands.Basic.Get(queue="w")),
        entry("received", commands.Basic.GetOk(delivery_tag=2, redelivered=True, message_count=0), body=b"m"),
    ]
    verdict = recorded.check_recording([[log]])
    assert verdict.status == trace.REJECTED and verdict.index == 9, verdict.explain()


def test_the_real_time_order_across_connections_is_followed():
    # c1 gets m0.1, which c0 publishes: fine in either interleaving of the two connections' observations,
    # unless the recording shows the get-ok arriving before the publish was written.
    observations = trace.parse("""
    c0 sent basic.publish(ch=1, exchange='', routing_key='q0', mandatory=False, persistent=False, msg=m0.1)
    c1 sent basic.get(ch=1, queue=q0, no_ack=True)
    c1 received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m0.1, message_count=0)
    """)
    from tests.test_spec_tracekit import cfg
    assert trace.check(observations, cfg()).ok
    assert trace.check(observations, cfg(), order=(0, 1, 1)).ok
    assert trace.check(observations, cfg(), order=(1, 0, 1)).ok
    late = trace.check(observations, cfg(), order=(1, 1, 0))
    assert late.status == trace.REJECTED and (late.conn, late.index) == (1, 1), late.explain()
    with pytest.raises(ValueError, match="once per observation"):
        trace.check(observations, cfg(), order=(0, 1))


def test_a_recording_gives_the_real_time_order():
    a = [entry("sent", commands.Channel.Open()), entry("received", commands.Channel.OpenOk())]
    b = [entry("sent", commands.Channel.Open()), entry("received", commands.Channel.OpenOk())]
    for i, e in enumerate(a):
        e.at = 1.0 + 2 * i          # a at 1, 3; b at 2, 4
    for i, e in enumerate(b):
        e.at = 2.0 + 2 * i
    run = recorded.from_recording([[a], [b]])
    assert run.order == (0, 1, 0, 1)
    assert run.check().ok
