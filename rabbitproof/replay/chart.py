"""A replayed run as a message-sequence chart (SVG): the recorded run as `rabbitproof conformance` charts
it (rabbitproof/conformance/chart.py: a lifeline per client connection and the broker, a rejection marked
where the spec stopped explaining the run), the clients named as in the setup, and the harm marked: each
frame carrying a message the answer's event is about says so, and a red line at the end says what the real
run showed."""
from __future__ import annotations

import re

from rabbitproof.explore.chart import render_svg
from rabbitproof.recording import observations
from rabbitproof.spec import trace

from rabbitproof.conformance.chart import recording_chart

_MESSAGE = re.compile(r"\bm\d+\.\d+\b")


def replay_svg(title: str, recorded: observations.Recorded, verdict: trace.Verdict, names: dict[str, str],
               harm: str) -> str:
    """The chart of a replay's deciding try; ``names`` gives the clients' names (``{"c0": "publisher
    'app'"}``), ``harm`` what the real run showed ("" when it showed nothing)."""
    chart = recording_chart(title, recorded, verdict)
    chart.shown.update({c: f"{c}: {name}" for c, name in names.items() if c in chart.shown})
    if harm:
        harmed = set(_MESSAGE.findall(harm.split(":")[0] if ":" in harm else harm))
        for arrow in chart.arrows:
            if set(_MESSAGE.findall(arrow.label)) & harmed:
                arrow.note = "(the harm)"
        chart.rows += 1
        chart.faults.append((chart.rows, list(chart.lifelines), f"shown on the real run: {harm}"))
    return render_svg(chart)
