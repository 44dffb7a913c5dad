"""Inductive proofs (proofs.inductive): every invariant of model.invariants holds initially and is
preserved by every spec action, for any number of connections, channels and publishes; a wrong
invariant comes back as a counterexample, shown as the state before and after the step."""
from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from collections import deque
from pathlib import Path

import z3

from rabbitproof.model import actions as M
from rabbitproof.model import budgets
from rabbitproof.model import invariants as MI
from rabbitproof.model.invariants import HELPERS, INVARIANTS, Invariant, _live_copies, init
from rabbitproof.model.state import FIELDS, QUEUE, abstract
from rabbitproof.proofs import inductive
from rabbitproof.proofs.inductive import COUNTEREXAMPLE, PROVED, UNKNOWN, _transition, invariants_named, prove_all, prove_step
from rabbitproof.spec import actions as A
from rabbitproof.spec import broker, configs, machine, storage
from rabbitproof.spec.frames import BASIC_ACK, BASIC_NACK, BASIC_RECOVER, BASIC_REJECT, QUEUE_DECLARE
from rabbitproof.spec.properties import REGISTRY
from rabbitproof.spec.roles import QueueSpec, Role
from rabbitproof.spec.state import CH_OPEN, CONN_DOWN, FATE_ACKED, FATE_LOST_CRASH, MODE_TX
from tests.fixtures.model_plants import requeue_to_tail


def _parts(line: str) -> dict[str, str]:
    """A counterexample line's parts (proofs.inductive._state_line), by heading."""
    return dict(part.split(": ", 1) for part in line.split(": ", 1)[1].split(" | "))


def _part(line: str, heading: str) -> str:
    """The first part of a counterexample line whose heading starts with ``heading``."""
    return next(text for h, text in _parts(line).items() if h.startswith(heading))


def _value(part: str, name: str) -> str:
    """The value field ``name`` has in a part of a counterexample line."""
    return re.search(rf"(?:^| ){name}=(\[[^\]]*\]|\{{[^}}]*\}}|\S+)", part).group(1)


def _copies(line: str) -> list[tuple[str, str]]:
    """Each copy a counterexample line shows: its fields, and its message's."""
    parts = _parts(line)
    return [(text, parts[f"message ({_value(text, 'message_connection')}, {_value(text, 'message_number')})"])
            for heading, text in parts.items() if "copy (" in heading]


def _acked_persistent_copy(line: str, acked: str = "True", **fields: str) -> bool:
    """A counterexample line shows a persistent copy whose message is (or is not) acked, and has ``fields``."""
    return any(_value(copy, "persistent") == "True" and _value(message, "message_acked") == acked
               and all(_value(copy, n) == v for n, v in fields.items()) for copy, message in _copies(line))


# The faults' steps: every invariant is proved for them here, and for every step by `make verify`'s proofs
# part (all obligations, `rabbitproof verify --part proofs`), which takes minutes.
FAULTS = (A.BrokerCrash, A.BrokerRestart, A.NetworkLoss, A.ClientVanish, A.BrokerDetect, A.BrokerChannelError,
          A.BrokerQueueFail)


def test_every_invariant_is_proved_initially_and_for_every_fault():
    outcomes = prove_all(invariants_named(), actions=FAULTS)
    assert len(outcomes) == (len(INVARIANTS) + len(HELPERS)) * (len(FAULTS) + 1)
    assert [(o.invariant, o.action, o.status) for o in outcomes if o.status != PROVED] == []


def test_a_case_the_budget_leaves_undecided_is_decided_with_the_larger_one(monkeypatch):
    """Each step case tries its seeds with the budget first, then the first seeds with budgets.RETRY
    times it: with a budget of one unit every first attempt gives up, and the obligation is still
    proved by a retry (RETRY set here so that the retry has the usual budget)."""
    inv = HELPERS["unwritten_copies_hold_their_confirm"]
    helpers = invariants_named(inv.helpers)
    monkeypatch.setattr(inductive.budgets, "RETRY", inductive.budgets.BUDGETS["inductive"])
    results = []
    real_decide = inductive._decide

    def deciding(solver, *args, **kwargs):
        outcome = real_decide(solver, *args, **kwargs)
        results.append(outcome.status)
        return outcome
    monkeypatch.setattr(inductive, "_decide", deciding)
    assert prove_step(inv, A.BrokerDeliver, helpers, budget=1).status == PROVED
    # Every first attempt gives up; then the retried seeds in turn, the first answer winning (which
    # seed is quick depends on the order the terms were built in, so any of them may be the one).
    assert results[:len(inductive._SEEDS)] == [UNKNOWN] * len(inductive._SEEDS)
    full = results[len(inductive._SEEDS):]
    assert full[-1] == PROVED and set(full[:-1]) <= {UNKNOWN} and len(full) <= len(inductive._FULL_SEEDS)


def test_model_invariants_are_registry_invariants_and_helpers_are_explored():
    """Each Z3 invariant names a registry invariant; each helper is a registry invariant too, so that
    spark_check explores it in every configuration."""
    for name in (*INVARIANTS, *HELPERS):
        assert REGISTRY[name].kind == "always"


# A planted wrong invariant (PC-2): "no publish is ever waiting for its confirm".
NOTHING_UNCONFIRMED = Invariant("nothing_unconfirmed", lambda x, c, ch, s: z3.Not(x.unconfirmed[c, ch, s]), "fixture")


def test_planted_wrong_invariant_comes_back_as_a_counterexample():
    outcomes = {o.action: o for o in prove_all([NOTHING_UNCONFIRMED], [A.BrokerTakeFrame, A.BrokerConfirm])}
    assert outcomes["Init"].status == PROVED
    take = outcomes["BrokerTakeFrame"]
    assert take.status == COUNTEREXAMPLE
    text = "\n".join(take.counterexample)
    assert "case: frame method 17" in text                       # basic.publish
    before = next(line for line in take.counterexample if line.startswith("before:"))
    after = next(line for line in take.counterexample if line.startswith("after:"))
    assert "channel_mode=1" in before and "unconfirmed=[]" in before     # a confirm channel with nothing unconfirmed
    seq = int(before.split("publish_seq=")[1].split()[0])
    assert f"publish_seq={seq + 1} unconfirmed=[{seq + 1}]" in after   # ... numbers the next publish: unconfirmed
    assert outcomes["BrokerConfirm"].status == PROVED           # a confirm only takes publishes away


def test_a_counterexample_shows_every_field_of_the_table(monkeypatch):
    """The printing of a counterexample is derived from model.state.FIELDS: every field is shown, by
    name, at the indices its kinds fit; a field whose kinds fit no heading is shown at the witness."""
    take = prove_step(NOTHING_UNCONFIRMED, A.BrokerTakeFrame, [])
    before = next(line for line in take.counterexample if line.startswith("before:"))
    shown = {name for part in _parts(before).values() for name in re.findall(r"(?:^| )(\w+)=", part)}
    assert shown == {f.name for f in FIELDS}
    odd = tuple(dataclasses.replace(f, indices=(QUEUE, "somewhere")) if f.name == "ready" else f for f in FIELDS)
    monkeypatch.setattr(inductive, "FIELDS", odd)
    before = next(line for line in prove_step(NOTHING_UNCONFIRMED, A.BrokerTakeFrame, []).counterexample
                  if line.startswith("before:"))
    assert "ready=" in _part(before, "witness (") and "ready=" not in _part(before, "copy (")


