"""A LangGraph agent with typed tools (LangChain's ``create_agent``): ``list_orders``, ``get_order`` and
``cancel_order`` over a shop's SQLite database, the tools of ``tests/support/shop.py`` (a tool world,
docs/own-environment.md). One file for the paired study, the router in the graph and production:

    pip install "cir[langgraph]"
    cir tasks generate --family tests.support.shop:FAMILY --split train --n 32 --out shop-tasks
    cir run --family tests.support.shop:FAMILY --tasks shop-tasks/train --out shop-lg \\
        --agent langgraph:examples.langgraph_tools:agent --base-url http://127.0.0.1:8000/v1 \\
        --conditions clean,stale1,lag1,missing --delays 0,1 --operations refresh
    cir fit shop-lg --out shop-router.json --estimator paired --candidate-delays 1

    # production: the same tools on your own database, the router live in the graph
    cp shop-tasks/train/shop-train-000/state.sqlite shop.db
    SHOP_DB=shop.db OPENAI_BASE_URL=http://127.0.0.1:8000/v1 OPENAI_API_KEY=none \\
        python examples/langgraph_tools.py --router shop-router.json --suspect get_order \\
        "Cancel orders W1000, W1001 and W1002: all three must be cancelled before they ship. Then finish."

Inside ``cir`` each tool call is one env action of the forked world; outside it the tools run on
``$SHOP_DB`` (docs/frameworks.md). The lines marked ``cir:`` are all it needs beyond a plain agent.
``CIR_MODEL`` names the served model (SmolLM2-135M-Instruct, CI's small model, by default).
"""

from __future__ import annotations

import os

from langchain.agents import create_agent
from langchain_openai import ChatOpenAI

from cir.adapters.langgraph import RouterMiddleware, typed_tools  # cir
from tests.support.shop import WORLD  # the tool file: typed tools over the shop's database

INSTRUCTIONS = ("You are a shop's support agent. Use the tools, one call at a time; call finish when the "
                "request is done.")

tools = typed_tools(WORLD, state=os.environ.get("SHOP_DB", "shop.db"))  # cir: the forked world in cir, else $SHOP_DB


def build(middleware=()):
    """The agent; ``middleware``: e.g. the router, ``RouterMiddleware(router, tools)``."""
    model = ChatOpenAI(model=os.environ.get("CIR_MODEL", "SmolLM2-135M-Instruct"), temperature=0, seed=0,
                       max_tokens=128, model_kwargs={"parallel_tool_calls": False, "tool_choice": "required"})
    return create_agent(model, tools=tools, system_prompt=INSTRUCTIONS, middleware=list(middleware))


agent = build()


def main() -> None:
    """One request on ``$SHOP_DB``, the router (if given) live in the graph, deciding after the first
    result of the ``--suspect`` tool: the messages, the router's decisions and the orders after."""
    import argparse

    from langchain_core.messages import HumanMessage

    from cir import Router
    from tests.support.shop import FAMILY

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("request")
    parser.add_argument("--router", default=None, help="a router file (cir fit)")
    parser.add_argument("--suspect", default="get_order",
                        help="the tool whose first result is suspect (say, read from a replica that lags)")
    args = parser.parse_args()
    routed = None
    if args.router:  # cir: the router in the graph
        routed = RouterMiddleware(Router.load(args.router, extractor=FAMILY.extractor), tools,
                                  suspect_at=lambda action, shown: action.startswith(f"{args.suspect}("))
    graph = build([routed] if routed else [])
    state = graph.invoke({"messages": [HumanMessage(args.request)]}, {"recursion_limit": 100})
    for message in state["messages"]:
        calls = "".join(f" -> {c['name']}({c['args']})" for c in getattr(message, "tool_calls", None) or [])
        print(f"{message.type}: {message.content}{calls}")
    if routed is not None:
        print("router decisions (delay, operation):", routed.routing.decisions)
    print("orders now:", tools.typed.production("list_orders", {}))


if __name__ == "__main__":
    main()
