"""Writing files atomically and reading JSON files, with one-line errors.

Run records, study records, routers and cached replies are rewritten while a run goes
on and read back on resume, so a reader must never see half a file: every writer goes
through :func:`write_atomic` (a temporary file in the same folder, flushed and fsynced,
then renamed over the target; concurrent writers of one path each rename a complete
file). Every JSON file is read through :func:`read_json`, which names the file and the
problem instead of raising a parser traceback.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from cir.errors import CirError


def write_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8, newlines as given) to ``path`` so readers see all or nothing."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def read_json(path: str | Path, what: str = "JSON file", *, strict: bool = False,
              missing_ok: bool = False) -> Any:
    """The parsed content of a JSON file; None if it is absent and ``missing_ok``.

    ``what`` names the file in messages ("router file", "run record"). ``strict`` refuses
    the non-standard constants NaN and Infinity that Python's parser accepts.
    """
    path = Path(path)
    if not path.exists():
        if missing_ok:
            return None
        raise CirError(f"{path}: no such {what}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise CirError(f"{path}: cannot read the {what} ({err})") from None

    def no_constants(name: str) -> Any:
        raise CirError(f"{path}: {name} is not allowed in a {what} (strict JSON numbers only)")

    try:
        return json.loads(text, parse_constant=no_constants if strict else None)
    except json.JSONDecodeError as err:
        raise CirError(f"{path}: not valid JSON (truncated or corrupt?): {err.msg} at line "
                       f"{err.lineno} column {err.colno}") from None
