"""Part of the ``por`` reduction of `rabbitproof check`'s machine: a client that nothing can interrupt
but a lost connection or a crash sets up at once.

Which steps
-----------
A client's *set-up steps* are what its program does before its work, on its own connection: connect
again when its connection is down (``ClientConnect``), and send confirm.select or tx.select (PC-1,
TX-1), declare its exclusive queue (DU-4), set its prefetch (PF-1) and consume (``SET_UP``), each
while its program still needs it. A connection is *sheltered* when nothing but a lost connection
(NetworkLoss) or a broker crash can happen to it before its next step: its client may not vanish any
more (or never could), the broker may not close its channel with an error any more (or never could),
and its own role never closes its channel or connection; a channel's set-up steps wait while the
broker's end of it is not open (its channel.close is on its way to the client, which will open the
channel again). After every step (and after the pure reads,
rabbitproof.check.pure_reads), each sheltered connection takes its set-up steps at once, in the same
edge, until it has none left (``settle``); every kept state is expanded in full.

Why no answer changes
---------------------
Write s for a set-up step of a sheltered connection c in a state x. It writes one frame to the broker
on c (or, for a connect, makes c's slot a fresh connection with nothing in flight and no consumer), and
changes c's client view (its mode, its consumer tags); the observer records only that the prefetch was
sent (``Ghost.prepared``), which no question reads.

(1) *Independence.* Every other step b enabled in x is enabled after s, and ``b(s(x)) = s(b(x))``,
    unless b is c's connection lost or a crash, which make s pointless. The broker reads c's FIFO to
    it only at its head (appending to its tail commutes, and a take of an empty FIFO is not enabled),
    and no step but c's own reads c's view; the other clients touch their own connections; budgets:
    s spends none that another step needs (basic.qos's is never spent in `check`, cycles.unspent). c's
    own other steps while s waits are reads of its replies, which pop another FIFO. A sheltered c has
    no other step that could disable s: it does not vanish, its channel is not closed by the broker's
    error or by itself.
(2) *Absorption.* A lost connection or a crash resets c's slot (``spec.faults.reset_connection``:
    nothing in flight, views and broker channels new) and the observer forgets c's prepared channels,
    so ``f(s(x)) = f(x)`` exactly: s taken first leaves no trace (``tests/test_check_reductions.py``
    checks (1) and (2) on every reachable state of four setups).
(3) *Moving s earlier.* In any execution of the full machine, each set-up step of a sheltered
    connection can be moved back to the moment it became enabled, through the steps in between, by (1)
    and (2) (if a fault came in between, s was never taken in the full execution; taken first, the
    fault absorbs it). The states of the moved execution differ from the original ones only by s
    (prepared, a frame on its way, a view's mode or consumer tags), which no question reads: the same
    verdicts in each.
(4) *Termination, confluence.* Each connection's set-up steps are few and each is taken once in its
    incarnation; those of different connections commute (1), so the normal form does not depend on
    their order.
(5) *Liveness.* A set-up step is in a weakly fair class (the client sets up, or connects again,
    cycles.SetupFairness), and no cycle can take one (a connection is set up again only after a fault,
    and faults are bounded): a fair cycle of the full graph has none enabled, so its states are their
    own normal forms. Each cycle of the reduced graph is one of the full graph (its edges are real
    paths).

A client that may still vanish, or whose channel the broker may still close with an error, is left
out: its frame in flight may still reach a broker that has not noticed, or be dropped while its view
stays open, which are not the same as never having sent it.

Remembered per connection
-------------------------
A connection's run of set-up steps reads, of the state, only that connection, whether the broker is up,
the budgets (which candidates the spec tries; the run spends none that stays spent: basic.qos's is
given back, cycles.unspent) and the channels of that connection the observer records as prepared
(``_set_up_key``): a client's set-up steps and their preconditions read its own connection and the
broker's state of being up; the broker's takes of basic.qos, confirm.select and tx.select
(``broker_take``) read and write only that channel (``spec.interleavings.frame_waits`` reads a queue
for a basic.get, purge or delete only). And it changes only that connection and its prepared channels.
So many states, after a lost connection or a crash, run the same set-up (on the 1-message benchmark
setup: 14,708 steps in 4,133 runs); ``set_up`` works each distinct run out once and puts its
connection and prepared channels into every state with that key. A run is remembered only after it
was seen to change nothing else (so a run that did, against the argument, is recomputed every time,
never misapplied); ``tests/test_check_reductions.py`` checks the remembered runs against fresh ones on
every successor of the reachable states of setups with every kind of client and fault.
"""
from __future__ import annotations

