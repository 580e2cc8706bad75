"""``ToolWorld``: typed tools, a state kind, tasks and a success check, as the parts of an
environment family. Your tools and your state in ten lines (``docs/own-environment.md``)::

    @tool(read_only=True)
    def get_order(db: sqlite3.Connection, order_id: str) -> dict:
        \"\"\"Look up one order by its id.\"\"\"
        return db.execute("SELECT * FROM orders WHERE id = ?", (order_id,)).fetchone()

    @tool(read_only=False)
    def cancel_order(db: sqlite3.Connection, order_id: str) -> dict:
        \"\"\"Cancel a pending order.\"\"\"
        ...

    def solved(db, task, answer): ...   # the success check on the final state

    WORLD = ToolWorld("shop", tools=[get_order, cancel_order], state="sqlite", check=solved)
    FAMILY = Family(**WORLD.parts())

The kit sits below the families layer (DESIGN.md), so a world gives the family's parts as a plain
mapping (:meth:`ToolWorld.parts`) and the user's module (or a built-in family's) makes the
:class:`~cir.families.family.Family`. Define the world at module level: the run's worker
processes import the module again by its name and find it there.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from cir.tools.calls import ToolCall, parse_call, render_call
from cir.tools.env import Event, ToolEnv
from cir.tools.features import ToolFeatures
from cir.tools.prompt import tool_prompt
from cir.tools.results import anomalous
from cir.tools.state import State, build_state, state_kind
from cir.tools.tasks import ToolTask, load_tool_tasks, write_tool_tasks
from cir.tools.typed import FINISH, Tool, tool, tool_map
from cir.tools.walk import walk_actions
from cir.util.errors import CirError


@tool(read_only=True)
def finish(state: Any, answer: str = "") -> dict:
    """End the task; the answer, when the task asks for one.

    Args:
        answer: what the task asked you to find out, or empty.
    """
    return {"finished": True}  # the env answers finish itself (it ends the episode)


class ToolWorld:
    """A tool world (see the module docstring).

    - ``name``: the family's name;
    - ``tools``: its :func:`~cir.tools.typed.tool` s (``finish`` is added);
    - ``state``: the state kind, ``"object"``, ``"sqlite"``, ``"folder"`` or a
      :class:`~cir.tools.state.State` subclass;
    - ``check(handle, task, answer) -> bool``: the success check, on the final state;
    - ``initial(task)`` (optional): the initial state's source for a task that names none (a
      task from files names its ``state.*`` file);
    - ``events(task)`` (optional): world :class:`~cir.tools.env.Event` s of a task besides its own;
    - ``refresh(call) -> call | None`` (optional): the read-only call that re-reads what a
      mutating call changed (a read-only call is re-run as it is);
    - ``refresh_query``: the call a refresh sends when it has no call to re-run (default: the
      first read-only tool that needs no argument), or a function of the task that gives it (the
      ticket's customer's profile: ``lambda task: f'get_customer(customer_id="{task.data["customer"]}")'``);
    - ``on_clock(handle, clock)`` (optional): told the world clock (env actions so far, a refresh's
      included) before each env action; tools that need the time read it from the state where it
      writes it (a SQLite ``clock`` row: a restore then brings the time back with every row);
    - ``env_class`` (optional): a :class:`~cir.tools.env.ToolEnv` subclass of one's own, built with
      ToolEnv's arguments (default ToolEnv);
    - ``generate(split, n, seed) -> [ToolTask]`` (optional): generated tasks, written as files;
    - ``builtin_agent(profile, seed=)`` and ``mechanisms`` (optional): a model-free agent;
    - ``anomalous(action, shown) -> bool`` (optional): whether a shown result visibly looks wrong
      (the paired table's ``shown`` column; default :func:`cir.tools.results.anomalous`, which knows
      each tool's result shape only from the answers shown before);
    - ``extractor`` (default :class:`~cir.tools.features.ToolFeatures`), ``instructions`` and
      ``examples`` of the LLM prompt, ``splits``, ``experiments``, ``tasks_text``.
    """

    def __init__(self, name: str, *, tools: Iterable[Tool], state: str | type[State],
                 check: Callable[[Any, Any, str], bool], initial: Callable[[ToolTask], Any] | None = None,
                 events: Callable[[ToolTask], Sequence[Event]] | None = None,
                 refresh: Callable[[ToolCall], Any] | None = None,
                 refresh_query: str | Callable[[ToolTask], str] | None = None,
                 generate: Callable[[str, int, int], Sequence[ToolTask]] | None = None,
                 builtin_agent: Callable[..., Any] | None = None, mechanisms: Iterable[str] = (),
                 extractor: Any = None, instructions: str = "", examples: Sequence[str] = (),
                 splits: tuple[str, ...] = ("train", "valid", "test"), experiments: str | Path | None = None,
                 tasks_text: str = "", anomalous: Callable[[str | None, str], bool] | None = None,
                 on_clock: Callable[[Any, int], None] | None = None, env_class: type[ToolEnv] = ToolEnv) -> None:
        self.name = name
        if anomalous is not None and not callable(anomalous):
            raise CirError(f"tool world {name!r}: anomalous must be a function (action, shown) -> bool")
        self._anomalous = anomalous
        if on_clock is not None and not callable(on_clock):
            raise CirError(f"tool world {name!r}: on_clock must be a function (handle, clock) -> None")
        if not (isinstance(env_class, type) and issubclass(env_class, ToolEnv)):
            raise CirError(f"tool world {name!r}: env_class must be cir.tools.ToolEnv or a subclass of it, "
                           f"got {env_class!r:.60}")
        self.on_clock, self.env_class = on_clock, env_class
        given = tool_map(tools)
        if FINISH in given:
            raise CirError(f"tool world {name!r}: 'finish' is the kit's own tool (it ends the episode); "
                           "name yours otherwise")
        self.tools: dict[str, Tool] = {**given, FINISH: finish}
        self.state_kind = state_kind(state)
        if not callable(check) or len(inspect.signature(check).parameters) != 3:
            raise CirError(f"tool world {name!r}: check must be a function (handle, task, answer) -> bool")
        self.check = check
        self.initial, self.events, self.refresh, self.generate = initial, events, refresh, generate
        self.refresh_query = refresh_query or self._default_refresh_query()
        if not callable(self.refresh_query):
            self._check_refresh_query(self.refresh_query)
        self.builtin_agent = builtin_agent
        self.mechanisms = frozenset(mechanisms)
        self.extractor = extractor if extractor is not None else ToolFeatures(self.tools, name=f"{name}-tools")
        self.prompt = tool_prompt(name, self.tools, instructions, examples)
        self.splits, self.experiments, self.tasks_text = tuple(splits), experiments, tasks_text

    def _check_refresh_query(self, text: Any, task: Any = None) -> str:
        where = f"task {task.task_id}: " if task is not None else ""
        if not isinstance(text, str):
            raise CirError(f"{where}tool world {self.name!r}: refresh_query gave {text!r:.60}; expected a call text")
        try:
            render_call(parse_call(text, self.tools), self.tools)  # a refresh query that is a call of a tool
        except CirError as err:
            raise CirError(f"{where}tool world {self.name!r}: refresh_query {text!r}: {err}") from None
        return text

    def refresh_query_of(self, task: ToolTask) -> str:
        """The call a refresh of ``task`` sends when it has no call to re-run (``refresh_query``,
        or what the world's function of the task gives, checked to be a call of a tool)."""
        if callable(self.refresh_query):
            return self._check_refresh_query(self.refresh_query(task), task)
        return self.refresh_query

    def _default_refresh_query(self) -> str:
        for t in self.tools.values():
            if t.read_only and t.name != FINISH and all(p.default is not p.empty for p in t.params):
                return render_call(ToolCall(t.name, {}), self.tools)
        raise CirError(f"tool world {self.name!r}: no refresh query: give refresh_query (a read-only call, e.g. "
                       "'list_orders()'), or a read-only tool that needs no argument")

    # -- the family's parts ---------------------------------------------------------------------------------
    def make_env(self, task: ToolTask) -> ToolEnv:
        """A fresh env of ``task``: its state built from its initial source."""
        source = task.initial if getattr(task, "initial", None) is not None else (
            self.initial(task) if self.initial is not None else None)
        if source is None:
            raise CirError(f"task {task.task_id}: no initial state: its folder holds no state.* file and the world "
                           f"{self.name!r} has no initial(task) function")
        state = build_state(self.state_kind, source)
        events = [*getattr(task, "events", ()), *(self.events(task) if self.events is not None else ())]
        return self.env_class(task, tools=self.tools, state=state, check=self.check,
                              refresh_query=self.refresh_query_of(task), events=events, refresh=self.refresh,
                              on_clock=self.on_clock)

    def load_tasks(self, path: str | Path, split: str | None = None) -> list[ToolTask]:
        """The tasks of a folder (:mod:`cir.tools.tasks`' layout), sorted by id."""
        return load_tool_tasks(path, split, self.state_kind)

    def generate_tasks(self, folder: str | Path, split: str, n: int, seed: int, *, progress: bool = True,
                       jobs: int = 1) -> None:
        """``n`` generated tasks of ``split`` written into ``folder/split`` (the same call again
        changes no file)."""
        if self.generate is None:
            raise CirError(f"tool world {self.name!r}: cannot generate tasks (no generate function)")
        tasks = list(self.generate(split, n, seed))
        for task in tasks:
            if task.split != split:
                raise CirError(f"tool world {self.name!r}: generate({split!r}, ...) made task {task.task_id} of split "
                               f"{task.split!r}")
        write_tool_tasks(Path(folder), tasks, self.state_kind, self._initial_state)

    def _initial_state(self, task: ToolTask) -> State:
        env = self.make_env(task)
        return env.state

    def walk_actions(self, env: ToolEnv, observation: str) -> dict[str, float]:
        """``check_env``'s walk actions (:func:`cir.tools.walk.walk_actions`)."""
        return walk_actions(env, observation)

    def anomalous(self, action: str | None, shown: str) -> bool:
        """Whether a shown result visibly looks wrong: the world's own rule when it was given one,
        else :func:`cir.tools.results.anomalous`."""
        if self._anomalous is not None:
            return bool(self._anomalous(action, shown))
        return anomalous(action or "", shown, self.tools)

    def parts(self) -> dict[str, Any]:
        """The fields of a :class:`~cir.families.family.Family`: ``Family(**world.parts())``."""
        out: dict[str, Any] = {
            "name": self.name, "load_tasks": self.load_tasks, "make_env": self.make_env,
            "extractor": self.extractor, "prompt": self.prompt, "splits": self.splits,
            "walk_actions": self.walk_actions, "mechanisms": self.mechanisms, "anomalous": self.anomalous,
        }
        if self.generate is not None:
            out["generate_tasks"] = self.generate_tasks
        if self.builtin_agent is not None:
            out["builtin_agent"] = self.builtin_agent
        if self.experiments is not None:
            out["experiments"] = self.experiments
        if self.tasks_text:
            out["tasks_text"] = self.tasks_text
        return out

