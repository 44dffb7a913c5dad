"""The conformance suite: generated client programs run against a broker, every recording judged by the
spec (programs.py, targets.py, judge.py); `rabbitproof conformance URL` (command.py)."""
import os

from hypothesis import HealthCheck, Phase, settings

# CI: a fixed budget, derandomized (the same programs every run); `make conformance` draws more, at random.
settings.register_profile("conformance-ci", derandomize=True, deadline=None, database=None,
                          suppress_health_check=list(HealthCheck), print_blob=False)

# The mutant tests (tests/test_conformance_mutants.py) only need to know a test fails: no shrinking.
NO_SHRINK = os.environ.get("RABBITPROOF_CONFORMANCE_NO_SHRINK") == "1"


def budget(examples: int) -> settings:
    """The settings of a generated test: `examples` programs under CI's fixed-seed profile."""
    phases = [p for p in Phase if p is not Phase.shrink] if NO_SHRINK else list(Phase)
    return settings(settings.get_profile("conformance-ci"), max_examples=examples, phases=phases)
