"""The steps of a trace as data, for `--json` and for the marks on a trace: each step an object (who
acted, the action, each frame with its fields), and which step does the harm.

A trace that ends where a property fails is a shortest path to the first state where it fails (the
engines search breadth first), so the state before its last explored edge is still sound: the first step
of that edge (the steps fused into it by a reduction only read replies that change nothing) is the one
where the harm is done: the message lost, processed the second time, overtaken. A lasso (a loop or a wait
for ever) does its harm in the loop, which the trace marks as such.
"""
from __future__ import annotations

import ast
import re
from typing import Any

from rabbitproof.spark_check.results import Trace, TraceStep
from rabbitproof.spec.frames import msg_name

_SPEC_FRAME = re.compile(r"^c(\d+) (client->broker|broker->client) ([a-z]+\.[a-z-]+)\((.*)\)$")
_PLAIN_FRAME = re.compile(r"^(.+?) -> (.+?): (.*)$")
_FIELD = re.compile(r"\s*([A-Za-z_]\w*)=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^,]*)\s*(?:,|$)")


def field_value(text: str) -> Any:
    """A frame field's value as JSON data: numbers, booleans and quoted strings as such, a name (a
    message ``m0.1``, a queue ``q0``) as its text."""
    if text in ("True", "False"):
        return text == "True"
    if text == "None":
        return None
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if text[:1] in ("'", '"'):
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return text
    return text


def frame_fields(arguments: str) -> dict[str, Any] | None:
    """``ch=1, delivery_tag=3, redelivered=True`` as a dict; None if it does not read as NAME=VALUE pairs."""
    fields: dict[str, Any] = {}
    at = 0
    while at < len(arguments):
        m = _FIELD.match(arguments, at)
        if m is None or m.end() == at:
            return None
        fields[m.group(1)] = field_value(m.group(2).strip())
        at = m.end()
    return fields


def frame_object(frame: str) -> dict[str, Any]:
    """One frame of a step as data: ``{"connection": "c1", "direction": "broker->client", "method":
    "basic.deliver", "fields": {...}, "text": ...}``; a frame of another shape keeps its text (and the
    ends of a ``A -> B: text`` frame)."""
    m = _SPEC_FRAME.match(frame)
    if m and (fields := frame_fields(m.group(4))) is not None:
        return {"connection": f"c{m.group(1)}", "direction": m.group(2), "method": m.group(3), "fields": fields,
                "text": frame}
    p = _PLAIN_FRAME.match(frame)
    if p:
        return {"from": p.group(1), "to": p.group(2), "text": frame}
    return {"text": frame}


_UNACKED = re.compile(r"conns\[(\d+)\]\.channels\[(\d+)\]\.unacked$")
_HELD = re.compile(r"Unacked\(tag=(\d+),.*?msg=(\d+), redelivered=(True|False)")


def unseen_delivery(step: TraceStep) -> tuple[str, str] | None:
    """A delivery the trace shows no frame of: the broker's to a connection whose client is gone (a
    vanished client's old connection, which no client reads). Its connection and the frame it stands for,
    from what the step changed in the state (the delivery it now holds unacknowledged); None otherwise."""
    if step.frames or step.action_type != "BrokerDeliver":
        return None
    for where, before, after in step.changes:
        m = _UNACKED.search(where)
        held = _HELD.findall(after)
        if m and held and len(held) > len(_HELD.findall(before)):
            tag, msg, redelivered = held[-1]
            return (f"c{m.group(1)}", f"basic.deliver(ch={int(m.group(2)) + 1}, delivery_tag={tag}, "
                                      f"redelivered={redelivered}, msg={msg_name(int(msg))})")
    return None


def harm_step(trace: Trace | None) -> int | None:
    """The number of the step where a counterexample's harm is done: the first step of the trace's last
    explored edge (see the module's docstring); None for a lasso or an empty trace."""
    if trace is None or trace.cycle_start is not None or not trace.steps:
        return None
    last = len(trace.steps) - 1
    while last > 0 and trace.steps[last].fused:
        last -= 1
    return trace.steps[last].number


def step_object(step: TraceStep, harm: int | None = None, loop_from: int | None = None) -> dict[str, Any]:
    """One step as data: its number, actor, action (the class and the words), whether a reduction fused it
    into the step before, whether it repeats for ever (in a lasso), whether it does the harm, its frames,
    and what it changed in the state (with the steps fused after it)."""
    return {"number": step.number, "actor": step.actor, "action": step.action_type, "text": step.action,
            "fused": step.fused, "repeats": loop_from is not None and step.number >= loop_from,
            "harm": step.number == harm, "frames": [frame_object(f) for f in step.frames],
            "changes": [{"where": where, "before": before, "after": after} for where, before, after in step.changes]}


def trace_object(trace: Trace | None, harm_label: str = "") -> dict[str, Any] | None:
    """A trace as data: its steps as objects, where its loop starts (a lasso), the step that does the harm
    and what that harm is, and the final state (the model's own text of it)."""
    if trace is None:
        return None
    harm = harm_step(trace)
    loop_from = None if trace.cycle_start is None else trace.cycle_start + 1
    return {"steps": [step_object(s, harm, loop_from) for s in trace.steps],
            "loop_from": loop_from, "harm_step": harm, "harm": harm_label if harm is not None else None,
            "final_state": trace.final_state}
