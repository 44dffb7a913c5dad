"""The ``por`` reduction of the spec: partial-order reduction (``spec.machine.fused_takes``). A
client's frame and the broker's taking of it are fused into one step where no other step and no
property can tell the difference. The engines call it through the machine's ``fused_takes`` hook
(spark_check.reductions); engines and checkpoints carry the reduction's name, so a reduced run is never
mistaken for a full one (the manifest pins full counts only).

How ``por`` reduces
-------------------
After every step, a successor ``x`` in which a *fusable* take is enabled is not kept: the broker's
take of that frame (``BrokerTakeFrame``) is applied at once, and again until no take is fusable; the
state kept is that normal form ``F(x)``, and the edge records every model step it took (a trace
replays them all). Every state kept is expanded in full (all enabled actions), and properties and
deadlocks are judged on kept states only.

The take ``t`` of channel (c, ch)'s oldest frame (ch >= 1) is fusable in ``x`` (``FusedTakes.fusable``)
when:

- (static, from the configuration) no role declares, binds, purges or deletes a queue and no queue is
  exclusive, so the queues and bindings never change while the broker is up; no role on connection
  c can make the broker close the connection (``protocol_errors``, a recover without requeue); and
  no other channel of connection c has a role that publishes in a transaction (a frame taken while
  its commit-ok is owed is a connection error, TX-7; on its own channel a fusable take needs a
  channel in neither mode, so it never meets that commit);
- (budgets, which only grow) no fault can happen any more: the crash and queue-failure budgets are
  spent, connections can no longer be lost or vanish, and the broker raises no more channel errors
  (a vanished connection the broker has not noticed yet may still be held: its detection is a
  connection closing, below);
- the broker is up and holds connection c and channel (c, ch) open, in neither confirm nor tx mode;
- and the frame is one of:

  * ``basic.publish`` (not immediate) to the default or fanout exchange, from the only channel whose
    role publishes, to queues no role gets from and no queue dead-letters into (static), and not a
    mandatory one that no queue takes (its take writes the basic.return: RT-3);
  * ``basic.ack``, ``basic.nack`` or ``basic.reject`` that settles outstanding deliveries of the
    channel (the tag is outstanding; not ``multiple`` with tag 0, which would also settle deliveries
    made later), acknowledging them, or dropping them without requeue from queues without a
    dead-letter queue; none of them a persistent copy in a durable queue (no disk record, no confirm
    waits on it); and the channel has no global prefetch limit and every consumer of it has none
    (so whether its consumers have room never depends on what is outstanding).

Why verdicts are unchanged (the soundness argument)
---------------------------------------------------
Write R for the reduced graph. Every state of R is reachable in the full graph (R only follows model
steps), so whatever R finds, the full graph has. The converse rests on three facts.

(1) *Independence.* For a fusable take ``t`` in ``x`` and every other action ``b`` enabled in ``x``:
    ``b`` is still enabled after ``t``, ``t`` is still enabled and fusable after ``b``, and
    ``t(b(x)) == b(t(x))``. A fusable take pops the head of one FIFO to the broker and writes nothing
    to any client; a publish appends a copy with a fresh key (the queue's ``enqueued`` + 1) and a fresh
    message at the tail of each queue it routes to (a fusable one writes no return); a settlement
    removes named deliveries from the channel's outstanding ones and records their fates. Against each
    other kind of step: a client's write appends to a FIFO tail (commutes with popping a non-empty
    head); a client's read touches only frames to the client; ``BrokerDeliver`` and ``basic.get`` take
    a queue's head and never read its tail or ``enqueued`` (gets from a publish's queues are excluded:
    on an empty queue the order would decide get-ok or get-empty), and a delivery appends a tag larger
    than every outstanding one, which a settlement of given tags does not name; with no limit on the
    channel or its consumers, the consumer a delivery goes to does not depend on what the channel has
    outstanding; a requeue (nack, reject, recover, a channel or connection closing) puts a copy back at
    its old key, below the fresh one, so the ready list is the same sorted list either way (the broker
    noticing a vanished connection, ``BrokerDetect``, is such a close, of a slot no client acts on); consumes
    and cancels touch rings, which neither take reads; ``DiskFsync`` concerns persistent copies of
    durable queues, which fused settlements never touch and a publish only adds; confirms, commit-ok
    and close-ok of any channel touch neither queues' tails nor the settled deliveries. What would not commute is excluded above:
    two enqueuers of one queue (their keys would be swapped), routing that changes (declare, bind,
    delete, a crash, an exclusive queue dying with its connection), a requeue by the take (the
    requeued copy may become the head a delivery takes), dead-lettering (an enqueue), a settlement
    whose effect on prefetch room or confirms depends on order, and a connection error, lost
    connection or crash closing (c, ch) first. Fusability depends on the configuration, budgets (which
    only grow), and state of channel (c, ch) that only frames behind ``t`` in its FIFO can change
    (mode, limits, consumers; what is outstanding only grows by deliveries): so ``b`` leaves ``t``
    fusable.
(2) *Termination and confluence.* Each take removes a frame from the FIFOs to the broker and no take
    adds one, so ``F`` terminates; by (1) two fusable takes commute, so ``F(x)`` does not depend on
    the order in which they are applied (Newman's lemma).
(3) *Properties cannot tell.* Let x be reachable in the full graph by a path p, and let x' be reached
    by p without the client writes of the frames still in flight, in x, on the channels where a take
    is fusable (all of that FIFO's frames that a client action wrote; a close-ok a client wrote while
    reading channel.close stays). Every later client action of such a channel wrote a frame behind
    them, so it is removed too; other channels' client actions stay enabled (they read their own
    channel's view and budgets, and removed writes only leave more budget; the only publisher's
    messages keep their numbers, as no other channel of its connection publishes), and the broker
    never took the removed frames, so x' has the same broker, queues, disk, frames to the clients and
    ghost history as x. It differs in the FIFOs to the broker, budgets, message counters, and what the
    removed writes did to their clients' views: held tags, consumers, status, mode, setup flags,
    publish count, and, for a channel.close or channel.open, a reset of the last tag and message
    received, ``disorder`` and the confirms seen. The properties (spec/properties.py) read the FIFOs
    to the broker only while the broker is down (none in flight then) and, of a client's view, only
    the last tag (``delivery_tags_increase``: a delivery in flight must be above it), ``disorder``
    (``consumer_sees_publication_order``), the confirms seen and the publish count
    (``confirms_exactly_once``, ``confirms_in_publish_order``). In x' these are never reset by a
    removed write, and the same later reads set them: the last tag is the same or larger (so the
    invariant fails in x' wherever it fails in x), ``disorder`` is the same or true (it is sticky, and
    the last message it compares with is the same or larger). The broker holds a fusable channel open
    in plain mode, so it has sent no confirm on it since it was opened and numbers no publish: the
    confirms seen are none in x and x', and ``confirms_exactly_once`` only asks that they be none and
    the count not negative. So x' decides every property x decides. And x' has no fusable take (the
    FIFOs where one was fusable hold no client frame; the others are unchanged, as are the budgets for
    faults), so ``F(x') = x'``. Two properties are judged another way: the helpers
    ``channel_lifecycle`` and ``confirms_in_step`` read the FIFOs to the broker and the status and mode
    of every client's view, which x' changes; they hold in every reachable state of the full graph at
    every size (proved with the Z3 model, which agreement holds to the spec: proofs/), so R, whose
    states are reachable, finds them holding too, as the full graph does.

From (1) and (2), by induction on the length of a path: for every state x reachable in the full
graph, ``F(x)`` is a state of R (for x2 = b(x) with ``F(x)`` in R: if b is one of the fusable takes,
``F(x2) = F(x)``; otherwise b is enabled in ``F(x)``, which R expands in full, and ``b(F(x))`` is
reached from x2 by the same fusable takes, so ``F(x2) = F(b(F(x)))``, an R-successor of ``F(x)``). By
(3), a state x of the full graph that decides a property has an x' that decides it with ``F(x') = x'``
in R: every verdict is the same. A deadlock (nothing enabled) has no take enabled, so R reaches it;
and since R expands its states in full, its deadlocks are the full graph's.

Liveness (spec.properties.LIVENESS) is judged on R as follows, for a property whose ``stays`` and
``recurs`` read nothing a fused take changes (a take writes nothing to any client: a property of the
clients' views, such as ``confirms_eventually_answered``, qualifies; tests/test_spec_liveness.py checks
it on every state of small configurations). *End states* (no fair class enabled: spark_check.liveness)
are exact: a take is fair (spec.fairness), so an end state has none enabled and is its own normal form,
reached by R (above); R expands its states in full, so its end states are the full graph's, with the
same value of ``stays``. *Cycles* are exact one way only. A cycle of R is a cycle of the
full graph (its edges are real paths, whose inner states differ from R's by takes), and if it is fair in
R it is fair there too (a class enabled in every state of the full cycle is enabled in R's states, so R
takes it on an edge, whose first step is that class's). And a cycle of the full graph through ``stays``
states maps, by the induction above, to a closed walk of R through ``stays`` states (not all its steps are
fused takes: those only remove frames). But its being fair need not carry over: a take fused into another
step is not that edge's class, and a fused take can enable a step (a delivery of the message it enqueued)
that the full cycle is never offered. So the engines are told that this reduction may lose fair cycles
(``keeps_fair_cycles`` False): a liveness property whose ``stays`` states hold no cycle in R holds none in
the full graph either, and is judged exactly (by its end states); one that R finds a fair cycle for fails
for sure; one whose ``stays`` states hold cycles in R, none of them fair, is left undecided
(spark_check.assembly). The spec's graph bounded by its budgets has no such cycle on any standard
configuration, so `make verify` decides ``confirms_eventually_answered`` everywhere under ``por``.

What changes, and what the tests hold it to (tests/test_reductions.py): distinct states, transitions
and depth are smaller, and traces differ. A trace of R is a real path of the model, replayed step by
step, so it is never shorter in model steps than the full search's shortest; its number of BFS levels
(edges of R) is never larger than the full search's shortest, since the induction maps each full step
to at most one edge of R, and x' is reached by fewer steps than x. So ``levels(reduced) <=
steps(full) <= steps(reduced)``, checked with every verdict, and every witness replayed in the full
model to a state that decides its property. Coverage counts the actions enabled in kept states (a
fused take counts as enabled where it was fused), so counts are smaller, but no action class that
fires in the full graph is missing.

``symmetry``: states that differ by a renaming of interchangeable connections and channels are one
state of the search; its soundness argument is in spec.symmetry. The two compose.
"""
from __future__ import annotations

