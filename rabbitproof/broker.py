"""`rabbitproof broker`: the reference broker (rabbitproof.impl.server) as a subcommand that reports as the
others do. A server has nothing to find: it says where it listens once it is ready, and when SIGTERM or
SIGINT stops it, it ends with a verdict line (``broker: stopped: by SIGTERM after 12.3 s, 4 client
connections (exit 0)``). With ``--json`` each of the two is one JSON object on a line of its own on stdout
(docs/reference/json-output.md), so that a script reads the address as soon as the broker is ready,
without waiting for it to stop. Bad input (a port in use, a data directory it cannot use) is one line on
stderr and exit 2, before it serves."""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from rich.console import Console

from rabbitproof.impl import server

from rabbitproof.exits import NOTHING_FOUND, schema
from rabbitproof.output import VERDICT_WORDS, verdict_line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The broker's own options, and --json."""
    server.add_arguments(parser)
    parser.add_argument("--json", action="store_true",
                        help="print a JSON object on its own line when the broker listens (its address) and "
                             "another when it stops, instead of the text lines")


def url(host: str, port: int) -> str:
    """The broker's address as an AMQP URL (the default user guest:guest is left out, as clients assume it)."""
    return f"amqp://{f'[{host}]' if ':' in host else host}:{port}/"


def json_line(event: str, fields: dict[str, Any]) -> None:
    """One JSON object on a line of stdout, ``schema`` and ``event`` first, flushed at once."""
    sys.stdout.write(json.dumps({"schema": schema("broker"), "event": event, **fields}) + "\n")
    sys.stdout.flush()


def run(args: argparse.Namespace, out: Console) -> int:
    """Serve until SIGTERM or SIGINT, reporting the start and the stop as text or JSON; the exit code."""
    served = server.Served()

    def listening(s: server.Served) -> None:
        if args.json:
            json_line("listening", {"host": s.host, "port": s.port, "url": url(s.host, s.port),
                                    "data_dir": os.path.abspath(args.data_dir), "pid": os.getpid()})
        else:
            server.print_ready(s)

    code = server.run(args, listening, served)
    if code != NOTHING_FOUND:
        return code                 # refused before serving: the one line on stderr says why
    if args.json:
        json_line("stopped", {"exit_code": code, "verdict": VERDICT_WORDS[code], "stopped_by": served.stopped_by,
                              "seconds": round(served.seconds, 3), "connections": served.connections})
    else:
        verdict_line(out, "broker", code, words="stopped",
                     detail=f"by {served.stopped_by} after {served.seconds:.1f} s, {served.connections} client "
                            f"connection{'' if served.connections == 1 else 's'}")
    return code
