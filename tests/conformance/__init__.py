"""The conformance suite: generated client programs run against a broker, every recording judged by the
spec (tests/conformance/programs.py, targets.py, judge.py); `python -m tests.conformance --url ...`."""
from hypothesis import HealthCheck, settings

# CI: a fixed budget, derandomized (the same programs every run); `make conformance` draws more, at random.
settings.register_profile("conformance-ci", derandomize=True, deadline=None, database=None,
                          suppress_health_check=list(HealthCheck), print_blob=False)
settings.register_profile("conformance", derandomize=False, deadline=None, database=None,
                          suppress_health_check=list(HealthCheck))


def budget(examples: int) -> settings:
    """The settings of a generated test: `examples` programs under CI's fixed-seed profile."""
    return settings(settings.get_profile("conformance-ci"), max_examples=examples)
