"""Durable writes, grouped in batches (group commit, PC-5, DU-2).

The core does no I/O: every change to durable state is appended to the open `Batch` of the `Journal`.
The owner (the server, or a test) takes the batch, commits it to disk, and reports it committed, which
is when what waited on that batch (publisher confirms, tx.commit-ok) is released.
"""

from __future__ import annotations

from typing import Any, Callable

from pamqp import encode


def encode_table(arguments: dict | None) -> bytes:
    return encode.field_table(arguments or {})


class Batch:
    """Durable writes to commit together, and what to release once they are on disk."""

    __slots__ = ("ops", "inserts", "completions")

    def __init__(self) -> None:
        self.ops: list[tuple | None] = []
        self.inserts: dict[tuple[str, int], int] = {}
        # (callback, argument): called once the batch is on disk
        self.completions: list[tuple[Callable[[int], None], int]] = []

    def __bool__(self) -> bool:
        return bool(self.ops) or bool(self.completions)

    def writes(self) -> list[tuple]:
        return [op for op in self.ops if op is not None]


class Journal:
    """The open batch: what the core asks to write, and what waits for the write."""

    __slots__ = ("batch",)

    def __init__(self) -> None:
        self.batch = Batch()

    def write(self, *op: Any) -> None:
        """A durable change: ("q+", name, ...), ("x-", name), ("b+", ...), ... (impl.store applies them)."""
        self.batch.ops.append(op)

    def persist_message(self, queue_name: str, seq: int, message: Any) -> None:
        batch = self.batch
        batch.inserts[(queue_name, seq)] = len(batch.ops)
        batch.ops.append(
            ("m+", queue_name, seq, message.exchange, message.routing_key, message.properties_raw, message.body)
        )

    def unpersist_message(self, queue_name: str, seq: int) -> None:
        batch = self.batch
        index = batch.inserts.pop((queue_name, seq), None)
        if index is not None:  # written and removed within one batch: neither reaches the disk
            batch.ops[index] = None
        else:
            batch.ops.append(("m-", queue_name, seq))

    def after_commit(self, callback: Callable[[int], None], argument: int = 0) -> None:
        """Call callback(argument) once the open batch is on disk."""
        self.batch.completions.append((callback, argument))

    def take(self) -> Batch | None:
        """The open batch, if it holds anything, replaced by a new empty one."""
        if not self.batch:
            return None
        batch, self.batch = self.batch, Batch()
        return batch

    @staticmethod
    def committed(batch: Batch) -> None:
        """The batch is on disk: release what waited for it."""
        for callback, argument in batch.completions:
            callback(argument)
