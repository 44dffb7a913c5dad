"""State-space reductions: explore fewer states without changing any verdict (README, "Reductions")."""
from __future__ import annotations

from typing import Any, Sequence

REDUCTIONS: tuple[str, ...] = ()


def reduction_named(names: Sequence[str]) -> Any:
    """The reduction combining ``names`` (None for none); ValueError naming an unknown one."""
    unknown = [n for n in names if n not in REDUCTIONS]
    if unknown:
        raise ValueError(f"unknown reduction {unknown[0]!r}; available: {', '.join(REDUCTIONS) or 'none'}")
    return None
