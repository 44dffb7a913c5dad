"""The trace checker's crash search (spec/trace.py, ``_crash``): a crash leaves every disk the spec
allows, whatever the broker had taken and written, and the shortcuts that make long traces with a
crash decidable (frames taken just before the crash, disk records of copies that left memory, ghost
variables forgotten) neither accept what the spec cannot produce nor reject what it can."""
from __future__ import annotations

from dataclasses import replace

import pytest

from rabbitproof.spec import configs, frames, simulate, trace
from rabbitproof.spec.roles import QueueSpec

from rabbitproof.bench import trace_checker as trace_bench
from rabbitproof.bench.trace_checker import BENCH

from tests.test_spec_tracekit import accepted, cfg, pub, rejected_at

CRASHING = cfg(crashes=1)
SIZE_REJECTED = 40      # a rejection searches every explanation: kept short, the bench times acceptance

# m0.1 is delivered and acknowledged, and the qos round trip shows the broker took the ack (a channel's
# frames are taken in order). The disk may have written m0.1 before the ack and not removed it yet.
ACKED_THEN_CRASH = f"""
{pub(1, persistent=True)}
c1 sent basic.consume(ch=1, queue=q0, consumer_tag=1, no_ack=False)
c1 received basic.consume-ok(ch=1, consumer_tag=1)
c1 received basic.deliver(ch=1, consumer_tag=1, delivery_tag=1, redelivered=False, msg=m0.1)
c1 sent basic.ack(ch=1, delivery_tag=1, multiple=False)
c1 sent basic.qos(ch=1, prefetch_count=0, global=False)
c1 received basic.qos-ok(ch=1)
c0 lost
c1 lost
c1 connect
c1 sent basic.get(ch=1, queue=q0, no_ack=False)
"""
GOT_BACK = "c1 received basic.get-ok(ch=1, delivery_tag=1, redelivered=True, msg=m0.1, message_count=0)"
GONE = "c1 received basic.get-empty(ch=1)"


def test_acked_copy_written_before_its_ack_may_come_back_after_crash_TX_8():
    # Formerly rejected: the checker wrote copies to disk only when a confirm needed it, so a copy
    # acknowledged before any confirm could never be on disk at the crash.
    accepted(ACKED_THEN_CRASH + GOT_BACK, CRASHING)
    accepted(ACKED_THEN_CRASH + GONE, CRASHING)


def test_acked_copy_never_comes_back_without_a_crash():
    rejected_at(ACKED_THEN_CRASH + GOT_BACK + "  # REJECTED\n", allowed=(GONE[3:],), exact=True)


def test_transient_acked_copy_never_comes_back_DU_2():
    text = ACKED_THEN_CRASH.replace("persistent=True", "persistent=False")
    accepted(text + GONE, CRASHING)
    rejected_at(text + GOT_BACK + "  # REJECTED\n", allowed=(GONE[3:],), config=CRASHING, exact=True)


# A declare in flight when the broker crashes may or may not have been taken: the durable queue
# exists after the crash, or it does not. Frames like it are never taken for the crash's sake.
DECLARED_THEN_CRASH = """
c0 sent queue.declare(ch=1, queue=q1, durable=True, exclusive=False)
c0 lost
c0 connect
c0 sent basic.consume(ch=1, queue=q1, consumer_tag=1, no_ack=False)
"""


@pytest.mark.parametrize("reply", [
    "c0 received basic.consume-ok(ch=1, consumer_tag=1)",
    "c0 received channel.close(ch=1, reply_code=404, text=\"NOT_FOUND - no queue 'q1' in vhost '/'\")\n"
    "c0 sent channel.close-ok(ch=1)",
])
def test_declare_in_flight_at_crash_may_or_may_not_be_taken(reply):
    config = cfg(crashes=1, queues=(QueueSpec(durable=True), QueueSpec(durable=True, declared=False)))
    accepted(DECLARED_THEN_CRASH + reply, config)


def test_publish_in_flight_at_crash_may_or_may_not_be_taken_PC_10():
    text = f"""
    {pub(1, persistent=True)}
    {pub(2, persistent=True)}
    c0 lost
    c0 connect
    c0 sent basic.get(ch=1, queue=q0, no_ack=False)
    """
    for got in ("c0 received basic.get-empty(ch=1)",
                "c0 received basic.get-ok(ch=1, delivery_tag=1, redelivered=True, msg=m0.1, message_count=0)",
                "c0 received basic.get-ok(ch=1, delivery_tag=1, redelivered=True, msg=m0.2, message_count=0)",
                "c0 received basic.get-ok(ch=1, delivery_tag=1, redelivered=True, msg=m0.1, message_count=1)"):
        accepted(text + got, CRASHING)
    rejected_at(text + "c0 received basic.get-ok(ch=1, delivery_tag=1, redelivered=True, msg=m0.2, "
                       "message_count=1)  # REJECTED\n", config=CRASHING)


def bench_run(size: int, seed: int):
    """A trace of the trace benchmark's workload, cut at about ``size`` observations."""
    return simulate.random_run(BENCH, seed, max_steps=20 * size, crash_at=int(size * 0.9), max_observations=size)


@pytest.mark.parametrize("seed", range(1, 9))
def test_bench_workload_traces_are_accepted(seed):
    run = bench_run(60, seed)
    verdict = trace.check(run.observations, BENCH, max_nodes=200_000)
    assert verdict.ok, verdict.explain()


