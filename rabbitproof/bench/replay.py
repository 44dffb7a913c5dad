"""Every example's "can happen" answers replayed on real brokers: ``rabbitproof bench replay``.

    rabbitproof bench replay [--brokers impl,rabbitmq] [--examples NAMES] [--tries N] [--step-timeout SECONDS]
                             [--recordings DIR] [--json]

Each setup of examples/ is checked (the local engine, the default reductions), and each of its "can happen"
answers is replayed (docs/how-to/replay.md) against each broker: our broker (`rabbitproof broker`, a private
one started here with its own data directory) and a private RabbitMQ 3.10.8 node started here. A broker
crash in an execution is made for real: the broker's process is killed (SIGKILL) and started again on the
same port and data, as the replay's `--kill-cmd` and `--start-cmd` do. The table gives, per answer and
broker, the status (reproduced, not reproduced, diverged, cannot be replayed) and why, the tries it took
and the seconds of its tries. The exit code: 1 when a replay diverged (the broker did what the spec does not
allow), 3 when one was not reproduced within its tries, else 0; 2 for bad input, refused before any work.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from rich.console import Console
from rich.table import Table

from rabbitproof.brokers.impl_broker import ImplBroker
from rabbitproof.brokers.rabbitmq import RabbitMQNode, RabbitMQNotInstalled, require_rabbitmq
from rabbitproof.check.answers import DEFAULT_REDUCTIONS, check_setup
from rabbitproof.check.setup_file import Setup, read_setup
from rabbitproof.exits import schema
from rabbitproof.output import VERDICT_WORDS
from rabbitproof.options import OneLineParser, build_engine, fail, int_in, names_in, output_console, seconds_in
from rabbitproof.replay.attempt import Where
from rabbitproof.replay.command import DEFAULT_STEP_TIMEOUT, DEFAULT_TRIES
from rabbitproof.replay.outcome import DIVERGED, NOT_REPRODUCED, REPRODUCED, Replayed
from rabbitproof.replay.report import exit_code, status_counts
from rabbitproof.replay.saved import from_checked
from rabbitproof.replay.tries import Execution, Target, replay_answer

PROG = "rabbitproof bench replay"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BROKERS = {"impl": "our broker", "rabbitmq": "RabbitMQ 3.10.8"}
STYLES = {REPRODUCED: "green", NOT_REPRODUCED: "yellow", DIVERGED: "red"}


@dataclass(frozen=True)
class Example:
    """An example's setup and its "can happen" answers, with the seconds its check took."""

    name: str
    setup: Setup
    executions: tuple[Execution, ...]
    check_seconds: float


@dataclass(frozen=True)
class Row:
    """One answer of one example replayed on one broker."""

    example: str
    broker: str
    replayed: Replayed


