"""The rules a trace cannot show (disk, fsync, crash, tx non-atomicity, ghost history), checked by
driving ``spec.machine.step`` with explicit actions from an initial state of a small Config, and
asserting the resulting state fields, the frames, and the registered properties (hazards falsified,
invariants kept)."""
from __future__ import annotations

from rabbitproof.spec import actions as A
from rabbitproof.spec import machine, network, properties, trace
from rabbitproof.spec.configs import Config
from rabbitproof.spec.frames import (
    BASIC_ACK, BASIC_DELIVER, BASIC_PUBLISH, CONFIRM_SELECT_OK, TX_COMMIT_OK, Wire,
)
from rabbitproof.spec.roles import QueueSpec
from rabbitproof.spec.state import (
    CONN_DOWN, FATE_ACKED, FATE_AUTO, FATE_LOST_AUTOACK, FATE_LOST_CRASH, Entry, Pending, Unacked,
)

DURABLE = (QueueSpec(durable=True),)


def config(**changes) -> Config:
    values = dict(name="m", description="machine", connections=1, channels=2, messages=9, requeues=9,
                  bad=9, crashes=1, failures=1, qos=9, gets=9, queues=DURABLE)
    values.update(changes)
    return Config(**values)


def run(state, cfg, *acts):
    """Apply the actions in order; internal (broker, disk, fault) actions must be enabled. Returns
    the state and every Wire label."""
    labels = []
    for act in acts:
        if isinstance(act, trace.INTERNAL + (A.NetworkLoss,)):
            assert act in machine.enabled(state, cfg), f"{act} is not enabled"
        state, out = machine.step(state, act)
        labels.extend(out)
    return state, labels


def take(state, cfg, c=0):
    """The broker takes every frame in flight from connection c, lowest channel first."""
    while network.movable(state.conns[c].to_broker):
        state, _ = run(state, cfg, A.BrokerTakeFrame(c, network.movable(state.conns[c].to_broker)[0]))
    return state


def receive(state, c=0):
    """The client of connection c reads every frame in flight to it, lowest channel first; returns the
    state and the frames."""
    frames = []
    while network.movable(state.conns[c].to_client):
        state, labels = machine.step(state, A.ClientReceive(c, network.movable(state.conns[c].to_client)[0]))
        frames.append(labels[0].frame)
    return state, frames


def holds(name, state) -> bool:
    return properties.get(name).holds(state)


def invariants_hold(state) -> None:
    failing = [name for name in properties.ALWAYS if not holds(name, state)]
    assert not failing, failing


def start(cfg):
    return machine.initial_states(cfg)[0]


def publish(state, cfg, ch=1, key=0, persistent=True, mandatory=False, exchange=0):
    state, labels = run(state, cfg, A.ClientPublish(0, ch, exchange, key, mandatory, persistent))
    assert labels[0].frame[0] == BASIC_PUBLISH
    return take(state, cfg)


def confirm_mode(state, cfg, ch=1):
    state, _ = run(state, cfg, A.ClientConfirmSelect(0, ch))
    state = take(state, cfg)
    state, frames = receive(state)
    assert frames == [(CONFIRM_SELECT_OK, ch)]
    return state


def tx_mode(state, cfg, ch=1):
    state, _ = run(state, cfg, A.ClientTxSelect(0, ch))
    state = take(state, cfg)
    return receive(state)[0]


# ---------------------------------------------------------------- PC-5, PC-10, DU-2: confirms and the disk

def test_persistent_confirm_waits_for_fsync_PC_5():
    cfg = config()
    state = confirm_mode(start(cfg), cfg)
    state = publish(state, cfg, persistent=True)
    channel = state.conns[0].channels[0]
    assert channel.unconfirmed == (Pending(1, 1, False, ((0, 1),)),)
    enabled = machine.enabled(state, cfg)
    assert not any(isinstance(a, A.BrokerConfirm) for a in enabled)
    assert A.DiskFsync(0, 1, 1, True) in enabled
    state, _ = run(state, cfg, A.DiskFsync(0, 1, 1, True))
    assert state.disk == ((0, 1, 1),)
    assert state.conns[0].channels[0].unconfirmed == (Pending(1, 1, False, ()),)
    state, labels = run(state, cfg, A.BrokerConfirm(0, 1, 1, False))
    assert labels == [Wire(0, False, (BASIC_ACK, 1, 1, 0))]
    assert state.confirmed_msgs == (1,)
    assert holds("confirmed_only_when_on_disk", state)
    invariants_hold(state)


