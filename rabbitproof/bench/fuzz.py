"""The broker fuzzed: seeded bad frames over many connections, every answer judged by AMQP 0-9-1.

    rabbitproof bench fuzz [--cases N] [--seed S] [--per-connection K] [--round-trip-every C]
                           [--durable-messages M] [--targets impl,rabbitmq] [--rabbitmq-cases N] [--json]

Our broker (started here, as `rabbitproof broker` runs it) receives N cases of bad input (rabbitproof/fuzz/
cases.py): valid frames built with pamqp and then broken (bits flipped, frames cut short, sizes huge,
frame ends wrong, unknown frame types, methods and channels, methods out of order or from the server's
side, content headers of the wrong class or with bad properties, bodies longer than announced), and
well-formed methods that are wrong (unknown delivery tags, missing queues). Each case is judged: the
connection.close or channel.close code AMQP 0-9-1 assigns, or the connection dropped where the framing
is lost; never silence, never 541. Meanwhile pika does a clean publish, consume and ack every C
connections; persistent messages in a durable queue, confirmed before the first case, must all be there
after the last one and after a restart; the broker must still run and its log hold no error.

The same cases (the same seed) go to a private RabbitMQ 3.10.8 node (`--rabbitmq-cases`, fewer: RabbitMQ
answers a refused frame more slowly) for comparison: where the two brokers answer the same case
differently, the table shows our reply beside RabbitMQ's, by kind of case. A difference is not a
failure; only our broker's answers are held to the rules for the exit code: 0 when every one was
allowed, 1 when any was not (or the broker stopped, lost data or logged an error).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from rabbitproof import exits
from rabbitproof.brokers.impl_broker import ImplBroker, ImplStartFailed
from rabbitproof.brokers.rabbitmq import RabbitMQNode, RabbitMQStartFailed, rabbitmq_installed
from rabbitproof.extras import MissingExtra, require
from rabbitproof.fuzz import campaign
from rabbitproof.fuzz.cases import KINDS
from rabbitproof.options import OneLineParser, int_in, names_in
from rabbitproof.output import VERDICT_WORDS

TARGETS = ("impl", "rabbitmq")
RABBITMQ_SETTLE = 0.1  # RabbitMQ runs channels apart: a second probe this long after the first


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = OneLineParser(prog="rabbitproof bench fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int_in(1, 10_000_000), default=100_000,
                        help="cases of bad input sent to our broker (default 100000)")
    parser.add_argument("--seed", type=int_in(0, 2**63 - 1), default=1, help="the seed of the cases (default 1)")
    parser.add_argument("--per-connection", type=int_in(1, 1000), default=10,
                        help="cases a connection carries at most, while the broker keeps it open (default 10)")
    parser.add_argument("--round-trip-every", type=int_in(1, 1_000_000), default=500,
                        help="connections between two clean pika round trips (default 500)")
    parser.add_argument("--durable-messages", type=int_in(1, 10_000), default=20,
                        help="persistent messages in a durable queue, counted after the cases and after a "
                             "restart (default 20)")
    parser.add_argument("--targets", type=names_in(TARGETS, "a target"), default=None,
                        help="impl,rabbitmq (default: impl, and rabbitmq when installed)")
    parser.add_argument("--rabbitmq-cases", type=int_in(1, 10_000_000), default=2_000,
                        help="cases sent to RabbitMQ for the comparison (default 2000)")
    parser.add_argument("--timeout", type=int_in(1, 600), default=5,
                        help="seconds a case may wait for the broker's answer (default 5)")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout instead of tables")
    options = parser.parse_args(argv)
    if options.targets is None:
        options.targets = ("impl",) + (("rabbitmq",) if rabbitmq_installed() else ())
    elif "rabbitmq" in options.targets and not rabbitmq_installed():
        parser.error("--targets includes rabbitmq but RabbitMQ 3.10.8 is not installed: run `make rabbitmq`")
    return options


def fuzz_target(target: str, options: argparse.Namespace, workdir: Path, console: Console) -> campaign.Report:
    """Start the target, fuzz it, stop it."""
    is_impl = target == "impl"
    broker: Any = ImplBroker(workdir / "impl") if is_impl else RabbitMQNode(workdir / "rabbitmq")
    cases = options.cases if is_impl else options.rabbitmq_cases

    def progress(report: campaign.Report) -> None:
        if not options.json:
            console.print(f"  {target}: {report.cases:,} of {cases:,} cases, {report.connections:,} connections, "
                          f"{len(report.failures)} failures", highlight=False)

    broker.start()
    try:
        return campaign.run(broker, cases, options.seed, per_connection=options.per_connection,
                            round_trip_every=options.round_trip_every, durable_messages=options.durable_messages,
                            restart=True, timeout=options.timeout, settle=0.0 if is_impl else RABBITMQ_SETTLE,
                            is_reference=not is_impl, stderr_text=broker.stderr_text if is_impl else None,
                            progress=progress)
    finally:
        broker.close()


def outcome_text(outcome: campaign.Outcome) -> str:
    what, code = outcome
    return f"{what} {code}" if code else what


def kinds_table(reports: dict[str, campaign.Report]) -> Table:
    """Per kind of case: the cases and each broker's answers."""
    table = Table(title="answers by kind of case")
    table.add_column("kind")
    for target, report in reports.items():
        table.add_column(f"{target} cases", justify="right")
        table.add_column(f"{target} answers")
    for kind in KINDS:
        row = [kind]
        for report in reports.values():
            answers = Counter({outcome_text(o): n for (k, o), n in report.outcomes.items() if k == kind})
            row += [f"{sum(answers.values()):,}", ", ".join(f"{a} x{n}" for a, n in answers.most_common())]
        table.add_row(*row)
    return table


