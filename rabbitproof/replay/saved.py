"""The executions to replay: the "can happen" answers of a `rabbitproof check --json` document saved to a
file, or of a check just run in this process; and the setup file they were found for."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rabbitproof.check.setup_file import Setup, read_setup

from rabbitproof.replay.steps import StepError, from_trace, parse_step
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
    executions = []
    for n, answer in enumerate(data["answers"], 1):
        if not isinstance(answer, dict) or answer.get("answer") != "can happen" or not answer.get("steps"):
            continue
        try:
            steps = tuple(parse_step(s) for s in answer["steps"])
        except (StepError, TypeError) as e:
            raise SavedError(f"{path}: answer {n}: {e}") from None
        executions.append(Execution(str(answer.get("key")), str(answer.get("question", "")), steps,
                                    answer.get("cycle_start")))
    return read_setup(_setup_file(file, str(data["setup"]), setup_path)), executions


def _setup_file(document: Path, named: str, given: str | None) -> str:
    if given:
        return given
    for candidate in (Path(named), document.parent / named, document.parent / Path(named).name):
        if candidate.is_file():
            return str(candidate)
    raise SavedError(f"{document}: the setup file it names, {named!r}, is not found (give it with --setup FILE)")