def test_transient_message_confirmed_without_disk_PC_5():
    cfg = config()
    state = confirm_mode(start(cfg), cfg)
    state = publish(state, cfg, persistent=False)
    assert A.BrokerConfirm(0, 1, 1, False) in machine.enabled(state, cfg)
    assert machine.enabled(state, cfg).count(A.DiskFsync(0, 1, 1, True)) == 0
    # A persistent message to a non-durable queue is not written either.
    cfg2 = config(queues=(QueueSpec(durable=False),))
    state = publish(confirm_mode(start(cfg2), cfg2), cfg2, persistent=True)
    assert A.BrokerConfirm(0, 1, 1, False) in machine.enabled(state, cfg2)
    assert not state.disk


def test_confirmed_only_when_on_disk_is_falsified_by_a_premature_confirm_PC_5():
    cfg = config()
    state = publish(confirm_mode(start(cfg), cfg), cfg, persistent=True)
    early = state._replace(confirmed_msgs=(1,))
    assert not holds("confirmed_only_when_on_disk", early)


def confirmed_then_unconfirmed(cfg):
    """m0.1 persistent, fsynced and confirmed; m0.2 persistent, taken but not written."""
    state = confirm_mode(start(cfg), cfg)
    state = publish(state, cfg)
    state, _ = run(state, cfg, A.DiskFsync(0, 1, 1, True), A.BrokerConfirm(0, 1, 1, False))
    return publish(state, cfg)


def test_confirmed_message_survives_crash_unconfirmed_may_not_PC_10():
    cfg = config()
    state = confirmed_then_unconfirmed(cfg)
    crashed, _ = run(state, cfg, A.BrokerCrash())
    assert (0, 2, FATE_LOST_CRASH, 2, True) in crashed.fates
    assert not any(f[3] == 1 for f in crashed.fates)
    assert holds("confirmed_survives_crash", crashed)
    assert not holds("persistent_never_lost", crashed)
    invariants_hold(crashed)
    restarted, _ = run(crashed, cfg, A.BrokerRestart())
    assert restarted.queues[0].ready == (Entry(1, 1, True, True),)
    assert holds("recovered_after_crash", restarted)


def test_confirmed_survives_crash_property_catches_a_lost_confirmed_copy_PC_10():
    cfg = config()
    state = confirmed_then_unconfirmed(cfg)
    bogus = state._replace(fates=((0, 1, FATE_LOST_CRASH, 1, True),))
    assert not holds("confirmed_survives_crash", bogus)


def test_persistent_written_survives_transient_never_does_DU_2():
    cfg = config(queues=(QueueSpec(durable=True), QueueSpec(durable=False)))
    state = start(cfg)
    state = publish(state, cfg, key=0, persistent=True)      # m0.1: written below
    state = publish(state, cfg, key=0, persistent=False)     # m0.2: transient
    state = publish(state, cfg, key=0, persistent=True)      # m0.3: never written
    state = publish(state, cfg, key=1, persistent=True)      # m0.4: non-durable queue
    pending = [a for a in machine.enabled(state, cfg) if isinstance(a, A.DiskFsync)]
    assert pending == [A.DiskFsync(0, 1, 1, True), A.DiskFsync(0, 3, 3, True)]
    state, _ = run(state, cfg, A.DiskFsync(0, 1, 1, True), A.BrokerCrash())
    assert state.disk == ((0, 1, 1),)
    assert {(f[0], f[1], f[2]) for f in state.fates} == {
        (0, 2, FATE_LOST_CRASH), (0, 3, FATE_LOST_CRASH), (1, 1, FATE_LOST_CRASH)}
    invariants_hold(state)
    state, _ = run(state, cfg, A.BrokerRestart())
    assert state.queues[0].ready == (Entry(1, 1, True, True),)
    assert state.queues[1].ready == () and not state.queues[1].exists


