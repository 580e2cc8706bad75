"""The run folder: episode store, paired table and run record, safe to interrupt.

``RUN_DIR/episodes.jsonl.gz`` is a sequence of gzip members, one per finished task,
appended and fsynced by the parent process only. Each member holds JSON lines: first
``{"kind": "task", ...}`` (the task's summary: feasibility, paired rows, costs), then
``{"kind": "episode", ...}`` per episode (:class:`~cir.pairs.episode_record.EpisodeRecord`,
typed here at the border). The store is the truth of a run: ``paired.csv`` is derived from
it (:func:`cir.pairs.paired.paired_text`) and ``run.json`` summarises it
(:mod:`cir.pairs.record`, the one reader of that file).

Every member is checked on its own (:func:`scan_store`): gzip's CRC, then each line's
JSON, then (given ``foreign``) whether it is this run's at all. A kill can leave a torn
*last* member (readers skip it, :meth:`RunStore.open` cuts it off, keeping the cut bytes);
damage anywhere else is located by byte range and task, the members after it are found
again by their header, and only the damaged tasks are run again. Intact members are never
dropped, and nothing is removed or replaced without a copy beside it
(:meth:`RunStore.set_aside`). Reading never writes: only the writer (``cir run``, ``cir
repair``) repairs, under the folder's lock.

``RUN_DIR/paired.csv`` and ``RUN_DIR/run.json`` are rewritten atomically (temp file +
rename). One process writes a run folder at a time (:meth:`RunStore.lock`).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import mmap
import os
import re
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cir.pairs.episode_record import EpisodeRecord
from cir.util.errors import CirError
from cir.util.files import check_regular, disk_error, read_json, write_atomic, write_bytes_atomic
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
#: What makes a member's task summary another run's (None: this run's); see cir.pairs.record.
Foreign = Callable[[dict[str, Any]], "str | None"]


@dataclass(frozen=True)
class Member:
    """One gzip member of the store: its byte range, task and, if refused, what is wrong."""

    start: int
    end: int
    task_id: str | None
    summary: dict[str, Any] | None = None
    problem: str | None = None
    sha256: str | None = None  # of the member's bytes, for the run record

    def describe(self) -> str:
        task = f"task {self.task_id}" if self.task_id else "task unknown"
        return f"{task} (bytes {self.start}-{self.end}: {self.problem})"

    def stored(self) -> StoredMember:
        assert self.task_id is not None and self.sha256 is not None
        return StoredMember(self.task_id, self.end - self.start, self.sha256)


@dataclass(frozen=True)
class StoredMember:
    """A member as the run record names it: its task, size and digest, in store order."""

    task_id: str
    bytes: int
    sha256: str


@dataclass
class StoreScan:
    """What :func:`scan_store` found: intact members (first per task), damage, a torn tail."""

    size: int = 0
    members: list[Member] = field(default_factory=list)
    damaged: list[Member] = field(default_factory=list)
    foreign: list[Member] = field(default_factory=list)  # intact, but another run's
    duplicates: list[Member] = field(default_factory=list)
    torn: int | None = None  # offset of a last member cut short (a write in progress or killed)

    def summaries(self) -> dict[str, dict[str, Any]]:
        """task_id -> summary of the intact members."""
        return {m.task_id: m.summary for m in self.members if m.task_id and m.summary}

    @property
    def sound(self) -> bool:
        return not self.damaged and not self.foreign and not self.duplicates

    def damage_text(self) -> str:
        """The refused members, damaged or another run's, each with its task and bytes."""
        return "; ".join(m.describe() for m in (*self.damaged, *self.foreign))

    def stored(self) -> list[StoredMember]:
        return [m.stored() for m in self.members]

    @classmethod
    def vouched(cls, members: Sequence[StoredMember]) -> StoreScan:
        """The members a run record names, in store order, once their bytes were found to be the
        recorded ones (:func:`verify_members`): what a reader reads, without scanning the store
        again (a scan parses every record to check it; the digests already did)."""
        scan, at = cls(), 0
        for m in members:
            scan.members.append(Member(at, at + m.bytes, m.task_id, sha256=m.sha256))
            at += m.bytes
        scan.size = at
        return scan


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


