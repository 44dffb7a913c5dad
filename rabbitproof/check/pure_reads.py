"""The ``por`` reduction of `rabbitproof check`'s machine: a client's read of a reply that changes
nothing but the wire is fused into the step that made it readable.

Which reads
-----------
``spec.client.receive`` does nothing on reading most replies but take them off the wire:
queue.declare-ok, queue.bind-ok, basic.qos-ok, basic.consume-ok, basic.cancel-ok, basic.recover-ok,
confirm.select-ok, tx.select-ok, tx.rollback-ok, queue.purge-ok, queue.delete-ok (``PURE``: the methods
``spec.frames.METHODS`` marks ``plain``; tests/test_spec_frames.py holds the client to the mark). The
observer records nothing either (``observer.observe`` reads deliveries, confirms, returns, commit-oks
and closes). basic.get-empty is left out: a polling consumer waits for it (``_programs_take``), and
channel.open-ok, which opens the client's view, too.

How it reduces
--------------
After every step, each client channel whose oldest frame in flight to it is such a reply reads it, and
again, until none is (``settle``): the state kept is that normal form ``F(x)``, and the edge records
every step it took (a trace replays them all). Every kept state is expanded in full.

Why no answer changes
---------------------
Write r for such a read of channel (c, ch) in a state x. It only pops the head of one FIFO to the client.

(1) *Independence.* Every other step b enabled in x is enabled after r and ``b(r(x)) = r(b(x))``, or b
    makes r pointless: the broker and the other clients never read a FIFO to a client but to append
    to its tail (which commutes with popping a non-empty head); client (c, ch)'s own steps read its view,
    which r does not change, and of the FIFO only whether a basic.get's answer is on its way (not a
    pure reply); the observer ignores r. A step that drops the FIFO (the connection lost, its client
    vanished, a broker crash) yields the same state whether r came first or not, as r's only effect
    is gone with the FIFO. So r never disables another step and F commutes with every step: for x2 =
    b(x), ``F(x2) = F(b(F(x)))``.
(2) *Termination and confluence.* Each read removes a frame and none adds one; reads of different
    channels commute, so F(x) does not depend on their order.
(3) *Nothing can tell.* The questions read the observer's ghost and where messages are
    (``live_messages``: copies, deliveries and returns, never a pure reply); the symmetry's renamings
    and the canonical tags treat every channel alike and pure replies carry no tag. So x and F(x) answer
    every safety question alike; an end state (no fair step enabled: spark_check.liveness) has no reply
    left unread, as a client's reads are fair, so it is in normal form, and R's end states are the full
    graph's.
(4) *Liveness.* A fair cycle of the full graph maps to the cycle of its states' normal forms (by (1));
    a reply read by the cycle's client is read in the normal forms at once, and the weakly fair class of
    that client's reads is never kept from firing by it: a cycle on which a pure reply stays unread is
    unfair already (the client keeps reading, cycles.SetupFairness), so it is not one the questions
    count. A pure reply only ever answers its own client's request on that channel, and nothing the
    programs do waits for it, so no other class is enabled in the normal forms that was not enabled
    along the cycle. And each cycle of R is a cycle of the full graph (its edges are real paths).

By induction on paths, as in spec.por: every state x reachable in the full graph has F(x) in R, with
the same verdicts; R's states are reachable. ``tests/test_check_reductions.py`` holds the examples to
the same answers with and without it (traces replayed in the full machine), and
``tests/test_check_spark.py`` the Spark engine to the local one under it.
"""
from __future__ import annotations

from typing import Any

from rabbitproof.spec import actions as A
from rabbitproof.spec.frames import METHODS
from rabbitproof.spec.state import with_conn

PURE = frozenset(m.code for m in METHODS if m.plain)
CAPACITY = 65_536       # connections whose pure reads are remembered (``PureReads.read``)


class PureReads:
    """``settle(watched)``: its normal form under pure reads, and the (action, frames) steps taken."""

    name = "por"
    keeps_fair_cycles = True        # (4) in the module docstring

    def __init__(self, machine: Any, config: Any) -> None:
        self._step = machine.step
        self.connections = config.connections          # the clients' slots; past them, vanished connections
        self._done: dict[tuple[int, Any], tuple[Any, tuple]] = {}      # (c, connection) -> (after its reads, steps)

    def settle(self, watched: Any) -> tuple[Any, tuple]:
        steps: list = []
        pure = PURE
        for c in range(self.connections):
            conn = watched[0].conns[c]
            fifos = conn.to_client
            for ch in range(1, len(fifos)):
                fifo = fifos[ch]
                if fifo and fifo[0].method in pure:
                    watched, more = self.read(watched, c, conn)
                    steps.extend(more)
                    break
        return watched, tuple(steps) if steps else ()

    def read(self, watched: Any, c: int, conn: Any) -> tuple[Any, tuple]:
        """Connection c's pure reads in ``watched`` (``conn`` is its connection): the state after them and
        the steps, worked out once for each distinct connection. A pure read pops the head of one FIFO of
        that connection and changes nothing else, nor does the observer record it (the module docstring,
        (1)), so the reads of a connection depend on it alone; a run is remembered only once seen to change
        nothing but that connection, so one that did, against the argument, is recomputed every time."""
        done = self._done.get((c, conn))
        if done is not None:
            return type(watched)(with_conn(watched[0], c, done[0]), watched[1]), done[1]
        start = watched
        steps: list = []
        pure = PURE
        fifos = conn.to_client
        for ch in range(1, len(fifos)):
            fifo = fifos[ch]
            while fifo and fifo[0].method in pure:
                action = A.ClientReceive(c, ch)
                watched, frames = self._step(watched, action)
                steps.append((action, frames))
                fifo = watched[0].conns[c].to_client[ch]
        after = watched[0].conns[c]
        if watched[1] == start[1] and watched[0] == with_conn(start[0], c, after):
            if len(self._done) >= CAPACITY:
                self._done.clear()
            self._done[(c, conn)] = (after, tuple(steps))
        return watched, tuple(steps)
