"""A framework in a few lines, for testing the fork protocol without installing one.

``ToyFramework(policy, tools)`` is a tool-calling agent loop: its policy reads the message
list (OpenAI's chat format) and names a tool call or gives a final answer, and one turn runs
that call through the tool function, as a framework's tool node would. The key-and-door
agent as its policy (:func:`keydoor_policy`) makes it the same agent as
``tests.support.keydoor.KeyDoorAgent`` in ``cir``'s own harness, so their paired tables agree.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from cir.adapters.driver import FrameworkAgent
from cir.adapters.protocol import env_step
from cir.util.errors import CirError
from support.keydoor import KeyDoorAgent


def as_chat(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The messages as cir's context: tool answers as user messages, tool calls as their command."""
    out = []
    for m in messages:
        if m["role"] == "assistant" and m.get("tool_calls"):
            function = m["tool_calls"][0]["function"]
            try:
                command = json.loads(function["arguments"]).get("command", function["name"])
            except ValueError:  # a malformed call: the raw text, as a reply that sent nothing
                command = function["arguments"]
            out.append({"role": "assistant", "content": command})
        elif m["role"] == "tool":
            out.append({"role": "user", "content": m["content"]})
        else:
            out.append({"role": m["role"], "content": m["content"]})
    return out


def keydoor_policy(messages: list[dict[str, Any]]) -> tuple[str, dict[str, Any]] | str:
    return "act", {"command": KeyDoorAgent().act(as_chat(messages))}


def act(command: str) -> str:
    return env_step(command)


class ToyFramework:
    name = "toy"

    def __init__(self, policy: Callable[[list[dict[str, Any]]], Any] = keydoor_policy,
                 tools: dict[str, Callable[..., str]] | None = None) -> None:
        self.policy = policy
        self.functions = tools or {"act": act}

    def params(self) -> dict[str, Any]:
        return {"framework": "toy"}

    def tools(self) -> dict[str, tuple[str, ...]]:
        return {name: ("command",) for name in self.functions}

    def turn(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        decided = self.policy(messages)
        if isinstance(decided, str):
            return [{"role": "assistant", "content": decided}]
        calls = decided if isinstance(decided, list) else [decided]
        digest = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:8]
        tool_calls = [{"id": f"call_{digest}_{j}", "type": "function",
                       "function": {"name": name, "arguments": json.dumps(args)}}
                      for j, (name, args) in enumerate(calls)]
        out: list[dict[str, Any]] = [{"role": "assistant", "content": "", "tool_calls": tool_calls}]
        for call, (name, args) in zip(tool_calls, calls, strict=True):
            out.append({"role": "tool", "tool_call_id": call["id"], "content": self.functions[name](**args)})
        return out


def toy_agent(framework: ToyFramework | None = None) -> FrameworkAgent:
    fw = framework or ToyFramework()
    return FrameworkAgent("toy:keydoor", fw, fw.params())


def keydoor_answer(path: str, body: dict[str, Any], attempt: int):
    """A deterministic chat server that is the key-and-door agent with one tool ``act(command)``:
    for ``FakeOpenAI(answer=keydoor_answer)``. The system message (a framework's instructions) is
    not read; the tool call's id is a digest of the messages."""
    from support.fake_openai import Reply, tool_call

    messages = [m for m in body.get("messages", ()) if m.get("role") != "system"]
    command = KeyDoorAgent().act(as_chat(messages))
    prompt = len(json.dumps(body.get("messages", ())).split())
    return Reply(text=None, tool_calls=[tool_call("act", {"command": command}, messages)],
                 usage={"prompt_tokens": prompt, "completion_tokens": 8, "total_tokens": prompt + 8})



def sloppy_keydoor_answer(turns: tuple[int, ...] = (1, 3, 5)):
    """:func:`keydoor_answer`, but the tool call of the model's ``turns`` (0-based: the requests with
    ``1 + 2 * turn`` messages besides the system message) cut off mid-JSON, as SmolLM2's calls are at
    ``max_tokens``: arguments that are not JSON, which the framework answers itself (or, LangGraph,
    reads as no tool call)."""
    def answer(path: str, body: dict[str, Any], attempt: int):
        reply = keydoor_answer(path, body, attempt)
        messages = [m for m in body.get("messages", ()) if m.get("role") != "system"]
        if (len(messages) - 1) / 2 in turns:
            call = reply.tool_calls[0]
            reply.tool_calls = [{**call, "function": {"name": "act", "arguments": '{"command": "rig'}}]
        return reply
    return answer


def tool_chat(messages: list[dict[str, Any]], tools: dict[str, Any]) -> list[dict[str, str]]:
    """A tool world's framework messages as cir's context: each agent tool call as its canonical call
    text, each tool answer as a user message; a harness's call (a refresh) shows only its answer,
    as a harness step does in cir's context."""
    from cir.episode.protocol import RECOVERY_CALL_PREFIX
    from cir.tools import ToolCall, render_call

    out = []
    for m in messages:
        if m["role"] == "assistant" and m.get("tool_calls"):
            call = m["tool_calls"][0]
            if str(call["id"]).startswith(RECOVERY_CALL_PREFIX):
                continue
            function = call["function"]
            try:
                arguments = json.loads(function["arguments"] or "{}")
                text = render_call(ToolCall(function["name"], arguments), tools)
            except (ValueError, CirError):
                text = function["arguments"]
            out.append({"role": "assistant", "content": text})
        elif m["role"] == "tool":
            out.append({"role": "user", "content": m["content"]})
        else:
            out.append({"role": m["role"], "content": m["content"] or ""})
    return out


def world_answer(world: Any, agent: Any):
    """A deterministic chat server that is a tool world's model-free ``agent`` calling its typed tools
    (``FakeOpenAI(answer=world_answer(WORLD, AGENT))``): each reply one tool call, the agent's call
    with its arguments; the system message (a framework's instructions) is not read."""
    from cir.tools import parse_call
    from support.fake_openai import Reply, tool_call

    def answer(path: str, body: dict[str, Any], attempt: int):
        messages = [m for m in body.get("messages", ()) if m.get("role") != "system"]
        call = parse_call(agent.act(tool_chat(messages, world.tools)), world.tools)
        prompt = len(json.dumps(body.get("messages", ())).split())
        return Reply(text=None, tool_calls=[tool_call(call.name, dict(call.arguments), messages)],
                     usage={"prompt_tokens": prompt, "completion_tokens": 8, "total_tokens": prompt + 8})

    return answer


def shop_answer(path: str, body: dict[str, Any], attempt: int):
    """The tests' shop world's agent (``tests/support/shop.py``) as a chat server calling its tools."""
    from support.shop import WORLD, ShopAgent

    return world_answer(WORLD, ShopAgent())(path, body, attempt)
