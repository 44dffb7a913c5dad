"""The replays' report: a line per answer (its status, the tries and the time, what the real run showed or
where it went another way), the files of its recordings and its chart; and the same as the `--json`
document (``schema("replay")``). The exit code: 1 when a replay diverged, 3 when one was not reproduced in
its tries, 0 when every one was reproduced or cannot be replayed."""
from __future__ import annotations

from rich.console import Console

from rabbitproof.exits import FOUND, NOTHING_FOUND, UNDECIDED, schema

from rabbitproof.replay.outcome import CANNOT, DIVERGED, NOT_REPRODUCED, REPRODUCED, Replayed

STYLES = {REPRODUCED: "green", NOT_REPRODUCED: "yellow", DIVERGED: "red"}


def exit_code(replays: list[Replayed]) -> int:
    statuses = {r.status for r in replays}
    return FOUND if DIVERGED in statuses else UNDECIDED if NOT_REPRODUCED in statuses else NOTHING_FOUND


def status_counts(replays: list[Replayed]) -> str:
    """How many replays ended in each status, in words: ``1 reproduced, 0 not reproduced, 1 diverged, 0
    cannot be replayed``."""
    return ", ".join(f"{sum(r.status == status for r in replays)} {status}"
                     for status in (REPRODUCED, NOT_REPRODUCED, DIVERGED, CANNOT))


def replay_json(setup: str, url: str, tries: int, replays: list[Replayed]) -> dict:
    return {"schema": schema("replay"), "setup": setup, "broker": url, "tries": tries,
            "answers": [r.json() for r in replays]}


def print_replays(out: Console, setup: str, url: str, replays: list[Replayed]) -> None:
    out.print(f"Replayed on {url}: the answers of {setup} that can happen", highlight=False, markup=False)
    if not replays:
        out.print("no answer can happen: nothing to replay", highlight=False, markup=False)
    for n, r in enumerate(replays, 1):
        tries = f"{r.tries} {'try' if r.tries == 1 else 'tries'}, {r.seconds:.1f} s" if r.tries else ""
        head = f"{n}. {r.question} {r.status}" + (f" ({tries})" if tries else "")
        out.print(head, style=STYLES.get(r.status, ""), highlight=False, markup=False)
        out.print(f"   {r.why}", highlight=False, markup=False)
        if r.heartbeat:
            out.print(f"   (a vanishing client's connections negotiated a heartbeat of {r.heartbeat} s, so that "
                      "the broker notices it soon)", highlight=False, markup=False)
        if r.status == NOT_REPRODUCED and len(r.ways) > 1:
            for way in r.ways:
                out.print(f"   {way}", highlight=False, markup=False)
        if r.shrunk_steps:
            out.print(f"   it still diverges with the first {len(r.shrunk_steps)} steps of the execution:",
                      highlight=False, markup=False)
            for step in r.shrunk_steps:
                out.print(f"     {step}", highlight=False, markup=False)
        if r.status == DIVERGED and r.trace:
            out.print("   what the clients saw, in the spec's names:", highlight=False, markup=False)
            for line in r.trace.splitlines():
                out.print(f"     {line}", highlight=False, markup=False)
        for path in r.recordings[-1:]:
            out.print(f"   recording: {path}" + (f" (and {len(r.recordings) - 1} earlier)" if len(r.recordings) > 1
                                                 else ""), highlight=False, markup=False)
        if r.chart:
            out.print(f"   chart: {r.chart}", highlight=False, markup=False)
