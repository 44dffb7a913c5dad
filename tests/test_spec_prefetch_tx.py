"""Settlements a transaction holds back (TX-3) against the prefetch limits (PF-1..PF-5), as RabbitMQ
3.10.8 applies them (docs/reference/differences.md, "Held-back settlements and prefetch"; 20 runs of each measurement):

- a held-back basic.ack, basic.nack or basic.reject frees no place before tx.commit, neither under a
  per-consumer limit nor under the channel's global one: nothing is delivered until the commit;
- basic.qos(global=true) set from none starts its count at the unacknowledged deliveries only, so the
  held-back ones are left out, yet the commit counts them off: the channel then holds more than its
  limit, and the count can go below 0 (rabbit_limiter's ack cast: 0 stays 0, any other count drops);
- the commit counts off one run of settlements of one kind at a time (rabbit_channel's ack_cons), so
  the order of acks and rejects in the transaction decides how many deliveries follow.

Hand-written traces pin each of these (the spec accepts what RabbitMQ did and rejects one delivery
more); recorded runs on RabbitMQ are traces the spec accepts (two of them rejected by the spec before
this change); and ``prefetch_respected`` holds on ``tx_ack`` with a global limit added, where it
broke before, while a spec whose held-back acks free room at once breaks it there.
"""
from __future__ import annotations

from dataclasses import replace

import pytest
from pamqp import commands

from rabbitproof.spark_check.engine import LocalEngine
from rabbitproof.spec import broker, configs, machine, properties
from rabbitproof.recording import observations
from rabbitproof.spec.frames import BASIC_DELIVER, TX_COMMIT_OK
from rabbitproof.spec.properties_api import Property
from rabbitproof.spec.state import MODE_TX

from rabbitproof.recording import scenarios as S

from tests.test_spec_trace_queue import consume, deliver, qos
from tests.test_spec_tracekit import accepted, cfg, pub, rejected_at

CFG = cfg(messages=9)
TX = "c0 sent tx.select(ch=2)\nc0 received tx.select-ok(ch=2)"
COMMIT = "c0 sent tx.commit(ch=2)\nc0 received tx.commit-ok(ch=2)"


def ack(tag: int, multiple: bool = False) -> str:
    return f"c0 sent basic.ack(ch=2, delivery_tag={tag}, multiple={multiple})"


def reject(tag: int, requeue: bool) -> str:
    return f"c0 sent basic.reject(ch=2, delivery_tag={tag}, requeue={requeue})"


def nack(tag: int, requeue: bool) -> str:
    return f"c0 sent basic.nack(ch=2, delivery_tag={tag}, multiple=False, requeue={requeue})"


def pubs(first: int, last: int) -> str:
    return "\n".join(pub(n) for n in range(first, last + 1))


def rejected_after(text: str, line: str) -> None:
    rejected_at(f"{text}\n{line}  # REJECTED", config=CFG)


# ---------------------------------------------------------------- the global limit

# Measured: 2 deliveries, tx.select, ack 1 held back, qos(1, global): its count starts at 1 (tag 2
# only); nothing before the commit; the commit counts 1 off: one delivery (tag 3); ack multiple 3
# (tags 2 and 3) held back; the commit counts 2 off a count of 1: -1, so two deliveries follow.
HELD_THEN_GLOBAL = f"""
{pubs(1, 2)}
{consume()}
{deliver(1, 'm0.1')}
{deliver(2, 'm0.2')}
{TX}
{ack(1)}
{qos(1, True)}
{pubs(3, 7)}"""
FIRST_COMMIT = f"{HELD_THEN_GLOBAL}\n{COMMIT}\n{deliver(3, 'm0.3')}"
SECOND_COMMIT = f"{FIRST_COMMIT}\n{ack(3, multiple=True)}\n{COMMIT}\n{deliver(4, 'm0.4')}\n{deliver(5, 'm0.5')}"