def test_confirm_and_tx_exclusive_needs_its_helper():
    """Alone, confirm_and_tx_exclusive is not inductive: tx.select on a channel in neither mode could
    meet publish numbers the invariant says nothing about. With its helper it is proved."""
    inv = INVARIANTS["confirm_and_tx_exclusive"]
    alone = prove_step(inv, A.BrokerTakeFrame, [])
    assert alone.status == COUNTEREXAMPLE
    assert prove_step(inv, A.BrokerTakeFrame, [HELPERS[h] for h in inv.helpers]).status == PROVED


# A planted wrong invariant of the deliveries family (DT-1): "an outstanding tag is below next_tag - 1".
TAGS_LAG = Invariant("tags_lag", lambda x, c, ch, t: z3.Implies(x.outstanding[c, ch, t], t < x.next_tag[c, ch] - 1),
                     "fixture")


def test_planted_wrong_delivery_invariant_comes_back_as_a_counterexample():
    """A delivery takes the channel's next tag and leaves it outstanding: the tag is next_tag - 1 after."""
    outcomes = {o.action: o for o in prove_all([TAGS_LAG], [A.BrokerDeliver, A.ClientAck])}
    assert outcomes["Init"].status == PROVED
    assert outcomes["ClientAck"].status == PROVED                   # a client write touches no tag
    deliver = outcomes["BrokerDeliver"]
    assert deliver.status == COUNTEREXAMPLE
    before = next(line for line in deliver.counterexample if line.startswith("before:"))
    after = next(line for line in deliver.counterexample if line.startswith("after:"))
    tag = int(before.split("next_tag=")[1].split()[0])
    assert f"next_tag={tag + 1}" in after and str(tag) in after.split("outstanding=")[1].split("]")[0]


def test_delivery_tags_increase_needs_its_helper():
    """Alone, delivery_tags_increase is not inductive: a tx.rollback makes held-back tags outstanding
    again, and nothing says they were issued. With held_back_tags_issued it is proved."""
    inv = INVARIANTS["delivery_tags_increase"]
    alone = prove_step(inv, A.BrokerTakeFrame, [])
    assert alone.status == COUNTEREXAMPLE
    assert prove_step(inv, A.BrokerTakeFrame, [HELPERS[h] for h in inv.helpers]).status == PROVED


# A planted wrong invariant (RQ-4): "a channel that is not open has no outstanding delivery at all".
# It is false: a channel closed by a channel error keeps its basic.get deliveries until close-ok.
NOT_OPEN_HOLDS_NOTHING = Invariant(
    "not_open_holds_nothing",
    lambda x, c, ch, t: z3.Implies(x.channel_status[c, ch] != CH_OPEN, z3.Not(x.outstanding[c, ch, t])), "fixture")


def test_planted_wrong_closing_invariant_comes_back_as_a_counterexample():
    outcomes = {o.action: o for o in prove_all([NOT_OPEN_HOLDS_NOTHING], [A.BrokerTakeFrame, A.BrokerCloseOk])}
    assert outcomes["Init"].status == PROVED
    assert outcomes["BrokerCloseOk"].status == PROVED              # close-ok ends the channel: nothing kept
    take = outcomes["BrokerTakeFrame"]
    assert take.status == COUNTEREXAMPLE
    after = next(line for line in take.counterexample if line.startswith("after:"))
    assert _value(_part(after, "channel ("), "channel_status") in ("2", "3")     # closing (CH_CLOSING or CH_ENDING)
    assert "outstanding=[]" not in after                          # ... with a delivery kept


def test_an_unknown_invariant_name_is_refused():
    try:
        invariants_named(["no_such_invariant"])
    except KeyError as e:
        assert "no_such_invariant" in str(e) and "confirms_exactly_once" in str(e)
    else:
        raise AssertionError("no error")


def test_init_holds_in_every_standard_initial_state():
    """Init is about the spec's initial states: the abstraction of each standard configuration's
    initial state satisfies it (else Init => Inv would be about other states)."""
    for name in configs.STANDARD:
        for state in machine.initial_states(configs.get(name)):
            solver = z3.Solver()
            solver.add(z3.Not(init(abstract(state))))
            assert budgets.check_twice(solver, "inductive") == z3.unsat, name


# A planted wrong invariant of the queues (DU-4): "no queue is exclusive".
NO_EXCLUSIVE_QUEUE = Invariant("no_exclusive_queue",
                               lambda x, c, ch, q: z3.Implies(x.queue_exists[q], x.queue_owner[q] == 0),
                               "fixture")


def test_planted_wrong_queue_invariant_comes_back_as_a_counterexample():
    """queue.declare with exclusive=true creates a queue owned by the declaring connection."""
    outcomes = {o.action: o for o in prove_all([NO_EXCLUSIVE_QUEUE], [A.BrokerTakeFrame, A.BrokerCrash])}
    assert outcomes["Init"].status == PROVED
    assert outcomes["BrokerCrash"].status == PROVED                 # a crash drops every owner
    take = outcomes["BrokerTakeFrame"]
    assert take.status == COUNTEREXAMPLE
    assert f"case: frame method {QUEUE_DECLARE}" in take.counterexample[0]
    before = next(line for line in take.counterexample if line.startswith("before:"))
    after = next(line for line in take.counterexample if line.startswith("after:"))
    assert _value(_part(before, "queue "), "queue_exists") == "False"
    queue = _part(after, "queue ")
    assert _value(queue, "queue_exists") == "True" and _value(queue, "queue_owner") != "0"


def test_exclusive_queue_has_owner_needs_its_helpers():
    """Alone, exclusive_queue_has_owner is not inductive: a connection.close read by the client could
    find the broker's end of the connection still open, and the queue's owner would go down while it
    exists. With its helpers (a close in flight means the broker closed its end; a connection that is
    down is silent) it is proved."""
    inv = INVARIANTS["exclusive_queue_has_owner"]
    alone = prove_step(inv, A.ClientReceive, [])
    assert alone.status == COUNTEREXAMPLE
    assert prove_step(inv, A.ClientReceive, [HELPERS[h] for h in inv.helpers]).status == PROVED


def test_a_loss_that_keeps_exclusive_queues_is_refuted(monkeypatch):
    """DU-4: a NetworkLoss relation that forgets to delete the lost connection's exclusive queues
    breaks exclusive_queue_has_owner; the proof shows the connection down with its queue still there."""
    def loss_keeps_queues(x, a, o):
        t = M.NetworkLoss(x, a, o)
        return M.Transition(t.guard,
                            t.after.replace(queue_exists=x.queue_exists, queue_durable=x.queue_durable,
                                            queue_owner=x.queue_owner))
    inv = INVARIANTS["exclusive_queue_has_owner"]
    helpers = [HELPERS[h] for h in inv.helpers]
    assert prove_step(inv, A.NetworkLoss, helpers).status == PROVED
    monkeypatch.setitem(M.RELATIONS, A.NetworkLoss, loss_keeps_queues)
    outcome = prove_step(inv, A.NetworkLoss, helpers)
    assert outcome.status == COUNTEREXAMPLE
    after = next(line for line in outcome.counterexample if line.startswith("after:"))
    assert f"client_connection_status={CONN_DOWN}" in after and "queue_exists=True" in _part(after, "queue ")


