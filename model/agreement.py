"""Agreement of the Z3 model with ``spec/`` on concrete states: without it the proofs are about some
other machine.

For a spec state ``s`` and an action ``a`` of the configuration (``spec.machine.candidates``):
- if ``a`` is enabled (``spec.machine.enabled``), with ``s2`` the state ``spec.machine.step`` computes,
  Z3 proves that the relation of ``a`` relates ``abstract(s)`` to ``abstract(s2)`` and to nothing else
  (one solver query: no ``y`` with ``R(abstract(s), y) != (y == abstract(s2))``);
- if ``a`` is disabled, Z3 proves its guard false at ``abstract(s)``.
The oracles are read from ``s`` (``oracles``); the relation is then evaluated on concrete values only.
"""
from __future__ import annotations

from dataclasses import dataclass

import z3

from rabbitproof.spec import actions as A
from rabbitproof.spec import broker, client, faults, interleavings, machine, storage
from rabbitproof.spec.frames import (
    BASIC_ACK, BASIC_DELIVER, BASIC_GET, BASIC_GET_OK, BASIC_NACK, BASIC_PUBLISH, BASIC_QOS, BASIC_RECOVER,
    BASIC_REJECT, CHANNEL_CLOSE, CONNECTION_CLOSE, FIELDS, QUEUE_DELETE, TX_COMMIT,
)
from rabbitproof.spec.properties import (
    confirms_in_flight, copy_messages, delivery_tag, open_ok_in_flight, opens_in_flight, selects_in_flight,
)
from rabbitproof.spec.state import CONN_DOWN, MODE_TX

from . import budgets
from .actions import RELATIONS, concrete, symbolic
from .oracles import CHANNEL_ERR, CONNECTION_ERR, OK, values
from .state import abstract, fresh, message, same


def _val(v, sort: z3.SortRef | None = None) -> z3.ExprRef:
    """A concrete oracle value of ``sort``: a bool, an int, a set of ints or of int tuples (an array
    of bools over them), or a dict of ints to ints (an array that is 0 elsewhere)."""
    if isinstance(v, dict):
        arity = z3.Z3_get_array_arity(sort.ctx.ref(), sort.ast) if isinstance(sort, z3.ArraySortRef) else 1
        if arity == 1:
            arr = z3.K(z3.IntSort(), z3.IntVal(0))
        else:
            arr = z3.Lambda(list(z3.Ints(" ".join(f"v{k}" for k in range(arity)))), z3.IntVal(0))
        for index, n in sorted(v.items()):
            arr = z3.Store(arr, *(index if isinstance(index, tuple) else (index,)), n)
        return arr
    if isinstance(v, frozenset):
        arity = z3.Z3_get_array_arity(sort.ctx.ref(), sort.ast) if isinstance(sort, z3.ArraySortRef) else 1
        if arity == 1:
            arr = z3.K(z3.IntSort(), z3.BoolVal(False))
        else:
            arr = z3.Lambda(list(z3.Ints(" ".join(f"v{k}" for k in range(arity)))), z3.BoolVal(False))
        for index in sorted(v):
            arr = z3.Store(arr, *(index if isinstance(index, tuple) else (index,)), True)
        return arr
    return z3.BoolVal(v) if isinstance(v, bool) else z3.IntVal(v)


def _kept(channel) -> frozenset:
    """The tags a channel that is only closing keeps (storage.close_channel): basic.get deliveries,
    outstanding or held back, of queues it does not consume from."""
    consumed = {k.queue for k in channel.consumers}
    return frozenset(u.tag for u in channel.unacked + tuple(u for _, u in channel.tx_settles)
                     if not u.consumer and u.queue not in consumed)


