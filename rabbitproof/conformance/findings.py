"""What went wrong in a program the broker failed, named the way a broker author reads it: the first frame
the spec cannot explain (its method, the field that differs from what the spec allowed there), the rules
that breaks, and one line saying so ("redelivered is false on a message that was delivered before").

Programs that fail the same way (the same ``Diagnosis.key``) are one finding: the suite shrinks one
program per finding and counts the programs that showed it. A method the broker answers with 540
NOT_IMPLEMENTED, or never answers while its connection is otherwise alive, is a finding of its own kind,
"unsupported", once per method.
"""
from __future__ import annotations

import re
from typing import NamedTuple

from rabbitproof.spec.frames import METHOD_NAMES, frame_text

from rabbitproof.conformance import programs as P
from rabbitproof.conformance.catalogue import family

UNSUPPORTED, REJECTED, NO_ANSWER, ERROR, STOPPED = "unsupported", "rejected", "no answer", "error", "stopped answering"
CORRUPTED = "corrupted"     # an outcome: a message came out with a body no publish carried (`made_up`)
NOT_IMPLEMENTED = 540


class Diagnosis(NamedTuple):
    """One way a broker fails: its kind (rejected, unsupported, error, stopped answering), the key that
    groups programs failing alike, the rules, the method concerned (unsupported: the method the broker
    does not implement), and the statement in a broker author's words."""

    kind: str
    key: tuple
    rules: tuple
    statement: str
    method: str = ""

    @property
    def family(self) -> str:
        if self.rules:
            return family(self.rules[0])
        return {"tx": "TX", "confirm": "PC", "basic": "DS", "queue": "ER", "channel": "ER"}.get(
            self.method.split(".")[0], "ER")


_FRAME = re.compile(r"^(sent|received) ([a-z]+\.[a-z-]+)\((.*)\)$")


def parse(text: str) -> tuple:
    """An observation as frame_text writes it: (direction, method, {field: value text}); method "" when
    it is not a frame."""
    match = _FRAME.match(text)
    if not match:
        return (text.split(" ")[0], "", {})
    fields = {}
    for part in re.split(r", (?=[a-z_]+=)", match.group(3)):
        name, _, value = part.partition("=")
        fields[name] = value
    return match.group(1), match.group(2), fields


def method_of(op) -> str:
    """The AMQP name of the method an op sends: "tx.select" for TxSelect."""
    return METHOD_NAMES[op.METHOD]


def _has(program: P.Program, *kinds) -> bool:
    return any(isinstance(op, kinds) for op in program.ops())


def diagnose(outcome, program: P.Program) -> Diagnosis:
    """What ``outcome`` (of running ``program``; not accepted) says went wrong."""
    if outcome.status == REJECTED:
        return _rejection(outcome.judgement.verdict, program)
    if outcome.status == NO_ANSWER:
        method = unanswered_method(outcome, program)
        return Diagnosis(UNSUPPORTED, (UNSUPPORTED, method), (), f"{method} is never answered (not implemented?)",
                         method)
    if outcome.status == CORRUPTED:
        if REFUSED in outcome.explanation:
            return Diagnosis(REJECTED, (REJECTED, ("PC-9",), CORRUPTED), ("PC-9",),
                             "the body of a publish refused with 404 (its exchange does not exist) still reaches a "
                             "queue, joined to another message's: a duplicated, corrupted message")
        return Diagnosis(REJECTED, (REJECTED, ("RT-1",), CORRUPTED), ("RT-1",),
                         "a message comes out with a body no publish carried (a corrupted message)")
    if outcome.status == "unsupported":
        return Diagnosis(ERROR, (ERROR, "inexpressible"), ("ER-2",),
                         f"the broker answered what the spec cannot express: {outcome.explanation}")
    if outcome.status == STOPPED:
        return Diagnosis(STOPPED, (STOPPED,), ("ER-3",), "the broker stopped answering every connection")
    why = re.sub(r"\d+", "N", outcome.explanation.split(":")[0])
    return Diagnosis(ERROR, (ERROR, why), ("ER-2",), outcome.explanation.split(";")[0])