Q, K = z3.Ints("q key")
# A planted wrong invariant of the copies (RQ-2): "a ready copy is never marked redelivered".
NEVER_REDELIVERED = Invariant("never_redelivered", lambda x, q, key, _: z3.Not(x.redelivered[q, key]), "fixture")


def test_planted_wrong_copies_invariant_comes_back_as_a_counterexample():
    """A requeue (here of a channel or connection closed, RQ-4) puts the copy a tag names back, marked
    redelivered."""
    outcomes = {o.action: o for o in prove_all([NEVER_REDELIVERED], [A.BrokerTakeFrame, A.BrokerDeliver])}
    assert outcomes["Init"].status == PROVED
    assert outcomes["BrokerDeliver"].status == PROVED              # a delivery takes a copy away
    take = outcomes["BrokerTakeFrame"]
    assert take.status == COUNTEREXAMPLE
    before = _part(next(line for line in take.counterexample if line.startswith("before:")), "copy (")
    after = _part(next(line for line in take.counterexample if line.startswith("after:")), "copy (")
    assert "redelivered=False" in before and "ready=True redelivered=True" in after   # requeued


ROOT = Path(__file__).resolve().parents[1]


# A planted wrong invariant of a queue's order (RQ-1): "the copy ahead is the newer one".
NEWEST_FIRST = Invariant("newest_first", lambda x, q, a, b: z3.Implies(x.ahead_in_queue[q, a, b], a > b), "fixture")


def planted_order_outcomes() -> dict:
    """The planted invariant's outcomes for Init, BrokerTakeFrame and BrokerDeliver: status and lines."""
    return {o.action: (o.status, list(o.counterexample or ()))
            for o in prove_all([NEWEST_FIRST], [A.BrokerTakeFrame, A.BrokerDeliver])}


def test_planted_wrong_order_invariant_comes_back_as_a_counterexample():
    """A second copy enqueued goes behind the first: the one ahead is the older. Run in a process of its
    own: which model Z3 returns depends on the queries before it in the process, and after some test
    orders the model showed its order in no pair of keys the counterexample prints (a CI run)."""
    code = "import json; from tests.test_proofs_inductive import planted_order_outcomes as o; print(json.dumps(o()))"
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    outcomes = json.loads(run.stdout)
    assert outcomes["Init"][0] == PROVED                          # no copy yet
    assert outcomes["BrokerDeliver"][0] == PROVED                 # taking the head moves no other copy
    status, lines = outcomes["BrokerTakeFrame"]
    assert status == COUNTEREXAMPLE
    after = next(line for line in lines if line.startswith("after:"))
    order = next(text for heading, text in _parts(after).items() if ", keys " in heading)
    assert _value(order, "ahead_in_queue") not in ("[]", "False")   # the counterexample shows the order


def test_queue_in_publication_order_needs_its_helpers():
    """Alone, queue_in_publication_order is not inductive: nothing says the copy a requeue brings
    back has a key below the one an enqueue in the same step gives. With copy_keys_issued and
    outstanding_copies_were_delivered (the copy a tag names was delivered, so its key was issued) it is."""
    inv = INVARIANTS["queue_in_publication_order"]
    assert prove_step(inv, A.BrokerTakeFrame, []).status == COUNTEREXAMPLE
    assert prove_step(inv, A.BrokerTakeFrame, [HELPERS[h] for h in inv.helpers]).status == PROVED


def _order_broken_by(method: int, requeued_behind_a_ready_copy: bool = False) -> bool:
    """Whether a settlement frame of ``method`` that enqueues no new copy can break
    queue_in_publication_order (no helper is needed once no copy is enqueued in the step); with
    ``requeued_behind_a_ready_copy``, in this way: a copy ready before, of the higher key, ends up
    ahead of a copy the step brought back."""
    inv = INVARIANTS["queue_in_publication_order"]
    x, a, o, t = _transition(A.BrokerTakeFrame)
    q, ahead, behind = z3.Ints("q0 ahead0 behind0")
    solver = z3.Solver()
    solver.add(inv.holds(x), inv.at(x, q, ahead, behind), t.guard, z3.Not(inv.at(t.after, q, ahead, behind)),
               o.method == method, o.copies_added == z3.K(z3.IntSort(), z3.IntVal(0)))
    if requeued_behind_a_ready_copy:
        solver.add(ahead > behind, x.ready[q, ahead], z3.Not(x.ready[q, behind]),
                   t.after.ahead_in_queue[q, ahead, behind])
    result = budgets.check_twice(solver, "inductive")
    assert result != z3.unknown
    return result == z3.sat


def test_a_requeue_to_the_tail_is_refuted(monkeypatch):
    """RQ-1: a requeue that puts copies back behind every ready copy (a queue of requeues at the tail,
    as some brokers do), rather than at their place, breaks queue_in_publication_order at every frame
    that requeues (basic.reject, basic.recover, basic.nack): a copy of higher key, ready before, ends
    up ahead of the copy brought back. The model's requeue keeps the order (Z3 proves no step breaks it)."""
    methods = (BASIC_REJECT, BASIC_RECOVER, BASIC_NACK)
    assert [_order_broken_by(m) for m in methods] == [False, False, False]
    monkeypatch.setattr(M, "_requeue", requeue_to_tail(M._requeue))
    monkeypatch.setitem(M.RELATIONS, A.BrokerTakeFrame, M.gone_in_this_life(M.BrokerTakeFrame))   # built anew
    assert [_order_broken_by(m, requeued_behind_a_ready_copy=True) for m in methods] == [True, True, True]


def test_redelivered_flag_set_needs_its_helper():
    """Alone, redelivered_flag_set is not inductive: a new copy takes key enqueued + 1, and nothing says
    that key was never delivered. With copy_keys_issued it is proved."""
    inv = INVARIANTS["redelivered_flag_set"]
    alone = prove_step(inv, A.BrokerTakeFrame, [])
    assert alone.status == COUNTEREXAMPLE
    assert prove_step(inv, A.BrokerTakeFrame, [HELPERS[h] for h in inv.helpers]).status == PROVED


def test_an_enqueue_that_reuses_a_key_is_refuted(monkeypatch):
    """RQ-1, RQ-2: a publish relation that gives a new copy the key of the last one (enqueued, not enqueued + 1)
    could make a delivered copy ready again unmarked: the proof finds it."""
    def publish_reuses_key(x, a, o):
        t = M.BrokerTakeFrame(x, a, o)
        return M.Transition(t.guard, t.after.replace(
            ready=z3.Lambda([Q, K], z3.Or(t.after.ready[Q, K],
                                          z3.And(o.copies_added[Q] > 0, K == x.enqueued[Q])))))
    inv = INVARIANTS["redelivered_flag_set"]
    helpers = [HELPERS[h] for h in inv.helpers]
    monkeypatch.setitem(M.RELATIONS, A.BrokerTakeFrame, publish_reuses_key)
    outcome = prove_step(inv, A.BrokerTakeFrame, helpers)
    assert outcome.status == COUNTEREXAMPLE, (outcome.seconds, outcome.counterexample)