def scan_store(path: str | Path, foreign: Foreign | None = None,
               recorded: Sequence[StoredMember] | None = None) -> StoreScan:
    """Every member of an episode store checked: intact, damaged, another run's (when
    ``foreign`` says what makes one so), duplicated, torn. ``recorded``: the members the run
    record names, in store order; a damaged member whose own bytes no longer name its task
    is named from the one that began at the same byte."""
    path = Path(path)
    scan = StoreScan()
    check_regular(path, "episode store")
    try:
        scan.size = path.stat().st_size
        if scan.size == 0:
            return scan
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            _scan(buf, scan, foreign, {m.task_id: m.sha256 for m in recorded or ()})
    except FileNotFoundError:
        return scan
    except OSError as err:
        raise disk_error(path, err, "read") from None
    if recorded:
        scan.damaged = _named_from_record(scan.damaged, recorded)
    return scan


def _named_from_record(damaged: list[Member], recorded: Sequence[StoredMember]) -> list[Member]:
    """``damaged`` with an unknown task named where a recorded member began at its first byte."""
    starts, at = {}, 0
    for m in recorded:
        starts[at] = m.task_id
        at += m.bytes
    return [replace(m, task_id=starts[m.start], problem=f"{m.problem}; the task the run record places there")
            if m.task_id is None and m.start in starts else m for m in damaged]


def _scan(buf: Any, scan: StoreScan, foreign: Foreign | None, digests: dict[str, str]) -> None:
    """``digests``: the sha256 the run record names for each task's member; a member of a task it
    names with other bytes is not the one the run wrote (replaced, or re-encoded), so it is
    refused as another run's would be, whatever it holds."""
    seen: set[str] = set()
    pos = 0
    while pos < scan.size:
        data, end, error = _inflate(buf, pos)
        if end is not None:
            task_id, summary, problem = _check_member(data)
            sha = hashlib.sha256(buf[pos:end]).hexdigest()
            other = None if problem or foreign is None or summary is None else foreign(summary)
            if not problem and not other and digests.get(task_id, sha) != sha:
                other = (f"not the bytes the run recorded for this task (sha256 {sha[:12]}..., the run "
                         f"record names {digests[task_id][:12]}...): replaced or re-encoded after it was written")
            member = Member(pos, end, task_id, summary, problem or other, sha)
            if problem:
                scan.damaged.append(member)
            elif other:
                scan.foreign.append(member)
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


def read_records(path: str | Path, scan: StoreScan | None = None) -> Iterator[dict[str, Any]]:
    """All JSON records of an episode store (a torn last member, a write in progress, is
    skipped; damage is a CirError naming the tasks, since skipping it would lose them).
    ``scan``: the members to read, as a caller already checked them (its refused ones are
    left out)."""
    path = Path(path)
    if path.is_dir():
        path = path / EPISODES
    if not path.exists():
        raise CirError(f"{path}: no such file")
    if scan is None:
        scan = scan_store(path)
        if scan.damaged:
            raise CirError(f"{path}: damaged: {scan.damage_text()}; run `cir repair` or `cir run` "
                           "with the same settings to run these tasks again")
    if not scan.members:
        return
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        for member in scan.members:
            yield from _member_records(buf, member)


def read_episodes(path: str | Path, scan: StoreScan | None = None) -> Iterator[EpisodeRecord]:
    """The episodes of a store (task, role, condition, delay, operation, transcript...)."""
    source = str(path)
    for rec in read_records(path, scan):
        if rec.get("kind") == "episode":
            yield EpisodeRecord.from_dict(rec, source)


