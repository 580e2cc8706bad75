"""The call format of tool worlds (cir.tools.calls) and typed tools (cir.tools.typed): one
canonical text per call, schemas derived from hints and docstrings, bad calls as errors that
say what was expected."""

from __future__ import annotations

import enum
import sqlite3
from typing import Literal

import pytest

from cir.tools.calls import CallError, ToolCall, canonical, parse_call, render_call
from cir.tools.typed import Tool, bind, parse_docstring, tool, tool_map
from cir.util.errors import CirError


class Size(enum.Enum):
    small = "small"
    large = "large"


@tool(read_only=True)
def get_order(db: sqlite3.Connection, order_id: str, limit: int = 3) -> dict:
    """Look up one order by its id.

    Args:
        order_id: the order's id, like "W1002".
        limit: how many items to list,
            at most.
    """
    return {"order_id": order_id, "limit": limit}


@tool(read_only=False)
def exchange(db: dict, item: str, size: Size, note: str | None = None, tags: list[str] | None = None,
             mode: Literal["fast", "slow"] = "fast") -> dict:
    """Exchange an item for another size."""
    db[item] = size.value
    return {"item": item, "size": size.value}


TOOLS = tool_map([get_order, exchange])


@pytest.mark.parametrize("text", [
    'get_order(order_id="W1002")',
    "get_order(order_id='W1002', limit=3)",
    "get_order('W1002')",
    "get_order('W1002', 3)",
    '  get_order( order_id = "W1002" )  ',
    '{"name": "get_order", "arguments": {"order_id": "W1002"}}',
    '{"name": "get_order", "arguments": "{\\"order_id\\": \\"W1002\\", \\"limit\\": 3}"}',
    '{"type": "function", "function": {"name": "get_order", "arguments": {"order_id": "W1002"}}}',
])
def test_every_way_of_writing_a_call_has_one_canonical_text(text):
    assert render_call(parse_call(text, TOOLS), TOOLS) == 'get_order(order_id="W1002", limit=3)'


def test_values_are_json_literals_in_signature_order_with_defaults_filled_in():
    text = "exchange(tags=('a', 'ü'), size='large', item='shirt', note=None)"
    assert canonical(text, TOOLS) == ('exchange(item="shirt", size="large", note=null, tags=["a", "ü"], '
                                      'mode="fast")')
    assert canonical('exchange(item="shirt", size="large", note=null, tags=["a", "ü"], mode="fast")', TOOLS) == \
        'exchange(item="shirt", size="large", note=null, tags=["a", "ü"], mode="fast")'
    # the tool receives the validated Python values (an Enum, not its text)
    call = parse_call('exchange(item="shirt", size="small")', TOOLS)
    assert call.arguments["size"] is Size.small and call.arguments["mode"] == "fast"


@pytest.mark.parametrize("text, says", [
    ("", "empty action"),
    ("look", "is not a call"),
    ("get_order(order_id=x)", "is not a literal"),
    ("get_order(order_id=1002)", "argument 'order_id': Input should be a valid string"),
    ("get_order()", "missing argument 'order_id'"),
    ('get_order(order_id="a", colour=1)', "unknown argument 'colour'"),
    ('get_order("a", order_id="a")', "given twice"),
    ('get_order("a", 1, 2)', "3 positional arguments, it takes 2"),
    ('refund(order_id="a")', "unknown tool 'refund'; the tools are: exchange, get_order"),
    ('exchange(item="a", size="medium")', "argument 'size'"),
    ('{"name": "get_order", "arguments": "{oops"}', "its arguments are not JSON"),
    ('{"arguments": {}}', 'needs a "name"'),
    ("{nope", "must be valid JSON"),
])
def test_a_bad_call_is_an_error_that_says_what_was_expected(text, says):
    with pytest.raises(CallError) as err:
        parse_call(text, TOOLS)
    assert says in str(err.value)
    if says.startswith(("argument", "missing", "unknown argument")):  # the signature it expected
        assert "expected get_order(order_id: str, limit: int = 3)" in str(err.value) or \
            "expected exchange(item: str" in str(err.value)