REFUSED = "refused with 404 NOT_FOUND (its exchange does not exist)"


def made_up(body: bytes, where: str, run) -> str:
    """The explanation of a message whose ``body`` no publish of ``run`` (targets.Run) carried: where it
    came, and which publishes' bodies it joins, when it is made of some (each part named by its
    destination, a publish to the missing exchange as REFUSED)."""
    queues = {name: q for q, name in run.names.items() if isinstance(q, int)}
    published = []             # (body, what the publish was)
    for slot in run.slots:
        for log in slot:
            for entry in log:
                if entry.kind == "method" and entry.direction == "sent" and entry.method.name == "Basic.Publish":
                    m = entry.method
                    what = (REFUSED if m.exchange == run.names["exchange"] else f"to {m.exchange}" if m.exchange
                            else f"to q{queues.get(m.routing_key, '?')}")
                    published.append((bytes(entry.body or b""), what))
    parts = _joined(body, published)
    made_of = (": the bodies of " + ", then ".join(f"a publish {what}" for what in parts) + " joined") if parts else ""
    return f"a message no publish carried came out ({where}), its body {body!r}{made_of}"


def _joined(body: bytes, published: list) -> list:
    """The publishes (what each was) whose bodies, one after another, make ``body``; [] when none do."""
    if not body:
        return []
    for part, what in published:
        if body.startswith(part) and part:
            rest = body[len(part):]
            if not rest:
                return [what]
            more = _joined(rest, published)
            if more:
                return [what, *more]
    return []


def unanswered_method(outcome, program: P.Program) -> str:
    """The method a "no answer" waited for: the last synchronous method of the step the run stopped at."""
    match = re.search(r"after step (\d+)", outcome.explanation)
    if match:
        step = program.steps[int(match.group(1)) - 1]
        waits = [op for op in getattr(step, "ops", ()) if isinstance(op, P.SYNCHRONOUS)]
        if waits:
            return method_of(waits[-1])
    return "a method"


