"""`rabbitproof verify --part setups` (rabbitproof.check.cross_checks): `check`'s answers by argument and
from smaller setups held to the exhaustive search and to RabbitMQ's guide, counted as checks, printed
as a table; a wrong answer fails the part. Here on a few setups (seconds); `make verify` runs them all
(a bad count is refused before any work: tests/test_proofs_verify_cli.py)."""
from __future__ import annotations

import argparse
import io
import re

from rich.console import Console

from rabbitproof import exits, verify
from rabbitproof.check import cross_checks
from rabbitproof.check.questions import QUESTIONS

LARGER = cross_checks.LARGER / "web-servers-work-queue.toml"
MIXED = cross_checks.MIXED / "crash-and-connection-lost-two-messages.toml"


def _part(monkeypatch, larger, random_count: int) -> tuple[verify.PartResult, str]:
    """The setups part on ``larger`` (larger setups), one mixed setup and ``random_count`` drawn at random."""
    monkeypatch.setattr(cross_checks, "larger_setups", lambda: larger)
    monkeypatch.setattr(cross_checks, "known_setups", lambda: [MIXED])
    monkeypatch.setattr(cross_checks, "ROUND_ROBIN_SETUPS", 1)
    console = Console(file=io.StringIO(), width=200)
    args = argparse.Namespace(random_setups=random_count)
    return verify.run_part("setups", args, console, None, False), console.file.getvalue()


def test_the_part_counts_each_answer_compared_and_prints_the_count_drawn(monkeypatch):
    result, out = _part(monkeypatch, [LARGER], 2)
    assert (result.part, result.failed, result.unknown, result.ok) == ("setups", 0, 0, True)
    # The larger setup's five answers against the guide, and at least one answer of each other setup.
    assert len(QUESTIONS) + 4 <= result.checks == result.passed <= len(QUESTIONS) * 5
    assert "2 setups drawn at random (seed 36" in out
    row = next(l for l in out.splitlines() if l.startswith(("│ larger setups", "┃ larger setups", "| larger setups")))
    assert re.search(r"RabbitMQ's guide\s*│\s*1\s*│\s*5\s*│\s*0\s*│\s*0\s*│\s*0", row), row
    row = next(l for l in out.splitlines() if "a requeuer beside a steady consumer" in l)
    assert re.search(r"the exhaustive search\s*│\s*1\s*│\s*[1-5]\s*│\s*\d\s*│\s*0\s*│\s*0", row), row


def test_an_answer_that_is_not_the_guide_s_fails_the_part(monkeypatch, tmp_path):
    wrong = tmp_path / "wrong.toml"
    wrong.write_text(re.sub(r"\btwice can\b", "twice cannot", LARGER.read_text()))
    result, out = _part(monkeypatch, [wrong], 0)
    assert result.failed == 1 and not result.ok and result.exit_code == exits.FOUND
    assert "wrong: twice: can happen (found" in out
