"""The LLM prompt of a tool world, derived from its tools: instructions that list each tool's
signature and one-line description and say how to call (``name(arg="value")``, one call per
reply), a parser that reads a call from a reply (after ``>``, ``Action:``, in a code fence, or
in OpenAI's JSON form) and answers its canonical text, and the tools' schemas as plain data
(:attr:`~cir.agents.prompt.LLMPrompt.tools`, for function calling). The prompt's ``version``
digests the schemas and the texts, so other tools are another agent."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence

from cir.agents.prompt import LLMPrompt, ParsedAction, reply_line, thought
from cir.episode.protocol import THINK_PREFIX
from cir.tools.calls import CallError, parse_call, render_call
from cir.tools.typed import Tool

_FENCE = re.compile(r"```[a-zA-Z]*\n?(.*?)```", re.DOTALL)


def tools_text(tools: Mapping[str, Tool]) -> str:
    """One line per tool: its signature and description."""
    return "\n".join(f"- {t.signature_text()}: {t.description}" for t in tools.values())


def tool_prompt(name: str, tools: Mapping[str, Tool], instructions: str = "",
                examples: Sequence[str] = ()) -> LLMPrompt:
    """The world's :class:`~cir.agents.prompt.LLMPrompt` (see the module docstring)."""
    text = ((instructions.strip() + "\n\n") if instructions.strip() else "") + (
        "You act by calling tools, one call per reply, written as name(arg=\"value\", ...) with every value a "
        "JSON literal (text in double quotes, numbers, true, false, null, lists, objects). Each call's answer is "
        "JSON. Call finish(answer=\"...\") when the task is done.\nThe tools:\n" + tools_text(tools))
    schemas = tuple(t.schema for t in tools.values())
    digest = hashlib.sha256(json.dumps([schemas, text, list(examples)], sort_keys=True,
                                       ensure_ascii=False).encode()).hexdigest()[:12]
    return LLMPrompt(version=f"{name}-tools-{digest}", instructions=text, examples=tuple(examples),
                     parse=CallParser(tools), tools=schemas)


class CallParser:
    """A reply -> :class:`~cir.agents.prompt.ParsedAction` whose action is a canonical call (a
    function of the tools; a module-level class, so a prompt that holds one still compares and
    prints plainly)."""

    def __init__(self, tools: Mapping[str, Tool]) -> None:
        self.tools = dict(tools)

    def __call__(self, reply: str) -> ParsedAction:
        text = reply.strip()
        fenced = _FENCE.search(text)
        if fenced:
            text = fenced.group(1).strip()
        if text.startswith("{"):
            try:
                return ParsedAction(render_call(parse_call(text, self.tools), self.tools), True, reply)
            except CallError:
                pass
        line = reply_line(text)
        said = thought(line)
        if said is not None:
            return ParsedAction(f"{THINK_PREFIX} {said}" if said else THINK_PREFIX, True, reply)
        try:
            return ParsedAction(render_call(parse_call(line, self.tools), self.tools), True, reply)
        except CallError:
            return ParsedAction(line, False, reply)  # the world answers it with the error

    def __repr__(self) -> str:
        return f"CallParser({', '.join(self.tools)})"