def _frame_oracles(state, a) -> dict:
    """What BrokerTakeFrame reads outside the family: the frame, and the broker's answer to it."""
    out = values(A.BrokerTakeFrame)
    conn = state.conns[a.conn] if 0 <= a.conn < len(state.conns) else None
    if conn is None or not 0 <= a.ch < len(conn.to_broker) or not conn.to_broker[a.ch]:
        return out
    frame = conn.to_broker[a.ch][0]
    # The flags of the frames behind the one taken (model.actions._taken_in_turn).
    (out["open_to_broker_left"], out["frame_ahead_of_open_left"], out["frame_behind_open_left"],
     out["other_frames_to_broker_left"]) = opens_in_flight(conn.to_broker[a.ch][1:])
    out["first_select_to_broker_left"], out["publishes_behind_select_left"], _ = \
        selects_in_flight(conn.to_broker[a.ch][1:])
    m = out["method"] = frame.method
    for name in FIELDS.get(m, ()):             # the frame's own fields, where an oracle is named for one
        if name in out:
            out[name] = bool(getattr(frame, name)) if type(out[name]) is bool else getattr(frame, name)
    if m == BASIC_PUBLISH:
        out["message_number"] = message(frame.msg)[1]
    channel = conn.channels[a.ch - 1] if a.ch else None
    if channel is not None:
        out["kept_tags"] = _kept(channel)
        out["keeps_any"] = bool(out["kept_tags"])
    if m in (BASIC_ACK, BASIC_NACK, BASIC_REJECT) and channel is not None:
        out["tag"] = frame.delivery_tag
        collected = broker._collect(channel, frame.delivery_tag, out["multiple"])              # ACK-1..4
        out["settled"] = bool(collected and collected[0])
        if collected is None:
            out["verdict"] = CHANNEL_ERR
        else:                                                           # what the counters take off (PF-3)
            out["consumer_deliveries_settled"], out["settled_per_consumer"] = _consumer_counts(collected[0])
    elif m == TX_COMMIT and channel is not None and channel.mode == MODE_TX:
        # TX-7: the commit-ok is a step of its own when one of its publishes reaches a queue (what
        # broker._tx_commit computes).
        out["commit_waits"] = any(broker.route(state, exchange, key) for exchange, key, _, _, _ in channel.tx_pubs)
    elif m == BASIC_RECOVER and channel is not None:
        out["settled_per_consumer"] = _consumer_counts(channel.unacked)[1]
    if m == TX_COMMIT and channel is not None and channel.mode == MODE_TX:
        out["settled_per_consumer"] = _consumer_counts([u for _, u in channel.tx_settles])[1]
        if machine.precondition(state, a):        # the volume after the commit's runs (broker.commit_runs)
            out["volume_after_commit"] = machine.step(state, a)[0].conns[a.conn].channels[a.ch - 1].volume
    if m == BASIC_QOS and channel is not None:
        out["outstanding_count"] = len(channel.unacked)
    out["waits_for_requeue"] = interleavings.frame_waits(state, a.conn, a.ch)
    if m not in (BASIC_ACK, BASIC_NACK, BASIC_REJECT, TX_COMMIT) and channel is not None and \
            machine.precondition(state, a):
        # Queue errors (NOT_FOUND, RESOURCE_LOCKED, if-unused, exclusive use, a reused consumer tag):
        # the broker's answer, read from the frames it writes (ER-1).
        _, labels = machine.step(state, a)
        methods = {w.frame.method for w in labels}
        out["verdict"] = CONNECTION_ERR if CONNECTION_CLOSE in methods else \
            CHANNEL_ERR if CHANNEL_CLOSE in methods else OK
        if m == BASIC_GET:                                              # DS-1: a copy is handed over
            out["get_ok"] = BASIC_GET_OK in methods
            if out["get_ok"]:
                queue = state.queues[frame.queue]
                out["copy_key"] = queue.ready[storage.next_ready(queue)].key
        elif m == QUEUE_DELETE and out["verdict"] == OK:                # its consumers are cancelled
            q = frame.queue
            if q < len(state.queues) and state.queues[q].exists:
                out["cancelled_consumers"] = frozenset(state.queues[q].ring)
    if machine.precondition(state, a):
        # Whether the broker wrote a frame on this channel: the frames in flight to the client only grow;
        # how many copies each queue took (publishes, dead-lettered copies: RT-1, ACK-6).
        succ = machine.step(state, a)[0]
        out["answered"] = len(succ.conns[a.conn].to_client[a.ch]) > len(conn.to_client[a.ch])
        out["copies_added"] = {q: after.enqueued - before.enqueued for q, (before, after) in
                        enumerate(zip(state.queues, succ.queues)) if after.enqueued != before.enqueued}
        # The new copies' messages and persistent flags (they are ready in the successor).
        new = [(q, e) for q, (before, after) in enumerate(zip(state.queues, succ.queues))
               for e in after.ready if e.key > before.enqueued]
        out["new_copy_message_connection"] = {(q, e.key): message(e.msg)[0] for q, e in new}
        out["new_copy_message_number"] = {(q, e.key): message(e.msg)[1] for q, e in new}
        out["new_copy_persistent"] = frozenset((q, e.key) for q, e in new if e.persistent)
        # Which of this connection's messages a queue took a first copy of (RT-1, TX-2).
        if m in (BASIC_PUBLISH, TX_COMMIT):
            out["routed_messages"] = frozenset(message(msg)[1] for msg in copy_messages(succ) - copy_messages(state))
    return out


