"""What became of one answer's replay, and how one try is judged.

- reproduced: a try did every act, showed the answer's event on the real run, and the trace checker
  accepts its recording;
- not reproduced: no try in ``tries`` did; the broker took another path the spec also allows (each try's
  recording accepted), and the answer says where each try went another way;
- diverged: the trace checker rejects a try's recording: the broker did what the spec does not allow
  (a difference between the broker and the spec), the try's acts shrunk to the shortest prefix of the
  execution that still diverges;
- cannot be replayed: a fault of the execution that cannot be made for real, and why.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from rabbitproof.recording import observations
from rabbitproof.spec.trace import Verdict

from rabbitproof.replay.attempt import Try

REPRODUCED, NOT_REPRODUCED, DIVERGED, CANNOT = "reproduced", "not reproduced", "diverged", "cannot be replayed"


@dataclass
class Judged:
    """One try judged: reproduced, diverged, or another way (``why``); its verdict and recording."""

    status: str
    why: str
    verdict: Verdict | None
    recorded: observations.Recorded | None
    attempt: Try
    file: str = ""


def judge(attempt: Try, question: str, max_nodes: int) -> Judged:
    """The verdict of the spec on a try's recording, and whether the try shows the answer's event."""
    if not attempt.slots:
        return Judged(NOT_REPRODUCED, attempt.stopped, None, None, attempt)
    try:
        recorded = observations.from_recording(attempt.slots, attempt.existing, judge_texts=False)
    except observations.Unsupported as e:
        return Judged(NOT_REPRODUCED, f"the recording cannot be judged: {e}", None, None, attempt)
    verdict = recorded.check(max_nodes)
    if verdict.status == "rejected":
        return Judged(DIVERGED, verdict.explain(), verdict, recorded, attempt)
    if not verdict.ok:
        return Judged(NOT_REPRODUCED, f"the spec's verdict is undecided: {verdict.explain()}", verdict, recorded,
                      attempt)
    if attempt.stopped:
        return Judged(NOT_REPRODUCED, attempt.stopped, verdict, recorded, attempt)
    shown, what = attempt.observed.shows(question)
    return Judged(REPRODUCED if shown else NOT_REPRODUCED,
                  what if shown else f"every step went as in the execution, but {what}", verdict, recorded, attempt)


@dataclass
class Replayed:
    """An answer's replay: its status, the tries it took, why (the event shown, where the tries went
    another way, the divergence, or why it cannot be replayed), the recordings' files, seconds, and for a
    divergence the steps it was shrunk to."""

    key: str
    question: str
    status: str
    tries: int = 0
    why: str = ""
    seconds: float = 0.0
    recordings: list = field(default_factory=list)
    ways: list = field(default_factory=list)            # per try not reproduced: where it went another way
    shrunk_steps: list = field(default_factory=list)    # a divergence: the execution's steps that still diverge
    trace: str = ""                                     # the deciding recording in the spec's language
    chart: str = ""                                     # the deciding recording charted (SVG file)
    heartbeat: int = 0                                  # the short heartbeat negotiated for a vanishing client

    def json(self) -> dict:
        return {"key": self.key, "question": self.question, "status": self.status, "tries": self.tries,
                "why": self.why, "seconds": round(self.seconds, 3), "recordings": self.recordings,
                "went_another_way": self.ways, "shrunk_steps": self.shrunk_steps, "trace": self.trace,
                "chart": self.chart or None, "heartbeat": self.heartbeat or None}
