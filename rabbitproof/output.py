"""How every subcommand writes its report: a console as wide as the terminal (or ``COLUMNS``), plain text
when piped, tables whose headers are never cut, a verdict line at the end, one JSON document on stdout.

The exit codes and the ``schema`` field are rabbitproof.exits'; this module only writes.
"""
from __future__ import annotations

import json
import os
import sys
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from rabbitproof.exits import BAD_INPUT, FOUND, NOTHING_FOUND, UNDECIDED, schema

PIPE_WIDTH = 80             # a pipe or a file without COLUMNS: the width people and CI logs expect

VERDICT_WORDS = {NOTHING_FOUND: "nothing found", FOUND: "found", BAD_INPUT: "bad input", UNDECIDED: "undecided"}
VERDICT_STYLES = {NOTHING_FOUND: "bold green", FOUND: "bold red", BAD_INPUT: "bold red", UNDECIDED: "bold yellow"}


def width_of(environ: dict[str, str] | None = None, terminal: bool | None = None) -> int | None:
    """The report's width: ``COLUMNS`` when it is set (a positive number), else the terminal's (None: rich
    asks it), else PIPE_WIDTH."""
    env = os.environ if environ is None else environ
    columns = env.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    on_terminal = sys.stdout.isatty() if terminal is None else terminal
    return None if on_terminal else PIPE_WIDTH


def stdout_console() -> Console:
    """Standard output as a console: as wide as width_of says; colour and box drawing only on a terminal."""
    terminal = sys.stdout.isatty()
    return Console(width=width_of(terminal=terminal), no_color=not terminal, highlight=False,
                   force_terminal=False if not terminal else None)


def new_table(console: Console, *columns: str, title: str | None = None,
              right: tuple[str, ...] = (), whole: tuple[str, ...] = ()) -> Table:
    """A table with these column headers, none of them ever cut: each column at least its header's width;
    the ``whole`` columns (names, verdicts) never wrap, the ``right`` ones (figures) are right-justified,
    and the others share what is left and wrap. Box drawing on a terminal, plain ASCII when piped or
    written to a file."""
    table = Table(title=title, box=box.HEAVY_HEAD if console.is_terminal else box.ASCII, title_justify="left")
    for name in columns:
        if name in whole:
            table.add_column(name, no_wrap=True)
        elif name in right:
            table.add_column(name, min_width=len(name), justify="right", no_wrap=True)
        else:
            table.add_column(name, min_width=len(name), ratio=1, overflow="fold")
    return table


def _plain(cell: object) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def narrowest(table: Table) -> int:
    """The fewest characters ``table`` takes with every header and every no-wrap cell whole and every
    other cell wrapped at its spaces: a column's widest unbreakable piece, plus a space either side and a
    border between columns (the tables here all draw their edges)."""
    width = 1
    for column in table.columns:
        texts = [_plain(column.header)] + [_plain(c) for c in column.cells]
        if column.no_wrap:
            piece = max(len(line) for t in texts for line in t.splitlines() or [""])
        else:
            piece = max([len(w) for t in texts for w in t.split()] + [column.min_width or 0, len(_plain(column.header))])
        width += piece + 3
    return width


def show(console: Console, table: Table) -> None:
    """Print ``table`` if it fits the console's width with every header whole; else the same rows as a
    list, one row a line (``- config: ack_basics; distinct states: 8,536; ...``), wrapped under its
    indent: a table too wide for the report is never cut."""
    if narrowest(table) <= console.width:
        console.print(table)
        return
    if table.title:
        console.print(Text(str(table.title), style="italic"))
    headers = [str(c.header) for c in table.columns]
    for cells in zip(*(list(c.cells) for c in table.columns)):
        parts = [f"{h}: {_plain(c)}" for h, c in zip(headers, cells) if _plain(c).strip()]
        console.print(Text("- " + "; ".join(parts)))


def verdict_line(console: Console, subcommand: str, code: int, detail: str, words: str | None = None) -> None:
    """The last line of every report: ``check: found: ...`` (the words of the exit code, or ``words``,
    then why). One line however narrow the report, so that a CI log can be searched for it."""
    console.print(Text(f"{subcommand}: {words or VERDICT_WORDS[code]}: {detail} (exit {code})",
                       VERDICT_STYLES[code]), soft_wrap=True)


def print_json(console: Console, subcommand: str, document: dict[str, Any], code: int) -> None:
    """One JSON object on stdout: ``schema`` first, then ``exit_code`` and ``verdict``, then ``document``."""
    out = {"schema": schema(subcommand), "exit_code": code, "verdict": VERDICT_WORDS[code], **document}
    console.file.write(json.dumps(out, indent=2, default=str) + "\n")
