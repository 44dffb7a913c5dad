"""`rabbitproof check --junit FILE`: the answers as a JUnit XML report, the form CI systems read, one test
case per question: "can happen" a failure (its steps in the message), "undecided" an error (the search
stopped before deciding it), "cannot happen" or harmless a pass."""
from __future__ import annotations

import os
from pathlib import Path
from xml.etree import ElementTree as ET

from rabbitproof.spark_check.bundle import InputError

from rabbitproof.check.answers import Checked, setup_name


def check_junit_path(path: str) -> None:
    """Before any work: InputError (one line) when ``path``'s folder does not exist or is a file."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise InputError(f"--junit: no such directory {folder!r}")
    if os.path.isdir(path):
        raise InputError(f"--junit: {path!r} is a directory, not a file")


def junit_xml(checked: Checked) -> ET.ElementTree:
    """One ``testsuite`` named after the setup, one ``testcase`` per question."""
    name = setup_name(checked.setup)
    r = checked.result
    answers = checked.answers
    suite = ET.Element("testsuite", name=f"rabbitproof check {name}", tests=str(len(answers)),
                       failures=str(sum(bool(a.happens and not a.harmless) for a in answers)),
                       errors=str(sum(a.happens is None for a in answers)), time=f"{r.seconds:.3f}")
    for a in answers:
        case = ET.SubElement(suite, "testcase", classname=f"rabbitproof.check.{name}", name=f"{a.key}: {a.question}")
        rules = ", ".join(a.rules)
        if a.happens and not a.harmless:
            failure = ET.SubElement(case, "failure", message=f"can happen (rules {rules})", type="can happen")
            failure.text = "\n".join(a.trace.lines()) if a.trace is not None else ""
        elif a.happens is None:
            ET.SubElement(case, "error", message=f"undecided: the search stopped ({r.error})", type="undecided")
        else:
            out = ET.SubElement(case, "system-out")
            out.text = f"{a.verdict}" + (f", harmless: {a.harmless}" if a.harmless else "") + f" (rules {rules})"
    return ET.ElementTree(suite)


def write_junit(checked: Checked, path: str | Path) -> None:
    """Write the JUnit XML report of ``checked`` to ``path``."""
    tree = junit_xml(checked)
    ET.indent(tree)
    tree.write(path, encoding="utf-8", xml_declaration=True)
