"""The store's calls as the agent writes them, and what kind of record answers each.

Every tool of the store answers with one kind of record (:data:`ANSWERS`): ``get_order`` and
every change of an order with an order, ``get_product`` with a product, ``get_customer`` with a
profile, ``find_customer`` with a customer's id and name. :func:`answers` says whether a shown
value answers a call (the right kind of record about the right id), which the built-in agent
reads and :mod:`.shown` classifies by.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from cir.families.service_desk.store import money
from cir.families.service_desk.tools import ORDER_WRITES, TOOLS
from cir.tools.calls import CallError, ToolCall, parse_call, render_call
from cir.tools.typed import tool_map
from cir.tools.world import finish

#: the tools as the world offers them (``finish`` included): what the agent's calls are written for
TOOL_MAP = tool_map((*TOOLS, finish))


@lru_cache(maxsize=4096)
def call_of(text: str) -> ToolCall | None:
    """One of the agent's replies as a call (None: not a call of the store's tools)."""
    try:
        return parse_call(text, TOOL_MAP)
    except CallError:
        return None


def render(name: str, **arguments: Any) -> str:
    """The canonical text of a call (:func:`cir.tools.calls.render_call`)."""
    return render_call(ToolCall(name, arguments), TOOL_MAP)


KEYS = {  # a record of each kind has at least these keys
    "order": ("order_id", "status", "items", "refunds", "exchanges"),
    "product": ("product_id", "variants"),
    "customer": ("customer_id", "orders", "payment_methods", "address"),
    "found": ("customer_id", "name", "email"),
}
#: the kind of record each tool answers with, and the argument that names it
ANSWERS = {"get_order": ("order", "order_id"), "get_product": ("product", "product_id"),
           "get_customer": ("customer", "customer_id"), "find_customer": ("found", "email"),
           **{w: ("order", "order_id") for w in ORDER_WRITES}}


def record_kind(value: Any) -> str | None:
    """``order``, ``product``, ``customer`` or ``found`` by the keys a record has, else None."""
    if not isinstance(value, dict):
        return None
    for kind in ("order", "product", "customer", "found"):
        if all(k in value for k in KEYS[kind]):
            return kind
    return None


def answers(call: ToolCall, value: Any) -> str:
    """Whether ``value`` answers ``call``: ``yes``, ``other`` (a record of the right kind about
    another id) or ``shape`` (another kind of record, or none)."""
    kind, arg = ANSWERS[call.name]
    if record_kind(value) != kind:
        return "shape"
    key = "email" if arg == "email" else arg
    asked = str(call.arguments.get(arg, ""))
    got = str(value.get(key, ""))
    same = got.lower() == asked.strip().lower() if arg == "email" else got == asked
    return "yes" if same else "other"


def reflects(call: ToolCall, order: dict[str, Any], times: int) -> bool:
    """Whether an order shows the change ``call`` made (``times``: how often the agent made it)."""
    a = call.arguments
    if call.name == "cancel_order":
        return order.get("status") == "cancelled"
    if call.name == "change_address":
        want = {k: str(a[k]).strip() for k in ("address1", "city", "state", "zip")}
        return order.get("address") == want
    if call.name == "exchange_item":
        return any(e.get("item_id") == a["item_id"] and e.get("new_item_id") == a["new_item_id"]
                   for e in order.get("exchanges") or [])
    if call.name == "return_item":
        return any(i.get("item_id") == a["item_id"] and i.get("status") == "returned" for i in order.get("items") or [])
    if call.name == "refund":
        same = [r for r in order.get("refunds") or [] if r.get("reason") == a["reason"].strip()
                and money(r.get("amount", 0)) == money(a["amount"]) and r.get("payment_id") == a["payment_id"]]
        return len(same) >= times
    return False
