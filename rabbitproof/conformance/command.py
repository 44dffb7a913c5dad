"""`rabbitproof conformance amqp://user:pass@host:port/vhost [--programs N] [--dialect D] [--time-limit S]
[--json] [--junit FILE] [--chart DIR]`: run a probe per catalogue rule, then generated programs, against any
AMQP 0-9-1 broker, judge every recording by the spec, and report each distinct finding (suite.py,
findings.py): its rules, a statement in a broker author's words, how many programs showed it, its
program shrunk against the broker, the spec's verdict and what the clients saw; then a table per rule
family and the coverage of the rule catalogue (docs/reference/conformance.md).

- ``--chart DIR`` writes, per finding, finding-N.svg (a rejection's recorded run as a message-sequence
  chart, chart.py) and finding-N.py (the shrunk program, runnable with a URL, replay.py).
- ``--dialect standard`` (the default) allows what AMQP 0-9-1 leaves open; ``rabbitmq`` holds RabbitMQ
  3.10.8's choices, texts included.
- Exit codes and the ``--json`` document follow rabbitproof/exits.py: 0 no finding, 1 findings, 2 bad
  input (a bad URL, a broker that cannot be used, a failing kill or start command; one line), 3 the time
  limit came before any program finished; ``"schema": "rabbitproof.conformance/1"``."""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import NamedTuple
from urllib.parse import unquote, urlparse
from xml.etree import ElementTree

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rabbitproof.recording import observations

from rabbitproof.brokers.commanded import CommandedBroker, CommandFailed
from rabbitproof.conformance import programs as P
from rabbitproof.conformance.chart import recording_svg
from rabbitproof.conformance.findings import CORRUPTED, made_up
from rabbitproof.conformance.suite import Finding, Suite, catalogue_coverage
from rabbitproof.exits import BAD_INPUT, FOUND, NOTHING_FOUND, UNDECIDED, schema
from rabbitproof.output import print_json, stdout_console, verdict_line
from rabbitproof.conformance.judge import INFORMATIVE, Judgement, judge, later, wire_problem
from rabbitproof.conformance.replay import script
from rabbitproof.conformance.shrink import MAX_RERUNS
from rabbitproof.conformance.targets import EXTENSIONS, REPLY_TIMEOUT, TcpTarget, run_program
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


STATUSES = ("accepted", "rejected", "corrupted", "unsupported", "no answer", "error", "inconclusive")


class Outcome(NamedTuple):
    """What became of one program: its status (one of STATUSES, or "stopped answering"), steps run,
    seconds, why (the verdict's explanation), the trace in the spec's language (when it was judged),
    broker crashes it caused, and the judgement (when it was judged: the recording, and the verdict with
    its path when accepted)."""

    status: str
    steps: int
    seconds: float
    explanation: str
    trace: str = ""
    crashes: int = 0
    judgement: Judgement | None = None
    later: tuple = ()           # a rejection: the rejections after it in the same recording (judge.later)


def outcome(program: P.Program, target: TcpTarget, judge_texts: bool) -> Outcome:
    """Run one program and judge it. Never raises for what the broker does: a recording the spec cannot
    express is "unsupported" (texts the rabbitmq dialect does not know) or, when a message carries a body
    no publish carried, "corrupted" (the broker made it up: findings.made_up), a step whose replies do not come
    is "no answer", a connection that fails in a way the client cannot go on from, or a frame it cannot
    decode, is "error"."""
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
    except observations.UnknownBody as error:
        return Outcome(CORRUPTED, run_.steps, run_.seconds, "rejected: " + made_up(error.body, error.where, run_),
                       crashes=run_.crashes)
    except observations.Unsupported as error:
        return Outcome("unsupported", run_.steps, run_.seconds, str(error), crashes=run_.crashes)
    more = tuple(Outcome(j.status, run_.steps, run_.seconds, f"{j.verdict.explain()} (judged with the frames "
                         f"before it wrong only in {' or '.join(INFORMATIVE)} taken as the spec allowed them)",
                         j.recording.text(), run_.crashes, j) for j in later(verdict)) if verdict.status == "rejected" else ()
    return Outcome(verdict.status, run_.steps, run_.seconds, verdict.verdict.explain(), verdict.recording.text(),
                   run_.crashes, verdict, more)