def _consumer_counts(delivered) -> tuple[int, dict]:
    """How many of ``delivered`` went to a consumer (a former one's too), and how many to each
    consumer tag that is still a consumer's (a former consumer's are marked -tag)."""
    per: dict = {}
    for u in delivered:
        if u.consumer > 0:
            per[u.consumer] = per.get(u.consumer, 0) + 1
    return sum(1 for u in delivered if u.consumer), per


def oracles(state, a) -> dict:
    """The oracle values of action ``a`` in spec state ``state`` (``model.oracles`` declares them)."""
    kind = type(a)
    if kind is A.BrokerTakeFrame:
        return _frame_oracles(state, a)
    if kind is A.BrokerDeliver:
        ready = broker.can_deliver(state, a)
        queue = state.queues[a.queue] if 0 <= a.queue < len(state.queues) else None
        if queue is not None and queue.sending:
            # The channel numbers the delivery the queue was sending (broker.number): the relation reads
            # it from the queue's fields (``sending_*``); these say the same.
            c, ch, ctag, entry = queue.sending
            return values(kind, can_deliver=ready, conn=c, ch=ch, consumer_tag=ctag, copy_key=entry.key)
        if not ready:
            return values(kind)
        c, ch, consumer = broker.next_consumer(state, a.queue)
        return values(kind, can_deliver=ready, conn=c, ch=ch, consumer_tag=consumer.tag,
                      copy_key=queue.ready[storage.next_ready(queue)].key)
    if kind is A.BrokerConfirm:
        channel = _channel(state, a)
        pend = [p for p in channel.unconfirmed if p.seq == a.seq] if channel else []
        return values(kind, ready_to_confirm=bool(pend) and broker.ready_to_confirm(pend[0]),
                      confirm_prefix=broker.confirm_prefix(channel) if channel else 0,
                      unconfirmed_below=bool(channel) and any(p.seq < a.seq for p in channel.unconfirmed),
                      oldest_batched=bool(channel) and broker.oldest_batched(channel))
    if kind is A.BrokerCommitOk:
        channel = _channel(state, a)
        return values(kind, written=bool(channel) and not channel.committing)
    if kind is A.BrokerQueueFail:
        channel = _channel(state, a)
        pend = [p for p in channel.unconfirmed if p.seq == a.seq] if channel else []
        failed = frozenset((q, e.key) for q, queue in enumerate(state.queues) for e in queue.ready
                           if pend and e.msg == pend[0].msg)
        return values(kind, failable=bool(channel) and any(p.seq == a.seq and faults.failable(state, p)
                                                           for p in channel.unconfirmed), failed_copies=failed)
    if kind is A.DiskFsync:
        return values(kind, pending=faults.can_fsync(state, a))
    if kind is A.NetworkLoss:
        return values(kind, connected=faults.can_lose_connection(state, a))
    if kind is A.ClientVanish:
        slot = faults.stale_slot(state)
        return values(kind) if slot is None else values(kind, free_slot=slot)
    if kind is A.BrokerChannelError:
        channel = _channel(state, a)
        kept = _kept(channel) if channel is not None else frozenset()
        return values(kind, keeps_any=bool(kept), kept_tags=kept)
    if kind is A.ClientConnect:
        return values(kind, down=0 <= a.conn < len(state.conns) and state.conns[a.conn].status == CONN_DOWN)
    if kind is A.ClientReceive:
        readable = client.can_receive(state, a)
        fifo = state.conns[a.conn].to_client[a.ch] if readable else ()
        out = values(kind, readable=readable, method=fifo[0].method if readable else 0, more=len(fifo) > 1,
                     close_left=any(f.method == CHANNEL_CLOSE for f in fifo[1:]),
                     tag=(delivery_tag(fifo[0]) or 0) if readable else 0,
                     # frames of an older channel are still ahead of the open-ok after this one
                     older_frames_ahead_left=open_ok_in_flight(fifo[1:])[1],
                     multiple_confirm_in_flight_left=confirms_in_flight(fifo[1:])[1])
        if readable and fifo[0].method in (BASIC_ACK, BASIC_NACK):     # a confirm: its number, multiple or not
            out["tag"], out["multiple"] = fifo[0].delivery_tag, bool(fifo[0].multiple)
        if readable and fifo[0].method in (BASIC_DELIVER, BASIC_GET_OK):    # client.receive: the copy, if automatic
            tag = fifo[0].delivery_tag
            auto = next((d for d in state.conns[a.conn].auto if d[0] == a.ch and d[1] == tag), None)
            if auto is not None:
                out.update(auto=True, auto_queue=auto[2], auto_key=auto[3])
        return out
    out = values(kind)          # no oracle, or a client method's ``may_send``
    if "may_send" in out:
        out["may_send"] = machine.precondition(state, a)
    return out


