"""How `rabbitproof check` shows its answers: a rich report for people, JSON for machines, SVG charts."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

from rich.console import Console
from rich.text import Text

from rabbitproof.check.answers import Checked, names, plain_names, setup_name
from rabbitproof.check.cycles import ASSUMED
from rabbitproof.check.for_every_size import ProvedFor, proved_for
from rabbitproof.check.setup_model import notes
from rabbitproof.check.setup_file import fault_words
from rabbitproof.check.whatif import Tried
from rabbitproof.explore.chart import chart_svg, old_connections
from rabbitproof.explore.report import print_trace
from rabbitproof.explore.steps import trace_object
from rabbitproof.exits import FOUND, NOTHING_FOUND, UNDECIDED
from rabbitproof.output import new_table, show

VERDICT_STYLE = {"can happen": "bold red", "cannot happen": "green", "undecided": "yellow"}
TITLES = {"lost": "lost", "twice": "processed twice", "order": "out of order", "loop": "requeue loop",
          "waits": "waits for ever"}
# What happens at the step a counterexample marks (rabbitproof.explore.steps.harm_step): the first step
# where the question's harm holds. For "lost" that is where the message is gone and the publisher believes
# it delivered, whichever came second (a confirm can arrive after the loss). A loop or a wait for ever
# does its harm in its repeated steps, marked as a loop.
HARMS = {"lost": "a message the publisher believes delivered is gone", "twice": "a message is processed the second time",
         "order": "a message arrives after one published later: it was overtaken"}


def exit_code(checked: Checked) -> int:
    """1 when a question can happen (and is not harmless here), else 3 when one is undecided, else 0."""
    if any(a.happens and not a.harmless for a in checked.answers):
        return FOUND
    if any(a.happens is None for a in checked.answers):
        return UNDECIDED
    return NOTHING_FOUND


def verdict_detail(checked: Checked) -> str:
    """The verdict line's words: which questions can happen, or are undecided, or that none can."""
    name = setup_name(checked.setup)
    found = [TITLES[a.key] for a in checked.answers if a.happens and not a.harmless]
    open_ = [TITLES[a.key] for a in checked.answers if a.happens is None]
    if found:
        return f"{name}: can happen: {', '.join(found)}" + (f"; undecided: {', '.join(open_)}" if open_ else "")
    if open_:
        why = (f"the search stopped: {checked.result.error}" if checked.result is not None
               else "no argument or smaller setup decides it, and the setup is beyond the exhaustive search's bounds")
        return f"{name}: {', '.join(open_)} not decided ({why})"
    return f"{name}: none of the {len(checked.answers)} questions can happen"


# Said when a search stops: what the tutorial's "When a setup is too large" shows (docs/tutorial/check-your-setup.md).
SMALLER = ("A smaller setup answers sooner: fewer publishers, consumers, messages or faults, the same settings "
           "otherwise; a message lost, processed twice or seen out of order there can be here too "
           "(docs/tutorial/check-your-setup.md, \"When a setup is too large\").")


def bounds_text(checked: Checked) -> str:
    """What was checked, in words: messages per publisher, faults, what repeats without bound."""
    setup = checked.setup
    messages = ", ".join(f"{p.name}: {p.messages}" + (f", republishing at most {p.republish}" if p.republish else "")
                         for p in setup.publishers)
    faults = fault_words(setup)
    return (f"messages ({messages}), requeues without bound, "
            + (f"faults: {', '.join(faults)} (each at most once)" if faults else "no faults"))


METHOD_TITLES = {"proved": "proved for every size", "found": "found in a smaller setup",
                 "exhaustive": "exhaustive search", "undecided": "undecided"}


def checked_text(checked: Checked) -> str:
    """What "cannot happen" rests on, in one sentence."""
    r = checked.result
    if r is None:
        if checked.machine is None:
            return ("The setup is larger than the exhaustive search takes on: each answer is proved for every "
                    "size, found in a smaller setup, or undecided, as said below each.")
        if any(a.happens is None for a in checked.answers):
            return ("Stopped before the exhaustive search: what no argument and no smaller setup answered is "
                    "undecided, as said below each.")
        return ("No exhaustive search was needed: each answer is proved for every size or found in a smaller "
                "setup, as said below each.")
    if not r.complete:
        text = (f"The search stopped at {r.distinct_states:,} states ({r.error}): the questions it had not "
                "answered yet are undecided")
        proved = proved_answers(checked)
        if proved:
            text += ", but " + "; ".join(
                f"\"{TITLES[key]}: cannot happen\" is proved for any number of messages: the invariants "
                f"{' and '.join(p.invariants)}, proved by Z3 for every size (make verify), imply it when {p.shape}, "
                "as here" for key, p in proved.items())
        return text + ". " + SMALLER
    counted = (f"{r.distinct_states:,} reachable states (depth {r.depth}), which stand for every reachable one"
               if r.reductions else f"every one of {r.distinct_states:,} reachable states (depth {r.depth})")
    return (f"Checked: {counted}{swapped_text(checked)}{covered_text(checked)}, "
            f"for {bounds_text(checked)}. {ASSUMED}. {sure_text(checked)}")


