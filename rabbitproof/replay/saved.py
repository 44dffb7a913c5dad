"""The executions to replay: the "can happen" answers of a `rabbitproof check --json` document saved to a
file, or of a check just run in this process; and the setup file they were found for."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rabbitproof.check.setup_file import Setup, read_setup

from rabbitproof.exits import schema
from rabbitproof.replay.steps import StepError, from_trace, step_from_object
from rabbitproof.replay.tries import Execution


class SavedError(ValueError):
    """A saved answers file that cannot be replayed; the message names the file and what is wrong."""


def from_checked(checked: Any) -> list[Execution]:
    """The "can happen" answers of a check run in this process (``rabbitproof.check.answers.Checked``)."""
    return [Execution(a.key, a.question, from_trace(a.trace), a.trace.cycle_start)
            for a in checked.answers if a.happens and a.trace is not None]


def read_saved(path: str, setup_path: str | None = None) -> tuple[Setup, list[Execution]]:
    """The setup and the "can happen" answers of a saved `check --json` document. The setup file is the
    one the document names (as given to `check`, or beside the document), unless ``setup_path`` says."""
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except OSError as e:
        raise SavedError(f"{path}: {e.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SavedError(f"{path}: not JSON: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("answers"), list) or "setup" not in data:
        raise SavedError(f"{path}: not the output of `rabbitproof check --json` (no \"setup\" and \"answers\")")
    if data.get("schema") != schema("check"):
        raise SavedError(f"{path}: written as {data.get('schema')!r}, not {schema('check')!r}: check the setup again "
                         f"with this version's `rabbitproof check --json`")
    executions = []
    for n, answer in enumerate(data["answers"], 1):
        trace = answer.get("trace") if isinstance(answer, dict) else None
        if answer.get("answer") != "can happen" or not isinstance(trace, dict) or not trace.get("steps"):
            continue
        try:
            steps = tuple(step_from_object(s) for s in trace["steps"])
        except (StepError, TypeError) as e:
            raise SavedError(f"{path}: answer {n}: {e}") from None
        loop_from = trace.get("loop_from")
        executions.append(Execution(str(answer.get("key")), str(answer.get("question", "")), steps,
                                    loop_from - 1 if isinstance(loop_from, int) else None))
    return read_setup(_setup_file(file, str(data["setup"]), setup_path)), executions


def _setup_file(document: Path, named: str, given: str | None) -> str:
    if given:
        return given
    for candidate in (Path(named), document.parent / named, document.parent / Path(named).name):
        if candidate.is_file():
            return str(candidate)
    raise SavedError(f"{document}: the setup file it names, {named!r}, is not found (give it with --setup FILE)")
