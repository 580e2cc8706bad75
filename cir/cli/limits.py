"""Bounds on what a command may use: numbers the tools can hold, one writer per output folder.

A typo such as ``--resamples 1000000000`` must not turn into a 100 GiB allocation, nor
``--delays 99999999999999999999`` into a table that cannot be read back; and two commands
writing one output folder must not interleave (the second is refused with one line).
"""

from __future__ import annotations

from pathlib import Path

from cir.episode.protocol import MAX_BUDGET, MAX_SEED
from cir.util.errors import CirError
from cir.util.files import disk_error
from cir.util.lock import FolderLock

__all__ = ["MAX_BUDGET", "MAX_RESAMPLES", "MAX_SEED", "MAX_TASKS", "check_int", "writer_lock"]

#: Bootstrap resamples at most (10,000 is the paper's; replicates are held as floats per group).
MAX_RESAMPLES = 1_000_000
#: Tasks per generated split at most (the manifest lists them all).
MAX_TASKS = 1_000_000


def check_int(flag: str, value: int, low: int, high: int | None = None) -> int:
    """``value`` if ``low <= value <= high``; else a CirError naming the flag and the range."""
    if value < low or (high is not None and value > high):
        expected = f"an integer >= {low}" if high is None else f"an integer from {low} to {high}"
        raise CirError(f"{flag} {value}: expected {expected}")
    return value


def writer_lock(folder: Path, what: str) -> FolderLock:
    """The writer lock of an output folder (created if needed): ``with writer_lock(...):``."""
    if folder.exists() and not folder.is_dir():
        raise CirError(f"{folder}: exists and is not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise disk_error(folder, err, "create the folder") from None
    return FolderLock(folder, what)