from typing import Any, Callable

from . import actions, broker, interleavings
from .frames import BASIC_ACK, BASIC_NACK, BASIC_PUBLISH, BASIC_REJECT, DEFAULT_EXCHANGE, FANOUT_EXCHANGE
from .state import CH_OPEN, MODE_NONE


class FusedTakes:
    """The ``por`` reduction: ``settle(x)`` is ``F(x)`` with the model steps it took (module docstring).
    ``step`` and ``act`` are the machine's (spec.machine.step and its action builder): the machine
    offers this reduction through its ``fused_takes`` hook."""

    name = "por"
    keeps_fair_cycles = False       # "Liveness" in the module docstring

    def __init__(self, config: Any, step: Callable[[Any, Any], tuple[Any, tuple]],
                 act: Callable[..., Any]) -> None:
        self._act = act
        self._route = broker.route
        self._take_cls = actions.BrokerTakeFrame
        self._step = step
        self._publish = BASIC_PUBLISH
        self._settles = {BASIC_ACK: self._ack, BASIC_NACK: self._nack, BASIC_REJECT: self._reject}
        self._exchanges = (DEFAULT_EXCHANGE, FANOUT_EXCHANGE)
        self._open, self._plain = CH_OPEN, MODE_NONE
        self.config = config
        self.connections, self.publisher = _static_scope(config)
        committers = {key for key, r in config.roles.items() if r.tx and r.publish}
        self.channels = tuple((c, ch) for c in self.connections for ch in range(1, config.channels + 1)
                              if not any(cc == c and other != ch for cc, other in committers))
        self._budgets = (config.crashes, config.failures, config.reconnects if config.losses or config.vanishes else 0,
                         config.channel_errors)

    def quiet(self, state: Any) -> bool:
        """No fault can happen any more (budgets only grow)."""
        used = state.used
        crashes, failures, losses, channel_errors = self._budgets
        return used.crashes >= crashes and used.failures >= failures and used.reconnects >= losses and \
            used.channel_errors >= channel_errors

    def fusable(self, state: Any, c: int, ch: int) -> bool:
        """Whether the take of channel (c, ch)'s oldest frame is fusable in ``state``, budgets aside
        (``quiet``) and connection c within the static scope (module docstring)."""
        conn = state.conns[c]
        fifo = conn.to_broker[ch]
        if not fifo or not state.broker_up or conn.broker_closed:
            return False
        channel = conn.channels[ch - 1]
        if channel.status != self._open or channel.mode != self._plain:
            return False
        frame = fifo[0]
        method = frame.method
        if method == self._publish:     # a mandatory one that no queue takes writes its basic.return (RT-3)
            return (c, ch) == self.publisher and not frame.immediate and frame.exchange in self._exchanges and \
                not (frame.mandatory and not self._route(state, frame.exchange, frame.routing_key))
        settle = self._settles.get(method)
        return settle is not None and settle(state, channel, frame)

    def _settles_plainly(self, state: Any, channel: Any, tag: int, multiple: bool, drop: bool) -> bool:
        """Whether settling ``tag`` on ``channel`` is fusable: outstanding, not every delivery (tag 0),
        no limit on the channel or its consumers, no persistent copy of a durable queue among them,
        and, when dropped, none of them from a queue that dead-letters."""
        if channel.global_limit or (multiple and tag == 0):
            return False
        for consumer in channel.consumers:
            if consumer.limit:
                return False
        unacked = channel.unacked
        if multiple:
            settled = [u for u in unacked if u.tag <= tag]
            if not any(u.tag == tag for u in settled):
                return False
        else:
            settled = [u for u in unacked if u.tag == tag]
            if not settled:
                return False
        queues = state.queues
        for u in settled:
            queue = queues[u.queue]
            if (u.persistent and queue.durable) or (drop and queue.dead_letter):
                return False
        return True

    def _ack(self, state: Any, channel: Any, frame: Any) -> bool:
        return self._settles_plainly(state, channel, frame.delivery_tag, frame.multiple, False)

    def _nack(self, state: Any, channel: Any, frame: Any) -> bool:
        return not frame.requeue and self._settles_plainly(state, channel, frame.delivery_tag, frame.multiple, True)

    def _reject(self, state: Any, channel: Any, frame: Any) -> bool:
        return not frame.requeue and self._settles_plainly(state, channel, frame.delivery_tag, False, True)

    def settle(self, state: Any) -> tuple[Any, tuple[tuple[Any, tuple[Any, ...]], ...]]:
        """``F(state)`` and the (action, frames) steps taken to reach it (none when nothing is fusable)."""
        if not self.channels or not self.quiet(state) or interleavings.requeue_waits(state):
            return state, ()            # no take while a requeue waits (spec.interleavings); fused takes never requeue
        steps: list[tuple[Any, tuple[Any, ...]]] = []
        fusable = self.fusable
        progress = True
        while progress:
            progress = False
            for c, ch in self.channels:
                while fusable(state, c, ch):
                    action = self._act(self._take_cls, c, ch)
                    state, frames = self._step(state, action)
                    steps.append((action, frames))
                    progress = True
        return state, tuple(steps)


def _static_scope(config: Any) -> tuple[tuple[int, ...], tuple[int, int] | None]:
    """From the configuration alone: the connections whose channels' takes may be fused, and the
    channel whose publishes may be (None for none)."""
    roles = config.roles
    queues = config.queues
    if any(q.exclusive for q in queues) or any(r.declare or r.bind or r.purge or r.delete for r in roles.values()):
        return (), None
    noisy = {c for (c, _), r in roles.items() if r.protocol_errors or False in r.recover}
    connections = tuple(c for c in range(config.connections) if c not in noisy)
    publishers = [key for key, r in roles.items() if r.publish]
    if len(publishers) != 1 or publishers[0][0] not in connections:
        return connections, None
    publisher = publishers[0]
    targets: set[int] = set()
    for exchange, key in roles[publisher].publish:
        if exchange == DEFAULT_EXCHANGE and 0 <= key < len(queues):
            targets.add(key)
        elif exchange == FANOUT_EXCHANGE:
            targets.update(config.bindings)
    if any(q.dead_letter in targets for q in queues) or any(q in targets for r in roles.values() for q, _ in r.get):
        return connections, None
    return connections, publisher
