"""The ``por`` reduction of `rabbitproof check`'s machine, third part: once no broker crash can happen any
more, the disk is written at once.

Which steps
-----------
``DiskFsync`` writes a live persistent copy of a durable queue to disk, or removes the record of a copy
that is gone (``spec.faults.pending_disk``). In a state where the broker is up and the setup's crashes
are all spent (``used.crashes == config.crashes``; every state of a setup without ``broker_crash``), each
pending fsync is taken in the step that made it pending (``settle``), so the states kept have nothing
left to write (the normal form ``D(x)``); the edge records every fsync taken, and a trace replays them.

Why no answer changes
---------------------
Write x ~ y when two states are equal but for the disk and what waits for it: the copies a confirm or
a commit-ok still waits for (``Pending.waits``, ``Channel.committing``). D(x) ~ x.

(1) *Nothing reads the disk any more.* With the broker up and no crash left, no restart will read the
    disk (``faults.restart``; the broker is down only between a crash and its restart). What else reads
    it: the fsyncs themselves, and the confirms and commit-oks that wait for a write (PC-5, TX-7); the
    observer never does, and of the questions only "lost" does, through ``live_messages``, which counts
    a record on disk as a copy a restart would bring back.
(2) *A pending write stays possible until it is taken or moot.* A write stays pending while its copy is
    live; a step that ends the copy (an ack, a drop, a purge, a deletion, a failed queue) releases what
    waited for it in the same step (``storage.forget_waits``), and leaves a removal pending instead. So
    from x, taking the pending fsyncs first leads to D(x) without disabling anything, and every step
    b enabled in x is enabled in D(x) with ``b(x) ~ b(D(x))``; a step enabled in D(x) but not in x is
    a confirm or commit-ok that waited for a write, enabled in x after the fsyncs. The two graphs are
    alike up to fsyncs (a stuttering bisimulation for ~), and the fsyncs change nothing any question
    asks but "lost", which the next point takes.
(3) *Lost.* A message believed delivered, never processed and gone everywhere but a disk record that
    waits to be removed is not lost in x, and lost in D(x). Since that removal stays possible until
    taken (2) and nothing brings the copy back (no restart), x reaches the state where it is lost: the
    answer is the same, only found a step sooner.
(4) *Liveness.* No cycle of either graph holds an fsync: a write needs a new copy, and each copy takes
    the next key of its queue (``Queue.enqueued`` only grows); a removal needs a write before it. So
    the disk and everything waiting for it are constant around a cycle, a cycle of the full graph is a
    cycle of normal forms and back, and the fair classes enabled on it are the same. An end state (no fair step
    enabled) has nothing pending, as the disk's writes are fair, so it is its own normal form.

``tests/test_check_reductions.py`` holds the examples to the same answers with and without the
reduction (traces replayed in the full machine), and ``tests/test_check_disk_at_once.py`` checks (2)
on every reachable state of setups with and without a crash.
"""
from __future__ import annotations

from typing import Any

from rabbitproof.spec import actions as A
from rabbitproof.spec.faults import pending_disk


class DiskAtOnce:
    """``settle(watched)``: with the broker up and no crash left, every pending fsync taken; the (action,
    frames) steps taken."""

    name = "por"
    keeps_fair_cycles = True        # (4) in the module docstring

    def __init__(self, machine: Any, config: Any) -> None:
        self._step = machine.step
        self.crashes = config.crashes

    def settle(self, watched: Any) -> tuple[Any, tuple]:
        state = watched[0]
        if not state.broker_up or state.used.crashes < self.crashes:
            return watched, ()
        steps = []
        for q, key, msg, write in pending_disk(state):
            action = A.DiskFsync(q, key, msg, write)
            watched, frames = self._step(watched, action)
            steps.append((action, frames))
        return watched, tuple(steps)