def answers(where: dict, timeout: float = 5.0) -> bool:
    """Whether the broker still answers a new connection (a handshake and a channel.open)."""
    try:
        conn = RawConnection.connect(where["host"], where["port"], where["user"], where["password"],
                                     vhost=where["vhost"], timeout=timeout)
    except (OSError, ConnectionClosed, ConnectionLost, ProtocolViolation, TimeoutError):
        return False
    try:
        conn.channel_open(1)
        return True
    except (OSError, ConnectionClosed, ConnectionLost, ProtocolViolation, TimeoutError):
        return False
    finally:
        try:
            conn.close(timeout=1.0)
        except (OSError, ConnectionClosed, ConnectionLost, ProtocolViolation, TimeoutError):
            pass


def run(where: dict, programs: int, seed: int | None, judge_texts: bool = False,
        broker: CommandedBroker | None = None, steering: bool = True, shrink_reruns: int = MAX_RERUNS,
        time_limit: float | None = None, progress=None, probes: bool = True,
        crashes: bool | None = None, started: float | None = None,
        reply_timeout: float = REPLY_TIMEOUT) -> tuple[dict, Suite]:
    """The probes, then ``programs`` generated programs, their findings shrunk (``shrink_reruns`` runs
    each at most), all within ``time_limit`` seconds; the result as JSON and the suite. With ``broker``
    (the user's kill and start commands) generated programs crash the broker and restart it (DU, PC-10);
    a broker that stops answering is started again with its start command. UsageError when those
    commands fail. A reply that has not come within ``reply_timeout`` seconds is a "no answer" finding."""
    crashes = broker is not None if crashes is None else crashes
    target = TcpTarget("broker", where["host"], where["port"], where["user"], where["password"], where["vhost"],
                       broker=broker if crashes else None, timeout=reply_timeout)
    def restart() -> None:
        """Start the broker again and wait until it answers (its port may still be held by the old one)."""
        broker.start()
        deadline = time.monotonic() + broker.ready_timeout
        while not answers(where):
            if time.monotonic() > deadline:
                raise CommandFailed(f"after --start-cmd the broker at {where['host']}:{where['port']} did not "
                                    f"answer within {broker.ready_timeout:g} s")
            time.sleep(0.5)

    def alive() -> bool:        # asked again after a second, so that a broker just started is not taken as gone
        return answers(where) or (time.sleep(1.0) is None and answers(where))

    suite = Suite(lambda program: outcome(program, target, judge_texts), alive, restart if broker else None,
                  time_limit, progress, shrink_reruns, standard=not judge_texts, started=started)
    try:
        if probes:
            suite.probes()
        suite.generated(programs, seed, steering, crashes=crashes)
        if suite.failed is None:
            suite.shrink_all()
        if suite.failed is not None:
            raise suite.failed
    except CommandFailed as error:
        raise UsageError(f"{error} (after {suite.run.totals['programs']} programs)") from None
    return result_json(suite, crashes=crashes), suite


def result_json(suite: Suite, crashes: bool) -> dict:
    """The result as the --json document shows it."""
    run_ = suite.run
    findings = [finding_json(f) for f in run_.findings.values()]
    for number, entry in enumerate(findings, 1):
        entry["id"] = number
    undecided = run_.totals["programs"] == 0
    return {"schema": schema("conformance"), "verdict": "findings" if findings else "undecided" if undecided
            else "no findings", "findings": findings, "families": run_.table, "totals": run_.totals,
            "unsupported": list(run_.excluded), "stopped": run_.stopped or None,
            "allowed_differences": [{"statement": k, "count": v} for k, v in run_.differences.items()],
            "time_limit_reached": suite.out_of_time(), "coverage": catalogue_coverage(run_, crashes)}


