"""State-space reductions, by name: none exists yet (README, "Reductions" says why), so every name is
refused; engines and checkpoints already carry the names, so that a reduced run is never mistaken for a
full one."""
from __future__ import annotations

from typing import Any, Sequence

REDUCTIONS: tuple[str, ...] = ()


def reduction_named(names: Sequence[str]) -> Any:
    """The reduction combining ``names`` (None for none); ValueError naming an unknown one."""
    unknown = [n for n in names if n not in REDUCTIONS]
    if unknown:
        raise ValueError(f"unknown reduction {unknown[0]!r}; available: {', '.join(REDUCTIONS) or 'none'}")
    return None