def test_a_crash_that_keeps_what_was_ready_is_refuted(monkeypatch):
    """DU-3: down_broker_holds_only_disk needs the crash to empty the queues; a crash relation that
    keeps the ready copies comes back as a counterexample."""
    def crash_keeps_ready(x, a, o):
        t = M.BrokerCrash(x, a, o)
        return M.Transition(t.guard, t.after.replace(ready=x.ready))
    inv = INVARIANTS["down_broker_holds_only_disk"]
    assert prove_step(inv, A.BrokerCrash, []).status == PROVED
    monkeypatch.setitem(M.RELATIONS, A.BrokerCrash, crash_keeps_ready)
    assert prove_step(inv, A.BrokerCrash, []).status == COUNTEREXAMPLE


# copies_conserved's first half ("in at most one live place") on its own, with the helpers it needs.
ONE_PLACE = Invariant("copies_in_one_place", MI.copies_in_one_place, "fixture",
                      helpers=("held_back_tags_issued", "outstanding_copies_were_delivered", "copy_keys_issued"))


def test_copies_conserved_needs_its_helpers():
    """Alone, copies_conserved's first half is not inductive: a publish gives its copy the key enqueued + 1,
    and nothing says no tag names that key already. With its helpers (a named copy was delivered, a
    delivered key is at most enqueued; held-back tags are not outstanding too) it is proved, and so is the
    whole of copies_conserved with all of its helpers."""
    alone = prove_step(ONE_PLACE, A.BrokerTakeFrame, [])
    assert alone.status == COUNTEREXAMPLE
    assert prove_step(ONE_PLACE, A.BrokerTakeFrame, [HELPERS[h] for h in ONE_PLACE.helpers]).status == PROVED
    inv = INVARIANTS["copies_conserved"]
    known = {**INVARIANTS, **HELPERS}
    assert prove_step(inv, A.BrokerTakeFrame, [known[h] for h in inv.helpers]).status == PROVED



# copies_conserved's first half for the automatic-mode deliveries in flight, on its own; and for the one a
# queue is sending, whence the channel numbering it puts a copy in flight (PF-3, model.actions._number).
AUTO_PLACE = Invariant("automatic_copies_in_one_place", MI.automatic_copies_in_one_place, "fixture")
SENDING_PLACE = Invariant("sending_copies_in_one_place", MI.sending_copies_in_one_place, "fixture")


def test_an_automatic_hand_over_that_leaves_its_copy_ready_is_refuted(monkeypatch):
    """AM-2: a delivery in automatic mode whose relation leaves the copy ready puts it in two places
    (ready, and in flight to the client); the proof shows the copy ready and in flight after."""
    def deliver_keeps_ready(x, a, o):
        t = M.BrokerDeliver(x, a, o)
        return M.Transition(t.guard, t.after.replace(ready=z3.Store(t.after.ready, a.queue, o.copy_key, True)))
    helpers = [ONE_PLACE, SENDING_PLACE]
    assert prove_step(AUTO_PLACE, A.BrokerDeliver, helpers).status == PROVED
    monkeypatch.setitem(M.RELATIONS, A.BrokerDeliver, deliver_keeps_ready)
    outcome = prove_step(AUTO_PLACE, A.BrokerDeliver, helpers)
    assert outcome.status == COUNTEREXAMPLE
    after = _part(next(line for line in outcome.counterexample if line.startswith("after:")), "copy (")
    assert _value(after, "ready") == "True" and _value(after, "auto_in_flight_on") != "0"


def test_a_crash_that_keeps_automatic_deliveries_in_flight_is_refuted(monkeypatch):
    """AM-2, DU-2: a crash drops every connection, and with it the automatic-mode deliveries in
    flight; a crash relation that kept them would leave copies in flight while the broker is down."""
    def crash_keeps_auto(x, a, o):
        t = M.BrokerCrash(x, a, o)
        return M.Transition(t.guard, t.after.replace(auto_in_flight_on=x.auto_in_flight_on))
    assert prove_step(AUTO_PLACE, A.BrokerCrash, []).status == PROVED
    monkeypatch.setitem(M.RELATIONS, A.BrokerCrash, crash_keeps_auto)
    outcome = prove_step(AUTO_PLACE, A.BrokerCrash, [])
    assert outcome.status == COUNTEREXAMPLE
    assert "broker_up=False" in next(line for line in outcome.counterexample if line.startswith("after:"))


# BrokerDeliver's obligation of copies_conserved's first half needs none of its helpers (proved below
# without them), and without their quantifiers Z3 builds the planted counterexamples at once.
def _deliver_obligation():
    return prove_step(ONE_PLACE, A.BrokerDeliver, [])


def test_a_delivery_that_leaves_its_copy_ready_is_refuted(monkeypatch):
    """AM-3: a BrokerDeliver relation that hands the queue's head over but leaves it ready puts one copy
    in two places (ready, and outstanding under the new tag); the proof shows the tag and its copy."""
    def deliver_keeps_ready(x, a, o):
        t = M.BrokerDeliver(x, a, o)
        return M.Transition(t.guard, t.after.replace(ready=z3.Store(t.after.ready, a.queue, o.copy_key, True)))
    assert _deliver_obligation().status == PROVED
    monkeypatch.setitem(M.RELATIONS, A.BrokerDeliver, deliver_keeps_ready)
    outcome = _deliver_obligation()
    assert outcome.status == COUNTEREXAMPLE
    after = next(line for line in outcome.counterexample if line.startswith("after:"))
    assert _value(_part(after, "tag "), "ready") == "True"       # the copy the new tag names


def test_a_delivery_of_a_copy_already_taken_is_refuted(monkeypatch):
    """AM-3: a BrokerDeliver relation whose guard does not ask that the queue's head be ready could hand
    a copy an outstanding tag names to a second tag: the copy is then outstanding twice, and the ghost
    inverse of the copy no longer gives back the first tag. (The copy is not ready before or after:
    this is the "no other tag names it" half failing.)"""
    def deliver_any_key(x, a, o):
        t = M.BrokerDeliver(x, a, o)
        return M.Transition(z3.substitute(t.guard, (x.ready[a.queue, o.copy_key], z3.BoolVal(True))), t.after)
    monkeypatch.setitem(M.RELATIONS, A.BrokerDeliver, deliver_any_key)
    outcome = _deliver_obligation()
    assert outcome.status == COUNTEREXAMPLE
    before = _part(next(line for line in outcome.counterexample if line.startswith("before:")), "tag ")
    after = _part(next(line for line in outcome.counterexample if line.startswith("after:")), "tag ")
    assert _value(before, "ready") == "False" and _value(after, "ready") == "False"

    def named_by(part):
        return [_value(part, f"named_by_{n}") for n in ("connection", "channel", "tag")]
    assert named_by(before) != named_by(after)


# tx_effects_invisible (TX-2): the messages family. Its first half alone, with its one helper.
FIRST_HALF = Invariant("tx_effects_invisible (first half)", MI.held_back_publishes_unseen, "fixture",
                       helpers=("publishes_in_flight_fresh",))