def finding_json(finding: Finding) -> dict:
    """One finding as the result shows it: kind, rules, statement, count, the program as generated and
    shrunk, and the verdict of the program shown."""
    d = finding.diagnosis
    program, out = finding.shown()
    entry = {"kind": d.kind, "rules": list(d.rules), "method": d.method or None, "statement": d.statement,
             "count": finding.count, "verdict": out.explanation, "trace": out.trace,
             "program": repr(finding.program), "steps": finding.program.numbered(), "shrunk": None,
             "shrink_note": finding.shrink_note or None}
    if finding.shrunk:
        entry["shrunk"] = {"program": repr(program), "steps": program.numbered(),
                           "steps_before": len(finding.program.steps), "steps_after": len(program.steps),
                           "reruns": finding.shrunk.reruns, "capped": finding.shrunk.capped}
    return entry


def write_findings(result: dict, suite: Suite, directory: Path, url: str, dialect: str) -> None:
    """Per finding, its program (shrunk) as finding-N.py, runnable, and, for a rejection, its recorded run
    as finding-N.svg, a message-sequence chart; the files go into each finding's "files"."""
    for entry, finding in zip(result["findings"], suite.run.findings.values()):
        program, out = finding.shown()
        name = f"finding-{entry['id']}"
        title = f"{', '.join(entry['rules']) or entry['kind']}: {entry['statement']} ({redacted(url)})"
        files = []
        if out.status == "rejected" and out.judgement is not None:
            chart = directory / f"{name}.svg"
            chart.write_text(recording_svg(title, out.judgement.recording, out.judgement.verdict), encoding="utf-8")
            files.append(str(chart))
        runnable = directory / f"{name}.py"
        runnable.write_text(script(program, title, out.explanation, dialect), encoding="utf-8")
        files.append(str(runnable))
        entry["files"] = files


def redacted(url: str) -> str:
    """The URL without its password (it goes into files)."""
    parsed = urlparse(url)
    if parsed.password is None:
        return url
    return url.replace(f":{parsed.password}@", ":***@", 1)


LEGEND = ("legend: a program's steps are numbered writes of methods by client connection cN, on its channels 1 "
          "and 2; queues q0 and q1 are the program's, q2 is never declared; in the traces, the first lines name "
          "the queues on the wire and mQ.N is the Nth message published to qQ")


def print_report(result: dict) -> None:
    """The result for people: the findings, each with its rules, statement, count, shrunk program and the
    spec's verdict; the table per family; the coverage of the catalogue."""
    console = Console()
    say = lambda text="", **kw: console.print(text, markup=False, highlight=False, **kw)     # noqa: E731
    findings = result["findings"]
    t = result["totals"]
    say(f"{len(findings)} finding{'s' if len(findings) != 1 else ''} in {t['programs']} programs "
        f"({t['probes']} probes, {t['generated']} generated)")
    for entry in findings:
        rules = ", ".join(entry["rules"]) or entry["method"] or entry["kind"]
        console.print(escape(f"\nfinding {entry['id']} [{rules}] {entry['kind']}"), style="bold", highlight=False)
        say(f"{entry['statement']}")
        say(f"shown by {entry['count']} program{'s' if entry['count'] != 1 else ''}")
        small = entry["shrunk"]
        if small:
            capped = (f"; the cap of {small['reruns']} reruns stopped it, it may shrink further"
                      if small["capped"] else "")
            if small["steps_after"] < small["steps_before"]:
                say(f"shrunk from {small['steps_before']} steps to {small['steps_after']} in {small['reruns']} "
                    f"reruns{capped}:")
            else:
                say(f"{small['steps_after']} steps: none of {small['reruns']} shorter candidates failed the same "
                    f"way{capped}")
            say(small["steps"])
        else:
            if entry["shrink_note"]:
                say(entry["shrink_note"])
            say(entry["steps"])
        say(entry["verdict"])
        if entry["trace"]:
            say("what the clients saw, in the spec's names (legend first):")
            say(entry["trace"])
        say("as a program (from rabbitproof.conformance.programs import *):\n" +
            (small["program"] if small else entry["program"]), style="dim")
        for path in entry.get("files", ()):
            say(f"written: {path}")
    if findings:
        say("\n" + LEGEND)
    table = Table(title="programs per rule family (each counted once: its first finding's family)")
    for column in ("family", "programs", "steps", "accepted", "found"):
        table.add_column(column, justify="left" if column == "family" else "right")
    for family_, row in result["families"].items():
        table.add_row(family_, *(str(row[k]) for k in ("programs", "steps", "accepted", "found")))
    table.add_row("all", *(str(t[k]) for k in ("programs", "steps", "accepted", "found")))
    console.print(table)
    rate = t["steps"] / t["seconds"] if t["seconds"] else 0.0
    say(f"{t['steps']} steps in {t['seconds']:.1f} s of running ({rate:.0f} steps/s); "
        f"{t['duplicates']} duplicate programs skipped")
    for difference in result["allowed_differences"]:
        say(f"allowed by AMQP 0-9-1 (the standard dialect), in {difference['count']} programs, each judged up to "
            f"there: {difference['statement']}")
    if result["unsupported"]:
        say(f"left out of later programs (not implemented): {', '.join(result['unsupported'])}")
    if result["stopped"]:
        say(f"the run stopped early: {result['stopped']}")
    if result["time_limit_reached"]:
        say("the time limit was reached: the run ends with what it has")
    say(coverage_text(result["coverage"]))


