"""The spec as judge: a run's recording goes to rabbitproof/recording/observations.py and spec/trace.py,
which accept it, reject it (naming the first observation no execution of the spec explains) or give up."""
from __future__ import annotations

from dataclasses import dataclass

from rabbitproof.spec import trace
from rabbitproof.recording import observations

from rabbitproof.conformance.programs import Program
from rabbitproof.conformance.targets import Run

MAX_NODES = 400_000         # spec states searched per trace before the checker gives up (inconclusive)


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