def test_tx_effects_invisible_needs_its_helpers():
    """Alone, tx_effects_invisible's first half is not inductive: a basic.publish taken on a tx channel holds its
    message back, and nothing says no queue took that message already (nor, on another channel, that
    no transaction holds it back already while a queue takes it). publishes_in_flight_fresh says
    so, and is itself inductive only with messages_numbered (the client's next message is new)."""
    inv = FIRST_HALF
    alone = prove_step(inv, A.BrokerTakeFrame, [])
    assert alone.status == COUNTEREXAMPLE
    assert alone.counterexample[0] == "case: frame method 17"               # basic.publish
    before = next(line for line in alone.counterexample if line.startswith("before:"))
    after = next(line for line in alone.counterexample if line.startswith("after:"))
    before, after = _part(before, "message ("), _part(after, "message (")
    assert _value(before, "publish_in_flight") == "True"                    # the publish taken ...
    assert _value(after, "publish_in_flight") == "False"                    # ... meets a message a queue took
    assert _value(after, "taken_by_queue") == "True" and _value(after, "tx_held_by_channel") != "0"
    known = {**INVARIANTS, **HELPERS}
    assert prove_step(inv, A.BrokerTakeFrame, [known[h] for h in inv.helpers]).status == PROVED
    fresh = HELPERS["publishes_in_flight_fresh"]
    assert prove_step(fresh, A.ClientPublish, []).status == COUNTEREXAMPLE
    assert prove_step(fresh, A.ClientPublish, [HELPERS[h] for h in fresh.helpers]).status == PROVED


# A planted wrong invariant of the messages family (TX-2): "no message is ever held back".
NOTHING_HELD = Invariant("nothing_held", lambda x, c, n, _: x.tx_held_by_channel[c, n] == 0, "fixture")


def test_planted_wrong_message_invariant_comes_back_as_a_counterexample():
    """A basic.publish taken on a tx channel holds its message back: shown before and after."""
    outcomes = {o.action: o for o in prove_all([NOTHING_HELD], [A.BrokerTakeFrame, A.ClientPublish])}
    assert outcomes["Init"].status == PROVED
    assert outcomes["ClientPublish"].status == PROVED                # the client holds nothing back
    take = outcomes["BrokerTakeFrame"]
    assert take.status == COUNTEREXAMPLE
    before = next(line for line in take.counterexample if line.startswith("before:"))
    after = next(line for line in take.counterexample if line.startswith("after:"))
    assert "channel_mode=2" in before
    before, after = _part(before, "message ("), _part(after, "message (")
    assert _value(before, "publish_in_flight") == "True" and _value(before, "tx_held_by_channel") == "0"
    assert _value(after, "publish_in_flight") == "False" and _value(after, "tx_held_by_channel") != "0"


def test_a_commit_that_keeps_its_publishes_held_back_is_refuted(monkeypatch):
    """TX-2: a tx.commit relation that enqueues the held-back publishes but leaves them held back
    makes a held-back message one a queue took: the proof finds it (not unknown)."""
    def commit_keeps_them(x, a, o):
        t = M.BrokerTakeFrame(x, a, o)
        return M.Transition(t.guard, t.after.replace(tx_held_by_channel=x.tx_held_by_channel))
    inv = FIRST_HALF
    helpers = [HELPERS[h] for h in inv.helpers]
    monkeypatch.setitem(M.RELATIONS, A.BrokerTakeFrame, commit_keeps_them)
    outcome = prove_step(inv, A.BrokerTakeFrame, helpers)
    assert outcome.status == COUNTEREXAMPLE
    assert outcome.counterexample[0] == "case: frame method 32"            # tx.commit
    after = _part(next(line for line in outcome.counterexample if line.startswith("after:")), "message (")
    assert _value(after, "taken_by_queue") == "True" and _value(after, "tx_held_by_channel") != "0"


def test_the_second_half_of_tx_effects_invisible_holds_after_a_crash_and_catches_an_eager_tx_ack(monkeypatch):
    """tx_effects_invisible's second half ("a held-back settlement has not taken effect: its copy has
    no fate in this life") on the configuration that combines tx with a crash: a copy acknowledged
    before its removal reached the disk comes back (TX-8) and a transaction settles it again. Its
    "acknowledged" fate is of its earlier life (the restart records it in ``revived``), so the
    property holds in every state, and the configuration does reach that situation. With a planted
    spec bug, a settlement on a tx channel that takes effect at once (and is held back as well), the
    property fails, first on a copy no restart brought back (breadth-first)."""
    config = configs.Config(
        "tx_ack_crash", "fixture", channels=2, messages=1, crashes=1,
        queues=(QueueSpec(durable=True),),
        roles={(0, 1): Role(publish=configs.TO_Q0, persistent=(True,)),
               (0, 2): Role(consume=((configs.Q0, False),), ack=True, tx=True)})
    prop = REGISTRY["tx_effects_invisible"]
    again = 0
    for state in _reachable(config):
        assert prop.holds(state), state
        acked = {(f[0], f[1]) for f in state.fates if f[2] == FATE_ACKED}
        again += any((u.queue, u.key) in acked for _, u in state.conns[0].channels[1].tx_settles)
    assert again, "no acknowledged copy that came back is ever held back by a transaction"

    settle_frame = broker._settle_frame

    def eager(state, c, ch, channel, tag, multiple, kind):
        after = settle_frame(state, c, ch, channel, tag, multiple, kind)
        held = after.conns[c].channels[ch - 1].tx_settles[len(channel.tx_settles):]
        return storage.settle(after, tuple(u for _, u in held), kind) if channel.mode == MODE_TX else after
    monkeypatch.setattr(broker, "_settle_frame", eager)
    bad = _first_violation(config, "tx_effects_invisible")
    held = [(u.queue, u.key) for _, u in bad.conns[0].channels[1].tx_settles]
    assert held and set(held) <= {(f[0], f[1]) for f in bad.fates if f[2] == FATE_ACKED}
    assert not bad.revived and not bad.conns[0].channels[1].tx_pubs          # the second half fails


# tx_effects_invisible's second half (TX-3, TX-4): the ghost of the copies gone in this life.

def test_the_second_half_needs_its_helpers():
    """Alone, the second half is not inductive: a basic.ack taken on a tx channel holds back a tag
    whose copy nothing says is not gone already. live_copies_unfated says no live copy is; it needs
    the ghost inverse (copies_conserved) at every step, and at a restart nothing more: the restart
    makes its recovered copies live again (the spec's ``revived``)."""
    half = Invariant("second half", MI.held_back_settlements_unfated, "fixture")
    alone = prove_step(half, A.BrokerTakeFrame, [])
    assert alone.status == COUNTEREXAMPLE
    inv = INVARIANTS["tx_effects_invisible"]
    known = {**INVARIANTS, **HELPERS}
    assert prove_step(half, A.BrokerTakeFrame, [known[h] for h in inv.helpers]).status == PROVED
    helper = HELPERS["live_copies_unfated"]
    assert prove_step(helper, A.BrokerRestart, []).status == PROVED
    assert prove_step(helper, A.BrokerTakeFrame, []).status == COUNTEREXAMPLE


