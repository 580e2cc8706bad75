"""``ToolEnv``: the Env of a tool world (DESIGN.md, "Tool world").

Each env action is one call (:mod:`cir.tools.calls`), answered by the tool's result as JSON
(:mod:`cir.tools.results`) on the task's state (:mod:`cir.tools.state`). A bad call (not a
call, an unknown tool, a missing, extra or ill-typed argument) and a request the tool refuses
(:class:`~cir.tools.typed.ToolError`) are answered ``{"error": ...}``: an agent's mistake is data.
Any other exception from a tool is a bug in it, raised as a CirError naming the tool, the call
and the task, its own traceback kept as the cause.

``finish(answer="")`` ends the episode: the world's success check runs on the final state and
the answer. World events (:class:`Event`) are changes the world makes between the agent's
actions, keyed by the task and the world clock (env actions so far, a refresh's included):
an event ``at=n`` fires after the n-th env action, before the next one runs, and nothing
shown announces it. A snapshot holds the state's, the clock and whether the episode is done.
Tools that need the time (a record's ``updated_at``) read it from the state, which the world's
``on_clock(handle, clock)`` writes before each env action (``ToolWorld(on_clock=...)``).

A refresh re-runs the read-only call that produced the suspect result
(:meth:`ToolEnv.refresh_for`; the Env contract's optional part, :mod:`cir.envs.base`): the suspect
call itself when its tool is read-only, else the world's ``refresh`` mapping (after
``cancel_order(order_id=X)``, ``get_order(order_id=X)``), else the env's ``refresh_query``.

A harness's cache serves reads; a change's answer comes from the primary. So the env says which
calls are reads (:meth:`ToolEnv.reads`, the Env contract's optional part): a read-only tool's
call, not ``finish``; and a tool world is perturbed at its first read at or after the protocol's
point (:func:`cir.episode.perturb.find_point`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cir.tools.calls import CallError, ToolCall, parse_call, render_call
from cir.tools.results import error_text, plain, result_text
from cir.tools.state import Snapshot, State
from cir.tools.typed import FINISH, Tool, ToolError
from cir.util.errors import CirError, RestoreError

#: What a step after the end of the episode answers.
OVER_TEXT = error_text("the episode is over")
#: The text ``finish`` answers.
FINISHED_TEXT = result_text({"finished": True})


@dataclass(frozen=True)
class Event:
    """A change the world makes after env action ``at`` (>= 1): a function of the state's handle,
    or data the state kind reads (SQL text for a database; ``{"write": {path: text}, "delete":
    [path]}`` for a folder). ``note`` says what it is, for people (never shown to the agent)."""

    at: int
    change: Any
    note: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.at, bool) or not isinstance(self.at, int) or self.at < 1:
            raise CirError(f"event {self.note or self.change!r:.60}: at={self.at!r}; expected an env action "
                           "number >= 1 (it fires after that env action)")


@dataclass(frozen=True, eq=False)
class EnvSnapshot:
    """A tool world env's snapshot: its state's, the world clock, and whether it is done (won)."""

    state: Snapshot
    clock: int
    done: bool
    won: bool


class ToolEnv:
    """An :class:`~cir.envs.base.Env` over typed tools, a state, world events and a success check.

    ``tools``: by name (``finish`` is added); ``state``: a fresh :class:`~cir.tools.state.State`
    built from the task's initial state; ``check(handle, task, answer) -> bool``; ``events``:
    the task's :class:`Event` s; ``refresh(call) -> call | None``: the read-only call that
    re-reads what a mutating call changed; ``refresh_query``: the call a refresh sends otherwise;
    ``verify_read_only``: a read-only tool that changes the state is a CirError (checked by the
    state's :meth:`~cir.tools.state.State.change_token`); ``on_clock(handle, clock)``: told the world
    clock (env actions so far) before each env action, so that tools that need the time read it
    from the state (a restore then brings the time back with everything else).
    """

    def __init__(self, task: Any, *, tools: Mapping[str, Tool], state: State,
                 check: Callable[[Any, Any, str], bool], refresh_query: str,
                 events: Sequence[Event] = (), refresh: Callable[[ToolCall], Any] | None = None,
                 verify_read_only: bool = True, on_clock: Callable[[Any, int], None] | None = None) -> None:
        self.task = task
        self.on_clock = on_clock
        self.task_id = str(getattr(task, "task_id", task))
        self.tools = dict(tools)
        self.state = state
        self.check = check
        self.refresh = refresh
        self.events: dict[int, list[Event]] = {}
        for event in sorted(events, key=lambda e: e.at):
            self.events.setdefault(event.at, []).append(event)
        self.refresh_query = refresh_query
        self.verify_read_only = verify_read_only
        self.initial = state.snapshot()
        self.clock, self.done, self.won = 0, False, False
        self.seen: dict[str, list[Any]] = {}  # values shown by key: what check_env's walk calls tools with

    @property
    def handle(self) -> Any:
        """The state's handle (what the tools receive)."""
        return self.state.handle

    # -- the Env contract ----------------------------------------------------------------------------------
    def reset(self) -> str:
        self._restore_state(self.initial, 0)
        self.clock, self.done, self.won = 0, False, False
        self.seen = {}
        return str(getattr(self.task, "instruction", ""))

    def step(self, action: str) -> tuple[str, bool, bool]:
        if self.done:
            return OVER_TEXT, True, False
        if self.on_clock is not None:
            self._tell_clock()
        try:
            call = parse_call(action, self.tools)
        except CallError as err:
            text = error_text(str(err))
        else:
            text = self._call(call, action)
        self.clock += 1
        if not self.done:
            for event in self.events.get(self.clock, ()):
                self._fire(event)
        return text, self.done, self.won

    def snapshot(self) -> EnvSnapshot:
        return EnvSnapshot(self.state.snapshot(), self.clock, self.done, self.won)

    def restore(self, snapshot: EnvSnapshot) -> None:
        if not isinstance(snapshot, EnvSnapshot):
            raise CirError(f"task {self.task_id}: cannot restore {snapshot!r:.60}; expected a ToolEnv snapshot")
        self._restore_state(snapshot.state, snapshot.clock)
        self.clock, self.done, self.won = snapshot.clock, snapshot.done, snapshot.won

    def refresh_for(self, suspect_action: str) -> str | None:
        """The call a refresh sends after the suspect result of ``suspect_action``: the same call
        when its tool only reads, else the world's ``refresh`` of it, else None (the env's
        ``refresh_query`` is sent). :func:`refresh_call_for`."""
        return refresh_call_for(self.tools, self.refresh, suspect_action)

    def reads(self, action: str) -> bool:
        """Whether ``action`` only reads: a call of a read-only tool (not ``finish``, which ends the
        episode, nor a text that is no valid call, which reads nothing). The perturbation point of a
        tool world is its first read at or after the protocol's point (:mod:`cir.envs.base`)."""
        try:
            call = parse_call(action, self.tools)
        except CallError:
            return False
        return call.name != FINISH and self.tools[call.name].read_only

    def moves_on_its_own(self) -> bool:
        """Whether a world event fires after the next env action (``check_env`` does not compare
        two reads across one)."""
        return bool(self.events.get(self.clock + 1))

    def close(self) -> None:
        self.state.close()

    # -- inside ------------------------------------------------------------------------------------------
    def _call(self, call: ToolCall, action: str) -> str:
        tool = self.tools[call.name]
        if call.name == FINISH:
            answer = str(call.arguments.get("answer", ""))
            try:
                won = self.check(self.handle, self.task, answer)
            except Exception as err:
                raise CirError(f"task {self.task_id}: the success check raised {type(err).__name__}: {err}") from err
            self.done, self.won = True, bool(won)
            return FINISHED_TEXT
        before = self.state.change_token() if tool.read_only and self.verify_read_only else None
        try:
            value = tool.function(self.handle, **call.arguments)
        except ToolError as err:
            value = ToolError(str(err))
        except Exception as err:
            raise CirError(f"task {self.task_id}: tool {call.name} raised {type(err).__name__}: {err} "
                           f"(call {action!r:.120}); a tool refuses a request by raising cir.tools.ToolError, "
                           "any other exception is a bug in the tool") from err
        if before is not None and self.state.change_token() != before:
            raise CirError(f"task {self.task_id}: tool {call.name} is marked read_only but changed the state "
                           f"(call {action!r:.120}); a refresh re-runs read-only calls, so mark it "
                           "@tool(read_only=False) or make it only read")
        if isinstance(value, ToolError):
            return error_text(str(value))
        shown = plain(value)
        self._remember(shown)
        return json.dumps(shown, ensure_ascii=False)

    def _tell_clock(self) -> None:
        try:
            self.on_clock(self.handle, self.clock)  # type: ignore[misc]
        except Exception as err:
            raise CirError(f"task {self.task_id}: the world's on_clock raised {type(err).__name__}: {err} (at world "
                           f"clock {self.clock})") from err

    def _fire(self, event: Event) -> None:
        try:
            self.state.apply(event.change)
        except CirError as err:
            raise CirError(f"task {self.task_id}: event at {event.at}: {err}") from None
        except Exception as err:
            raise CirError(f"task {self.task_id}: the event at env action {event.at} ({event.note or 'no note'}) "
                           f"raised {type(err).__name__}: {err}") from err

    def _restore_state(self, snapshot: Snapshot, clock: int) -> None:
        try:
            self.state.restore(snapshot)
        except RestoreError as err:
            raise RestoreError(f"task {self.task_id}: {err}",
                               {**err.failure, "task_id": self.task_id, "after_env_action": clock,
                                "message": str(err)}) from None

    def _remember(self, value: Any, key: str = "") -> None:
        """Keep the scalar values a result showed, by their key (the walk calls tools with them)."""
        if isinstance(value, dict):
            for k, v in value.items():
                self._remember(v, str(k))
        elif isinstance(value, list):
            for v in value[:50]:
                self._remember(v, key)
        elif key and isinstance(value, str | int | float | bool):
            known = self.seen.setdefault(key, [])
            if value not in known and len(known) < 50:
                known.append(value)


def refresh_call_for(tools: Mapping[str, Tool], refresh: Callable[[ToolCall], Any] | None,
                     suspect_action: str) -> str | None:
    """The call a refresh sends after the suspect result of ``suspect_action`` (see
    :meth:`ToolEnv.refresh_for`), given the tools and the world's ``refresh`` mapping: the env's
    answer, and production's (a framework agent's typed tools on the user's own state,
    :mod:`cir.adapters.typed`), which has no env."""
    try:
        call = parse_call(suspect_action, tools)
    except CallError:
        return None
    if call.name == FINISH:
        return None
    if tools[call.name].read_only:
        return render_call(call, tools)
    if refresh is None:
        return None
    other = refresh(call)
    if other is None:
        return None
    try:
        mapped = parse_call(other, tools) if isinstance(other, str) else other.resolved(tools)
    except CallError as err:
        raise CirError(f"the world's refresh of {suspect_action!r:.80} gave {other!r:.80}: {err}") from None
    if not tools[mapped.name].read_only:
        raise CirError(f"the world's refresh of {suspect_action!r:.80} gave {mapped.name}, which changes the "
                       "state; a refresh re-reads, so it must name a read-only tool")
    return render_call(mapped, tools)
