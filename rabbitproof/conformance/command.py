"""`rabbitproof conformance amqp://user:pass@host:port/vhost [--programs N] [--dialect D] [--json]
[--chart DIR]`: run generated programs against any AMQP 0-9-1 broker and print, per rule family, programs,
steps and what became of them (accepted, rejected, unsupported, no answer, error, inconclusive), then the
first program of each family not accepted, shrunk, as numbered steps and why; and the spec's coverage.

- Shrinking (shrink.py): the first program of each family the broker rejected (or did not answer, or
  answered with an error) is run again with steps and methods deleted, while the broker still fails it
  the same way, at most ``--shrink-reruns`` runs (40) per program; the report says when that cap stopped it.
- ``--chart DIR`` writes, per family, that shrunk program's recorded run as an SVG message-sequence chart
  (FAMILY.svg, chart.py; a rejection only) and as a runnable Python file (FAMILY.py, replay.py): run it
  with a URL to replay the steps and judge them again, without the generator.
- Coverage (coverage.py): the spec actions the accepted runs' explanations took (``spec.trace.Verdict.path``)
  and the rule IDs those actions cite, and which never; in the text and in ``--json``.
- Steering: every 25 programs, the op kinds that lead to an action not yet exercised weigh more in the
  next ones (``--no-steering`` to draw them all alike). The programs are a function of the seed (the
  fixed CI programs without ``--seed``) and of which actions the broker's accepted runs covered.

Reply codes and fields are judged, as the standard fixes them; RabbitMQ 3.10.8's exact reply texts only
with ``--dialect rabbitmq``. Exit 0 when every program is accepted, 1 when one is not, 2 for bad input (a
bad URL, a ``--chart`` directory that cannot be written) or a broker that cannot be used (one line naming
why)."""
from __future__ import annotations

import argparse
import json
import os
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

from rabbitproof.recording import observations

from rabbitproof.brokers.commanded import CommandedBroker, CommandFailed
from rabbitproof.conformance import programs as P
from rabbitproof.conformance.chart import recording_svg
from rabbitproof.conformance.coverage import Coverage, steer
from rabbitproof.conformance.judge import Judgement, judge, wire_problem
from rabbitproof.conformance.replay import script
from rabbitproof.conformance.shrink import MAX_RERUNS, SHRUNK, Shrunk, shrink
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


BATCH = 25                  # programs drawn between two steerings


class Outcome(NamedTuple):
    """What became of one program: its status (one of STATUSES), steps run, seconds, why (the verdict's
    explanation), the trace in the spec's language (when it was judged), broker crashes it caused, and
    the judgement (when it was judged: the recording, and the verdict with its path when accepted)."""

    status: str
    steps: int
    seconds: float
    explanation: str
    trace: str = ""
    crashes: int = 0
    judgement: Judgement | None = None


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
    except observations.Unsupported as error:
        return Outcome("unsupported", run_.steps, run_.seconds, str(error), crashes=run_.crashes)
    return Outcome(verdict.status, run_.steps, run_.seconds, verdict.verdict.explain(), verdict.recording.text(),
                   run_.crashes, verdict)


class Finding(NamedTuple):
    """A family's first program not accepted, what became of it, and its shrinking (None: not shrunk)."""

    program: P.Program
    outcome: Outcome
    shrunk: Shrunk | None = None

    def shown(self) -> tuple[P.Program, Outcome]:
        """The program to show and its outcome: the shrunk one when there is one."""
        return (self.shrunk.program, self.shrunk.outcome) if self.shrunk else (self.program, self.outcome)