def document(options: argparse.Namespace, reports: dict[str, campaign.Report], code: int) -> dict[str, Any]:
    """The --json document."""
    out: dict[str, Any] = {"schema": exits.schema("bench.fuzz"), "exit_code": code, "verdict": VERDICT_WORDS[code],
                           "seed": options.seed, "targets": {}}
    for target, report in reports.items():
        out["targets"][target] = {
            "cases": report.cases, "connections": report.connections, "bad_frames": report.bad_frames,
            "malformed_frames": report.malformed_frames,
            "seconds": round(report.seconds, 3), "round_trips": report.round_trips,
            "durable": report.durable_checks, "broker_alive": report.broker_alive,
            "replies": dict(report.replies_by_code()),
            "by_kind": {kind: {outcome_text(o): n for (k, o), n in report.outcomes.items() if k == kind}
                        for kind in KINDS},
            "failures": report.failures,
        }
    if "impl" in reports and "rabbitmq" in reports:
        both, same = campaign.agreement(reports["impl"], reports["rabbitmq"])
        out["comparison"] = {"cases_compared": both, "alike": same, "differences": [
            {"kind": kind, "impl": outcome_text(ours), "rabbitmq": outcome_text(theirs), "cases": n}
            for (kind, ours, theirs), n in sorted(campaign.compare(reports["impl"], reports["rabbitmq"]).items())]}
    return out


def print_tables(console: Console, reports: dict[str, campaign.Report]) -> None:
    summary = Table(title="fuzzing")
    for column in ("broker", "cases", "bad frames", "malformed", "connections", "seconds", "pika round trips",
                   "durable data",
                   "broker alive", "failures"):
        summary.add_column(column, justify="left" if column in ("broker", "durable data") else "right")
    for target, report in reports.items():
        summary.add_row(target, f"{report.cases:,}", f"{report.bad_frames:,}", f"{report.malformed_frames:,}",
                        f"{report.connections:,}",
                        f"{report.seconds:.1f}", f"{report.round_trips}", "; ".join(report.durable_checks),
                        "yes" if report.broker_alive else "NO", f"{len(report.failures)}")
    console.print(summary)
    replies = Table(title="replies by code")
    replies.add_column("reply")
    for target in reports:
        replies.add_column(target, justify="right")
    tallies = {target: report.replies_by_code() for target, report in reports.items()}
    for reply in sorted(set().union(*tallies.values())):
        replies.add_row(reply, *(f"{tallies[t][reply]:,}" for t in reports))
    console.print(replies)
    console.print(kinds_table(reports))
    if "impl" in reports and "rabbitmq" in reports:
        both, same = campaign.agreement(reports["impl"], reports["rabbitmq"])
        differences = Table(title=f"differences: cases both brokers ran at the same place ({both:,}; "
                                  f"{same:,} answered alike)")
        for column in ("kind", "impl", "RabbitMQ 3.10.8", "cases"):
            differences.add_column(column, justify="right" if column == "cases" else "left")
        for (kind, ours, theirs), n in sorted(campaign.compare(reports["impl"], reports["rabbitmq"]).items()):
            differences.add_row(kind, outcome_text(ours), outcome_text(theirs), f"{n:,}")
        console.print(differences)
    for target, report in reports.items():
        shown = report.failures[:20]
        if shown:
            rules = "AMQP 0-9-1 (a difference, not counted)" if target == "rabbitmq" else "AMQP 0-9-1"
            console.print(f"[bold]{target}[/]: {len(report.failures)} answers or checks {rules} does not allow; "
                          f"the first {len(shown)}:")
            for line in shown:
                console.print(f"  {line}", highlight=False, markup=False)


def main(argv: list[str] | None = None, console: Console | None = None) -> int:
    """Fuzz each target and report; 0 when our broker answered every case as allowed, else 1."""
    options = parse_args(argv)
    try:
        require("dev", "the fuzz benchmark (its clean round trips are pika's)")
    except MissingExtra as e:
        print(f"rabbitproof bench fuzz: error: {e}", file=sys.stderr)
        return exits.BAD_INPUT
    console = console if console is not None else Console()
    if not options.json:
        console.print(f"[bold]fuzz[/]: {options.cases:,} cases of bad input to impl"
                      + (f", {options.rabbitmq_cases:,} to RabbitMQ 3.10.8" if "rabbitmq" in options.targets else "")
                      + f", seed {options.seed}, at most {options.per_connection} a connection")
    reports: dict[str, campaign.Report] = {}
    with tempfile.TemporaryDirectory(prefix="rabbitproof-fuzz-") as workdir:
        for target in options.targets:
            try:
                reports[target] = fuzz_target(target, options, Path(workdir), console)
            except (ImplStartFailed, RabbitMQStartFailed, OSError) as error:
                sys.stderr.write(f"rabbitproof bench fuzz: {target} failed to run: {type(error).__name__}: "
                                 f"{str(error).splitlines()[0] if str(error) else ''}\n")
                return exits.FOUND
    found = "impl" in reports and bool(reports["impl"].failures)
    code = exits.FOUND if found else exits.NOTHING_FOUND
    if options.json:
        sys.stdout.write(json.dumps(document(options, reports, code)) + "\n")
        return code
    print_tables(console, reports)
    if "impl" in reports:
        impl = reports["impl"]
        verdict = (f"{len(impl.failures)} answers or checks of our broker break AMQP 0-9-1" if found
                   else f"our broker answered all {impl.cases:,} cases as AMQP 0-9-1 allows")
        console.print(f"verdict: {verdict}")
    return code