from typing import Any, Iterator

from rabbitproof.spec import actions as A
from rabbitproof.spec.frames import BASIC_QOS, CONFIRM_SELECT, TX_SELECT
from rabbitproof.spec.machine import client_candidates, precondition
from rabbitproof.spec.state import C_OPEN, CH_OPEN, CONN_DOWN, CONN_UP, MODE_CONFIRM, MODE_TX, with_conn

SET_UP = frozenset({A.ClientConnect, A.ClientConfirmSelect, A.ClientTxSelect, A.ClientDeclareQueue, A.ClientQos,
                    A.ClientConsume})
TAKEN = frozenset({BASIC_QOS, CONFIRM_SELECT, TX_SELECT})       # set-up frames the broker takes at once
IDLE_CAPACITY = 65_536      # connections remembered as having no set-up step (``SetUpAtOnce.next_step``)
SETTLED_CAPACITY = 65_536   # normal forms of states with a connection down remembered (``Fused.settle``)


class SetUpAtOnce:
    """``settle(watched)``: the state with every sheltered connection's set-up steps taken, and the
    (action, frames) steps taken."""

    name = "por"
    keeps_fair_cycles = True        # (5) in the module docstring

    def __init__(self, machine: Any, config: Any) -> None:
        self._step, self._takes = machine.step, machine.takes
        self.config = config
        n = config.connections
        self.vanishing = tuple(machine.vanishing) or (False,) * n
        self.erring = tuple(machine.erring) or (False,) * n
        roles = config.roles
        self.roles = tuple(tuple((ch, roles[(c, ch)]) for ch in range(1, config.channels + 1) if (c, ch) in roles)
                           for c in range(n))
        # Connections whose own role closes a channel or the connection are never sheltered.
        self.closing = tuple(any(r.close or r.close_connection for _, r in self.roles[c]) for c in range(n))
        # What each channel's set-up needs, worked out once for ``wants`` (it runs for every connection of
        # every successor): (ch, the modes it selects, the queues it declares as a mask of ``view.setup``'s
        # bits, whether it sets its prefetch, (c, ch), the consumer tags it starts).
        self.needs = tuple(tuple((ch, tuple(m for m, on in ((MODE_CONFIRM, role.confirm), (MODE_TX, role.tx)) if on),
                                  sum(1 << q for q in set(role.declare)), bool(role.qos), (c, ch),
                                  tuple(range(1, len(role.consume) + 1)))
                                 for ch, role in self.roles[c]) for c in range(n))
        # Connections seen set up with nothing for the broker to take at once, by id: (the connection, its
        # client, the (c, ch) whose prefetch had to be sent for it). ``settle`` looks at every connection of
        # every successor, and most successors share most of their connections with the state they came from.
        self._idle: dict[int, tuple[Any, int, tuple]] = {}
        # Each connection's run of set-up steps, by ``_set_up_key``: (the connection after it, its channels
        # prepared after it, the steps).
        self._done: dict[tuple, tuple[Any, tuple, tuple]] = {}

    def sheltered(self, state: Any, c: int) -> bool:
        """Whether nothing but a lost connection or a crash can happen to connection c before its next step."""
        if self.closing[c]:
            return False
        used, config = state.used, self.config
        if self.vanishing[c] and config.vanishes and used.reconnects < config.reconnects:
            return False
        return not (self.erring[c] and used.channel_errors < config.channel_errors)

    def wants(self, watched: Any, c: int) -> bool:
        """Whether connection c's program has a set-up step to take (cheap: no actions built)."""
        state, ghost = watched
        conn = state.conns[c]
        if conn.status == CONN_DOWN:
            return state.broker_up
        if conn.status != CONN_UP:
            return False
        for ch, modes, declares, qos, at, tags in self.needs[c]:
            view = conn.clients[ch - 1]
            if view.status != C_OPEN or conn.channels[ch - 1].status != CH_OPEN:
                continue                    # closed, or the broker's close is on its way to the client
            for mode in modes:
                if view.mode != mode:
                    return True
            if view.setup & declares != declares:
                return True
            if qos and at not in ghost.prepared:
                return True
            for tag in tags:
                if tag not in view.consumers:
                    return True
        return False

    def next_step(self, watched: Any, c: int) -> Any:
        """The set-up step connection c takes at once in ``watched``, or None: c is not sheltered, or has
        no set-up step left. Its client's first (``client_step``), else the broker's take of a set-up frame
        (``broker_take``)."""
        state = watched[0]
        conn = state.conns[c]
        idle = self._idle.get(id(conn))
        if idle is not None and idle[0] is conn and idle[1] == c:   # looked at first: most connections of most
            prepared = watched[1].prepared                          # successors are idle ones met before
            for at in idle[2]:
                if at not in prepared:
                    break
            else:
                return None
        if not self.sheltered(state, c):
            return None
        if self.wants(watched, c):
            return self.client_step(watched, c) or self.broker_take(state, c)
        if conn.status == CONN_UP and not any(True for _ in self._takeable(conn)):
            self._remember_idle(conn, c)
            return None
        return self.broker_take(state, c)

    def _remember_idle(self, conn: Any, c: int) -> None:
        """Remember that connection ``conn`` of client c, up, wants no set-up step and has no frame the broker
        takes at once: whatever the rest of a state, ``next_step`` is then None as long as the prefetch of
        each of its open channels that sets one is still recorded as sent (``wants`` reads nothing else of a
        connection that is up, ``broker_take`` nothing else once no frame qualifies)."""
        if len(self._idle) >= IDLE_CAPACITY:
            self._idle.clear()
        qos = tuple(at for ch, _, _, sets, at, _ in self.needs[c]
                    if sets and conn.clients[ch - 1].status == C_OPEN and conn.channels[ch - 1].status == CH_OPEN)
        self._idle[id(conn)] = (conn, c, qos)

    def broker_take(self, state: Any, c: int) -> Any:
        """The broker's take of the frame at the head of one of c's channels when it is a set-up frame
        that only changes that channel (``TAKEN``: basic.qos on a channel with no consumer and nothing
        outstanding, confirm.select, tx.select), on a channel the broker holds open."""
        conn = state.conns[c]
        if not state.broker_up or conn.broker_closed or conn.status != CONN_UP:
            return None
        for ch in self._takeable(conn):
            action = A.BrokerTakeFrame(c, ch)
            if precondition(state, action):
                return action
        return None

    @staticmethod
    def _takeable(conn: Any) -> Iterator[int]:
        """The channels of ``conn`` whose oldest frame to the broker is one it takes at once, in order."""
        for ch, fifo in enumerate(conn.to_broker):
            if not fifo or not ch or fifo[0].method not in TAKEN:
                continue
            channel = conn.channels[ch - 1]
            if channel.status != CH_OPEN or channel.commit_pending or channel.consumers or channel.unacked:
                continue
            yield ch

    def client_step(self, watched: Any, c: int) -> Any:
        """The first of c's set-up steps that the machine enables, in ``enabled``'s order, found without
        building the other clients' actions; None while it waits for the broker."""
        state, config = watched[0], self.config
        conn = state.conns[c]
        if conn.status == CONN_DOWN:
            action = A.ClientConnect(c, 0, config.channels_open)
            return action if precondition(state, action) else None
        for ch, _ in self.roles[c]:
            if conn.clients[ch - 1].status != C_OPEN or conn.channels[ch - 1].status != CH_OPEN:
                continue
            for a in client_candidates(state, config, c, ch):
                if type(a) in SET_UP and precondition(state, a) and self._takes(watched, config, a):
                    return a
        return None

    def settle(self, watched: Any) -> tuple[Any, tuple]:
        steps: list = []
        for c in range(self.config.connections):
            action = self.next_step(watched, c)
            if action is not None:
                watched, more = self.set_up(watched, c, action)
                steps.extend(more)
        return watched, tuple(steps) if steps else ()

    def set_up(self, watched: Any, c: int, action: Any) -> tuple[Any, tuple]:
        """Connection c's set-up steps from ``watched``, the first being ``action``: the state after them
        and the steps, each connection's run worked out once for each distinct ``_set_up_key`` (the
        module docstring's "Remembered per connection" says why that is all they read and change)."""
        state, ghost = watched
        key = _set_up_key(watched, c)
        done = self._done.get(key)
        if done is not None:
            conn, prepared, steps = done
            mine = tuple(e for e in ghost.prepared if e[0] != c)
            return type(watched)(with_conn(state, c, conn), ghost._replace(
                prepared=tuple(sorted(mine + prepared)) if mine else prepared)), steps
        start = watched
        taken: list = []
        while action is not None:
            watched, frames = self._step(watched, action)
            taken.append((action, frames))
            action = self.next_step(watched, c)
        after, now = watched
        conn = after.conns[c]
        prepared = tuple(e for e in now.prepared if e[0] == c)
        # Remembered only when the run changed nothing but connection c and its prepared channels, as the
        # argument says it cannot: a step that did would be recomputed every time rather than misapplied.
        if after == with_conn(start.spec, c, conn) and now == ghost._replace(prepared=now.prepared) and \
                [e for e in now.prepared if e[0] != c] == [e for e in ghost.prepared if e[0] != c]:
            if len(self._done) >= IDLE_CAPACITY:
                self._done.clear()
            self._done[key] = (conn, prepared, tuple(taken))
        return watched, tuple(taken)


