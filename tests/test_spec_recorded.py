"""Recorded runs judged by the spec: the scenarios of rabbitproof/recording/scenarios.py (one or more per rule
family) run with the raw client against RabbitMQ 3.10.8 and against impl, and every recording must be
a trace the spec accepts (``rabbitproof.recording.observations``). The table of recorded traces in
docs/reference/differences.md comes from here. Also: the adapter's own rules (names, derived configuration,
refusals)."""
from __future__ import annotations

import pytest
from pamqp import commands

from rabbitproof.spec import trace
from rabbitproof.recording import observations
from rabbitproof.spec.frames import BASIC_PUBLISH, MSG_STRIDE

from rabbitproof.recording import scenarios
from rabbitproof.recording.rawclient import LoggedCommand
from tests.fixtures.patience import REPLY_PATIENCE

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
    run = observations.from_recording(slots)
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
    run = observations.from_recording([[log], [[], []]])
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
        assert observations.from_recording([[log]]).size() == 1
        return
    with pytest.raises(observations.Unsupported, match=why) as error:
        observations.from_recording([[log]])
    assert "c0, command 1 (sent " in str(error.value)


def test_a_reply_text_the_spec_does_not_render_is_refused():
    log = [entry("received", commands.Channel.Close(reply_code=406, reply_text="PRECONDITION_FAILED - odd",
                                                    class_id=0, method_id=0))]
    with pytest.raises(observations.Unsupported, match="not one the spec renders"):
        observations.from_recording([[log]])


def test_a_delivery_of_a_body_never_published_is_refused():
    log = [entry("received", commands.Basic.GetOk(delivery_tag=1, message_count=0), body=b"?")]
    with pytest.raises(observations.Unsupported, match="no publish of the recording carried"):
        observations.from_recording([[log]])


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
    verdict = observations.check_recording([[log]])
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
    run = observations.from_recording([[a], [b]])
    assert run.order == (0, 1, 0, 1)
    assert run.check().ok


def consume_closed_before_its_consume_ok(published_to: str) -> list:
    """A consume with a server-chosen tag and a 404 in one write, as RabbitMQ 3.10.8 answered it in the
    conformance programs: the channel.close drops the consume-ok, yet the queue had already delivered
    its message to the consumer, and that delivery, with the tag no frame named, comes after the close."""
    return [
        entry("sent", commands.Channel.Open()), entry("received", commands.Channel.OpenOk()),
        entry("sent", commands.Queue.Declare(queue="a")), entry("sent", commands.Queue.Declare(queue="b")),
        entry("received", commands.Queue.DeclareOk(queue="a", message_count=0, consumer_count=0)),
        entry("received", commands.Queue.DeclareOk(queue="b", message_count=0, consumer_count=0)),
        entry("sent", commands.Basic.Publish(exchange="", routing_key=published_to), body=b"m"),
        entry("sent", commands.Basic.Consume(queue="a", consumer_tag="")),
        entry("sent", commands.Queue.Purge(queue="missing")),
        entry("received", commands.Channel.Close(reply_code=404, reply_text="NOT_FOUND - no queue 'missing' "
                                                 "in vhost '/'", class_id=50, method_id=30)),
        entry("received", commands.Basic.Deliver(consumer_tag="amq.ctag-x", delivery_tag=1, routing_key="a"),
              body=b"m"),
        entry("sent", commands.Channel.CloseOk()),
    ]


def test_a_server_chosen_tag_whose_consume_ok_was_dropped_is_read_from_its_deliveries_DS_1():
    run = observations.from_recording([[consume_closed_before_its_consume_ok("a")]], judge_texts=False)
    assert run.consumer_tags == {"amq.ctag-x": 1}
    assert run.check().ok, run.check().explain()
    # A delivery of a message published to another queue is not this consumer's: rejected there.
    wrong = observations.check_recording([[consume_closed_before_its_consume_ok("b")]], judge_texts=False)
    assert wrong.status == trace.REJECTED and wrong.index == 10, wrong.explain()


