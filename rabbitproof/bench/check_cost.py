"""``rabbitproof bench check-cost``: what `rabbitproof check`'s exhaustive search costs a state, here and in
another checkout of rabbitproof (or with the compiled spec), measured alternately.

Each run explores the benchmark setup of ``rabbitproof bench check`` (two publishers of ``--messages``
confirmed persistent messages each, two consumers with prefetch 1, a broker crash and a lost connection)
with `check`'s machine, its default reductions and its liveness graph, as `rabbitproof check` does where
its search is needed, in a process of its own started in the checkout it measures. The two sides take
turns (A, B, A, B, ...), so that a busy spell of the machine falls on both. Every run must count the
same states, depth and transitions and give the same answers: any difference fails the benchmark. The
table gives each run's microseconds per state, their medians and the ratio of the medians.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

from rich.console import Console
from rich.table import Table

from rabbitproof import compiled
from rabbitproof.bench.check import SETUP
from rabbitproof.bench.compiled import ensure_built
from rabbitproof.options import OneLineParser, output_console

# The run in the measured checkout: only what every version of `check` has (the setup file, the engine, the
# exhaustive search), so that an older checkout runs it too. argv: the setup file, the state cap or "".
SEARCH = """
import json, sys, time
import rabbitproof
from rabbitproof.check.answers import DEFAULT_REDUCTIONS, check_setup
from rabbitproof.check.setup_file import read_setup
from rabbitproof.options import build_engine
setup = read_setup(sys.argv[1])
engine = build_engine("local", reductions=DEFAULT_REDUCTIONS)
started = time.perf_counter()
checked = check_setup(setup, engine, max_states=int(sys.argv[2]) if sys.argv[2] else None)
seconds = time.perf_counter() - started
from rabbitproof.spec import machine
r = checked.result
print(json.dumps({"package": rabbitproof.__file__, "compiled": not machine.__file__.endswith(".py"),
                  "states": r.distinct_states, "depth": r.depth, "transitions": r.transitions,
                  "error": r.error, "answers": [a.verdict for a in checked.answers], "seconds": seconds}))
"""
AGREED = ("states", "depth", "transitions", "error", "answers")     # what every run must count alike


def checkout_of(path: str) -> Path:
    """The checkout of rabbitproof at ``path``: ValueError unless it holds rabbitproof/ and spec/."""
    root = Path(path).resolve()
    if not (root / "rabbitproof" / "__init__.py").is_file() or not (root / "spec" / "__init__.py").is_file():
        raise ValueError(f"{path} is not a checkout of rabbitproof (no rabbitproof/ and spec/ in it)")
    return root


def measure(checkout: Path, fast: bool, setup: Path, max_states: int | None) -> dict[str, Any]:
    """One search in a process started in ``checkout`` (its compiled spec when ``fast``); its figures."""
    env = {k: v for k, v in os.environ.items() if k not in (compiled.ENV, "PYTHONPATH")}
    if fast:
        env[compiled.ENV] = "1"
    done = subprocess.run([sys.executable, "-c", SEARCH, str(setup), str(max_states or "")], cwd=checkout, env=env,
                          capture_output=True, text=True)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the search in {checkout} failed (exit {done.returncode}): "
                           f"{(done.stderr.strip().splitlines() or ['no message'])[-1]}")
    run = json.loads(lines[-1])
    if not Path(run["package"]).resolve().is_relative_to(checkout) or run["compiled"] != fast:
        raise RuntimeError(f"the search meant for {checkout} ({'compiled' if fast else 'pure Python'}) ran "
                           f"{run['package']} ({'compiled' if run['compiled'] else 'pure Python'})")
    run["us_per_state"] = run["seconds"] / max(run["states"], 1) * 1e6
    return run


def main(argv: Sequence[str] | None = None, console: Console | None = None) -> int:
    parser = OneLineParser(prog="rabbitproof bench check-cost", description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--against", metavar="DIR",
                        help="the other checkout of rabbitproof (default: this one)")
    parser.add_argument("--fast", action="store_true",
                        help="run this checkout with its compiled spec (make fast; built here when missing or stale)")
    parser.add_argument("--against-compiled", action="store_true",
                        help="run the other checkout with its own compiled spec (built there with its make fast)")
    parser.add_argument("--messages", type=int, default=1, metavar="N", help="messages per publisher (default 1)")
    parser.add_argument("--rounds", type=int, default=3, metavar="N", help="runs of each side (default 3)")
    parser.add_argument("--max-states", type=int, metavar="N",
                        help="stop each search after N states (the same cut in every run)")
    args = parser.parse_args(argv)
    here = checkout_of(str(compiled.ROOT))
    try:
        other = checkout_of(args.against) if args.against else here
    except ValueError as e:
        parser.error(str(e))
    if other == here and args.fast == args.against_compiled:
        parser.error("nothing to compare: give --against another checkout, or --fast")
    if args.rounds < 1 or args.messages < 1 or (args.max_states is not None and args.max_states < 1):
        parser.error("--rounds, --messages and --max-states must be positive")
    out = console or output_console()
    if args.fast and not ensure_built(out, "rabbitproof bench check-cost"):
        return 1
    sides = (("A", other, args.against_compiled), ("B", here, args.fast))
    for name, checkout, fast in sides:
        out.print(f"{name}: {checkout}, {'compiled' if fast else 'pure Python'}", soft_wrap=True)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in sides}
    with tempfile.TemporaryDirectory() as tmp:
        setup = Path(tmp) / f"benchmark-{args.messages}.toml"
        setup.write_text(SETUP.format(messages=args.messages), encoding="utf-8")
        for _ in range(args.rounds):
            for name, checkout, fast in sides:          # alternated: A, B, A, B, ...
                runs[name].append(measure(checkout, fast, setup, args.max_states))
    first = runs[sides[0][0]][0]
    problems = [f"{name}, run {i + 1}: {key} {run[key]!r}, not {first[key]!r}"
                for name, done in runs.items() for i, run in enumerate(done) for key in AGREED if run[key] != first[key]]
    table = Table(title=f"check's exhaustive search on the benchmark setup, {args.messages} message(s) a publisher: "
                        f"{first['states']:,} states, depth {first['depth']}, {first['transitions']:,} transitions"
                        + (f" ({first['error']})" if first["error"] else ""))
    for column in ("side", "µs/state, each run in turn", "median µs/state", "median seconds"):
        table.add_column(column, justify="left" if column == "side" else "right")
    medians = {}
    for name, done in runs.items():
        medians[name] = statistics.median(r["us_per_state"] for r in done)
        table.add_row(name, " / ".join(f"{r['us_per_state']:.0f}" for r in done), f"{medians[name]:.0f}",
                      f"{statistics.median(r['seconds'] for r in done):.2f}")
    out.print(table)
    a, b = (medians[name] for name, _, _ in sides)
    out.print(f"B costs {b / a:.2f} of A a state ({a / b:.2f}x as fast); answers: {', '.join(first['answers'])}")
    for line in problems:
        out.print(f"[red]the runs disagree: {line}[/red]")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
