"""Inspect AI agents in paired studies, and the router as their model step.

``pip install "cir[inspect]"``. An Inspect agent (``react(...)`` or any ``@agent``) runs unchanged;
its tools are thin calls into the env (:func:`cir.adapters.env_step`)::

    cir run --family ENV --tasks TASKS --out RUN --agent inspect:my_agent:agent --base-url URL

Inspect runs agents inside an eval's sample (``react`` keeps its checkpoints there), so each
process holds one long-lived eval (:class:`TurnServer`) on the process's event loop whose one
sample serves turns: one turn (:class:`InspectFramework`) is ``inspect_ai.agent.run(agent,
MESSAGES, limits=[message_limit(...)])`` from the message list as Inspect's chat messages, its
message limit reached right after the tool's answer (Inspect's own limit, which ``run`` returns,
not raises), the new messages read back (the agent's system prompt, which ``react`` puts first on
every run, left out). One eval serves every agent of the process (Inspect runs one eval at a time in a process); its
log goes to a temporary folder removed when the process exits.

At run time :func:`routed_model` is the router as the agent's model step (``react(...,
model=routed_model(router, model))``, Inspect's hook for a custom generation): before each
generation at a candidate delay after the suspect observation it asks the router and writes the
chosen recovery into the agent's messages (a refresh as the harness's tool call of the observing
tool and its answer, replan and placebo a user message, a rewind the messages before the suspect
reply and its memory). :func:`episode` runs one live episode in the agent's own loop, inside an
eval sample.

Refused (one line each): parallel tool calls, a tool that answers without the env, messages the
agent's own logic adds in a turn (react's "please proceed" after a reply without a tool call: use
``submit=False`` so that such a reply ends the run).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import json
import os
import queue
import shutil
import tempfile
import threading
from importlib.metadata import version
from typing import Any

import anyio
from inspect_ai import Task, eval_async
from inspect_ai.agent import AgentState, agent
from inspect_ai.agent import run as run_agent
from inspect_ai.dataset import Sample
from inspect_ai.model import (
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    get_model,
)
from inspect_ai.solver import solver
from inspect_ai.tool import ToolCall, ToolCallError, ToolDef, ToolParam, ToolParams
from inspect_ai.util import display_type, message_limit

from cir.adapters.driver import AsyncLoop, FrameworkAgent, framework_agent_of
from cir.adapters.live import LiveRouting, Suspect, live_episode, recovering
from cir.adapters.protocol import EpisodeOver, bound, current_session
from cir.adapters.typed import TYPED_KEY, TypedToolList, TypedTools, typed_of
from cir.tools.typed import FINISH
from cir.util.errors import CirError

os.environ.setdefault("INSPECT_DISPLAY", "none")  # the eval runs behind cir's own progress
display_type()  # fixed now, from INSPECT_DISPLAY (an eval would otherwise choose "plain")


#: How Inspect shows the model a tool message with an error (its OpenAI provider: ``Error: MESSAGE``).
TOOL_ERROR_PREFIX = "Error: "
_PARSE_ERROR_HEAD = "Error parsing the following tool call arguments:\n\n"
_PARSE_ERROR_TAIL = "\n\nError details: "


def _arguments_text(call: Any) -> str:
    """A tool call's arguments as chat text: their JSON, or for a call whose arguments Inspect could
    not parse (``parse_error``: the model's text was not JSON, e.g. cut off at the token limit) the
    model's own text, which Inspect keeps only inside its error message (else that message): text
    that is not JSON, as the driver reads a malformed call."""
    if not call.parse_error:
        return json.dumps(call.arguments)
    error = str(call.parse_error)
    raw = error
    if error.startswith(_PARSE_ERROR_HEAD) and _PARSE_ERROR_TAIL in error:
        raw = error[len(_PARSE_ERROR_HEAD):error.rindex(_PARSE_ERROR_TAIL)]
    try:
        json.loads(raw)
    except ValueError:
        return raw
    return error  # (a parse error of JSON text, e.g. nested too deep: its message is the reply)


def _parsed(text: str) -> Any:
    try:
        return json.loads(text or "{}")
    except ValueError:
        return None


def inspect_messages(messages: list[dict[str, Any]]) -> list[Any]:
    """Chat messages (OpenAI's format) as Inspect's. A tool call whose arguments are not JSON is
    Inspect's call that failed to parse (``arguments={}``, ``parse_error``), and the tool message that
    answers it Inspect's error (``Error: MESSAGE``, as :func:`chat_messages` renders it), so that the
    model is sent what Inspect sent it."""
    out: list[Any] = []
    malformed: set[str] = set()
    for m in messages:
        role, content = m.get("role"), m.get("content") or ""
        if role == "assistant":
            calls = []
            for c in m.get("tool_calls") or ():
                arguments = _parsed(c["function"]["arguments"])
                if not isinstance(arguments, dict):
                    malformed.add(c["id"])
                calls.append(ToolCall(id=c["id"], function=c["function"]["name"], type="function",
                                      arguments=arguments if isinstance(arguments, dict) else {},
                                      parse_error=None if isinstance(arguments, dict) else c["function"]["arguments"]))
            out.append(ChatMessageAssistant(content=content, tool_calls=calls or None))
        elif role == "tool":
            if m["tool_call_id"] in malformed and content.startswith(TOOL_ERROR_PREFIX):
                out.append(ChatMessageTool(content="", tool_call_id=m["tool_call_id"],
                                           error=ToolCallError("parsing", content[len(TOOL_ERROR_PREFIX):])))
            else:
                out.append(ChatMessageTool(content=content, tool_call_id=m["tool_call_id"]))
        elif role == "system":
            out.append(ChatMessageSystem(content=content))
        else:
            out.append(ChatMessageUser(content=content))
    return out


def chat_messages(messages: list[Any]) -> list[dict[str, Any]]:
    """Inspect's messages as chat messages (OpenAI's format), system messages left out; a tool's
    error as the model is shown it, a call Inspect could not parse with the model's text as its
    arguments (:func:`_arguments_text`)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if isinstance(m, ChatMessageSystem):
            continue
        if isinstance(m, ChatMessageAssistant):
            message: dict[str, Any] = {"role": "assistant", "content": m.text}
            if m.tool_calls:
                message["tool_calls"] = [{"id": c.id, "type": "function", "function": {
                    "name": c.function, "arguments": _arguments_text(c)}} for c in m.tool_calls]
            out.append(message)
        elif isinstance(m, ChatMessageTool):  # an error as the model is shown it
            text = f"{TOOL_ERROR_PREFIX}{m.error.message}" if m.error else m.text
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": text})
        else:
            out.append({"role": "user", "content": m.text})
    return out


class TurnServer:
    """One eval whose one sample runs the agent runs sent to it, several at once (see the module's text).

    One per process (:meth:`shared`): the agents of the tasks a worker runs at once share it (Inspect
    runs one eval at a time in a process); it ends, and its log folder goes, when the process exits."""

    _shared: TurnServer | None = None
    _shared_lock = threading.Lock()

    @classmethod
    def shared(cls) -> TurnServer:
        with cls._shared_lock:
            if cls._shared is None:
                cls._shared = cls()
                atexit.register(cls._shared.close)
            return cls._shared

    def __init__(self) -> None:
        self.inbox: queue.Queue[Any] = queue.Queue()
        self.logs = tempfile.mkdtemp(prefix="cir-inspect-")
        self.done: concurrent.futures.Future[Any] | None = None
        self._lock = threading.Lock()

    def _start(self) -> None:
        inbox = self.inbox

        @solver
        def serve() -> Any:
            async def solve(state: Any, generate: Any) -> Any:
                async with anyio.create_task_group() as tasks:
                    while True:
                        job = await anyio.to_thread.run_sync(inbox.get)
                        if job is None:
                            break
                        tasks.start_soon(_serve_one, *job)
                return state
            return solve

        task = Task(dataset=[Sample(input="cir")], solver=serve(), message_limit=None, token_limit=None)
        self.done = AsyncLoop.submit(eval_async(task, model="mockllm/model", log_dir=self.logs))

    def run(self, work: Any) -> Any:
        """``await work()`` inside the sample; its result."""
        with self._lock:
            if self.done is None:
                self._start()
        answer: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.inbox.put((work, answer))
        return answer.result()

    def close(self) -> None:
        if self.done is not None:
            self.inbox.put(None)
            try:
                self.done.result(timeout=120)
            except Exception:  # noqa: BLE001 - at exit: the log folder goes either way
                pass
            self.done = None
        shutil.rmtree(self.logs, ignore_errors=True)


async def _serve_one(work: Any, answer: concurrent.futures.Future[Any]) -> None:
    try:
        answer.set_result(await work())
    except BaseException as err:  # EpisodeOver too: the caller's run ends there
        answer.set_exception(err)


class InspectFramework:
    """An Inspect AI agent as a :class:`~cir.adapters.protocol.Framework`."""

    name = "inspect"

    def __init__(self, agent_: Any) -> None:
        if not callable(agent_):
            raise CirError(f"inspect agent: expected an Inspect agent (react(...) or an @agent), got "
                           f"{type(agent_).__name__}")
        self.agent = agent_
        self.server = TurnServer.shared()

    def params(self) -> dict[str, Any]:
        return {"framework": "inspect", "inspect_ai": version("inspect-ai")}

    def tools(self) -> dict[str, tuple[str, ...]]:
        return {}  # not introspectable: the driver reads them from the agent's own tool calls

    def turn(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        session = current_session()
        given = inspect_messages(messages)

        async def work() -> list[Any]:
            with bound(session) if session is not None else _Nothing():
                # the agent's system prompt (react puts one first on every run), then assistant + tool
                state, _ = await run_agent(self.agent, list(given), limits=[message_limit(len(given) + 3)])
            return state.messages

        after = chat_messages(self.server.run(work))
        new = after[len(messages):]
        # an agent without a system prompt has room for one more model reply under the limit: a
        # turn ends at its tool's answer
        for i, m in enumerate(new):
            if m["role"] == "tool":
                return new[:i + 1]
        return new

    def close(self) -> None:
        """Nothing to end: the process's turn server serves the next agent (it ends at exit)."""


def _episode_over(err: BaseException) -> bool:
    """Whether ``err`` is the session's end of the run, alone or inside (nested) exception groups."""
    if isinstance(err, EpisodeOver):
        return True
    inner = getattr(err, "exceptions", None)
    return bool(inner) and all(_episode_over(e) for e in inner)


class _Nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def typed_tools(tools: Any, state: Any = None) -> TypedToolList:
    """A tool world's typed tools (a :class:`~cir.tools.world.ToolWorld` or its tools) as Inspect
    tools, each wrapped once: inside a ``cir`` episode a call is one env action of the forked world,
    outside it the tool's own function on ``state`` (:mod:`cir.adapters.typed`). Their schemas are
    the kit's::

        agent = react(prompt=..., tools=typed_tools(WORLD, state="shop.db"), model=..., submit=False)
    """
    typed = TypedTools(tools, state)
    out = TypedToolList()
    for t in typed.tools.values():
        try:
            params = ToolParams(properties={k: ToolParam.model_validate(v) for k, v in t.parameters["properties"].items()},
                                required=list(t.parameters.get("required", [])))
        except ValueError as err:
            raise CirError(f"tool {t.name}: Inspect cannot take its argument schema ({err})") from None
        wrapped = ToolDef(_executor(typed, t.name), name=t.name, description=t.description, parameters=params).as_tool()
        setattr(wrapped, TYPED_KEY, typed)
        out.append(wrapped)
    out.typed = typed
    return out


async def until_finish(state: AgentState) -> bool:
    """``react``'s ``on_continue`` for a tool world's agent: its loop ends after ``finish`` (the end of
    an episode in the study, the end of the run in production) or after a reply without a tool call
    (as ``react(submit=False)`` ends), and goes on otherwise, adding nothing to the messages::

        react(prompt=..., tools=typed_tools(WORLD, state=...), submit=False, on_continue=until_finish)
    """
    calls = state.output.message.tool_calls or []
    return bool(calls) and all(call.function != FINISH for call in calls)


def _executor(typed: TypedTools, name: str) -> Any:
    async def execute(**arguments: Any) -> str:
        return typed.call(name, arguments)

    return execute


def framework_agent(target: str, **options: Any) -> FrameworkAgent:
    """``inspect:MODULE:ATTR``: the Inspect agent ``ATTR`` of ``MODULE`` as a framework agent (:func:`~cir.adapters.driver.framework_agent_of`)."""
    return framework_agent_of("inspect", target, InspectFramework, **options)


def routed_model(router: Any, model: Any = None, *, suspect_at: Suspect | None = None) -> Any:
    """The router as an Inspect agent's model step: ``react(..., model=routed_model(router, model))``
    (see the module's text); ``model`` is what ``react`` would use (a name or a Model; None: the
    eval's)."""
    routing = LiveRouting(router, suspect_at)

    @agent(name="cir_router")
    def routed() -> Any:
        async def execute(state: AgentState, tools: list[Any]) -> AgentState:
            routing.tools = {d.name: tuple(d.parameters.properties) for d in (ToolDef(t) for t in tools)}
            routing.typed = typed_of(tools)
            session = current_session()
            if session is not None:  # react goes on after a call it answered itself: the budget counts turns
                session.model_turn()
            recovery = routing.decide(chat_messages(state.messages))
            if recovery is not None and recovery.pending:
                name, args, _ = recovery.call  # type: ignore[misc]
                tool = next(t for t in tools if ToolDef(t).name == name)
                with recovering(current_session(), recovery.operation):
                    answer = await tool(**args)
                recovery = routing.answered(recovery, str(answer))
            if recovery is not None:
                system = [m for m in state.messages if isinstance(m, ChatMessageSystem)]
                if recovery.cut is not None:
                    rest = [m for m in state.messages if not isinstance(m, ChatMessageSystem)]
                    state.messages = [*system, *rest[:recovery.cut], ChatMessageUser(content=recovery.text)]
                elif recovery.call is not None:
                    name, args, call_id = recovery.call
                    state.messages.extend([
                        ChatMessageAssistant(content="", tool_calls=[ToolCall(id=call_id, function=name,
                                                                               type="function", arguments=args)]),
                        ChatMessageTool(content=recovery.text, tool_call_id=call_id)])
                else:
                    state.messages.append(ChatMessageUser(content=recovery.text))
            output = await get_model(model).generate(state.messages, tools)
            state.output = output
            state.messages.append(output.message)
            return state
        return execute

    step = routed()
    step.routing = routing  # its decisions (routing.decisions), for a run's log
    return step


def episode(agent_: Any, env: Any, task_id: str, condition: str = "clean", **options: Any) -> Any:
    """One live episode of ``agent_`` in its own loop inside an eval sample
    (:func:`cir.adapters.live.live_episode`); the router, if any, is in the agent (``routed_model``)."""
    framework = InspectFramework(agent_)

    def run(task_text: str, max_turns: int) -> list[dict[str, Any]]:
        session = current_session()
        kept: list[Any] = []

        async def work() -> list[Any]:
            # the agent called on a state of ours, which it changes in place: when the session ends the
            # run (EpisodeOver: the env is done, or the budget spent) its messages so far are still here
            state = AgentState(messages=[ChatMessageUser(content=task_text)])
            with bound(session):
                try:
                    await framework.agent(state)
                except BaseException as err:  # EpisodeOver, or Inspect's task groups wrapping it
                    if not _episode_over(err):
                        raise
            kept.extend(state.messages)
            return state.messages

        framework.server.run(work)
        return [{"role": "user", "content": task_text}, *chat_messages(kept)[1:]]

    return live_episode(run, {}, env, task_id, condition, **options)


__all__ = ["InspectFramework", "TurnServer", "chat_messages", "episode", "framework_agent", "inspect_messages",
           "routed_model", "typed_tools", "until_finish"]