def _rejection(verdict, program: P.Program) -> Diagnosis:
    observation = verdict.observation
    got = parse(f"{observation[0]} {frame_text(observation[1])}") if observation[0] in ("sent", "received") \
        else (observation[0], "", {})
    allowed = [parse(text) for text in verdict.allowed]
    direction, method, fields = got
    same = [a for a in allowed if a[1] == method and a[0] == direction]
    methods = {a[1] for a in allowed}

    def found(rules, statement, *key):
        # Grouped by the rules and what went wrong (a field, a refusal missing, ...), not by the frame's
        # values: the same break shows with other tags, counts and messages in other programs.
        where = (method,) if rules == ("ER-2",) else ()
        return Diagnosis(REJECTED, (REJECTED, tuple(rules), *where, *key), tuple(rules), statement)

    code = fields.get("reply_code")
    if direction == "received" and "ch" in fields and any(
            a[:2] == ("received", "channel.close-ok") and a[2].get("ch") == fields["ch"] for a in allowed) and not any(
            a[2].get("ch") == fields["ch"] for a in same):
        # The client closed this channel and the spec allows nothing like this frame on it: a reply, or a
        # close of the broker's own for a method sent after the client's channel.close, answers past it.
        return found(("ER-1",), f"the channel answers {method} after the client's channel.close", "after-close")
    if method in ("connection.close", "channel.close") and code == str(NOT_IMPLEMENTED) and not same:
        answers = [a[1] for a in allowed if a[1].endswith("-ok")]
        what = answers[0][:-3] if answers else "a method"
        return Diagnosis(UNSUPPORTED, (UNSUPPORTED, what), (), f"{what} is not implemented (answered 540 "
                                                                f"NOT_IMPLEMENTED)", what)
    if same:
        differing = min((tuple(k for k in fields if a[2].get(k) != fields[k]) for a in same), key=len)
        want = next(a[2] for a in same if tuple(k for k in fields if a[2].get(k) != fields[k]) == differing)
        shown = f"{method}({', '.join(f'{k}={fields[k]}' for k in differing)})"
        if "msg" in differing:      # another message than the head: its other fields are not comparable
            return found(("RQ-1",), f"messages come out of queue order: {method} gives {fields['msg']} where "
                                    f"{want.get('msg')} is at the head of the queue", "msg")
        if "redelivered" in differing:
            if fields["redelivered"] == "False":
                return found(("RQ-2",), f"redelivered is false on a message that was delivered before: {shown}",
                             "redelivered")
            return found(("RQ-2",), f"redelivered is true on a first delivery: {shown}", "redelivered")
        if "delivery_tag" in differing and method in ("basic.ack", "basic.nack"):
            return found(("PC-3",), f"a confirm carries tag {fields['delivery_tag']} where "
                                    f"{want.get('delivery_tag')} was due", "delivery_tag")
        if "delivery_tag" in differing:
            return found(("DT-1",), f"delivery tags do not count up from 1 on each channel: {method} with tag "
                                    f"{fields['delivery_tag']} where {want.get('delivery_tag')} was due",
                         "delivery_tag")
        if "message_count" in differing:
            return found(("DS-2",), f"basic.get-ok's message_count is {fields['message_count']}, not the "
                                    f"{want.get('message_count')} messages left in the queue", "message_count")
        if "reply_code" in differing:
            owed = _owed_refusal(want.get("text", ""), want.get("reply_code", ""))
            if owed is not None:        # the close the spec owed refuses one method: its rule, beside ER-2
                rules, what = owed
                return found(("ER-2", *rules), f"{method} with reply code {code} where AMQP 0-9-1 requires "
                                               f"{want.get('reply_code')} ({what})", "reply_code", code)
            return found(("ER-2",), f"{method} with reply code {code} where AMQP 0-9-1 requires "
                                    f"{want.get('reply_code')}", "reply_code", code)
        return found(("ER-2",), f"{shown}, where the spec allows {want}", *differing)
    closes = [a for a in allowed if a[1] in ("channel.close", "connection.close") and a[0] == "received"]
    if closes and method not in ("channel.close", "connection.close"):
        want = closes[0][2].get("reply_code", "")
        owed = _owed_refusal(closes[0][2].get("text", ""), want)
        if owed is not None:
            rules, what = owed
            return found(rules, f"{what} is accepted, not refused with {want}", "unrefused")
        shown = f"{method} on the wire" if method else f"the broker is {direction}"
        return found(("ER-1",), f"the broker goes on ({shown}) where the spec closes with {want} "
                                f"{closes[0][1]}", "unrefused", want)
    if "channel.close-ok" in methods and direction == "received":
        return found(("ER-1",), f"the channel answers {method} after the client's channel.close", "after-close")
    if direction == "received" and method in ("basic.ack", "basic.nack") and not any(
            a[1] in ("basic.ack", "basic.nack") for a in allowed):
        return found(("PC-1",), f"a publish is confirmed ({method}) on a channel not in confirm mode (a channel "
                                f"starts without it)", "unexpected")
    if method == "basic.get-empty" and "basic.get-ok" in methods:
        if _has(program, P.Qos):
            return found(("PF-4", "DS-2"), "basic.get answers get-empty while a message is ready and the prefetch "
                                           "is full: basic.get is not limited by the prefetch", "empty")
        return found(("DS-2",), "basic.get answers get-empty while a message is ready", "empty")
    if method == "basic.deliver":
        rules = ("PF-1", "PF-3") if _has(program, P.Qos) else ("DS-1",)
        return found(rules, "a message is delivered to a consumer that the spec says has no room or no message "
                            "to take", "unexpected")
    if method == "basic.get-ok":
        rules = ("TX-2",) if _has(program, P.TxSelect) else ("ACK-1", "AM-2")
        return found(rules, "basic.get gives a message the queue should not hold (settled, dropped or not "
                            "committed)", "unexpected")
    if method == "basic.return":
        return found(("RT-3",), "a basic.return for a message that was routed or not mandatory", "unexpected")
    if method in ("channel.close", "connection.close"):
        return found(("ER-2",), f"the broker closes with {code} where the spec allowed: "
                                f"{'; '.join(verdict.allowed[:2])}", code)
    if direction in ("quiet", "lost", "connect") or not method:
        owed = [a[1] for a in allowed if a[0] == "received"]
        if direction == "lost":
            return found(("ER-2",), "the broker drops a connection without connection.close", "lost")
        return found(("ER-2",), f"the broker stays silent where it owes {owed[0] if owed else 'a reply'}",
                     "silent", owed[0] if owed else "")
    return found(("ER-2",), f"{method} where the spec allowed: {'; '.join(verdict.allowed[:2])}", "unexpected")


