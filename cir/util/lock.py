"""One writer per folder: a lock file that names its owner (pid, host, start time).

The lock itself is an advisory ``flock`` on the file, which the kernel releases when the
owning process ends, however it ends (``kill -9`` included); so a lock left behind by a
dead process is never taken for a live one, and the next writer takes it over with a
note naming the dead owner. The pid and host in the file are for those messages. A lock
written on another host cannot be checked from here and is refused with a hint instead.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import time
from pathlib import Path
from typing import Any

from cir.util.errors import CirError
from cir.util.files import disk_error

log = logging.getLogger(__name__)

LOCK_FILE = "run.lock"


def _owner_text(owner: dict[str, Any]) -> str:
    return (f"pid {owner.get('pid', '?')} on host {owner.get('host', '?')}, "
            f"started {owner.get('started', '?')}")


def _read_owner(fd: int) -> dict[str, Any]:
    """The owner record in an open lock file ({} if empty or unreadable)."""
    os.lseek(fd, 0, os.SEEK_SET)
    raw = os.read(fd, 4096)
    try:
        owner = json.loads(raw.decode("utf-8")) if raw.strip() else {}
    except (UnicodeDecodeError, ValueError):
        return {"unreadable": raw[:60].decode("utf-8", "replace")}
    return owner if isinstance(owner, dict) else {}


class FolderLock:
    """Exclusive writer lock on ``folder`` (``with FolderLock(folder): ...``).

    ``acquire`` raises :class:`CirError` when a live process holds the lock; a lock left
    by a dead process on this host is taken over, and ``taken_over_`` holds its owner.
    """

    def __init__(self, folder: str | Path, what: str = "run folder") -> None:
        self.folder = Path(folder)
        self.path = self.folder / LOCK_FILE
        self.what = what
        self.taken_over_: dict[str, Any] | None = None
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> FolderLock:
        if self._fd is not None:
            return self
        host = socket.gethostname()
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as err:
                raise disk_error(self.path, err, "create the lock file") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                owner = _read_owner(fd)
                os.close(fd)
                raise CirError(
                    f"{self.folder}: another cir process is writing this {self.what} "
                    f"({_owner_text(owner)}); wait for it to finish or stop it") from None
            except OSError as err:  # a file system without locks
                os.close(fd)
                raise disk_error(self.path, err, "lock") from None
            # the previous owner may have removed the file between our open and flock
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        previous = _read_owner(fd)
        if previous and previous.get("host", host) != host:
            os.close(fd)
            raise CirError(
                f"{self.folder}: locked by a cir process on another host ({_owner_text(previous)}); "
                f"if it is no longer running, remove {self.path}")
        if previous:
            self.taken_over_ = previous
            log.warning("%s: took over the lock of a cir process that is no longer running (%s)",
                        self.folder, _owner_text(previous))
        record = {"pid": os.getpid(), "host": host,
                  "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(record) + "\n").encode("utf-8"), 0)
            os.fsync(fd)
        except OSError as err:
            os.close(fd)
            raise disk_error(self.path, err) from None
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            os.unlink(self.path)  # before unlocking, so no one locks a file about to vanish
        except OSError:
            pass  # a read-only folder: the flock still goes with the descriptor
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