def test_a_restart_that_keeps_recovered_copies_gone_is_refuted(monkeypatch):
    """TX-8: a copy acknowledged before its removal reached the disk comes back at the restart; a
    restart relation that keeps it gone in this life (as if ``revived`` were not there) makes a
    ready copy gone: live_copies_unfated is refuted at the restart."""
    def restart_keeps(x, a, o):
        t = M.BrokerRestart(x, a, o)
        return M.Transition(t.guard, t.after.replace(gone_this_life=x.gone_this_life))
    helper = HELPERS["live_copies_unfated"]
    monkeypatch.setitem(M.RELATIONS, A.BrokerRestart, restart_keeps)
    outcome = prove_step(helper, A.BrokerRestart, [])
    assert outcome.status == COUNTEREXAMPLE


def test_a_tx_ack_that_takes_effect_at_once_is_refuted(monkeypatch):
    """TX-3: a basic.ack on a tx channel is held back; a relation that also gives the copy its fate at
    once (the eager settlement the spec test above plants) is refuted: the held-back tag's copy is gone."""
    def eager(x, a, o):
        t = M.gone_in_this_life(M.BrokerTakeFrame)(x, a, o)
        c, ch = a.conn, a.ch
        q, key = x.tag_queue[c, ch, o.tag], x.tag_key[c, ch, o.tag]
        eager = z3.And(o.method == BASIC_ACK, x.channel_mode[c, ch] == MODE_TX, x.outstanding[c, ch, o.tag])
        return M.Transition(t.guard, t.after.replace(gone_this_life=z3.Store(t.after.gone_this_life, q, key,
                                                                             z3.Or(t.after.gone_this_life[q, key],
                                                                                   eager))))
    helpers = [HELPERS["live_copies_unfated"], ONE_PLACE]     # enough for this step (copies_conserved's first half)
    half = Invariant("second half", MI.held_back_settlements_unfated, "fixture")
    assert prove_step(half, A.BrokerTakeFrame, helpers).status == PROVED
    monkeypatch.setitem(M.RELATIONS, A.BrokerTakeFrame, eager)
    outcome = prove_step(half, A.BrokerTakeFrame, helpers)
    assert outcome.status == COUNTEREXAMPLE
    assert outcome.counterexample[0] == f"case: frame method {BASIC_ACK}"


def test_planted_wrong_unfated_invariant_comes_back_as_a_counterexample():
    """"No delivered copy is gone in this life" is wrong: basic.ack gives a delivered copy its fate.
    Z3 shows it at a settlement frame."""
    def delivered_unfated(x, q, key, _):
        return z3.Implies(x.ever_delivered[q, key], z3.Not(x.gone_this_life[q, key]))
    outcome = prove_step(Invariant("delivered_unfated", delivered_unfated, "fixture"), A.BrokerTakeFrame, [])
    assert outcome.status == COUNTEREXAMPLE


def test_live_copies_unfated_is_not_vacuous():
    """The spec's helper holds where a revived copy is held back by a transaction, and is false once
    that copy is taken for gone in this life (``revived`` forgotten)."""
    config = configs.Config(
        "tx_ack_crash", "fixture", channels=2, messages=1, crashes=1,
        queues=(QueueSpec(durable=True),),
        roles={(0, 1): Role(publish=configs.TO_Q0, persistent=(True,)),
               (0, 2): Role(consume=((configs.Q0, False),), ack=True, tx=True)})
    prop = REGISTRY["live_copies_unfated"]

    def held_revived(state):
        return [(u.queue, u.key) for _, u in state.conns[0].channels[1].tx_settles
                if (u.queue, u.key) in set(state.revived)]
    state = next(s for s in _reachable(config) if held_revived(s))
    assert prop.holds(state) and REGISTRY["tx_effects_invisible"].holds(state)
    assert not prop.holds(state._replace(revived=()))


def _first_violation(config, name):
    """The first state of ``config`` (breadth-first) where the registry invariant ``name`` is false."""
    prop = REGISTRY[name]
    for state in _reachable(config):
        if not prop.holds(state):
            return state
    raise AssertionError(f"{name} holds in every state of {config.name}")


def test_confirmed_only_when_on_disk_holds_once_a_queue_declared_again_is_a_new_one():
    """confirmed_only_when_on_disk was false in the spec once a durable queue was deleted while a
    consumer held a confirmed persistent copy of it and then declared again: the copy counted as live
    in the new queue and not on disk (13 steps). RabbitMQ 3.10.8 treats the queue declared again as a
    new one (docs/reference/differences.md, "A queue declared again is a new queue"); so does the spec now, and the property holds in every
    state of the same configuration, which does reach that situation."""
    config = configs.Config(
        "confirm_delete_declare", "fixture", connections=2, channels=2, messages=1, admin=1,
        queues=(QueueSpec(durable=True),),
        roles={(0, 1): Role(publish=configs.TO_Q0, persistent=(True,), confirm=True),
               (0, 2): Role(consume=((configs.Q0, False),), ack=True),
               (1, 1): Role(delete=((configs.Q0, False, False),), declare=(configs.Q0,))})
    prop = REGISTRY["confirmed_only_when_on_disk"]
    orphans = 0
    for state in _reachable(config):
        assert prop.holds(state), state
        queue = state.queues[0]
        orphans += any(u.msg in state.confirmed_msgs and u.key <= queue.born and queue.exists and queue.durable
                       for u in state.conns[0].channels[1].unacked)
    assert orphans, "the configuration never holds a confirmed copy of a deleted queue declared again"


def test_confirmed_survives_crash_holds_once_a_queue_declared_again_is_a_new_one():
    """The same queue-identity root for PC-10: a confirmed persistent copy outstanding from a deleted
    durable queue, the queue declared again, then a crash. The copy is lost, but it was in no durable
    queue any more (the one declared again is a new queue), so no confirmed message of a durable queue
    is lost. Before the property skipped the deleted queue's keys it was false here (14 steps)."""
    config = configs.Config(
        "confirm_delete_declare_crash", "fixture", connections=2, channels=2, messages=1, admin=1, crashes=1,
        queues=(QueueSpec(durable=True),),
        roles={(0, 1): Role(publish=configs.TO_Q0, persistent=(True,), confirm=True),
               (0, 2): Role(consume=((configs.Q0, False),), ack=True),
               (1, 1): Role(delete=((configs.Q0, False, False),), declare=(configs.Q0,))})
    prop = REGISTRY["confirmed_survives_crash"]
    orphans_lost = 0
    for state in _reachable(config):
        assert prop.holds(state), state
        queue = state.queues[0]
        orphans_lost += any(f[2] == FATE_LOST_CRASH and f[3] in state.confirmed_msgs and f[1] <= queue.born
                            and queue.durable for f in state.fates)
    assert orphans_lost, "the configuration never loses a confirmed copy of a deleted queue in a crash"


def _reachable(config):
    """Every reachable state of ``config``, breadth-first."""
    frontier, seen = deque(machine.initial_states(config)), set()
    while frontier:
        state = frontier.popleft()
        if state in seen:
            continue
        seen.add(state)
        yield state
        frontier.extend(machine.step(state, a)[0] for a in machine.enabled(state, config))


# prefetch_respected (PF-5, TX-3): the ghost counters.

