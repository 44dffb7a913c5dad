"""`rabbitproof conformance amqp://user:pass@host:port/vhost [--programs N] [--dialect D] [--json]`: run
generated programs against any AMQP 0-9-1 broker and print, per rule family, programs, steps and what
became of them (accepted, rejected, unsupported, no answer, error, inconclusive), with the first program
of each family not accepted as numbered steps and why. Reply codes and fields are judged, as the
standard fixes them; RabbitMQ 3.10.8's exact reply texts only with ``--dialect rabbitmq``. Exit 0 when
every program is accepted, 1 when one is not, 2 for a bad URL or a broker that cannot be used (one line
naming why)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import NamedTuple
from xml.etree import ElementTree
from urllib.parse import unquote, urlparse

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from rich.console import Console
from rich.table import Table

from spec import recorded

from rabbitproof.brokers.commanded import CommandedBroker, CommandFailed
from rabbitproof.conformance import programs as P
from rabbitproof.conformance.judge import judge, wire_problem
from rabbitproof.conformance.targets import TcpTarget, run_program
from rabbitproof.recording.rawclient import ConnectionClosed, ConnectionLost, ProtocolViolation, RawConnection


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


STATUSES = ("accepted", "rejected", "unsupported", "no answer", "error", "inconclusive")


class Outcome(NamedTuple):
    """What became of one program: its status (one of STATUSES), steps run, seconds, why (the verdict's
    explanation), the trace in the spec's language (when it was judged), and broker crashes it caused."""

    status: str
    steps: int
    seconds: float
    explanation: str
    trace: str = ""
    crashes: int = 0


def outcome(program: P.Program, target: TcpTarget, judge_texts: bool) -> Outcome:
    """Run one program and judge it. Never raises for what the broker does: a recording the spec cannot
    express is "unsupported" (a method the broker refused with 540, or texts the rabbitmq dialect does
    not know), a step whose replies do not come is "no answer", a connection that fails in a way the
    client cannot go on from, or a frame it cannot decode, is "error"."""
    try:
        run_ = run_program(program, target)
    except (OSError, ConnectionClosed, ConnectionLost, ProtocolViolation, TimeoutError) as error:
        return Outcome("error", 0, 0.0, f"{type(error).__name__}: {error}")
    if run_.no_answer:
        return Outcome("no answer", run_.steps, run_.seconds, run_.no_answer, crashes=run_.crashes)
    problem = wire_problem(run_)
    if problem:
        return Outcome("error", run_.steps, run_.seconds, problem, crashes=run_.crashes)
    try:
        verdict = judge(run_, judge_texts=judge_texts)
    except recorded.Unsupported as error:
        return Outcome("unsupported", run_.steps, run_.seconds, str(error), crashes=run_.crashes)
    return Outcome(verdict.status, run_.steps, run_.seconds, verdict.verdict.explain(), verdict.recording.text(),
                   run_.crashes)


def run(where: dict, programs: int, seed: int | None, judge_texts: bool = False,
        broker: CommandedBroker | None = None) -> dict:
    """Run `programs` generated programs; the table per family and the first finding of each (a program
    not accepted: rejected, unsupported, no answer, error). With ``broker`` (the user's kill and start
    commands) every program crashes the broker at least once and restarts it (DU, PC-10: a restart takes
    seconds, so such programs are few and each must crash); UsageError when those commands fail."""
    target = TcpTarget("broker", where["host"], where["port"], where["user"], where["password"], where["vhost"],
                       broker=broker)
    broken: list[str] = []
    table = {f: {"programs": 0, "steps": 0, **{s: 0 for s in STATUSES}, "first_rejection": None}
             for f in P.FAMILIES}
    totals = {"programs": 0, "steps": 0, **{s: 0 for s in STATUSES}, "crashes": 0, "seconds": 0.0}

    def one(program):
        if broken:
            return
        try:
            status, steps, seconds, explanation, trace, crashes = outcome(program, target, judge_texts)
        except CommandFailed as error:
            broken.append(str(error))
            return
        totals["programs"] += 1
        totals["steps"] += steps
        totals["seconds"] += seconds
        totals["crashes"] += crashes
        totals[status] += 1
        for family in sorted(P.families(program)):
            row = table[family]
            row["programs"] += 1
            row["steps"] += steps
            row[status] += 1
            if status != "accepted" and row["first_rejection"] is None:
                row["first_rejection"] = {"status": status, "program": repr(program), "steps": program.numbered(),
                                          "verdict": explanation,
                                          "trace": trace}

    draw = settings(max_examples=programs, deadline=None, database=None, derandomize=seed is None,
                    suppress_health_check=list(HealthCheck), phases=[p for p in Phase if p is not Phase.shrink])(
        given(P.programs(rabbitmq_safe=True, errors=False, crashes=broker is not None,
                         min_crashes=int(broker is not None)))(one))
    if seed is not None:
        draw = hypothesis_seed(seed)(draw)
    draw()
    if broken:
        raise UsageError(f"{broken[0]} (after {totals['programs']} programs)")
    return {"families": table, "totals": totals}


