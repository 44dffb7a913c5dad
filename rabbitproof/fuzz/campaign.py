"""A fuzzing campaign against one running broker: connections of seeded cases, each answer judged.

Before the first case a durable queue receives persistent messages (published with confirms, through
pika); every `round_trip_every` connections pika publishes, consumes and acks one message on a queue of
its own; after the last case the durable messages are read back (same bodies, same count), and, when
asked, again after the broker restarts. A connection carries cases until the broker closes it, a case
leaves its state unknown (a random flip may have made any method), or `per_connection` cases are done.

Each connection's cases come from ``random.Random(f"{seed}-{connection}")``, so two brokers given the
same seed receive the same first case on every connection, and the same later ones as long as they
answered alike: that is what the comparison (`compare`) lines up."""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from rabbitproof.fuzz.cases import HARD_CODES, INTERNAL_ERROR, SOFT_CODES, Case, Outcome, make_case
from rabbitproof.fuzz.wire import FuzzConnection, Unanswered, Undecodable

if TYPE_CHECKING:       # pika (the dev extra) is imported where a round trip is made, not at import
    import pika

DURABLE_QUEUE = "rabbitproof-fuzz-durable"
LOG_WORDS = ("Traceback", "internal error", "Error:", "Exception")


@dataclass
class CaseResult:
    connection: int
    index: int
    kind: str
    outcome: Outcome
    text: str


@dataclass
class Report:
    """What a campaign did and found. `failures` holds every answer AMQP 0-9-1 does not allow."""

    target: str
    seed: int
    cases: int = 0
    connections: int = 0
    bad_frames: int = 0
    malformed_frames: int = 0
    bytes_sent: int = 0
    seconds: float = 0.0
    outcomes: Counter[tuple[str, Outcome]] = field(default_factory=Counter)
    results: list[CaseResult] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    round_trips: int = 0
    durable_sent: int = 0
    durable_checks: list[str] = field(default_factory=list)
    log_lines: list[str] = field(default_factory=list)
    broker_alive: bool = True

    def replies_by_code(self) -> Counter[str]:
        """Outcomes over all kinds: "connection 501", "channel 404", "served", ..."""
        tally: Counter[str] = Counter()
        for (_, (what, code)), n in self.outcomes.items():
            tally[f"{what} {code}" if code else what] += n
        return tally


def judge(case: Case, outcome: Outcome, text: str, is_reference: bool) -> str | None:
    """None when AMQP 0-9-1 allows the outcome for this case, else why not. A reference broker (RabbitMQ)
    is held to the same rules, except that it may drop a connection on a frame it cannot parse."""
    what, code = outcome
    if what == "connection" and code not in HARD_CODES:
        return f"{case.kind}: connection.close with {code}, not a connection error code ({text!r})"
    if what == "channel" and code not in SOFT_CODES:
        return f"{case.kind}: channel.close with {code}, not a channel error code ({text!r})"
    if code == INTERNAL_ERROR:
        return f"{case.kind}: 541 internal error ({text!r})"
    if outcome in case.allowed:
        return None
    if what == "dropped" and (case.may_drop or is_reference):
        return None
    return (f"{case.kind}: got {what} {code} {text!r}, allowed {sorted(case.allowed)}; "
            f"first bytes {case.data[:40]!r}")


def pika_parameters(host: str, port: int, user: str, password: str) -> pika.ConnectionParameters:
    import pika
    return pika.ConnectionParameters(host=host, port=port, credentials=pika.PlainCredentials(user, password),
                                     connection_attempts=3, retry_delay=0.5, socket_timeout=10,
                                     blocked_connection_timeout=10)


def durable_bodies(seed: int, count: int) -> list[bytes]:
    return [f"durable {seed} {n} ".encode() * (1 + n % 5) for n in range(count)]


def put_durable(parameters: pika.ConnectionParameters, bodies: list[bytes]) -> None:
    import pika
    """A durable queue holding exactly `bodies`, persistent, each confirmed by the broker."""
    with pika.BlockingConnection(parameters) as conn:
        ch = conn.channel()
        ch.queue_declare(DURABLE_QUEUE, durable=True)
        ch.queue_purge(DURABLE_QUEUE)
        ch.confirm_delivery()
        for body in bodies:
            ch.basic_publish("", DURABLE_QUEUE, body, pika.BasicProperties(delivery_mode=2), mandatory=True)


def count_durable(parameters: pika.ConnectionParameters, bodies: list[bytes]) -> str | None:
    import pika
    """None when the durable queue holds exactly `bodies` (read without acking, so they stay), else what differs."""
    with pika.BlockingConnection(parameters) as conn:
        ch = conn.channel()
        count = ch.queue_declare(DURABLE_QUEUE, durable=True, passive=True).method.message_count
        got = []
        for _ in range(count):
            method, _, body = ch.basic_get(DURABLE_QUEUE, auto_ack=False)
            if method is None:
                break
            got.append(body)
        ch.close()  # the messages go back to the queue
    if sorted(got) != sorted(bodies):
        return f"the durable queue holds {count} messages ({len(got)} read); {len(bodies)} were confirmed"
    return None


