"""Shared helpers for the spec tests (tests/test_spec_*.py): configurations for trace checking, and
assertions that a hand-written trace is accepted, or rejected at a marked observation.

A rejected trace marks the observation the checker must stop at with a trailing ``# REJECTED``
comment (``trace.parse`` drops it); ``rejected_at`` then asserts that the Verdict names that
observation (its connection, its 1-based index and its text) and lists what the spec allowed there.
This module holds no tests of its own.
"""
from __future__ import annotations

from pathlib import Path

from rabbitproof.spec import trace
from rabbitproof.spec.configs import Config
from rabbitproof.spec.roles import QueueSpec

TRACES = Path(__file__).parent / "traces"

# A generous configuration: budgets large enough that no budget decides a hand-written trace.
CFG = Config("t", "trace", connections=2, channels=2, messages=9, requeues=9, bad=9, crashes=0,
             queues=(QueueSpec(durable=True),))


def cfg(**changes) -> Config:
    """CFG with some fields changed (queues, bindings, crashes, failures, ...)."""
    values = dict(name="t", description="trace", connections=2, channels=2, messages=9, requeues=9,
                  bad=9, crashes=0, queues=(QueueSpec(durable=True),))
    values.update(changes)
    return Config(**values)


MARK = "# REJECTED"


def marked(text: str) -> tuple[int, int, str]:
    """The connection, the 0-based index among that connection's observations, and the observation
    text (without ``cN``) of the line marked ``# REJECTED``."""
    counts: dict = {}
    found = None
    for line in text.splitlines():
        body = line.split(MARK)[0].strip() if MARK in line else line.strip()
        if not body or body.startswith("#"):
            continue
        conn_part, rest = body.split(None, 1)
        c = int(conn_part[1:])
        if MARK in line:
            assert found is None, "more than one line is marked # REJECTED"
            found = (c, counts.get(c, 0), rest.strip())
        counts[c] = counts.get(c, 0) + 1
    assert found is not None, "no line is marked # REJECTED"
    return found


def parse(text: str) -> dict:
    """The observations of a hand-written trace (``trace.parse``)."""
    return trace.parse(text)


def accepted(text: str, config: Config = CFG) -> trace.Verdict:
    """Check that the trace is accepted; return the Verdict."""
    verdict = trace.check(parse(text), config)
    assert verdict.ok, verdict.explain()
    assert verdict.explain().startswith("accepted: all ")
    return verdict


def rejected_at(text: str, allowed: tuple = (), config: Config = CFG, exact: bool = False) -> trace.Verdict:
    """Check that the trace is rejected at the line marked ``# REJECTED``, and that every entry of
    ``allowed`` is among what the spec allowed there; with ``exact``, the frames the client could
    have received there are exactly the ``received ...`` entries of ``allowed``."""
    c, index, obs_text = marked(text)
    verdict = trace.check(parse(text), config)
    explanation = verdict.explain()
    assert not verdict.ok, f"expected a rejection at c{c} observation {index + 1} ({obs_text})"
    assert (verdict.conn, verdict.index) == (c, index), explanation
    assert trace.observation_text(verdict.observation) == obs_text, explanation
    assert f"connection c{c}, observation {index + 1} ({obs_text}) has no explanation" in explanation
    for entry in allowed:
        assert entry in verdict.allowed, explanation
        assert entry in explanation
    if exact:
        could_receive = sorted(a for a in verdict.allowed if a.startswith("received "))
        assert could_receive == sorted(a for a in allowed if a.startswith("received ")), explanation
    return verdict


def unmark(text: str) -> str:
    """The trace without its ``# REJECTED`` marker (to check a prefix is accepted)."""
    return text.replace(MARK, "")


def upto(text: str) -> str:
    """The trace up to, not including, the line marked ``# REJECTED``: what came before must be accepted."""
    out = []
    for line in text.splitlines():
        if MARK in line:
            break
        out.append(line)
    return "\n".join(out)


def pub(n: int, c: int = 0, ch: int = 1, key: str = "q0", mandatory: bool = False,
        persistent: bool = False, exchange: str = "") -> str:
    """The trace line of connection c's n-th publish (message m<c>.<n>)."""
    return (f"c{c} sent basic.publish(ch={ch}, exchange={exchange!r}, routing_key={key!r}, "
            f"mandatory={mandatory}, persistent={persistent}, msg=m{c}.{n})")


def close_406(c: int, ch: int, tag: int) -> str:
    """The two lines of a 406 unknown-delivery-tag channel error and the client's close-ok (ACK-4)."""
    return (f"c{c} received channel.close(ch={ch}, reply_code=406, "
            f"text='PRECONDITION_FAILED - unknown delivery tag {tag}')\n"
            f"c{c} sent channel.close-ok(ch={ch})")


def client_close(c: int, ch: int) -> str:
    """The two lines of a channel closed by the client."""
    return (f"c{c} sent channel.close(ch={ch}, reply_code=200, text='OK')\n"
            f"c{c} received channel.close-ok(ch={ch})")
