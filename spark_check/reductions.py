"""State-space reductions, by name, offered by the model through hooks the engines call.

A model offers a reduction by giving its hook (as stateright's models give ``Representative``):

- ``por``: ``model.fused_takes(config)``, an object whose ``settle(state)`` returns the state's normal
  form under steps that no other step and no property can tell apart, with the model steps it took
  (the spec's, with its soundness argument: spec.por);
- ``symmetry``: ``model.symmetry(config)``, an object with ``renamings`` and ``fingerprint_of(exact)``
  naming a state's orbit (the spec's, with its soundness argument: spec.symmetry; `rabbitproof check`'s
  machine gives its own, rabbitproof.check.questions);
- ``budgets``: ``model.subsumption(config)``, an object whose ``split(state)`` returns the state with its
  budget counters cleared and the counters: a state is not explored when a twin that spent less is
  (spark_check.subsumption; `rabbitproof check`'s machine offers it, with its soundness argument:
  rabbitproof.check.spent_budgets).

A liveness property (spark_check.liveness) is judged on the reduced graph too. A reduction object says
whether it keeps fair cycles (``keeps_fair_cycles``, with its argument in the model): the reduced graph
then has a fair accepting cycle exactly when the full one has. One that does not (or says nothing) is
trusted only one way: a fair cycle found is a counterexample; a property whose reduced graph has cycles
through its ``stays`` states, none of them fair, is left undecided, with a note saying so
(``ExplorationResult.notes``); one with no such cycle is decided by its end states, which every
reduction here keeps.

The engines know nothing of what a reduction means: they call the hooks. Engines and checkpoints
carry the reductions' names, so a reduced run is never mistaken for a full one (the manifest pins full
counts only).
"""
from __future__ import annotations

from typing import Any, Sequence

REDUCTIONS: tuple[str, ...] = ("por", "symmetry", "budgets")

# The hook of the model that offers each reduction.
HOOKS: dict[str, str] = {"por": "fused_takes", "symmetry": "symmetry", "budgets": "subsumption"}


def reduction_named(names: Sequence[str]) -> tuple[str, ...]:
    """The reduction names, checked, in the order of ``REDUCTIONS`` (so that a run, a checkpoint and the
    manifest name one combination one way); ValueError naming an unknown or repeated one."""
    unknown = [n for n in names if n not in REDUCTIONS]
    if unknown:
        raise ValueError(f"unknown reduction {unknown[0]!r}; available: {', '.join(REDUCTIONS)}")
    if len(set(names)) != len(names):
        raise ValueError(f"reduction named twice: {', '.join(names)}")
    return tuple(n for n in REDUCTIONS if n in names)


def parse_reductions(text: str) -> tuple[str, ...]:
    """``--reduce`` as names: comma-separated, ``none`` (or nothing) for none; ValueError for an unknown one."""
    names = tuple(n.strip() for n in text.split(",") if n.strip() and n.strip() != "none")
    return reduction_named(names)


def written_for(model: Any) -> tuple[str, ...]:
    """The reductions ``model`` offers (those whose hook it has): ``make verify`` and `rabbitproof check`
    use them all."""
    return tuple(n for n in REDUCTIONS if callable(getattr(model, HOOKS[n], None)))


def _hook(name: str, model: Any, config: Any) -> Any:
    """The reduction ``name`` of ``config``, from the model's hook; ValueError (one line) without one."""
    hook = getattr(model, HOOKS[name], None)
    if not callable(hook):
        offered = ", ".join(written_for(model)) or "none"
        raise ValueError(f"reduction {name!r} is not written for this model (it offers: {offered})")
    return hook(config)


def build_symmetry(names: Sequence[str], model: Any, config: Any) -> Any:
    """The ``symmetry`` reduction of ``config`` when ``names`` ask for it, else None; ValueError (one
    line) when the model does not offer it."""
    reduction_named(names)
    return _hook("symmetry", model, config) if "symmetry" in names else None


def build_subsumption(names: Sequence[str], model: Any, config: Any) -> Any:
    """The ``budgets`` reduction of ``config`` when ``names`` ask for it, else None; ValueError (one line)
    when the model does not offer it."""
    reduction_named(names)
    return _hook("budgets", model, config) if "budgets" in names else None


def build_reduction(names: Sequence[str], model: Any, config: Any) -> Any:
    """The fused-takes reduction ``names`` ask for on ``model`` and ``config`` (None without ``por``);
    ValueError (one line) when one of ``names`` is not offered by the model."""
    reduction_named(names)
    build_symmetry(names, model, config)
    build_subsumption(names, model, config)
    return _hook("por", model, config) if "por" in names else None
