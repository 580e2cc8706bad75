"""Typed tools in a framework: one tool file for the study, the live router and production.

A tool world's tools (:mod:`cir.tools`: plain functions whose first parameter is the state's
handle, each marked read-only or mutating) are the agent's tools as they are written. Each
framework's ``typed_tools(TOOLS_OR_WORLD, state=...)`` (:func:`cir.adapters.langgraph.typed_tools`,
:func:`cir.adapters.openai_agents.typed_tools`, :func:`cir.adapters.inspect_ai.typed_tools`)
wraps them once, as that framework's tools, with the schemas ``cir`` derives (the model sees
``get_order(order_id)``, never the handle); ``finish`` is among them. A wrapped tool's call is
:class:`TypedTools`' :meth:`~TypedTools.call`, which goes one of two ways:

- **inside a** ``cir`` **episode** (a paired run's turn, ``cir episode``, an adapter's live
  ``episode()``): the call is one env action, its canonical text (``get_order(order_id="W1002")``,
  :func:`cir.tools.render_call`) sent through :func:`~cir.adapters.protocol.env_step` to the forked
  world, and the agent is shown what the episode shows (the JSON result, or at the perturbation
  point the stale or missing text);
- **outside** (production): the user's own function runs on the user's real state, ``state``: a
  handle (an open ``sqlite3.Connection``, a folder's ``Path``, the object), a function that opens
  one (called once, at the first call), or for a :class:`~cir.tools.world.ToolWorld` the path of a
  SQLite file or folder, opened as the world's state kind. Its answer is shown exactly as the world
  shows one (the result as JSON; a :class:`~cir.tools.ToolError` or a bad call as ``{"error": ...}``),
  calls are one at a time on the handle, and a mutating call on a database is committed.

So the same agent file runs unchanged in both modes, and the router sees the same transcript in
both (:meth:`TypedTools.action_of` writes each call as the study recorded it;
:meth:`TypedTools.refresh_for` re-runs the suspect read as the world's refresh does).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from cir.adapters.protocol import current_session
from cir.tools.calls import CallError, ToolCall, parse_call, render_call
from cir.tools.env import FINISHED_TEXT, refresh_call_for
from cir.tools.results import error_text, result_text
from cir.tools.typed import FINISH, Tool, ToolError, tool_map
from cir.tools.world import ToolWorld, finish
from cir.util.errors import CirError


class TypedTools:
    """A tool world's tools as a framework agent calls them (see the module's text).

    ``tools``: a :class:`~cir.tools.world.ToolWorld` (its tools, its state kind, its refresh
    mapping) or typed tools (``finish`` added); ``state``: production's state (None: the tools run
    only inside ``cir``)."""

    def __init__(self, tools: ToolWorld | Iterable[Tool], state: Any = None) -> None:
        if isinstance(tools, ToolWorld):
            self.tools: dict[str, Tool] = dict(tools.tools)
            self.kind: Any = tools.state_kind
            self.refresh: Callable[[ToolCall], Any] | None = tools.refresh
            self.refresh_query: str | None = tools.refresh_query
        else:
            given = tool_map(tools)
            self.tools = {**given, FINISH: given.get(FINISH, finish)}
            self.kind, self.refresh, self.refresh_query = None, None, None
        self.state = state
        self._handle: Any = None
        self._lock = threading.RLock()  # production's calls, one at a time on one handle

    # -- what a call is --------------------------------------------------------------------------------
    def action_of(self, name: str, arguments: Mapping[str, Any]) -> str:
        """The env action of a call: its canonical text, or (a call that is not valid: an unknown
        tool, a missing or ill-typed argument) the call as the model wrote it, which the world
        answers with an error, as a tool answers a bad request."""
        call = ToolCall(name, dict(arguments))
        try:
            return render_call(call, self.tools)
        except CallError:
            try:
                return render_call(call)
            except (CallError, TypeError, ValueError):
                return f"{name}({json.dumps(dict(arguments), ensure_ascii=False, default=str)})"

    def refresh_for(self, action: str) -> str | None:
        """The call a refresh sends after the suspect result of ``action`` (the world's rule:
        :func:`cir.tools.env.refresh_call_for`)."""
        return refresh_call_for(self.tools, self.refresh, action)

    # -- calling -----------------------------------------------------------------------------------------
    def call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """What the agent is shown for its call of tool ``name``: inside a ``cir`` episode the
        world's answer to the call's env action, outside the user's own function's on ``state``."""
        session = current_session()
        if session is not None:
            return session.step(self.action_of(name, arguments))
        return self.production(name, arguments)

    def production(self, name: str, arguments: Mapping[str, Any]) -> str:
        """The user's function on the user's state, shown as the world shows an answer."""
        try:
            call = ToolCall(name, dict(arguments)).resolved(self.tools)
        except CallError as err:
            return error_text(str(err))
        if name == FINISH:
            return FINISHED_TEXT
        tool = self.tools[name]
        with self._lock:
            handle = self.handle()
            try:
                value = tool.function(handle, **call.arguments)
            except ToolError as err:
                return error_text(str(err))
            finally:
                if not tool.read_only and isinstance(handle, sqlite3.Connection) and handle.in_transaction:
                    handle.commit()  # a production call is one transaction
        return result_text(value)

    def handle(self) -> Any:
        """Production's state handle, opened at the first call (see the module's text)."""
        with self._lock:
            if self._handle is None:
                self._handle = self._open()
            return self._handle

    def _open(self) -> Any:
        state = self.state
        if state is None:
            raise CirError(f"typed tools {', '.join(self.tools)}: called outside a cir episode, and no state was "
                           "given to run them on; give typed_tools(..., state=...) your database, folder or object "
                           "(or a function that opens it)")
        if callable(state) and not isinstance(state, (sqlite3.Connection, Path)):
            return state()
        if isinstance(state, (str, Path)) and self.kind is not None:
            return open_state(self.kind, state)
        return state

    def close(self) -> None:
        """Close production's handle, if this opened it."""
        with self._lock:
            if self._handle is not None and self._handle is not self.state and hasattr(self._handle, "close"):
                self._handle.close()
            self._handle = None

    def arguments_of(self, text: str) -> dict[str, Any] | None:
        """The arguments of a call's JSON text, or None when it is not a JSON object (a model's call
        cut off mid-JSON, which the framework answers itself)."""
        try:
            arguments = json.loads(text or "{}")
        except ValueError:
            return None
        return arguments if isinstance(arguments, dict) else None