def test_prefetch_respected_needs_its_helpers():
    """Alone, prefetch_respected is not inductive: a delivery needs volume < limit, and nothing says
    the volume covers the consumer deliveries the channel holds (prefetch_volume_covers); with that
    helper only, BrokerDeliver is proved, but a basic.qos that keeps a global limit keeps a
    qos_uncounted nothing says is >= 0 (prefetch_counts_sane), and that helper in turn is what
    makes prefetch_volume_covers inductive."""
    inv = INVARIANTS["prefetch_respected"]
    # (BrokerDeliver without prefetch_volume_covers came back a counterexample in some runs and unknown
    # in others, depending on the order terms were made in; with it, it is proved.)
    assert prove_step(inv, A.BrokerDeliver, [HELPERS["prefetch_volume_covers"]]).status == PROVED
    with_volume = prove_step(inv, A.BrokerTakeFrame, [HELPERS["prefetch_volume_covers"]])
    assert with_volume.status == COUNTEREXAMPLE
    assert with_volume.counterexample[0] == "case: frame method 11"          # basic.qos
    assert prove_step(inv, A.BrokerTakeFrame, [HELPERS[h] for h in inv.helpers]).status == PROVED
    covers = HELPERS["prefetch_volume_covers"]
    assert prove_step(covers, A.BrokerTakeFrame, []).status == COUNTEREXAMPLE
    assert prove_step(covers, A.BrokerTakeFrame, [HELPERS[h] for h in covers.helpers]).status == PROVED


# Planted wrong invariants of the prefetch counts: "a consumer with a limit is never at it", and "a
# global limit never leaves a held-back delivery uncounted".
UNDER_LIMIT = Invariant("under_limit", lambda x, c, ch, k: z3.Implies(
    z3.And(x.consumers[c, ch, k], x.consumer_limit[c, ch, k] != 0),
    x.consumer_deliveries[c, ch, k] < x.consumer_limit[c, ch, k]), "fixture")
NONE_UNCOUNTED = Invariant("none_uncounted", lambda x, c, ch, k: x.qos_uncounted[c, ch] == 0, "fixture")


def test_planted_wrong_prefetch_invariants_come_back_as_counterexamples():
    """A delivery brings a consumer to its limit; a basic.qos global set from none while a transaction
    holds a consumer delivery back leaves it uncounted: both shown before and after."""
    outcomes = {o.action: o for o in prove_all([UNDER_LIMIT], [A.BrokerDeliver])}
    assert outcomes["Init"].status == PROVED
    deliver = outcomes["BrokerDeliver"]
    assert deliver.status == COUNTEREXAMPLE
    before = _part(next(line for line in deliver.counterexample if line.startswith("before:")), "consumer ")
    after = _part(next(line for line in deliver.counterexample if line.startswith("after:")), "consumer ")
    count = lambda part: int(_value(part, "consumer_deliveries"))     # noqa: E731
    limit = int(_value(after, "consumer_limit"))
    assert count(before) + 1 == count(after) == limit
    qos = prove_step(NONE_UNCOUNTED, A.BrokerTakeFrame, [])
    assert qos.status == COUNTEREXAMPLE and qos.counterexample[0] == "case: frame method 11"
    after = _part(next(line for line in qos.counterexample if line.startswith("after:")), "channel (")
    assert _value(after, "qos_uncounted") != "0" and _value(after, "consumer_held_back") != "0"


def test_a_delivery_that_ignores_the_limits_is_refuted(monkeypatch):
    """PF-3: a BrokerDeliver relation whose guard leaves out has_room delivers past a limit."""
    inv = INVARIANTS["prefetch_respected"]
    helpers = [HELPERS[h] for h in inv.helpers]
    assert prove_step(inv, A.BrokerDeliver, helpers).status == PROVED
    original = M.BrokerDeliver

    def deliver_ignores_limit(x, a, o):
        t = original(x, a, o)
        return M.Transition(z3.substitute(t.guard, (M.has_room(x, o.conn, o.ch, o.consumer_tag), z3.BoolVal(True))),
                            t.after)
    monkeypatch.setitem(M.RELATIONS, A.BrokerDeliver, deliver_ignores_limit)
    assert prove_step(inv, A.BrokerDeliver, helpers).status == COUNTEREXAMPLE


def test_a_held_back_ack_that_frees_room_at_once_is_refuted(monkeypatch):
    """TX-3: a settlement held back by a transaction that counts its deliveries off the global volume
    at once (as the spec did before RabbitMQ was measured) leaves the volume short of what the channel
    holds: prefetch_volume_covers is refuted, and with it the room a later delivery would take."""
    covers = HELPERS["prefetch_volume_covers"]
    helpers = [HELPERS[h] for h in covers.helpers]
    assert prove_step(covers, A.BrokerTakeFrame, helpers).status == PROVED
    original = M.BrokerTakeFrame

    def held_ack_counts_off(x, a, o):
        t = original(x, a, o)
        settle = z3.Or(o.method == BASIC_ACK, o.method == BASIC_NACK, o.method == BASIC_REJECT)
        early = z3.And(settle, x.channel_mode[a.conn, a.ch] == MODE_TX,
                       t.after.consumer_held_back[a.conn, a.ch] != x.consumer_held_back[a.conn, a.ch])
        return M.Transition(t.guard, t.after.replace(
            volume=z3.If(early, z3.Store(t.after.volume, a.conn, a.ch,
                                         x.volume[a.conn, a.ch] - o.consumer_deliveries_settled),
                         t.after.volume)))
    monkeypatch.setitem(M.RELATIONS, A.BrokerTakeFrame, held_ack_counts_off)
    outcome = prove_step(covers, A.BrokerTakeFrame, helpers)
    assert outcome.status == COUNTEREXAMPLE
    assert outcome.counterexample[0] in (f"case: frame method {m}" for m in (BASIC_ACK, BASIC_NACK, BASIC_REJECT))


def test_prefetch_helpers_hold_with_a_transaction_under_a_global_limit():
    """No standard configuration has a global limit on a transactional channel, where the helpers'
    volume and qos_uncounted matter most: tx_ack with one qos(1, global) allowed (tests/test_spec_prefetch_tx.py)."""
    from tests.test_spec_prefetch_tx import explore
    result = explore(*(REGISTRY[name] for name in ("prefetch_respected", *INVARIANTS["prefetch_respected"].helpers)))
    assert result.complete and result.error is None and result.distinct_states == 63_859
    assert {p.name: p.verdict for p in result.properties} == {
        "prefetch_respected": "holds", "prefetch_counts_sane": "holds", "prefetch_volume_covers": "holds"}


# confirmed_only_when_on_disk (PC-5, PC-4): the copies' messages, the confirm holds and the ack ghost.

def test_confirmed_only_when_on_disk_needs_its_helper():
    """Alone, confirmed_only_when_on_disk is not inductive: a confirm acks a message, and nothing says
    its live persistent copies in durable queues are on disk or hold the confirm up.
    unwritten_copies_hold_their_confirm says so, and the confirm's guard waits for every such copy."""
    inv = INVARIANTS["confirmed_only_when_on_disk"]
    alone = prove_step(inv, A.BrokerConfirm, [])
    assert alone.status == COUNTEREXAMPLE
    after = next(line for line in alone.counterexample if line.startswith("after:"))
    assert _acked_persistent_copy(after)
    assert prove_step(inv, A.BrokerConfirm, [HELPERS["unwritten_copies_hold_their_confirm"]]).status == PROVED


