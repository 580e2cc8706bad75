"""Writing files atomically and reading JSON files, with one-line errors.

Run records, study records and routers are rewritten while a run goes on and read back
on resume, so a reader must never see half a file: every writer goes through
:func:`write_atomic` (a temporary file in the same folder, flushed and fsynced, then
renamed over the target; concurrent writers of one path each rename a complete file).
Every JSON file is read through :func:`read_json`, which names the file and the problem
instead of raising a parser traceback. A full or read-only disk is a
:class:`~cir.util.errors.CirError` naming the path (:func:`disk_error`), and the target
is left as it was.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from cir.util.errors import CirError


def check_regular(path: str | Path, what: str = "file") -> None:
    """Refuse, before it is opened, a path that exists and is not a regular file or a folder: a
    FIFO (its read would wait for a writer forever), a device (``/dev/zero`` never ends), a
    socket. A CirError names it and what was expected."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as err:
        raise disk_error(path, err, "read") from None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return
    kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
    raise CirError(f"{path}: is {kind}; expected a {what} in a regular file")


def user_cache(name: str) -> Path:
    """A folder of the user's cache for ``name`` (the engine's SAS translations, the planted
    worlds' replicates): ``$CIR_CACHE_DIR/NAME`` if set, else ``$XDG_CACHE_HOME/cir/NAME``, else
    ``~/.cache/cir/NAME``. What is kept there is a function of its key; deleting it costs only time."""
    root = os.environ.get("CIR_CACHE_DIR")
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME")
        root = str(Path(xdg) / "cir") if xdg else str(Path.home() / ".cache" / "cir")
    return Path(root) / name


def disk_error(path: str | Path, err: OSError, doing: str = "write") -> CirError:
    """One line for an OS error on ``path`` (read-only, full, not a folder...)."""
    reason = err.strerror or type(err).__name__
    return CirError(f"{path}: cannot {doing} ({reason})")


def _read_umask() -> int:
    # os.umask can only be read by setting it; done once, at import, not while threads write
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _read_umask()


def write_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8, newlines as given) to ``path`` so readers see all or nothing.

    The file gets the permissions a plain ``open()`` would give (mkstemp's are 0600). A
    path that is a device or a pipe (``/dev/null``) is written to, not renamed over: a
    rename would replace the device with a file.
    """
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    """:func:`write_atomic` for bytes."""
    path = Path(path)
    if path.is_dir():
        raise CirError(f"{path}: is a folder, expected a file name")
    if path.exists() and not path.is_file():
        try:
            with open(path, "wb") as fh:
                fh.write(data)
        except OSError as err:
            raise disk_error(path, err) from None
        return path
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:
        raise disk_error(path, err) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, path)
    except BaseException as err:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(err, OSError):
            raise disk_error(path, err) from None
        raise
    return path


def json_error_text(err: json.JSONDecodeError) -> str:
    """What the parser found and where: ``Expecting ',' delimiter at line 3 column 5``; a message
    that already ends with 'at' (``Unterminated string starting at``) is not given a second one."""
    where = f"line {err.lineno} column {err.colno}"
    return f"{err.msg} {where}" if err.msg.endswith(" at") else f"{err.msg} at {where}"


def _unique_keys(path: Path, what: str):  # noqa: ANN202 - a json object_pairs_hook
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise CirError(f"{path}: key {key!r} appears twice in one object of the {what}")
            out[key] = value
        return out

    return hook


def read_json(path: str | Path, what: str = "JSON file", *, strict: bool = False,
              missing_ok: bool = False, max_bytes: int | None = None) -> Any:
    """The parsed content of a JSON file; None if it is absent and ``missing_ok``.

    ``what`` names the file in messages ("router file", "run record"). ``strict`` refuses
    the non-standard constants NaN and Infinity that Python's parser accepts, and a key
    given twice in one object (the parser would keep the last). ``max_bytes`` refuses a
    larger file before reading it.
    """
    path = Path(path)
    if not path.exists():
        if missing_ok:
            return None
        raise CirError(f"{path}: no such {what}")
    if path.is_dir():
        raise CirError(f"{path}: is a folder, expected a {what}")
    check_regular(path, what)
    try:
        if max_bytes is not None and path.stat().st_size > max_bytes:
            raise CirError(f"{path}: {path.stat().st_size} bytes, more than a {what} can be "
                           f"({max_bytes} bytes at most)")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise CirError(f"{path}: cannot read the {what} ({err})") from None

    def no_constants(name: str) -> Any:
        raise CirError(f"{path}: {name} is not allowed in a {what} (strict JSON numbers only)")

    try:
        return json.loads(text, parse_constant=no_constants if strict else None,
                          object_pairs_hook=_unique_keys(path, what) if strict else None)
    except json.JSONDecodeError as err:
        raise CirError(f"{path}: not valid JSON (truncated or corrupt?): {json_error_text(err)}") from None
    except RecursionError:
        raise CirError(f"{path}: nested too deeply to be a {what}") from None
