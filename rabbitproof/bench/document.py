"""`rabbitproof bench --json`: a part's report as data. Each part prints its figures as tables; under
`--json` the part prints to a TableKeeper, which shows everything on stderr (so that stdout holds only the
JSON document) and keeps each table, and ``table_json`` turns a kept table into rows a script can read."""
from __future__ import annotations

import re
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

FIGURE = re.compile(r"-?\d{1,3}(,\d{3})+(\.\d+)?|-?\d+(\.\d+)?")


class TableKeeper(Console):
    """A console on stderr that keeps every table printed to it, in order."""

    def __init__(self) -> None:
        super().__init__(stderr=True, highlight=False)
        self.tables: list[Table] = []

    def print(self, *objects: Any, **kwargs: Any) -> None:  # type: ignore[override]
        self.tables += [o for o in objects if isinstance(o, Table)]
        super().print(*objects, **kwargs)


def cell_value(cell: object) -> object:
    """A cell as printed (markup removed), a figure (``12,345``, ``0.25``) as a number, anything else
    (``1.8x``, ``-``, ``accepted``) as text."""
    text = cell.plain if isinstance(cell, Text) else Text.from_markup(str(cell)).plain
    text = text.strip()
    if FIGURE.fullmatch(text):
        number = text.replace(",", "")
        return float(number) if "." in number else int(number)
    return text


def table_json(table: Table) -> dict[str, Any]:
    """A table as ``title``, ``columns`` and ``rows``, each row an object keyed by column header."""
    headers = [Text.from_markup(str(c.header)).plain for c in table.columns]
    cells = [list(c.cells) for c in table.columns]
    title = table.title.plain if isinstance(table.title, Text) else \
        Text.from_markup(table.title).plain if table.title else None
    return {"title": title, "columns": headers,
            "rows": [dict(zip(headers, (cell_value(c) for c in row))) for row in zip(*cells)]}
