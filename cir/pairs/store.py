"""The run folder: episode store, paired table and run record, safe to interrupt.

``RUN_DIR/episodes.jsonl.gz`` is a sequence of gzip members, one per finished task,
appended and fsynced by the parent process only. Each member holds JSON lines: first
``{"kind": "task", ...}`` (the task's summary: feasibility, paired rows, costs), then
``{"kind": "episode", ...}`` per episode. The store is the truth of a run: ``paired.csv``
is derived from it (:func:`cir.pairs.paired.paired_text`) and ``run.json`` summarises it.

Every member is checked on its own (:func:`scan_store`): gzip's CRC, then each line's
JSON. A kill can leave a torn *last* member (readers skip it, :meth:`RunStore.open` cuts
it off); damage anywhere else is located by byte range and task, the members after it
are found again by their header, and only the damaged tasks are run again (the damaged
file is kept beside the store). Intact members are never dropped.

``RUN_DIR/paired.csv`` and ``RUN_DIR/run.json`` are rewritten atomically (temp file +
rename). One process writes a run folder at a time (:meth:`RunStore.lock`). ``run.json``
is typed in :mod:`cir.pairs.record`; readers of the paired table, which sit upstream of it,
use the few facts of :class:`RunIndex`.
"""

from __future__ import annotations

import gzip
import json
import logging
import mmap
import os
import re
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cir.util.errors import CirError
from cir.util.files import disk_error, read_json, write_atomic
from cir.util.lock import LOCK_FILE, FolderLock

log = logging.getLogger(__name__)

EPISODES = "episodes.jsonl.gz"
PAIRED = "paired.csv"
RUN_JSON = "run.json"
#: An LLM agent's reply cache (cir.agents.cache); a folder holding only one may start a run.
AGENT_CACHE = "agent_cache"

# Every member this store writes starts so (gzip, deflate, no flags, mtime 0, default
# level); the OS byte that follows differs between Python versions. Nine fixed bytes
# make a false match inside compressed data practically impossible.
_MEMBER_START = bytes.fromhex("1f8b08000000000000")
_CHUNK = 1 << 16
_TASK_ID = re.compile(rb'"task_id": "((?:[^"\\]|\\.)*)"')


# -- scanning the episode store ---------------------------------------------------------------
@dataclass(frozen=True)
class Member:
    """One gzip member of the store: its byte range, task and, if damaged, what is wrong."""

    start: int
    end: int
    task_id: str | None
    summary: dict[str, Any] | None = None
    problem: str | None = None

    def describe(self) -> str:
        task = f"task {self.task_id}" if self.task_id else "task unknown"
        return f"{task} (bytes {self.start}-{self.end}: {self.problem})"


@dataclass
class StoreScan:
    """What :func:`scan_store` found: intact members (first per task), damage, a torn tail."""

    size: int = 0
    members: list[Member] = field(default_factory=list)
    damaged: list[Member] = field(default_factory=list)
    duplicates: list[Member] = field(default_factory=list)
    torn: int | None = None  # offset of a last member cut short (a write in progress or killed)

    def summaries(self) -> dict[str, dict[str, Any]]:
        """task_id -> summary of the intact members."""
        return {m.task_id: m.summary for m in self.members if m.task_id and m.summary}

    @property
    def sound(self) -> bool:
        return not self.damaged and not self.duplicates

    def damage_text(self) -> str:
        return "; ".join(m.describe() for m in self.damaged)


def _inflate(buf: Any, pos: int) -> tuple[bytes, int | None, str | None]:
    """Decompress the member at ``pos``: (data, end offset or None, error or None).

    ``end is None and error is None``: the input ended inside the member (torn).
    On an error, ``data`` holds what came out before it (to name the task).
    """
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out: list[bytes] = []
    i = pos
    size = len(buf)
    try:
        while i < size and not d.eof:
            chunk = buf[i:i + _CHUNK]
            out.append(d.decompress(chunk))
            i += len(chunk)
        if d.eof:
            return b"".join(out), i - len(d.unused_data), None
        out.append(d.flush())
    except zlib.error as err:
        return b"".join(out), None, f"not a valid gzip member ({err})"
    return b"".join(out), None, None


