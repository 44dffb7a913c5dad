"""What the explorer needs from a specification, gathered in one value: the model, its configurations,
its property registry and its liveness registry. ``load_spec`` reads them from ``spec/``; a test passes a
single module (the toy model) that provides them all (a module without ``LIVENESS`` has none).
"""
from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Mapping, Sequence

from rabbitproof.spec.properties_api import Liveness, Property

from .engine import Model


class InputError(ValueError):
    """Bad input from the command line: an unknown name or a bound out of range (exit code 2)."""


@dataclass(frozen=True)
class SpecBundle:
    """A model with its configurations (``CONFIGS``, ``STANDARD``, ``get``), property registry and liveness
    registry (``LIVENESS``: checked on every configuration, as ``make verify`` does)."""

    model: Model
    configs: Any
    registry: Mapping[str, Property]
    liveness: Mapping[str, Liveness] = field(default_factory=dict)

    def config(self, name: str, bounds: Mapping[str, str] | None = None) -> Any:
        """The configuration called ``name`` with ``bounds`` overridden; InputError if either is bad."""
        try:
            config = self.configs.get(name)
            if bounds:
                config = config.override(dict(bounds))
        except ValueError as e:  # spec.configs.ConfigError is a ValueError
            raise InputError(_one_line(e)) from None
        return config

    def properties(self, config: Any, names: Sequence[str] = (), *, helpers: bool = True) -> tuple[Property, ...]:
        """The named properties, or the configuration's own when none are named (without the proof
        helpers among them when ``helpers`` is false: a user's run). Names of liveness properties are
        ``liveness_named``'s business."""
        safety = [n for n in names if n not in self.liveness]
        if names and not safety:
            return ()                   # only liveness properties named
        return properties_for(config, self.registry, safety, helpers=helpers)

    def liveness_named(self, names: Sequence[str] = ()) -> tuple[Liveness, ...]:
        """The liveness properties among ``names``, or every one when none are named."""
        if not names:
            return tuple(self.liveness.values())
        return tuple(self.liveness[n] for n in dict.fromkeys(names) if n in self.liveness)

    def action_types(self) -> tuple[type, ...]:
        """Every action class of the model, so coverage can list those that never fired."""
        return action_types_of(self.model)


def properties_for(
    config: Any, registry: Mapping[str, Property], names: Sequence[str] = (), *, helpers: bool = True,
) -> tuple[Property, ...]:
    """The properties to check on ``config``: ``names`` if given, else the configuration's own, where an
    empty ``config.properties`` means every property in the registry. InputError for an unknown name.

    ``helpers=False`` leaves the proof helpers (``Property.helper``) out of the configuration's own, as
    a user's run does; a named helper is checked all the same. ``make verify`` keeps them (the default)."""
    chosen = tuple(names) or tuple(config.properties) or tuple(registry)
    unknown = [n for n in chosen if n not in registry]
    if unknown:
        raise InputError(f"unknown property {unknown[0]!r}; known: {', '.join(sorted(registry))}")
    if not names and not helpers:
        chosen = tuple(n for n in chosen if not registry[n].helper)
    return tuple(registry[n] for n in dict.fromkeys(chosen))


def helpers_left_out(config: Any, registry: Mapping[str, Property], names: Sequence[str] = ()) -> tuple[str, ...]:
    """The proof helpers a user's run of ``config`` leaves out (none when properties are named)."""
    if names:
        return ()
    chosen = tuple(config.properties) or tuple(registry)
    return tuple(n for n in dict.fromkeys(chosen) if n in registry and registry[n].helper)


def load_spec() -> SpecBundle:
    """The real specification: ``spec.machine``, ``spec.configs`` and ``spec.properties.REGISTRY``."""
    try:
        machine = importlib.import_module("rabbitproof.spec.machine")
        configs = importlib.import_module("rabbitproof.spec.configs")
        properties = importlib.import_module("rabbitproof.spec.properties")
    except ImportError as e:
        raise InputError(f"the specification cannot be imported: {_one_line(e)}") from None
    return SpecBundle(model=machine, configs=configs, registry=properties.REGISTRY, liveness=properties.LIVENESS)


def load_module(name: str) -> SpecBundle:
    """A single module that is model, configurations and registry at once (the tests' toy model)."""
    try:
        module = importlib.import_module(name)
    except ImportError as e:
        raise InputError(f"model module {name!r} cannot be imported: {_one_line(e)}") from None
    return SpecBundle(model=module, configs=module, registry=module.REGISTRY, liveness=getattr(module, "LIVENESS", {}))


def action_types_of(model: Any) -> tuple[type, ...]:
    """The model's concrete action classes.

    ``model.ACTIONS`` when the model lists them; otherwise every dataclass with an ``actor`` that the
    model's module names, directly or in a module of its own package that it imports (``from . import
    actions as A``), closed under subclassing, keeping only leaves (so a base ``Action`` or
    ``ClientAction`` is not reported as never fired).
    """
    listed = getattr(model, "ACTIONS", None)
    if listed is not None:
        return tuple(listed)
    if not isinstance(model, ModuleType):
        return ()
    package = model.__name__.rpartition(".")[0]
    namespaces = [vars(model)] + [
        vars(v) for v in vars(model).values()
        if isinstance(v, ModuleType) and package and v.__name__.startswith(package + ".")
    ]
    seen: set[type] = set()
    todo = [
        v
        for namespace in namespaces
        for v in namespace.values()
        if isinstance(v, type) and dataclasses.is_dataclass(v) and hasattr(v, "actor")
    ]
    while todo:
        cls = todo.pop()
        if cls not in seen:
            seen.add(cls)
            todo.extend(cls.__subclasses__())
    leaves = [c for c in seen if not any(s in seen for s in c.__subclasses__())]
    return tuple(sorted(leaves, key=lambda c: c.__name__))


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__
