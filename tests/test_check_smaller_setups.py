"""What the tutorial tells a user whose setup is too large (docs/tutorial/check-your-setup.md): a message
lost, processed twice or seen out of order in a smaller setup (fewer publishers, consumers, messages or
faults, the same settings otherwise) can be in the larger one too, since what the smaller one lacks can
wait until after it. Held here on pairs around the issue's setup, each pair's larger one small enough
to search in full; a pair where the larger one answers more shows the rule is not empty."""
from __future__ import annotations

import pytest

from rabbitproof.spark_check.engine import LocalEngine

from rabbitproof.check.answers import DEFAULT_REDUCTIONS, check_setup
from rabbitproof.check.setup_file import read_setup

SAFETY = ("lost", "twice", "order")


def setup_text(publishers: tuple[int, ...], consumers: int, faults: tuple[str, ...], acks: str = "manual") -> str:
    """Publishers of confirmed persistent messages (their message counts) and alike consumers of one
    durable queue, with these faults."""
    text = "[queues.jobs]\ndurable = true\n"
    for n, messages in enumerate(publishers, 1):
        text += (f'\n[[publishers]]\nname = "p{n}"\nqueue = "jobs"\nconfirms = true\npersistent = true\n'
                 f"messages = {messages}\n")
    for n in range(1, consumers + 1):
        text += f'\n[[consumers]]\nname = "w{n}"\nqueue = "jobs"\nprefetch = 1\nacks = "{acks}"\n'
    return text + "\n[faults]\n" + "".join(f"{f} = true\n" for f in faults)


def can_happen(tmp_path, name: str, text: str) -> set[str]:
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    report = check_setup(read_setup(path), LocalEngine(reductions=DEFAULT_REDUCTIONS))
    assert report.result.error is None, report.result.error          # searched in full
    return {a.key for a in report.answers if a.happens and a.key in SAFETY}


BOTH = ("broker_crash", "connection_closed")
PAIRS = {   # name: (smaller, larger)
    "a second consumer": (setup_text((2,), 1, BOTH), setup_text((2,), 2, BOTH)),
    "a second message": (setup_text((1,), 2, BOTH), setup_text((2,), 2, BOTH)),
    "a second fault": (setup_text((2,), 2, ("broker_crash",)), setup_text((2,), 2, BOTH)),
    "a second publisher": (setup_text((1,), 1, BOTH), setup_text((1, 1), 1, BOTH)),
    "automatic acks, a second consumer": (setup_text((1,), 1, ("connection_closed",), "automatic"),
                                          setup_text((1,), 2, ("connection_closed",), "automatic")),
}


@pytest.mark.parametrize("name", PAIRS)
def test_what_a_smaller_setup_can_do_the_larger_one_can(tmp_path, name):
    smaller, larger = PAIRS[name]
    assert can_happen(tmp_path, "smaller", smaller) <= can_happen(tmp_path, "larger", larger)


def test_the_larger_setup_can_answer_more(tmp_path):
    """Out of order needs two consumers here: the rule goes one way only."""
    smaller, larger = PAIRS["a second consumer"]
    assert "order" not in can_happen(tmp_path, "smaller", smaller)
    assert "order" in can_happen(tmp_path, "larger", larger)