# ---------------------------------------------------------------- DU: restart

def test_durable_queue_survives_restart_other_queues_do_not_DU_1():
    cfg = config(queues=(QueueSpec(durable=True), QueueSpec(durable=False)))
    state, _ = run(start(cfg), cfg, A.BrokerCrash())
    assert not state.broker_up
    assert [q.exists for q in state.queues] == [True, False]
    assert holds("down_broker_holds_only_disk", state)
    assert machine.enabled(state, cfg) == (A.BrokerRestart(),)
    state, _ = run(state, cfg, A.BrokerRestart())
    assert [q.exists for q in state.queues] == [True, False]
    assert all(conn.status == CONN_DOWN for conn in state.conns)


def test_after_restart_nothing_is_outstanding_DU_3():
    cfg = config()
    state = start(cfg)
    state = publish(state, cfg)                              # m0.1, delivered below
    state = publish(state, cfg)                              # m0.2, never delivered
    state, _ = run(state, cfg, A.DiskFsync(0, 1, 1, True), A.DiskFsync(0, 2, 2, True),
                   A.ClientConsume(0, 2, 0, 1, False))
    state = take(state, cfg)
    state, labels = run(state, cfg, A.BrokerDeliver(0))
    assert labels == [Wire(0, False, (BASIC_DELIVER, 2, 1, 1, 0, 1))]
    assert state.conns[0].channels[1].unacked == (Unacked(1, 0, 1, 1, False, True, 1),)
    state, _ = run(state, cfg, A.BrokerCrash())
    assert holds("down_broker_holds_only_disk", state)
    assert all(not ch.unacked for conn in state.conns for ch in conn.channels)
    state, _ = run(state, cfg, A.BrokerRestart())
    # Both are ready again, in order; the never-delivered one may also be flagged redelivered (DU-3).
    assert state.queues[0].ready == (Entry(1, 1, True, True), Entry(2, 2, True, True))
    assert state.queues[0].ring == ()
    invariants_hold(state)


def test_exclusive_queue_durable_flag_ignored_and_deleted_with_connection_DU_4():
    cfg = config(connections=2, queues=(QueueSpec(durable=True), QueueSpec(exclusive=True, declared=False)))
    state = start(cfg)
    state, labels = run(state, cfg, A.ClientDeclareQueue(0, 1, 1, True, True))
    state = take(state, cfg)
    assert state.queues[1].exists and state.queues[1].owner == 1 and not state.queues[1].durable
    assert holds("exclusive_queue_has_owner", state)
    state = publish(state, cfg, key=1, persistent=True)
    assert not [a for a in machine.enabled(state, cfg) if isinstance(a, A.DiskFsync)]
    state, _ = run(state, cfg, A.ClientConnectionClose(0, 0))
    state = take(state, cfg)
    assert not state.queues[1].exists
    assert (1, 1, 8, 1, True) in state.fates                 # FATE_QUEUE_DELETED
    invariants_hold(state)


# ---------------------------------------------------------------- TX: commit, the disk and crashes

def committed_pair(cfg):
    """Two persistent publishes committed in one transaction, nothing written yet."""
    state = tx_mode(start(cfg), cfg)
    state, _ = run(state, cfg, A.ClientPublish(0, 1, 0, 0, False, True), A.ClientPublish(0, 1, 0, 0, False, True))
    state = take(state, cfg)
    assert state.queues[0].ready == ()                       # TX-2: held back
    state, _ = run(state, cfg, A.ClientTxCommit(0, 1))
    return take(state, cfg)


