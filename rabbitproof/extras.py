"""The optional parts of the install (pyproject.toml's extras): what each brings, and the one-line refusal of
a subcommand that needs one that is not installed.

`pip install .` brings what `check`, `trace`, `list`, `explore` (local engine), `conformance` and `broker`
need; `.[spark]` adds the Spark engine, `.[proofs]` CrossHair (`verify`'s contracts part), `.[dev]` the
test and build tools (`make setup` installs all three)."""
from __future__ import annotations

import importlib

EXTRAS: dict[str, tuple[str, ...]] = {
    "spark": ("pyspark", "pyarrow", "pandas"),
    "proofs": ("crosshair",),
    "dev": ("pytest", "xdist", "pika", "aio_pika", "mypy"),
}


class MissingExtra(ImportError):
    """A subcommand needs an extra that is not installed (exit code 2, one line)."""


def require(extra: str, what: str) -> None:
    """MissingExtra naming ``extra`` and how to install it, unless every module it brings imports."""
    for module in EXTRAS[extra]:
        try:
            importlib.import_module(module)
        except ImportError:
            raise MissingExtra(f"{what} needs the {extra} extra, which is not installed ({module} is missing): "
                               f"pip install 'rabbitproof[{extra}]'") from None
