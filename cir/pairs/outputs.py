"""Where an output may be written: the one writer of every output a command or a user asks for.

A run folder is the truth of a run (DESIGN.md, "Run folder"): only its writers (``cir run``,
``cir repair``, through :class:`~cir.pairs.store.RunStore`) touch its files. Every other output
(a table, a router, a report, a figure, a transcript, an estimate) goes through
:func:`write_output`, which first asks :func:`check_output`; a path that is refused is one line
naming it and what it would have destroyed, and nothing is written:

- a run folder's own files (``run.json``, ``episodes.jsonl.gz``, ``paired.csv``, its lock, its
  ``agent_cache/``, the copies its writers keep beside them), followed through symbolic links;
- an existing file that holds something the writer does not make: a run record, an episode
  store, a paired table, a study record or a router file (``cir fit --out`` may replace a
  router, as refitting does; ``cir table --out`` may not).

Anything else is written atomically (:func:`cir.util.files.write_atomic`): a new file, a file of
the writer's own kind, a device such as ``/dev/null``.
"""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

from cir.pairs.store import AGENT_CACHE, EPISODES, PAIRED, RUN_JSON
from cir.util.errors import CirError
from cir.util.files import write_bytes_atomic
from cir.util.lock import LOCK_FILE

#: A run folder's own files, which only its writers touch (copies kept beside them start so too).
RUN_FILES = (RUN_JSON, EPISODES, PAIRED, "paired.parquet", LOCK_FILE)
ROUTER = "router file"
RUN_RECORD, STORE, TABLE, STUDY = "run record", "episode store", "paired table", "study record"
_PAIRED_HEADER = "task_id,split,task_type,agent,condition,delay,operation,"
_SNIFF_BYTES = 64 * 1024 * 1024  # a record or router larger than this is not sniffed as one


def _run_folder(folder: Path) -> bool:
    return (folder / RUN_JSON).is_file() or (folder / EPISODES).is_file()


def _own_file(path: Path) -> str | None:
    """What of a run folder ``path`` is (``run.json of the run folder R``), or None."""
    name, folder = path.name, path.parent
    if _run_folder(folder) and any(name == own or name.startswith(f"{own}.") or name.startswith(f".{own}.")
                                   for own in RUN_FILES):
        return f"{name} of the run folder {folder}"
    for parent in path.parents:
        if parent.name == AGENT_CACHE and _run_folder(parent.parent):
            return f"in the reply cache ({AGENT_CACHE}/) of the run folder {parent.parent}"
    return None


def sniff(path: Path) -> str | None:
    """What kind of file of ``cir``'s an existing regular file holds (:data:`ROUTER`,
    :data:`RUN_RECORD`, :data:`STORE`, :data:`TABLE`, :data:`STUDY`), or None."""
    try:
        if not path.is_file() or path.stat().st_size == 0:
            return None
        with open(path, "rb") as fh:
            head = fh.read(4096)
        if head[:2] == b"\x1f\x8b":
            try:
                first = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, 65536).split(b"\n", 1)[0]
            except zlib.error:
                return None
            return STORE if first.startswith(b"{") and b'"kind": "task"' in first else None
        if head.lstrip().startswith(_PAIRED_HEADER.encode()):
            return TABLE
        if not head.lstrip().startswith(b"{") or path.stat().st_size > _SNIFF_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, EOFError, gzip.BadGzipFile):
        return None
    if not isinstance(data, dict):
        return None
    if data.get("format") == "cir-router":
        return ROUTER
    if {"cir_version", "settings", "counts", "feasibility"} <= set(data):
        return RUN_RECORD
    if {"cir_version", "settings", "timings", "earlier_calls"} <= set(data):
        return STUDY
    return None


def check_output(path: str | Path, makes: str, option: str = "") -> Path:
    """``path`` if an output that ``makes`` (a kind of file: ``table``, :data:`ROUTER`, ...) may be
    written there, else a CirError naming it (``option``, the flag that gave it) and what it would
    replace; nothing is read but the file's first bytes, nothing is written."""
    path = Path(path)
    where = f"{option} {path}" if option else str(path)
    if path.is_dir():
        raise CirError(f"{where}: is a folder, expected a file name")
    target = path.resolve()  # a link to a run's file is that file
    own = _own_file(target)
    if own is not None:
        raise CirError(f"{where}: is {own}, which only `cir run` and `cir repair` write; write the "
                       "output to another file (nothing was written)")
    kind = sniff(target)
    if kind is not None and kind != makes:
        raise CirError(f"{where}: holds a {kind}, which this {makes} would replace; write the output "
                       "to another file (nothing was written)")
    return path


def write_output(path: str | Path, content: str | bytes, makes: str, option: str = "") -> Path:
    """Write an output (text as UTF-8) after :func:`check_output`, atomically."""
    check_output(path, makes, option)
    data = content.encode("utf-8") if isinstance(content, str) else content
    return write_bytes_atomic(path, data)
