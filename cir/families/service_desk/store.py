"""The store's database: its schema, its clock, and its records as the tools show them.

One SQLite database per task (the real ``sqlite3``, in memory while an episode runs): customers,
their payment methods, products and their variants (stock and price), orders, their items,
shipments, exchanges and refunds. Every record the agent reads carries ``updated_at``, the
store time of its last change, as real retail APIs do.

The store's clock is the world clock of the episode (env actions so far, a refresh's too:
:mod:`cir.tools.env`), kept in the one-row table ``clock`` so that a tool stamps a change with
the time it runs at and a restore brings the clock back with the rows. Store time is the
ticket's opening time plus one minute per env action (:func:`store_time`).
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timedelta
from typing import Any

#: the store time at which every ticket opens (env action 0); one env action is one minute
OPENED = datetime(2025, 3, 14, 9, 0)

#: order statuses, in the order an order goes through them (``cancelled`` is off the line)
STATUSES = ("pending", "processing", "shipped", "delivered")
CANCELLED = "cancelled"
#: what the kinds of payment method are called
PAYMENT_KINDS = ("credit_card", "paypal", "gift_card")
#: why an order may be cancelled (what ``cancel_order`` accepts)
CANCEL_REASONS = ("no longer needed", "ordered by mistake")
#: minutes (env actions) the store's back office takes to process a change: a refund is ``pending``
#: until the payment processor settles it, an exchange ``requested`` until the warehouse approves it
#: and issues its return label; then ``completed`` and ``approved``. A change's own answer shows it
#: as just made; a read a minute later shows it processed (docs/service-desk.md, "A busy store").
SETTLE_MINUTES = 1

SCHEMA = """
CREATE TABLE clock (tick INTEGER NOT NULL);
CREATE TABLE customers (
    customer_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE,
    address1 TEXT NOT NULL,
    city TEXT NOT NULL,
    state TEXT NOT NULL,
    zip TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE payment_methods (
    payment_id TEXT PRIMARY KEY,
    customer_id TEXT NOT NULL REFERENCES customers(customer_id),
    kind TEXT NOT NULL,
    label TEXT NOT NULL
);
CREATE TABLE products (
    product_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    category TEXT NOT NULL
);
CREATE TABLE variants (
    item_id TEXT PRIMARY KEY,
    product_id TEXT NOT NULL REFERENCES products(product_id),
    options TEXT NOT NULL,
    price REAL NOT NULL,
    stock INTEGER NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE orders (
    order_id TEXT PRIMARY KEY,
    customer_id TEXT NOT NULL REFERENCES customers(customer_id),
    status TEXT NOT NULL,
    address1 TEXT NOT NULL,
    city TEXT NOT NULL,
    state TEXT NOT NULL,
    zip TEXT NOT NULL,
    payment_id TEXT NOT NULL REFERENCES payment_methods(payment_id),
    placed_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    cancel_reason TEXT
);
CREATE TABLE order_items (
    order_id TEXT NOT NULL REFERENCES orders(order_id),
    line INTEGER NOT NULL,
    item_id TEXT NOT NULL REFERENCES variants(item_id),
    price REAL NOT NULL,
    status TEXT NOT NULL DEFAULT 'ordered',
    PRIMARY KEY (order_id, line)
);
CREATE TABLE shipments (
    order_id TEXT PRIMARY KEY REFERENCES orders(order_id),
    carrier TEXT NOT NULL,
    tracking TEXT NOT NULL,
    shipped_at TEXT NOT NULL,
    delivered_at TEXT
);
CREATE TABLE exchanges (
    exchange_id TEXT PRIMARY KEY,
    order_id TEXT NOT NULL REFERENCES orders(order_id),
    line INTEGER NOT NULL,
    old_item_id TEXT NOT NULL,
    new_item_id TEXT NOT NULL,
    price_difference REAL NOT NULL,
    created_tick INTEGER NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE refunds (
    refund_id TEXT PRIMARY KEY,
    order_id TEXT NOT NULL REFERENCES orders(order_id),
    payment_id TEXT NOT NULL REFERENCES payment_methods(payment_id),
    amount REAL NOT NULL,
    reason TEXT NOT NULL,
    line INTEGER,
    created_tick INTEGER NOT NULL,
    created_at TEXT NOT NULL
);
"""


def store_time(tick: int) -> str:
    """The store time after ``tick`` env actions (ISO, to the minute: ``2025-03-14T09:07``)."""
    return (OPENED + timedelta(minutes=int(tick))).strftime("%Y-%m-%dT%H:%M")


def tick_of(stamp: str) -> int | None:
    """The env action count a store time names (negative before the ticket), or None if
    ``stamp`` is not a store time."""
    try:
        when = datetime.strptime(str(stamp), "%Y-%m-%dT%H:%M")
    except ValueError:
        return None
    return int((when - OPENED).total_seconds() // 60)


def now(db: sqlite3.Connection) -> tuple[int, str]:
    """The store's clock: (env actions so far, store time)."""
    tick = int(db.execute("SELECT tick FROM clock").fetchone()[0])
    return tick, store_time(tick)


def set_clock(db: sqlite3.Connection, tick: int) -> None:
    db.execute("UPDATE clock SET tick = ?", (int(tick),))


def money(value: float) -> float:
    """An amount in dollars and cents."""
    return round(float(value) + 1e-9, 2)


# -- records as the tools show them ---------------------------------------------------------------
def _address(row: sqlite3.Row) -> dict[str, str]:
    return {"address1": row["address1"], "city": row["city"], "state": row["state"], "zip": row["zip"]}


def customer_record(db: sqlite3.Connection, customer_id: str) -> dict[str, Any] | None:
    """A customer's profile: contact, default address, payment methods, orders (id and status)."""
    row = db.execute("SELECT * FROM customers WHERE customer_id = ?", (customer_id,)).fetchone()
    if row is None:
        return None
    payments = [{"payment_id": p["payment_id"], "kind": p["kind"], "label": p["label"]}
                for p in db.execute("SELECT * FROM payment_methods WHERE customer_id = ? ORDER BY payment_id",
                                    (customer_id,))]
    orders = [{"order_id": o["order_id"], "status": o["status"]}
              for o in db.execute("SELECT order_id, status FROM orders WHERE customer_id = ? ORDER BY order_id",
                                  (customer_id,))]
    return {"customer_id": row["customer_id"], "name": row["name"], "email": row["email"],
            "address": _address(row), "payment_methods": payments, "orders": orders,
            "updated_at": row["updated_at"]}


def order_record(db: sqlite3.Connection, order_id: str) -> dict[str, Any] | None:
    """An order as ``get_order`` shows it (and every tool that changes an order answers it)."""
    row = db.execute("SELECT * FROM orders WHERE order_id = ?", (order_id,)).fetchone()
    if row is None:
        return None
    items = []
    for it in db.execute(
            "SELECT oi.line, oi.item_id, oi.price, oi.status, v.product_id, v.options, p.name "
            "FROM order_items oi JOIN variants v ON v.item_id = oi.item_id "
            "JOIN products p ON p.product_id = v.product_id WHERE oi.order_id = ? ORDER BY oi.line",
            (order_id,)):
        items.append({"item_id": it["item_id"], "product_id": it["product_id"], "name": it["name"],
                      "options": json.loads(it["options"]), "price": it["price"], "status": it["status"]})
    tick = now(db)[0]
    exchanges = [{"item_id": e["old_item_id"], "new_item_id": e["new_item_id"],
                  "price_difference": e["price_difference"],
                  "status": "approved" if tick - e["created_tick"] >= SETTLE_MINUTES else "requested",
                  "created_at": e["created_at"]}
                 for e in db.execute("SELECT * FROM exchanges WHERE order_id = ? ORDER BY exchange_id", (order_id,))]
    refunds = [{"refund_id": r["refund_id"], "amount": r["amount"], "payment_id": r["payment_id"],
                "reason": r["reason"],
                "status": "completed" if tick - r["created_tick"] >= SETTLE_MINUTES else "pending",
                "created_at": r["created_at"]}
               for r in db.execute("SELECT * FROM refunds WHERE order_id = ? ORDER BY refund_id", (order_id,))]
    ship = db.execute("SELECT * FROM shipments WHERE order_id = ?", (order_id,)).fetchone()
    shipment = None if ship is None else {
        "carrier": ship["carrier"], "tracking": ship["tracking"], "shipped_at": ship["shipped_at"],
        "delivered_at": ship["delivered_at"]}
    total = money(sum(i["price"] for i in items))
    return {"order_id": row["order_id"], "customer_id": row["customer_id"], "status": row["status"],
            "address": _address(row), "payment_id": row["payment_id"], "items": items, "total": total,
            "exchanges": exchanges, "refunds": refunds, "shipment": shipment, "placed_at": row["placed_at"],
            "updated_at": row["updated_at"]}


def product_record(db: sqlite3.Connection, product_id: str) -> dict[str, Any] | None:
    """A product with its variants: each one's options, price and stock, and when it last changed."""
    row = db.execute("SELECT * FROM products WHERE product_id = ?", (product_id,)).fetchone()
    if row is None:
        return None
    variants = [{"item_id": v["item_id"], "options": json.loads(v["options"]), "price": v["price"],
                 "stock": v["stock"], "updated_at": v["updated_at"]}
                for v in db.execute("SELECT * FROM variants WHERE product_id = ? ORDER BY item_id", (product_id,))]
    return {"product_id": row["product_id"], "name": row["name"], "category": row["category"],
            "variants": variants}


def options_text(options: dict[str, str]) -> str:
    """``color: blue, size: M``: how tickets and answers name a variant's options."""
    return ", ".join(f"{k}: {v}" for k, v in options.items())