def test_a_held_back_ack_frees_no_place_under_a_global_limit_before_the_commit_TX_3_PF_3():
    accepted(HELD_THEN_GLOBAL, CFG)
    rejected_after(HELD_THEN_GLOBAL, deliver(3, "m0.3"))
    rejected_after(f"{HELD_THEN_GLOBAL}\n{COMMIT}\n{deliver(3, 'm0.3')}", deliver(4, "m0.4"))


def test_the_commit_counts_off_what_the_limit_never_counted_TX_3_PF_5():
    # The channel holds tags 2 and 3 against a limit of 1 after the first commit, then 4 and 5.
    accepted(SECOND_COMMIT, CFG)
    rejected_after(f"{SECOND_COMMIT}", deliver(6, "m0.6"))
    # The second commit took the count from 1 to -1 (the old spec stopped at 0, so one delivery);
    # before that commit the held-back ack of tags 2 and 3 freed nothing.
    assert broker.count_off(1, 2) == -1 and broker.count_off(0, 2) == 0
    rejected_after(f"{FIRST_COMMIT}\n{ack(3, multiple=True)}", deliver(4, "m0.4"))


def test_a_global_limit_set_before_the_held_back_ack_counts_it_until_the_commit_TX_3_PF_3():
    text = f"""
{pubs(1, 2)}
{qos(2, True)}
{consume()}
{deliver(1, 'm0.1')}
{deliver(2, 'm0.2')}
{TX}
{ack(1)}
{pubs(3, 4)}"""
    rejected_after(text, deliver(3, "m0.3"))
    accepted(f"{text}\n{COMMIT}\n{deliver(3, 'm0.3')}", CFG)
    rejected_after(f"{text}\n{COMMIT}\n{deliver(3, 'm0.3')}", deliver(4, "m0.4"))


# Measured: 4 deliveries, tx.select, three settlements held back, qos(2, global): count 1, one
# delivery (tag 5), count 2. Acks 1 and 2 then a reject of 3: the commit counts 2 off (0), then
# the reject finds 0 and leaves it: two deliveries. The reject first: 2 - 1 = 1, then 1 - 2 = -1:
# three deliveries.
def commit_runs_trace(reject_first: bool) -> str:
    settles = [reject(1, False), ack(2), ack(3)] if reject_first else [ack(1), ack(2), reject(3, False)]
    lines = "\n".join(settles)
    return f"""
{pubs(1, 4)}
{consume()}
{deliver(1, 'm0.1')}
{deliver(2, 'm0.2')}
{deliver(3, 'm0.3')}
{deliver(4, 'm0.4')}
{TX}
{lines}
{qos(2, True)}
{pubs(5, 8)}
{deliver(5, 'm0.5')}
{COMMIT}
{deliver(6, 'm0.6')}
{deliver(7, 'm0.7')}"""


def test_the_commit_counts_off_one_run_of_one_kind_at_a_time_TX_3_PF_3():
    acks_first, reject_first = commit_runs_trace(False), commit_runs_trace(True)
    accepted(acks_first, CFG)
    rejected_after(acks_first, deliver(8, "m0.8"))
    accepted(f"{reject_first}\n{deliver(8, 'm0.8')}", CFG)
    assert [len(run) for run in broker.commit_runs(
        tuple((k, None) for k in (2, 0, 0, 1, 1, 0)))] == [1, 2, 2, 1]


@pytest.mark.parametrize("settle", ["nack", "reject"])
def test_a_held_back_requeue_frees_no_global_place_before_the_commit_TX_3_PF_3(settle):
    held = nack(1, True) if settle == "nack" else reject(1, True)
    text = f"""
{pubs(1, 2)}
{qos(1, True)}
{consume()}
{deliver(1, 'm0.1')}
{TX}
{held}"""
    rejected_after(text, deliver(2, "m0.2"))
    accepted(f"{text}\n{COMMIT}\n{deliver(2, 'm0.1', redelivered=True)}", CFG)


