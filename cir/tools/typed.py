"""Typed tools: plain Python functions with type hints and docstrings, each marked read-only or
mutating, whose JSON schema (OpenAI's function-calling form) and argument validation ``cir``
derives with pydantic; nothing is written by hand.

The FIRST parameter of a tool receives the state's handle (a ``sqlite3.Connection``, the
folder's ``pathlib.Path``, the object itself: :mod:`cir.tools.state`) and is not part of the
schema::

    @tool(read_only=True)
    def get_order(db: sqlite3.Connection, order_id: str) -> dict:
        \"\"\"Look up one order by its id.

        Args:
            order_id: the order's id, like "W1002".
        \"\"\"

A tool answers by returning a value (a dict, a list, text, a number, a dataclass, a
``sqlite3.Row``), which the world shows as JSON (:mod:`cir.tools.results`), or by raising
:class:`ToolError` for a request it refuses (``{"error": "..."}``); any other exception is a
bug in the tool, which ``cir`` reports naming the tool and the call, never hides.
:func:`bind` gives the tools as plain callables on one handle: what production code calls.
"""

from __future__ import annotations

import inspect
import json
import re
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pydantic
import pydantic_core

from cir.tools.calls import CallError
from cir.util.errors import CirError

#: The tool every world offers: it ends the episode (the task's success check then runs).
FINISH = "finish"


class ToolError(Exception):
    """Raised by a tool for a request it refuses (an unknown id, a policy that forbids the
    change): the agent is shown ``{"error": message}``, as a real API would answer."""