# ---------------------------------------------------------------- a pending tx.commit (TX-7)
# What RabbitMQ 3.10.8 wrote (rabbitproof/conformance programs run on a private node, 30 runs each): a method
# pipelined behind tx.commit closes the connection with 504 while the commit waits for its queues,
# persistent or not (30 of 30); a channel.close there is answered and the commit-ok never comes (30 of
# 30); a consumer on the committing channel gets the committed messages before tx.commit-ok (both of
# two in 29 of 30, one in the other).

PENDING_504 = "CHANNEL_ERROR - unexpected command while processing 'tx.commit'"


def persistent():
    return commands.Basic.Properties(delivery_mode=2)


def tx_prelude(durable: bool = True) -> list:
    return [
        entry("sent", commands.Channel.Open()), entry("received", commands.Channel.OpenOk()),
        entry("sent", commands.Queue.Declare(queue="q", durable=durable)),
        entry("received", commands.Queue.DeclareOk(queue="q", message_count=0, consumer_count=0)),
        entry("sent", commands.Tx.Select()), entry("received", commands.Tx.SelectOk()),
    ]


def pipelined_behind_commit(properties=None, commit_ok_first: bool = False) -> list:
    ok = [entry("received", commands.Tx.CommitOk())] if commit_ok_first else []
    return tx_prelude() + [
        entry("sent", commands.Basic.Publish(exchange="", routing_key="q"), body=b"m1", properties=properties),
        entry("sent", commands.Tx.Commit()), *ok,
        entry("sent", commands.Basic.Publish(exchange="", routing_key="q"), body=b"m2"),
        entry("received", commands.Connection.Close(reply_code=504, reply_text=PENDING_504, class_id=0,
                                                    method_id=0), channel=0),
        entry("sent", commands.Connection.CloseOk(), channel=0),
    ]


@pytest.mark.parametrize("properties", [persistent(), None], ids=["persistent", "transient"])
def test_a_method_pipelined_behind_a_pending_commit_may_close_the_connection_TX_7(properties):
    verdict = observations.check_recording([[pipelined_behind_commit(properties)]])
    assert verdict.ok, verdict.explain()


def test_no_504_once_the_commit_ok_went_out_TX_7():
    verdict = observations.check_recording([[pipelined_behind_commit(persistent(), commit_ok_first=True)]])
    assert verdict.status == trace.REJECTED and verdict.index == 10, verdict.explain()


def test_no_504_behind_a_commit_that_enqueued_nothing_TX_7():
    log = tx_prelude() + [
        entry("sent", commands.Tx.Commit()),
        entry("sent", commands.Basic.Publish(exchange="", routing_key="q"), body=b"m1"),
        entry("received", commands.Connection.Close(reply_code=504, reply_text=PENDING_504, class_id=0,
                                                    method_id=0), channel=0),
    ]
    verdict = observations.check_recording([[log]])
    assert verdict.status == trace.REJECTED and verdict.index == 8, verdict.explain()


def closed_behind_commit(commit_ok: bool) -> list:
    late = [entry("received", commands.Tx.CommitOk())] if commit_ok else []
    return tx_prelude() + [
        entry("sent", commands.Basic.Publish(exchange="", routing_key="q"), body=b"m1", properties=persistent()),
        entry("sent", commands.Tx.Commit()),
        entry("sent", commands.Channel.Close(reply_code=200, reply_text="OK", class_id=0, method_id=0)),
        entry("received", commands.Channel.CloseOk()), *late,
    ]


def test_a_channel_closed_behind_a_pending_commit_never_gets_its_commit_ok_TX_7():
    verdict = observations.check_recording([[closed_behind_commit(commit_ok=False)]])
    assert verdict.ok, verdict.explain()
    late = observations.check_recording([[closed_behind_commit(commit_ok=True)]])
    assert late.status == trace.REJECTED and late.index == 10, late.explain()


def deliver(tag: int) -> LoggedCommand:
    return entry("received", commands.Basic.Deliver(consumer_tag="amq.ctag-1", delivery_tag=tag, routing_key="q"),
                 body=f"m{tag}".encode())