def open_state(kind: Any, path: str | Path) -> Any:
    """The handle production's tools get on the state at ``path``, of a world's state kind: a
    SQLite file as a connection (rows by name, as the kit's are; usable from a framework's tool
    threads, one call at a time), a folder as its ``Path``."""
    from cir.tools.state import FolderState, SqliteState

    path = Path(path).expanduser()
    if issubclass(kind, SqliteState):
        if not path.is_file():
            raise CirError(f"state {path}: no such SQLite file")
        conn = sqlite3.connect(path, check_same_thread=False)
        conn.row_factory = sqlite3.Row
        return conn
    if issubclass(kind, FolderState):
        if not path.is_dir():
            raise CirError(f"state {path}: no such folder")
        return path
    raise CirError(f"state {path}: a world of {kind.__name__} takes its state as the object itself, not a path")


class TypedToolList(list):
    """A framework's wrapped tools (a list, as the framework takes it), with the :class:`TypedTools`
    behind them (``.typed``), which a router in the framework's loop reads its calls with."""

    typed: TypedTools


#: The attribute (or LangChain ``metadata`` key) of a wrapped tool that holds its :class:`TypedTools`.
TYPED_KEY = "cir_typed"


def typed_of(tools: Any) -> TypedTools | None:
    """The :class:`TypedTools` behind a framework's tools (the list ``typed_tools`` gave, or any of
    its tools), or None for tools of one's own."""
    found = getattr(tools, "typed", None)
    if found is not None:
        return found
    for t in tools or ():
        found = getattr(t, TYPED_KEY, None) or (getattr(t, "metadata", None) or {}).get(TYPED_KEY)
        if found is not None:
            return found
    return None


def call_of(text: str, tools: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """``(name, arguments)`` of a canonical call text naming one of ``tools``, else None."""
    try:
        call = parse_call(text)
    except CallError:
        return None
    if call.name not in tools or call.positional:
        return None
    return call.name, dict(call.arguments)


__all__ = ["TypedToolList", "TypedTools", "call_of", "open_state", "typed_of"]
