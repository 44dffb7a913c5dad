"""What the Spark engine sends to executors, by importable names rather than by value.

A module object does not travel well and a lambda registered as a property does not pickle at all, so
an exploration is described by names an executor can import: the model's module, each property as
(module, name) in that module's ``REGISTRY`` (or the property itself when it pickles by reference,
i.e. a top-level function), the configuration (a plain frozen dataclass) and the reductions by name.
``Portable.expander()`` rebuilds the ``Expander`` once per Python worker process.
"""
from __future__ import annotations

import gc
import importlib
import pickle
import uuid
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Sequence

from rabbitproof.spec.properties_api import Property

from .expansion import Expander
from .reductions import reduction_named


@dataclass(frozen=True)
class PropertyRef:
    """A property registered under ``name`` in the ``REGISTRY`` of module ``module``."""

    module: str
    name: str

    def resolve(self) -> Property:
        return importlib.import_module(self.module).REGISTRY[self.name]


@dataclass(frozen=True)
class Portable:
    """One exploration (model, configuration, properties, reductions) as picklable names and values."""

    model: Any                      # a module name (str) or a picklable model object
    config: Any
    properties: tuple[Any, ...]     # PropertyRef or Property
    reductions: tuple[str, ...]
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    liveness: tuple[Any, ...] = ()  # spec.properties_api.Liveness, pickled as they are (top-level predicates)

    def resolve_model(self) -> Any:
        return importlib.import_module(self.model) if isinstance(self.model, str) else self.model

    def resolve_properties(self) -> tuple[Property, ...]:
        return tuple(p.resolve() if isinstance(p, PropertyRef) else p for p in self.properties)

    def expander(self) -> Expander:
        """The expander this exploration describes, built once per process."""
        built = _EXPANDERS.get(self.token)
        if built is None:
            _EXPANDERS.clear()      # one exploration at a time per worker: drop the previous one
            reduction_named(self.reductions)
            built = _EXPANDERS[self.token] = Expander(self.resolve_model(), self.config, self.resolve_properties(),
                                                      reductions=self.reductions, liveness=self.liveness)
            gc.freeze()     # the model and configuration are never garbage: stop the collector scanning them
        return built

    def modules(self) -> set[str]:
        """The top-level packages executors must be able to import."""
        names = {"rabbitproof", type(self.config).__module__}
        names.add(self.model if isinstance(self.model, str) else type(self.model).__module__)
        for p in self.properties:
            names.add(p.module if isinstance(p, PropertyRef) else p.holds.__module__)
        names.update(p.stays.__module__ for p in self.liveness)
        return {n.partition(".")[0] for n in names}


_EXPANDERS: dict[str, Expander] = {}


def _property_ref(p: Property) -> Any:
    """``p`` as something an executor can rebuild; ValueError when it cannot be sent."""
    module_name = getattr(p.holds, "__module__", None)
    if module_name:
        module = importlib.import_module(module_name)
        registered = getattr(module, "REGISTRY", {}).get(p.name)
        if registered is not None and registered.holds is p.holds:
            return PropertyRef(module_name, p.name)
    try:
        pickle.dumps(p)
    except Exception:  # noqa: BLE001 - any pickling failure means the same thing here
        raise ValueError(f"property {p.name} cannot be sent to Spark executors: define its predicate as a "
                         f"top-level function or register it in its module's REGISTRY") from None
    return p


def portable(model: Any, config: Any, properties: Sequence[Property], reductions: Sequence[str] = (),
             liveness: Sequence[Any] = ()) -> Portable:
    """The exploration as a ``Portable``; ValueError (one line) naming what cannot be sent to executors."""
    if isinstance(model, ModuleType):
        ref: Any = model.__name__
        if ref == "__main__":
            raise ValueError("the model is the __main__ module, which executors cannot import")
    else:
        ref = model
        try:
            pickle.dumps(model)
        except Exception:  # noqa: BLE001
            raise ValueError(f"the model {type(model).__name__} cannot be pickled for Spark executors") from None
    try:
        pickle.dumps(config)
    except Exception:  # noqa: BLE001
        raise ValueError(f"the configuration {getattr(config, 'name', config)!r} cannot be pickled") from None
    for p in liveness:
        try:
            pickle.dumps(p)
        except Exception:  # noqa: BLE001
            raise ValueError(f"liveness property {p.name} cannot be sent to Spark executors: define its predicates "
                             "as top-level functions") from None
    return Portable(ref, config, tuple(_property_ref(p) for p in properties), tuple(reductions),
                    liveness=tuple(liveness))