def _set_up_key(watched: Any, c: int) -> tuple:
    """What connection c's run of set-up steps reads of ``watched``: the connection, whether the broker is up,
    the budgets, and the channels of c whose prefetch the observer records as sent."""
    state, ghost = watched
    return (c, state.conns[c], state.broker_up, state.used, tuple(e for e in ghost.prepared if e[0] == c))


class Fused:
    """The ``por`` reduction of a setup: set-up steps at once, then pure reads (rabbitproof.check.pure_reads),
    then the disk's writes once no crash is left (rabbitproof.check.disk_at_once); ``settle`` returns the
    normal form under them and every step taken.

    The normal form of a state where a connection is down is remembered (``settled``): after a crash or a
    lost connection the clients connect and set up again in the same edge, a dozen steps or more, and
    many states lead to the same state at a fault (what the fault wipes out is all they differ by): on
    the 1-message benchmark setup, 7 in 10 such states had been settled before. ``settle`` is a function
    of the state alone (each part's is), so the remembered normal form and steps are the ones it
    would compute again."""

    name = "por"

    @property
    def keeps_fair_cycles(self) -> bool:
        """Whether the fused graph has a fair accepting cycle exactly when the full one has: when every part keeps them."""
        return all(getattr(part, "keeps_fair_cycles", False) for part in self.parts)

    def __init__(self, *parts: Any) -> None:
        self.parts = parts
        self.settled: dict[int, tuple[Any, tuple[Any, tuple]]] = {}     # hash -> (state, its normal form and steps)
        self._same: dict[int, tuple[Any, tuple[Any, tuple]]] = {}       # id -> (that state, its normal form, steps)

    def settle(self, watched: Any) -> tuple[Any, tuple]:
        down = False
        for conn in watched[0].conns:
            if conn[0] == CONN_DOWN:          # conn.status
                down = True
                break
        if down:
            met = self._same.get(id(watched))
            if met is not None and met[0] is watched:
                return met[1]
            h = hash(watched)
            met = self.settled.get(h)
            if met is not None and (met[0] is watched or met[0] == watched):
                self._remember_same(watched, met[1])
                return met[1]
        state = watched
        steps: tuple = ()
        for part in self.parts:
            watched, more = part.settle(watched)
            steps += more
        if down:
            if len(self.settled) >= SETTLED_CAPACITY:
                self.settled.clear()
            self.settled[h] = (state, (watched, steps))
            self._remember_same(state, (watched, steps))
        return watched, steps

    def _remember_same(self, state: Any, settled: tuple[Any, tuple]) -> None:
        """Remember ``settled`` for this very object ``state``: the machine gives the same object for
        every crash that leaves the same state (rabbitproof.check.after_crash), settled without hashing it."""
        if len(self._same) >= SETTLED_CAPACITY:
            self._same.clear()
        self._same[id(state)] = (state, settled)