def proved_answers(checked: Checked) -> dict[str, ProvedFor]:
    """The "cannot happen" answers that proved invariants imply for every size (rabbitproof.check.for_every_size)."""
    out = {}
    for a in checked.answers:
        implied = proved_for(checked.setup, a.key) if a.happens is False else None
        if implied is not None:
            out[a.key] = implied
    return out


def sure_text(checked: Checked) -> str:
    """How far each "cannot happen" reaches: these bounds, or every size where a proved invariant implies it."""
    proved = proved_answers(checked)
    if not proved:
        return ("No invariant proved for every size implies these answers: \"cannot happen\" holds within "
                "these bounds.")
    parts = [f"\"{TITLES[key]}: cannot happen\" {reach(checked, key)}: the invariants "
             f"{' and '.join(p.invariants)}, proved by Z3 for every size (make verify), imply it when "
             f"{p.shape}, as here" for key, p in proved.items()]
    return "; ".join(parts) + ". Every other \"cannot happen\" holds within these bounds."


def reach(checked: Checked, key: str) -> str:
    """How a proved "cannot happen" stands beside the search: checked by it too, or left to the proof (the
    search keeps no beliefs where the proof covers "lost": rabbitproof.check.answers.keeps_beliefs)."""
    if key == "lost" and checked.machine is not None and not checked.machine.beliefs:
        return "is proved for any number of messages, so the search did not look for it"
    return "holds for any number of messages too"


def swapped_text(checked: Checked) -> str:
    """Under the symmetry reduction, which publishers and which consumers are interchangeable (states that
    differ only by swapping them, publishers with their messages, are counted once); empty when none are."""
    if "symmetry" not in checked.result.reductions:
        return ""
    setup = checked.setup
    renamings = checked.machine.symmetry(checked.config).renamings
    moved = sorted({c for g in renamings for c, d in enumerate(g.conns) if c != d})
    if not moved:
        return ""
    first = len(setup.publishers)
    parts = []
    publishers = [repr(setup.publishers[c].name) for c in moved if c < first]
    consumers = [repr(setup.consumers[c - first].name) for c in moved if c >= first]
    if publishers:
        parts.append(f"the interchangeable publishers {' and '.join(publishers)} (with their messages)")
    if consumers:
        parts.append(f"the interchangeable consumers {' and '.join(consumers)}")
    return f", counting once the states that differ only by swapping {', or '.join(parts)}"


def covered_text(checked: Checked) -> str:
    """Under the budgets reduction, in a setup with faults: that a state is left out where a twin that
    spent fewer faults is explored (rabbitproof.check.spent_budgets); empty otherwise."""
    if "budgets" not in checked.result.reductions or not any(vars(checked.setup.faults).values()):
        return ""
    return (", leaving out each state whose twin with fewer faults spent is explored (it can do all that "
            "state can)")


def print_checked(console: Console, checked: Checked, tried: Sequence[Tried], charts: dict[str, Path]) -> None:
    """The report: one row per question, then each execution that makes a question fail, then advice."""
    r = checked.result
    if r is None:
        console.print(Text(f"{checked.setup.source}: {checked.seconds or 0:.1f} s, no exhaustive search", style="bold"))
    else:
        console.print(Text(f"{checked.setup.source}: {r.distinct_states:,} states, depth {r.depth}, "
                           f"{r.seconds:.1f} s ({r.engine} engine)", style="bold"))
    table = new_table(console, "#", "question", "answer", "how", "rules", right=("#",), whole=("answer",))
    for n, a in enumerate(checked.answers, 1):
        shown = Text(f"{a.verdict}, harmless", style="yellow") if a.harmless else \
            Text(a.verdict, style=VERDICT_STYLE[a.verdict])
        table.add_row(str(n), a.question, shown, METHOD_TITLES[a.method], ", ".join(a.rules))
    show(console, table)
    console.print(Text(checked_text(checked), style="dim"))
    for n, a in enumerate(checked.answers, 1):
        if a.how:
            console.print(Text(f"{n}. {TITLES[a.key]}: {a.how}.", style="dim"))
    for note in notes(checked.setup):
        console.print(Text(f"Note: {note}.", style="dim"))
    if any(a.trace is not None for a in checked.answers):
        console.print()
        console.print(Text("In the steps: " + ", ".join(f"{k} = {v}" for k, v in step_names(checked).items()),
                           style="bold"))
    for n, a in enumerate(checked.answers, 1):
        if a.trace is None:
            continue
        console.print()
        print_trace(console, f"{n}. {a.question} How", a.trace,
                    same_state=" (the same but for delivery tag numbers, which RabbitMQ issues anew: DT-1)",
                    harm=HARMS.get(a.key, ""))
        if a.harmless:
            console.print(Text(f"  harmless here: {a.harmless}", style="yellow"))
        if a.key in charts:
            console.print(Text(f"  chart: {charts[a.key]}", style="cyan"))
        console.print(Text(f"  rules involved: {', '.join(a.rules)}"))
        fixes = [t for t in tried if a.key in t.fixes]
        if fixes:
            console.print(Text("  prevented by: " + "; ".join(t.change.text for t in fixes), style="green"))
        elif tried:
            console.print(Text("  no single change tried prevents it", style="yellow"))
    if tried:
        console.print()
        advice = new_table(console, "change", "makes pass", "still fails", "makes fail", "states", "s",
                           title="What if: each single change, explored", right=("states", "s"))
        for t in tried:
            advice.add_row(t.change.text, ", ".join(TITLES[k] for k in t.fixes) or "-",
                           ", ".join(TITLES[k] for k in t.still) or "-",
                           Text(", ".join(TITLES[k] for k in t.breaks) or "-", style="red" if t.breaks else ""),
                           f"{t.states:,}", f"{t.seconds:.1f}")
        show(console, advice)