def _owed_refusal(text: str, code: str) -> tuple[tuple, str] | None:
    """The refusal a close the spec owed stands for, read from the spec's own reply text: (its rules, what
    is refused, in words); None when the text names none of them."""
    if "delivery tag" in text:
        return ("ACK-4",), "a settlement of a delivery tag that is not outstanding"
    if "not transactional" in text:
        return ("TX-10",), "tx.commit or tx.rollback on a channel that is not transactional"
    if "exchange" in text and code == "404":
        return ("PC-9",), "a publish to an exchange that does not exist"
    return None


# What AMQP 0-9-1 leaves open and RabbitMQ 3.10.8 decides one way: the standard dialect takes either
# (docs/reference/conformance.md lists them). Each is (the method the client sent, the reply RabbitMQ
# gives, the reply codes the standard also allows, why).
OPEN_IN_AMQP = (
    ("queue.delete", "queue.delete-ok", ("404",),
     "queue.delete of a queue that does not exist answered 404 NOT_FOUND (AMQP 0-9-1's must-exist rule; "
     "RabbitMQ 3.10.8 answers delete-ok)"),
    ("queue.declare", "channel.close", ("405", "406"),
     "a redeclare with another exclusive flag refused with another channel error than RabbitMQ 3.10.8's 405 "
     "(AMQP 0-9-1 asks only for a channel exception)"),
)


def allowed_difference(outcome, program: P.Program) -> str:
    """For a rejection, the difference AMQP 0-9-1 allows that it is ("" when it is none): the broker
    closed the channel where RabbitMQ answers otherwise, in a case AMQP 0-9-1 leaves open."""
    if outcome.status != REJECTED:
        return ""
    verdict = outcome.judgement.verdict
    observation = verdict.observation
    if observation[:1] != ("received",):
        return ""
    direction, method, fields = parse(f"received {frame_text(observation[1])}")
    if method != "channel.close":
        return ""
    pending: list = []      # the methods the channel sent and has no answer to yet
    for earlier in outcome.judgement.recording.observations[verdict.conn][:verdict.index]:
        if earlier[0] not in ("sent", "received") or earlier[1].channel != observation[1].channel:
            continue
        name = parse(f"{earlier[0]} {frame_text(earlier[1])}")[1]
        if earlier[0] == "sent":
            pending.append(name)
        elif name == "channel.open-ok":
            pending = []
        elif name.endswith("-ok") and name[:-3] in pending:
            pending.remove(name[:-3])
    allowed = [parse(text) for text in verdict.allowed]
    for asked, rabbitmq_reply, codes, why in OPEN_IN_AMQP:
        if asked not in pending or fields.get("reply_code") not in codes:
            continue
        replies = [a for a in allowed if a[0] == "received" and a[1] == rabbitmq_reply]
        if rabbitmq_reply == "channel.close":
            replies = [a for a in replies if a[2].get("reply_code") in codes]
        if replies:
            return why
    return ""
