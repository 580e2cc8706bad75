"""sha256 of every result of a ``cir reproduce`` output, timings aside; with two outputs, which differ.

A change that must not change behaviour (a refactor, a faster engine) is checked by
reproducing the same study before and after it and comparing the digests:

    python benchmarks/study_digest.py OUT_BEFORE OUT_AFTER

Each file under the output folder is hashed as it is, except: ``run.json`` and
``study.json`` without their timings (wall times, sessions, per-task seconds), and each
``episodes.jsonl.gz`` as its decompressed records, task by task in task-id order (workers
finish tasks in any order) without each task's seconds. ``run.json``'s account of the
compressed store (its byte size and each member's size and digest, under ``store``) is left
out too: the members hold the tasks' seconds, so their compressed bytes differ from run to
run; the table's digest (``store.paired_sha256``) is kept. Reply caches are skipped. Prints
one line per file (``digest path`` or, for two folders, ``same``/``DIFFERENT``/``missing``)
and exits 1 when two folders differ.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from cir.pairs.store import read_records

TIMINGS = ("timings", "earlier_calls")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _without_timings(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _without_timings(v) for k, v in data.items() if k not in TIMINGS}
    return data


def _run_record(data: Any) -> Any:
    """A run record without timings and without the compressed store's sizes and digests."""
    data = _without_timings(data)
    if isinstance(data, dict) and isinstance(data.get("store"), dict):
        data["store"] = {"paired_sha256": data["store"].get("paired_sha256")}
    return data


def _episodes(path: Path) -> bytes:
    tasks: dict[str, list[str]] = {}
    current = None
    for record in read_records(path):
        if record.get("kind") == "task":
            record = {k: v for k, v in record.items() if k != "seconds"}
            current = record["task_id"]
            tasks[current] = []
        tasks[str(current)].append(json.dumps(record, sort_keys=True))
    return "\n".join(line for task in sorted(tasks) for line in tasks[task]).encode()


def digests(root: Path) -> dict[str, str]:
    """Relative path -> sha256 of every result file under ``root`` (see module docstring)."""
    out = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "agent_cache" not in p.parts):
        rel = str(path.relative_to(root))
        if path.name.endswith(".jsonl.gz"):
            out[rel] = _sha(_episodes(path))
        elif path.name in ("run.json", "study.json"):
            data = _run_record(json.loads(path.read_text(encoding="utf-8")))
            out[rel] = _sha(json.dumps(data, sort_keys=True).encode())
        else:
            out[rel] = _sha(path.read_bytes())
    return out


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print(__doc__)
        return 2
    first = digests(Path(argv[0]))
    if len(argv) == 1:
        for rel, digest in first.items():
            print(digest, rel)
        return 0
    second = digests(Path(argv[1]))
    differ = 0
    for rel in sorted(set(first) | set(second)):
        a, b = first.get(rel), second.get(rel)
        verdict = "missing" if a is None or b is None else ("same" if a == b else "DIFFERENT")
        differ += verdict != "same"
        print(f"{verdict:9} {a or '-':64} {rel}")
    print(f"{len(first)} and {len(second)} files; {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