def test_a_confirm_that_does_not_wait_for_the_disk_is_refuted(monkeypatch):
    """PC-5: a confirm relation whose guard leaves out "no copy holds it up" acks a message with a
    persistent copy in a durable queue not yet on disk: the proof finds it (not unknown)."""
    def eager_confirm(x, a, o):
        t = M.BrokerConfirm(x, a, o)
        c, ch, s = a.conn, a.ch, a.seq
        guard = z3.And(M._channel_open(x, c, ch), z3.If(a.multiple, z3.And(s != 0, s == o.confirm_prefix),
                                                        z3.And(x.unconfirmed[c, ch, s], o.ready_to_confirm)))
        return M.Transition(guard, t.after)
    inv = INVARIANTS["confirmed_only_when_on_disk"]
    monkeypatch.setitem(M.RELATIONS, A.BrokerConfirm, eager_confirm)
    outcome = prove_step(inv, A.BrokerConfirm, [HELPERS["unwritten_copies_hold_their_confirm"]])
    assert outcome.status == COUNTEREXAMPLE
    before = next(line for line in outcome.counterexample if line.startswith("before:"))
    after = next(line for line in outcome.counterexample if line.startswith("after:"))
    # The witness is a ready copy or a tag's copy: persistent, holding up its confirm, then acked.
    assert _acked_persistent_copy(before, "False", holds_confirm="True")
    assert _acked_persistent_copy(after, "True", holds_confirm="True")


def test_planted_wrong_confirmed_on_disk_invariant_comes_back_as_a_counterexample():
    """The property without its "not a deleted queue's" clause (key above ``born``) is the one the spec
    broke before a queue declared again became a new queue: a queue.declare makes a live copy of the
    deleted queue one of a durable queue again. Z3 shows it at queue.declare (frame method 7)."""
    def without_born(x, a, b, d):
        def unsafe_and_acked(q, key):
            return z3.And(x.persistent[q, key], x.queue_durable[q], z3.Not(x.dead_letter_target[q]),
                          z3.Not(x.on_disk[q, key]),
                          x.message_acked[x.message_connection[q, key], x.message_number[q, key]])
        return _live_copies(x, a, b, d, lambda q, key: z3.Not(unsafe_and_acked(q, key)))
    outcome = prove_step(Invariant("without_born", without_born, "fixture"), A.BrokerTakeFrame, [])
    assert outcome.status == COUNTEREXAMPLE
    assert outcome.counterexample[0] == "case: frame method 7"             # queue.declare


def test_unwritten_copies_hold_their_confirm_is_not_vacuous():
    """The spec's helper holds where a confirm-mode publish's persistent copy waits for the disk, and is
    false once that copy stops holding the confirm up while it is still live and not on disk (what a
    confirm would then ack too early)."""
    prop = REGISTRY["unwritten_copies_hold_their_confirm"]
    state = next(s for s in _reachable(configs.get("confirms"))
                 if any(p.waits for conn in s.conns for ch in conn.channels for p in ch.unconfirmed))
    assert prop.holds(state) and REGISTRY["pending_messages_numbered"].holds(state)
    waits = [w for conn in state.conns for ch in conn.channels for p in ch.unconfirmed for w in p.waits]
    assert not prop.holds(storage.forget_waits(state, waits))


# confirmed_survives_crash (PC-10, DU-2): the ghost of the copies a crash lost.

def test_confirmed_survives_crash_needs_its_helpers():
    """Alone, confirmed_survives_crash is not inductive: a confirm may ack the message of a copy lost
    in an earlier crash, and a crash may lose a copy whose message is acked.
    lost_copies_stay_unconfirmed says a lost copy's message has no publish left to ack, and
    confirmed_only_when_on_disk that the copies a crash loses carry no acked message."""
    inv = INVARIANTS["confirmed_survives_crash"]
    for cls in (A.BrokerConfirm, A.BrokerCrash):
        alone = prove_step(inv, cls, [])
        assert alone.status == COUNTEREXAMPLE, cls
        assert _acked_persistent_copy(next(line for line in alone.counterexample if line.startswith("after:")))
    helpers = [HELPERS["lost_copies_stay_unconfirmed"], INVARIANTS["confirmed_only_when_on_disk"]]
    assert prove_step(inv, A.BrokerConfirm, helpers[:1]).status == PROVED
    assert prove_step(inv, A.BrokerCrash, helpers).status == PROVED


def test_a_crash_that_keeps_publishes_to_confirm_is_refuted(monkeypatch):
    """PC-10: the crash drops every unconfirmed publish, so nothing acks a lost copy's message later; a
    crash relation that keeps them (the channel and number of each message's publish still to be
    acked) is refuted: a copy it loses carries a message still to be acked."""
    def crash_keeps_publishes(x, a, o):
        t = M.BrokerCrash(x, a, o)
        return M.Transition(t.guard,
                            t.after.replace(unconfirmed_publish_channel=x.unconfirmed_publish_channel,
                                            unconfirmed_publish_seq=x.unconfirmed_publish_seq))
    helper = HELPERS["lost_copies_stay_unconfirmed"]
    assert helper.helpers == ("unwritten_copies_hold_their_confirm",)
    given = [HELPERS["unwritten_copies_hold_their_confirm"]]
    assert prove_step(helper, A.BrokerCrash, given).status == PROVED
    monkeypatch.setitem(M.RELATIONS, A.BrokerCrash, crash_keeps_publishes)
    assert prove_step(helper, A.BrokerCrash, given).status == COUNTEREXAMPLE


def test_planted_wrong_survives_crash_invariant_comes_back_as_a_counterexample():
    """The property without its "not a deleted queue's" clause is the one the spec broke: a copy lost
    from a deleted queue (not durable any more) whose message was acked counts again once a queue of
    its name is declared durable. Z3 shows it at queue.declare (frame method 7)."""
    def without_born(x, q, key, _):
        return z3.Not(z3.And(x.lost_in_crash[q, key], x.persistent[q, key], x.queue_durable[q],
                             z3.Not(x.dead_letter_target[q]),
                             x.message_acked[x.message_connection[q, key], x.message_number[q, key]]))
    outcome = prove_step(Invariant("without_born", without_born, "fixture"), A.BrokerTakeFrame, [])
    assert outcome.status == COUNTEREXAMPLE
    assert outcome.counterexample[0] == "case: frame method 7"             # queue.declare


def test_lost_copies_stay_unconfirmed_is_not_vacuous():
    """The spec's helper holds where a crash has lost a persistent copy of a durable queue, and is false
    once that copy's message is taken for confirmed."""
    prop = REGISTRY["lost_copies_stay_unconfirmed"]

    def counted(state):
        return [f for f in state.fates if f[2] == FATE_LOST_CRASH and f[4] and state.queues[f[0]].durable
                and f[1] > state.queues[f[0]].born]
    state = next(s for s in _reachable(configs.get("crash")) if counted(s))
    assert prop.holds(state) and REGISTRY["confirmed_survives_crash"].holds(state)
    msg = counted(state)[0][3]
    assert not prop.holds(state._replace(confirmed_msgs=tuple(sorted({*state.confirmed_msgs, msg}))))
