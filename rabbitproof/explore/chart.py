"""Message-sequence charts of traces, as self-contained SVG files (``--chart DIR``).

A lifeline per client connection, the broker and the disk; time runs down, one row per step. A frame is
an arrow from the step that wrote it to the step that read it: a client's frame from its write to the
``BrokerTakeFrame`` of its channel, a broker's frame from the broker step that wrote it to the client's
``ClientReceive`` (frames of one channel are read in order, so the n-th frame written on a channel is the
n-th read there). A frame never read ends half-way, marked "in flight". Steps without frames are boxes
on their actor's lifeline; faults (crash, restart, lost connection, a queue failing) are red dashed lines
across the lifelines they hit. Models whose frames read ``A -> B: text`` (the tests' toy model) get a
lifeline per name and one horizontal arrow per frame.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Sequence

from rabbitproof.spark_check.results import ExplorationResult, Trace

from rabbitproof.explore.steps import harm_step, unseen_delivery

_SPEC_FRAME = re.compile(r"^c(\d+) (client->broker|broker->client) (.*)$")
_PLAIN_FRAME = re.compile(r"^(.+?) -> (.+?): (.*)$")
_CHANNEL = re.compile(r"\(ch=(\d+)")
_TAKE = re.compile(r"c(\d+)\.ch(\d+)")
_CONN = re.compile(r"\bc(\d+)\b")
_AGAIN = re.compile(r"^publish (m\d+\.\d+) again")
FAULTS = {"BrokerCrash", "BrokerRestart", "NetworkLoss", "ClientVanish", "BrokerChannelError", "BrokerQueueFail",
          "ConsumerCrash"}
# Steps after which what was in flight either way on a connection is gone (all connections for a crash):
# a frame written before them is never read, and the next read on that channel is of a later frame.
_DROPS = {"BrokerCrash", "NetworkLoss", "ClientVanish"}

COLUMN, ROW, TOP, LEFT = 230, 40, 70, 60


@dataclass
class Arrow:
    """A frame: written on ``source`` at row ``start``, read on ``target`` at row ``end`` (None: never)."""

    source: str
    target: str
    label: str
    start: int
    end: int | None = None
    note: str = ""          # said after the label: "m0.1 again" for a republished message
    frame: str = ""         # the whole frame as the trace gives it (connection, direction, every field)


@dataclass
class Chart:
    """What the SVG draws: lifelines in order, arrows, boxes (row, lifeline, text) and faults.
    ``shown`` gives a lifeline the name a person knows it by (``c0`` -> ``app``)."""

    title: str
    lifelines: list[str] = field(default_factory=list)
    shown: dict[str, str] = field(default_factory=dict)
    arrows: list[Arrow] = field(default_factory=list)
    boxes: list[tuple[int, str, str]] = field(default_factory=list)
    faults: list[tuple[int, list[str], str]] = field(default_factory=list)
    rows: int = 0
    loop_from: int | None = None        # a lasso's first repeated row: rows loop_from..rows repeat for ever
    notes: list[tuple[int, str]] = field(default_factory=list)     # (row, a line of text across the chart)
    column: int = COLUMN                # pixels between lifelines (wider for long frames)
    harm_row: int | None = None         # the step that does the harm (rabbitproof.explore.steps.harm_step)
    harm: str = ""                      # what happens there: "a message is processed the second time"
    old: dict[str, tuple[str, int]] = field(default_factory=dict)   # a vanished client's old connection ->
                                                                    # (the client's connection, the vanish's row)

    def lifeline(self, name: str) -> str:
        if name not in self.lifelines:
            self.lifelines.append(name)
        return name


def _actor_lifeline(actor: str) -> str:
    """The lifeline of an actor: ``client c0.ch1`` -> ``c0``; broker, disk, network as they are."""
    m = _CONN.search(actor)
    return f"c{m.group(1)}" if actor.startswith("client") and m else actor


def old_connections(trace: Trace) -> dict[str, tuple[str, int]]:
    """The connections a vanished client left behind: a connection that a frame or the broker's heartbeat
    timeout names but no client step acts on, after a ``ClientVanish``. The broker moves an old connection
    to a slot of its own when its client vanishes, so the n-th such slot to appear is the n-th vanish's:
    old connection -> (the client's connection, the vanish's row)."""
    vanishes = [(row, f"c{m.group(1)}") for row, s in enumerate(trace.steps, start=1)
                if s.action_type == "ClientVanish" and (m := _CONN.search(s.action))]
    if not vanishes:
        return {}
    acting = {f"c{m.group(1)}" for s in trace.steps if s.actor.startswith("client") and (m := _CONN.search(s.actor))}
    first_seen: dict[str, int] = {}
    for row, s in enumerate(trace.steps, start=1):
        named = [f"c{m.group(1)}" for f in s.frames if (m := _SPEC_FRAME.match(f))]
        if s.action_type == "BrokerDetect" and (m := _CONN.search(s.action)):
            named.append(f"c{m.group(1)}")
        if (unseen := unseen_delivery(s)) is not None:
            named.append(unseen[0])
        for conn in named:
            if conn not in acting and row > vanishes[0][0]:
                first_seen.setdefault(conn, row)
    ordered = sorted(first_seen, key=lambda c: (first_seen[c], int(c[1:])))
    return {conn: (client, row) for conn, (row, client) in zip(ordered, vanishes)}


def chart_of(title: str, trace: Trace) -> Chart:
    """Lay out ``trace`` as a message-sequence chart."""
    chart = Chart(title, loop_from=None if trace.cycle_start is None else trace.cycle_start + 1)
    spec_like = any(_SPEC_FRAME.match(f) for s in trace.steps for f in s.frames)
    if spec_like:
        chart.old = old_connections(trace)
        conns = sorted({int(m.group(1)) for s in trace.steps for f in s.frames if (m := _SPEC_FRAME.match(f))}
                       | {int(m.group(1)) for s in trace.steps if s.actor.startswith("client") and (m := _CONN.search(s.actor))}
                       | {int(c[1:]) for c in chart.old})
        for c in conns:
            chart.lifeline(f"c{c}")
        chart.lifeline("broker")
        chart.lifeline("disk")
    to_broker: dict[tuple[int, int], list[Arrow]] = {}     # (conn, ch) -> client frames not yet taken
    to_client: dict[tuple[int, int], list[Arrow]] = {}     # (conn, ch) -> broker frames not yet read
    for row, step in enumerate(trace.steps, start=1):
        chart.rows = row
        actor = chart.lifeline(_actor_lifeline(step.actor)) if step.actor not in ("network",) else "network"
        shown = False                   # whether an arrow already shows this step
        if step.action_type == "BrokerTakeFrame" and (m := _TAKE.search(step.action)):
            pending = to_broker.get((int(m.group(1)), int(m.group(2))))
            if pending:
                pending.pop(0).end = row
                shown = True
        if step.action_type == "BrokerDetect" and (m := _CONN.search(step.action)) and f"c{m.group(1)}" in chart.old:
            chart.boxes.append((row, f"c{m.group(1)}", step.action))    # the old connection ends here
            shown = True
        if (unseen := unseen_delivery(step)) is not None and unseen[0] in chart.old:
            chart.arrows.append(Arrow("broker", unseen[0], unseen[1], row, note="(client gone)",
                                      frame=f"{unseen[0]} broker->client {unseen[1]}"))
            shown = True
        for frame in step.frames:
            m = _SPEC_FRAME.match(frame) if spec_like else None
            if m:
                conn, direction, text = int(m.group(1)), m.group(2), m.group(3)
                ch = int(c.group(1)) if (c := _CHANNEL.search(text)) else 0
                client = f"c{conn}"
                if direction == "client->broker":
                    again = _AGAIN.match(step.action) if step.action_type == "Republish" else None
                    arrow = Arrow(client, "broker", text, row, note=f"= {again.group(1)} again" if again else "",
                                  frame=frame)
                    chart.arrows.append(arrow)
                    to_broker.setdefault((conn, ch), []).append(arrow)
                elif step.action_type == "ClientReceive":
                    pending = to_client.get((conn, ch))
                    if pending:
                        pending.pop(0).end = row
                    else:                       # written before the trace could see it: draw it flat
                        chart.arrows.append(Arrow("broker", client, text, row, row, frame=frame))
                    shown = True
                else:
                    arrow = Arrow("broker", client, text, row, frame=frame)
                    chart.arrows.append(arrow)
                    to_client.setdefault((conn, ch), []).append(arrow)
            elif (p := _PLAIN_FRAME.match(frame)):
                chart.arrows.append(Arrow(chart.lifeline(p.group(1)), chart.lifeline(p.group(2)), p.group(3), row, row,
                                          frame=frame))
                shown = True
            else:
                chart.boxes.append((row, actor, frame))
        if step.action_type in _DROPS:
            lost = _CONN.search(step.action) if step.action_type != "BrokerCrash" else None
            for pending in (to_broker, to_client):
                for key in [k for k in pending if lost is None or k[0] == int(lost.group(1))]:
                    del pending[key]            # those arrows stay "in flight": never read
        if step.action_type in FAULTS:
            if step.action_type in ("NetworkLoss", "BrokerChannelError") and (m := _CONN.search(step.action)):
                hit = [f"c{m.group(1)}", "broker"]
            elif step.action_type == "ClientVanish" and (m := _CONN.search(step.action)):
                hit = [f"c{m.group(1)}"]         # the broker has not noticed
            elif step.action_type in ("BrokerQueueFail",):
                hit = ["broker"]
            elif actor != "broker" and actor in chart.lifelines:
                hit = [actor]
            else:
                hit = [name for name in chart.lifelines if name != "disk"] if spec_like else list(chart.lifelines)
            chart.faults.append((row, hit, step.action))
        elif not shown and not step.frames:
            chart.boxes.append((row, actor if actor in chart.lifelines else chart.lifeline(actor), step.action))
    return chart


def _x(chart: Chart, name: str) -> int:
    return LEFT + chart.column // 2 + chart.column * chart.lifelines.index(name)


def _y(row: int) -> int:
    return TOP + ROW * row


def _fit(text: str, width: int) -> str:
    """``text`` cut to about ``width`` pixels of 11px monospace."""
    room = max(8, width // 7)
    return text if len(text) <= room else text[: room - 1] + "…"


_ARG = re.compile(r"^([a-z_]+)=(.*)$")
_SHORT_NAMES = {"delivery_tag": "tag", "consumer_tag": "ctag", "prefetch_count": "prefetch", "routing_key": "key"}
# The fields a label gives up first when it is too long for its arrow: the consumer tag, then the delivery
# tag, the channel, the routing key; the message and the flags that make the point (redelivered, requeue,
# multiple) stay to the last.
_DROPPED_FIRST = ("ctag=", "tag=", "ch=", "key=", "exchange=", "queue=", "prefetch=")


def fitted(label: str, room: int) -> str:
    """``brief(label)`` in about ``room`` characters: the least telling fields dropped first
    (_DROPPED_FIRST), and only then the end cut."""
    words = brief(label).split(" ")
    for prefix in _DROPPED_FIRST:
        if len(" ".join(words)) <= room:
            break
        words = [w for w in words if not w.startswith(prefix)]
    text = " ".join(words)
    return text if len(text) <= room else text[: max(1, room - 1)] + "…"


def brief(label: str) -> str:
    """A frame's label as a person scans it: ``basic.deliver m0.1 tag=3 ctag=1 redelivered`` for
    ``basic.deliver(ch=1, consumer_tag=1, delivery_tag=3, redelivered=True, msg=m0.1)``. The message
    first; a flag by its name when set, left out when not (but ``requeue``, which matters either way);
    empty and zero fields and channel 1 left out. A label of another shape is kept as it is; the SVG's
    tooltip always holds the whole frame."""
    method, paren, rest = label.partition("(")
    if not paren or not rest.endswith(")"):
        return label
    parts, first = [], []
    for arg in rest[:-1].split(", "):
        m = _ARG.match(arg)
        if m is None:
            return label
        name, value = m.groups()
        if name == "msg":
            first.append(value)
        elif name == "requeue":
            parts.append("requeue" if value == "True" else "no requeue")
        elif value == "True":
            parts.append(name)
        elif value in ("False", "0", "''", '""') or (name == "ch" and value == "1"):
            continue
        else:
            parts.append(f"{_SHORT_NAMES.get(name, name)}={value.strip(chr(39))}")
    return " ".join([method] + first + parts)


CHAR = 7                   # pixels of a character of 11px monospace
LEGEND_LINE = 16


def shown_name(chart: Chart, name: str) -> str:
    """A lifeline's name for people: the caller's (``app (c0)``), or for a vanished client's old connection
    ``old app (c2)``, or the trace's own."""
    if name in chart.shown:
        return chart.shown[name]
    if name in chart.old:
        client = chart.old[name][0]
        owner = re.sub(r" \(c\d+\)$", "", chart.shown.get(client, client))
        return f"old {owner} ({name})"
    return name


