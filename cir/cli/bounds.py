"""Bounds on command-line numbers: what the tools can hold, with one clear line beyond it.

A typo such as ``--resamples 1000000000`` must not turn into a 100 GiB allocation, nor
``--delays 99999999999999999999`` into a table that cannot be read back.
"""

from __future__ import annotations

from cir.errors import CirError

#: Bootstrap resamples at most (10,000 is the paper's; replicates are held as floats per group).
MAX_RESAMPLES = 1_000_000
#: Tasks per generated split at most (the manifest lists them all).
MAX_TASKS = 1_000_000
#: Model turns and env actions per episode at most (the paper's budgets are 49 and 64).
MAX_BUDGET = 100_000


def check_int(flag: str, value: int, low: int, high: int | None = None) -> int:
    """``value`` if ``low <= value <= high``; else a CirError naming the flag and the range."""
    if value < low or (high is not None and value > high):
        expected = f"an integer >= {low}" if high is None else f"an integer from {low} to {high}"
        raise CirError(f"{flag} {value}: expected {expected}")
    return value
