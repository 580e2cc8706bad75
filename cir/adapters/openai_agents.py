"""OpenAI Agents SDK agents in paired studies, and the router as their model-input hook.

``pip install "cir[openai-agents]"``. An ``agents.Agent`` runs unchanged; its function tools are
thin calls into the env (:func:`cir.adapters.env_step`)::

    cir run --family ENV --tasks TASKS --out RUN --agent openai-agents:my_agent:agent --base-url URL

The SDK's state between turns is its run items, so one turn (:class:`AgentsSDKFramework`) is
``Runner.run(agent, input=ITEMS, max_turns=1)`` from the message list as input items (the tool
calls as ``function_call`` items, their answers as ``function_call_output`` items); the turn's
new items (the ``MaxTurnsExceeded`` error's run data after a tool call, the result's after a
final answer) are read back as messages. The SDK is asynchronous and its ``AsyncOpenAI`` client
is bound to the event loop it first ran on, so every run of a process goes to one private event
loop in a thread of its own (``asyncio.run`` per call would break the shared client on its
second call); turns of several threads overlap there.

At run time :func:`router_config` is the router as the SDK's ``call_model_input_filter`` (a
``RunConfig``): before each model call at a candidate delay after the suspect observation it
asks the router, and the chosen recovery's items (a refresh as the harness's ``function_call``
of the observing tool and its output, replan and placebo a user message, a rewind the items
before the suspect reply and its memory) are put into the model's input at that place on this
and every later call of the run (the SDK does not keep a filter's edits in its items).
:func:`episode` runs one live episode in the SDK's own loop.

Refused (one line each): parallel tool calls (set ``ModelSettings(parallel_tool_calls=False)``),
handoffs (another agent's loop, not forked), a tool that answers without the env.
"""

from __future__ import annotations

import json
from importlib.metadata import version
from typing import Any

from agents import Agent, FunctionTool, ItemHelpers, MaxTurnsExceeded, RunConfig, Runner
from agents.items import MessageOutputItem, ToolCallItem, ToolCallOutputItem
from agents.run_config import CallModelData, ModelInputData

from cir.adapters.driver import AsyncLoop, FrameworkAgent, framework_agent_of
from cir.adapters.live import LiveRouting, Recovery, Suspect, live_episode, recovering
from cir.adapters.protocol import EpisodeOver, bound, current_session, refuse
from cir.adapters.typed import TYPED_KEY, TypedToolList, TypedTools, typed_of
from cir.util.errors import CirError


def items_of(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat messages as the SDK's input items (system messages are the agent's instructions)."""
    items: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        if role == "assistant":
            if m.get("content"):
                items.append({"role": "assistant", "content": m["content"]})
            for call in m.get("tool_calls") or ():
                items.append({"type": "function_call", "call_id": call["id"], "name": call["function"]["name"],
                              "arguments": call["function"]["arguments"]})
        elif role == "tool":
            items.append({"type": "function_call_output", "call_id": m["tool_call_id"], "output": m["content"]})
        elif role == "user":
            items.append({"role": "user", "content": m["content"]})
    return items


def messages_of_items(items: list[Any]) -> list[dict[str, Any]]:
    """The SDK's new run items as chat messages (a tool call with the text before it as one message)."""
    out: list[dict[str, Any]] = []
    text = ""
    for item in items:
        if isinstance(item, MessageOutputItem):
            text += ItemHelpers.text_message_output(item)
        elif isinstance(item, ToolCallItem):
            raw = item.raw_item
            call = {"id": raw.call_id, "type": "function", "function": {"name": raw.name, "arguments": raw.arguments}}
            if out and out[-1]["role"] == "assistant" and out[-1].get("tool_calls"):
                out[-1]["tool_calls"].append(call)  # parallel calls: refused by the driver, by name
            else:
                out.append({"role": "assistant", "content": text, "tool_calls": [call]})
            text = ""
        elif isinstance(item, ToolCallOutputItem):
            raw = item.raw_item
            call_id = raw["call_id"] if isinstance(raw, dict) else raw.call_id
            out.append({"role": "tool", "tool_call_id": call_id, "content": str(item.output)})
        else:
            raise refuse(f"an SDK item of type {type(item).__name__}", "only messages, function calls and "
                         "their outputs are forked (handoffs and hosted tools run outside the env)")
    if text:
        out.append({"role": "assistant", "content": text})
    return out