def _salvage(buf: Any, pos: int, stop: int) -> bytes:
    """What a damaged member decompresses to before the damage (gzip checks the CRC only
    at the end, so read it as raw deflate after its header, in small steps)."""
    d = zlib.decompressobj(-zlib.MAX_WBITS)
    out: list[bytes] = []
    for i in range(pos + 10, stop, 256):
        try:
            out.append(d.decompress(buf[i:min(i + 256, stop)]))
        except zlib.error:
            break
        if d.eof:
            break
    return b"".join(out)


def _task_id_in(data: bytes) -> str | None:
    m = _TASK_ID.search(data)
    if not m:
        return None
    try:
        return json.loads(b'"' + m.group(1) + b'"')
    except ValueError:
        return None


def _check_member(data: bytes) -> tuple[str | None, dict[str, Any] | None, str | None]:
    """(task_id, summary, problem) of a decompressed member; every line must be a record."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return _task_id_in(data), None, "not UTF-8 text"
    lines = [line for line in text.split("\n") if line.strip()]
    if not lines:
        return None, None, "empty member"
    summary = None
    for n, line in enumerate(lines, 1):
        try:
            rec = json.loads(line)
        except ValueError:
            rec = None
        want = "task" if n == 1 else "episode"
        if not isinstance(rec, dict) or rec.get("kind") != want:
            task_id = summary["task_id"] if summary else _task_id_in(data)
            return task_id, None, f"line {n} is not a {want} record"
        if n == 1:
            if not isinstance(rec.get("task_id"), str) or not isinstance(rec.get("rows"), list):
                return _task_id_in(data), None, "the task record has no task_id or rows"
            summary = rec
    assert summary is not None
    return summary["task_id"], summary, None


def scan_store(path: str | Path) -> StoreScan:
    """Every member of an episode store checked: intact, damaged, duplicated, torn."""
    path = Path(path)
    scan = StoreScan()
    try:
        scan.size = path.stat().st_size
        if scan.size == 0:
            return scan
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            _scan(buf, scan)
    except FileNotFoundError:
        return scan
    except OSError as err:
        raise disk_error(path, err, "read") from None
    return scan


def _scan(buf: Any, scan: StoreScan) -> None:
    seen: set[str] = set()
    pos = 0
    while pos < scan.size:
        data, end, error = _inflate(buf, pos)
        if end is not None:
            task_id, summary, problem = _check_member(data)
            member = Member(pos, end, task_id, summary, problem)
            if problem:
                scan.damaged.append(member)
            elif task_id in seen:
                scan.duplicates.append(member)
            else:
                seen.add(task_id)
                scan.members.append(member)
            pos = end
            continue
        nxt = buf.find(_MEMBER_START, pos + 1)
        if error is None and nxt < 0:
            scan.torn = pos
            return
        stop = nxt if nxt >= 0 else scan.size
        task_id = _task_id_in(data) or _task_id_in(_salvage(buf, pos, stop))
        last = scan.damaged[-1] if scan.damaged else None
        if last is not None and last.end == pos and task_id is None:
            scan.damaged[-1] = Member(last.start, stop, last.task_id, None, last.problem)
        else:
            scan.damaged.append(Member(pos, stop, task_id, None, error or "cut short"))
        pos = stop


def _member_records(buf: Any, member: Member) -> Iterator[dict[str, Any]]:
    data, _, _ = _inflate(buf, member.start)
    for line in data.decode("utf-8").split("\n"):
        if line.strip():
            yield json.loads(line)


def read_records(path: str | Path) -> Iterator[dict[str, Any]]:
    """All JSON records of an episode store (a torn last member, a write in progress, is
    skipped; damage is a CirError naming the tasks, since skipping it would lose them)."""
    path = Path(path)
    if path.is_dir():
        path = path / EPISODES
    if not path.exists():
        raise CirError(f"{path}: no such file")
    scan = scan_store(path)
    if scan.damaged:
        raise CirError(f"{path}: damaged: {scan.damage_text()}; run `cir run` with the same "
                       "settings to run these tasks again")
    if not scan.members:
        return
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        for member in scan.members:
            yield from _member_records(buf, member)


def read_episodes(path: str | Path) -> Iterator[dict[str, Any]]:
    """The episode records (task, role, condition, delay, operation, transcript...)."""
    for rec in read_records(path):
        if rec.get("kind") == "episode":
            yield rec


def read_task_summaries(path: str | Path) -> dict[str, dict[str, Any]]:
    """task_id -> the task's summary record."""
    return {rec["task_id"]: rec for rec in read_records(path) if rec.get("kind") == "task"}


