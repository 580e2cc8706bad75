"""LangGraph and LangChain agents in paired studies, and the router as their middleware.

``pip install "cir[langgraph]"``. A graph of ``langchain.agents.create_agent`` (or any LangGraph
graph whose state is a ``messages`` list, with a model node and a ``tools`` node) runs unchanged;
its tools are thin calls into the env (:func:`cir.adapters.env_step`)::

    cir run --family ENV --tasks TASKS --out RUN --agent langgraph:my_agent:graph --base-url URL

One turn (:class:`LangGraphFramework`) is LangGraph's own fork: the message list is written to a
fresh thread as the tools node's output (``update_state(..., as_node="tools")``, so the graph goes
on at its model node exactly as after a tool call, without running its ``before_agent`` hooks
again) and the graph is run until after its tools node (``interrupt_after``); the first turn
starts the graph at its start. A recovery is in LangGraph's terms: a refresh is an ``AIMessage``
calling the observing tool (the harness's call id) answered by its ``ToolMessage``, replan and
placebo a ``HumanMessage``, a rewind the message list of the checkpoint before the modified tool
result.

At run time :class:`RouterMiddleware` is the router as the graph's own middleware
(``create_agent(..., middleware=[RouterMiddleware(router)])``): before each model call after a
suspect observation it asks the router and applies the operation it chooses to the graph's state.
:func:`episode` runs one live episode of a graph in its own loop (the factual run, then the run
under a condition, perturbed at the perturbation point), as ``cir episode`` does for any agent.

Refused (one line each): graph state beyond ``messages`` (a key the message list does not hold
cannot be forked by it), parallel tool calls, a tool that answers without the env.
"""

from __future__ import annotations

import uuid
from importlib.metadata import version
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import (
    AIMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
    convert_to_messages,
    convert_to_openai_messages,
)
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from cir.adapters.driver import FrameworkAgent, framework_agent_of
from cir.adapters.live import LiveRouting, Suspect, live_episode
from cir.adapters.protocol import EpisodeOver, refuse
from cir.adapters.typed import TYPED_KEY, TypedToolList, TypedTools, typed_of
from cir.tools.typed import FINISH
from cir.util.errors import CirError

#: The state keys of ``create_agent``'s graphs besides ``messages`` (its own bookkeeping, which a
#: turn recomputes), and of ``langgraph.prebuilt.create_react_agent``'s: ``remaining_steps`` (and
#: ``is_last_step``) are LangGraph's managed values, the steps left before the run's recursion limit,
#: computed from the config at every step, never stored. A turn starts a fresh thread, so there they
#: are always far from the limit, as they are in a live episode (:func:`episode` sets a recursion
#: limit above the budget): cir's budget of model turns is what ends a run. ``llm_input_messages`` is
#: what a ``pre_model_hook`` gives the model in place of the messages, recomputed before every
#: model call. Any other key is state the message list does not hold.
AGENT_KEYS = frozenset({"messages", "jump_to", "structured_response", "thread_model_call_count",
                        "run_model_call_count", "remaining_steps", "is_last_step", "llm_input_messages"})


