"""The durable store: durable exchanges, queues, bindings and persistent messages in SQLite (WAL).

The broker core hands over batches of writes (`impl.core.Batch`); `write` commits one batch in one
transaction with synchronous=FULL, so that a confirm released after it survives a crash (PC-5, PC-10).
`load` returns what a restart recovers (DU-1, DU-2, DU-3). One thread at a time uses a Store.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from pamqp import decode

SCHEMA = """
CREATE TABLE IF NOT EXISTS exchanges (
    name TEXT PRIMARY KEY, kind TEXT NOT NULL, auto_delete INTEGER NOT NULL, internal INTEGER NOT NULL,
    arguments BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS queues (
    name TEXT PRIMARY KEY, auto_delete INTEGER NOT NULL, arguments BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS bindings (
    exchange TEXT NOT NULL, queue TEXT NOT NULL, routing_key TEXT NOT NULL, arguments BLOB NOT NULL,
    PRIMARY KEY (exchange, queue, routing_key, arguments));
CREATE TABLE IF NOT EXISTS exchange_bindings (
    source TEXT NOT NULL, destination TEXT NOT NULL, routing_key TEXT NOT NULL, arguments BLOB NOT NULL,
    PRIMARY KEY (source, destination, routing_key, arguments));
CREATE TABLE IF NOT EXISTS messages (
    queue TEXT NOT NULL, seq INTEGER NOT NULL, exchange TEXT NOT NULL, routing_key TEXT NOT NULL,
    properties BLOB NOT NULL, body BLOB NOT NULL, redelivered INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

SQL = {
    "x+": "INSERT OR REPLACE INTO exchanges VALUES (?, ?, ?, ?, ?)",
    "q+": "INSERT OR REPLACE INTO queues VALUES (?, ?, ?)",
    "b+": "INSERT OR IGNORE INTO bindings VALUES (?, ?, ?, ?)",
    "b-": "DELETE FROM bindings WHERE exchange = ? AND queue = ? AND routing_key = ? AND arguments = ?",
    "e+": "INSERT OR IGNORE INTO exchange_bindings VALUES (?, ?, ?, ?)",
    "e-": "DELETE FROM exchange_bindings WHERE source = ? AND destination = ? AND routing_key = ? AND arguments = ?",
    "m+": "INSERT OR REPLACE INTO messages (queue, seq, exchange, routing_key, properties, body) VALUES (?, ?, ?, ?, ?, ?)",
    "m-": "DELETE FROM messages WHERE queue = ? AND seq = ?",
}


def decode_table(data: bytes) -> dict:
    return decode.field_table(data)[1] if data else {}


@dataclass
class Recovered:
    """What the store holds: rows to rebuild the broker from, and whether the last shutdown was clean."""

    exchanges: list[tuple[str, str, bool, bool, dict]] = field(default_factory=list)
    queues: list[tuple[str, bool, dict]] = field(default_factory=list)
    bindings: list[tuple[str, str, str, dict]] = field(default_factory=list)
    exchange_bindings: list[tuple[str, str, str, dict]] = field(default_factory=list)  # (source, destination, ...)
    # (queue, seq, exchange, routing key, properties, body, redelivered)
    messages: list[tuple[str, int, str, str, bytes, bytes, bool]] = field(default_factory=list)
    clean: bool = True


class Store:
    """A SQLite database in a data directory."""

    def __init__(self, data_dir: str) -> None:
        os.makedirs(data_dir, exist_ok=True)
        self.path = os.path.join(data_dir, "rabbitproof.sqlite3")
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(SCHEMA)

    def load(self) -> Recovered:
        """Everything durable, and mark the store in use (an unclean stop leaves the mark behind)."""
        db = self.db
        state = Recovered()
        row = db.execute("SELECT value FROM meta WHERE key = 'running'").fetchone()
        state.clean = row is None or row[0] != "1"
        state.exchanges = [
            (name, kind, bool(auto_delete), bool(internal), decode_table(arguments))
            for name, kind, auto_delete, internal, arguments in db.execute("SELECT * FROM exchanges")
        ]
        state.queues = [
            (name, bool(auto_delete), decode_table(arguments))
            for name, auto_delete, arguments in db.execute("SELECT * FROM queues")
        ]
        state.bindings = [
            (exchange, queue, routing_key, decode_table(arguments))
            for exchange, queue, routing_key, arguments in db.execute("SELECT * FROM bindings")
        ]
        state.exchange_bindings = [
            (source, destination, routing_key, decode_table(arguments))
            for source, destination, routing_key, arguments in db.execute("SELECT * FROM exchange_bindings")
        ]
        state.messages = [
            (queue, seq, exchange, routing_key, bytes(properties), bytes(body), bool(redelivered) or not state.clean)
            for queue, seq, exchange, routing_key, properties, body, redelivered in db.execute(
                "SELECT queue, seq, exchange, routing_key, properties, body, redelivered FROM messages "
                "ORDER BY queue, seq"
            )
        ]
        db.execute("INSERT OR REPLACE INTO meta VALUES ('running', '1')")
        return state

    def write(self, ops: list[Any]) -> None:
        """Commit one batch of writes in one transaction (group commit)."""
        db = self.db
        db.execute("BEGIN")
        try:
            run: list[tuple] = []
            run_kind = None
            for op in ops:
                if op is None:
                    continue
                kind = op[0]
                if kind != run_kind and run:
                    self._apply(run_kind, run)
                    run = []
                run_kind = kind
                run.append(op[1:])
            if run:
                self._apply(run_kind, run)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def _apply(self, kind: str | None, rows: list[tuple]) -> None:
        db = self.db
        if kind in SQL:
            db.executemany(SQL[kind], rows)
        elif kind == "x-":
            db.executemany("DELETE FROM exchanges WHERE name = ?", rows)
            db.executemany("DELETE FROM bindings WHERE exchange = ?", rows)
            db.executemany("DELETE FROM exchange_bindings WHERE source = ? OR destination = ?",
                           [(row[0], row[0]) for row in rows])
        elif kind == "q-":
            db.executemany("DELETE FROM queues WHERE name = ?", rows)
            db.executemany("DELETE FROM bindings WHERE queue = ?", rows)
            db.executemany("DELETE FROM messages WHERE queue = ?", rows)
        else:
            raise ValueError(f"unknown store operation {kind!r}")

    def close(self, delivered: list[tuple[str, int]] | None = None) -> None:
        """A clean shutdown: record which messages were delivered before (RQ-2) and clear the mark."""
        db = self.db
        db.execute("BEGIN")
        db.executemany("UPDATE messages SET redelivered = 1 WHERE queue = ? AND seq = ?", delivered or [])
        db.execute("DELETE FROM meta WHERE key = 'running'")
        db.execute("COMMIT")
        db.close()
