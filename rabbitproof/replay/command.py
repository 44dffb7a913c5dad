"""`rabbitproof replay ANSWERS.json URL` and `rabbitproof check SETUP --replay URL`: each "can happen"
answer acted out on the broker at URL by real clients with real faults, and judged by the spec
(docs/how-to/replay.md). Everything is checked before any work: the URL, the options, the file, and that
the broker answers (bad input: one line on stderr, exit 2)."""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from rich.console import Console

from rabbitproof.spark_check.bundle import InputError

from rabbitproof.brokers.commanded import CommandedBroker
from rabbitproof.check.answers import setup_name
from rabbitproof.check.setup_file import Setup
from rabbitproof.conformance.command import UsageError, parse_url, probe, redacted, writable_directory
from rabbitproof.output import print_json, verdict_line
from rabbitproof.replay.attempt import Where
from rabbitproof.replay.report import exit_code, print_replays, replay_json, status_counts
from rabbitproof.replay.saved import SavedError, read_saved
from rabbitproof.replay.tries import Execution, Target, replay_answer

DEFAULT_TRIES = 10
DEFAULT_STEP_TIMEOUT = 10.0


def add_replay_options(parser: argparse.ArgumentParser) -> None:
    """The options of a replay, shared by `rabbitproof replay` and `rabbitproof check --replay`."""
    parser.add_argument("--tries", type=int, default=DEFAULT_TRIES, metavar="N",
                        help=f"replay an answer up to N times until it is reproduced (default {DEFAULT_TRIES})")
    parser.add_argument("--step-timeout", type=float, default=DEFAULT_STEP_TIMEOUT, metavar="SECONDS",
                        help=f"how long a client waits for the frame its next step receives "
                             f"(default {DEFAULT_STEP_TIMEOUT:g})")
    parser.add_argument("--kill-cmd", metavar="CMD",
                        help="a shell command that crashes the broker (e.g. kill -9 its process): with "
                             "--start-cmd, an execution's broker crash is made for real")
    parser.add_argument("--start-cmd", metavar="CMD",
                        help="a shell command that starts the broker again on the same port and data")
    parser.add_argument("--recordings", metavar="DIR",
                        help="where the recordings (for `rabbitproof trace`) and charts go (default: a new "
                             "temporary directory, named in the report)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `rabbitproof replay`."""
    parser.add_argument("answers", metavar="ANSWERS.json",
                        help="the answers of `rabbitproof check --json`, saved to a file")
    parser.add_argument("url", metavar="URL", help="the broker: amqp://user:pass@host:port/vhost")
    parser.add_argument("--setup", metavar="FILE",
                        help="the setup file the answers were found for (default: the one the file names)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    add_replay_options(parser)


def options_need_replay(args: argparse.Namespace) -> None:
    """`check` without --replay: InputError naming a replay option given anyway (it would do nothing)."""
    given = [name for name, default in (("--tries", DEFAULT_TRIES), ("--step-timeout", DEFAULT_STEP_TIMEOUT),
                                        ("--kill-cmd", None), ("--start-cmd", None), ("--recordings", None))
             if getattr(args, name[2:].replace("-", "_")) != default]
    if given:
        raise InputError(f"{given[0]} is an option of the replay: give --replay URL too")


def target_of(args: argparse.Namespace, url: str) -> Target:
    """The replays' target from the options; InputError naming what is wrong, the broker probed first."""
    try:
        if args.tries < 1:
            raise UsageError(f"--tries must be at least 1, not {args.tries}")
        if not args.step_timeout > 0:
            raise UsageError(f"--step-timeout must be a positive number of seconds, not {args.step_timeout:g}")
        if bool(args.kill_cmd) != bool(args.start_cmd):
            raise UsageError("--kill-cmd and --start-cmd go together: the replay kills the broker, then starts it")
        where = parse_url(url)
        directory = Path(args.recordings) if args.recordings else Path(tempfile.mkdtemp(prefix="rabbitproof-replay-"))
        if args.recordings:
            writable_directory(directory)
        probe(where)
    except UsageError as e:
        raise InputError(str(e).replace("--chart", "--recordings")) from None
    crasher = (CommandedBroker(where["host"], where["port"], where["user"], where["password"], args.kill_cmd,
                               args.start_cmd) if args.kill_cmd else None)
    return Target(Where(where["host"], where["port"], where["user"], where["password"], where["vhost"]), crasher,
                  args.tries, args.step_timeout, directory)


def replay_all(setup: Setup, executions: list[Execution], target: Target) -> list:
    label = setup_name(setup)
    try:
        return [replay_answer(e, setup, target, label) for e in executions]
    finally:
        close = getattr(target.crasher, "close", None)
        if close is not None:
            close()


def run(args: argparse.Namespace, out: Console) -> int:
    """`rabbitproof replay`: the exit code (InputError for bad input, before any work)."""
    try:
        setup, executions = read_saved(args.answers, args.setup)
    except SavedError as e:
        raise InputError(str(e)) from None
    target = target_of(args, args.url)
    replays = replay_all(setup, executions, target)
    code = exit_code(replays)
    if args.json:
        document = replay_json(setup.source, redacted(args.url), target.tries, replays)
        print_json(out, "replay", {k: v for k, v in document.items() if k != "schema"}, code)
    else:
        print_replays(out, setup.source, redacted(args.url), replays)
        verdict_line(out, "replay", code, status_counts(replays))
    return code


def after_check(setup: Setup, executions: list[Execution], target: Target, url: str) -> tuple[list, dict]:
    """`rabbitproof check --replay URL`: the replays of the answers just found, and their JSON part."""
    replays = replay_all(setup, executions, target)
    return replays, replay_json(setup.source, redacted(url), target.tries, replays)