class LangGraphFramework:
    """A compiled LangGraph graph as a :class:`~cir.adapters.protocol.Framework`."""

    name = "langgraph"

    def __init__(self, graph: Any, *, tools_node: str = "tools") -> None:
        if not hasattr(graph, "update_state") or not hasattr(graph, "nodes"):
            raise CirError(f"langgraph agent: expected a compiled graph (create_agent(...) or "
                           f"StateGraph(...).compile()), got {type(graph).__name__}")
        if tools_node not in graph.nodes:
            raise CirError(f"langgraph agent: the graph has no {tools_node!r} node (its nodes: "
                           f"{', '.join(n for n in graph.nodes if not n.startswith('__'))})")
        extra = sorted(set(graph.channels) - AGENT_KEYS - {k for k in graph.channels if k.startswith(("__", "branch:"))})
        if extra:
            raise refuse("this graph's state", f"it holds {', '.join(extra)} beside its messages; cir forks "
                         "the message list, so state kept elsewhere would be forked approximately")
        self.saver = InMemorySaver()
        self.graph = graph.copy(update={"checkpointer": self.saver})
        self.tools_node = tools_node

    def params(self) -> dict[str, Any]:
        return {"framework": "langgraph", "langgraph": version("langgraph")}

    def tools(self) -> dict[str, tuple[str, ...]]:
        node = self.graph.nodes[self.tools_node].bound
        return {name: tuple(tool.args) for name, tool in getattr(node, "tools_by_name", {}).items()}

    def turn(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        thread = uuid.uuid4().hex  # a fresh thread per turn: no branch ever sees another's checkpoints
        config = {"configurable": {"thread_id": thread}}
        state = convert_to_messages(messages)
        try:
            if len(state) == 1:  # the task: the graph from its start
                self.graph.invoke({"messages": state}, config, interrupt_after=[self.tools_node])
            else:  # the fork: the list as if the tools node had just written it
                self.graph.update_state(config, {"messages": state}, as_node=self.tools_node)
                self.graph.invoke(None, config, interrupt_after=[self.tools_node])
            after = self.graph.get_state(config).values["messages"]
        finally:
            self.saver.delete_thread(thread)
        return convert_to_openai_messages(after[len(state):])


def framework_agent(target: str, **options: Any) -> FrameworkAgent:
    """``langgraph:MODULE:ATTR``: the graph ``ATTR`` of ``MODULE`` as a framework agent (:func:`~cir.adapters.driver.framework_agent_of`)."""
    return framework_agent_of("langgraph", target, LangGraphFramework, **options)


def typed_tools(tools: Any, state: Any = None) -> TypedToolList:
    """A tool world's typed tools (a :class:`~cir.tools.world.ToolWorld` or its tools) as LangChain
    tools, each wrapped once: inside a ``cir`` episode a call is one env action of the forked world,
    outside it the tool's own function on ``state`` (:mod:`cir.adapters.typed`). Their schemas are
    the kit's; ``finish`` returns directly (the graph ends after it, as the episode does)::

        tools = typed_tools(WORLD, state="shop.db")       # your SQLite file, outside cir
        agent = create_agent(model, tools=tools, system_prompt=...)
    """
    typed = TypedTools(tools, state)
    out = TypedToolList(
        StructuredTool(name=t.name, description=t.description, args_schema=t.parameters,
                       func=_caller(typed, t.name), return_direct=t.name == FINISH, metadata={TYPED_KEY: typed})
        for t in typed.tools.values())
    out.typed = typed
    return out


def _caller(typed: TypedTools, name: str) -> Any:
    def call(**arguments: Any) -> str:
        return typed.call(name, arguments)

    call.__name__ = name
    return call


def _routing(router: Any, tools: list[Any], suspect_at: Any) -> LiveRouting:
    """The router's decisions over the graph's tools (a refresh calls the observing one, or re-runs
    the suspect call of typed tools)."""
    routing = LiveRouting(router, suspect_at, typed=typed_of(tools))
    by_name = {t.name: t for t in tools}
    routing.tools = {name: tuple(t.args) for name, t in by_name.items()}
    routing.call_tool = lambda name, args: str(by_name[name].invoke(args))
    return routing


def _route(routing: LiveRouting, state: dict[str, Any]) -> dict[str, Any] | None:
    """The state update of the recovery the router chooses before the next model call, or None."""
    recovery = routing.decide(convert_to_openai_messages(state["messages"]))
    if recovery is None:
        return None
    if recovery.cut is not None:  # rewind: the checkpoint's messages, then the memory
        kept = list(state["messages"][:recovery.cut])
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *kept, HumanMessage(recovery.text)]}
    if recovery.call is not None:
        name, args, call_id = recovery.call
        return {"messages": [AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}]),
                             ToolMessage(recovery.text, tool_call_id=call_id)]}
    return {"messages": [HumanMessage(recovery.text)]}


class RouterMiddleware(AgentMiddleware):
    """A fitted router as a LangChain agent middleware: before each model call at a candidate delay
    after the suspect observation, the router decides and the chosen recovery is written to the
    graph's state as LangGraph messages (see the module's text). ``tools`` are the agent's tools
    (a refresh calls the observing one); ``suspect_at`` is the env action whose answer is suspect
    (None: the perturbation point of the episode cir runs)."""

    def __init__(self, router: Any, tools: list[Any], *, suspect_at: Suspect | None = None) -> None:
        super().__init__()
        self.routing = _routing(router, tools, suspect_at)

    def before_model(self, state: dict[str, Any], runtime: Any) -> dict[str, Any] | None:
        return _route(self.routing, state)


class RouterNode:
    """A fitted router as a node of a graph without a middleware slot: a hand-built ``StateGraph``
    (a node between its tools node and its model node) or ``langgraph.prebuilt.create_react_agent``
    (its ``pre_model_hook``). It decides as :class:`RouterMiddleware` does and returns the recovery
    as a state update of ``messages`` (an empty update when it does not recover)::

        graph.add_node("router", RouterNode(router, tools))
        graph.add_edge("tools", "router")
        graph.add_edge("router", "agent")

    ``examples/langgraph_stategraph.py`` is such a graph, studied by ``cir run`` and routed live."""

    def __init__(self, router: Any, tools: list[Any], *, suspect_at: Suspect | None = None) -> None:
        self.routing = _routing(router, tools, suspect_at)

    def __call__(self, state: dict[str, Any]) -> dict[str, Any]:
        return _route(self.routing, state) or {"messages": []}


def episode(graph: Any, env: Any, task_id: str, condition: str = "clean", **options: Any) -> Any:
    """One live episode of ``graph`` in its own loop (:func:`cir.adapters.live.live_episode`)."""
    framework = LangGraphFramework(graph)

    def run(task_text: str, max_turns: int) -> list[dict[str, Any]]:
        # the budget is the session's (EpisodeOver); the recursion limit only bounds the nodes per turn
        config = {"configurable": {"thread_id": uuid.uuid4().hex}, "recursion_limit": 8 * max_turns + 16}
        try:
            try:
                framework.graph.invoke({"messages": [HumanMessage(task_text)]}, config)
            except EpisodeOver:
                pass
            return convert_to_openai_messages(framework.graph.get_state(config).values["messages"])
        finally:
            framework.saver.delete_thread(config["configurable"]["thread_id"])

    return live_episode(run, framework.tools(), env, task_id, condition, **options)
