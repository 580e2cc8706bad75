"""The task's success check: the store's final state against the ticket and the store's policy.

A ticket is solved when every request is done as the policy says and nothing else of the
customer's was changed. Per request (``task.data["requests"]``, written by :mod:`.generate`):

- ``cancel``: the order is cancelled, for the reason the customer gave;
- ``address``: the order ships to the new address (the one the ticket gives, or the one the
  customer saved in their account during the ticket), exactly;
- ``exchange``: the item was exchanged once, for the variant the customer wanted if that one was
  in stock when the exchange was made, else for their second choice;
- ``return``: the item was returned once, refunded to the order's original payment method;
- ``adjust``: one refund of the price difference (price paid minus the sale price), to the
  original payment method.

And the policy over the whole ticket: no refund, exchange, return or cancellation that no
request accounts for (a second refund of the same amount is one too many), no address changed
that the ticket did not ask for. The backend refuses what an order's status or the stock forbids
(:mod:`.tools`), so a change made on a stale *value* is what this check alone catches. The answer
given to ``finish`` is the customer's reply; it is not judged. The check reads only rows the
episode's own changes made (their ``created_tick`` is the world clock when they were made, >= 0)
and the task's data, so world events after the agent's last change cannot change its verdict.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import Any

from cir.families.service_desk.store import CANCELLED, money

#: refund reasons the backend writes itself (every other reason is an agent's ``refund``)
AUTOMATIC_REASONS = ("cancellation", "return", "exchange price difference")


def stock_at(schedule: list[list[int]], tick: int) -> int:
    """The wanted variant's stock when the world clock read ``tick`` (events at or before it fired)."""
    stock = 0
    for at, value in schedule:
        if at <= tick:
            stock = value
    return stock


def request_done(db: sqlite3.Connection, r: Mapping[str, Any]) -> bool:
    """Whether one request is done as the policy says (see the module docstring)."""
    oid = r["order_id"]
    order = db.execute("SELECT * FROM orders WHERE order_id = ?", (oid,)).fetchone()
    if order is None:
        return False
    if r["kind"] == "cancel":
        return order["status"] == CANCELLED and order["cancel_reason"] == r["reason"]
    if r["kind"] == "address":
        a = r["address"]
        return (order["address1"], order["city"], order["state"], order["zip"]) == (
            a["address1"], a["city"], a["state"], a["zip"])
    if r["kind"] == "exchange":
        rows = db.execute("SELECT * FROM exchanges WHERE order_id = ? AND old_item_id = ? AND created_tick >= 0",
                          (oid, r["item_id"])).fetchall()
        if len(rows) != 1:
            return False
        made = rows[0]
        if made["new_item_id"] == r["wanted"]:
            return True
        return made["new_item_id"] == r["fallback"] and stock_at(r["wanted_stock"], made["created_tick"]) <= 0
    if r["kind"] == "return":
        rows = db.execute("SELECT r.payment_id FROM refunds r JOIN order_items oi ON oi.order_id = r.order_id "
                          "AND oi.line = r.line WHERE r.order_id = ? AND oi.item_id = ? AND r.reason = 'return' "
                          "AND r.created_tick >= 0", (oid, r["item_id"])).fetchall()
        return len(rows) == 1 and rows[0]["payment_id"] == r["payment_id"]
    if r["kind"] == "adjust":
        rows = _agent_refunds(db, oid)
        return (len(rows) == 1 and rows[0]["payment_id"] == r["payment_id"]
                and money(rows[0]["amount"]) == money(r["amount"]))
    return False


def _agent_refunds(db: sqlite3.Connection, order_id: str) -> list[sqlite3.Row]:
    marks = ", ".join("?" for _ in AUTOMATIC_REASONS)
    return db.execute(f"SELECT * FROM refunds WHERE order_id = ? AND created_tick >= 0 "  # noqa: S608
                      f"AND reason NOT IN ({marks})", (order_id, *AUTOMATIC_REASONS)).fetchall()


def nothing_else(db: sqlite3.Connection, data: Mapping[str, Any]) -> bool:
    """No change to the customer's orders that no request accounts for."""
    requests = data["requests"]
    by_kind: dict[str, set[str]] = {}
    for r in requests:
        by_kind.setdefault(r["kind"], set()).add(r["order_id"])
    for oid in data["orders"]:
        order = db.execute("SELECT * FROM orders WHERE order_id = ?", (oid,)).fetchone()
        if order["cancel_reason"] is not None and order["updated_at"] >= "2025-03-14T09:00" \
                and order["status"] == CANCELLED and oid not in by_kind.get("cancel", set()):
            return False
        a = data["addresses"][oid]
        if oid not in by_kind.get("address", set()) and (order["address1"], order["city"], order["state"],
                                                           order["zip"]) != tuple(a.values()):
            return False
        if _agent_refunds(db, oid) and oid not in by_kind.get("adjust", set()):
            return False
        returned = db.execute("SELECT COUNT(*) FROM refunds WHERE order_id = ? AND reason = 'return' "
                              "AND created_tick >= 0", (oid,)).fetchone()[0]
        if returned and oid not in by_kind.get("return", set()):
            return False
        exchanged = db.execute("SELECT COUNT(*) FROM exchanges WHERE order_id = ? AND created_tick >= 0",
                               (oid,)).fetchone()[0]
        if exchanged and oid not in by_kind.get("exchange", set()):
            return False
    for r in requests:  # within a request's order: only what it asked
        oid = r["order_id"]
        returned = db.execute("SELECT COUNT(*) FROM refunds WHERE order_id = ? AND reason = 'return' "
                              "AND created_tick >= 0", (oid,)).fetchone()[0]
        exchanged = db.execute("SELECT COUNT(*) FROM exchanges WHERE order_id = ? AND created_tick >= 0",
                               (oid,)).fetchone()[0]
        if returned > (r["kind"] == "return") or exchanged > (r["kind"] == "exchange"):
            return False
    return True


def solved(db: sqlite3.Connection, task: Any, answer: str) -> bool:
    """The task's check (the world's ``check``): every request done and nothing else changed."""
    data = task.data if hasattr(task, "data") else task
    return all(request_done(db, r) for r in data["requests"]) and nothing_else(db, data)