def print_table(result: dict) -> None:
    console = Console()
    table = Table(title="conformance per rule family")
    columns = ("programs", "steps", *STATUSES)
    for column in ("family", *columns):
        table.add_column(column, justify="left" if column == "family" else "right")
    for family, row in result["families"].items():
        table.add_row(family, *(str(row[k]) for k in columns))
    t = result["totals"]
    table.add_row("all", *(str(t[k]) for k in columns))
    console.print(table)
    rate = t["steps"] / t["seconds"] if t["seconds"] else 0.0
    console.print(f"{t['steps']} steps in {t['seconds']:.1f} s of running ({rate:.0f} steps/s)")
    for family, row in result["families"].items():
        first = row["first_rejection"]
        if first:
            console.print(f"\n[bold]{family}: first program not accepted ({first['status']})[/bold]", markup=True)
            console.print(f"{first['steps']}\n{first['verdict']}", markup=False, highlight=False)
            console.print("as a program (from rabbitproof.conformance.programs import *):\n" + first["program"],
                          markup=False, highlight=False, style="dim")


def junit_xml(result: dict, url: str) -> str:
    """The result as JUnit XML for CI: one test case per rule family, failed when a program exercising
    it was not accepted (the first one's verdict and program in the failure)."""
    totals = result["totals"]
    failures = sum(1 for row in result["families"].values() if row["first_rejection"])
    suite = ElementTree.Element("testsuite", name=f"rabbitproof conformance {url}",
                                tests=str(len(result["families"])), failures=str(failures),
                                time=f"{totals['seconds']:.3f}")
    for family, row in result["families"].items():
        case = ElementTree.SubElement(suite, "testcase", classname="rabbitproof.conformance", name=family)
        first = row["first_rejection"]
        if first:
            failure = ElementTree.SubElement(case, "failure", type=first["status"],
                                             message=first["verdict"].splitlines()[0][:500])
            failure.text = f"{first['steps']}\n{first['verdict']}\n{first['program']}"
        out = ElementTree.SubElement(case, "system-out")
        out.text = ", ".join(f"{k} {row[k]}" for k in ("programs", "steps", *STATUSES))
    return ElementTree.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `rabbitproof conformance`."""
    parser.add_argument("url", metavar="URL", help="the broker under test: amqp://user:pass@host:port/vhost")
    parser.add_argument("--programs", type=int, default=100, help="how many programs (default 100)")
    parser.add_argument("--seed", type=int, default=None,
                        help="draw other programs, reproducibly, from this seed (default: the fixed CI programs)")
    parser.add_argument("--dialect", choices=("standard", "rabbitmq"), default="standard",
                        help="standard (the default): judge reply codes and fields, as AMQP 0-9-1 fixes them; "
                             "rabbitmq: also RabbitMQ 3.10.8's exact reply texts")
    parser.add_argument("--kill-cmd", metavar="CMD",
                        help="a shell command that crashes the broker (e.g. kill -9 its process): with --start-cmd, "
                             "programs crash and restart it (the DU and PC-10 families)")
    parser.add_argument("--start-cmd", metavar="CMD",
                        help="a shell command that starts the broker again on the same port and data")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--junit", metavar="FILE", help="also write the result as JUnit XML (a test case per family)")


def run_command(options: argparse.Namespace) -> int:
    """`rabbitproof conformance`: the exit code."""
    try:
        if options.programs < 1:
            raise UsageError("--programs must be at least 1")
        where = parse_url(options.url)
        if options.junit and not Path(options.junit).resolve().parent.is_dir():
            raise UsageError(f"--junit: no such directory {str(Path(options.junit).resolve().parent)!r}")
        if bool(options.kill_cmd) != bool(options.start_cmd):
            raise UsageError("--kill-cmd and --start-cmd go together: the suite kills the broker, then starts it")
        probe(where)
    except UsageError as error:
        sys.stderr.write(f"rabbitproof conformance: error: {error}\n")
        return 2
    started = time.monotonic()
    broker = CommandedBroker(where["host"], where["port"], where["user"], where["password"], options.kill_cmd,
                             options.start_cmd) if options.kill_cmd else None
    try:
        result = run(where, options.programs, options.seed, judge_texts=options.dialect == "rabbitmq", broker=broker)
    except UsageError as error:
        sys.stderr.write(f"rabbitproof conformance: error: {error}\n")
        return 2
    finally:
        if broker is not None:
            broker.close()
    result["totals"]["wall_seconds"] = time.monotonic() - started
    if options.junit:
        Path(options.junit).write_text(junit_xml(result, options.url), encoding="utf-8")
    if options.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result)
    t = result["totals"]
    return 0 if t["accepted"] == t["programs"] else 1