def run(where: dict, programs: int, seed: int | None, judge_texts: bool = False,
        broker: CommandedBroker | None = None, steering: bool = True,
        shrink_reruns: int = MAX_RERUNS) -> tuple[dict, dict]:
    """Run `programs` generated programs (steered every BATCH programs towards the spec actions not yet
    exercised, unless not ``steering``); the result (the table per family, the first finding of each,
    shrunk by at most ``shrink_reruns`` runs, and the coverage) and the findings per family. With
    ``broker`` (the user's kill and start commands) every program crashes the broker at least once and
    restarts it (DU, PC-10: a restart takes seconds, so such programs are few and each must crash);
    UsageError when those commands fail."""
    target = TcpTarget("broker", where["host"], where["port"], where["user"], where["password"], where["vhost"],
                       broker=broker)
    broken: list[str] = []
    table = {f: {"programs": 0, "steps": 0, **{s: 0 for s in STATUSES}, "first_rejection": None}
             for f in P.FAMILIES}
    totals = {"programs": 0, "steps": 0, **{s: 0 for s in STATUSES}, "crashes": 0, "seconds": 0.0}
    coverage = Coverage()
    weights = P.Steering() if steering else None
    findings: dict[str, Finding] = {}

    def one(program):
        if broken:
            return
        try:
            out = outcome(program, target, judge_texts)
        except CommandFailed as error:
            broken.append(str(error))
            return
        totals["programs"] += 1
        totals["steps"] += out.steps
        totals["seconds"] += out.seconds
        totals["crashes"] += out.crashes
        totals[out.status] += 1
        if out.status == "accepted":
            coverage.add(out.judgement.verdict.path)
        for family in sorted(P.families(program)):
            row = table[family]
            row["programs"] += 1
            row["steps"] += out.steps
            row[out.status] += 1
            if out.status != "accepted" and family not in findings:
                findings[family] = Finding(program, out)

    # A batch is a Hypothesis run of its own, with the weights set before it (a strategy must not change
    # within a run). The first is drawn as without steering: derandomized (CI's fixed programs), or from
    # the seed; batch k after it from seed k (or seed * 1000 + k).
    batches = [programs] if weights is None else [min(BATCH, programs - i) for i in range(0, programs, BATCH)]
    for k, count in enumerate(batches):
        if broken:
            break
        strategy = P.programs(rabbitmq_safe=True, errors=False, crashes=broker is not None,
                              min_crashes=int(broker is not None),
                              steering=None if weights is None else P.Steering(dict(weights.factors)))
        draw = settings(max_examples=count, deadline=None, database=None, derandomize=seed is None and k == 0,
                        suppress_health_check=list(HealthCheck),
                        phases=[p for p in Phase if p is not Phase.shrink])(given(strategy)(one))
        if seed is not None or k:
            draw = hypothesis_seed(k if seed is None else seed if k == 0 else seed * 1000 + k)(draw)
        draw()
        if weights is not None:
            steer(weights, coverage)
    if broken:
        raise UsageError(f"{broken[0]} (after {totals['programs']} programs)")
    findings = shrink_findings(findings, target, judge_texts, shrink_reruns)
    totals["shrink_reruns"] = sum({id(f.shrunk): f.shrunk.reruns for f in findings.values() if f.shrunk}.values())
    for family, finding in findings.items():
        table[family]["first_rejection"] = finding_json(finding)
    return {"families": table, "totals": totals, "coverage": coverage.report(), "steered": steering}, findings


def shrink_findings(findings: dict, target: TcpTarget, judge_texts: bool, reruns: int) -> dict:
    """The findings with those worth shrinking (SHRUNK) shrunk, a program that is the first finding of
    several families once; UsageError when the broker's kill or start command fails meanwhile."""
    done: dict = {}

    def rerun(program: P.Program) -> Outcome:
        try:
            return outcome(program, target, judge_texts)
        except CommandFailed as error:
            raise UsageError(f"{error} (while shrinking)") from None

    out = {}
    for family, finding in findings.items():
        if reruns > 0 and finding.outcome.status in SHRUNK:
            if finding.program not in done:
                done[finding.program] = shrink(finding.program, finding.outcome, rerun, reruns)
            finding = finding._replace(shrunk=done[finding.program])
        out[family] = finding
    return out


