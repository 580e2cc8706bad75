"""Tasks of a tool world: :class:`ToolTask`, and tasks read from (and written to) files a user can
write by hand.

The layout, one folder per split and one per task::

    tasks/
      train/
        order-cancel-001/
          task.json        {"instruction": "...", "task_type": "cancel", "events": [...], ...}
          state.sqlite     the initial database (or state.sql, a SQL script)
        order-cancel-002/
          task.json
          state.sql
      test/
        ...

``task.json`` holds the ``instruction`` (the text the episode starts with), optionally the
``task_type``, the ``events`` (each ``{"at": N, "sql": "..."}`` for a database,
``{"at": N, "write": {"path": "text"}, "delete": ["path"]}`` for a folder) and any other fields
the world's success check reads (``task.data``). The initial state is one of ``state.sqlite``
(or ``state.db``), ``state.sql``, a folder ``state/``, or ``state.json`` (an object). A bad file
is an error naming the file and the field.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cir.tools.env import Event
from cir.tools.state import FolderState, ObjectState, SqliteState, State, state_kind
from cir.util.errors import CirError

#: The initial-state files a task folder may hold, and the state kind each is for.
STATE_FILES = {"state.sqlite": SqliteState, "state.db": SqliteState, "state.sql": SqliteState,
               "state": FolderState, "state.json": ObjectState}
#: The fields of task.json that are not the world's own data.
TASK_FIELDS = ("task_id", "split", "task_type", "instruction", "events")


@dataclass(frozen=True)
class ToolTask:
    """One task of a tool world: its id, the ``instruction`` the episode starts with, the
    ``initial`` state (what the world's state kind builds from: a file or folder, SQL text, a
    value, or a module-level function), its split and type, its world :class:`~cir.tools.env.Event`
    s, and ``data`` the success check reads (the order to cancel, the expected answer)."""

    task_id: str
    instruction: str
    initial: Any = None
    split: str = ""
    task_type: str = ""
    events: tuple[Event, ...] = ()
    data: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.task_id, str) or not self.task_id or "/" in self.task_id:
            raise CirError(f"tool task id {self.task_id!r}: expected a non-empty name without '/'")
        if not isinstance(self.instruction, str) or not self.instruction.strip():
            raise CirError(f"task {self.task_id}: instruction must be non-empty text")
        object.__setattr__(self, "events", tuple(self.events))


# -- reading --------------------------------------------------------------------------------------------
def load_tool_tasks(path: str | Path, split: str | None = None, kind: Any = None) -> list[ToolTask]:
    """The tasks under ``path`` (a folder of split folders, or one split folder), sorted by id;
    ``split``: only that split's; ``kind``: the world's state kind (a task's state file must be of it)."""
    path = Path(path)
    if not path.is_dir():
        raise CirError(f"{path}: no such folder of tasks")
    if any(path.glob("*/task.json")):
        folders = [p.parent for p in path.glob("*/task.json")]
        default_split = path.name
    else:
        folders = [p.parent for p in path.glob("*/*/task.json")]
        default_split = None
    tasks = [read_task(folder, default_split or folder.parent.name, kind) for folder in folders]
    tasks = [t for t in tasks if split is None or t.split == split]
    ids = [t.task_id for t in tasks]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise CirError(f"{path}: task id {twice[0]!r} is used by two task folders; ids must be unique")
    return sorted(tasks, key=lambda t: t.task_id)


def read_task(folder: Path, split: str, kind: Any = None) -> ToolTask:
    """The task of one task folder (``task.json`` and its state file)."""
    source = folder / "task.json"
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except ValueError as err:
        raise CirError(f"{source}: not JSON ({err})") from None
    if not isinstance(data, dict):
        raise CirError(f"{source}: expected a JSON object with an 'instruction'")
    instruction = data.get("instruction")
    if not isinstance(instruction, str) or not instruction.strip():
        raise CirError(f"{source}: field 'instruction' must be non-empty text (what the episode starts with)")
    task_id = data.get("task_id", folder.name)
    if task_id != folder.name:
        raise CirError(f"{source}: field 'task_id' is {task_id!r}, its folder is {folder.name!r}; they must agree")
    if data.get("split", split) != split:
        raise CirError(f"{source}: field 'split' is {data['split']!r}, its folder is in {split!r}")
    task_type = data.get("task_type", "")
    if not isinstance(task_type, str):
        raise CirError(f"{source}: field 'task_type' must be text")
    events = _events(data.get("events", []), source)
    found = [name for name in STATE_FILES if (folder / name).exists()]
    if len(found) > 1:
        raise CirError(f"{folder}: holds {' and '.join(found)}; a task's initial state is one of "
                       f"{', '.join(STATE_FILES)}")
    initial: Any = None
    if found:
        state_file = folder / found[0]
        want = state_kind(kind) if kind is not None else None
        if want is not None and not issubclass(want, STATE_FILES[found[0]]) and not issubclass(STATE_FILES[found[0]], want):
            raise CirError(f"{state_file}: a {STATE_FILES[found[0]].kind} state, but this world's state is "
                           f"{want.kind}; expected one of "
                           f"{', '.join(n for n, k in STATE_FILES.items() if k is want or issubclass(want, k))}")
        initial = _initial(state_file)
    other = {k: v for k, v in data.items() if k not in TASK_FIELDS}
    return ToolTask(task_id, instruction, initial, split, task_type, events, other)


def _initial(path: Path) -> Any:
    if path.name == "state.json":
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except ValueError as err:
            raise CirError(f"{path}: not JSON ({err})") from None
    return path


def _events(raw: Any, source: Path) -> tuple[Event, ...]:
    if not isinstance(raw, list):
        raise CirError(f"{source}: field 'events' must be a list of {{\"at\": N, ...}} objects")
    out = []
    for i, item in enumerate(raw):
        where = f"{source}: events[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("at"), int) or isinstance(item.get("at"), bool) \
                or item["at"] < 1:
            raise CirError(f"{where}: expected an object with 'at' (an env action number >= 1)")
        note = item.get("note", "")
        changes = {k: v for k, v in item.items() if k not in ("at", "note")}
        if set(changes) == {"sql"} and isinstance(changes["sql"], str):
            change: Any = changes["sql"]
        elif changes and set(changes) <= {"write", "delete"}:
            if not isinstance(changes.get("write", {}), dict) or not isinstance(changes.get("delete", []), list):
                raise CirError(f"{where}: 'write' must be an object of path -> text, 'delete' a list of paths")
            change = changes
        else:
            raise CirError(f"{where}: expected 'sql' (a database's change) or 'write'/'delete' (a folder's), "
                           f"got {sorted(changes)}")
        out.append(Event(item["at"], change, str(note)))
    return tuple(out)


# -- writing -------------------------------------------------------------------------------------------
def write_tool_tasks(folder: str | Path, tasks: Sequence[ToolTask], kind: Any,
                     build: Callable[[ToolTask], State]) -> None:
    """Each task into ``folder/<split>/<task_id>/`` as :func:`read_task` reads it back: its
    ``task.json`` and its initial state (``build(task)``: a database as ``state.sqlite``, a folder
    as ``state/``, an object as ``state.json``). A file whose content would not change is left
    as it is, so the same tasks written again change nothing."""
    cls = state_kind(kind)
    for task in tasks:
        where = Path(folder) / (task.split or "tasks") / task.task_id
        where.mkdir(parents=True, exist_ok=True)
        data = {"instruction": task.instruction, "task_type": task.task_type,
                "events": [_event_data(e, task) for e in task.events], **dict(task.data)}
        try:
            text = json.dumps(data, ensure_ascii=False, indent=1, sort_keys=False) + "\n"
        except TypeError as err:
            raise CirError(f"task {task.task_id}: its data cannot be written as JSON ({err})") from None
        _write_if_changed(where / "task.json", text.encode("utf-8"))
        state = build(task)
        try:
            if issubclass(cls, SqliteState):
                _write_database(state.handle, where / "state.sqlite")
            elif issubclass(cls, FolderState):
                _write_folder(state.handle, where / "state")
            else:
                try:
                    value = json.dumps(state.handle, ensure_ascii=False, indent=1, sort_keys=True) + "\n"
                except TypeError as err:
                    raise CirError(f"task {task.task_id}: its initial object cannot be written as JSON ({err})") from None
                _write_if_changed(where / "state.json", value.encode("utf-8"))
        finally:
            state.close()


def _event_data(event: Event, task: ToolTask) -> dict[str, Any]:
    change = event.change
    if isinstance(change, str):
        out: dict[str, Any] = {"at": event.at, "sql": change}
    elif isinstance(change, Mapping) and set(change) <= {"write", "delete"}:
        out = {"at": event.at, **{k: change[k] for k in ("write", "delete") if k in change}}
    else:
        raise CirError(f"task {task.task_id}: the event at {event.at} is a function, which cannot be written to a "
                       "task file; write it as data (SQL text, or write/delete for a folder), or give the world "
                       "an events(task) function")
    if event.note:
        out["note"] = event.note
    return out


def _write_if_changed(path: Path, content: bytes) -> None:
    if path.is_file() and path.read_bytes() == content:
        return
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(content)
    tmp.replace(path)


def _write_database(conn: sqlite3.Connection, path: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "state.sqlite"
        disk = sqlite3.connect(out)
        try:
            conn.backup(disk)
        finally:
            disk.close()
        _write_if_changed(path, out.read_bytes())


def _write_folder(root: Path, target: Path) -> None:
    wanted = {p.relative_to(root): p for p in root.rglob("*")}
    if target.exists():
        for p in sorted(target.rglob("*"), key=lambda q: len(q.parts), reverse=True):
            rel = p.relative_to(target)
            if rel not in wanted or wanted[rel].is_dir() != p.is_dir():
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    target.mkdir(parents=True, exist_ok=True)
    for rel, p in sorted(wanted.items(), key=lambda kv: len(kv[0].parts)):
        dst = target / rel
        if p.is_dir():
            dst.mkdir(exist_ok=True)
        else:
            _write_if_changed(dst, p.read_bytes())
            if (dst.stat().st_mode & 0o777) != (p.stat().st_mode & 0o777):
                dst.chmod(p.stat().st_mode & 0o777)