async def _run(agent: Agent, items: list[dict[str, Any]], session: Any, max_turns: int,
               config: RunConfig) -> list[Any]:
    """The run's new items; the session bound inside the loop's task (its tools' tasks copy it)."""
    with bound(session) if session is not None else _nothing():
        try:
            result = await Runner.run(agent, input=items, max_turns=max_turns, run_config=config)
        except MaxTurnsExceeded as err:
            if err.run_data is None:
                raise
            return list(err.run_data.new_items)
        return list(result.new_items)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


class AgentsSDKFramework:
    """An Agents SDK ``Agent`` as a :class:`~cir.adapters.protocol.Framework`."""

    name = "openai-agents"

    def __init__(self, agent: Any) -> None:
        if not isinstance(agent, Agent):
            raise CirError(f"openai-agents agent: expected an agents.Agent, got {type(agent).__name__}")
        if agent.handoffs:
            raise refuse("handoffs", f"agent {agent.name!r} hands off to other agents, whose loops cir does "
                         "not fork; study each agent on its own")
        self.agent = agent

    def params(self) -> dict[str, Any]:
        return {"framework": "openai-agents", "openai-agents": version("openai-agents")}

    def tools(self) -> dict[str, tuple[str, ...]]:
        return {t.name: tuple((getattr(t, "params_json_schema", None) or {}).get("properties", {}))
                for t in self.agent.tools}

    def turn(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        items = AsyncLoop.run(_run(self.agent, items_of(messages), current_session(), 1,
                               RunConfig(tracing_disabled=True)))
        return messages_of_items(items)


def typed_tools(tools: Any, state: Any = None) -> TypedToolList:
    """A tool world's typed tools (a :class:`~cir.tools.world.ToolWorld` or its tools) as the SDK's
    ``FunctionTool`` s, each wrapped once: inside a ``cir`` episode a call is one env action of the
    forked world, outside it the tool's own function on ``state`` (:mod:`cir.adapters.typed`). Their
    schemas are the kit's::

        agent = Agent(name="shop", tools=typed_tools(WORLD, state="shop.db"), ...)
    """
    typed = TypedTools(tools, state)
    out = TypedToolList()
    for t in typed.tools.values():
        wrapped = FunctionTool(name=t.name, description=t.description, params_json_schema=t.parameters,
                               on_invoke_tool=_invoker(typed, t.name), strict_json_schema=False)
        setattr(wrapped, TYPED_KEY, typed)
        out.append(wrapped)
    out.typed = typed
    return out


def _invoker(typed: TypedTools, name: str) -> Any:
    async def invoke(context: Any, arguments: str) -> str:
        parsed = typed.arguments_of(arguments)
        if parsed is None:  # the model's call is not JSON: answered here, as the SDK answers a function tool's
            return f"An error occurred while running the tool: the arguments are not a JSON object: {arguments!r:.200}"
        return typed.call(name, parsed)

    return invoke


def framework_agent(target: str, **options: Any) -> FrameworkAgent:
    """``openai-agents:MODULE:ATTR``: the ``Agent`` ``ATTR`` of ``MODULE`` as a framework agent (:func:`~cir.adapters.driver.framework_agent_of`)."""
    return framework_agent_of("openai-agents", target, AgentsSDKFramework, **options)


class RouterFilter:
    """The router as a ``call_model_input_filter`` (see the module's text); one per run."""

    def __init__(self, router: Any, agent: Agent, *, suspect_at: Suspect | None = None) -> None:
        self.routing = LiveRouting(router, suspect_at, typed=typed_of(agent.tools))
        self.routing.tools = AgentsSDKFramework(agent).tools()
        self.agent = agent
        self.recovery: tuple[int, Recovery] | None = None  # where it goes in the items, and what

    async def _call(self, name: str, args: dict[str, Any]) -> str:
        """Call the observing tool as the SDK calls a function tool."""
        from agents.tool_context import ToolContext

        tool = next(t for t in self.agent.tools if t.name == name)
        arguments = json.dumps(args)
        ctx = ToolContext(context=None, tool_name=name, tool_call_id="cir-refresh", tool_arguments=arguments)
        return str(await tool.on_invoke_tool(ctx, arguments))

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        items = list(data.model_data.input)
        if self.recovery is None:
            recovery = self.routing.decide(_chat(items))
            if recovery is not None and recovery.pending:
                with recovering(current_session(), recovery.operation):
                    answer = await self._call(recovery.call[0], recovery.call[1])  # type: ignore[index]
                recovery = self.routing.answered(recovery, answer)
            if recovery is not None:
                self.recovery = (len(items), recovery)
        if self.recovery is not None:
            items = self.apply(items)
        return ModelInputData(input=items, instructions=data.model_data.instructions)

    def apply(self, items: list[Any]) -> list[Any]:
        """``items`` with the recovery at its place (a rewind: the items before the suspect reply)."""
        at, recovery = self.recovery  # type: ignore[misc]
        if recovery.cut is not None:
            kept = _chat(items[:at])[:recovery.cut]
            return [*items_of(kept), {"role": "user", "content": recovery.text}, *items[at:]]
        return [*items[:at], *items_of(recovery_messages(recovery)), *items[at:]]


def _chat(items: list[Any]) -> list[dict[str, Any]]:
    """Input items as chat messages (the SDK's own converter)."""
    from agents.models.chatcmpl_converter import Converter

    return [dict(m) for m in Converter.items_to_messages(items)]


def recovery_messages(recovery: Recovery) -> list[dict[str, Any]]:
    """A recovery as chat messages: the harness's tool call and its answer, or a user message."""
    if recovery.call is not None:
        name, args, call_id = recovery.call
        return [{"role": "assistant", "content": "", "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]},
            {"role": "tool", "tool_call_id": call_id, "content": recovery.text}]
    return [{"role": "user", "content": recovery.text}]


def episode(agent: Agent, env: Any, task_id: str, condition: str = "clean", *, router: Any = None,
            **options: Any) -> Any:
    """One live episode of ``agent``, the router (if any) as its input filter
    (:func:`cir.adapters.live.live_episode`). The SDK's loop runs a turn at a time, each turn's
    input the run's items so far (as ``result.to_input_list()`` continues a conversation), so
    that the episode ends where the env says done."""
    framework = AgentsSDKFramework(agent)

    def run(task_text: str, max_turns: int) -> list[dict[str, Any]]:
        filt = None if router is None else RouterFilter(router, agent)
        config = RunConfig(tracing_disabled=True, call_model_input_filter=filt)
        session = current_session()
        items: list[Any] = [{"role": "user", "content": task_text}]
        new: list[Any] = []
        for _ in range(max_turns):
            try:
                turn = AsyncLoop.run(_run(agent, items, session, 1, config))
            except EpisodeOver:
                break  # the env said done (the session has the action) or the budget is spent
            new += turn
            items += [item.to_input_item() for item in turn]
            if not any(isinstance(item, ToolCallItem) for item in turn):
                break  # a final answer
        messages = [{"role": "user", "content": task_text}, *messages_of_items(new)]
        if filt is not None and filt.recovery is not None:  # the filter's items, where the model saw them
            at, recovery = filt.recovery
            k = len(_chat(items[:at])) if recovery.cut is None else None
            if k is not None:
                messages = [*messages[:k], *recovery_messages(recovery), *messages[k:]]
        return messages

    return live_episode(run, framework.tools(), env, task_id, condition, **options)