def _channel(state, a):
    if not 0 <= a.conn < len(state.conns) or not 1 <= a.ch <= len(state.conns[a.conn].channels):
        return None
    return state.conns[a.conn].channels[a.ch - 1]


def _substitute(e: z3.ExprRef, *pairs) -> z3.ExprRef:
    """``z3.substitute`` without its per-pair sort checks in Python (the pairs are built here from the
    same symbolic relation, sorts match by construction): a third of the agreement check's time."""
    n = len(pairs)
    src, dst = (z3.Ast * n)(), (z3.Ast * n)()
    for i, (a, b) in enumerate(pairs):
        src[i], dst[i] = a.as_ast(), b.as_ast()
    return z3.z3._to_expr_ref(z3.Z3_substitute(e.ctx_ref(), e.as_ast(), n, src, dst), e.ctx)


@dataclass(frozen=True)
class Verdict:
    """The outcome of one (state, action) check; ``problem`` is empty when the model agrees; ``undecided``
    when the solver ran out of its budget (``model.budgets``) twice: neither agreement nor a problem."""

    action: object
    enabled: bool
    problem: str = ""
    undecided: bool = False

    @property
    def ok(self) -> bool:
        return not self.problem and not self.undecided


class Checker:
    """Checks (state, action) pairs with one reused solver (push/pop per pair), every query within Z3's
    resource budget for an agreement query (``model.budgets``), never a time limit."""

    def __init__(self, budget: int | None = None) -> None:
        self.solver = z3.Solver()
        self.budget = budget if budget is not None else budgets.BUDGETS["agreement"]
        self.y = fresh("y")
        # "y equals the spec's successor", built once over a symbolic z that is substituted per pair
        # (building the equalities in Python for every pair was the check's largest cost).
        self.z = fresh("z")
        self._y_is_z = same(self.y, self.z)
        self._symbolic: dict = {}

    def _relation(self, cls: type):
        """The relation of ``cls`` built once over symbolic x, fields and oracles (plugged in by substitution)."""
        got = self._symbolic.get(cls)
        if got is None:
            x = fresh("x")
            a, o = symbolic(cls, "a")
            t = RELATIONS[cls](x, a, o)
            y = self.y
            formula = z3.And(t.guard, same(y, t.after))
            got = self._symbolic[cls] = (x, a, o, t.guard, formula)
        return got

    def _fresh(self, query) -> z3.CheckSatResult:
        """``query`` in a fresh solver, retried once with a larger budget when it runs out."""
        again = z3.Solver()
        again.add(query)
        return budgets.check_twice(again, "agreement", self.budget)

    def check(self, state, action, enabled: bool, x=None) -> Verdict:
        """Whether the model agrees with the spec on ``action`` in ``state`` (enabled or not);
        ``x`` is ``abstract(state)`` when the caller has it already."""
        xs, a_sym, o_sym, guard, formula = self._relation(type(action))
        o = oracles(state, action)
        x = abstract(state) if x is None else x
        a = concrete(action)
        pairs = [(v, w) for (_, v), (_, w) in zip(xs.items(), x.items())]
        pairs += [(a_sym[n], a[n]) for n in a_sym]
        pairs += [(o_sym[n], _val(o[n], o_sym[n].sort())) for n in o_sym]
        s = self.solver
        s.push()
        try:
            if not enabled:
                query = _substitute(guard, *pairs)
                s.add(query)
                r = budgets.check(s, "agreement", self.budget)
                if r == z3.unknown:
                    r = self._fresh(query)
                if r == z3.unknown:
                    return Verdict(action, False, undecided=True)
                return Verdict(action, False, "" if r == z3.unsat else f"guard not false in Z3 ({r})")
            after = abstract(machine.step(state, action)[0])
            y = self.y
            is_after = _substitute(self._y_is_z, *[(v, w) for (_, v), (_, w) in zip(self.z.items(), after.items())])
            query = _substitute(formula, *pairs) != is_after
            s.add(query)
            r = budgets.check(s, "agreement", self.budget)
            if r != z3.unsat:
                # The reused (incremental) solver has answered sat once for a pair that a fresh solver, and
                # the same solver asked again, found unsat (seen on a publish, after thousands of pairs),
                # and "unknown (incomplete quantifiers)" at once for pairs a fresh solver finds unsat (seen
                # on publishes after a reconnect, after a few thousand pairs of one configuration): a "sat"
                # or an "unknown" is only believed when a fresh solver agrees.
                r = self._fresh(query)
            if r == z3.unsat:
                return Verdict(action, True)
            # sat, or unknown: the relation at the spec's successor alone is concrete and quick, and
            # tells a wrong successor from a second one.
            s.pop()
            s.push()
            s.add(_substitute(formula, *pairs, *[(v, w) for (_, v), (_, w) in zip(y.items(), after.items())]))
            holds = budgets.check_twice(s, "agreement", self.budget)
            if holds == z3.unsat:
                return Verdict(action, True, "relation does not hold for the spec's successor")
            if r == z3.sat and holds == z3.sat:
                return Verdict(action, True, "relation admits another successor")
            return Verdict(action, True, undecided=True)
        finally:
            s.pop()

    def check_state(self, state, config) -> list[Verdict]:
        """Every candidate action of ``config`` in ``state``: enabled ones and disabled ones."""
        on = set(machine.enabled(state, config))
        x = abstract(state)
        return [self.check(state, a, a in on, x) for a in dict.fromkeys(machine.candidates(state, config))]
