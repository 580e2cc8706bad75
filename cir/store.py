"""The run folder: episode store, paired table and run record, safe to interrupt.

``RUN_DIR/episodes.jsonl.gz`` is a sequence of gzip members, one per finished task,
appended and fsynced by the parent process only. Each member holds JSON lines: first
``{"kind": "task", ...}`` (the task's summary: feasibility, paired rows, costs), then
``{"kind": "episode", ...}`` per episode. A crash can only leave a torn *last* member;
readers drop it and :meth:`RunStore.open` cuts it off before appending, so the task is
simply run again.

``RUN_DIR/paired.csv`` is rewritten atomically (temp file + rename) from the task
summaries, sorted deterministically: byte-identical whatever the completion order.
``RUN_DIR/run.json`` holds the run record (:class:`~cir.record.RunRecord`: the settings,
checked on resume, version, counts, feasibility, costs and timings); also written
atomically, and read back only here (:meth:`RunStore.read_record`).
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from cir.errors import CirError
from cir.files import read_json, write_atomic
from cir.record import RunRecord, RunSettings

EPISODES = "episodes.jsonl.gz"
PAIRED = "paired.csv"
RUN_JSON = "run.json"


def _members(data: bytes) -> tuple[list[bytes], int]:
    """Decompressed complete gzip members and the byte length they span (torn tail dropped)."""
    out: list[bytes] = []
    pos = 0
    view = memoryview(data)
    while pos < len(data):
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            chunk = d.decompress(view[pos:])
            chunk += d.flush()
        except zlib.error:
            break
        if not d.eof:
            break
        consumed = len(data) - pos - len(d.unused_data)
        out.append(chunk)
        pos += consumed
    return out, pos


def read_records(path: str | Path) -> Iterator[dict[str, Any]]:
    """All JSON records of an episode store, tolerating (dropping) a torn last member."""
    path = Path(path)
    if path.is_dir():
        path = path / EPISODES
    if not path.exists():
        raise CirError(f"{path}: no such file")
    members, _ = _members(path.read_bytes())
    for member in members:
        for line in member.decode("utf-8").splitlines():
            if line.strip():
                yield json.loads(line)


def read_episodes(path: str | Path) -> Iterator[dict[str, Any]]:
    """The episode records (task, role, condition, delay, operation, transcript...)."""
    for rec in read_records(path):
        if rec.get("kind") == "episode":
            yield rec


def read_task_summaries(path: str | Path) -> dict[str, dict[str, Any]]:
    """task_id -> the task's summary record (last one wins)."""
    return {rec["task_id"]: rec for rec in read_records(path) if rec.get("kind") == "task"}


def paired_csv_text(rows: list[dict[str, Any]], columns: list[str]) -> str:
    """The CSV text of the paired rows (caller sorts rows and fixes the columns)."""
    df = pd.DataFrame(rows, columns=columns)
    return df.to_csv(index=False, lineterminator="\n")


class RunStore:
    """One RUN_DIR: resume state, appends per task, atomic table and record.

    A run folder lock, healing and completeness checks belong here too: this class is
    the only code that touches the folder's files.
    """

    def __init__(self, run_dir: str | Path) -> None:
        self.dir = Path(run_dir)
        self.episodes_path = self.dir / EPISODES
        self.paired_path = self.dir / PAIRED
        self.run_json_path = self.dir / RUN_JSON

    # -- settings ------------------------------------------------------------------------
    def read_run_json(self) -> dict[str, Any] | None:
        """run.json as plain data (None if absent)."""
        return read_json(self.run_json_path, "run record", missing_ok=True)

    def read_record(self) -> RunRecord | None:
        """The run record (None if the folder has none yet)."""
        data = self.read_run_json()
        return None if data is None else RunRecord.from_dict(data, source=str(self.run_json_path))

    def check_settings(self, settings: dict[str, Any]) -> dict[str, Any] | None:
        """Refuse a RUN_DIR written with other settings; the earlier run.json, if any."""
        if self.dir.exists() and not self.dir.is_dir():
            raise CirError(f"{self.dir}: exists and is not a folder")
        old = self.read_run_json()
        if old is None:
            if self.dir.exists() and any(self.dir.iterdir()):
                raise CirError(
                    f"{self.dir}: folder is not empty and has no {RUN_JSON}; "
                    "choose a new --out folder for a run"
                )
            return None
        previous = old.get("settings", {})
        for key in sorted(set(previous) | set(settings)):
            if previous.get(key) != settings.get(key):
                raise CirError(
                    f"{self.dir}: was written with {key}={previous.get(key)!r}, this command has "
                    f"{key}={settings.get(key)!r}; rerun with the same settings to resume, "
                    "or use a new --out folder"
                )
        return old

    def resume(self, settings: RunSettings) -> RunRecord | None:
        """The record of an earlier run in this folder with these settings (None if the
        folder is new); a folder written with other settings is refused."""
        old = self.check_settings(settings.to_dict())
        return None if old is None else RunRecord.from_dict(old, source=str(self.run_json_path))

    # -- episodes -----------------------------------------------------------------------
    def open(self) -> dict[str, dict[str, Any]]:
        """Prepare for appending (cut a torn tail); the finished tasks' summaries."""
        self.dir.mkdir(parents=True, exist_ok=True)
        if not self.episodes_path.exists():
            return {}
        data = self.episodes_path.read_bytes()
        members, valid = _members(data)
        if valid < len(data):
            with open(self.episodes_path, "r+b") as fh:
                fh.truncate(valid)
                fh.flush()
                os.fsync(fh.fileno())
        done: dict[str, dict[str, Any]] = {}
        for member in members:
            first = member.split(b"\n", 1)[0]
            rec = json.loads(first)
            if rec.get("kind") == "task":
                done[rec["task_id"]] = rec
        return done

    def append_task(self, summary: dict[str, Any], episodes: list[dict[str, Any]]) -> None:
        """One gzip member for the task, flushed and fsynced (all or nothing for readers)."""
        lines = [json.dumps({"kind": "task", **summary}, sort_keys=True, ensure_ascii=False)]
        lines += [json.dumps({"kind": "episode", **ep}, sort_keys=True, ensure_ascii=False)
                  for ep in episodes]
        payload = ("\n".join(lines) + "\n").encode("utf-8")
        member = gzip.compress(payload, compresslevel=6, mtime=0)
        with open(self.episodes_path, "ab") as fh:
            fh.write(member)
            fh.flush()
            os.fsync(fh.fileno())

    # -- table and record ---------------------------------------------------------------
    def write_paired(self, rows: list[dict[str, Any]], columns: list[str]) -> None:
        write_atomic(self.paired_path, paired_csv_text(rows, columns))

    def write_run_json(self, record: dict[str, Any]) -> None:
        write_atomic(self.run_json_path, json.dumps(record, indent=2, sort_keys=True) + "\n")

    def write_record(self, record: RunRecord) -> None:
        self.write_run_json(record.to_dict())
