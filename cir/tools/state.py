"""The state of a tool world, of one of three kinds, with exact snapshot and restore supplied by
``cir`` and verified by a content digest.

- :class:`ObjectState`: a Python object (dicts, lists, dataclasses, ...). The handle is the
  object; a snapshot is a deep copy. The digest is over a canonical encoding (dict keys and
  sets sorted, every value tagged with its type; never ``hash()``, which is salted per process).
- :class:`SqliteState`: a SQLite database in memory (the real ``sqlite3``). The handle is the
  ``sqlite3.Connection`` (rows as ``sqlite3.Row``, every statement committed as it runs); a
  snapshot is the database's pages (``Connection.serialize()``, restored by ``deserialize()``;
  before Python 3.11 the backup API into another in-memory database), so a restore gives the
  same schema, rows and rowids. The digest is over the schema (``sqlite_master``), the
  ``user_version`` and every table's rows with their rowids, in rowid order.
- :class:`FolderState`: a folder of files. The handle is the folder's ``pathlib.Path``. A
  snapshot is a manifest {relative path: (content digest, mode)} with the directories and
  symbolic links, the contents kept in a content-addressed store beside the folder: only
  files that changed are read (a stat cache of size, times, inode and mode skips the others)
  and copied, by copy-on-write (``FICLONE``) where the file system allows, else by a copy. A
  restore writes back the files and modes that differ and deletes what was created since.
  The digest is of the manifest.

:meth:`State.restore` checks that the content after the restore has the digest the snapshot
recorded; one that does not is a :class:`~cir.util.errors.RestoreError` naming the kind and
what differs (a table and a row id, a file, a key), which ``cir check-env`` reports and which
quarantines a ``cir run`` (DESIGN.md, "Run folder"). A world event changes the state through
:meth:`State.apply`: a function of the handle, or data (SQL text for a database; ``{"write":
{path: text}, "delete": [path]}`` for a folder).
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import hashlib
import json
import os
import shutil
import sqlite3
import stat
import sys
import tempfile
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from cir.util.errors import CirError, RestoreError

#: Python's sqlite3 serializes a database to bytes from 3.11 on (else: the backup API).
SERIALIZE = sys.version_info >= (3, 11) and hasattr(sqlite3.Connection, "serialize")


class Snapshot:
    """An opaque snapshot of a state: its ``kind``, its content ``digest``, the digests of its
    ``parts`` (tables, files, keys: what a failed restore names) and the kind's ``data``. The parts
    are given, or computed from the data when first asked for (``parts_of``: a database's are read
    from its pages only when a restore's quick check cannot vouch for it)."""

    __slots__ = ("kind", "data", "_parts", "_parts_of", "_digest")

    def __init__(self, kind: str, data: Any, parts: Mapping[str, str] | None = None,
                 parts_of: Callable[[Any], Mapping[str, str]] | None = None) -> None:
        self.kind, self.data = kind, data
        self._parts, self._parts_of, self._digest = parts, parts_of, None

    @property
    def parts(self) -> Mapping[str, str]:
        if self._parts is None:
            self._parts = dict(self._parts_of(self.data))  # type: ignore[misc]
        return self._parts

    @property
    def digest(self) -> str:
        if self._digest is None:
            self._digest = _combine(self.parts)
        return self._digest


class State:
    """A state kind (see the module docstring): a handle, snapshots, checked restores, events."""

    kind: ClassVar[str] = ""

    @property
    def handle(self) -> Any:
        """What the tools' first parameter receives."""
        raise NotImplementedError

    def snapshot(self) -> Snapshot:
        return Snapshot(self.kind, self._take(), self.parts())

    def restore(self, snapshot: Snapshot) -> None:
        """Bring the state back to ``snapshot``; a :class:`RestoreError` when its content then is
        not the snapshot's (naming what differs). A kind that can vouch for an exact restore more
        cheaply than by the digest (a database whose pages are the snapshot's) does so first."""
        if not isinstance(snapshot, Snapshot) or snapshot.kind != self.kind:
            raise CirError(f"{self.kind} state: cannot restore {snapshot!r:.60}; expected a snapshot of this kind")
        self._put(snapshot)
        if self._same(snapshot):
            return
        parts = self.parts()
        if _combine(parts) != snapshot.digest:
            what = self.difference(snapshot, parts)
            raise RestoreError(f"{self.kind} state: the restore is not exact: {what}",
                               {"kind": self.kind, "differs": what})

    def digest(self) -> str:
        """The digest of the content now."""
        return _combine(self.parts())

    def change_token(self) -> Any:
        """A value that changes when the content does (a read-only tool is checked by it): the
        digest, or something cheaper a kind knows."""
        return self.digest()

    def parts(self) -> dict[str, str]:
        """The digests of the content's parts, by name."""
        raise NotImplementedError

    def difference(self, snapshot: Snapshot, parts: Mapping[str, str]) -> str:
        """What the content now (``parts``) has otherwise than ``snapshot``, in words."""
        return _part_difference(snapshot.parts, parts, self.part_noun)

    part_noun: ClassVar[str] = "part"

    def apply(self, change: Any) -> None:
        """A world event's change: a function of the handle, or data this kind reads."""
        if callable(change):
            change(self.handle)
            return
        self._apply_data(change)

    def _apply_data(self, change: Any) -> None:
        raise CirError(f"{self.kind} state: an event's change must be a function of the handle, got {change!r:.80}")

    def _take(self) -> Any:
        raise NotImplementedError

    def _put(self, snapshot: Snapshot) -> None:
        raise NotImplementedError

    def _same(self, snapshot: Snapshot) -> bool:
        """Whether the state now is the snapshot's for a reason cheaper than the digest (else the
        digest decides)."""
        return False

    def close(self) -> None:
        """Let go of what the state holds (a database, a folder)."""


def _combine(parts: Mapping[str, str]) -> str:
    h = hashlib.sha256()
    for name in sorted(parts):
        h.update(name.encode("utf-8", "surrogatepass") + b"\x00" + parts[name].encode() + b"\x00")
    return h.hexdigest()


def _part_difference(want: Mapping[str, str], have: Mapping[str, str], noun: str) -> str:
    lost = sorted(set(want) - set(have))
    new = sorted(set(have) - set(want))
    changed = sorted(k for k in set(want) & set(have) if want[k] != have[k])
    said = []
    if changed:
        said.append(f"{noun} {changed[0]!r} differs" + (f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""))
    if lost:
        said.append(f"{noun} {lost[0]!r} is missing" + (f" (and {len(lost) - 1} more)" if len(lost) > 1 else ""))
    if new:
        said.append(f"{noun} {new[0]!r} should not be there" + (f" (and {len(new) - 1} more)" if len(new) > 1 else ""))
    return "; ".join(said) or "the digests differ"


# -- a Python object --------------------------------------------------------------------------------
class ObjectState(State):
    """A Python object as a tool world's state (see the module docstring)."""

    kind = "object"
    part_noun = "key"

    def __init__(self, value: Any) -> None:
        self.value = value

    @classmethod
    def build(cls, source: Any) -> ObjectState:
        """From a value (deep-copied), or a function that returns one."""
        return cls(source() if callable(source) else copy.deepcopy(source))

    @property
    def handle(self) -> Any:
        return self.value

    def parts(self) -> dict[str, str]:
        value = self.value
        if isinstance(value, Mapping):
            items = {_encode(k): v for k, v in value.items()}
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            items = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        elif isinstance(value, list | tuple):
            items = {str(i): v for i, v in enumerate(value)}
        else:
            items = {"": value}
        return {name: hashlib.sha256(_encode(v).encode("utf-8", "surrogatepass")).hexdigest()
                for name, v in items.items()}

    def _take(self) -> Any:
        return copy.deepcopy(self.value)

    def _put(self, snapshot: Snapshot) -> None:
        self.value = copy.deepcopy(snapshot.data)


def _encode(value: Any) -> str:
    """A canonical text of a value: the same content gives the same text in every process."""
    out: list[str] = []
    _encode_into(value, out, 0)
    return "".join(out)


def _encode_into(value: Any, out: list[str], depth: int) -> None:
    if depth > 200:
        raise CirError("object state: the value is nested too deeply (a cycle?) to be digested")
    if value is None or isinstance(value, bool | int | float | str | bytes):
        out.append(f"{type(value).__name__}:{value!r};")
    elif isinstance(value, enum.Enum):
        out.append(f"enum:{type(value).__qualname__}.{value.name};")
    elif isinstance(value, Mapping):
        items = sorted((_encode(k), v) for k, v in value.items()) if value else []
        out.append("{")
        for key, v in items:
            out.append(key)
            _encode_into(v, out, depth + 1)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[" if isinstance(value, list) else "(")
        for v in value:
            _encode_into(v, out, depth + 1)
        out.append("]" if isinstance(value, list) else ")")
    elif isinstance(value, set | frozenset):
        out.append("<" + "".join(sorted(_encode(v) for v in value)) + ">")
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        out.append(f"dc:{type(value).__qualname__}" + "{")
        for f in dataclasses.fields(value):
            out.append(f.name + "=")
            _encode_into(getattr(value, f.name), out, depth + 1)
        out.append("}")
    elif hasattr(value, "__dict__"):
        out.append(f"obj:{type(value).__qualname__}")
        _encode_into(vars(value), out, depth + 1)
    else:
        raise CirError(f"object state: cannot digest a value of type {type(value).__name__} ({value!r:.60}); "
                       "keep the state to dicts, lists, sets, dataclasses, enums and plain values")


# -- a SQLite database ------------------------------------------------------------------------------------
class SqliteState(State):
    """A SQLite database in memory as a tool world's state (see the module docstring)."""

    kind = "sqlite"
    part_noun = "table"

    def __init__(self, connection: sqlite3.Connection | None = None) -> None:
        self.conn = connection if connection is not None else connect()

    @classmethod
    def build(cls, source: Any) -> SqliteState:
        """From a database file (``.sqlite``, ``.db``), a SQL script (a ``.sql`` file or text),
        the bytes of a serialized database, or a function that fills a new connection."""
        state = cls()
        conn = state.conn
        if callable(source):
            source(conn)
        elif isinstance(source, bytes | bytearray):
            _load_bytes(conn, bytes(source))
        elif isinstance(source, Path):
            if not source.is_file():
                raise CirError(f"{source}: no such database or SQL file")
            if source.suffix == ".sql":
                _script(conn, source.read_text(encoding="utf-8"), str(source))
            else:
                try:
                    with sqlite3.connect(f"file:{source}?mode=ro", uri=True) as disk:
                        disk.backup(conn)
                except sqlite3.DatabaseError as err:
                    raise CirError(f"{source}: not a SQLite database ({err})") from None
        elif isinstance(source, str):
            _script(conn, source, "the task's SQL")
        else:
            raise CirError(f"sqlite state: cannot build a database from {source!r:.60}; expected a .sqlite or .sql "
                           "file, SQL text, or a function of a sqlite3.Connection")
        return state

    @property
    def handle(self) -> sqlite3.Connection:
        return self.conn

    def change_token(self) -> Any:
        """The rows changed on the connection so far and the schema's version (no digest needed)."""
        return self.conn.total_changes, self.conn.execute("PRAGMA schema_version").fetchone()[0]

    def parts(self) -> dict[str, str]:
        return {name: h.hexdigest() for name, h in _table_hashes(self.conn).items()}

    def snapshot(self) -> Snapshot:
        """The pages (the content digest is read from them when first asked for)."""
        return Snapshot(self.kind, self._take(), parts_of=_parts_of_pages)

    def _same(self, snapshot: Snapshot) -> bool:
        """The database's pages now are the snapshot's, byte for byte (then so is every row)."""
        return SERIALIZE and isinstance(snapshot.data, bytes) and self.conn.serialize() == snapshot.data

    def _take(self) -> Any:
        if SERIALIZE:
            return self.conn.serialize()
        copy_ = connect()
        self.conn.backup(copy_)
        return copy_

    def _put(self, snapshot: Snapshot) -> None:
        data = snapshot.data
        if isinstance(data, bytes):
            _load_bytes(self.conn, data)
        else:
            data.backup(self.conn)

    def difference(self, snapshot: Snapshot, parts: Mapping[str, str]) -> str:
        said = super().difference(snapshot, parts)
        changed = sorted(k for k in set(snapshot.parts) & set(parts) if snapshot.parts[k] != parts[k])
        if not changed or changed[0].startswith("("):
            return said
        if isinstance(snapshot.data, bytes):
            other = connect()
            _load_bytes(other, snapshot.data)
        else:
            other = snapshot.data
        row = _first_row_difference(other, self.conn, changed[0])
        return f"{said}: {row}" if row else said

    def _apply_data(self, change: Any) -> None:
        if not isinstance(change, str):
            super()._apply_data(change)
        _script(self.conn, change, "an event's SQL")

    def close(self) -> None:
        self.conn.close()


def _parts_of_pages(data: Any) -> dict[str, str]:
    """The content digests of a database snapshot's pages (or of a 3.10 snapshot's connection)."""
    if isinstance(data, bytes):
        conn = connect()
        try:
            _load_bytes(conn, data)
            return {name: h.hexdigest() for name, h in _table_hashes(conn).items()}
        finally:
            conn.close()
    return {name: h.hexdigest() for name, h in _table_hashes(data).items()}


def connect() -> sqlite3.Connection:
    """A new in-memory database as a tool world uses one: rows as ``sqlite3.Row``, every
    statement committed as it runs, usable from the replayer's threads (one at a time)."""
    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    return conn


def _load_bytes(conn: sqlite3.Connection, data: bytes) -> None:
    if SERIALIZE:
        conn.deserialize(data)
        return
    raise CirError("sqlite state: loading serialized bytes needs Python 3.11 or later")  # pragma: no cover


def _script(conn: sqlite3.Connection, sql: str, where: str) -> None:
    try:
        conn.executescript(sql)
    except sqlite3.Error as err:
        raise CirError(f"{where}: SQLite refused it ({err})") from None


def _tables(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name").fetchall()
    return [name for name, sql in rows if not str(sql or "").upper().startswith("CREATE VIRTUAL")]


def _rows(conn: sqlite3.Connection, table: str) -> sqlite3.Cursor:
    """A table's rows in a fixed order: ``(rowid, *columns)`` by rowid, or by every column for a
    table WITHOUT ROWID."""
    quoted = '"' + table.replace('"', '""') + '"'
    try:
        cur = conn.execute(f"SELECT rowid, * FROM {quoted} ORDER BY rowid")
    except sqlite3.OperationalError:  # WITHOUT ROWID
        n = len(conn.execute(f"SELECT * FROM {quoted} LIMIT 0").description)
        cur = conn.execute(f"SELECT * FROM {quoted} ORDER BY {', '.join(str(i + 1) for i in range(n))}")
    cur.row_factory = None
    return cur


def _table_hashes(conn: sqlite3.Connection) -> dict[str, Any]:
    out: dict[str, Any] = {}
    schema = hashlib.sha256()
    cur = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name")
    cur.row_factory = None
    for row in cur:
        schema.update(repr(row).encode("utf-8", "surrogatepass"))
    schema.update(repr(conn.execute("PRAGMA user_version").fetchone()[0]).encode())
    out["(schema)"] = schema
    for table in _tables(conn):
        h = hashlib.sha256()
        for row in _rows(conn, table):
            h.update(repr(row).encode("utf-8", "surrogatepass"))
        out[table] = h
    return out


def _first_row_difference(want: sqlite3.Connection, have: sqlite3.Connection, table: str) -> str:
    a, b = _rows(want, table).fetchall(), _rows(have, table).fetchall()
    by_a = {r[0]: r for r in a}
    by_b = {r[0]: r for r in b}
    for key in sorted(set(by_a) | set(by_b), key=repr):
        if by_a.get(key) != by_b.get(key):
            if key not in by_b:
                return f"row {key!r} is missing"
            if key not in by_a:
                return f"row {key!r} should not be there"
            return f"row {key!r} is {by_b[key][1:]!r:.120}, the snapshot had {by_a[key][1:]!r:.120}"
    return ""


# -- a folder of files --------------------------------------------------------------------------------
#: Linux's ioctl number of a copy-on-write clone of a whole file.
_FICLONE = 0x40049409


class FolderState(State):
    """A folder of files as a tool world's state (see the module docstring). The folder and its
    content store are made in a temporary folder of their own (``base``), removed with the state."""

    kind = "folder"
    part_noun = "path"

    def __init__(self, base: str | Path | None = None) -> None:
        self.base = Path(base) if base is not None else Path(tempfile.mkdtemp(prefix="cir-folder-"))
        self.root = self.base / "work"
        self.store = self.base / "store"
        self.root.mkdir(parents=True, exist_ok=True)
        self.store.mkdir(parents=True, exist_ok=True)
        self._cache: dict[str, tuple[tuple[int, ...], str]] = {}  # path -> (stat key, content digest)
        self.reflink = sys.platform.startswith("linux")
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(self.base), True) if base is None else None

    @classmethod
    def build(cls, source: Any) -> FolderState:
        """From a folder (copied), a mapping {relative path: text or bytes}, or a function that
        fills the new folder (its ``Path``)."""
        state = cls()
        if callable(source):
            source(state.root)
        elif isinstance(source, Mapping):
            _write_files(state.root, source, "the task's files")
        elif isinstance(source, str | Path) and Path(source).is_dir():
            shutil.copytree(source, state.root, symlinks=True, dirs_exist_ok=True)
        else:
            raise CirError(f"folder state: cannot build a folder from {source!r:.60}; expected a folder, a mapping "
                           "of relative paths to contents, or a function of the folder's Path")
        return state

    @property
    def handle(self) -> Path:
        return self.root

    def parts(self) -> dict[str, str]:
        return {rel: _entry_text(entry) for rel, entry in self._scan().items()}

    def snapshot(self) -> Snapshot:
        entries = self._scan(keep=True)
        return Snapshot(self.kind, entries, {rel: _entry_text(entry) for rel, entry in entries.items()})

    def _scan(self, keep: bool = False) -> dict[str, tuple[Any, ...]]:
        """The manifest: ``{path: ("file", digest, mode) | ("dir", mode) | ("link", target)}``;
        ``keep``: every file's content is in the store (a snapshot's)."""
        out: dict[str, tuple[Any, ...]] = {}
        seen: set[str] = set()
        stack = [""]
        while stack:
            folder = stack.pop()
            with os.scandir(self.root / folder) as it:
                for entry in it:
                    rel = f"{folder}/{entry.name}" if folder else entry.name
                    st = entry.stat(follow_symlinks=False)
                    if stat.S_ISLNK(st.st_mode):
                        out[rel] = ("link", os.readlink(entry.path))
                    elif stat.S_ISDIR(st.st_mode):
                        out[rel] = ("dir", stat.S_IMODE(st.st_mode))
                        stack.append(rel)
                    elif stat.S_ISREG(st.st_mode):
                        seen.add(rel)
                        out[rel] = ("file", self._digest(rel, entry.path, st, keep), stat.S_IMODE(st.st_mode))
                    else:
                        raise CirError(f"folder state: {rel} is neither a file, a folder nor a link; a tool world's "
                                       "folder holds only those")
        for rel in list(self._cache):
            if rel not in seen:
                del self._cache[rel]
        return out

    def _digest(self, rel: str, path: str, st: os.stat_result, keep: bool) -> str:
        key = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode)
        cached = self._cache.get(rel)
        if cached is not None and cached[0] == key and (not keep or (self.store / cached[1]).exists()):
            return cached[1]
        if keep:  # copy first (a clone where it can), then hash the copy: what is stored is what is named
            tmp = self.store / f"tmp-{os.getpid()}-{id(self)}"
            self._copy(path, tmp)
            digest = _file_digest(tmp)
            target = self.store / digest
            if target.exists():
                tmp.unlink()
            else:
                os.replace(tmp, target)
        else:
            digest = _file_digest(Path(path))
        self._cache[rel] = (key, digest)
        return digest

    def _copy(self, src: str | Path, dst: str | Path) -> None:
        if self.reflink:
            try:
                import fcntl

                with open(src, "rb") as s, open(dst, "wb") as d:
                    fcntl.ioctl(d.fileno(), _FICLONE, s.fileno())
                return
            except (OSError, ImportError):
                self.reflink = False  # this file system cannot clone: copy from now on
        shutil.copyfile(src, dst)

    def _take(self) -> Any:  # pragma: no cover - snapshot() is overridden
        return self._scan(keep=True)

    def _put(self, snapshot: Snapshot) -> None:
        want: dict[str, tuple[Any, ...]] = snapshot.data
        have = self._scan()
        # what is not in the snapshot (or is there as something else) goes, deepest first
        for rel in sorted(have, key=lambda r: r.count("/"), reverse=True):
            if rel in want and want[rel][0] == have[rel][0] and (want[rel][0] != "link" or want[rel] == have[rel]):
                continue
            path = self.root / rel
            if have[rel][0] == "dir":
                shutil.rmtree(path)
            else:
                path.unlink()
        for rel in sorted(want, key=lambda r: r.count("/")):
            entry, path = want[rel], self.root / rel
            if entry[0] == "dir":
                if not path.is_dir() or path.is_symlink():
                    path.mkdir()
            elif entry[0] == "link":
                if not path.is_symlink():
                    os.symlink(entry[1], path)
            elif rel not in have or have[rel][0] != "file" or have[rel][1] != entry[1]:
                # written in place (a rename costs the file system more than the copy): one writer
                if path.exists() and not os.access(path, os.W_OK):
                    os.chmod(path, stat.S_IMODE(path.stat().st_mode) | stat.S_IWUSR)
                self._copy(self.store / entry[1], path)
        for rel in sorted(want, key=lambda r: r.count("/"), reverse=True):  # modes last: a folder may be read-only
            entry, path = want[rel], self.root / rel
            if entry[0] in ("dir", "file") and stat.S_IMODE(path.lstat().st_mode) != entry[-1]:
                os.chmod(path, entry[-1])

    def _apply_data(self, change: Any) -> None:
        if not isinstance(change, Mapping) or not set(change) <= {"write", "delete"}:
            super()._apply_data(change)
        _write_files(self.root, change.get("write", {}), "an event's write")
        for rel in change.get("delete", ()):
            path = _inside(self.root, rel, "an event's delete")
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()

    def close(self) -> None:
        if self._finalizer is not None:
            self._finalizer()


def _entry_text(entry: tuple[Any, ...]) -> str:
    return json.dumps(list(entry))


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _inside(root: Path, rel: str, where: str) -> Path:
    if not isinstance(rel, str) or not rel or Path(rel).is_absolute() or ".." in Path(rel).parts:
        raise CirError(f"{where}: {rel!r} must be a relative path inside the folder")
    return root / rel


def _write_files(root: Path, files: Mapping[str, Any], where: str) -> None:
    for rel, content in files.items():
        path = _inside(root, rel, where)
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        elif isinstance(content, str):
            path.write_text(content, encoding="utf-8")
        else:
            raise CirError(f"{where}: the content of {rel!r} must be text or bytes, got {type(content).__name__}")


#: The state kinds by the name a world gives.
STATE_KINDS: dict[str, type[State]] = {"object": ObjectState, "sqlite": SqliteState, "folder": FolderState}


def state_kind(kind: str | type[State]) -> type[State]:
    """The state class ``kind`` names (``object``, ``sqlite``, ``folder``), or ``kind`` itself
    when it is a :class:`State` subclass (a variant of one's own)."""
    if isinstance(kind, type) and issubclass(kind, State):
        return kind
    found = STATE_KINDS.get(kind) if isinstance(kind, str) else None
    if found is None:
        raise CirError(f"state kind {kind!r}: expected one of {', '.join(STATE_KINDS)}, or a State subclass")
    return found


def build_state(kind: str | type[State], source: Any) -> State:
    """A new state of ``kind`` built from ``source`` (each kind's ``build`` says what it takes)."""
    return state_kind(kind).build(source)  # type: ignore[attr-defined]


def load_source(kind: str | type[State], source: Any) -> Callable[[], State]:
    """A function that builds a fresh state of ``kind`` from ``source`` each time it is called."""
    cls = state_kind(kind)
    return lambda: cls.build(source)  # type: ignore[attr-defined]
