"""The action text of a tool world: one tool call, written as one canonical text.

Every env action of a tool world is a call, and the whole core keys on action texts (the
transcript, the branching env's memo, the reply caches, ``staleK`` and ``lagK``, ``cir
explain``), so a call has one text::

    get_order(order_id="W1002")
    cancel_order(order_id="W1002", reason="no longer needed")
    finish(answer="")

keyword arguments only, in the tool's signature order, every argument written (defaults
filled in), each value a JSON literal (``json.dumps(value, ensure_ascii=False)``).
:func:`parse_call` reads that form and what agents write besides: Python literals (``'x'``,
``True``, ``None``), positional arguments (given the tools, which know the order) and
OpenAI's function-calling form (``{"name": ..., "arguments": {...}}``, the arguments as an
object or as JSON text, or wrapped in ``{"function": ...}``). :func:`render_call` writes the
canonical text. A text that is not a call is a :class:`CallError`, which a tool world answers
as a tool would answer a bad request (an agent's mistake is data, not a crash).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cir.util.errors import CirError

#: Tools by name (:class:`cir.tools.typed.Tool`, which reads calls: this module names it only so)
Tools = Mapping[str, Any]

#: JSON's words, read where a Python literal would stand
_JSON_NAMES = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}


class CallError(CirError):
    """A text that is not a call of a known tool with valid arguments; the message says what was
    wrong and what was expected (a tool world shows it to the agent as an error result)."""


@dataclass(frozen=True)
class ToolCall:
    """One call: the tool's ``name``, its keyword ``arguments`` and any ``positional`` ones (read
    from a text before the tool's signature placed them; :meth:`resolved` places them)."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    positional: tuple[Any, ...] = ()

    def resolved(self, tools: Tools) -> ToolCall:
        """This call with its arguments checked against its tool: positional ones placed by the
        signature, defaults filled in, every value validated (a :class:`CallError` otherwise)."""
        tool = tools.get(self.name)
        if tool is None:
            known = ", ".join(sorted(tools)) or "none"
            raise CallError(f"unknown tool {self.name!r}; the tools are: {known}")
        return ToolCall(self.name, tool.validate(self.arguments, self.positional))


def parse_call(text: str, tools: Tools | None = None) -> ToolCall:
    """The call ``text`` writes (see the module docstring); with ``tools``, resolved against its
    tool (:meth:`ToolCall.resolved`). A :class:`CallError` names what is wrong."""
    if not isinstance(text, str):
        raise CallError(f"a call must be text, got {type(text).__name__}")
    text = text.strip()
    if not text:
        raise CallError('an empty action; expected a call such as name(arg="value")')
    call = _json_call(text) if text.startswith("{") else _python_call(text)
    return call.resolved(tools) if tools is not None else call


def render_call(call: ToolCall, tools: Tools | None = None) -> str:
    """The canonical text of ``call``; with ``tools``, resolved first (signature order, defaults
    filled in, values as the tool's validation gives them)."""
    if tools is not None:
        call = call.resolved(tools)
    elif call.positional:
        raise CallError(f"{call.name}: positional arguments need the tool's signature to be written "
                        "as keywords; pass the tools")
    tool = tools.get(call.name) if tools is not None else None
    values = tool.json_values(call.arguments) if tool is not None else dict(call.arguments)
    args = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in values.items())
    return f"{call.name}({args})"


def canonical(text: str, tools: Tools) -> str | None:
    """The canonical text of the call ``text`` writes, or None when it writes no valid call."""
    try:
        return render_call(parse_call(text, tools), tools)
    except CallError:
        return None


# -- reading ---------------------------------------------------------------------------------------
def _json_call(text: str) -> ToolCall:
    try:
        data = json.loads(text)
    except ValueError as err:
        raise CallError(f"a call in JSON form must be valid JSON ({err.msg} at character {err.pos})") from None
    if isinstance(data, dict) and isinstance(data.get("function"), dict):
        data = data["function"]  # {"type": "function", "function": {...}}
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise CallError('a call in JSON form needs a "name" and "arguments": {"name": "get_order", '
                        '"arguments": {"order_id": "W1002"}}')
    arguments = data.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            raise CallError(f"{data['name']}: its arguments are not JSON: {arguments!r:.80}") from None
    if not isinstance(arguments, dict):
        raise CallError(f"{data['name']}: its arguments must be a JSON object, got {type(arguments).__name__}")
    return ToolCall(data["name"], dict(arguments))


def _python_call(text: str) -> ToolCall:
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        raise CallError(f'{text!r:.80} is not a call; expected name(arg="value", ...)') from None
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise CallError(f'{text!r:.80} is not a call; expected name(arg="value", ...)')
    name = node.func.id
    positional = tuple(_literal(a, name) for a in node.args)
    arguments: dict[str, Any] = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            raise CallError(f"{name}: write each argument as name=value (no **)")
        if keyword.arg in arguments:
            raise CallError(f"{name}: argument {keyword.arg!r} is given twice")
        arguments[keyword.arg] = _literal(keyword.value, f"{name}({keyword.arg}=...)")
    return ToolCall(name, arguments, positional)


def _literal(node: ast.AST, where: str) -> Any:
    """A JSON or Python literal's value (strings, numbers, true/false/null, lists, objects)."""
    if isinstance(node, ast.Constant) and not isinstance(node.value, bytes | complex) and node.value is not ...:
        return node.value
    if isinstance(node, ast.Name) and node.id in _JSON_NAMES:
        return _JSON_NAMES[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _literal(node.operand, where)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.List | ast.Tuple):
        return [_literal(e, where) for e in node.elts]
    if isinstance(node, ast.Dict):
        out = {}
        for key, value in zip(node.keys, node.values, strict=True):
            k = _literal(key, where) if key is not None else None
            if not isinstance(k, str):
                raise CallError(f"{where}: an object's keys must be strings")
            out[k] = _literal(value, where)
        return out
    raise CallError(f"{where}: {ast.unparse(node)!r:.60} is not a literal value (a string in quotes, a number, "
                    "true/false/null, a list or an object)")
