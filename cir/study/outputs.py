"""What an analysis wrote and from what (``analysis.json``), so that a call with the same inputs
finds its outputs whole and rewrites nothing.

A study's analysis is a function of what it reads: each cohort's run (its table and episode
store, as the run record names them by digest), the study's settings (``study.json``'s), the
code that analyses (:func:`code_version`) and, for a pooled report, each replicate's own
analysis record. After an analysis, ``analysis.json`` records a digest of those inputs and the
sha256 of every file the analysis wrote (:data:`OUTPUTS`). A later call whose inputs have the
same digest and whose outputs are all there, byte for byte, has nothing to do: it skips the
analysis and writes nothing. An analysis that starts removes the record first and writes it
last, so an interrupted one is done again.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cir import __version__
from cir.pairs.record import RunRecord
from cir.pairs.store import RunStore
from cir.util.errors import CirError
from cir.util.files import read_json, write_atomic

ANALYSIS_JSON = "analysis.json"
#: What an analysis writes, under its study folder (files and folders, glob patterns).
OUTPUTS = ("tables", "figures", "report.md", "report.html", "router*.json", "validation/validation_rows.csv")
#: The layout of ``analysis.json``; a change makes every old record a miss.
FORMAT = 1


#: The libraries an analysis computes with (their versions are part of :func:`code_version`).
LIBRARIES = ("numpy", "scipy", "scikit-learn", "pandas", "matplotlib", "mapie", "statsmodels")


@functools.cache
def code_version(parts: tuple[str, ...] = ("",), libraries: tuple[str, ...] = LIBRARIES) -> str:
    """A digest of ``cir``'s code (the bytes of every module under each of ``parts``, paths in
    the package: a folder ending in ``/``, a module, or ``""`` for all) and of the versions of
    ``libraries``: two checkouts of one version number that compute differently differ here."""
    from importlib.metadata import PackageNotFoundError, version

    import cir

    root = Path(cir.__file__).resolve().parent
    h = hashlib.sha256(f"cir {__version__}\0".encode())
    for part in parts:
        path = root / part
        for f in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            if f.is_file():
                h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    for lib in libraries:
        try:
            h.update(f"{lib} {version(lib)}\0".encode())
        except PackageNotFoundError:
            h.update(f"{lib} -\0".encode())
    return h.hexdigest()


def run_inputs(run_dirs: Sequence[Path]) -> dict[str, Any]:
    """What an analysis reads of each run: its table's digest and its store's members, as its
    record names them (readers check the bytes against the record: :func:`cir.pairs.paired.read_run`)."""
    out: dict[str, Any] = {}
    for run_dir in run_dirs:
        record = RunRecord.read(RunStore(run_dir))
        if record is None:
            out[run_dir.name] = None
            continue
        members = [[m.task_id, m.bytes, m.sha256] for m in record.members] if record.members is not None else None
        out[run_dir.name] = {"paired_sha256": record.paired_sha256, "members": members,
                             "complete": record.complete}
    return out


def inputs_digest(settings: dict[str, Any], inputs: dict[str, Any]) -> str:
    """One digest of an analysis's settings, its inputs and the code that analyses them."""
    body = {"format": FORMAT, "code": code_version(), "settings": settings, "inputs": inputs}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()


def _outputs(out: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file of :data:`OUTPUTS` under ``out``."""
    found: dict[str, str] = {}
    for pattern in OUTPUTS:
        for path in sorted(out.glob(pattern)):
            files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
            for f in files:
                found[f.relative_to(out).as_posix()] = hashlib.sha256(f.read_bytes()).hexdigest()
    return found


def unchanged(out: Path, digest: str) -> bool:
    """Whether ``out`` holds an analysis of inputs of this digest, every output as it was written."""
    try:
        record = read_json(out / ANALYSIS_JSON, "analysis record", missing_ok=True)
    except CirError:  # an unreadable record records nothing
        return False
    if not isinstance(record, dict) or record.get("inputs") != digest or not isinstance(record.get("outputs"), dict):
        return False
    for rel, sha in record["outputs"].items():
        path = out / rel
        try:
            if hashlib.sha256(path.read_bytes()).hexdigest() != sha:
                return False
        except OSError:
            return False
    return True


def begin(out: Path) -> None:
    """An analysis starts: its record goes (an interrupted analysis is done again)."""
    (out / ANALYSIS_JSON).unlink(missing_ok=True)


def record(out: Path, digest: str) -> dict[str, Any]:
    """An analysis ended: record its inputs' digest and every output's sha256; the record."""
    data = {"format": FORMAT, "cir_version": __version__, "inputs": digest, "outputs": _outputs(out)}
    write_atomic(out / ANALYSIS_JSON, json.dumps(data, indent=1, sort_keys=True) + "\n")
    return data
