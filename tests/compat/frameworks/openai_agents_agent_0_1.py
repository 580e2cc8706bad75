# cir 0.1 compatibility: examples/openai_agents_agent.py at commit 5c46ee4^ (the previous release's framework
# example), kept verbatim below this comment. tests/compat/test_compat.py runs it as its docstring said.
"""A ReAct-style OpenAI Agents SDK agent: one function tool, ``act(command)``, on the key-and-door
family of the tests, through any OpenAI-compatible chat server::

    pip install "cir[openai-agents]"
    cir run --env tests.support.keydoor:FAMILY --tasks kd-tasks/test --out kd-sdk \\
        --agent openai-agents:examples.openai_agents_agent:agent --base-url http://127.0.0.1:8000/v1 \\
        --conditions clean,stale2,missing --delays 0,2 --operations refresh,replan

The two lines marked ``cir:`` are all it needs beyond a plain SDK agent (docs/frameworks.md).
``CIR_MODEL`` names the served model (SmolLM2-135M-Instruct, CI's small model, by default).
"""

from __future__ import annotations

import os

from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, function_tool
from openai import AsyncOpenAI

from cir.adapters import env_step  # cir: the env behind the tool

INSTRUCTIONS = ("You walk a corridor to open the door at its end; pick up the key on the way. "
                "Each turn, call the act tool with one command: right, left, take key, open door or look.")


@function_tool
def act(command: str) -> str:
    """Send one command to the environment; returns what you see."""
    return env_step(command)  # cir: the tool is a thin call into the env


agent = Agent(
    name="corridor",
    instructions=INSTRUCTIONS,
    tools=[act],
    model=OpenAIChatCompletionsModel(model=os.environ.get("CIR_MODEL", "SmolLM2-135M-Instruct"),
                                     openai_client=AsyncOpenAI()),
    # every turn acts (the episode ends when the env says done): the tool call is asked for by name
    model_settings=ModelSettings(temperature=0, parallel_tool_calls=False, max_tokens=64, tool_choice="act"),
)
