"""The service desk's tools: typed functions over the store's ``sqlite3.Connection``.

Four read the store (``find_customer``, ``get_customer``, ``get_order``, ``get_product``) and five
change it (``cancel_order``, ``change_address``, ``exchange_item``, ``return_item``, ``refund``);
every tool that changes an order answers with the order as ``get_order`` shows it afterwards,
as tau-bench's retail API does. The kit (:mod:`cir.tools`) derives their schemas from the hints
and docstrings, validates the arguments and shows the answers as JSON.

Where the backend refuses and where only the policy (the task's check, :mod:`.check`) judges is
chosen as real retail APIs choose (``docs/service-desk.md``, "API and policy"): the backend
refuses a request that the order's *status* or the *stock* forbids (a cancel of an order that is
no longer pending, an address change after shipping, an exchange for a variant out of stock, a
second return of one item), with an error the agent can correct itself from. It accepts a
request made on a stale *value*: any address, any refund amount up to what is left to refund,
any of the customer's payment methods, and a second refund of the same amount (there is no
idempotency key), so a stale read there costs the task silently.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Literal

from cir.families.service_desk.store import (
    CANCEL_REASONS,
    CANCELLED,
    customer_record,
    money,
    now,
    order_record,
    product_record,
)
from cir.tools.typed import ToolError, tool

Reason = Literal["no longer needed", "ordered by mistake"]
assert tuple(Reason.__args__) == CANCEL_REASONS  # type: ignore[attr-defined]


def _order(db: sqlite3.Connection, order_id: str) -> sqlite3.Row:
    row = db.execute("SELECT * FROM orders WHERE order_id = ?", (order_id,)).fetchone()
    if row is None:
        raise ToolError(f"no order {order_id!r}")
    return row


def _line(db: sqlite3.Connection, order_id: str, item_id: str) -> sqlite3.Row:
    row = db.execute("SELECT * FROM order_items WHERE order_id = ? AND item_id = ?", (order_id, item_id)).fetchone()
    if row is None:
        raise ToolError(f"order {order_id} has no item {item_id!r}")
    return row


def _payment_of(db: sqlite3.Connection, customer_id: str, payment_id: str) -> None:
    row = db.execute("SELECT 1 FROM payment_methods WHERE payment_id = ? AND customer_id = ?",
                     (payment_id, customer_id)).fetchone()
    if row is None:
        raise ToolError(f"payment method {payment_id!r} is not one of the customer's")


def _next_id(db: sqlite3.Connection, table: str, column: str, prefix: str) -> str:
    n = db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]  # noqa: S608 - our own table names
    return f"{prefix}{n + 1:04d}"


def _refunded(db: sqlite3.Connection, order_id: str) -> float:
    return money(db.execute("SELECT COALESCE(SUM(amount), 0) FROM refunds WHERE order_id = ?",
                            (order_id,)).fetchone()[0])


def _add_refund(db: sqlite3.Connection, order_id: str, payment_id: str, amount: float, reason: str,
                line: int | None = None) -> None:
    tick, stamp = now(db)
    db.execute("INSERT INTO refunds VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
               (_next_id(db, "refunds", "refund_id", "RF"), order_id, payment_id, money(amount), reason, line,
                tick, stamp))


def _touch(db: sqlite3.Connection, order_id: str) -> None:
    db.execute("UPDATE orders SET updated_at = ? WHERE order_id = ?", (now(db)[1], order_id))


# -- reading -----------------------------------------------------------------------------------------
@tool(read_only=True)
def find_customer(db: sqlite3.Connection, email: str) -> dict[str, Any]:
    """Find a customer by email address: their customer id and name.

    Args:
        email: the customer's email address, like "ana.lopez@example.com".
    """
    row = db.execute("SELECT customer_id, name, email FROM customers WHERE lower(email) = lower(?)",
                     (email.strip(),)).fetchone()
    if row is None:
        raise ToolError(f"no customer with email {email!r}")
    return {"customer_id": row["customer_id"], "name": row["name"], "email": row["email"]}


@tool(read_only=True)
def get_customer(db: sqlite3.Connection, customer_id: str) -> dict[str, Any]:
    """A customer's profile: name, email, default address, payment methods and orders.

    Args:
        customer_id: the customer's id, like "C1042".
    """
    record = customer_record(db, customer_id)
    if record is None:
        raise ToolError(f"no customer {customer_id!r}")
    return record


@tool(read_only=True)
def get_order(db: sqlite3.Connection, order_id: str) -> dict[str, Any]:
    """An order: its status, shipping address, payment method, items, exchanges, refunds and shipment.

    Args:
        order_id: the order's id, like "W1002".
    """
    _order(db, order_id)
    return order_record(db, order_id)  # type: ignore[return-value]


@tool(read_only=True)
def get_product(db: sqlite3.Connection, product_id: str) -> dict[str, Any]:
    """A product and its variants: each variant's item id, options, current price and stock.

    Args:
        product_id: the product's id, like "P104".
    """
    record = product_record(db, product_id)
    if record is None:
        raise ToolError(f"no product {product_id!r}")
    return record


# -- changing ----------------------------------------------------------------------------------------
@tool(read_only=False)
def cancel_order(db: sqlite3.Connection, order_id: str, reason: Reason) -> dict[str, Any]:
    """Cancel a pending order; its total is refunded to the original payment method.

    Args:
        order_id: the order's id.
        reason: why the customer cancels: "no longer needed" or "ordered by mistake".
    """
    order = _order(db, order_id)
    if order["status"] != "pending":
        raise ToolError(f"order {order_id} is {order['status']}; only pending orders can be cancelled")
    total = money(db.execute("SELECT SUM(price) FROM order_items WHERE order_id = ?", (order_id,)).fetchone()[0])
    _, stamp = now(db)
    db.execute("UPDATE orders SET status = ?, cancel_reason = ?, updated_at = ? WHERE order_id = ?",
               (CANCELLED, reason, stamp, order_id))
    for line in db.execute("SELECT item_id FROM order_items WHERE order_id = ?", (order_id,)).fetchall():
        db.execute("UPDATE variants SET stock = stock + 1, updated_at = ? WHERE item_id = ?", (stamp, line["item_id"]))
    _add_refund(db, order_id, order["payment_id"], total - _refunded(db, order_id), "cancellation")
    return order_record(db, order_id)  # type: ignore[return-value]


@tool(read_only=False)
def change_address(db: sqlite3.Connection, order_id: str, address1: str, city: str, state: str,
                   zip: str) -> dict[str, Any]:  # noqa: A002 - the address field's name
    """Change the shipping address of an order that has not shipped yet (pending or processing).

    Args:
        order_id: the order's id.
        address1: street and number, like "41 Elm Street".
        city: the city.
        state: the two-letter state code, like "IL".
        zip: the five-digit zip code.
    """
    order = _order(db, order_id)
    if order["status"] not in ("pending", "processing"):
        raise ToolError(f"order {order_id} is {order['status']}; the address can only be changed before it ships")
    db.execute("UPDATE orders SET address1 = ?, city = ?, state = ?, zip = ?, updated_at = ? WHERE order_id = ?",
               (address1.strip(), city.strip(), state.strip(), zip.strip(), now(db)[1], order_id))
    return order_record(db, order_id)  # type: ignore[return-value]


@tool(read_only=False)
def exchange_item(db: sqlite3.Connection, order_id: str, item_id: str, new_item_id: str) -> dict[str, Any]:
    """Exchange a delivered item for another variant of the same product that is in stock; a price
    difference is charged to, or refunded to, the original payment method.

    Args:
        order_id: the order's id.
        item_id: the item id of the delivered item to exchange.
        new_item_id: the item id of the variant the customer wants instead.
    """
    order = _order(db, order_id)
    if order["status"] != "delivered":
        raise ToolError(f"order {order_id} is {order['status']}; only delivered items can be exchanged")
    line = _line(db, order_id, item_id)
    if line["status"] != "ordered":
        raise ToolError(f"item {item_id} of order {order_id} was already {line['status']}")
    old = db.execute("SELECT * FROM variants WHERE item_id = ?", (item_id,)).fetchone()
    new = db.execute("SELECT * FROM variants WHERE item_id = ?", (new_item_id,)).fetchone()
    if new is None:
        raise ToolError(f"no item {new_item_id!r}")
    if new["product_id"] != old["product_id"] or new_item_id == item_id:
        raise ToolError(f"item {new_item_id} is not another variant of the same product as {item_id}")
    if new["stock"] <= 0:
        raise ToolError(f"item {new_item_id} is out of stock")
    tick, stamp = now(db)
    difference = money(new["price"] - line["price"])
    db.execute("UPDATE order_items SET status = 'exchanged' WHERE order_id = ? AND line = ?", (order_id, line["line"]))
    db.execute("UPDATE variants SET stock = stock - 1, updated_at = ? WHERE item_id = ?", (stamp, new_item_id))
    db.execute("INSERT INTO exchanges VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
               (_next_id(db, "exchanges", "exchange_id", "EX"), order_id, line["line"], item_id, new_item_id,
                difference, tick, stamp))
    if difference < 0:
        _add_refund(db, order_id, order["payment_id"], -difference, "exchange price difference", line["line"])
    _touch(db, order_id)
    return order_record(db, order_id)  # type: ignore[return-value]


@tool(read_only=False)
def return_item(db: sqlite3.Connection, order_id: str, item_id: str, payment_id: str) -> dict[str, Any]:
    """Return a delivered item; its price is refunded to the given payment method of the customer.

    Args:
        order_id: the order's id.
        item_id: the item id of the delivered item to return.
        payment_id: the customer's payment method to refund, like "credit_card_4242".
    """
    order = _order(db, order_id)
    if order["status"] != "delivered":
        raise ToolError(f"order {order_id} is {order['status']}; only delivered items can be returned")
    line = _line(db, order_id, item_id)
    if line["status"] != "ordered":
        raise ToolError(f"item {item_id} of order {order_id} was already {line['status']}")
    _payment_of(db, order["customer_id"], payment_id)
    db.execute("UPDATE order_items SET status = 'returned' WHERE order_id = ? AND line = ?", (order_id, line["line"]))
    _add_refund(db, order_id, payment_id, line["price"], "return", line["line"])
    _touch(db, order_id)
    return order_record(db, order_id)  # type: ignore[return-value]


@tool(read_only=False)
def refund(db: sqlite3.Connection, order_id: str, amount: float, payment_id: str, reason: str) -> dict[str, Any]:
    """Refund an amount of an order (a price adjustment, a goodwill credit) to a payment method of the
    customer; at most what is left of the order's total after earlier refunds.

    Args:
        order_id: the order's id.
        amount: the amount in dollars, like 12.5.
        payment_id: the customer's payment method to refund.
        reason: why, in a few words, like "price adjustment".
    """
    order = _order(db, order_id)
    if order["status"] == CANCELLED:
        raise ToolError(f"order {order_id} is cancelled; its total was refunded already")
    amount = money(amount)
    left = money(money(db.execute("SELECT SUM(price) FROM order_items WHERE order_id = ?",
                                  (order_id,)).fetchone()[0]) - _refunded(db, order_id))
    if amount <= 0:
        raise ToolError("the amount must be positive")
    if amount > left:
        raise ToolError(f"order {order_id} has {left:.2f} left to refund; {amount:.2f} is more")
    _payment_of(db, order["customer_id"], payment_id)
    _add_refund(db, order_id, payment_id, amount, reason.strip() or "refund")
    _touch(db, order_id)
    return order_record(db, order_id)  # type: ignore[return-value]


#: every tool of the store, reading ones first (``finish`` is the kit's)
TOOLS = (find_customer, get_customer, get_order, get_product,
         cancel_order, change_address, exchange_item, return_item, refund)
#: the tools that change an order, each answered by the order (what a refresh re-reads after one)
ORDER_WRITES = frozenset({"cancel_order", "change_address", "exchange_item", "return_item", "refund"})


def refresh_of(call: Any) -> str | None:
    """What a refresh re-reads after a call that changed the store: the order it changed."""
    order_id = call.arguments.get("order_id") if call.name in ORDER_WRITES else None
    return None if order_id is None else f"get_order(order_id={json.dumps(order_id)})"


def refresh_query(task: Any) -> str:
    """What a refresh sends when it has no call to re-run: the ticket's customer's profile."""
    customer = (getattr(task, "data", None) or {}).get("customer_id", "")
    return f"get_customer(customer_id={json.dumps(customer)})"
