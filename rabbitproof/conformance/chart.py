"""A recorded run as a message-sequence chart (SVG), in the style of `rabbitproof check`'s charts
(rabbitproof/explore/chart.py): a lifeline per client connection and one for the broker, time running
down, one row per observation in the real-time order the recording gives. A recording holds what each
client sent and read, not when the broker took or wrote a frame, so every frame is drawn at the row
its client sent or read it. A rejection adds a red line under the observation the spec could not
explain, and lines of what the spec allowed there; reconnections and the quiet mark at the end are boxes, a
connection lost is a red line across its lifeline."""
from __future__ import annotations

from rabbitproof.spec import trace
from rabbitproof.recording import observations
from rabbitproof.spec.frames import frame_text

from rabbitproof.explore.chart import Arrow, Chart, render_svg

MAX_COLUMN = 640            # pixels between lifelines at most: frame labels longer than that are cut


def recording_chart(title: str, recording: observations.Recorded, verdict: trace.Verdict) -> Chart:
    """Lay out ``recording`` with ``verdict``'s rejection marked (if it is one)."""
    chart = Chart(title)
    for c in sorted(recording.observations):
        chart.lifeline(f"c{c}")
        chart.shown[f"c{c}"] = f"client c{c}"
    chart.lifeline("broker")
    seen = {c: 0 for c in recording.observations}
    order = recording.order or tuple(c for c in sorted(recording.observations)
                                     for _ in recording.observations[c])
    row = 0
    for c in order:
        index = seen[c]
        seen[c] += 1
        observation = recording.observations[c][index]
        row += 1
        client = f"c{c}"
        kind = observation[0]
        if kind == "sent":
            chart.arrows.append(Arrow(client, "broker", frame_text(observation[1]), row, row))
        elif kind == "received":
            chart.arrows.append(Arrow("broker", client, frame_text(observation[1]), row, row))
        elif kind == "lost":
            chart.faults.append((row, [client], f"connection c{c} lost"))
        elif kind == "connect":
            chart.boxes.append((row, client, "connects again"))
        else:
            chart.boxes.append((row, client, "quiet (owes nothing)"))
        if verdict.status == trace.REJECTED and (c, index) == (verdict.conn, verdict.index):
            row += 1
            chart.faults.append((row, [client, "broker"], f"rejected: c{c}'s observation {index + 1}, above, "
                                                          f"has no explanation"))
            for allowed in verdict.allowed or ["nothing observable"]:
                row += 1
                chart.notes.append((row, f"the spec allowed there: {allowed}"))
    chart.rows = row
    longest = max((len(arrow.label) for arrow in chart.arrows), default=0)
    chart.column = min(MAX_COLUMN, max(chart.column, 7 * longest + 30))
    return chart


def recording_svg(title: str, recording: observations.Recorded, verdict: trace.Verdict) -> str:
    """The chart of a recorded run as a self-contained SVG document."""
    return render_svg(recording_chart(title, recording, verdict))