# -- what a reader of the table needs from run.json --------------------------------------------
@dataclass(frozen=True)
class RunIndex:
    """The facts of ``run.json`` that check a paired table against its store.

    The typed record (:class:`cir.pairs.record.RunRecord`) depends on the replayer, which
    depends on the paired table; readers of the table get these facts instead.
    """

    n_tasks: int
    task_ids: tuple[str, ...] | None  # None in records of older versions
    conditions: tuple[str, ...]
    operations: tuple[str, ...]
    complete: bool
    tasks_done: int
    pairs: int
    episodes_bytes: int | None
    paired_sha256: str | None

    @classmethod
    def from_dict(cls, data: Any, source: str) -> RunIndex:
        try:
            settings, counts = data["settings"], data["counts"]
            ids = data.get("task_ids")
            store = data.get("store") or {}
            return cls(n_tasks=int(counts["tasks"]), task_ids=None if ids is None else tuple(ids),
                       conditions=tuple(settings["conditions"]),
                       operations=tuple(settings["operations"]), complete=bool(data["complete"]),
                       tasks_done=int(counts["tasks_done"]), pairs=int(counts["pairs"]), episodes_bytes=store.get("episodes_bytes"),
                       paired_sha256=store.get("paired_sha256"))
        except (KeyError, TypeError, ValueError) as err:
            raise CirError(f"{source}: not a run record of this cir ({type(err).__name__}: "
                           f"{err})") from None