def finding_json(finding: Finding) -> dict:
    """A family's first finding as the result shows it: the program as generated, and shrunk."""
    program, out = finding.program, finding.outcome
    entry = {"status": out.status, "program": repr(program), "steps": program.numbered(),
             "verdict": out.explanation, "trace": out.trace, "shrunk": None}
    if finding.shrunk:
        small, small_out = finding.shown()
        entry["shrunk"] = {"status": small_out.status, "program": repr(small), "steps": small.numbered(),
                           "verdict": small_out.explanation, "trace": small_out.trace,
                           "steps_before": len(program.steps), "steps_after": len(small.steps),
                           "reruns": finding.shrunk.reruns, "capped": finding.shrunk.capped}
    return entry


def write_findings(findings: dict, directory: Path, url: str, dialect: str) -> dict:
    """Per family, its finding (shrunk) as FAMILY.svg (a rejection's recorded run, charted) and FAMILY.py
    (the program, runnable); the files written per family."""
    written: dict = {}
    for family, finding in findings.items():
        program, out = finding.shown()
        count = len(program.steps)
        shrunk = f", shrunk to {count} step{'s' if count != 1 else ''}" if finding.shrunk else ""
        title = f"{family}: first program not accepted ({out.status}{shrunk}) by {redacted(url)}"
        files = []
        if out.status == "rejected" and out.judgement is not None:
            chart = directory / f"{family}.svg"
            chart.write_text(recording_svg(title, out.judgement.recording, out.judgement.verdict), encoding="utf-8")
            files.append(str(chart))
        runnable = directory / f"{family}.py"
        runnable.write_text(script(program, title, out.explanation, dialect), encoding="utf-8")
        files.append(str(runnable))
        written[family] = files
    return written


def redacted(url: str) -> str:
    """The URL without its password (it goes into files)."""
    parsed = urlparse(url)
    if parsed.password is None:
        return url
    return url.replace(f":{parsed.password}@", ":***@", 1)


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
    console.print(coverage_text(result["coverage"]), markup=False, highlight=False)
    for family, row in result["families"].items():
        first = row["first_rejection"]
        if first:
            console.print(f"\n[bold]{family}: first program not accepted ({first['status']})[/bold]", markup=True)
            shown = first["shrunk"] or first
            if first["shrunk"]:
                small = first["shrunk"]
                capped = (f"; the cap of {small['reruns']} reruns stopped it, it may shrink further"
                          if small["capped"] else "; no single deletion keeps the failure")
                console.print(f"shrunk from {small['steps_before']} steps to {small['steps_after']} in "
                              f"{small['reruns']} reruns{capped}", markup=False, highlight=False)
            console.print(f"{shown['steps']}\n{shown['verdict']}", markup=False, highlight=False)
            console.print("as a program (from rabbitproof.conformance.programs import *):\n" + shown["program"],
                          markup=False, highlight=False, style="dim")
            for path in row.get("files", ()):
                console.print(f"written: {path}", markup=False, highlight=False)


def coverage_text(coverage: dict) -> str:
    """The coverage in two lines: actions and rule IDs exercised of all, and those never."""
    lines = []
    for what, title in (("actions", "spec actions"), ("rules", "rule IDs their docstrings cite")):
        part = coverage[what]
        lines.append(f"{title} exercised by the {coverage['runs']} accepted runs: {len(part['exercised'])} of "
                     f"{part['total']}; never: {', '.join(part['never']) or 'none'}")
    return "\n".join(lines)


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
            shown = first.get("shrunk") or first
            failure = ElementTree.SubElement(case, "failure", type=first["status"],
                                             message=shown["verdict"].splitlines()[0][:500])
            failure.text = f"{shown['steps']}\n{shown['verdict']}\n{shown['program']}"
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
    parser.add_argument("--json", action="store_true", help="print the result as JSON (with the coverage)")
    parser.add_argument("--junit", metavar="FILE", help="also write the result as JUnit XML (a test case per family)")
    parser.add_argument("--chart", metavar="DIR",
                        help="write each family's first program not accepted, shrunk, into DIR: FAMILY.svg, its "
                             "recorded run as a message-sequence chart (a rejection), and FAMILY.py, the program "
                             "as a runnable file (python3 FAMILY.py URL replays it and judges it again)")
    parser.add_argument("--shrink-reruns", type=int, default=MAX_RERUNS, metavar="N",
                        help=f"runs of smaller candidates to shrink each family's first program not accepted "
                             f"(default {MAX_RERUNS}; 0: no shrinking)")
    parser.add_argument("--no-steering", action="store_true",
                        help="draw every batch of 25 programs alike (default: towards the spec actions not yet "
                             "exercised)")


