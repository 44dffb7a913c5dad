"""One scheme of exit codes and one form of `--json` for every subcommand (docs/reference/cli.md).

- 0 ``NOTHING_FOUND``: the run finished and found nothing (all safe, accepted, passed);
- 1 ``FOUND``: something was found (can happen, rejected, violated, a finding);
- 2 ``BAD_INPUT``: usage or input error, refused before any work (or a missing extra);
- 3 ``UNDECIDED``: the run stopped before it could decide (time limit, state cap, Ctrl-C, a solver's unknown).

Every `--json` document is one object on stdout whose ``schema`` field names the subcommand and the version
of its form (``schema("check")`` is ``"rabbitproof.check/1"``)."""
from __future__ import annotations

NOTHING_FOUND = 0
FOUND = 1
BAD_INPUT = 2
UNDECIDED = 3

SCHEMA_VERSION = 1


def schema(subcommand: str) -> str:
    """The ``schema`` field of ``subcommand``'s `--json` document."""
    return f"rabbitproof.{subcommand}/{SCHEMA_VERSION}"


def worst(codes: list[int]) -> int:
    """The exit code of a run made of parts: a finding outweighs an undecided part, which outweighs a clean
    one; bad input outweighs all."""
    for code in (BAD_INPUT, FOUND, UNDECIDED):
        if code in codes:
            return code
    return NOTHING_FOUND
