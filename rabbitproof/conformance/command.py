"""`rabbitproof conformance amqp://user:pass@host:port/vhost [--programs N] [--json]`: run generated
programs against any AMQP 0-9-1 broker and print, per rule family, programs, steps, traces accepted and
rejected, with the first rejection of each family as numbered steps. Exit 0 when every trace is
accepted, 1 when one is not, 2 for a bad URL or a broker that cannot be used (one line naming why)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from urllib.parse import unquote, urlparse

from hypothesis import HealthCheck, Phase, given, settings
from rich.console import Console
from rich.table import Table

from rabbitproof.conformance import programs as P
from rabbitproof.conformance.judge import judge
from rabbitproof.conformance.targets import TcpTarget, run_program
from rabbitproof.recording.rawclient import ConnectionClosed, ConnectionLost, RawConnection


class UsageError(Exception):
    """Bad input or a broker that cannot be used: one line, exit code 2."""


def parse_url(url: str) -> dict:
    parsed = urlparse(url)
    if parsed.scheme != "amqp":
        raise UsageError(f"URL {url!r}: the scheme must be amqp:// (amqps is not supported)")
    if not parsed.hostname:
        raise UsageError(f"URL {url!r}: no host")
    try:
        port = parsed.port or 5672
    except ValueError:
        raise UsageError(f"URL {url!r}: the port is not a number from 0 to 65535") from None
    vhost = unquote(parsed.path[1:]) if len(parsed.path) > 1 else "/"
    return dict(host=parsed.hostname, port=port, user=unquote(parsed.username or "guest"),
                password=unquote(parsed.password or "guest"), vhost=vhost)


def probe(where: dict) -> None:
    """Connect once and open a channel, turning each way it can fail into one clear UsageError."""
    address = f"{where['host']}:{where['port']}"
    try:
        conn = RawConnection.connect(where["host"], where["port"], where["user"], where["password"],
                                     vhost=where["vhost"], timeout=5.0)
    except OSError as error:
        raise UsageError(f"cannot reach {address}: {error}") from None
    except ConnectionClosed as closed:
        if closed.reply_code == 403:
            raise UsageError(f"the broker at {address} refused user {where['user']!r}: {closed.reply_text}") from None
        raise UsageError(f"the broker at {address} closed the connection: {closed.reply_code} "
                         f"{closed.reply_text}") from None
    except ConnectionLost:
        raise UsageError(f"the broker at {address} closed the connection during the handshake "
                         f"(wrong credentials for user {where['user']!r}, or not AMQP 0-9-1)") from None
    try:
        conn.channel_open(1)
    except (ConnectionClosed, ConnectionLost, TimeoutError) as error:
        raise UsageError(f"the broker at {address} closed the connection when a channel was opened: {error}") from None
    finally:
        conn.close(timeout=2.0)


def run(where: dict, programs: int, seed: int | None) -> dict:
    """Run `programs` generated programs; the table per family and the first rejection of each."""
    target = TcpTarget("broker", where["host"], where["port"], where["user"], where["password"], where["vhost"],
                       quiet=0.05)
    table = {f: {"programs": 0, "steps": 0, "accepted": 0, "rejected": 0, "inconclusive": 0, "first_rejection": None}
             for f in P.FAMILIES}
    totals = {"programs": 0, "steps": 0, "accepted": 0, "rejected": 0, "inconclusive": 0, "seconds": 0.0}

    @settings(max_examples=programs, deadline=None, database=None, derandomize=seed is None,
              suppress_health_check=list(HealthCheck), phases=[p for p in Phase if p is not Phase.shrink])
    @given(P.programs(rabbitmq_safe=True, errors=False))
    def one(program):
        recording = run_program(program, target)
        verdict = judge(recording)
        status = verdict.status
        totals["programs"] += 1
        totals["steps"] += recording.steps
        totals["seconds"] += recording.seconds
        totals[status] += 1
        for family in sorted(P.families(program)):
            row = table[family]
            row["programs"] += 1
            row["steps"] += recording.steps
            row[status] += 1
            if status == "rejected" and row["first_rejection"] is None:
                row["first_rejection"] = {"steps": program.numbered(), "verdict": verdict.verdict.explain(),
                                          "trace": verdict.recording.text()}

    one()
    return {"families": table, "totals": totals}


def print_table(result: dict) -> None:
    console = Console()
    table = Table(title="conformance per rule family")
    for column in ("family", "programs", "steps", "accepted", "rejected", "inconclusive"):
        table.add_column(column, justify="left" if column == "family" else "right")
    for family, row in result["families"].items():
        table.add_row(family, *(str(row[k]) for k in ("programs", "steps", "accepted", "rejected", "inconclusive")))
    t = result["totals"]
    table.add_row("all", *(str(t[k]) for k in ("programs", "steps", "accepted", "rejected", "inconclusive")))
    console.print(table)
    rate = t["steps"] / t["seconds"] if t["seconds"] else 0.0
    console.print(f"{t['steps']} steps in {t['seconds']:.1f} s of running ({rate:.0f} steps/s)")
    for family, row in result["families"].items():
        first = row["first_rejection"]
        if first:
            console.print(f"\n[bold]{family}: first rejection[/bold]\n{first['steps']}\n{first['verdict']}",
                          markup=True, highlight=False)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `rabbitproof conformance`."""
    parser.add_argument("url", metavar="URL", help="the broker under test: amqp://user:pass@host:port/vhost")
    parser.add_argument("--programs", type=int, default=100, help="how many programs (default 100)")
    parser.add_argument("--seed", type=int, default=None, help="draw at random (default: the fixed CI programs)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def run_command(options: argparse.Namespace) -> int:
    """`rabbitproof conformance`: the exit code."""
    try:
        if options.programs < 1:
            raise UsageError("--programs must be at least 1")
        where = parse_url(options.url)
        probe(where)
    except UsageError as error:
        sys.stderr.write(f"rabbitproof conformance: error: {error}\n")
        return 2
    started = time.monotonic()
    result = run(where, options.programs, options.seed)
    result["totals"]["wall_seconds"] = time.monotonic() - started
    if options.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result)
    t = result["totals"]
    return 0 if t["rejected"] == 0 and t["inconclusive"] == 0 else 1
