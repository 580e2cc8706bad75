"""A persistent response cache: replies appended to one log per process, read back by all.

Paired branches share their prefix and reruns repeat whole episodes, so the same
request reaches the model many times; with greedy decoding and a cache the answer is
fixed the first time and costs nothing afterwards. Each process appends its replies to
its own log in the cache folder (``replies-<host>-<pid>.jsonl``, one line a reply, one
``write`` each), so writers never share a file and a reply costs one system call, not a
temporary file and a rename. Readers index every log in the folder (the key sits at a
fixed place in each line) and read a record when it is asked for. A line is only read
once it ends in a newline: a reply cut by a crash or a power cut (the logs are not
fsynced) reads as a miss and is asked again, and the next writer of that log starts a
new line after it.

A process that is about to ask the server for a key holds a lock on one byte of
``asking.lock`` (the byte at a hash of the key), so another process asking the same waits,
then reads the logs again and finds the reply; threads of one process wait on a lock of
their own. That keeps the requests those of a run with one request at a time at any
number of processes.

Only valid answers are stored (a non-empty ``text``): a record without one, written by an
older version that cached a server's null or empty reply, counts as a miss, so a fixed
server is asked again instead of the bad answer being reused.

A cache can read through to other caches (``fallback``), never writing to them: a run
that extends an earlier one answers from the earlier run's cache and copies what it uses
into its own, so it is complete on its own and the earlier folder is left as it was.
Folders written by earlier versions (one file a reply, ``<key[:2]>/<key>.json``) are read
too, own or fallback.

A record holds the answer's ``text`` and what came with it (``finish_reason``, and
``usage``, ``logprobs`` or ``reasoning`` when there were some). One cache may be used by
several threads.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import re
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cir.util.errors import CirError, CirValueError
from cir.util.files import disk_error

LOG_PREFIX, LOG_SUFFIX = "replies-", ".jsonl"
ASKING_LOCK = "asking.lock"
# a log line: {"key": "<64 hex>", "record": {...}}; the key is read without parsing the line
_HEAD = b'{"key": "'
_KEY_END = len(_HEAD) + 64
_LEGACY_FOLDER = re.compile(r"^[0-9a-f]{2}$")


def request_key(endpoint: str, body: dict[str, Any]) -> str:
    """Stable key of one request: the endpoint kind and the full JSON body.

    The body holds the model, the messages or prompt and every decoding setting, so a
    change to any of them is a different key; the server address and key are not in it
    (the same model behind another address gives the same answer).
    """
    payload = json.dumps({"endpoint": endpoint, "body": body}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def valid_record(record: Any) -> bool:
    """Whether a cached record holds an answer: a dict with a non-empty ``text``."""
    return isinstance(record, dict) and isinstance(record.get("text"), str) \
        and bool(record["text"].strip())


class ResponseCache:
    """Replies kept in ``root`` (see the module's text); ``root=None`` keeps them in memory.

    ``fallback``: cache folders read (never written) on a miss; a reply found there is
    stored under ``root`` too. ``hits_memory`` and ``hits_disk`` (fallbacks included) count
    where answers came from.
    """

    def __init__(self, root: str | Path | None = None, fallback: Sequence[str | Path] = ()) -> None:
        self.root = Path(root) if root is not None else None
        self.fallback = [Path(f) for f in fallback if self.root is None
                         or Path(f).resolve() != self.root.resolve()]
        for folder in self.fallback:
            if not folder.is_dir():
                raise CirError(f"cache folder {folder}: not found (a cache to reuse must exist)")
        self._memory: dict[str, dict[str, Any]] = {}
        self.hits_memory = 0
        self.hits_disk = 0
        if self.root is not None:
            if self.root.exists() and not self.root.is_dir():
                raise CirError(f"cache folder {self.root}: exists but is not a folder")
            try:
                self.root.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise disk_error(self.root, exc, "create the cache folder") from exc
        self._start()

    def _start(self) -> None:
        """The per-process state: the folders as this process reads them (one index per
        folder and process, shared by every cache object using it)."""
        self._lock = threading.Lock()  # the counters
        self._pid = os.getpid()
        self._own = _Folder.of(self.root) if self.root is not None else None
        self._others = [_Folder.of(root) for root in self.fallback]
        self._looked = False  # the first get reads what the folders gained since

    def _here(self) -> _Folder | None:
        """The own folder as this process uses it."""
        if self._pid != os.getpid():  # forked: the parent's indexes are not this process's
            self._start()
        return self._own

    def _folders(self) -> list[_Folder]:
        own = self._here()
        folders = ([own] if own is not None else []) + self._others
        if not self._looked:
            for folder in folders:
                folder.refresh()
            self._looked = True
        return folders

    def _hit_disk(self, key: str, record: dict[str, Any]) -> dict[str, Any]:
        self._memory[key] = record
        with self._lock:
            self.hits_disk += 1
        return record

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored record for ``key``, or None. A damaged or empty answer counts as a miss.

        On disk, what the folders held when this cache first looked, what it stored itself
        and what :meth:`stored` has read since (a reply another process stores meanwhile is
        found by :meth:`stored`, after :meth:`asking`)."""
        return self.lookup(key)[0]

    def lookup(self, key: str) -> tuple[dict[str, Any] | None, str | None]:
        """:meth:`get`, and where the record came from: ``"memory"``, ``"disk"`` or None (a miss)."""
        record = self._memory.get(key)
        if record is not None:
            with self._lock:
                self.hits_memory += 1
            return record, "memory"
        for folder in self._folders():
            record = folder.record(key)
            if record is not None:
                if folder is not self._own:
                    self.put(key, record)  # copied: the own folder is complete on its own
                return self._hit_disk(key, record), "disk"
        return None, None

    def put(self, key: str, record: dict[str, Any]) -> None:
        """Store ``record`` (a valid answer: non-empty ``text``) under ``key``: one line
        appended to this process's log."""
        if not valid_record(record):
            raise CirValueError(f"reply cache: not an answer to keep (no text): {record!r:.200}")
        self._memory[key] = record
        own = self._here()
        if own is not None:
            own.append(key, record)

    @contextmanager
    def asking(self, key: str) -> Iterator[None]:
        """Held while this process asks the server for ``key``: another agent (thread or
        process) that uses this cache folder and asks for the same waits, then finds the
        reply stored (:meth:`stored`)."""
        if self.root is None:
            yield
            return
        with self._here().asking(key):
            yield

    def stored(self, key: str) -> dict[str, Any] | None:
        """The record on disk for ``key`` (not the memory: another process may have stored
        it since this one read the folder)."""
        own = self._here()
        if own is None:
            return self._memory.get(key)
        own.refresh()
        record = own.record(key)
        return None if record is None else self._hit_disk(key, record)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for name in ("_lock", "_pid", "_own", "_others", "_looked"):
            del state[name]
        if self.root is not None:  # on disk: a worker reads what it needs from there
            state["_memory"] = {}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._start()

    def __len__(self) -> int:
        own = self._here()
        if own is None:
            return len(self._memory)
        own.refresh()
        return len(own.keys())


class _Folder:
    """One cache folder as one process uses it: where each key's line is in the logs, the
    process's own log, and the lock taken while asking. One per process and folder, shared
    by every cache object using the folder."""

    _open: dict[tuple[int, str], _Folder] = {}
    _open_lock = threading.Lock()

    def __init__(self, root: Path) -> None:
        self.root = root
        self.legacy = False  # holds <key[:2]>/<key>.json files of earlier versions
        self._where: dict[str, tuple[str, int, int]] = {}  # key: log name, offset, length
        self._done: dict[str, int] = {}  # log name: bytes indexed
        self._lock = threading.Lock()  # the index, the log and the lock file's opening
        self._log: _Log | None = None
        self._lock_fd: int | None = None
        self._asking: dict[str, list[Any]] = {}  # key: [lock of this process's askers, askers]

    @classmethod
    def of(cls, root: Path) -> _Folder:
        """This process's use of ``root`` (a forked child makes its own)."""
        where = (os.getpid(), str(root.resolve()))
        with cls._open_lock:
            folder = cls._open.get(where)
            if folder is None:  # by its full path: a later change of directory moves nothing
                folder = cls._open[where] = cls(Path(where[1]))
        return folder

    # -- reading ------------------------------------------------------------------------
    def refresh(self) -> None:
        """Index what the folder's logs gained since the last look."""
        with self._lock:
            try:
                names = os.listdir(self.root)
            except OSError as exc:
                raise disk_error(self.root, exc, "read the cache folder") from exc
            for name in names:
                if name.startswith(LOG_PREFIX) and name.endswith(LOG_SUFFIX):
                    self._index(name)
                elif not self.legacy and _LEGACY_FOLDER.match(name):
                    self.legacy = True

    def _index(self, name: str) -> None:
        start = self._done.get(name, 0)
        path = self.root / name
        try:
            if os.stat(path).st_size <= start:  # no file kept open: a folder costs no descriptor
                return
            with open(path, "rb") as handle:
                handle.seek(start)
                data = handle.read()
        except OSError as exc:
            raise disk_error(path, exc, "read") from exc
        end = data.rfind(b"\n") + 1  # an unfinished last line waits for its newline
        offset = start
        for line in data[:end].split(b"\n")[:-1]:
            if line.startswith(_HEAD) and line[_KEY_END:_KEY_END + 2] == b'",':
                self._where[line[len(_HEAD):_KEY_END].decode("ascii", "replace")] = (name, offset, len(line))
            offset += len(line) + 1
        self._done[name] = start + end

    def record(self, key: str) -> dict[str, Any] | None:
        """The valid record for ``key`` in the indexed logs (or an earlier version's file)."""
        where = self._where.get(key)
        if where is not None:
            name, offset, length = where
            try:
                with open(self.root / name, "rb") as handle:
                    handle.seek(offset)
                    line = json.loads(handle.read(length))
            except (OSError, ValueError):
                line = None  # damaged by hand or by the disk: a miss, asked again
            if isinstance(line, dict) and line.get("key") == key and valid_record(line.get("record")):
                return line["record"]
        if self.legacy:
            return _read(self.root / key[:2] / f"{key}.json")
        return None

    def keys(self) -> set[str]:
        """Every key with a line in the logs or a file of an earlier version."""
        keys = set(self._where)
        if self.legacy:
            keys.update(path.stem for path in self.root.glob("??/*.json"))
        return keys

    # -- writing ------------------------------------------------------------------------
    def append(self, key: str, record: dict[str, Any]) -> None:
        """One line for ``record`` in this process's log."""
        body = json.dumps(record, sort_keys=True, ensure_ascii=False)  # escapes newlines
        line = f'{{"key": "{key}", "record": {body}}}\n'.encode()
        with self._lock:
            if self._log is None:
                host = re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname())
                self._log = _Log(self.root / f"{LOG_PREFIX}{host}-{os.getpid()}{LOG_SUFFIX}")
        self._log.append(line)

    @contextmanager
    def asking(self, key: str) -> Iterator[None]:
        """Held while this process asks for ``key``: first against the other threads of the
        process (agents with in-flight tables of their own may share a folder), then against
        other processes, a POSIX lock on one byte of ``asking.lock``."""
        with self._lock:
            if self._lock_fd is None:
                try:  # kept open: closing any descriptor of it drops the process's locks on it
                    self._lock_fd = os.open(self.root / ASKING_LOCK, os.O_RDWR | os.O_CREAT, 0o666)
                except OSError as exc:
                    raise disk_error(self.root / ASKING_LOCK, exc, "open") from exc
            here = self._asking.setdefault(key, [threading.Lock(), 0])
            here[1] += 1
        try:
            with here[0]:
                byte = int(hashlib.sha256(key.encode()).hexdigest()[:15], 16)  # below 2**63
                self._lock_byte(byte)
                try:
                    yield
                finally:
                    fcntl.lockf(self._lock_fd, fcntl.LOCK_UN, 1, byte)
        finally:
            with self._lock:
                here[1] -= 1
                if not here[1]:
                    del self._asking[key]

    def _lock_byte(self, byte: int) -> None:
        while True:
            try:
                fcntl.lockf(self._lock_fd, fcntl.LOCK_EX, 1, byte)
                return
            except OSError as exc:
                # the kernel sees locks per process, not per thread: two processes each with
                # a thread waiting on the other's byte look like a deadlock and are not one
                if exc.errno != errno.EDEADLK:
                    raise disk_error(self.root / ASKING_LOCK, exc, "lock") from exc
                time.sleep(0.005)


class _Log:
    """A process's log in a cache folder, appended one whole line at a time."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        try:
            self._fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
            size = os.fstat(self._fd).st_size
        except OSError as exc:
            raise disk_error(path, exc) from exc
        # a line cut when an earlier process of this pid died: the next line starts anew
        self._torn = bool(size) and os.pread(self._fd, 1, size - 1) != b"\n"

    def append(self, line: bytes) -> None:
        with self._lock:
            data = b"\n" + line if self._torn else line
            view = memoryview(data)
            try:
                while view:
                    view = view[os.write(self._fd, view):]
            except OSError as exc:
                self._torn = self._torn or len(view) < len(data)  # part written: end it first
                raise disk_error(self.path, exc) from exc
            self._torn = False


def _read(path: Path) -> dict[str, Any] | None:
    """A valid stored answer in an earlier version's file, or None (missing, damaged or empty)."""
    try:
        raw = path.read_bytes()  # no stat first: on a miss, one failed open
        record = json.loads(raw)
    except (OSError, ValueError):
        return None  # missing, unreadable or truncated by hand: ask the model again
    return record if valid_record(record) else None
