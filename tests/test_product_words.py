"""Words a user knows: the product's docs, README, examples, the help of every subcommand and the text of
its code say nothing that only makes sense inside the project's own history (an issue number, the issue's
setup, the nth session of work, the seed documents, the helpers that worked on it), the Makefile's help and
every installed module included."""
from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from rabbitproof import reference
from rabbitproof.bench.command import PARTS
from rabbitproof.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
# Each pattern names what it catches; "seed" alone (a random seed) and "helper" alone (a proof helper, an
# invariant that makes another inductive) are words of the trade and stay allowed.
INSIDE_WORDS = re.compile(
    r"\bissues?\s+#?\d+"                                   # issue 23, issues 24
    r"|\bthe\s+issue(?:'s)?\b"                             # the setup, the issue asks
    r"|\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|last|this|that|next|previous|earlier"
    r"|other|another|one|two|three|helper)\s+sessions?\b"  # the fifth session, two other sessions
    r"|\bthe\s+seeds\b|\bseeds?'\s+advice|\bseeds\s+(?:recommend|say|said)|\bseed\s+documents?\b"
    r"|\bother\s+helpers\b|\bhelpers?\s+sessions?\b",
    re.I)


SHIPPED = ("rabbitproof", "spec", "model", "impl", "proofs", "spark_check")     # what `pip install .` installs


def product_files() -> list[Path]:
    return ([ROOT / "README.md", ROOT / "Makefile", ROOT / "pyproject.toml", ROOT / "rabbitproof" / "rules.toml"]
            + sorted((ROOT / "docs").rglob("*.md")) + sorted((ROOT / "examples").rglob("*.toml"))
            + sorted(p for folder in SHIPPED for p in (ROOT / folder).rglob("*.py")))


def inside_words(text: str) -> list[str]:
    return [m.group(0) for m in INSIDE_WORDS.finditer(text)]


def test_the_pattern_catches_what_it_is_for_and_spares_the_trade_words():
    caught = ("the seeds recommend", "the issue's setup", "before the fifth session", "issue 23's setup",
              "issue 24, item 3", "two other sessions running", "The seeds' advice")
    assert [t for t in caught if not inside_words(t)] == []
    spared = ("random seed 11", "its helper `confirms_in_step`", "tags are issued", "a Spark session starts",
              "to issue a larger one")
    assert [t for t in spared if inside_words(t)] == []


@pytest.mark.parametrize("path", product_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_project_words_in_the_product_text(path: Path):
    found = [f"line {n}: {w!r}" for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             for w in inside_words(line)]
    assert found == [], f"{path.relative_to(ROOT)}: {found}"


def test_no_project_words_in_the_help_of_any_subcommand():
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {"rabbitproof": parser.format_help()}
    helps |= {name: sub.format_help() for name, sub in subparsers.choices.items()}
    helps |= {f"bench {part}": reference.bench_part_parser(main).format_help() + doc
              for part, (main, doc) in PARTS.items()}
    assert len(helps) > len(subparsers.choices) + 1
    assert {name: inside_words(text) for name, text in helps.items() if inside_words(text)} == {}