def read_task_summaries(path: str | Path) -> dict[str, dict[str, Any]]:
    """task_id -> the task's summary record."""
    return {rec["task_id"]: rec for rec in read_records(path) if rec.get("kind") == "task"}


def verify_members(path: str | Path, members: Sequence[StoredMember]) -> str | None:
    """None when the store holds exactly ``members`` (sizes and digests, in order, nothing
    more), else what differs first: the check of the store a reader's fast path relies on."""
    path = Path(path)
    check_regular(path, "episode store")
    try:
        size = path.stat().st_size
        if size != sum(m.bytes for m in members):
            return f"{path.name} has {size} bytes, the run record names {sum(m.bytes for m in members)}"
        with open(path, "rb") as fh:
            for m in members:
                if hashlib.sha256(fh.read(m.bytes)).hexdigest() != m.sha256:
                    return f"{path.name}: the bytes of task {m.task_id} differ from those the run recorded"
    except FileNotFoundError:
        return f"no {path.name}"
    except OSError as err:
        raise disk_error(path, err, "read") from None
    return None


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

    def _leftovers(self) -> list[Path]:
        """Files a killed writer may leave before run.json exists: the lock, temp files."""
        if not self.dir.is_dir():
            return []
        ours = tuple(f".{name}." for name in (RUN_JSON, PAIRED, EPISODES))
        return [p for p in self.dir.iterdir()
                if p.name == LOCK_FILE or (p.name.startswith(ours) and p.is_file())]

    def check_unused(self) -> None:
        """Refuse a folder that holds other files and no run record: not a run folder to start."""
        if self.dir.exists() and not self.dir.is_dir():
            raise CirError(f"{self.dir}: exists and is not a folder")
        cache = {self.dir / AGENT_CACHE}  # replies kept from an earlier run: reused
        if self.dir.exists() and set(self.dir.iterdir()) - set(self._leftovers()) - cache:
            raise CirError(f"{self.dir}: folder is not empty and has no {RUN_JSON}; "
                           "choose a new --out folder for a run")

    # -- episodes -----------------------------------------------------------------------
    def scan(self, foreign: Foreign | None = None,
             recorded: Sequence[StoredMember] | None = None) -> StoreScan:
        return scan_store(self.episodes_path, foreign, recorded)

    def open(self, foreign: Foreign | None = None,
             recorded: Sequence[StoredMember] | None = None) -> StoreScan:
        """Prepare for appending (the writer holds the lock); the scan of the store as it is now.

        Temp files of a killed writer go. A torn tail is cut off (its bytes kept as
        ``episodes.jsonl.gz.torn-<time>``). Damaged members, another run's (``foreign``) and
        repeated ones are left out of a rewritten store (the old file kept as
        ``episodes.jsonl.gz.set-aside-<time>``), with a note naming the tasks that run again.
        """
        self.dir.mkdir(parents=True, exist_ok=True)
        for leftover in self._leftovers():
            if leftover.name != LOCK_FILE:
                leftover.unlink(missing_ok=True)  # temp files of a killed writer
        scan = self.scan(foreign, recorded)
        if not scan.sound:
            self._rewrite(scan)
            return self.scan(foreign)
        if scan.torn is not None:
            self._cut_tail(scan.torn)
            scan.size, scan.torn = scan.torn, None
        return scan

    def _cut_tail(self, at: int) -> None:
        """Cut a torn last member off, its bytes kept beside the store."""
        kept = self.keep_copy(self.episodes_path, "torn", start=at)
        try:
            with open(self.episodes_path, "r+b") as fh:
                fh.truncate(at)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as err:
            raise disk_error(self.episodes_path, err) from None
        log.warning("%s: a task cut short at byte %d (a write that was interrupted) is cut off, "
                    "kept as %s; it runs again", self.episodes_path, at, kept.name)

    def keep_copy(self, path: Path, why: str, start: int = 0) -> Path:
        """A copy of ``path`` (from byte ``start``) beside it, as ``NAME.WHY-<time>``: what a
        repair replaces or removes is never lost."""
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        copy = path.with_name(f"{path.name}.{why}-{stamp}")
        n = 1
        while copy.exists():
            n += 1
            copy = path.with_name(f"{path.name}.{why}-{stamp}-{n}")
        try:
            with open(path, "rb") as src:
                src.seek(start)
                write_bytes_atomic(copy, src.read())
        except OSError as err:
            raise disk_error(copy, err, "keep a copy") from None
        return copy

    def _rewrite(self, scan: StoreScan) -> None:
        """The store with only its intact members; the old file kept beside it."""
        backup = self.keep_copy(self.episodes_path, "set-aside")
        tmp = self.episodes_path.with_name(f".{EPISODES}.rewrite")
        try:
            with open(self.episodes_path, "rb") as src, open(tmp, "wb") as dst:
                for member in scan.members:
                    src.seek(member.start)
                    dst.write(src.read(member.end - member.start))
                dst.flush()
                os.fsync(dst.fileno())
            os.replace(tmp, self.episodes_path)
        except OSError as err:
            raise disk_error(self.episodes_path, err, "repair") from None
        if scan.damaged:
            log.warning("%s: %d damaged part(s): %s; kept as %s; these tasks run again",
                        self.episodes_path, len(scan.damaged),
                        "; ".join(m.describe() for m in scan.damaged), backup.name)
        if scan.foreign:
            log.warning("%s: %d task(s) that are not this run's refused: %s; kept as %s; these tasks "
                        "run again", self.episodes_path, len(scan.foreign),
                        "; ".join(m.describe() for m in scan.foreign), backup.name)
        if scan.duplicates:
            log.warning("%s: %d task(s) stored twice (%s); kept the first copy of each (all in %s)",
                        self.episodes_path, len(scan.duplicates),
                        ", ".join(sorted({str(m.task_id) for m in scan.duplicates})), backup.name)

    def append_task(self, summary: dict[str, Any], episodes: Sequence[EpisodeRecord]) -> StoredMember:
        """One gzip member for the task, flushed and fsynced; the member as the record names it.

        A write that fails half way (full disk) leaves a torn tail that the next
        :meth:`open` cuts off, so the task simply runs again.
        """
        lines = [json.dumps({"kind": "task", **summary}, sort_keys=True, ensure_ascii=False)]
        lines += [json.dumps({"kind": "episode", **ep.to_dict()}, sort_keys=True, ensure_ascii=False)
                  for ep in episodes]
        payload = ("\n".join(lines) + "\n").encode("utf-8")
        member = gzip.compress(payload, compresslevel=6, mtime=0)
        try:
            with open(self.episodes_path, "ab") as fh:
                fh.write(member)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as err:
            raise disk_error(self.episodes_path, err) from None
        return StoredMember(str(summary["task_id"]), len(member), hashlib.sha256(member).hexdigest())

    def episodes_bytes(self) -> int:
        try:
            return self.episodes_path.stat().st_size
        except FileNotFoundError:
            return 0

    # -- table and record ---------------------------------------------------------------
    def read_paired_text(self) -> str | None:
        """paired.csv as it is on disk (None if absent)."""
        check_regular(self.paired_path, "paired table")
        try:
            return self.paired_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as err:
            raise CirError(f"{self.paired_path}: cannot read ({err})") from None

    def write_paired(self, text: str) -> None:
        write_atomic(self.paired_path, text)

    def replace_paired(self, text: str) -> Path | None:
        """Rewrite a paired.csv that differs from the store's table, keeping the old one beside
        it (``paired.csv.replaced-<time>``); the copy (None if there was no table)."""
        kept = self.keep_copy(self.paired_path, "replaced") if self.paired_path.exists() else None
        self.write_paired(text)
        return kept

    def write_run_json(self, record: dict[str, Any]) -> None:
        write_atomic(self.run_json_path, json.dumps(record, indent=2, sort_keys=True) + "\n")
