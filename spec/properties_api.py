"""The shape of a named property, shared by the registry (spec/properties.py) and every engine.

A property is a named predicate on one state, typed by what exploration expects of it (STYLE.md,
stateright): ``always`` must hold in every reachable state, ``sometimes`` must hold in at least one
(it guards an invariant against vacuity), and ``hazard`` is a property the rules warn does NOT hold:
exploration must reach a state where the predicate is false, and that state's trace is the
documented counterexample.

A *proof helper* is an invariant kept because the Z3 proofs need it (``proofs/``: it makes another
invariant inductive), not because it states something a user asked about: ``make verify`` checks every
helper on every standard configuration, a user's run checks one only when it is named (``--property``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal

Kind = Literal["always", "sometimes", "hazard"]
KINDS: tuple[Kind, ...] = ("always", "sometimes", "hazard")


@dataclass(frozen=True)
class Property:
    """A named predicate on a state, with the IDs of the rules it checks (rabbitproof/rules.toml)."""

    name: str
    kind: Kind
    rules: tuple[str, ...]
    holds: Callable[[Any], bool]
    doc: str
    helper: bool = False            # a proof helper (see above): checked by make verify, not by default

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"property {self.name}: kind must be one of {KINDS}, not {self.kind!r}")
        if not self.rules:
            raise ValueError(f"property {self.name}: cites no rule ID")

    def expectation_met(self, found: bool) -> bool:
        """Whether exploration's result is the expected one.

        ``found`` means: for always and hazard, a state where the predicate is false was reached;
        for sometimes, a state where it is true was reached.
        """
        return (not found) if self.kind == "always" else found


@dataclass(frozen=True)
class Liveness:
    """A property of infinite executions, judged on the explored graph: a *fair cycle* reachable from the
    start in which ``stays`` holds in every state and ``recurs`` in at least one is a counterexample
    (a lasso: the steps to the cycle, then the steps that repeat). It is expected not to exist.

    Fairness is the model's (its ``fairness(config)`` hook names the weakly fair class of each action):
    a cycle in which some fair class is enabled in every state yet never taken is no counterexample.
    A state where no fair class is enabled may end its execution (what is left, a fault or an
    application's free choice, need never happen; a state where nothing is enabled is one); ``at_end``
    says whether such a state where ``stays`` holds is a counterexample too (the execution may stop
    there, for ever)."""

    name: str
    rules: tuple[str, ...]
    doc: str
    stays: Callable[[Any], bool]
    recurs: Callable[[Any], bool]
    at_end: bool = False
    kind: str = "fair cycle"

    def __post_init__(self) -> None:
        if not self.rules:
            raise ValueError(f"liveness property {self.name}: cites no rule ID")
