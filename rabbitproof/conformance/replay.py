"""A program a broker did not accept, written as a runnable Python file (``rabbitproof conformance --chart
DIR``), so that a broker author can run it again without the suite's generator:

    python3 DIR/ER.py amqp://guest:guest@localhost:5672/

The file holds the program as data in the suite's vocabulary (rabbitproof/conformance/programs.py: each
step one write of methods on one connection), each step with a comment showing the AMQP methods it
writes. Running it runs the steps against the URL with the suite's own runner (the raw client of
rabbitproof/recording/rawclient.py: channels 1 and 2 opened on every connection, a broker's close
answered, each step's replies awaited), prints what every client saw in the spec's language and the
spec's verdict, and exits 0 accepted, 1 not accepted, 2 when the broker cannot be used
(`rabbitproof.conformance.command.replay_main`). It needs rabbitproof importable, nothing else.
"""
from __future__ import annotations

import inspect
import textwrap

from rabbitproof.conformance import programs as P
from rabbitproof.conformance.targets import method_of

# Names the comments give what a run names after itself (queue q0 is <run>-q0 on the wire).
_SHOWN = {**{q: f"q{q}" for q in range(P.QUEUES + 1)}, "run": "run", "exchange": "missing"}


def wire_text(op, program: P.Program) -> str:
    """The AMQP method an op writes, its fields that are not pamqp's defaults, as a person reads it."""
    if isinstance(op, P.Publish):
        exchange = {"": "", "amq.fanout": "amq.fanout", "missing": "missing"}[op.exchange]
        flags = [f for f, on in (("mandatory", op.mandatory), ("immediate", op.immediate),
                                 ("persistent", op.persistent)) if on]
        return f"basic.publish(exchange={exchange!r}, routing_key=q{op.queue}{''.join(', ' + f for f in flags)})"
    method = method_of(op, {**_SHOWN, "flags": program.queues})
    defaults = inspect.signature(type(method).__init__).parameters
    fields = [f"{name}={getattr(method, name)!r}" for name, parameter in defaults.items()
              if parameter.kind is parameter.POSITIONAL_OR_KEYWORD and name not in ("self", "ticket")
              and getattr(method, name) != parameter.default]
    cls, name = method.name.split(".")
    kebab = "".join("-" + c.lower() if c.isupper() else c for c in name).lstrip("-")
    return f"{cls.lower()}.{kebab}({', '.join(fields)})"


def program_source(program: P.Program) -> str:
    """``program`` as a Python expression, a step per line with its methods on the wire as a comment."""
    lines = ["Program(", f"    queues={program.queues!r},", f"    connections={program.connections},",
             "    steps=("]
    for n, step in enumerate(program.steps, 1):
        if isinstance(step, P.Crash):
            lines.append(f"        # {n}. the broker is killed and restarted (needs --kill-cmd and --start-cmd)")
        else:
            lines.append(f"        # {n}. c{step.conn}: " + "; ".join(wire_text(op, program) for op in step.ops))
        lines.append(f"        {step!r},")
    lines += ["    ),", ")"]
    return "\n".join(lines)


def script(program: P.Program, title: str, found: str, dialect: str = "standard") -> str:
    """The runnable file: ``title`` and what was ``found`` in its docstring, then the program."""
    title, found = _docstring_safe(title), _docstring_safe(found)
    found_lines = "\n".join(textwrap.fill(line, 108, initial_indent="    ", subsequent_indent="    ")
                            for line in found.splitlines())
    return f'''#!/usr/bin/env python3
"""{title}

What the suite found:
{found_lines}

Run it again:  python3 {{this file}} amqp://user:pass@host:port/vhost [--dialect standard|rabbitmq]
It runs the steps below against the broker with rabbitproof's runner (channels 1 and 2 opened on each
connection, the broker's closes answered, each step's replies awaited), prints what each client saw in
the spec's language and the spec's verdict: exit 0 accepted, 1 not accepted, 2 the broker cannot be used.
The names on the wire are the run's own: queue q0 is <run>-q0, consumer tag a is <run>-a.
"""
import sys

from rabbitproof.conformance.command import replay_main
from rabbitproof.conformance.programs import *  # noqa: F401,F403  (the vocabulary of the steps)

PROGRAM = {program_source(program)}

if __name__ == "__main__":
    sys.exit(replay_main(PROGRAM, sys.argv[1:], dialect={dialect!r}))
'''


def _docstring_safe(text: str) -> str:
    """``text`` as it can stand inside a triple-quoted docstring: backslashes doubled, no closing quotes."""
    return text.replace("\\", "\\\\").replace('"""', "'''")