def coverage_text(coverage: dict) -> str:
    """The coverage of the catalogue: how many rules were shown, found broken, cannot be observed, and
    the others with why."""
    rules = coverage["rules"]
    lines = [f"rules of the catalogue: {coverage['total']}; shown kept by an accepted program: "
             f"{coverage['covered']}; named by a finding: {coverage['findings']}; unobservable: "
             f"{coverage['unobservable']}"]
    for rule, state in rules.items():
        if state not in ("covered", "finding"):
            lines.append(f"  {rule}: {state}")
    return "\n".join(lines)


def junit_xml(result: dict, url: str) -> str:
    """The result as JUnit XML for CI: one failed test case per finding (its rules and statement as the
    name, the shrunk program and verdict in the failure), and one passed case when there is none."""
    totals = result["totals"]
    findings = result["findings"]
    suite = ElementTree.Element("testsuite", name=f"rabbitproof conformance {redacted(url)}",
                                tests=str(max(1, len(findings))), failures=str(len(findings)),
                                time=f"{totals['seconds']:.3f}")
    for entry in findings:
        rules = ", ".join(entry["rules"]) or entry["kind"]
        case = ElementTree.SubElement(suite, "testcase", classname="rabbitproof.conformance",
                                      name=f"[{rules}] {entry['statement']}"[:300])
        failure = ElementTree.SubElement(case, "failure", type=entry["kind"], message=entry["statement"][:500])
        shown = entry["shrunk"] or entry
        failure.text = (f"shown by {entry['count']} programs\n{shown['steps']}\n{entry['verdict']}\n"
                        f"{shown['program']}")
    if not findings:
        case = ElementTree.SubElement(suite, "testcase", classname="rabbitproof.conformance",
                                      name="no finding")
        out = ElementTree.SubElement(case, "system-out")
        out.text = f"{totals['programs']} programs, {totals['steps']} steps, all accepted"
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
    parser.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                        help="stop running programs (and shrinking) after this many seconds and report what was "
                             "found (exit 3 when no program finished)")
    parser.add_argument("--reply-timeout", type=float, default=REPLY_TIMEOUT, metavar="SECONDS",
                        help=f"how long to wait for a reply before reporting that the broker did not answer, "
                             f"when it answers a new connection at once (default {REPLY_TIMEOUT:g}; a broker slow "
                             f"at that too is waited for up to {EXTENSIONS + 1} times as long)")
    parser.add_argument("--no-probes", action="store_true",
                        help="run only generated programs (default: first a short program per rule of the catalogue)")
    parser.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    parser.add_argument("--json", action="store_true",
                        help="print the result as JSON (schema rabbitproof.conformance/1: findings, families, "
                             "totals, coverage)")
    parser.add_argument("--junit", metavar="FILE", help="also write the result as JUnit XML (a test case per finding)")
    parser.add_argument("--chart", metavar="DIR",
                        help="write each finding's program, shrunk, into DIR: finding-N.svg, its recorded run as "
                             "a message-sequence chart (a rejection), and finding-N.py, the program as a runnable "
                             "file (python3 finding-N.py URL replays it and judges it again)")
    parser.add_argument("--shrink-reruns", type=int, default=MAX_RERUNS, metavar="N",
                        help=f"runs of smaller candidates to shrink each finding's first program "
                             f"(default {MAX_RERUNS}; 0: no shrinking)")
    parser.add_argument("--no-steering", action="store_true",
                        help="draw every batch of 25 programs alike (default: towards the spec actions not yet "
                             "exercised)")