def test_commit_ok_waits_for_the_disk_TX_7():
    cfg = config()
    state = committed_pair(cfg)
    channel = state.conns[0].channels[0]
    assert channel.commit_pending and channel.committing == ((0, 1), (0, 2))
    assert [e.msg for e in state.queues[0].ready] == [1, 2]
    assert not any(isinstance(a, A.BrokerCommitOk) for a in machine.enabled(state, cfg))
    state, _ = run(state, cfg, A.DiskFsync(0, 1, 1, True))
    assert not any(isinstance(a, A.BrokerCommitOk) for a in machine.enabled(state, cfg))
    state, labels = run(state, cfg, A.DiskFsync(0, 2, 2, True), A.BrokerCommitOk(0, 1))
    assert labels == [Wire(0, False, (TX_COMMIT_OK, 1))]
    assert holds("commit_published", state)
    invariants_hold(state)


def test_crash_during_commit_leaves_part_of_the_transaction_TX_9():
    cfg = config()
    state = committed_pair(cfg)
    assert state.tx_groups == (((0, 1), (0, 2)),)
    state, _ = run(state, cfg, A.DiskFsync(0, 2, 2, True), A.BrokerCrash())
    assert not holds("tx_commit_atomic", state)
    state, _ = run(state, cfg, A.BrokerRestart())
    assert [e.msg for e in state.queues[0].ready] == [2]
    invariants_hold(state)


def test_committed_ack_comes_back_after_crash_TX_8():
    cfg = config()
    state = publish(start(cfg), cfg)
    state, _ = run(state, cfg, A.DiskFsync(0, 1, 1, True))
    state = tx_mode(state, cfg, ch=2)
    state, _ = run(state, cfg, A.ClientGet(0, 2, 0, False))
    state = take(state, cfg)
    state, _ = receive(state)
    state, _ = run(state, cfg, A.ClientAck(0, 2, 1, False))
    state = take(state, cfg)
    assert state.conns[0].channels[1].tx_settles and not state.fates       # TX-3: held back
    assert holds("tx_effects_invisible", state)
    state, _ = run(state, cfg, A.ClientTxCommit(0, 2))
    state = take(state, cfg)
    assert (0, 1, FATE_ACKED, 1, True) in state.fates
    assert holds("commit_applied_acks", state)
    # commit-ok went out at once: acks wait for no disk (TX-8); the removal is still pending.
    assert state.conns[0].to_client[2][-1] == (TX_COMMIT_OK, 2)
    assert A.DiskFsync(0, 1, 1, False) in machine.enabled(state, cfg)
    state, _ = run(state, cfg, A.BrokerCrash(), A.BrokerRestart())
    assert state.queues[0].ready == (Entry(1, 1, True, True),)
    assert not holds("acked_never_redelivered", state)


def test_copy_back_after_crash_is_settled_again_in_a_transaction_TX_8_TX_3():
    """The copy of test_committed_ack_comes_back_after_crash_TX_8, back after the crash, is received
    again and acknowledged inside a transaction. The restart recorded it in the ghost ``revived``: its
    "acknowledged" fate is of its earlier life, so the held-back ack has not taken effect
    (tx_effects_invisible holds) while the hazard still sees an acknowledged message come back. A copy
    recovered without a fate is not revived."""
    cfg = config()
    state = publish(start(cfg), cfg)
    state = publish(state, cfg)
    state, _ = run(state, cfg, A.DiskFsync(0, 1, 1, True), A.DiskFsync(0, 2, 2, True))
    state = tx_mode(state, cfg, ch=2)
    state, _ = run(state, cfg, A.ClientGet(0, 2, 0, False))
    state = take(state, cfg)
    state, _ = receive(state)
    state, _ = run(state, cfg, A.ClientAck(0, 2, 1, False), A.ClientTxCommit(0, 2))
    state = take(state, cfg)
    assert {(f[0], f[1], f[2]) for f in state.fates} == {(0, 1, FATE_ACKED)} and not state.revived
    state, _ = run(state, cfg, A.BrokerCrash(), A.BrokerRestart())
    assert [e.key for e in state.queues[0].ready] == [1, 2]
    assert state.revived == ((0, 1),)                                        # copy 2 had no fate
    state, _ = run(state, cfg, A.ClientConnect(0, 0))
    state = tx_mode(state, cfg, ch=2)
    state, _ = run(state, cfg, A.ClientGet(0, 2, 0, False))
    state = take(state, cfg)
    state, _ = receive(state)
    state, _ = run(state, cfg, A.ClientAck(0, 2, 1, False))
    state = take(state, cfg)
    assert [(u.queue, u.key) for _, u in state.conns[0].channels[1].tx_settles] == [(0, 1)]
    assert holds("tx_effects_invisible", state)
    assert not holds("acked_never_redelivered", state)
    invariants_hold(state)
    # The same state with the ghost forgotten reads the earlier life's fate as this ack's effect.
    assert not holds("tx_effects_invisible", state._replace(revived=()))