# ---------------------------------------------------------------- the per-consumer limit

@pytest.mark.parametrize("settle, then", [
    ("ack", deliver(2, "m0.2")),
    ("nack", deliver(2, "m0.1", redelivered=True)),
    ("reject", deliver(2, "m0.1", redelivered=True)),
])
def test_a_held_back_settlement_frees_no_consumer_place_before_the_commit_TX_3_PF_3(settle, then):
    held = {"ack": ack(1), "nack": nack(1, True), "reject": reject(1, True)}[settle]
    text = f"""
{pubs(1, 3)}
{qos(1, False)}
{consume()}
{deliver(1, 'm0.1')}
{TX}
{held}"""
    rejected_after(text, then)
    accepted(f"{text}\n{COMMIT}\n{then}", CFG)
    rejected_after(f"{text}\n{COMMIT}\n{then}", deliver(3, "m0.3" if settle == "ack" else "m0.2"))


# ---------------------------------------------------------------- recorded on RabbitMQ

def held_ack_then_global_qos(broker_, q: str) -> list:
    """The measured run of HELD_THEN_GLOBAL: 2 deliveries, ack 1 held back, qos(1, global), 4 more
    messages; the first commit brings one delivery, the ack of 2 and 3 and its commit two."""
    c = S.Client(broker_)
    c.step(S.open_(1), S.open_(2), S.declare(1, q))
    c.step(S.publish(1, q, b"p1"), S.publish(1, q, b"p2"))
    c.step(S.consume(2, q, "k"))
    c.step((2, commands.Tx.Select()))
    c.step(S.ack(2, 1), S.qos(2, 1, global_=True))
    c.step(*(S.publish(1, q, f"p{i}".encode()) for i in range(3, 7)))
    c.step((2, commands.Tx.Commit()))
    c.step(S.ack(2, 3, multiple=True))
    c.step((2, commands.Tx.Commit()))
    c.step(S.delete(1, q))
    return [[c.log()]]


def commit_runs(broker_, q: str) -> list:
    """The measured run of commit_runs_trace(True): a reject then two acks held back, qos(2, global);
    the commit counts off 1 then 2 from 2, and three deliveries follow."""
    c = S.Client(broker_)
    c.step(S.open_(1), S.open_(2), S.declare(1, q))
    c.step(*(S.publish(1, q, f"r{i}".encode()) for i in range(1, 5)))
    c.step(S.consume(2, q, "k"))
    c.step((2, commands.Tx.Select()))
    c.step(S.reject(2, 1, requeue=False), S.ack(2, 2), S.ack(2, 3), S.qos(2, 2, global_=True))
    c.step(*(S.publish(1, q, f"r{i}".encode()) for i in range(5, 9)))
    c.step((2, commands.Tx.Commit()))
    c.step(S.delete(1, q))
    return [[c.log()]]


def per_consumer_requeue(broker_, q: str) -> list:
    """qos(1) per consumer, a nack with requeue held back: nothing until the commit, then the
    requeued message again."""
    c = S.Client(broker_)
    c.step(S.open_(1), S.open_(2), S.declare(1, q))
    c.step(S.publish(1, q, b"s1"), S.publish(1, q, b"s2"))
    c.step(S.qos(2, 1), S.consume(2, q, "k"))
    c.step((2, commands.Tx.Select()))
    c.step(S.nack(2, 1, requeue=True))
    c.step((2, commands.Tx.Commit()))
    c.step(S.delete(1, q))
    return [[c.log()]]


RECORDED = {"held_ack_then_global_qos": held_ack_then_global_qos, "commit_runs": commit_runs,
            "per_consumer_requeue": per_consumer_requeue}


def deliveries_after_last_commit(run) -> int:
    """How many basic.deliver the client read after the last tx.commit-ok of the recording."""
    names = [o[1][0] for o in run.observations[0] if o[0] == "received"]
    last = max(i for i, n in enumerate(names) if n == TX_COMMIT_OK)
    return sum(1 for n in names[last + 1:] if n == BASIC_DELIVER)


