"""The spec as judge: a run's recording goes to rabbitproof/recording/observations.py and spec/trace.py,
which accept it, reject it (naming the first observation no execution of the spec explains) or give up."""
from __future__ import annotations

from dataclasses import dataclass, replace

from rabbitproof.spec import trace
from rabbitproof.spec.frames import frame_text
from rabbitproof.recording import observations

from rabbitproof.conformance.findings import parse
from rabbitproof.conformance.programs import Program
from rabbitproof.conformance.targets import Run

MAX_NODES = 400_000         # spec states searched per trace before the checker gives up (inconclusive)
# Fields of a frame the broker sends that say something and change nothing in its state: a frame wrong
# only in them is taken as the spec allowed it, to judge what comes after (`later`).
INFORMATIVE = ("message_count", "redelivered")
MAX_LATER = 8               # further rejections looked for in one recording


@dataclass
class Judgement:
    run: Run
    verdict: trace.Verdict
    recording: observations.Recorded

    @property
    def ok(self) -> bool:
        return self.verdict.ok

    @property
    def status(self) -> str:
        return self.verdict.status

    def observations(self) -> int:
        return self.recording.size()

    def report(self) -> str:
        """The program (as Python and as numbered steps), the trace, and the spec's verdict."""
        return "\n".join([
            f"target: {self.run.target}",
            f"program: {self.run.program!r}",
            self.run.program.numbered(),
            "trace (model names; legend first):",
            self.recording.text(),
            f"verdict: {self.verdict.explain()}",
        ])


def judge(run: Run, max_nodes: int = MAX_NODES, judge_texts: bool = True) -> Judgement:
    """The spec's verdict on what running a program recorded. Raises observations.Unsupported when the
    recording holds what the model cannot say (a generator bug, against RabbitMQ and our broker:
    programs stay inside the model). ``judge_texts``: reply texts must be RabbitMQ 3.10.8's (our broker
    writes them too); without it only reply codes and fields are judged."""
    rec = observations.from_recording(run.slots, judge_texts=judge_texts)
    return Judgement(run, rec.check(max_nodes), rec)


def later(judgement: Judgement, max_nodes: int = MAX_NODES) -> list:
    """After a rejection, the rejections that come later in the same recording: when the frame the spec
    could not explain is one it allowed but for INFORMATIVE fields (message_count, redelivered), the
    recording is judged again with that frame as the spec allowed it, and so on while each verdict is
    such a rejection (MAX_LATER at most). The broker's state does not depend on those fields, so what
    follows is judged as fairly as if the broker had sent them right; the first rejection stands all
    the same (nothing is accepted that was rejected), and a broker that breaks DS-2 and RQ-2 everywhere
    does not hide every other break. Each judgement returned is a rejection."""
    found: list = []
    while len(found) < MAX_LATER and judgement.verdict.status == trace.REJECTED:
        rightened = _as_allowed(judgement.verdict)
        if rightened is None:
            break
        verdict = judgement.verdict
        observations = dict(judgement.recording.observations)
        observations[verdict.conn] = [*observations[verdict.conn][:verdict.index], rightened,
                                      *observations[verdict.conn][verdict.index + 1:]]
        recording = replace(judgement.recording, observations=observations)
        judgement = Judgement(judgement.run, recording.check(max_nodes), recording)
        if judgement.verdict.status == trace.REJECTED:
            found.append(judgement)
    return found


def _as_allowed(verdict: trace.Verdict):
    """The observation the verdict could not explain as a frame the spec allowed there, when the two
    differ only in INFORMATIVE fields (None otherwise)."""
    if verdict.observation[:1] != ("received",):
        return None
    direction, frame = verdict.observation[:2]
    got = parse(f"received {frame_text(frame)}")
    for text in verdict.allowed:
        want = parse(text)
        if want[:2] != got[:2] or set(want[2]) != set(got[2]):
            continue
        differing = [name for name in got[2] if got[2][name] != want[2][name]]
        if differing and all(name in INFORMATIVE for name in differing):
            values = {name: type(getattr(frame, name))(want[2][name] == "True" if name == "redelivered"
                                                       else int(want[2][name])) for name in differing}
            return (direction, frame._replace(**values), *verdict.observation[2:])
    return None


def wire_problem(run: Run) -> str:
    """What the broker did on the wire that no trace can hold, in a sentence ("" for nothing): a frame
    the client cannot decode, or a connection closed without connection.close (the suite injects no
    network fault, so only a broker crash the program asked for may end a connection silently)."""
    for c, slot in enumerate(run.slots):
        for n, log in enumerate(slot):
            closed = False
            for entry in log:
                if entry.direction != "received":
                    continue
                if entry.kind == "raw":
                    return (f"the broker sent bytes that are not an AMQP frame the client can decode, on channel "
                            f"{entry.channel} of connection c{c}: {entry.body[:40]!r}")
                if entry.kind == "method" and entry.method.name in ("Connection.Close", "Connection.CloseOk"):
                    closed = True
                if entry.kind == "eof" and not closed and not run.crashes:
                    return f"the broker closed connection c{c} (its connection {n + 1}) without connection.close"
    return ""


def assert_accepted(run: Run) -> Judgement:
    """Judge a run; a rejection or an inconclusive search fails with the whole report."""
    judgement = judge(run)
    assert judgement.ok, "the spec does not accept this run\n" + judgement.report()
    return judgement


def program_text(program: Program) -> str:
    return f"{program!r}\n{program.numbered()}"
