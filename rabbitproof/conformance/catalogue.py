"""The rule catalogue as the conformance suite reports on it: every rule ID of the rules table (rabbitproof/rules.toml,
where each is said in one sentence) and, for the rules no program the suite sends can show broken, why not.

Coverage is counted over this whole catalogue (coverage.py), not over the rules some spec action cites:
a rule is covered when a program written to show it (probes.py) or a generated program that exercises
its family was accepted; a rule listed in ``UNOBSERVABLE`` is reported with its reason instead.
"""
from __future__ import annotations

from rabbitproof.rules import table

# Every rule ID, in the order of the rules table (rabbitproof/rules.toml, `rabbitproof rules ID` says each).
RULES: tuple[str, ...] = tuple(table().rules)

# Rules a program run against a live broker cannot show broken, and why (the rest are observable).
UNOBSERVABLE = {
    "PC-7": "it allows confirms in any order: nothing a broker does can break it",
    "RQ-3": "it allows a consumer to see messages out of order: nothing a broker does can break it",
    "RQ-6": "it allows requeue loops: nothing a broker does can break it",
    "PF-5": "it allows deliveries already sent beyond a lowered bound: nothing a broker does can break it",
    "TX-9": "it allows any subset of a transaction after a crash: nothing a broker does can break it",
    "PC-6": "a nack needs a queue that fails to take a message, which no client can cause",
}

# Rules only programs that crash the broker can show (--kill-cmd and --start-cmd).
NEED_CRASHES = ("DU-1", "DU-2", "DU-3", "PC-5", "PC-10", "TX-8")


def family(rule: str) -> str:
    """The family of a rule ID: "ACK" for "ACK-4"."""
    return rule.split("-")[0]


def ordered(rules) -> list:
    """Rule IDs in catalogue order."""
    order = {rule: n for n, rule in enumerate(RULES)}
    return sorted(set(rules), key=lambda r: order.get(r, len(order)))