def publish_then_consume() -> list:
    """Channel 1 opened, queue q declared, m1 published to it, and a basic.consume of q sent."""
    return [
        entry("sent", commands.Channel.Open()), entry("received", commands.Channel.OpenOk()),
        entry("sent", commands.Queue.Declare(queue="q")),
        entry("received", commands.Queue.DeclareOk(queue="q", message_count=0, consumer_count=0)),
        entry("sent", commands.Basic.Publish(exchange="", routing_key="q"), body=b"m1"),
        entry("sent", commands.Basic.Consume(queue="q", consumer_tag="")),
    ]


def consumer_on_the_committing_channel(commit_ok_first: bool) -> list:
    deliveries = [deliver(2), deliver(3)]
    ok = [entry("received", commands.Tx.CommitOk())]
    return publish_then_consume() + [
        entry("received", commands.Basic.ConsumeOk(consumer_tag="amq.ctag-1")), deliver(1),
        entry("sent", commands.Tx.Select()), entry("received", commands.Tx.SelectOk()),
        entry("sent", commands.Basic.Publish(exchange="", routing_key="q"), body=b"m2"),
        entry("sent", commands.Basic.Publish(exchange="", routing_key="q"), body=b"m3"),
        entry("sent", commands.Tx.Commit()),
        *(ok + deliveries if commit_ok_first else deliveries + ok),
    ]


@pytest.mark.parametrize("commit_ok_first", [False, True], ids=["rabbitmq-order", "commit-ok-first"])
def test_committed_messages_may_reach_a_consumer_of_the_channel_before_commit_ok_TX_7(commit_ok_first):
    verdict = observations.check_recording([[consumer_on_the_committing_channel(commit_ok_first)]])
    assert verdict.ok, verdict.explain()


# Delivery numbering behind the channel's mailbox (DT-1, docs/reference/differences.md): basic.consume of a
# queue with a ready message and basic.nack of tag 1 in one write. RabbitMQ's queue dispatches the message
# when it takes the consume, but the channel numbers the delivery only when it handles the queue's
# message, after the nack already waiting: 406 unknown delivery tag 1, then the delivery with tag 1 after
# the channel.close (100 of 100). The trace checker takes a frame as if the channel's last unread
# deliveries were still in its mailbox (`spec/trace.py`, `_taken_before_numbering`).

def settled_before_numbered(tag_known: bool, read_first: bool = False) -> list:
    close = [] if tag_known else [
        entry("received", commands.Channel.Close(reply_code=406, reply_text="PRECONDITION_FAILED - unknown "
                                                 "delivery tag 1", class_id=60, method_id=120))]
    if read_first:      # the client read the delivery before it settled it: the tag was the channel's
        return publish_then_consume() + [
            entry("received", commands.Basic.ConsumeOk(consumer_tag="amq.ctag-1")), deliver(1),
            entry("sent", commands.Basic.Nack(delivery_tag=1, requeue=False)), *close]
    return publish_then_consume() + [
        entry("sent", commands.Basic.Nack(delivery_tag=1, requeue=False)),
        entry("received", commands.Basic.ConsumeOk(consumer_tag="amq.ctag-1")), *close, deliver(1),
    ]


def test_a_settlement_may_reach_the_channel_before_the_delivery_it_names_is_numbered_DT_1():
    rabbitmq = observations.check_recording([[settled_before_numbered(tag_known=False)]])
    assert rabbitmq.ok, rabbitmq.explain()
    spec_order = observations.check_recording([[settled_before_numbered(tag_known=True)]])
    assert spec_order.ok, spec_order.explain()
    # A tag the client has read is the channel's: refusing its settlement is ACK-4 broken.
    refused = observations.check_recording([[settled_before_numbered(tag_known=False, read_first=True)]])
    assert refused.status == trace.REJECTED and refused.index == 9, refused.explain()


def got_before_numbered(get_ok_tag: int) -> list:
    """consume of q (m1 ready) and basic.get of q (m2 behind it) in one write: the consume's delivery of
    m1 waits in the channel's mailbox while the get is answered, so the get-ok takes tag 1 and the
    delivery tag 2 (RabbitMQ's order); with tag 2 the get-ok would claim a tag the delivery before it took."""
    return publish_then_consume()[:5] + [
        entry("sent", commands.Basic.Publish(exchange="", routing_key="q"), body=b"m2"),
        publish_then_consume()[5], entry("sent", commands.Basic.Get(queue="q")),
        entry("received", commands.Basic.ConsumeOk(consumer_tag="amq.ctag-1")),
        entry("received", commands.Basic.GetOk(delivery_tag=get_ok_tag, message_count=0), body=b"m2"),
        entry("received", commands.Basic.Deliver(consumer_tag="amq.ctag-1", delivery_tag=3 - get_ok_tag,
                                                  routing_key="q"), body=b"m1"),
    ]