def step_names(checked: Checked) -> dict[str, str]:
    """What the names in the steps stand for: the setup's clients and queues, and each connection a
    vanished client left behind (``c2 = the old connection of consumer 'settler'``) that a trace names."""
    named = names(checked.setup)
    old: dict[str, str] = {}
    for a in checked.answers:
        for conn, (client, _) in (old_connections(a.trace) if a.trace is not None else {}).items():
            old.setdefault(conn, f"the old connection of {named.get(client, client)}, whose client vanished")
    return {**named, **old}


def lifeline_names(setup) -> dict[str, str]:
    """The lifelines of a setup's charts by the names its file gives its clients: ``app (c0)``."""
    return {c: f"{name} ({c})" for c, name in plain_names(setup).items() if c.startswith("c")}


def write_charts(checked: Checked, directory: str | Path) -> dict[str, Path]:
    """One SVG message-sequence chart per question that can happen; question key -> file."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for n, a in enumerate(checked.answers, 1):
        if a.trace is None:
            continue
        path = folder / f"{setup_name(checked.setup)}-{a.key}.svg"
        cast = " ".join(f"{k}={name}" for k, name in plain_names(checked.setup).items())
        loop = a.trace.cycle_start
        shape = f"{len(a.trace.steps)} steps" if loop is None else \
            f"{loop} steps, then steps {loop + 1}–{len(a.trace.steps)} for ever"
        title = f"{setup_name(checked.setup)}: {TITLES[a.key]} ({shape}) {cast}"
        path.write_text(chart_svg(title, a.trace, lifeline_names(checked.setup), harm=HARMS.get(a.key, ""),
                                  described=names(checked.setup)), encoding="utf-8")
        written[a.key] = path
    return written


def checked_json(checked: Checked, tried: Sequence[Tried], charts: dict[str, Path]) -> dict[str, Any]:
    """Every answer, figure, trace and what-if result as plain JSON data."""
    r = checked.result
    plain = plain_names(checked.setup)
    proved = proved_answers(checked)
    fair = [] if checked.machine is None else checked.machine.fairness(checked.config).classes
    return {
        "setup": checked.setup.source,
        "engine": r.engine if r else None,
        "distinct_states": r.distinct_states if r else 0,
        "depth": r.depth if r else 0,
        "seconds": round(r.seconds if r else checked.seconds or 0.0, 3),
        "complete": r.complete if r else None,
        "error": r.error if r else None,
        "checked": checked_text(checked),
        "fair": [re.sub(r"\bc\d+\b", lambda m: plain.get(m.group(0), m.group(0)), text) for text in fair],
        "notes": list(notes(checked.setup)),
        "bounds": {"messages": {p.name: p.messages for p in checked.setup.publishers},
                   "requeues": checked.config.requeues if checked.config else None,
                   "faults": [k for k, on in vars(checked.setup.faults).items() if on]},
        "passed": not checked.failing,
        "reductions": list(r.reductions) if r else [],
        "names": step_names(checked),
        "answers": [
            {"key": a.key, "question": a.question, "answer": a.verdict, "harmless": a.harmless or None,
             "rules": list(a.rules),
             "trace": trace_object(a.trace, HARMS.get(a.key, "")),
             "chart": str(charts[a.key]) if a.key in charts else None,
             "prevented_by": [t.change.key for t in tried if a.key in t.fixes],
             "for_every_size": list(proved[a.key].invariants) if a.key in proved else None,
             "method": a.method, "how": a.how or None}
            for a in checked.answers
        ],
        "what_if": [
            {"change": t.change.key, "text": t.change.text, "rules": list(t.change.rules), "fixes": list(t.fixes),
             "still_fails": list(t.still), "breaks": list(t.breaks), "distinct_states": t.states,
             "seconds": round(t.seconds, 3)}
            for t in tried
        ],
    }