@pytest.mark.parametrize("kind", ["rabbitmq", "impl"])
@pytest.mark.parametrize("name", sorted(RECORDED))
def test_recorded_run_is_a_trace_the_spec_accepts_TX_3_PF_3(name, kind, request, queue_name):
    """On RabbitMQ, and on impl, which counted a commit's settlements off one frame at a time, stopped
    its count at 0 and wrote the deliveries a commit freed before its commit-ok (all three rejected)."""
    broker_ = request.getfixturevalue("rabbitmq_node" if kind == "rabbitmq" else "impl_broker_module")
    run = observations.from_recording(RECORDED[name](broker_, queue_name))
    verdict = run.check()
    assert verdict.ok, verdict.explain() + "\n" + run.text()
    # What the run must show for the trace to say anything: the deliveries the limits allowed.
    expected = {"held_ack_then_global_qos": 2, "commit_runs": 3, "per_consumer_requeue": 1}[name]
    assert deliveries_after_last_commit(run) == expected, run.text()


# ---------------------------------------------------------------- prefetch_respected

def tx_ack_with_global_limit():
    """``tx_ack`` with one basic.qos(prefetch=1, global=true) allowed: before the fix the spec
    broke ``prefetch_respected`` in 16 steps here (2 deliveries, tx.select, ack 1, qos 1 global)."""
    base = configs.get("tx_ack")
    roles = dict(base.roles)
    roles[(0, 2)] = replace(roles[(0, 2)], qos=((1, True),))
    return replace(base, name="tx_ack_global", qos=1, roles=roles)


def over_the_limit(state) -> bool:
    """A channel holds more consumer deliveries than its global limit, by deliveries the limit never
    counted (what RabbitMQ does after the commit, and the old property called a violation)."""
    for conn in state.conns:
        for channel in conn.channels:
            held = sum(1 for u in channel.unacked + tuple(u for _, u in channel.tx_settles) if u.consumer)
            if channel.global_limit and channel.qos_uncounted and held > channel.global_limit:
                return True
    return False


OVER_THE_LIMIT = Property("over_the_limit", "sometimes", ("PF-5", "TX-3"), over_the_limit,
                          over_the_limit.__doc__)


def explore(*chosen: Property, stop: bool = False):
    return LocalEngine().explore(machine, tx_ack_with_global_limit(), chosen, stop_on_violation=stop)


def test_prefetch_respected_holds_with_a_transaction_under_a_global_limit_PF_5_TX_3():
    result = explore(properties.REGISTRY["prefetch_respected"], OVER_THE_LIMIT)
    assert result.complete and result.error is None
    # Pinned: 6,614 states without the qos; the same count with exact=True (no collision).
    assert (result.distinct_states, result.depth) == (63_859, 33)
    assert [(p.name, p.verdict) for p in result.properties] == [
        ("prefetch_respected", "holds"), ("over_the_limit", "witnessed")]


def test_a_spec_whose_held_back_acks_free_room_breaks_prefetch_respected_TX_3(monkeypatch):
    """A broker that counts a held-back ack off at once (against TX-3) delivers past the limit."""
    settle = broker._settle_frame

    def eager(state, c, ch, channel, tag, multiple, kind):
        state = settle(state, c, ch, channel, tag, multiple, kind)
        after = state.conns[c].channels[ch - 1]
        if channel.mode == MODE_TX and after.status == channel.status:
            freed = after.tx_settles[len(channel.tx_settles):]
            state = broker.with_channel(state, c, ch, broker.released(after, tuple(u for _, u in freed)))
        return state

    monkeypatch.setattr(broker, "_settle_frame", eager)
    result = explore(properties.REGISTRY["prefetch_respected"], stop=True)
    [prop] = result.properties
    assert prop.verdict == "VIOLATED", prop.verdict