def test_a_call_read_without_the_tools_keeps_its_positional_arguments_for_later():
    call = parse_call("get_order('W1')")
    assert call == ToolCall("get_order", {}, ("W1",))
    with pytest.raises(CallError, match="positional arguments need the tool's signature"):
        render_call(call)
    assert render_call(call, TOOLS) == 'get_order(order_id="W1", limit=3)'


def test_the_schema_is_openais_function_form_derived_from_hints_and_docstring():
    schema = get_order.schema
    assert schema["type"] == "function"
    function = schema["function"]
    assert function["name"] == "get_order" and function["description"] == "Look up one order by its id."
    params = function["parameters"]
    assert params["type"] == "object" and params["required"] == ["order_id"]
    assert params["properties"]["order_id"] == {"type": "string", "description": "the order's id, like \"W1002\"."}
    assert params["properties"]["limit"] == {"type": "integer", "default": 3,
                                             "description": "how many items to list, at most."}
    assert params["additionalProperties"] is False
    assert "title" not in params
    ex = exchange.schema["function"]["parameters"]
    assert ex["properties"]["mode"]["enum"] == ["fast", "slow"]
    assert ex["$defs"]["Size"]["enum"] == ["small", "large"]
    assert exchange.signature_text() == ('exchange(item: str, size: "small" | "large", note: str | null = null, '
                                         'tags: list[str] | null = null, mode: "fast" | "slow" = "fast")')


def test_a_tool_must_say_whether_it_changes_the_state_and_have_hints_and_a_docstring():
    def f(db, x: int) -> int:
        """F."""
        return x

    with pytest.raises(CirError, match=r"mark it @tool\(read_only=True\)"):
        tool(f)
    with pytest.raises(CirError, match=r"mark it @tool\(read_only=True\)"):
        tool()(f)

    def no_hint(db, x):
        """F."""

    with pytest.raises(CirError, match="parameter 'x' has no type hint"):
        tool(read_only=True)(no_hint)

    def no_doc(db, x: int):
        pass

    with pytest.raises(CirError, match="no docstring"):
        tool(read_only=True)(no_doc)

    def no_handle() -> int:
        """F."""

    with pytest.raises(CirError, match="first parameter receives the state's handle"):
        tool(read_only=True)(no_handle)

    def star(db, *xs: int) -> int:
        """F."""

    with pytest.raises(CirError, match="plain named parameters"):
        tool(read_only=True)(star)
    with pytest.raises(CirError, match="is given twice"):
        tool_map([get_order, get_order])
    with pytest.raises(CirError, match="is not a tool"):
        tool_map([f])


def test_a_parameter_may_be_named_like_a_method_of_pydantics_models():
    @tool(read_only=True)
    def lookup(db, json: str, copy: int = 0, schema: bool = False) -> str:
        """Look a thing up."""
        return json

    tools = tool_map([lookup])
    assert canonical('lookup(json="a")', tools) == 'lookup(json="a", copy=0, schema=false)'


def test_bind_gives_plain_callables_without_the_handle_that_validate_their_arguments():
    store: dict = {}
    fns = bind([get_order, exchange], store)
    assert fns["get_order"]("W9") == {"order_id": "W9", "limit": 3}
    assert fns["exchange"](item="shirt", size="large") == {"item": "shirt", "size": "large"}
    assert store == {"shirt": "large"}
    assert fns["get_order"].__name__ == "get_order" and "Look up one order" in fns["get_order"].__doc__
    assert list(__import__("inspect").signature(fns["get_order"]).parameters) == ["order_id", "limit"]
    with pytest.raises(CallError, match="missing argument 'order_id'"):
        fns["get_order"]()
    # the tool object itself is still the user's function
    assert isinstance(get_order, Tool) and get_order(None, "W1") == {"order_id": "W1", "limit": 3}


def test_docstrings_google_style():
    description, args = parse_docstring("Do a thing\nwell.\n\nArgs:\n    a (int): first\n        line two\n    b: second\n"
                                         "\nReturns:\n    c: not an argument\n")
    assert description == "Do a thing well."
    assert args == {"a": "first line two", "b": "second"}
