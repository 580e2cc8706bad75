"""The key-and-door agent as ``langgraph.prebuilt.create_react_agent`` builds it (its state holds
``remaining_steps``, LangGraph's own bookkeeping), for the adapter's tests."""

from __future__ import annotations

import os

from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent

from cir.adapters import env_step


@tool
def act(command: str) -> str:
    """Send one command to the environment; returns what you see."""
    return env_step(command)


def build(pre_model_hook=None):
    model = ChatOpenAI(model=os.environ.get("CIR_MODEL", "SmolLM2-135M-Instruct"), temperature=0, seed=0,
                       max_tokens=64, model_kwargs={"parallel_tool_calls": False, "tool_choice": {
                           "type": "function", "function": {"name": "act"}}})
    return create_react_agent(model, [act], prompt="You walk a corridor.", pre_model_hook=pre_model_hook)


agent = build()
