"""An Inspect AI agent (``react``) with typed tools: ``list_orders``, ``get_order`` and ``cancel_order``
over a shop's SQLite database, the tools of ``tests/support/shop.py`` (a tool world,
docs/own-environment.md). One file for the paired study, the router as its model step and production::

    pip install "cir[inspect]"
    cir run --family tests.support.shop:FAMILY --tasks shop-tasks/train --out shop-inspect \\
        --agent inspect:examples.inspect_tools:agent --base-url http://127.0.0.1:8000/v1 \\
        --conditions clean,stale1,lag1,missing --delays 0,1 --operations refresh

Inside ``cir`` each tool call is one env action of the forked world; outside it the tools run on
``$SHOP_DB`` (docs/frameworks.md). The lines marked ``cir:`` are all it needs beyond a plain agent.
"""

from __future__ import annotations

import os

from inspect_ai.agent import react
from inspect_ai.model import GenerateConfig, get_model

from cir.adapters.inspect_ai import typed_tools, until_finish  # cir
from tests.support.shop import WORLD  # the tool file: typed tools over the shop's database

INSTRUCTIONS = ("You are a shop's support agent. Use the tools, one call at a time; call finish when the "
                "request is done.")

tools = typed_tools(WORLD, state=os.environ.get("SHOP_DB", "shop.db"))  # cir: the forked world in cir, else $SHOP_DB


def make_model():
    return get_model(f"openai-api/cir/{os.environ.get('CIR_MODEL', 'SmolLM2-135M-Instruct')}",
                     base_url=os.environ.get("OPENAI_BASE_URL") or "http://127.0.0.1:8000/v1",
                     api_key=os.environ.get("OPENAI_API_KEY") or "not-needed",
                     config=GenerateConfig(temperature=0, seed=0, max_tokens=128, parallel_tool_calls=False))


def build(model=None):
    """The agent; ``model``: e.g. the router as its model step, ``routed_model(router, make_model())``."""
    # the loop ends at finish (as the episode does), or at a reply without a tool call
    return react(prompt=INSTRUCTIONS, tools=tools, model=model or make_model(), submit=False, on_continue=until_finish)


agent = build()


def main() -> None:
    """One request on ``$SHOP_DB`` as an Inspect eval of one sample, the router (if given) as the
    agent's model step, deciding after the first result of the ``--suspect`` tool: the router's
    decisions and the orders after."""
    import argparse
    import tempfile

    from inspect_ai import Task, eval
    from inspect_ai.agent import as_solver
    from inspect_ai.dataset import Sample

    from cir import Router
    from cir.adapters.inspect_ai import routed_model
    from tests.support.shop import FAMILY

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("request")
    parser.add_argument("--router", default=None, help="a router file (cir fit)")
    parser.add_argument("--suspect", default="get_order", help="the tool whose first result is suspect")
    args = parser.parse_args()
    model = make_model()
    if args.router:  # cir: the router as the agent's model step
        model = routed_model(Router.load(args.router, extractor=FAMILY.extractor), model,
                             suspect_at=lambda action, shown: action.startswith(f"{args.suspect}("))
    with tempfile.TemporaryDirectory() as logs:
        log = eval(Task(dataset=[Sample(input=args.request)], solver=as_solver(build(model))), model=make_model(),
                   log_dir=logs, display="none")[0]
        for message in log.samples[0].messages:
            calls = "".join(f" -> {c.function}({c.arguments})" for c in getattr(message, "tool_calls", None) or [])
            print(f"{message.role}: {message.text}{calls}")
    if args.router:
        print("router decisions (delay, operation):", model.routing.decisions)
    print("orders now:", tools.typed.production("list_orders", {}))


if __name__ == "__main__":
    main()
