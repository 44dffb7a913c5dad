"""``rabbitproof bench compiled``: the compiled spec (rabbitproof/compiled.py) beside the pure-Python one.

Explores each configuration (``medium`` by default) with ``rabbitproof explore CONFIG --reduce none``,
the pure spec and the compiled one in turn, ``--rounds`` times each, every run in a fresh process with
the properties a user's run checks. The two must agree on everything the search establishes (distinct
states, depth, transitions, deadlocks, how often each kind of action fired, every property's verdict):
any difference fails the benchmark. The table gives each run's states/s and, per configuration, the
ratio of the medians. The compiled spec is built first when it is missing or stale (`make fast`).
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
from rabbitproof.options import OneLineParser, output_console

# What the two specs must agree on, from `rabbitproof explore --json`.
AGREED = ("complete", "distinct_states", "depth", "transitions", "deadlocks", "coverage")


def environment(fast: bool) -> dict[str, str]:
    """This process's environment, asking for the compiled spec or not."""
    env = {k: v for k, v in os.environ.items() if k != compiled.ENV}
    if fast:
        env[compiled.ENV] = "1"
    return env


def imports_compiled(fast: bool) -> bool:
    """Whether a process started with ``environment(fast)`` imports the compiled spec."""
    done = subprocess.run([sys.executable, "-c", "import rabbitproof, rabbitproof.compiled as c; print(c.in_use())"],
                          env=environment(fast), capture_output=True, text=True)
    return done.stdout.strip() == "True"


def ensure_built(out: Any, prog: str) -> bool:
    """Build the compiled spec when it is missing or stale (`make fast`), saying so on ``out``; False, with
    the reason on stderr after ``prog``, when it cannot be built."""
    if compiled.why_not_usable():
        out.print("building the compiled spec (make fast) ...")
        try:
            compiled.build()
        except compiled.CompiledSpecError as e:
            print(f"{prog}: {e}", file=sys.stderr)
            return False
    return True


def explore(config: str, fast: bool) -> dict[str, Any]:
    """One `rabbitproof explore` run in a process of its own; its JSON result."""
    env = environment(fast)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        done = subprocess.run([sys.executable, "-m", "rabbitproof", "explore", config, "--reduce", "none",
                               "--no-progress", "--json-file", str(out)], env=env, capture_output=True, text=True)
        if not out.exists():
            raise RuntimeError(f"explore {config} ({'compiled' if fast else 'pure'}) failed:\n{done.stderr[-2000:]}")
        return json.loads(out.read_text())


def established(result: dict[str, Any]) -> dict[str, Any]:
    """What a search established, to compare: counts and every property's verdict."""
    facts = {key: result[key] for key in AGREED}
    facts["verdicts"] = {p["name"]: p["verdict"] for p in result["properties"]}
    return facts


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Where two searches' established facts differ, one line each."""
    return [f"{key}: pure {a[key]!r}, compiled {b[key]!r}" for key in a if a[key] != b.get(key)]


def main(argv: Sequence[str] | None = None, console: Console | None = None) -> int:
    parser = OneLineParser(prog="rabbitproof bench compiled", description=__doc__.split("\n\n")[0])
    parser.add_argument("configs", nargs="*", default=["medium"], help="configurations (default: medium)")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each spec per configuration (default 2)")
    args = parser.parse_args(argv)
    out = console or output_console()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if not ensure_built(out, "rabbitproof bench compiled"):
        return 1
    if not imports_compiled(True) or imports_compiled(False):
        print("rabbitproof bench compiled: the runs would not compare the compiled spec with the pure one "
              f"({compiled.ENV}=1 does not select the build, or the pure runs load it)", file=sys.stderr)
        return 1
    table = Table(title="the compiled spec beside the pure-Python spec (rabbitproof explore CONFIG --reduce none)")
    for column in ("config", "states", "pure states/s", "compiled states/s", "ratio", "agree"):
        table.add_column(column, justify="left" if column == "config" else "right")
    worst = 0
    for config in args.configs:
        speeds: dict[bool, list[float]] = {False: [], True: []}
        facts: dict[bool, dict[str, Any]] = {}
        problems: list[str] = []
        for _ in range(args.rounds):
            for fast in (False, True):          # alternated, so that a busy spell falls on both
                result = explore(config, fast)
                speeds[fast].append(result["states_per_second"])
                now = established(result)
                if fast in facts and facts[fast] != now:
                    problems.append(f"{'compiled' if fast else 'pure'} runs differ: {differences(facts[fast], now)}")
                facts.setdefault(fast, now)
        problems += differences(facts[False], facts[True])
        pure, fast_ = statistics.median(speeds[False]), statistics.median(speeds[True])
        table.add_row(config, f"{facts[False]['distinct_states']:,}",
                      " / ".join(f"{s:,.0f}" for s in speeds[False]), " / ".join(f"{s:,.0f}" for s in speeds[True]),
                      f"{fast_ / pure:.2f}x", "yes" if not problems else "NO")
        for line in problems:
            out.print(f"[red]{config}: {line}[/red]")
        worst = worst or (1 if problems else 0)
    out.print(table)
    return worst


if __name__ == "__main__":
    sys.exit(main())
