"""`rabbitproof trace FILE`: the spec's verdict on a recorded run.

FILE is either a recording of a real broker (JSON, rabbitproof.recording.file: what a raw client sent
and received, with real queue names, tags and bodies; the configuration is derived from it), or a trace
written in the spec's own language (``.trace`` text, spec.trace_text: ``c0 sent basic.ack(...)`` per
line), judged under the spec configuration named by ``--config``. Exit codes: 0 accepted, 1 rejected
(the first observation no execution of the spec explains, and what the spec allowed there) or
inconclusive (the search's node budget ran out), 2 a file or option that cannot be used.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console

from rabbitproof.spec import configs, trace
from rabbitproof.recording import observations

from rabbitproof.options import EXIT_FAILED, EXIT_OK, fail
from rabbitproof.recording.file import RecordingError, load

PROG = "rabbitproof trace"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `rabbitproof trace`."""
    parser.add_argument("file", help="a recording (JSON, docs/reference/recording-format.md) or a .trace text")
    parser.add_argument("--config", metavar="NAME",
                        help="a .trace text: the spec configuration to judge it under (see `rabbitproof list`)")
    parser.add_argument("--max-nodes", type=int, default=2_000_000, metavar="N",
                        help="the search's budget of spec states (default 2,000,000)")
    parser.add_argument("--show-trace", action="store_true", help="print the trace in the spec's language first")
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")


def _text_trace(path: Path, config_name: str | None) -> tuple[dict, object, str]:
    if not config_name:
        raise ValueError(f"{path}: a .trace text needs --config NAME (the spec configuration it runs under)")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ValueError(f"{path}: {e.strerror}") from None
    config = configs.get(config_name)          # ConfigError (a ValueError) names the known ones
    return trace.parse(text), config, text


def run(args: argparse.Namespace, out: Console) -> int:
    """`rabbitproof trace`: the exit code."""
    path = Path(args.file)
    if args.max_nodes < 1:
        return fail(PROG, f"--max-nodes must be positive, not {args.max_nodes}")
    try:
        if path.suffix == ".trace":
            observed, config, text = _text_trace(path, args.config)
            verdict = trace.check(observed, config, max_nodes=args.max_nodes)
        else:
            if args.config:
                raise ValueError("--config is for a .trace text; a recording's configuration is derived from it")
            slots, existing = load(path)
            found = observations.from_recording(slots, existing)
            text = found.text()
            verdict = found.check(args.max_nodes)
    except (RecordingError, observations.Unsupported, ValueError) as e:
        return fail(PROG, e)
    if args.json:
        out.file.write(json.dumps({"file": str(path), "status": verdict.status, "explanation": verdict.explain()},
                                  indent=2) + "\n")
    else:
        if args.show_trace:
            out.print(text, highlight=False, markup=False)
            out.print()
        out.print(verdict.explain(), highlight=False, markup=False,
                  style="green" if verdict.ok else "red")
    return EXIT_OK if verdict.ok else EXIT_FAILED