class Tool:
    """One typed tool (see the module docstring); made by :func:`tool`, called like the function."""

    def __init__(self, function: Callable[..., Any], *, read_only: bool, name: str | None = None) -> None:
        if not callable(function):
            raise CirError(f"tool {function!r:.60}: expected a function")
        self.function = function
        self.read_only = bool(read_only)
        self.name = name or function.__name__
        if not self.name.isidentifier():
            raise CirError(f"tool {self.name!r}: a tool's name must be a Python name (it is written as name(...))")
        where = f"tool {self.name}"
        signature = inspect.signature(function)
        params = list(signature.parameters.values())
        if not params or params[0].kind not in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD):
            raise CirError(f"{where}: its first parameter receives the state's handle (a sqlite3.Connection, the "
                           "folder's Path, the object); add one, e.g. def get_order(db, order_id: str)")
        self.handle_name = params[0].name
        self.params = params[1:]
        odd = [p.name for p in self.params if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY)]
        if odd:
            raise CirError(f"{where}: parameter {odd[0]!r}: a tool's arguments must be plain named parameters "
                           "(no *args, **kwargs or positional-only ones): the schema names each")
        try:
            hints = typing.get_type_hints(function, include_extras=True)
        except Exception as err:  # a hint that names something undefined
            raise CirError(f"{where}: its type hints cannot be resolved ({err})") from None
        missing = [p.name for p in self.params if p.name not in hints]
        if missing:
            raise CirError(f"{where}: parameter {missing[0]!r} has no type hint; the schema is derived from the "
                           "hints (e.g. order_id: str)")
        self.description, described = parse_docstring(inspect.getdoc(function) or "")
        if not self.description:
            raise CirError(f"{where}: it has no docstring; its first line is what the agent is told the tool does")
        fields: dict[str, Any] = {}
        for i, p in enumerate(self.params):
            default = ... if p.default is p.empty else p.default
            info = pydantic.Field(default, alias=p.name, description=described.get(p.name))
            fields[f"a{i}"] = (hints[p.name], info)  # aliases: a parameter may be named like a model's method
        try:
            self.model = pydantic.create_model(
                f"{self.name}_arguments",
                __config__=pydantic.ConfigDict(extra="forbid", protected_namespaces=(), strict=True),
                **fields)
            parameters = self.model.model_json_schema()
        except (pydantic.PydanticUserError, pydantic.PydanticSchemaGenerationError, TypeError) as err:
            raise CirError(f"{where}: its argument types cannot be described as JSON ({_first_line(err)})") from None
        self.parameters = _without_titles(parameters)
        self.names = tuple(p.name for p in self.params)

    # -- what an agent is told ------------------------------------------------------------------------
    @property
    def schema(self) -> dict[str, Any]:
        """The OpenAI function-calling form: ``{"type": "function", "function": {"name",
        "description", "parameters"}}``."""
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}

    def signature_text(self) -> str:
        """``name(arg: type, arg: type = default)``: one line of a prompt's tool list."""
        parts = []
        for p in self.params:
            kind = _type_text(self.parameters["properties"].get(p.name, {}), self.parameters)
            default = "" if p.default is p.empty else f" = {json.dumps(_jsonable(p.default), ensure_ascii=False)}"
            parts.append(f"{p.name}: {kind}{default}")
        return f"{self.name}({', '.join(parts)})"

    # -- calling --------------------------------------------------------------------------------------
    def validate(self, arguments: Mapping[str, Any], positional: Sequence[Any] = ()) -> dict[str, Any]:
        """The arguments as the function takes them, in signature order with defaults filled in;
        a :class:`CallError` names a missing, unknown or ill-typed one."""
        given = dict(arguments)
        if len(positional) > len(self.names):
            raise CallError(f"{self.name}: {len(positional)} positional arguments, it takes {len(self.names)} "
                            f"({', '.join(self.names) or 'none'})")
        for name, value in zip(self.names, positional, strict=False):
            if name in given:
                raise CallError(f"{self.name}: argument {name!r} is given twice")
            given[name] = value
        try:
            text = json.dumps(pydantic_core.to_jsonable_python(given), ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError, pydantic_core.PydanticSerializationError):
            raise CallError(f"{self.name}: its arguments must be JSON values") from None
        try:
            checked = self.model.model_validate_json(text)
        except pydantic.ValidationError as err:
            raise CallError(self._explain(err)) from None
        return {name: getattr(checked, f"a{i}") for i, name in enumerate(self.names)}

    def json_values(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Validated arguments as JSON values (an Enum as its value, a tuple as a list), in order."""
        built = self.model.model_construct(**{f"a{i}": arguments[n] for i, n in enumerate(self.names)})
        dumped = built.model_dump(mode="json", by_alias=True, warnings=False)
        return {n: dumped[n] for n in self.names}

    def __call__(self, handle: Any, *args: Any, **kwargs: Any) -> Any:
        """The function itself (so a tool stays callable as the user wrote it)."""
        return self.function(handle, *args, **kwargs)

    def _explain(self, err: pydantic.ValidationError) -> str:
        expected = f"expected {self.signature_text()}"
        problems = []
        for e in err.errors(include_url=False):
            loc = ".".join(str(x) for x in e.get("loc", ())) or "arguments"
            top = str(e.get("loc", ("",))[0])
            if e.get("type") == "missing":
                problems.append(f"missing argument {top!r}")
            elif e.get("type") == "extra_forbidden":
                problems.append(f"unknown argument {top!r}")
            else:
                problems.append(f"argument {loc!r}: {e.get('msg')} (got {json.dumps(e.get('input'), default=str)[:60]})")
        return f"{self.name}: {'; '.join(problems)}; {expected}"

    def __repr__(self) -> str:
        return f"Tool({self.name!r}, read_only={self.read_only})"


def tool(function: Callable[..., Any] | None = None, *, read_only: bool | None = None,
         name: str | None = None) -> Any:
    """Mark a function as a tool: ``@tool(read_only=True)`` when it only reads the state,
    ``@tool(read_only=False)`` when it changes it (which a refresh never repeats). ``name``: the
    tool's name when not the function's."""
    def mark(fn: Callable[..., Any]) -> Tool:
        if read_only is None:
            label = getattr(fn, "__name__", repr(fn))
            raise CirError(f"tool {label}: mark it @tool(read_only=True) if it only reads the state, "
                           "@tool(read_only=False) if it changes it")
        return Tool(fn, read_only=read_only, name=name)

    return mark(function) if function is not None else mark


def tool_map(tools: Iterable[Tool | Callable[..., Any]]) -> dict[str, Tool]:
    """Tools by name; a function that is not a :class:`Tool`, or a name given twice, is a CirError."""
    out: dict[str, Tool] = {}
    for t in tools:
        if not isinstance(t, Tool):
            raise CirError(f"{getattr(t, '__name__', t)!r:.60} is not a tool; mark it @tool(read_only=...)")
        if t.name in out:
            raise CirError(f"tool {t.name!r} is given twice")
        out[t.name] = t
    return out


def bind(tools: Iterable[Tool], handle: Any) -> dict[str, Callable[..., Any]]:
    """The tools as plain callables on ``handle`` (the state's handle is not an argument): what
    production code calls. Each validates its arguments as an agent's call is validated (a
    :class:`~cir.tools.calls.CallError` for a bad one), then calls the function."""
    out = {}
    for t in tool_map(tools).values():
        out[t.name] = _bound(t, handle)
    return out


def _bound(t: Tool, handle: Any) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        return t.function(handle, **t.validate(kwargs, args))

    call.__name__ = call.__qualname__ = t.name
    call.__doc__ = t.function.__doc__
    signature = inspect.signature(t.function)
    call.__signature__ = signature.replace(parameters=list(signature.parameters.values())[1:])  # type: ignore[attr-defined]
    return call


# -- docstrings ---------------------------------------------------------------------------------------
_SECTION = re.compile(r"^(args|arguments|parameters|params)\s*:\s*$", re.IGNORECASE)
_OTHER_SECTION = re.compile(r"^(returns?|raises|yields|examples?|notes?|see also)\s*:\s*$", re.IGNORECASE)
_ARG = re.compile(r"^(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """A docstring's description (its text before any section, joined into one paragraph) and
    its ``Args:`` entries (Google style: ``name: text`` or ``name (type): text``, continued on
    more indented lines), by parameter name."""
    lines = doc.expandtabs().splitlines()
    description: list[str] = []
    described: dict[str, str] = {}
    i = 0
    while i < len(lines) and not (_SECTION.match(lines[i].strip()) or _OTHER_SECTION.match(lines[i].strip())):
        description.append(lines[i].strip())
        i += 1
    current: str | None = None
    indent = None
    in_args = False
    for line in lines[i:]:
        stripped = line.strip()
        if _SECTION.match(stripped):
            in_args, current, indent = True, None, None
            continue
        if _OTHER_SECTION.match(stripped):
            in_args, current = False, None
            continue
        if not in_args or not stripped:
            continue
        depth = len(line) - len(line.lstrip())
        match = _ARG.match(stripped)
        if match and (indent is None or depth <= indent):
            indent, current = depth, match.group(1)
            described[current] = match.group(2).strip()
        elif current is not None:
            described[current] = f"{described[current]} {stripped}".strip()
    paragraphs = " ".join(description).strip()
    return re.sub(r"\s+", " ", paragraphs), described


# -- schema text ---------------------------------------------------------------------------------------
def _without_titles(schema: dict[str, Any]) -> dict[str, Any]:
    """pydantic's schema without its generated titles (the model's and each property's)."""
    out = {k: v for k, v in schema.items() if k != "title"}
    out["properties"] = {name: {k: v for k, v in prop.items() if k != "title"}
                         for name, prop in schema.get("properties", {}).items()}
    return out


def _type_text(prop: dict[str, Any], root: dict[str, Any]) -> str:
    """A property's JSON schema as a short type for a prompt: str, int, list[str], "a" | "b", ..."""
    if "$ref" in prop:
        target = root.get("$defs", {}).get(prop["$ref"].rsplit("/", 1)[-1], {})
        return _type_text(target, root)
    if "enum" in prop:
        return " | ".join(json.dumps(v, ensure_ascii=False) for v in prop["enum"])
    if "const" in prop:
        return json.dumps(prop["const"], ensure_ascii=False)
    if "anyOf" in prop:
        return " | ".join(_type_text(p, root) for p in prop["anyOf"])
    kind = prop.get("type")
    if kind == "array":
        return f"list[{_type_text(prop.get('items', {}), root)}]"
    names = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "object": "dict",
             "null": "null"}
    return names.get(kind, "any") if isinstance(kind, str) else "any"


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except TypeError:
        return getattr(value, "value", str(value))


def _first_line(err: Exception) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