def progress_line(started: float):
    """A callback printing one line on stderr, rewritten after each program (a terminal only)."""
    def show(run_) -> None:
        t = run_.totals
        sys.stderr.write(f"\r{t['programs']} programs ({t['probes']} probes), {t['steps']} steps, "
                         f"{len(run_.findings)} findings, {time.monotonic() - started:.0f} s ")
        sys.stderr.flush()
    return show


def run_command(options: argparse.Namespace) -> int:
    """`rabbitproof conformance`: the exit code (rabbitproof/exits.py)."""
    started = time.monotonic()
    try:
        if options.programs < 0:
            raise UsageError("--programs must be 0 or more")
        if options.time_limit is not None and options.time_limit <= 0:
            raise UsageError("--time-limit must be a positive number of seconds")
        if not options.reply_timeout > 0 or options.reply_timeout == float("inf"):
            raise UsageError("--reply-timeout must be a positive number of seconds")
        where = parse_url(options.url)
        if options.junit and not Path(options.junit).resolve().parent.is_dir():
            raise UsageError(f"--junit: no such directory {str(Path(options.junit).resolve().parent)!r}")
        if options.shrink_reruns < 0:
            raise UsageError("--shrink-reruns must be 0 or more")
        if options.chart:
            writable_directory(Path(options.chart))
        if options.kill_cmd and not options.start_cmd:
            raise UsageError("--kill-cmd and --start-cmd go together: the suite kills the broker, then starts it")
        probe(where)
    except UsageError as error:
        sys.stderr.write(f"rabbitproof conformance: error: {error}\n")
        return BAD_INPUT
    broker = CommandedBroker(where["host"], where["port"], where["user"], where["password"], options.kill_cmd,
                             options.start_cmd) if options.start_cmd else None
    show = None if options.quiet or not sys.stderr.isatty() else progress_line(started)
    try:
        result, suite = run(where, options.programs, options.seed, judge_texts=options.dialect == "rabbitmq",
                            broker=broker, steering=not options.no_steering, shrink_reruns=options.shrink_reruns,
                            time_limit=options.time_limit, progress=show, probes=not options.no_probes,
                            crashes=bool(options.kill_cmd), started=started,
                            reply_timeout=options.reply_timeout)
    except UsageError as error:
        sys.stderr.write(f"rabbitproof conformance: error: {error}\n")
        return BAD_INPUT
    finally:
        if broker is not None:
            broker.close()
        if show is not None:
            sys.stderr.write("\n")
    result["totals"]["wall_seconds"] = time.monotonic() - started
    if options.chart:
        write_findings(result, suite, Path(options.chart), options.url, options.dialect)
    if options.junit:
        Path(options.junit).write_text(junit_xml(result, options.url), encoding="utf-8")
    code = FOUND if result["findings"] else UNDECIDED if result["verdict"] == "undecided" else NOTHING_FOUND
    out = stdout_console()
    if options.json:
        print_json(out, "conformance", {k: v for k, v in result.items() if k not in ("schema", "verdict")}, code)
    else:
        print_report(result)
        verdict_line(out, "conformance", code, f"{len(result['findings'])} findings in "
                                               f"{result['totals']['programs']} programs"
                     + ("; the time limit was reached" if result["time_limit_reached"] else ""))
    return code


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