def legend_lines(chart: Chart, described: dict[str, str]) -> list[tuple[str, str]]:
    """The legend: every lifeline with what it stands for, then what the marks mean; (colour, text)."""
    lines = [("#000", "Lifelines:")]
    for name in chart.lifelines:
        if name in chart.old:
            client, row = chart.old[name]
            what = (f"the old connection of {shown_name(chart, client)}, left open when its client vanished at "
                    f"step {row}: the broker still writes to it until its heartbeat timeout")
        elif name == "broker":
            what = "the broker"
        elif name == "disk":
            what = "the broker's disk (what an fsync writes survives a crash)"
        elif name == "network":
            what = "the network"
        else:
            what = described.get(name, "a client connection" if _CONN.fullmatch(name) else name)
        lines.append(("#000", f"{shown_name(chart, name)}: {what}"))
    lines.append(("#1f3b73", "Arrows: a frame, from the step that wrote it to the step that read it (\"in flight\": "
                             "never read); hover for the whole frame"))
    if chart.faults:
        lines.append(("#c00", "✕ red dashed line: a fault, across what it hits"))
    if chart.harm_row is not None:
        lines.append(("#c00", f"red band, step {chart.harm_row}: here {chart.harm}"))
    if chart.loop_from is not None:
        lines.append(("#7a3db8", f"loop frame: steps {chart.loop_from}–{chart.rows} repeat for ever"))
    return lines