def test_a_get_ok_may_be_numbered_before_a_delivery_dispatched_earlier_DT_1():
    verdict = observations.check_recording([[got_before_numbered(1)]])
    assert verdict.ok, verdict.explain()
    wrong = observations.check_recording([[got_before_numbered(2)]])
    assert wrong.status == trace.REJECTED and wrong.index == 9, wrong.explain()


def got_empty_before_an_automatic_delivery(tag: int) -> list:
    """consume with no-ack of q (m1 ready) and basic.get of q in one write: the queue gave m1 to the
    consumer, whose delivery waits in the channel's mailbox while the get is answered empty (RabbitMQ
    3.10.8: get-empty, consume-ok, then the delivery with tag 1; seen in 1,000 generated programs). With
    tag 2 the delivery would claim a tag the get-empty never took."""
    return publish_then_consume()[:5] + [
        entry("sent", commands.Basic.Consume(queue="q", consumer_tag="", no_ack=True)),
        entry("sent", commands.Basic.Get(queue="q")), entry("received", commands.Basic.GetEmpty()),
        entry("received", commands.Basic.ConsumeOk(consumer_tag="amq.ctag-1")),
        entry("received", commands.Basic.Deliver(consumer_tag="amq.ctag-1", delivery_tag=tag, routing_key="q"),
              body=b"m1"),
    ]


def test_a_get_may_be_answered_before_an_automatic_delivery_dispatched_earlier_DT_1_AM_2():
    verdict = observations.check_recording([[got_empty_before_an_automatic_delivery(1)]])
    assert verdict.ok, verdict.explain()
    wrong = observations.check_recording([[got_empty_before_an_automatic_delivery(2)]])
    # rejected at the get-empty: no delivery it may overtake is tagged 2
    assert wrong.status == trace.REJECTED and wrong.index == 7, wrong.explain()


def _pending_commit_programs() -> dict:
    """The programs behind the recordings above (docs/reference/differences.md, TX-7), for a live run."""
    from rabbitproof.conformance import programs as P
    queues = (P.QueueFlags(True), P.QueueFlags())
    prelude = (P.Step(0, (P.Declare(1, 0), P.Declare(1, 1))), P.Step(0, (P.TxSelect(1),)))
    return {
        "pipelined-persistent": P.Program(queues, 1, prelude + (
            P.Step(0, (P.Publish(1, 0, persistent=True), P.TxCommit(1), P.Publish(1, 0))),)),
        "pipelined-transient": P.Program(queues, 1, prelude + (
            P.Step(0, (P.Publish(1, 1), P.TxCommit(1), P.Publish(1, 1))),)),
        "closed-behind-commit": P.Program(queues, 1, prelude + (
            P.Step(0, (P.Publish(1, 0, persistent=True), P.TxCommit(1), P.CloseChannel(1))),)),
        "consumer-on-committing-channel": P.Program(steps=(
            P.Step(0, (P.Declare(1, 0), P.Declare(1, 1))), P.Step(0, (P.Publish(1, 0), P.Consume(1, 0, ""))),
            P.Step(0, (P.TxSelect(1),)), P.Step(0, (P.Publish(1, 0), P.Publish(1, 0), P.TxCommit(1))))),
    }


@pytest.mark.parametrize("kind", BROKERS)
@pytest.mark.parametrize("name", sorted(_pending_commit_programs()))
def test_a_pending_commit_run_live_is_accepted_TX_7(name, kind, broker_for):
    from rabbitproof.conformance.judge import assert_accepted
    from rabbitproof.conformance.targets import TcpTarget, run_program
    target = TcpTarget.of(kind, broker_for(kind, False), quiet=0.05, timeout=REPLY_PATIENCE)
    assert_accepted(run_program(_pending_commit_programs()[name], target))
