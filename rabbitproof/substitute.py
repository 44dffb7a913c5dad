"""One of the design card's packages loaded from another folder than the installed one: the compiled spec
(compiled.py, ``RABBITPROOF_FAST``) or a copy of the broker with a planted bug (``RABBITPROOF_IMPL``, the
mutants of tests/fixtures/mutants.py and the planted divergences). The folders are installed as
``rabbitproof.spec``, ``rabbitproof.impl``, ...; the copy takes that name in this process before anything
imports it, and the processes this one starts do the same (the variable is in their environment)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Sequence

IMPL_ENV = "RABBITPROOF_IMPL"


class SubstituteError(RuntimeError):
    """The copy cannot stand in for the package: not a package, or the package was imported first."""


def substitute(name: str, folder: Path, also: Sequence[Path] = ()) -> None:
    """Make ``rabbitproof.<name>`` the package in ``folder`` (its ``__init__.py`` and modules, then those of
    the folders ``also`` that ``folder`` lacks) for the rest of this process; SubstituteError when
    ``folder`` is not a package or another copy was imported first."""
    full = f"rabbitproof.{name}"
    init = Path(folder) / "__init__.py"
    if not init.is_file():
        raise SubstituteError(f"{folder} is not a package: it has no __init__.py")
    loaded = sys.modules.get(full)
    if loaded is not None:
        if Path(loaded.__file__ or "").resolve() == init.resolve():
            return
        raise SubstituteError(f"{full} was imported from {loaded.__file__} before {folder} could stand in for it")
    spec = importlib.util.spec_from_file_location(full, init,
                                                  submodule_search_locations=[str(folder), *map(str, also)])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[full] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[full]
        raise
    setattr(sys.modules["rabbitproof"], name, module)