def round_trip(parameters: pika.ConnectionParameters, serial: int) -> str | None:
    import pika
    from pika import exceptions as pika_exceptions
    """pika publishes one message with a confirm, consumes it and acks it; None when all went well."""
    body = f"round trip {serial}".encode()
    try:
        with pika.BlockingConnection(parameters) as conn:
            ch = conn.channel()
            queue = ch.queue_declare("", exclusive=True).method.queue
            ch.confirm_delivery()
            ch.basic_publish("", queue, body, mandatory=True)
            for method, _, got in ch.consume(queue, inactivity_timeout=10):
                if method is None:
                    return f"round trip {serial}: no delivery within 10 s"
                ch.basic_ack(method.delivery_tag)
                if got != body:
                    return f"round trip {serial}: got {got!r}, published {body!r}"
                break
            ch.cancel()
            if ch.queue_declare(queue, passive=True).method.message_count:
                return f"round trip {serial}: the acked message is still in its queue"
    except pika_exceptions.AMQPError as error:
        return f"round trip {serial}: {type(error).__name__}: {error}"
    return None


def run_connection(host: str, port: int, user: str, password: str, seed: int, number: int, per_connection: int,
                   timeout: float, settle: float, is_reference: bool, report: Report, budget: int) -> None:
    """One connection's cases, as many as the budget and the broker's answers let it carry."""
    rng = random.Random(f"{seed}-{number}")
    queue = f"fuzz-{seed}-{number}"
    try:
        conn = FuzzConnection(host, port, user, password, queue, timeout)
    except (OSError, Unanswered, Undecodable, TimeoutError) as error:
        report.failures.append(f"connection {number}: the handshake failed: {type(error).__name__}: {error}")
        return
    report.connections += 1
    try:
        for index in range(min(per_connection, budget)):
            case = make_case(rng, queue)
            outcome, text = conn.run_case(case, settle)
            report.cases += 1
            report.bad_frames += case.bad_frames
            report.malformed_frames += case.malformed_frames
            report.bytes_sent += len(case.data)
            report.outcomes[(case.kind, outcome)] += 1
            report.results.append(CaseResult(number, index, case.kind, outcome, text))
            why = judge(case, outcome, text, is_reference)
            if why:
                report.failures.append(f"connection {number}, case {index}: {why}")
            if outcome[0] == "connection" and outcome[1] != 501 and not is_reference \
                    and not conn.closed_after_close_ok(timeout):
                report.failures.append(f"connection {number}, case {index}: {case.kind}: the socket stayed "
                                       f"open after connection.close-ok")
            if not conn.open or outcome[0] not in ("served", "channel") or not case.keeps_state:
                return
    finally:
        conn.close()


def run(broker, cases: int, seed: int, *, per_connection: int = 10, round_trip_every: int = 500,
        durable_messages: int = 20, restart: bool = False, timeout: float = 5.0, settle: float = 0.0,
        is_reference: bool = False, stderr_text: Callable[[], str] | None = None,
        progress: Callable[[Report], None] | None = None) -> Report:
    """Fuzz a started broker with `cases` cases; the report. `broker` has host, port, user, password,
    is_running() and restart()."""
    report = Report(broker.kind, seed)
    started = time.monotonic()
    parameters = pika_parameters(broker.host, broker.port, broker.user, broker.password)
    bodies = durable_bodies(seed, durable_messages)
    put_durable(parameters, bodies)
    report.durable_sent = len(bodies)
    number = 0
    while report.cases < cases:
        run_connection(broker.host, broker.port, broker.user, broker.password, seed, number, per_connection,
                       timeout, settle, is_reference, report, cases - report.cases)
        number += 1
        if number % round_trip_every == 0:
            problem = round_trip(parameters, number)
            report.round_trips += 1
            if problem:
                report.failures.append(problem)
            if progress is not None:
                progress(report)
        if not broker.is_running():
            report.broker_alive = False
            report.failures.append(f"the broker is not running after connection {number}")
            break
        if len(report.failures) > 200:
            report.failures.append("stopped after 200 failures")
            break
    if report.broker_alive:
        problem = round_trip(parameters, number)
        report.round_trips += 1
        if problem:
            report.failures.append(problem)
        checks = [("after the last case", None)] + ([("after a restart", broker.restart)] if restart else [])
        for when, action in checks:
            if action is not None:
                action()
            problem = count_durable(parameters, bodies)
            report.durable_checks.append(f"{when}: {problem or f'{len(bodies)} of {len(bodies)} intact'}")
            if problem:
                report.failures.append(f"durable data {when}: {problem}")
    if stderr_text is not None:
        report.log_lines = [line for line in stderr_text().splitlines() if any(w in line for w in LOG_WORDS)]
        report.failures += [f"broker log: {line}" for line in report.log_lines[:20]]
    report.seconds = time.monotonic() - started
    return report


def compare(ours: Report, theirs: Report) -> Counter[tuple[str, Outcome, Outcome]]:
    """Cases both brokers ran (same connection, same place) where they answered differently, counted by
    (kind, our outcome, their outcome)."""
    theirs_by_place = {(r.connection, r.index): r for r in theirs.results}
    differences: Counter[tuple[str, Outcome, Outcome]] = Counter()
    for result in ours.results:
        other = theirs_by_place.get((result.connection, result.index))
        if other is not None and other.kind == result.kind and other.outcome != result.outcome:
            differences[(result.kind, result.outcome, other.outcome)] += 1
    return differences


def agreement(ours: Report, theirs: Report) -> tuple[int, int]:
    """(cases both ran at the same place, of which answered alike)."""
    theirs_by_place = {(r.connection, r.index): r for r in theirs.results}
    both = same = 0
    for result in ours.results:
        other = theirs_by_place.get((result.connection, result.index))
        if other is not None and other.kind == result.kind:
            both += 1
            same += other.outcome == result.outcome
    return both, same