def corrupted(observations: dict) -> tuple[dict, int, int]:
    """The observations with the last delivery after a reconnection naming a message never published
    (no execution explains it, lost connections and crashes included). Returns them and where it is."""
    for c in sorted(observations, reverse=True):
        seq = list(observations[c])
        if ("connect",) not in seq:
            continue
        for i in range(len(seq) - 1, seq.index(("connect",)), -1):
            kind, *rest = seq[i]
            if kind == "received" and rest[0][0] == frames.BASIC_DELIVER:
                seq[i] = ("received", rest[0][:5] + (999,))
                return {**observations, c: seq}, c, i
    raise AssertionError("no delivery after a reconnection")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_corrupted_bench_traces_are_rejected_where_corrupted(seed):
    run = bench_run(SIZE_REJECTED, seed)
    observations, c, i = corrupted(run.observations)
    verdict = trace.check(observations, BENCH, max_nodes=500_000)
    assert verdict.status == trace.REJECTED, verdict.explain()
    assert (verdict.conn, verdict.index) == (c, i), verdict.explain()


@pytest.mark.parametrize("name", ["crash", "confirms"])
def test_more_crash_runs_of_the_standard_configurations_are_accepted(name):
    config = replace(configs.get(name), messages=9)
    for seed in range(25, 40):
        run = simulate.random_run(config, seed, max_steps=2000)
        verdict = trace.check(run.observations, config, max_nodes=200_000)
        assert verdict.ok, f"{name} seed {seed}: {verdict.explain()}"


def test_publish_into_a_connection_a_crash_dropped_names_no_message():
    # A publish the client writes after the crash, before it sees the connection lost, reaches no broker
    # and takes no message number: the next connection's first publish is m0.1 again. The search must
    # not take such a publish before every crash it could follow.
    text = f"""
    {pub(1, persistent=True)}
    c0 lost
    c0 connect
    {pub(1, persistent=True)}  AGAIN
    c0 sent basic.get(ch=1, queue=q0, no_ack=False)
    c0 received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m0.1, message_count=0)
    """
    accepted(text.replace("  AGAIN", ""), CRASHING)
    # Without a crash the connection was lost with the broker up, which took m0.1: the next is m0.2.
    rejected_at(text.replace("  AGAIN", "  # REJECTED"), allowed=("sent (any client frame)",))


def test_bench_runs_and_reports_every_trace_accepted(capsys):
    assert trace_bench.main(["--sizes", "40,60", "--seeds", "2"]) == 0
    out = capsys.readouterr().out
    assert "growth with the trace's length" in out and out.count("accepted") >= 4


# ---------------------------------------------------------------- reads and the real-time order

def in_order(text: str) -> tuple[dict, tuple]:
    """The observations of a trace written in real-time order, and that order (``trace.check``)."""
    lines = [line.split("#")[0].strip() for line in text.splitlines()]
    lines = [line for line in lines if line]
    return trace.parse(text), tuple(int(line.split()[0][1:]) for line in lines)


# Recorded on the impl core in process (a conformance program, about one in a few thousand): c1's
# channel error was written before the crash and read by c1 only after it; c1 never answered it.
CLOSE_READ_AFTER_CRASH = f"""
c0 sent queue.declare(ch=1, queue=q0, durable=False, exclusive=False)
c0 received queue.declare-ok(ch=1, queue=q0)
{pub(1, persistent=True)}
c0 sent basic.nack(ch=1, delivery_tag=9, multiple=False, requeue=False)
c0 received channel.close(ch=1, reply_code=406, text='PRECONDITION_FAILED - unknown delivery tag 9')
c0 sent channel.close-ok(ch=1)
c0 sent channel.open(ch=1)
c0 received channel.open-ok(ch=1)
c1 sent basic.ack(ch=2, delivery_tag=8, multiple=False)
c0 lost
c0 connect
c1 received channel.close(ch=2, reply_code=406, text='PRECONDITION_FAILED - unknown delivery tag 8')
c1 lost
c1 connect
c0 sent queue.declare(ch=1, queue=q0, durable=False, exclusive=False)
c0 received queue.declare-ok(ch=1, queue=q0)
c0 sent basic.get(ch=1, queue=q0, no_ack=False)
c0 received basic.get-empty(ch=1)
"""
TRANSIENT_QUEUE = cfg(crashes=1, queues=(QueueSpec(durable=False, declared=False),))


def test_a_frame_written_before_a_crash_may_be_read_after_it_DU_2():
    # The real-time order puts c1's read of its channel.close after c0 saw the crash; the frame was
    # in c1's socket before it. The crash has its place before c0's lost connection, and the
    # non-durable queue is empty after it (DU-1).
    obs, order = in_order(CLOSE_READ_AFTER_CRASH)
    verdict = trace.check(obs, TRANSIENT_QUEUE, order=order)
    assert verdict.ok, verdict.explain()
    # Without the crash there is nothing to explain the empty queue.
    obs, order = in_order(CLOSE_READ_AFTER_CRASH.replace("c0 lost\nc0 connect\n", "").replace(
        "c1 lost\nc1 connect\n", ""))
    verdict = trace.check(obs, TRANSIENT_QUEUE, order=order)
    assert not verdict.ok and verdict.observation == ("received", (frames.BASIC_GET_EMPTY, 1)), verdict.explain()


def test_the_real_time_order_still_binds_writes():
    # c1 publishes only after c0's get came back empty: c0 cannot have got that message, although
    # without the order the spec could take c1's publish first.
    text = f"""
    c0 sent basic.get(ch=1, queue=q0, no_ack=True)
    c0 received basic.get-ok(ch=1, delivery_tag=1, redelivered=False, msg=m1.1, message_count=0)
    {pub(1, c=1)}
    """
    obs, order = in_order(text)
    assert trace.check(obs, cfg()).ok
    verdict = trace.check(obs, cfg(), order=order)
    assert not verdict.ok and (verdict.conn, verdict.index) == (0, 1), verdict.explain()
