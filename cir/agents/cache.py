"""A persistent response cache: one JSON file per request key, written atomically.

Paired branches share their prefix and reruns repeat whole episodes, so the same
request reaches the model many times; with greedy decoding and a cache the answer is
fixed the first time and costs nothing afterwards. One file per key, written atomically
(:func:`cir.util.files.write_atomic`), makes concurrent writers in many processes safe
without locks: a reader sees either no file or a complete one, and two writers of one
key write the same content.

Only valid answers are stored (a non-empty ``text``): a record without one, written by an
older version that cached a server's null or empty reply, counts as a miss, so a fixed
server is asked again instead of the bad answer being reused.

A cache can read through to other caches (``fallback``), never writing to them: a run
that extends an earlier one answers from the earlier run's cache and copies what it uses
into its own, so it is complete on its own and the earlier folder is left as it was.

A record holds the answer's ``text`` and what came with it (``finish_reason``, and
``usage``, ``logprobs`` or ``reasoning`` when there were some). One cache may be used by
several threads (the counters are locked; a dict read or write is atomic).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cir.util.errors import CirError
from cir.util.files import write_atomic


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
    """Replies stored under ``root/<key[:2]>/<key>.json``; ``root=None`` keeps them in memory.

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
        self._lock = threading.Lock()  # the counters
        self._made: set[Path] = set()  # subfolders known to exist (a mkdir per reply costs)
        if self.root is not None:
            try:
                self.root.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise CirError(f"cache folder {self.root}: cannot create it ({exc})") from exc
            if not self.root.is_dir():
                raise CirError(f"cache folder {self.root}: exists but is not a folder")

    @staticmethod
    def _path(root: Path, key: str) -> Path:
        return root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored record for ``key``, or None. A damaged or empty answer counts as a miss."""
        record = self._memory.get(key)
        if record is not None:
            with self._lock:
                self.hits_memory += 1
            return record
        own = [self.root] if self.root is not None else []
        for root in own + self.fallback:
            record = _read(self._path(root, key))
            if record is None:
                continue
            if root is self.root:
                self._memory[key] = record
            else:
                self.put(key, record)
            with self._lock:
                self.hits_disk += 1
            return record
        return None

    def put(self, key: str, record: dict[str, Any]) -> None:
        """Store ``record`` (a valid answer: non-empty ``text``) under ``key``, atomically."""
        if not valid_record(record):
            raise ValueError(f"not an answer to cache (no text): {record!r}")
        self._memory[key] = record
        if self.root is None:
            return
        path = self._folder(self._path(self.root, key))
        # not fsynced: a reply lost or cut in a power cut reads as a miss and is asked again
        write_atomic(path, json.dumps(record, sort_keys=True, ensure_ascii=False, indent=1), durable=False)

    def _folder(self, path: Path) -> Path:
        """``path``, its folder made if this cache has not made it yet."""
        if path.parent not in self._made:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._made.add(path.parent)
        return path

    @contextmanager
    def asking(self, key: str) -> Iterator[None]:
        """Held while this process asks the server for ``key``: another agent (thread or
        process) that uses this cache folder and asks for the same waits, then finds the
        reply stored. The asker stores the reply, then removes the lock file while it holds
        it; whoever gets the lock reads the cache again first, so no reply is asked twice
        and no lock file stays behind."""
        if self.root is None:
            yield
            return
        path = self._folder(self._path(self.root, key).with_suffix(".lock"))
        with open(path, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                try:
                    path.unlink()
                except FileNotFoundError:  # removed by an earlier holder of this file
                    pass
                fcntl.flock(handle, fcntl.LOCK_UN)

    def stored(self, key: str) -> dict[str, Any] | None:
        """The record on disk for ``key`` (not the memory: another process may have stored it)."""
        if self.root is None:
            return self._memory.get(key)
        record = _read(self._path(self.root, key))
        if record is not None:
            self._memory[key] = record
            with self._lock:
                self.hits_disk += 1
        return record

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        if self.root is None:
            return len(self._memory)
        return sum(1 for _ in self.root.glob("??/*.json"))


def _read(path: Path) -> dict[str, Any] | None:
    """A valid stored answer at ``path``, or None (missing, damaged or empty)."""
    try:
        raw = path.read_bytes()  # no stat first: on a miss, one failed open
        record = json.loads(raw)
    except (OSError, ValueError):
        return None  # missing, unreadable or truncated by hand: ask the model again and rewrite
    return record if valid_record(record) else None
