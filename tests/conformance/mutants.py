"""Planted bugs (mutants) in copies of the broker (its core, and one in its server that only a crash
over TCP can show): the oracle is tested by catching each of them.

A mutant is a textual patch of one file under impl/: its exact old text (which must occur exactly once,
so a patch gone stale after a change to impl/ fails loudly instead of testing nothing) and the new text.
`make_copy` writes a patched copy of the `impl` package into a directory; `run_catching_test` runs the
test named by the mutant with that copy first on the import path, in a fresh interpreter, and says
whether the test failed (the mutant is caught). A test that starts the impl server starts the copy's
(tests/harness/impl_broker.py runs the `impl` package its process imports).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
IN_PROCESS = "tests/test_conformance_programs.py::test_in_process_core_runs_are_accepted_by_the_spec"
FOCUSED = "tests/test_conformance_programs.py::test_in_process_focused_runs_are_accepted_by_the_spec"
TCP_CRASH = "tests/test_conformance_crashes.py::test_impl_server_focused_crash_runs_are_accepted_by_the_spec"


class StalePatch(Exception):
    """A mutant's old text is not found exactly once in its file (impl/ changed under it)."""


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str           # under impl/
    old: str
    new: str
    caught_by: str      # the test that must fail on this mutant
    rule: str           # the rule it breaks (SEMANTICS.md)


ALL_MUTANTS = (
    Mutant("requeue_at_the_tail", "core/queues.py",
           "    def requeue(self, qm: QueuedMessage) -> None:\n        heapq.heappush(self.requeued, (qm.seq, qm))",
           "    def requeue(self, qm: QueuedMessage) -> None:\n        self.fresh.append(qm)",
           IN_PROCESS, "RQ-1"),
    Mutant("multiple_ack_off_by_one", "core/channel.py",
           "while order and order[0] <= tag:", "while order and order[0] < tag:", FOCUSED, "ACK-2"),
    Mutant("rollback_keeps_its_acks", "core/channel.py",
           "        for _, deliveries, _ in settlements:  # TX-3: the deliveries stay outstanding\n"
           "            for delivery in deliveries:\n"
           "                self.unacked[delivery.tag] = delivery",
           "        for kind, deliveries, requeue in settlements:  # TX-3: the deliveries stay outstanding\n"
           "            for delivery in deliveries:\n"
           "                self.apply_settlement(kind, [delivery], requeue)",
           FOCUSED, "TX-3"),
    Mutant("confirm_before_the_fsync", "core/channel.py",
           "            elif on_disk:  # PC-5", "            elif False:  # PC-5", FOCUSED, "PC-5, PC-10"),
    Mutant("requeued_message_not_marked_redelivered", "core/queues.py",
           "        qm.redelivered = True", "        qm.redelivered = False", IN_PROCESS, "RQ-2"),
    Mutant("prefetch_off_by_one", "core/channel.py",
           "self.unacked < self.prefetch", "self.unacked <= self.prefetch", FOCUSED, "PF-1"),
    Mutant("confirm_sent_twice", "core/channel.py",
           "            out.append(encode_confirm(self.number, below[-1], len(below) > 1))",
           "            out.append(encode_confirm(self.number, below[-1], len(below) > 1))\n"
           "            out.append(encode_confirm(self.number, below[-1], len(below) > 1))",
           IN_PROCESS, "PC-2"),
    Mutant("global_prefetch_ignores_outstanding_deliveries", "core/prefetch.py",
           "            self.volume = outstanding", "            self.volume = 0", FOCUSED, "PF-2"),
    Mutant("nack_drops_instead_of_requeueing", "core/channel.py",
           "        elif requeue:  # ACK-6, RQ-1, RQ-2", "        elif requeue and kind != \"nack\":  # ACK-6, RQ-1, RQ-2",
           FOCUSED, "ACK-6"),
    Mutant("commit_publishes_out_of_order", "core/channel.py",
           "        for message, mandatory in publishes:  # TX-6",
           "        for message, mandatory in reversed(publishes):  # TX-6", FOCUSED, "TX-2, RQ-1"),
    Mutant("delivery_tags_start_at_zero", "core/channel.py",
           "self.next_tag = 1  # DT-1", "self.next_tag = 0  # DT-1", IN_PROCESS, "DT-1"),
    Mutant("unknown_tag_ignored", "core/channel.py",
           '            raise Refused(errors.PRECONDITION_FAILED, f"unknown delivery tag {tag}")',
           "            return []", IN_PROCESS, "ACK-4"),
    Mutant("mandatory_return_dropped", "core/channel.py",
           "        if not reached and mandatory:", "        if not reached and mandatory and False:",
           FOCUSED, "RT-3"),
    # In the server, not the core: the in-process target commits batches itself, so only a crash of the
    # server over TCP can show it. A write-behind group commit: the replies a batch holds back (confirms,
    # commit-ok, declare-ok of a durable queue) go out when the writer takes the batch, which it writes
    # after gathering for 50 ms. (Without the wait the write, done at once in the writer's thread, wins
    # the race with the harness's SIGKILL: the test passed on this mutant; SIGKILL leaves the OS's page
    # cache alone, so what is at stake is the write reaching the OS, not the fsync itself.)
    Mutant("server_replies_before_the_write", "server.py",
           "            if ops and self.store is not None:\n"
           "                await loop.run_in_executor(self.executor, self.store.write, ops)\n"
           "            self.broker.batch_committed(batch)\n"
           "            self.after_input()\n",
           "            self.broker.batch_committed(batch)\n"
           "            self.after_input()\n"
           "            await asyncio.sleep(0.05)\n"
           "            if ops and self.store is not None:\n"
           "                await loop.run_in_executor(self.executor, self.store.write, ops)\n",
           TCP_CRASH, "PC-5, PC-10, TX-8"),
)


def patch(text: str, mutant: Mutant) -> str:
    """The file's text with the mutant's patch applied; StalePatch unless the old text occurs once."""
    count = text.count(mutant.old)
    if count != 1:
        raise StalePatch(f"mutant {mutant.name}: its old text occurs {count} times in impl/{mutant.file} "
                         f"(it must occur once; re-anchor the patch): {mutant.old!r}")
    return text.replace(mutant.old, mutant.new)


def make_copy(mutant: Mutant, root: Path) -> Path:
    """A copy of the `impl` package with the mutant applied, at root/impl; returns root."""
    target = root / "impl"
    shutil.copytree(REPO / "impl", target, ignore=shutil.ignore_patterns("__pycache__"))
    path = target / mutant.file
    path.write_text(patch(path.read_text(), mutant))
    return root


def run_catching_test(mutant: Mutant, root: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run the mutant's catching test against the mutated copy (first on sys.path), without shrinking:
    the test fails when it catches the mutant."""
    make_copy(mutant, root)
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); import impl; "
        "assert impl.__file__.startswith(sys.argv[1]), impl.__file__; "
        "import pytest; sys.exit(pytest.main(['-q', '-x', '-p', 'no:cacheprovider', sys.argv[2]]))"
    )
    env = {**os.environ, "RABBITPROOF_CONFORMANCE_NO_SHRINK": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, "-c", script, str(root), mutant.caught_by], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


# Every mutant is caught by the test it names (tests/test_conformance_mutants.py asserts it): the general
# programs catch five; most others need a situation the general programs reach too rarely for CI's
# budget, which the focused programs (programs.focused_programs) set up; the server's needs a crash of
# the server process over TCP.
MUTANTS = ALL_MUTANTS
