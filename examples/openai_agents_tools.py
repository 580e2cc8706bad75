"""An OpenAI Agents SDK agent with typed tools: ``list_orders``, ``get_order`` and ``cancel_order`` over a
shop's SQLite database, the tools of ``tests/support/shop.py`` (a tool world, docs/own-environment.md).
One file for the paired study, the router in the SDK's loop and production::

    pip install "cir[openai-agents]"
    cir run --family tests.support.shop:FAMILY --tasks shop-tasks/train --out shop-sdk \\
        --agent openai-agents:examples.openai_agents_tools:agent --base-url http://127.0.0.1:8000/v1 \\
        --conditions clean,stale1,lag1,missing --delays 0,1 --operations refresh

    # production: the same tools on your own database, the router live in the run
    SHOP_DB=shop.db OPENAI_BASE_URL=http://127.0.0.1:8000/v1 OPENAI_API_KEY=none \\
        python examples/openai_agents_tools.py --router shop-router.json --suspect get_order "Cancel orders ..."

Inside ``cir`` each tool call is one env action of the forked world; outside it the tools run on
``$SHOP_DB`` (docs/frameworks.md). The lines marked ``cir:`` are all it needs beyond a plain agent.
"""

from __future__ import annotations

import os

from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, StopAtTools
from openai import AsyncOpenAI

from cir.adapters.openai_agents import typed_tools  # cir
from tests.support.shop import WORLD  # the tool file: typed tools over the shop's database

INSTRUCTIONS = ("You are a shop's support agent. Use the tools, one call at a time; call finish when the "
                "request is done.")

agent = Agent(
    name="shop",
    instructions=INSTRUCTIONS,
    tools=typed_tools(WORLD, state=os.environ.get("SHOP_DB", "shop.db")),  # cir: the forked world in cir, else $SHOP_DB
    model=OpenAIChatCompletionsModel(model=os.environ.get("CIR_MODEL", "SmolLM2-135M-Instruct"),
                                     openai_client=AsyncOpenAI()),
    # a tool call every turn, one at a time, until finish ends the run (as it ends the episode)
    model_settings=ModelSettings(temperature=0, parallel_tool_calls=False, max_tokens=128, tool_choice="required"),
    reset_tool_choice=False,
    tool_use_behavior=StopAtTools(stop_at_tool_names=["finish"]),
)


def main() -> None:
    """One request on ``$SHOP_DB``, the router (if given) live in the run, deciding after the first
    result of the ``--suspect`` tool: the messages, the router's decisions and the orders after."""
    import argparse

    from agents import RunConfig, Runner

    from cir import Router
    from cir.adapters.openai_agents import RouterFilter
    from tests.support.shop import FAMILY

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("request")
    parser.add_argument("--router", default=None, help="a router file (cir fit)")
    parser.add_argument("--suspect", default="get_order", help="the tool whose first result is suspect")
    args = parser.parse_args()
    routed = None
    if args.router:  # cir: the router as the run's model-input filter
        routed = RouterFilter(Router.load(args.router, extractor=FAMILY.extractor), agent,
                              suspect_at=lambda action, shown: action.startswith(f"{args.suspect}("))
    result = Runner.run_sync(agent, args.request, max_turns=60,
                             run_config=RunConfig(tracing_disabled=True, call_model_input_filter=routed))
    for item in result.new_items:
        print(type(item).__name__, getattr(item, "raw_item", ""), getattr(item, "output", ""))
    if routed is not None:
        print("router decisions (delay, operation):", routed.routing.decisions)
    print("orders now:", agent.tools.typed.production("list_orders", {}))


if __name__ == "__main__":
    main()
