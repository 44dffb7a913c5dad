"""The rules in the box (rabbitproof.rules, rabbitproof/rules.toml): every reference of the table exists, every
rule ID the code, the docs and `check`'s answers on the examples cite is in the table, the reference page is
the table's, no page links out of the repository, and `rabbitproof rules` shows one rule or all of them."""
from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest

from rabbitproof.model.invariants import HELPERS, INVARIANTS
from rabbitproof.spec.properties import LIVENESS, REGISTRY

from rabbitproof import reference, rules
from tests.fixtures.command_line import run

ROOT = Path(__file__).resolve().parent.parent
TABLE = rules.table()
# Where the product cites rules: its code, its docs and its examples.
PRODUCT = ("spec", "model", "proofs", "impl", "rabbitproof", "docs", "examples")
TEXT_FILES = ("*.py", "*.md", "*.toml", "*.json", "*.trace")
NOT_RULES = {"UTF-8"}       # what reads like a rule ID and is not one
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def product_files() -> list[Path]:
    files = [ROOT / "README.md"]
    for folder in PRODUCT:
        files += sorted(p for pattern in TEXT_FILES for p in (ROOT / folder).rglob(pattern))
    return files


def resolves(dotted: str) -> bool:
    """Whether ``spec.broker.settled_tags`` (under the rabbitproof namespace) names something that exists."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module("rabbitproof." + ".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            found = getattr(found, part, None)
            if found is None:
                return False
        return True
    return False


def test_the_table_holds_every_family_in_order_and_every_rule_once():
    assert list(TABLE.families) == ["DT", "AM", "ACK", "PF", "RQ", "DS", "PC", "TX", "DU", "ER", "RT"]
    ids = list(TABLE.rules)
    assert len(ids) == len(set(ids)) == 57
    order = [list(TABLE.families).index(i.split("-")[0]) for i in ids]
    assert order == sorted(order)
    assert all(r.title and r.says.endswith(".") and len(r.says) < 400 for r in TABLE.rules.values())


def test_a_rule_twice_or_outside_a_family_is_refused():
    entry = '[[rule]]\nid = "AM-1"\ntitle = "t"\nsays = "s."\n'
    with pytest.raises(ValueError, match="AM-1 is in the table twice"):
        rules.parse('[families]\nAM = "a"\n' + entry + entry)
    with pytest.raises(ValueError, match="ZZ-1 belongs to no family"):
        rules.parse('[families]\nAM = "a"\n' + entry.replace("AM-1", "ZZ-1"))


@pytest.mark.parametrize("rule", TABLE.rules.values(), ids=lambda r: r.id)
def test_every_reference_of_a_rule_exists(rule: rules.Rule):
    assert [m for m in rule.modelled if not (m.startswith("spec.") and resolves(m))] == []
    properties = {**REGISTRY, **LIVENESS}
    for ref in rule.proved:
        kind, _, name = ref.partition(":")
        assert (kind, name in properties if kind == "property" else name in {**INVARIANTS, **HELPERS}) \
            == (kind, True), ref
        if kind == "property":
            assert rule.id in properties[name].rules, f"{name} does not say it checks {rule.id}"
    assert [t for t in rule.tested if not (t.startswith("tests/") and (ROOT / t).is_file())] == []


def test_the_properties_listed_are_those_that_cite_the_rule():
    """The table cannot drift from the spec's registries: a property citing a rule is listed with it."""
    for rule in TABLE.rules.values():
        citing = {n for n, p in {**REGISTRY, **LIVENESS}.items() if rule.id in p.rules}
        listed = {r.split(":", 1)[1] for r in rule.proved if r.startswith("property:")}
        assert listed == citing, rule.id


def test_a_missing_reference_is_caught():
    assert resolves("spec.broker.settled_tags") and not resolves("spec.broker.no_such_function")
    assert not resolves("spec.no_such_module.anything")


def test_ranges_are_spelled_out():
    assert rules.cited("DU-1..3 and PC-10, not UTF-8 twice") == {"DU-1", "DU-2", "DU-3", "PC-10", "UTF-8"}


def test_every_rule_the_code_and_the_docs_cite_is_in_the_table():
    unknown = {}
    for path in product_files():
        for rule_id in rules.cited(path.read_text(encoding="utf-8", errors="replace")) - NOT_RULES:
            if rule_id not in TABLE.rules:
                unknown.setdefault(rule_id, str(path.relative_to(ROOT)))
    assert unknown == {}


def test_every_rule_the_answers_on_the_examples_cite_is_in_the_table(capsys):
    """`check` on every example, as a user runs it (advice included): each ID it prints resolves."""
    seen: set[str] = set()
    for example in sorted((ROOT / "examples").glob("*.toml")):
        code, out, _ = run(["check", str(example), "--no-progress"], capsys, width=200)
        assert code in (0, 1), example.name
        seen |= rules.cited(out)
    assert seen - NOT_RULES <= set(TABLE.rules), seen - set(TABLE.rules)
    assert {"AM-2", "PC-10", "RQ-4", "TX-8"} <= seen        # the answers do cite rules


def test_the_reference_page_is_the_tables():
    page = ROOT / "docs" / "reference" / "rules.md"
    text = page.read_text(encoding="utf-8")
    assert reference.refresh(text) == text, \
        "docs/reference/rules.md differs from rabbitproof/rules.toml: run `python -m rabbitproof.reference --write`"
    assert all(f"#### {r.id} {r.title}" in text for r in TABLE.rules.values())


@pytest.mark.parametrize("page", [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_links_out_of_the_repository(page: Path):
    outside = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            if "SEMANTICS" in target:
                outside.append(target)
            continue
        path = (page.parent / target.split("#")[0]).resolve()
        if not path.is_relative_to(ROOT) or "SEMANTICS" in target:
            outside.append(target)
    assert outside == [], f"{page.relative_to(ROOT)} links out of the repository: {outside}"


def test_rules_lists_every_rule(capsys):
    code, out, _ = run(["rules"], capsys)
    assert code == 0
    assert all(rule_id in out for rule_id in TABLE.rules) and "57 rules" in out
    assert out.splitlines()[-1] == "rules: listed: 57 rules (exit 0)"


def test_rules_shows_one_rule_in_full_whatever_its_case(capsys):
    code, out, _ = run(["rules", "pc-10"], capsys)
    rule = TABLE.rules["PC-10"]
    assert code == 0 and out.startswith(f"PC-10 {rule.title}")
    assert "invariant:confirmed_survives_crash" in out and "tests/test_broker_crash.py" in out
    assert out.splitlines()[-1] == "rules: listed: PC-10 (exit 0)"


def test_rules_json_is_one_document(capsys):
    code, out, _ = run(["rules", "RQ-4", "--json"], capsys)
    document = json.loads(out)
    assert code == 0 and document["schema"] == "rabbitproof.rules/1"
    assert (document["exit_code"], document["verdict"]) == (0, "nothing found")
    assert [r["id"] for r in document["rules"]] == ["RQ-4"] and document["rules"][0]["tested"]


def test_an_unknown_rule_is_refused_naming_the_families(capsys):
    code, out, err = run(["rules", "QQ-9"], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "unknown rule 'QQ-9'" in err and "DT, AM, ACK, PF, RQ, DS, PC, TX, DU, ER, RT" in err