def render_svg(chart: Chart, described: dict[str, str] | None = None) -> str:
    """The chart as one self-contained SVG document (no scripts, no external references); ``described``
    says what each lifeline stands for in the legend (``{"c0": "publisher 'app'"}``)."""
    legend = legend_lines(chart, described or {})
    lanes = LEFT + chart.column * max(1, len(chart.lifelines))
    harm_words = f"◀ here {chart.harm}" if chart.harm_row is not None else ""
    width = max(lanes + 30 + CHAR * len(harm_words), 30 + CHAR * max(len(text) for _, text in legend),
                10 + 8 * len(chart.title))
    legend_top = _y(chart.rows + 1) + 10
    height = legend_top + LEGEND_LINE * len(legend) + 10
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="11">',
           "<defs><marker id=\"head\" markerWidth=\"10\" markerHeight=\"8\" refX=\"9\" refY=\"4\" orient=\"auto\">"
           "<path d=\"M0,0 L10,4 L0,8 z\" fill=\"#1f3b73\"/></marker>"
           "<marker id=\"back\" markerWidth=\"10\" markerHeight=\"8\" refX=\"9\" refY=\"4\" orient=\"auto\">"
           "<path d=\"M0,0 L10,4 L0,8 z\" fill=\"#7a3db8\"/></marker></defs>",
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text class="title" x="10" y="20" font-size="14" font-weight="bold">{escape(chart.title)}</text>']
    if chart.harm_row is not None:
        y = _y(chart.harm_row)
        out.append(f'<g class="harm" data-row="{chart.harm_row}"><title>step {chart.harm_row}: here {escape(chart.harm)}'
                   f'</title><rect x="2" y="{y - 15}" width="{width - 4}" height="26" fill="#ffd7d7"/>'
                   f'<text x="{lanes + 10}" y="{y + 4}" fill="#c00" font-weight="bold">{escape(harm_words)}'
                   f'</text></g>')
    for name in chart.lifelines:
        x = _x(chart, name)
        label = shown_name(chart, name)
        out.append(f'<g class="lifeline" data-name="{escape(name)}"><title>{escape(label)}</title>'
                   f'<rect x="{x - 95}" y="32" width="190" height="22" rx="4" fill="#e8eef8" stroke="#1f3b73"/>'
                   f'<text x="{x}" y="47" text-anchor="middle" font-weight="bold">{escape(_fit(label, 180))}</text>'
                   f'<line x1="{x}" y1="54" x2="{x}" y2="{legend_top - 14}" stroke="#888" stroke-dasharray="4 3"/></g>')
    if chart.loop_from is not None:
        out.append(_loop_frame(chart, lanes + 10))
    for row in range(1, chart.rows + 1):
        mark = ' fill="#c00" font-weight="bold"' if row == chart.harm_row else ' fill="#888"'
        out.append(f'<text class="step" x="8" y="{_y(row) + 4}"{mark}>{row}.</text>')
    for i, a in enumerate(chart.arrows):
        x1, x2 = _x(chart, a.source), _x(chart, a.target)
        y1 = _y(a.start)
        y2 = _y(a.end) if a.end is not None else y1 + ROW // 2
        if a.end is None:
            x2 = x1 + (x2 - x1) * 3 // 4
        # A label may run past the arrow's end, over the next lifeline (its halo keeps it readable): one
        # step a row, so no other label shares its line.
        span = max(abs(_x(chart, a.target) - x1), 2 * chart.column - 20) - 10
        note = f" {a.note}" if a.note else ""
        method, _, fields = fitted(a.label, max(8, span // 7 - len(note))).partition(" ")
        # Above the arrow's higher end, where it is written: the arrow only goes down from there, so the
        # label never runs across it; a white halo keeps it readable over other lifelines and arrows.
        label_x, label_y = min(x1, x2) + 10, y1 - 5
        read = f"read at step {a.end}" if a.end is not None else "never read"
        out.append(f'<g class="frame" data-order="{i}" data-from="{escape(a.source)}" data-to="{escape(a.target)}" '
                   f'data-sent="{a.start}" data-read="{a.end if a.end is not None else ""}">'
                   f'<title>{escape(a.label)}\n{escape(a.frame or a.label)}: written at step {a.start}, {read}</title>'
                   f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="#1f3b73" stroke-width="1.4" '
                   f'marker-end="url(#head)"/>'
                   f'<text x="{label_x}" y="{label_y}" paint-order="stroke" stroke="white" stroke-width="3">'
                   f'<tspan font-weight="bold">'
                   f'{escape(method)}</tspan>'
                   f'{escape((" " + fields if fields else "") + note)}'
                   f'</text>'
                   + (f'<text x="{x2 + (6 if x2 > x1 else -6)}" y="{y2 - 3}" fill="#b00" '
                      f'text-anchor="{"start" if x2 > x1 else "end"}">in flight</text>' if a.end is None else "")
                   + "</g>")
    for row, name, text in chart.boxes:
        x = _x(chart, name)
        out.append(f'<g class="step-box" data-row="{row}" data-on="{escape(name)}"><title>{escape(text)}</title>'
                   f'<rect x="{x - 95}" y="{_y(row) - 10}" width="190" height="18" rx="3" fill="#fff8dc" stroke="#c9a227"/>'
                   f'<text x="{x}" y="{_y(row) + 3}" text-anchor="middle">{escape(_fit(text, 180))}</text></g>')
    for row, hit, text in chart.faults:
        xs = [_x(chart, n) for n in hit if n in chart.lifelines] or [LEFT, lanes]
        x1, x2 = min(xs) - 70, max(xs) + 70
        out.append(f'<g class="fault" data-row="{row}" data-hits="{escape(" ".join(hit))}"><title>{escape(text)}</title>'
                   f'<line x1="{x1}" y1="{_y(row)}" x2="{x2}" y2="{_y(row)}" stroke="#c00" stroke-width="2.5" '
                   f'stroke-dasharray="8 4"/>'
                   f'<text x="{x1}" y="{_y(row) - 5}" fill="#c00" font-weight="bold" paint-order="stroke" '
                   f'stroke="white" stroke-width="3">✕ '
                   f'{escape(_CONN.sub(lambda m: shown_name(chart, m.group(0)), text))}</text></g>')
    for row, text in chart.notes:
        out.append(f'<text class="note" x="{LEFT}" y="{_y(row) + 4}" fill="#b00">{escape(text)}</text>')
    out.append(f'<g class="legend" transform="translate(10,{legend_top})">')
    for n, (colour, text) in enumerate(legend):
        weight = ' font-weight="bold"' if n == 0 else ""
        indent = 0 if n == 0 or not text.startswith(tuple(shown_name(chart, l) for l in chart.lifelines)) else 16
        out.append(f'<text x="{indent}" y="{LEGEND_LINE * n + 12}" fill="{colour}"{weight}>{escape(text)}</text>')
    out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _loop_frame(chart: Chart, width: int) -> str:
    """A lasso's repeated rows drawn as a loop: a "loop" frame around them (UML's combined fragment), and
    an arrow in the left margin from its last row back up to its first."""
    first, last = chart.loop_from, chart.rows
    top, bottom = _y(first) - ROW // 2 - 4, _y(last) + ROW // 2 - 6
    x1, x2 = LEFT - 26, width - 10
    tag = f"loop: steps {first}–{last} repeat for ever"
    return (f'<g class="loop" data-from="{first}" data-to="{last}">'
            f'<rect x="{x1}" y="{top}" width="{x2 - x1}" height="{bottom - top}" fill="#7a3db8" fill-opacity="0.06" '
            f'stroke="#7a3db8" stroke-width="1.5"/>'
            f'<path d="M{x1},{top} h{7 * len(tag) + 14} v10 l-8,8 H{x1} z" fill="#7a3db8"/>'
            f'<text x="{x1 + 6}" y="{top + 13}" fill="white" font-weight="bold">{escape(tag)}</text>'
            f'<path d="M{x1 + 18},{bottom - 8} Q{x1 + 8},{bottom - 8} {x1 + 8},{bottom - 18} V{top + 34} '
            f'Q{x1 + 8},{top + 26} {x1 + 20},{top + 26}" fill="none" stroke="#7a3db8" stroke-width="2" '
            f'marker-end="url(#back)"/>'
            f'<text x="{x1 + 22}" y="{bottom - 4}" fill="#7a3db8">↻ back to step {first}</text></g>')


def chart_svg(title: str, trace: Trace, shown: dict[str, str] | None = None, harm: str = "",
              described: dict[str, str] | None = None) -> str:
    """``trace`` as a self-contained SVG message-sequence chart; ``shown`` names lifelines for people
    (``{"c0": "app (c0)"}``), ``described`` says what they are in the legend (``{"c0": "publisher 'app'"}``);
    ``harm`` says what happens at the step that does the harm (rabbitproof.explore.steps.harm_step), which
    the chart marks; "" marks none."""
    chart = chart_of(title, trace)
    chart.shown = dict(shown or {})
    if harm:
        chart.harm_row, chart.harm = harm_step(trace), harm
    return render_svg(chart, described)


def _file_name(*parts: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(parts)) + ".svg"


def write_charts(result: ExplorationResult, directory: str | Path, witnesses: bool = False) -> list[Path]:
    """One chart per counterexample of ``result`` (violated invariants, found hazards, an erroneous
    deadlock), and per witness of a ``sometimes`` property when ``witnesses``; the files written."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    traces: list[tuple[str, str, Trace, str]] = []
    for p in result.properties:
        if p.trace is not None and (p.kind != "sometimes" or witnesses):
            harm = "" if p.kind == "sometimes" else f"{p.name} {'happens' if p.kind == 'hazard' else 'fails'}"
            traces.append((p.name, f"{result.config}: {p.name} {p.verdict} ({len(p.trace.steps)} steps)", p.trace,
                           harm))
    if result.deadlock_trace is not None and result.deadlock_failed:
        traces.append(("deadlock", f"{result.config}: deadlock", result.deadlock_trace, "the system deadlocks"))
    for name, title, trace, harm in traces:
        path = folder / _file_name(result.config, name)
        path.write_text(chart_svg(title, trace, harm=harm), encoding="utf-8")
        written.append(path)
    return written


def charts_for(results: Sequence[ExplorationResult], directory: str | Path, witnesses: bool = False) -> list[Path]:
    """Charts of several results in one directory."""
    return [p for r in results for p in write_charts(r, directory, witnesses)]
