"""`rabbitproof trace FILE`: the spec's verdict on a recorded run.

FILE is either a recording of a real broker (JSON, rabbitproof.recording.file: what a raw client sent
and received, with real queue names, tags and bodies; the configuration is derived from it), or a trace
written in the spec's own language (``.trace`` text, spec.trace_text: ``c0 sent basic.ack(...)`` per
line), judged under the spec configuration named by ``--config``. Exit codes (rabbitproof.exits): 0
accepted, 1 rejected (the first observation no execution of the spec explains, and what the spec allowed
there), 2 a file or option that cannot be used, 3 inconclusive (the search's node budget ran out).
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path

from rich.console import Console

from rabbitproof.spec import configs, trace
from rabbitproof.recording import observations

from rabbitproof.explore.steps import frame_fields
from rabbitproof.exits import FOUND, NOTHING_FOUND, UNDECIDED
from rabbitproof.options import fail
from rabbitproof.output import print_json, verdict_line
from rabbitproof.recording.file import RecordingError, load

PROG = "rabbitproof trace"
_OBSERVED = re.compile(r"^(c\d+) (sent|received) ([a-z]+\.[a-z-]+)\((.*)\)$")


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
    code = {trace.ACCEPTED: NOTHING_FOUND, trace.REJECTED: FOUND}.get(verdict.status, UNDECIDED)
    if args.json:
        print_json(out, "trace", verdict_json(path, verdict, text), code)
    else:
        if args.show_trace:
            out.print(text, highlight=False, markup=False)
            out.print()
        out.print(verdict.explain(), highlight=False, markup=False,
                  style="green" if verdict.ok else "red")
        verdict_line(out, "trace", code, f"{path.name}: {verdict.status}")
    return code


def verdict_json(path: Path, verdict: trace.Verdict, text: str) -> dict:
    """The verdict as data: its status and explanation, how far the search got, where it broke (the
    connection, the observation and what the spec allowed there), and the observations as the spec reads
    them, one per line."""
    rejected = None
    if verdict.status == trace.REJECTED:
        rejected = {"connection": f"c{verdict.conn}", "observation": verdict.index + 1,
                    "text": trace.observation_text(verdict.observation), "allowed": list(verdict.allowed)}
    return {"file": str(path), "status": verdict.status, "explanation": verdict.explain(),
            "matched": verdict.matched, "total": verdict.total, "explored": verdict.explored,
            "reason": verdict.reason or None, "rejected_at": rejected,
            "explanation_steps": [{"action": type(a).__name__, "text": str(a)} for a in verdict.path],
            "names": [line[1:].strip() for line in text.splitlines() if line.startswith("#")],
            "observations": [observation_object(line) for line in text.splitlines()
                             if line.strip() and not line.startswith("#")]}


def observation_object(line: str) -> dict:
    """One observation as data: ``{"connection": "c0", "direction": "sent", "method": "basic.publish",
    "fields": {...}, "text": line}``; a line of another shape (a connect, a close of the socket) keeps its
    text, with its connection."""
    m = _OBSERVED.match(line)
    fields = frame_fields(m.group(4)) if m else None
    if m and fields is not None:
        return {"connection": m.group(1), "direction": m.group(2), "method": m.group(3), "fields": fields, "text": line}
    conn = line.split(" ", 1)[0]
    return {"connection": conn if re.fullmatch(r"c\d+", conn) else None, "text": line}

