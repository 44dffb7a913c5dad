"""`explore --bound NAME=N` for the spec: a fault is bounded by the name the setup file gives it
(``broker_crash=2``, ``connection_closed=1``), as `check --bound` takes it; the other bounds by the spec's
own names (``messages=3``, ``requeues=2``, ``max_states``). The names map to the spec's budgets
(rabbitproof.check.setup_model.FAULT_BOUNDS); a budget's own name where a fault's is meant, an unknown
name, or a value out of range is refused in one line, before any exploration."""
from __future__ import annotations

from typing import Mapping

from rabbitproof.spark_check.bundle import InputError
from rabbitproof.spec.configs import BOUNDS

from rabbitproof.check.setup_model import FAULT_BOUNDS

FAULT_OF_BUDGET = {budget: fault for fault, budget in FAULT_BOUNDS.items()}
# What --bound takes on the spec, fault names first: the setup file's faults, then the budgets that are
# not faults, then the state cap.
NAMES: tuple[str, ...] = tuple(FAULT_BOUNDS) + tuple(name for name in BOUNDS if name not in FAULT_OF_BUDGET)


def spec_bounds(bounds: Mapping[str, str]) -> dict[str, str]:
    """``--bound`` as the spec's bounds (``broker_crash`` becomes ``crashes``); InputError (one line) for a
    budget's own name where a fault's is meant, an unknown name, or a value that is not a whole number in
    the budget's range."""
    out: dict[str, str] = {}
    for name, raw in bounds.items():
        if name in FAULT_OF_BUDGET:
            raise InputError(f"--bound {name}: a fault is bounded by its name in the setup file: "
                             f"{FAULT_OF_BUDGET[name]}={raw}")
        if name not in NAMES:
            raise InputError(f"unknown bound {name!r}; the bounds: {', '.join(NAMES)}")
        budget = FAULT_BOUNDS.get(name, name)
        try:
            value = int(raw)
        except ValueError:
            raise InputError(f"--bound {name} must be a whole number, not {raw!r}") from None
        low, high = BOUNDS[budget]
        if not low <= value <= high:
            raise InputError(f"--bound {name}={value} is out of range ({low} to {high})")
        out[budget] = raw
    return out
