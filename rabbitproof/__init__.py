"""rabbitproof, the product: the `rabbitproof` command (cli.py) and what it runs beside the design
card's folders: `check` (a user's setup file and its questions), `explore` (one configuration, reports
and charts, the manifest), `conformance` (any broker judged by the spec), `recording` (the raw client,
recorded scenarios, recording files), `brokers` (brokers under test: ours and a private RabbitMQ),
`bench` (the benchmarks) and `verify` (`make verify`)."""

import os as _os

if _os.environ.get("RABBITPROOF_FAST", "").strip() not in ("", "0"):   # the compiled spec (compiled.py),
    from rabbitproof import compiled as _compiled                     # before anything imports the spec
    try:
        _compiled.activate(_compiled.chosen(_os.environ["RABBITPROOF_FAST"]))
    except _compiled.CompiledSpecError as _e:
        import sys as _sys
        print(f"rabbitproof: {_e}", file=_sys.stderr)
        raise SystemExit(2) from None
