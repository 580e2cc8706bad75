"""A hand-built LangGraph ``StateGraph`` (a model node, LangGraph's ``ToolNode``, ``tools_condition``):
one tool, ``act(command)``, on the key-and-door family of the tests. Such a graph has no middleware
slot, so the router is a node of its own between the tools node and the model node
(``cir.adapters.langgraph.RouterNode``). Its paired study, then the router live in the graph::

    pip install "cir[langgraph]"
    cir tasks generate --family tests.support.keydoor:FAMILY --split train --n 24 --out kd-tasks
    cir run --family tests.support.keydoor:FAMILY --tasks kd-tasks/train --out kd-graph \\
        --agent langgraph:examples.langgraph_stategraph:agent --base-url http://127.0.0.1:8000/v1 \\
        --conditions clean,stale2,missing --delays 0,2 --operations refresh,replan
    cir fit kd-graph --out kd-router.json --estimator paired --operations refresh,replan --candidate-delays 2
    python examples/langgraph_stategraph.py --router kd-router.json --tasks kd-tasks/train \\
        --base-url http://127.0.0.1:8000/v1

The lines marked ``cir:`` are all it needs beyond a plain LangGraph graph (docs/frameworks.md).
``CIR_MODEL`` names the served model (SmolLM2-135M-Instruct, CI's small model, by default).
"""

from __future__ import annotations

import os

from langchain_core.messages import SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from cir.adapters import env_step  # cir: the env behind the tool

INSTRUCTIONS = ("You walk a corridor to open the door at its end; pick up the key on the way. "
                "Each turn, call the act tool with one command: right, left, take key, open door or look.")


@tool
def act(command: str) -> str:
    """Send one command to the environment; returns what you see."""
    return env_step(command)  # cir: the tool is a thin call into the env


TOOLS = [act]


def build(router=None):
    """The graph; with ``router`` (a ``cir.Router``) a router node before every model call but the first."""
    # every turn acts (the episode ends when the env says done): the tool call is asked for by name,
    # one call a reply (parallel tool calls cannot be forked: bind_tools(..., parallel_tool_calls=False))
    model = ChatOpenAI(model=os.environ.get("CIR_MODEL", "SmolLM2-135M-Instruct"), temperature=0, seed=0,
                       max_tokens=64).bind_tools(TOOLS, tool_choice="act", parallel_tool_calls=False)

    def agent(state: MessagesState) -> dict:
        return {"messages": [model.invoke([SystemMessage(INSTRUCTIONS), *state["messages"]])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(TOOLS))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    if router is None:
        graph.add_edge("tools", "agent")
    else:  # cir: the router between the tools node and the model node
        from cir.adapters.langgraph import RouterNode

        graph.add_node("router", RouterNode(router, TOOLS))
        graph.add_edge("tools", "router")
        graph.add_edge("router", "agent")
    return graph.compile()


agent = build()


def main() -> None:
    """Each task of ``--tasks`` under ``--condition``, the router live in the graph's own loop: its
    decisions, as ``cir evaluate --decisions`` writes the offline walk's."""
    import argparse

    from cir import Router
    from cir.adapters.driver import serve_from
    from cir.adapters.langgraph import episode
    from cir.families.registry import get_family

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--router", required=True)
    parser.add_argument("--tasks", required=True)
    parser.add_argument("--family", default="tests.support.keydoor:FAMILY")
    parser.add_argument("--condition", default="stale2")
    parser.add_argument("--base-url", default=None)
    args = parser.parse_args()
    serve_from(args.base_url)  # the model's requests through cir's reply proxy, as in cir run
    family = get_family(args.family)
    router = Router.load(args.router, extractor=family.extractor)
    graph = build(router)
    for task in family.load_tasks(args.tasks):
        _, run, info = episode(graph, family.env(task), str(task.task_id), args.condition,
                               max_turns=router.params.get("max_turns", 49),
                               max_actions=router.params.get("max_actions", 64))
        chose = [(d["delay"], d["operation"]) for d in info["router_decisions"] if d["recover"]]
        print(task.task_id, args.condition, "won" if run.won else "lost", chose or "no recovery")


if __name__ == "__main__":
    main()