def test_rollback_restores_held_back_acks_TX_3():
    cfg = config()
    state = publish(start(cfg), cfg, persistent=False)
    state = tx_mode(state, cfg)
    state, _ = run(state, cfg, A.ClientGet(0, 1, 0, False))
    state = take(state, cfg)
    state, _ = receive(state)
    state, _ = run(state, cfg, A.ClientAck(0, 1, 1, False), A.ClientTxRollback(0, 1))
    state = take(state, cfg)
    channel = state.conns[0].channels[0]
    assert channel.unacked == (Unacked(1, 0, 1, 1, False, False, 0),) and channel.tx_settles == ()
    assert state.conns[0].clients[0].held == (1,)
    assert holds("rollback_kept_outstanding", state)


# ---------------------------------------------------------------- hazards from the seeds

def test_automatic_delivery_lost_in_flight_AM_2():
    cfg = config(reconnects=1, losses=1)
    state = publish(start(cfg), cfg, persistent=False)
    state, _ = run(state, cfg, A.ClientConsume(0, 2, 0, 1, True))
    state = take(state, cfg)
    state, _ = run(state, cfg, A.BrokerDeliver(0))
    assert state.queues[0].ready == () and state.conns[0].auto == ((2, 1, 0, 1, 1, False),)
    assert state.conns[0].channels[1].unacked == ()
    delivered, _ = receive(state)
    assert (0, 1, FATE_AUTO, 1, False) in delivered.fates
    lost, _ = run(state, cfg, A.NetworkLoss(0))
    assert (0, 1, FATE_LOST_AUTOACK, 1, False) in lost.fates
    assert not holds("auto_ack_never_loses", lost)
    invariants_hold(lost)


def test_lowered_prefetch_leaves_more_outstanding_PF_5():
    cfg = config()
    state, _ = run(start(cfg), cfg, A.ClientQos(0, 2, 2, True), A.ClientConsume(0, 2, 0, 1, False))
    state = take(state, cfg)
    for _ in range(3):
        state = publish(state, cfg, persistent=False)
    state, _ = run(state, cfg, A.BrokerDeliver(0), A.BrokerDeliver(0))
    assert A.BrokerDeliver(0) not in machine.enabled(state, cfg)          # PF-3: at the bound
    state, _ = run(state, cfg, A.ClientQos(0, 2, 1, True))
    state = take(state, cfg)
    channel = state.conns[0].channels[1]
    assert (channel.global_limit, channel.qos_excess, len(channel.unacked)) == (1, 2, 2)
    assert not holds("outstanding_within_prefetch", state)
    assert holds("prefetch_respected", state)
    invariants_hold(state)


def test_confirms_out_of_publish_order_PC_7():
    cfg = config()
    state = confirm_mode(start(cfg), cfg)
    state = publish(state, cfg, persistent=True)
    state = publish(state, cfg, persistent=False)
    enabled = machine.enabled(state, cfg)
    assert A.BrokerConfirm(0, 1, 2, False) in enabled and A.BrokerConfirm(0, 1, 1, False) not in enabled
    state, _ = run(state, cfg, A.BrokerConfirm(0, 1, 2, False))
    state, frames = receive(state)
    assert frames == [(BASIC_ACK, 1, 2, 0)]
    assert not holds("confirms_in_publish_order", state)
    invariants_hold(state)