# -- the folder ---------------------------------------------------------------------------------
class RunStore:
    """One RUN_DIR: its lock, resume state, appends per task, atomic table and record.

    This class is the only code that touches the folder's files.
    """

    def __init__(self, run_dir: str | Path) -> None:
        self.dir = Path(run_dir)
        self.episodes_path = self.dir / EPISODES
        self.paired_path = self.dir / PAIRED
        self.run_json_path = self.dir / RUN_JSON

    def is_run(self) -> bool:
        """Whether the folder holds a run (a run record or an episode store)."""
        return self.run_json_path.exists() or self.episodes_path.exists()

    # -- the writer ------------------------------------------------------------------------
    def lock(self) -> FolderLock:
        """The folder's writer lock (``with store.lock(): ...``); creates the folder."""
        if self.dir.exists() and not self.dir.is_dir():
            raise CirError(f"{self.dir}: exists and is not a folder")
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise disk_error(self.dir, err, "create the run folder") from None
        return FolderLock(self.dir)

    # -- settings ------------------------------------------------------------------------
    def read_run_json(self) -> dict[str, Any] | None:
        """run.json as plain data (None if absent)."""
        return read_json(self.run_json_path, "run record", missing_ok=True)

    def read_index(self) -> RunIndex | None:
        data = self.read_run_json()
        return None if data is None else RunIndex.from_dict(data, str(self.run_json_path))

    def _leftovers(self) -> list[Path]:
        """Files a killed writer may leave before run.json exists: the lock, temp files."""
        if not self.dir.is_dir():
            return []
        ours = tuple(f".{name}." for name in (RUN_JSON, PAIRED, EPISODES))
        return [p for p in self.dir.iterdir()
                if p.name == LOCK_FILE or (p.name.startswith(ours) and p.is_file())]

    def check_settings(self, settings: dict[str, Any]) -> dict[str, Any] | None:
        """Refuse a RUN_DIR written with other settings; the earlier run.json, if any."""
        if self.dir.exists() and not self.dir.is_dir():
            raise CirError(f"{self.dir}: exists and is not a folder")
        old = self.read_run_json()
        if old is None:
            cache = {self.dir / AGENT_CACHE}  # replies kept from an earlier run: reused
            if self.dir.exists() and set(self.dir.iterdir()) - set(self._leftovers()) - cache:
                raise CirError(
                    f"{self.dir}: folder is not empty and has no {RUN_JSON}; "
                    "choose a new --out folder for a run"
                )
            return None
        previous = old.get("settings", {}) if isinstance(old, dict) else {}
        for key in sorted(set(previous) | set(settings)):
            if previous.get(key) != settings.get(key):
                raise CirError(
                    f"{self.dir}: was written with {key}={previous.get(key)!r}, this command has "
                    f"{key}={settings.get(key)!r}; rerun with the same settings to resume, "
                    "or use a new --out folder (with --extend to reuse this run's agent replies)"
                )
        return old

    # -- episodes -----------------------------------------------------------------------
    def scan(self) -> StoreScan:
        return scan_store(self.episodes_path)

    def open(self) -> dict[str, dict[str, Any]]:
        """Prepare for appending; the intact tasks' summaries (the writer holds the lock).

        A torn tail is cut off. Damaged or repeated members are left out of a rewritten
        store (the old file is kept as ``episodes.jsonl.gz.damaged-<time>``), with a note
        naming the tasks that will run again.
        """
        self.dir.mkdir(parents=True, exist_ok=True)
        for leftover in self._leftovers():
            if leftover.name != LOCK_FILE:
                leftover.unlink(missing_ok=True)  # temp files of a killed writer
        scan = self.scan()
        if not scan.sound:
            self._rewrite(scan)
        elif scan.torn is not None:
            try:
                with open(self.episodes_path, "r+b") as fh:
                    fh.truncate(scan.torn)
                    fh.flush()
                    os.fsync(fh.fileno())
            except OSError as err:
                raise disk_error(self.episodes_path, err) from None
        return scan.summaries()

    def _rewrite(self, scan: StoreScan) -> None:
        """The store with only its intact members; the damaged file kept beside it."""
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        backup = self.episodes_path.with_name(f"{EPISODES}.damaged-{stamp}")
        tmp = self.episodes_path.with_name(f".{EPISODES}.rewrite")
        try:
            with open(self.episodes_path, "rb") as src, open(tmp, "wb") as dst:
                for member in scan.members:
                    src.seek(member.start)
                    dst.write(src.read(member.end - member.start))
                dst.flush()
                os.fsync(dst.fileno())
            os.replace(self.episodes_path, backup)
            os.replace(tmp, self.episodes_path)
        except OSError as err:
            raise disk_error(self.episodes_path, err, "repair") from None
        if scan.damaged:
            log.warning("%s: %d damaged part(s): %s; kept as %s; these tasks run again",
                        self.episodes_path, len(scan.damaged), scan.damage_text(), backup.name)
        if scan.duplicates:
            log.warning("%s: %d task(s) stored twice (%s); kept the first copy of each",
                        self.episodes_path, len(scan.duplicates),
                        ", ".join(sorted({str(m.task_id) for m in scan.duplicates})))

    def append_task(self, summary: dict[str, Any], episodes: list[dict[str, Any]]) -> int:
        """One gzip member for the task, flushed and fsynced; the store's size after it.

        A write that fails half way (full disk) leaves a torn tail that the next
        :meth:`open` cuts off, so the task simply runs again.
        """
        lines = [json.dumps({"kind": "task", **summary}, sort_keys=True, ensure_ascii=False)]
        lines += [json.dumps({"kind": "episode", **ep}, sort_keys=True, ensure_ascii=False)
                  for ep in episodes]
        payload = ("\n".join(lines) + "\n").encode("utf-8")
        member = gzip.compress(payload, compresslevel=6, mtime=0)
        try:
            with open(self.episodes_path, "ab") as fh:
                fh.write(member)
                fh.flush()
                os.fsync(fh.fileno())
                return fh.tell()
        except OSError as err:
            raise disk_error(self.episodes_path, err) from None

    def episodes_bytes(self) -> int:
        try:
            return self.episodes_path.stat().st_size
        except FileNotFoundError:
            return 0

    # -- table and record ---------------------------------------------------------------
    def read_paired_text(self) -> str | None:
        """paired.csv as it is on disk (None if absent)."""
        try:
            return self.paired_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as err:
            raise CirError(f"{self.paired_path}: cannot read ({err})") from None

    def write_paired(self, text: str) -> None:
        write_atomic(self.paired_path, text)

    def write_run_json(self, record: dict[str, Any]) -> None:
        write_atomic(self.run_json_path, json.dumps(record, indent=2, sort_keys=True) + "\n")