def available_examples() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in EXAMPLES.glob("*.toml")))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    examples = available_examples()
    parser = OneLineParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=names_in(tuple(BROKERS), "a broker"), default=None,
                        metavar="NAMES", help="the brokers, comma-separated: impl (our broker), rabbitmq "
                                              "(a private RabbitMQ 3.10.8 node); default both")
    parser.add_argument("--examples", type=names_in(examples, "an example of examples/"), default=None,
                        metavar="NAMES", help="the examples, comma-separated names of examples/*.toml "
                                              "(e.g. auto-ack,fire-and-forget); default every one")
    parser.add_argument("--tries", type=int_in(1), default=DEFAULT_TRIES, metavar="N",
                        help=f"replay an answer up to N times until it is reproduced (default {DEFAULT_TRIES})")
    parser.add_argument("--step-timeout", type=seconds_in(0, above=True), default=DEFAULT_STEP_TIMEOUT, metavar="SECONDS",
                        help=f"how long a client waits for the frame its next step receives "
                             f"(default {DEFAULT_STEP_TIMEOUT:g})")
    parser.add_argument("--recordings", metavar="DIR",
                        help="where the recordings and charts go, a folder per broker (default: a new temporary "
                             "directory, named in the report)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    options = parser.parse_args(argv)
    options.brokers = options.brokers or tuple(BROKERS)
    options.examples = options.examples or examples
    return options


def recordings_directory(given: str | None) -> Path:
    """The folder for the recordings (made if missing); ValueError naming what is wrong."""
    if not given:
        return Path(tempfile.mkdtemp(prefix="rabbitproof-bench-replay-"))
    directory = Path(given)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / ".rabbitproof-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise ValueError(f"--recordings {given}: cannot write there ({e.strerror})") from None
    return directory


def checked(name: str) -> Example:
    """The example's setup and its "can happen" answers (the local engine, the default reductions)."""
    started = time.monotonic()
    setup = read_setup(str(EXAMPLES / f"{name}.toml"))
    engine = build_engine("local", reductions=DEFAULT_REDUCTIONS)
    try:
        answers = check_setup(setup, engine)
    finally:
        engine.close()
    return Example(name, setup, tuple(from_checked(answers)), time.monotonic() - started)


def start_broker(name: str, workdir: Path) -> ImplBroker | RabbitMQNode:
    broker = ImplBroker(workdir / "impl-data") if name == "impl" else RabbitMQNode()
    broker.start()
    return broker


def replay_on(broker_name: str, examples: Sequence[Example], options: argparse.Namespace, directory: Path,
              progress: Console) -> list[Row]:
    """Every answer of ``examples`` replayed on a broker of its own, started here, which the replay kills
    and starts again at an execution's crash."""
    rows: list[Row] = []
    folder = directory / broker_name
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rabbitproof-bench-replay-broker-") as workdir:
        progress.print(f"starting {BROKERS[broker_name]} ...", highlight=False)
        broker = start_broker(broker_name, Path(workdir))
        try:
            target = Target(Where(broker.host, broker.port, broker.user, broker.password), broker,
                            options.tries, options.step_timeout, folder)
            for example in examples:
                for execution in example.executions:
                    progress.print(f"replaying {example.name} {execution.key} on {broker_name} ...",
                                   highlight=False)
                    replayed = replay_answer(execution, example.setup, target, example.name)
                    progress.print(f"  {replayed.status}{tries_text(replayed)}", highlight=False)
                    rows.append(Row(example.name, broker_name, replayed))
        finally:
            broker.close()
    return rows


def tries_text(r: Replayed) -> str:
    """The tries and their seconds in brackets, as in " (2 tries, 1.3 s)"; nothing for an answer not tried."""
    return f" ({r.tries} {'try' if r.tries == 1 else 'tries'}, {r.seconds:.1f} s)" if r.tries else ""


def why_cell(r: Replayed) -> str:
    """Why, in one cell: what the run showed, where the last try went another way, the divergence, or why
    it cannot be replayed."""
    text = " ".join(r.why.split())
    if r.status == DIVERGED and r.shrunk_steps:
        text += f" (still diverges with the first {len(r.shrunk_steps)} steps)"
    return text


def table(rows: Sequence[Row], tries: int) -> Table:
    out = Table(title=f"the examples' \"can happen\" answers replayed (up to {tries} tries each)")
    for column in ("example", "question", "broker", "status", "tries", "seconds", "why"):
        out.add_column(column, justify="right" if column in ("tries", "seconds") else "left",
                       overflow="fold")
    for row in rows:
        r = row.replayed
        out.add_row(row.example, r.key, row.broker, f"[{STYLES.get(r.status, '')}]{r.status}[/]" if r.status in STYLES
                    else r.status, str(r.tries) if r.tries else "-", f"{r.seconds:.1f}" if r.tries else "-",
                    why_cell(r))
    return out


def document(examples: Sequence[Example], rows: Sequence[Row], options: argparse.Namespace, directory: Path,
             code: int, wall: dict[str, float]) -> dict:
    """The `--json` document: the seconds spent on each broker (its start included), and per example its
    check's seconds and per broker its answers' replays."""
    return {
        "schema": schema("bench.replay"),
        "exit_code": code,
        "verdict": VERDICT_WORDS[code],
        "brokers": list(options.brokers),
        "tries": options.tries,
        "step_timeout": options.step_timeout,
        "recordings": str(directory),
        "seconds": {name: round(seconds, 3) for name, seconds in wall.items()},
        "examples": [{
            "example": e.name,
            "setup": e.setup.source,
            "check_seconds": round(e.check_seconds, 3),
            "can_happen": [x.key for x in e.executions],
            "replays": {b: [row.replayed.json() for row in rows if row.example == e.name and row.broker == b]
                        for b in options.brokers},
        } for e in examples],
    }


def main(argv: Sequence[str] | None = None, console: Console | None = None) -> int:
    """Check the examples, replay their answers on each broker, print the table (or `--json`); the exit
    code (see the module's docstring)."""
    options = parse_args(argv)
    if not options.examples:
        return fail(PROG, f"no examples found in {EXAMPLES.name}/ beside the package: run it from a checkout "
                          "of rabbitproof")
    try:
        if "rabbitmq" in options.brokers:
            require_rabbitmq()
        directory = recordings_directory(options.recordings)
    except (RabbitMQNotInstalled, ValueError) as e:
        return fail(PROG, e)
    console = console if console is not None else output_console()
    progress = Console(stderr=True) if options.json else console
    examples = []
    for name in options.examples:
        progress.print(f"checking {name} ...", highlight=False)
        examples.append(checked(name))
    rows: list[Row] = []
    wall: dict[str, float] = {}
    for broker_name in options.brokers:
        started = time.monotonic()
        rows += replay_on(broker_name, examples, options, directory, progress)
        wall[broker_name] = time.monotonic() - started
    code = exit_code([row.replayed for row in rows])
    if options.json:
        console.file.write(json.dumps(document(examples, rows, options, directory, code, wall), indent=2) + "\n")
        return code
    console.print(table(rows, options.tries))
    questions = {row.replayed.key: row.replayed.question for row in rows}
    for key, question in questions.items():
        console.print(f"{key}: {question}", highlight=False, markup=False)
    nothing = [e.name for e in examples if not e.executions]
    if nothing:
        console.print(f"no answer can happen, nothing to replay: {', '.join(nothing)}", highlight=False)
    console.print(status_counts([row.replayed for row in rows]) + f"; checking the examples took "
                  f"{sum(e.check_seconds for e in examples):.1f} s, replaying on "
                  + ", ".join(f"{name} {seconds:.0f} s" for name, seconds in wall.items())
                  + f" (with starting the broker); recordings and charts: {directory}", highlight=False)
    return code


if __name__ == "__main__":
    sys.exit(main())
