"""A full disk that strikes a named file: the n-th durable write of ``run.json`` fails.

Every writer of a run folder makes its bytes durable with ``os.fsync`` (the store's appends,
the atomic rewrites of the table and the record through a temporary file beside them, the
lock file), so a fault there is a fault of that write. The fault is keyed by *what* is
written, the file and how many times it was written before, never by a count of all fsync
calls: how many writes a run makes in all depends on timing (the table and the record are
rewritten only when the last rewrite is old enough), the n-th write of one file does not.
"""

from __future__ import annotations

import errno
import os
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

# tempfile.mkstemp(prefix=".NAME.", suffix=".tmp"): cir.util.files.write_bytes_atomic's temporary file
_TEMP = re.compile(r"^\.(?P<name>.+)\.[A-Za-z0-9_]+\.tmp$")


def _path_of(fd: int) -> str:
    if sys.platform.startswith("linux"):
        return os.readlink(f"/proc/self/fd/{fd}")
    import fcntl

    if hasattr(fcntl, "F_GETPATH"):  # macOS
        return fcntl.fcntl(fd, fcntl.F_GETPATH, b"\0" * 1024).rstrip(b"\0").decode()
    pytest.skip("naming the file behind a descriptor needs /proc or F_GETPATH")


def written_name(fd: int) -> str:
    """The name of the file a descriptor writes, as its writer means it (a temporary file of an
    atomic write by its target's name)."""
    name = Path(_path_of(fd)).name
    temp = _TEMP.match(name)
    return temp.group("name") if temp else name


class FailingWrite:
    """The ``nth`` write of the file called ``name`` (1 for its first) fails with ``code``.

    ``install(monkeypatch)`` patches ``os.fsync``; ``writes`` counts each file's writes seen,
    ``fired`` says whether the fault struck (a test asserts it: a fault that never fires tests
    nothing)."""

    def __init__(self, name: str, nth: int = 1, code: int = errno.ENOSPC) -> None:
        self.name, self.nth, self.code = name, nth, code
        self.writes: Counter[str] = Counter()
        self.fired = False

    def install(self, monkeypatch: pytest.MonkeyPatch) -> FailingWrite:
        real = os.fsync

        def fsync(fd: int) -> None:
            name = written_name(fd if isinstance(fd, int) else fd.fileno())
            self.writes[name] += 1
            if name == self.name and self.writes[name] == self.nth:
                self.fired = True
                raise OSError(self.code, os.strerror(self.code))
            return real(fd)

        monkeypatch.setattr(os, "fsync", fsync)
        return self
