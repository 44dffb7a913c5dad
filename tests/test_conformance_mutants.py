"""The oracle is tested: each planted bug (tests/fixtures/mutants.py) in a copy of the broker (its
core or its server) is caught by the test the mutant names, within CI's budget (the same fixed-seed
programs as `make test`), and caught by the spec (a rejected trace), not by a crash of the test. A patch gone stale after a change
to impl/ fails here with StalePatch."""
from __future__ import annotations

import pytest

from tests.fixtures.mutants import ALL_MUTANTS, MUTANTS, REPO, Mutant, StalePatch, patch, run_catching_test


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_mutant_is_caught_by_the_spec(mutant: Mutant, tmp_path):
    result = run_catching_test(mutant, tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 1, f"{mutant.name} ({mutant.rule}) survived {mutant.caught_by}:\n{output[-3000:]}"
    assert "the spec does not accept this run" in output, output[-3000:]
    assert f"FAILED {mutant.caught_by}" in output, output[-3000:]


def test_at_least_twelve_mutants_are_planted_and_all_are_tested():
    assert len(ALL_MUTANTS) >= 12 and MUTANTS == ALL_MUTANTS
    assert len({m.name for m in ALL_MUTANTS}) == len(ALL_MUTANTS)


def test_a_stale_patch_fails_loudly():
    text = (REPO / "impl" / "core" / "queues.py").read_text()
    stale = Mutant("stale", "core/queues.py", "text that is not there", "x", "", "")
    with pytest.raises(StalePatch, match="occurs 0 times"):
        patch(text, stale)
    for mutant in ALL_MUTANTS:
        patch((REPO / "impl" / mutant.file).read_text(), mutant)