def run_command(options: argparse.Namespace) -> int:
    """`rabbitproof conformance`: the exit code."""
    try:
        if options.programs < 1:
            raise UsageError("--programs must be at least 1")
        where = parse_url(options.url)
        if options.junit and not Path(options.junit).resolve().parent.is_dir():
            raise UsageError(f"--junit: no such directory {str(Path(options.junit).resolve().parent)!r}")
        if options.shrink_reruns < 0:
            raise UsageError("--shrink-reruns must be 0 or more")
        if options.chart:
            writable_directory(Path(options.chart))
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
        result, findings = run(where, options.programs, options.seed, judge_texts=options.dialect == "rabbitmq",
                               broker=broker, steering=not options.no_steering, shrink_reruns=options.shrink_reruns)
    except UsageError as error:
        sys.stderr.write(f"rabbitproof conformance: error: {error}\n")
        return 2
    finally:
        if broker is not None:
            broker.close()
    result["totals"]["wall_seconds"] = time.monotonic() - started
    if options.chart:
        for family, files in write_findings(findings, Path(options.chart), options.url, options.dialect).items():
            result["families"][family]["files"] = files
    if options.junit:
        Path(options.junit).write_text(junit_xml(result, options.url), encoding="utf-8")
    if options.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result)
    t = result["totals"]
    return 0 if t["accepted"] == t["programs"] else 1


def writable_directory(directory: Path) -> None:
    """Make ``directory`` (and its parents) or find it there, writable; UsageError naming why not."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"--chart: cannot make directory {str(directory)!r}: {error.strerror}") from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise UsageError(f"--chart: directory {str(directory)!r} is not writable")


def replay_main(program: P.Program, argv: list[str], dialect: str = "standard") -> int:
    """What a runnable program written by ``--chart`` does (replay.py): run ``program`` against the URL in
    ``argv``, print the steps, what the clients saw and the spec's verdict; the exit code (0 accepted,
    1 not, 2 a bad URL or a broker that cannot be used). Crash steps are skipped: they need the
    suite's ``--kill-cmd`` and ``--start-cmd``."""
    parser = argparse.ArgumentParser(description="Run a program of rabbitproof's conformance suite against a "
                                                 "broker and judge the run by the spec.")
    parser.add_argument("url", metavar="URL", help="the broker: amqp://user:pass@host:port/vhost")
    parser.add_argument("--dialect", choices=("standard", "rabbitmq"), default=dialect,
                        help=f"judge reply texts too (rabbitmq) or not (standard); default {dialect}")
    options = parser.parse_args(argv)
    try:
        where = parse_url(options.url)
        probe(where)
    except UsageError as error:
        sys.stderr.write(f"replay: error: {error}\n")
        return 2
    target = TcpTarget("broker", where["host"], where["port"], where["user"], where["password"], where["vhost"])
    print(program.numbered())
    if any(isinstance(step, P.Crash) for step in program.steps):
        print("(the crash steps are skipped: rabbitproof conformance --kill-cmd/--start-cmd runs them)")
    out = outcome(program, target, judge_texts=options.dialect == "rabbitmq")
    if out.trace:
        print("what the clients saw, in the spec's names (legend first):")
        print(out.trace)
    print(out.explanation if out.explanation.startswith(out.status) else f"{out.status}: {out.explanation}")
    return 0 if out.status == "accepted" else 1
