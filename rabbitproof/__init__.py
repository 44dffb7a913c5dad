"""rabbitproof, the product: the `rabbitproof` command (cli.py) and what it runs beside the design
card's folders: `check` (a user's setup file and its questions), `explore` (one configuration, reports
and charts, the manifest), `conformance` (any broker judged by the spec), `recording` (the raw client,
recorded scenarios, recording files), `brokers` (brokers under test: ours and a private RabbitMQ),
`bench` (the benchmarks) and `verify` (`make verify`).

The design card's folders (spec/, model/, impl/, proofs/, spark_check/) sit at the repository's top and are
installed inside this package: `rabbitproof.spec`, `rabbitproof.model`, ... (pyproject.toml's package-dir),
so that no generic top-level name is installed."""

import os as _os

__version__ = "0.2.0"

DESIGN_CARD = ("spec", "model", "impl", "proofs", "spark_check")     # installed as rabbitproof.spec, ...

# In a checkout the design card's folders are beside this one: they are found there first, whichever
# install of rabbitproof the Python in use has (another worktree's, an editable one, none).
_CHECKOUT = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if _os.path.isfile(_os.path.join(_CHECKOUT, "pyproject.toml")) and _os.path.isfile(_os.path.join(_CHECKOUT, "spec", "__init__.py")):
    __path__.append(_CHECKOUT)

if _os.environ.get("RABBITPROOF_FAST", "").strip() not in ("", "0"):   # the compiled spec (compiled.py),
    from rabbitproof import compiled as _compiled                     # before anything imports the spec
    try:
        _compiled.activate(_compiled.chosen(_os.environ["RABBITPROOF_FAST"]))
    except _compiled.CompiledSpecError as _e:
        import sys as _sys
        print(f"rabbitproof: {_e}", file=_sys.stderr)
        raise SystemExit(2) from None

if _os.environ.get("RABBITPROOF_IMPL", "").strip():          # a copy of the broker (substitute.py)
    from pathlib import Path as _Path
    from rabbitproof import substitute as _substitute
    _substitute.substitute("impl", _Path(_os.environ["RABBITPROOF_IMPL"]))
