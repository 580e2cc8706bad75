"""What a tool world shows: a tool's answer as JSON text, and whether a shown answer is visibly
anomalous.

A tool's return value is shown as ``json.dumps(value, ensure_ascii=False)`` (dataclasses,
``sqlite3.Row``, pydantic models, enums, paths and tuples as JSON first); a refused request as
``{"error": "..."}`` (:func:`error_text`). :func:`anomalous` is the tool worlds' answer to "does
the text an agent was shown look wrong?" (the paired table's column of what each perturbed arm
showed): the missing text, text that is not JSON, an error object, or a result that visibly
answers another call (an identifying field such as ``order_id`` disagrees with the call's
argument of that name, or the result's shape is not the shape this tool answers with) is
anomalous; a valid-looking answer of the same call on an older state (``lagK``) is not.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import sqlite3
from collections.abc import Mapping
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

from cir.episode.perturb import MISSING_TEXT
from cir.tools.calls import CallError, parse_call
from cir.util.errors import CirError

if TYPE_CHECKING:  # pragma: no cover
    from cir.tools.typed import Tool


def plain(value: Any) -> Any:
    """A tool's return value as JSON values (dicts, lists, text, numbers, true/false/null)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, sqlite3.Row):
        return {k: plain(value[k]) for k in value.keys()}  # noqa: SIM118 - a Row is not a Mapping
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((plain(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return plain(value.value)
    if isinstance(value, PurePath):
        return value.as_posix()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    dump = getattr(value, "model_dump", None)  # a pydantic model
    if callable(dump):
        return plain(dump(mode="json"))
    raise CirError(f"a tool returned a {type(value).__name__} ({value!r:.60}), which cannot be shown as JSON; "
                   "return dicts, lists, text, numbers or dataclasses")


def result_text(value: Any) -> str:
    """The text a tool's return value is shown as."""
    return json.dumps(plain(value), ensure_ascii=False)


def error_text(message: str) -> str:
    """The text of a refused request or a bad call: ``{"error": message}``."""
    return json.dumps({"error": str(message)}, ensure_ascii=False)


def error_of(shown: str) -> str | None:
    """The message of an error result (``{"error": ...}`` alone), else None."""
    try:
        value = json.loads(shown)
    except ValueError:
        return None
    if isinstance(value, dict) and set(value) == {"error"}:
        return str(value["error"])
    return None


def shape(value: Any) -> str:
    """The shape of a JSON value: its kind, and an object's keys (what distinguishes what one tool
    answers from what another answers)."""
    if isinstance(value, dict):
        return "object:" + ",".join(sorted(value))
    if isinstance(value, list):
        return "list"
    return type(value).__name__


def anomalous(action: str, shown: str, tools: Mapping[str, Tool], shapes: Mapping[str, set[str]] | None = None) -> bool:
    """Whether ``shown``, the text an agent was shown for ``action``, visibly looks wrong (see the
    module docstring). ``shapes`` (tool name -> the shapes its answers have had, e.g. from the
    episode's earlier answers, :func:`shape`) lets a result of another tool's shape count as
    anomalous; without it only identifying fields are compared."""
    if shown.strip() == MISSING_TEXT:
        return True
    try:
        value = json.loads(shown)
    except ValueError:
        return True
    if isinstance(value, dict) and "error" in value:
        return True
    try:
        call = parse_call(action, tools)
    except CallError:
        return False  # the agent's own bad call: its error is what the world answers, nothing is amiss
    if _disagrees(call.arguments, value):
        return True
    known = (shapes or {}).get(call.name)
    return bool(known) and shape(value) not in known


def _disagrees(arguments: Mapping[str, Any], value: Any) -> bool:
    """An identifying field of the result (one named like a string or number argument of the
    call, or ``id`` for an argument ending in ``_id``) that holds another value than the call asked."""
    if isinstance(value, list):
        return False  # a list answers a query; its items may differ from the arguments by design
    if not isinstance(value, dict):
        return False
    for name, asked in arguments.items():
        if not isinstance(asked, str | int) or isinstance(asked, bool):
            continue
        for key in (name, "id") if name.endswith("_id") else (name,):
            if key in value and isinstance(value[key], str | int) and not isinstance(value[key], bool) \
                    and value[key] != asked:
                return True
    return False
