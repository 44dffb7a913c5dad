"""The rules the specification keeps (ACK-2, RQ-4, PC-10, ...), read from the table shipped with the package.

Every answer of `rabbitproof` cites rules by ID; rabbitproof/rules.toml holds each one: its title, one
sentence saying what it asks of a broker, and where it is modelled (functions of the spec), proved
(properties explored on every configuration, invariants Z3 proves for every size) and tested (test files).
docs/reference/rules.md is generated from the table (rabbitproof.reference) and `rabbitproof rules [ID]`
prints it, so that every cited ID can be looked up without leaving the package.
"""
from __future__ import annotations

import argparse
import re
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources

from rich.console import Console
from rich.table import Table

from rabbitproof.exits import NOTHING_FOUND
from rabbitproof.output import print_json, verdict_line
from rabbitproof.spark_check.bundle import InputError

# A rule ID as the code and the docs write it, with the ranges they use ("DU-1..3" is DU-1, DU-2, DU-3).
CITED = re.compile(r"\b([A-Z]{2,3})-(\d+)(?:\.\.(\d+))?\b")


@dataclass(frozen=True)
class Rule:
    """One rule: its ID, a title, what it says in one sentence, and where it is modelled, proved, tested."""

    id: str
    title: str
    says: str
    modelled: tuple[str, ...]
    proved: tuple[str, ...]
    tested: tuple[str, ...]

    @property
    def family(self) -> str:
        return self.id.split("-")[0]


@dataclass(frozen=True)
class RuleTable:
    """The whole table: the families (ID prefix and name) in order, and every rule by ID."""

    families: dict[str, str]
    rules: dict[str, Rule]

    def get(self, rule_id: str) -> Rule:
        """The rule of ``rule_id`` (any case); InputError naming the known families when there is none."""
        rule = self.rules.get(rule_id.strip().upper())
        if rule is None:
            raise InputError(f"unknown rule {rule_id!r}: rule IDs are a family and a number, the families "
                             f"being {', '.join(self.families)} (for example {next(iter(self.rules))})")
        return rule


def parse(text: str) -> RuleTable:
    """A rule table from the text of a rules.toml."""
    data = tomllib.loads(text)
    rules = {}
    for entry in data["rule"]:
        rule = Rule(entry["id"], entry["title"], entry["says"], tuple(entry.get("modelled", ())),
                    tuple(entry.get("proved", ())), tuple(entry.get("tested", ())))
        if rule.id in rules:
            raise ValueError(f"rule {rule.id} is in the table twice")
        if rule.family not in data["families"]:
            raise ValueError(f"rule {rule.id} belongs to no family of the table")
        rules[rule.id] = rule
    return RuleTable(dict(data["families"]), rules)


@cache
def table() -> RuleTable:
    """The table shipped with the package."""
    return parse(resources.files("rabbitproof").joinpath("rules.toml").read_text(encoding="utf-8"))


def cited(text: str) -> set[str]:
    """Every rule ID ``text`` cites, ranges spelled out; also what only looks like one (UTF-8), which the
    caller tells apart."""
    found = set()
    for match in CITED.finditer(text):
        first = int(match.group(2))
        last = int(match.group(3) or first)
        found |= {f"{match.group(1)}-{n}" for n in range(first, last + 1)}
    return found


# --- the `rabbitproof rules` subcommand ------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The rule to show, and --json."""
    parser.add_argument("rule", nargs="?", metavar="ID", help="one rule to show in full (ACK-2, rq-4, ...); "
                                                             "without it, every rule in one table")
    parser.add_argument("--json", action="store_true", help="print the rules as one JSON document on stdout")


def run(args: argparse.Namespace, out: Console) -> int:
    """Print every rule, or one in full; exit 2 for an ID the table does not hold."""
    rules = table()
    chosen = [rules.get(args.rule)] if args.rule else list(rules.rules.values())
    if args.json:
        print_json(out, "rules", {"rules": [
            {"id": r.id, "family": rules.families[r.family], "title": r.title, "says": r.says,
             "modelled": list(r.modelled), "proved": list(r.proved), "tested": list(r.tested)} for r in chosen]},
                   NOTHING_FOUND)
        return NOTHING_FOUND
    if args.rule:
        show_one(chosen[0], rules, out)
    else:
        show_all(rules, out)
    verdict_line(out, "rules", NOTHING_FOUND, words="listed",
                 detail=chosen[0].id if args.rule else f"{len(chosen)} rules")
    return NOTHING_FOUND


def show_all(rules: RuleTable, out: Console) -> None:
    """Every rule in one table: ID, title, what it says."""
    grid = Table(show_lines=False, pad_edge=False)
    grid.add_column("ID", no_wrap=True)
    grid.add_column("rule")
    grid.add_column("what it says", ratio=1)
    for rule in rules.rules.values():
        grid.add_row(rule.id, rule.title, rule.says)
    out.print(grid)
    out.print(f"{len(rules.rules)} rules. `rabbitproof rules ID` shows where one is modelled, proved and tested.")


def show_one(rule: Rule, rules: RuleTable, out: Console) -> None:
    """One rule in full, with where it is modelled, proved and tested."""
    out.print(f"[bold]{rule.id}[/bold] {rule.title} ({rules.families[rule.family].lower()})", highlight=False)
    out.print(rule.says, highlight=False)
    for label, refs in (("modelled in", rule.modelled), ("checked or proved by", rule.proved), ("tested in", rule.tested)):
        out.print(f"{label}: " + (", ".join(refs) if refs else "none yet"), highlight=False, soft_wrap=False)

