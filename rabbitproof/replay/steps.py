"""An execution's steps read back from their text: the form `rabbitproof check` prints and saves in its
`--json` document (``"7. [client c0.ch1] publish ... | frames: c0 client->broker basic.publish(ch=1, ...)"``),
which is also what ``TraceStep.text()`` gives, so a saved answer and one found in this process are read
alike."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_STEP = re.compile(r"^\s*(\d+)\.\s+\[([^\]]*)\]\s+(.*?)(?:\s+\|\s+frames:\s+(.*))?$")
_FRAME = re.compile(r"^c(\d+) (client->broker|broker->client) ([a-z-]+\.[a-z-]+)\((.*)\)$")
_FIELD = re.compile(r"(\w+)=('(?:[^'\\]|\\.)*'|[^,]*)")
_ACTOR = re.compile(r"^client c(\d+)(?:\.ch(\d+))?$")


class StepError(ValueError):
    """A step whose text cannot be read; the message quotes it."""


@dataclass(frozen=True)
class Frame:
    """One frame a step puts on the wire: its connection, direction, the spec's method name and fields."""

    conn: int
    sent_by_client: bool
    method: str
    fields: tuple[tuple[str, Any], ...]

    def get(self, name: str, default: Any = None) -> Any:
        return dict(self.fields).get(name, default)

    def text(self) -> str:
        inside = ", ".join(f"{k}={v!r}" if isinstance(v, str) and k == "text" else f"{k}={v}"
                           for k, v in self.fields)
        return f"{self.method}({inside})"

    def wire(self) -> str:
        """The frame as the step's text shows it: ``c0 client->broker confirm.select(ch=1)``."""
        return f"c{self.conn} {'client->broker' if self.sent_by_client else 'broker->client'} {self.text()}"


@dataclass(frozen=True)
class Step:
    """One step of an execution: its number, who acts (``client c1.ch1``, ``broker``, ``network``,
    ``disk``), what it does, and its frames."""

    number: int
    actor: str
    action: str
    frames: tuple[Frame, ...]
    raw: str = ""

    @property
    def client(self) -> tuple[int, int] | None:
        """(connection, channel) of a client's step (channel 0 for a connection-level one), else None."""
        m = _ACTOR.match(self.actor)
        return (int(m.group(1)), int(m.group(2) or 0)) if m else None

    def text(self) -> str:
        """The step as the execution printed it."""
        return self.raw or f"{self.number}. [{self.actor}] {self.action}"


def _value(text: str) -> Any:
    text = text.strip()
    if text in ("True", "False"):
        return text == "True"
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return text[1:-1].replace("\\'", "'")
    return text


def parse_frame(text: str) -> Frame:
    m = _FRAME.match(text.strip())
    if not m:
        raise StepError(f"cannot read the frame {text!r}")
    conn, direction, method, inside = m.groups()
    fields = tuple((k, _value(v)) for k, v in _FIELD.findall(inside))
    return Frame(int(conn), direction == "client->broker", method, fields)


def parse_step(text: str) -> Step:
    """A step from its one-line text; StepError if it is not one."""
    m = _STEP.match(text)
    if not m:
        raise StepError(f"cannot read the step {text!r}")
    number, actor, action, frames = m.groups()
    action = re.sub(r"\s+\(fused(?: into the start)?\)$", "", action)
    parsed = tuple(parse_frame(f) for f in re.split(r";\s+(?=c\d+ )", frames)) if frames else ()
    return Step(int(number), actor.strip(), action.strip(), parsed, text.strip())


def step_from_object(step: Any) -> Step:
    """A step from its object in a `check --json` document (``{"number", "actor", "text", "frames": [{"text"}]}``,
    docs/reference/json-output.md); StepError if it is not one."""
    if not isinstance(step, dict) or not isinstance(step.get("number"), int) or not isinstance(step.get("frames"), list):
        raise StepError(f"cannot read the step {step!r}")
    frames = tuple(parse_frame(str(f.get("text", ""))) if isinstance(f, dict) else parse_frame(str(f))
                   for f in step["frames"])
    line = f"{step['number']}. [{step.get('actor', '')}] {step.get('text', '')}"
    if frames:
        line += " | frames: " + "; ".join(f.wire() for f in frames)
    return Step(step["number"], str(step.get("actor", "")), str(step.get("text", "")), frames, line)


def from_trace(trace: Any) -> tuple[Step, ...]:
    """The steps of a ``spark_check.results.Trace`` (an answer found in this process)."""
    return tuple(parse_step(s.text()) for s in trace.steps)
