# cir 0.1 compatibility: examples/inspect_agent.py at commit 5c46ee4^ (the previous release's framework
# example), kept verbatim below this comment. tests/compat/test_compat.py runs it as its docstring said.
"""A ReAct-style Inspect AI agent (``react``): one tool, ``act(command)``, on the key-and-door family
of the tests, through any OpenAI-compatible chat server::

    pip install "cir[inspect]"
    cir run --env tests.support.keydoor:FAMILY --tasks kd-tasks/test --out kd-inspect \\
        --agent inspect:examples.inspect_agent:agent --base-url http://127.0.0.1:8000/v1 \\
        --conditions clean,stale2,missing --delays 0,2 --operations refresh,replan

The two lines marked ``cir:`` are all it needs beyond a plain Inspect agent (docs/frameworks.md).
``CIR_MODEL`` names the served model (SmolLM2-135M-Instruct, CI's small model, by default).
"""

from __future__ import annotations

import os

from inspect_ai.agent import react
from inspect_ai.model import GenerateConfig, get_model
from inspect_ai.tool import tool

from cir.adapters import env_step  # cir: the env behind the tool

INSTRUCTIONS = ("You walk a corridor to open the door at its end; pick up the key on the way. "
                "Each turn, call the act tool with one command: right, left, take key, open door or look.")


@tool
def act():
    async def execute(command: str) -> str:
        """Send one command to the environment; returns what you see.

        Args:
            command: right, left, take key, open door or look.
        """
        return env_step(command)  # cir: the tool is a thin call into the env

    return execute


def make_model():
    return get_model(f"openai-api/cir/{os.environ.get('CIR_MODEL', 'SmolLM2-135M-Instruct')}",
                     base_url=os.environ.get("OPENAI_BASE_URL") or "http://127.0.0.1:8000/v1",
                     api_key=os.environ.get("OPENAI_API_KEY") or "not-needed",
                     # every turn acts (the episode ends when the env says done): the call asked for by name
                     config=GenerateConfig(temperature=0, seed=0, max_tokens=64, parallel_tool_calls=False,
                                           extra_body={"tool_choice": {"type": "function",
                                                                       "function": {"name": "act"}}}))


def build(model=None):
    return react(prompt=INSTRUCTIONS, tools=[act()], model=model or make_model(), submit=False)


agent = build()