def test_consumer_sees_messages_out_of_order_queue_stays_in_order_RQ_3():
    cfg = config()
    state, _ = run(start(cfg), cfg, A.ClientQos(0, 1, 1, False), A.ClientConsume(0, 1, 0, 1, False),
                   A.ClientQos(0, 2, 1, False), A.ClientConsume(0, 2, 0, 2, False))
    state = take(state, cfg)
    for _ in range(3):
        state = publish(state, cfg, persistent=False)
    state, labels = run(state, cfg, A.BrokerDeliver(0), A.BrokerDeliver(0))
    assert [(w.frame[1], w.frame[5]) for w in labels] == [(1, 1), (2, 2)]
    state, _ = receive(state)
    state, _ = run(state, cfg, A.ClientAck(0, 2, 1, False))
    state = take(state, cfg)
    state, labels = run(state, cfg, A.BrokerDeliver(0))
    assert [(w.frame[1], w.frame[5]) for w in labels] == [(2, 3)]
    state, _ = receive(state)
    assert holds("consumer_sees_publication_order", state)
    state, _ = run(state, cfg, A.ClientAck(0, 2, 2, False), A.ClientChannelClose(0, 1))
    state = take(state, cfg)
    assert state.queues[0].ready == (Entry(1, 1, True, False),)
    assert holds("queue_in_publication_order", state) and holds("channel_close_requeues", state)
    state, labels = run(state, cfg, A.BrokerDeliver(0))
    assert labels == [Wire(0, False, (BASIC_DELIVER, 2, 2, 3, 1, 1))]
    state, _ = receive(state)
    assert not holds("consumer_sees_publication_order", state)
    invariants_hold(state)


def test_requeue_puts_copy_back_by_key_RQ_1():
    cfg = config()
    state = start(cfg)
    for _ in range(3):
        state = publish(state, cfg, persistent=False)
    state, _ = run(state, cfg, A.ClientGet(0, 2, 0, False), A.ClientGet(0, 2, 0, False))
    state = take(state, cfg)
    state, _ = run(state, cfg, A.ClientReject(0, 2, 2, True))
    state = take(state, cfg)
    assert [(e.key, e.redelivered) for e in state.queues[0].ready] == [(2, True), (3, False)]
    state, _ = run(state, cfg, A.ClientNack(0, 2, 1, False, True))
    state = take(state, cfg)
    assert [(e.key, e.redelivered) for e in state.queues[0].ready] == [(1, True), (2, True), (3, False)]
    assert holds("queue_in_publication_order", state) and holds("redelivered_flag_set", state)
    assert not holds("queue_in_publication_order", state._replace(
        queues=(state.queues[0]._replace(ready=state.queues[0].ready[::-1]),)))


def test_a_multiple_confirm_may_cover_part_of_the_ready_run_PC_3():
    """PC-3: a basic.ack with multiple=true confirms every unconfirmed publish up to its tag, and the
    broker may send one for part of the run of publishes ready to confirm. RabbitMQ 3.10.8 did, under
    load: ack(2, multiple) while publish 3 was ready too in the spec's eyes (its queue had not confirmed
    it yet; docs/rabbitmq-3.10.8-observations.md). Not past the run. The oldest alone goes out with
    multiple only batched with a later publish past the next (spec.broker.oldest_batched), as here."""
    from rabbitproof.spec import broker, configs
    from tests.test_proofs_inductive import _reachable

    def three_ready(state) -> bool:
        channel = state.conns[0].channels[0]
        return len(channel.unconfirmed) >= 3 and broker.confirm_prefix(channel) == channel.unconfirmed[2].seq

    config = configs.get("confirms")          # three publishes on one confirm-mode channel
    state = next(s for s in _reachable(config) if three_ready(s))
    channel = state.conns[0].channels[0]
    first, second, third = (p.seq for p in channel.unconfirmed[:3])
    confirms = {(a.seq, a.multiple) for a in machine.enabled(state, config) if isinstance(a, A.BrokerConfirm)}
    assert {(second, True), (third, True), (first, False), (second, False), (third, False)} <= confirms
    assert (first, True) in confirms and broker.oldest_batched(channel)
    assert not broker.oldest_batched(channel._replace(unconfirmed=channel.unconfirmed[:2]))
    after = machine.step(state, A.BrokerConfirm(0, 1, second, True))[0]
    assert [p.seq for p in after.conns[0].channels[0].unconfirmed] == [third]
