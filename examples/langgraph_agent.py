"""A ReAct-style LangGraph agent (LangChain's ``create_agent``): one tool, ``act(command)``, on the
key-and-door family of the tests. Its paired study and its router, in its own graph::

    pip install "cir[langgraph]"
    cir tasks generate --family tests.support.keydoor:FAMILY --split test --n 8 --out kd-tasks
    cir run --family tests.support.keydoor:FAMILY --tasks kd-tasks/test --out kd-langgraph \\
        --agent langgraph:examples.langgraph_agent:agent --base-url http://127.0.0.1:8000/v1 \\
        --conditions clean,stale2,missing --delays 0,2 --operations refresh,replan

The two lines marked ``cir:`` are all it needs beyond a plain LangGraph agent (docs/frameworks.md).
``CIR_MODEL`` names the served model (SmolLM2-135M-Instruct, CI's small model, by default).
"""

from __future__ import annotations

import os

from langchain.agents import create_agent
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from cir.adapters import env_step  # cir: the env behind the tool

INSTRUCTIONS = ("You walk a corridor to open the door at its end; pick up the key on the way. "
                "Each turn, call the act tool with one command: right, left, take key, open door or look.")


@tool
def act(command: str) -> str:
    """Send one command to the environment; returns what you see."""
    return env_step(command)  # cir: the tool is a thin call into the env


def build(middleware: tuple = ()):
    # every turn acts (the episode ends when the env says done): the tool call is asked for by name
    model = ChatOpenAI(model=os.environ.get("CIR_MODEL", "SmolLM2-135M-Instruct"), temperature=0, seed=0,
                       max_tokens=64, model_kwargs={"parallel_tool_calls": False,  # one tool call a reply
                                                     "tool_choice": {"type": "function", "function": {"name": "act"}}})
    return create_agent(model, tools=[act], system_prompt=INSTRUCTIONS, middleware=list(middleware))


agent = build()
