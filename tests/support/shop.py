"""A tiny typed-tool world for the tests: a shop's orders in SQLite, three tools, orders that
ship while the agent works, and a model-free agent of a few lines that believes what it is shown.

Each task lists three orders to cancel before they ship (``list_orders``, ``get_order``,
``cancel_order``; a refresh after ``cancel_order(order_id=X)`` re-reads ``get_order(order_id=X)``).
World events ship an order at a fixed env action (``UPDATE ... WHERE status = 'pending'``), some
just after the agent's cancel would come (no slack), some later, some never. The agent gets each
order, cancels it when the result it is shown says ``pending``, and moves on. Its mechanisms:

- ``stale_status`` (error): it took the status of a result that names another order (a stale
  result) as the current order's, and so skipped a pending order;
- ``no_status`` (error): the result it was shown says no status (missing): it moves on;
- ``retry_cancel`` (error): a cancel's result did not say ``cancelled``: it cancels again;
- ``refresh_correction`` (rescue): a refreshed result shows a pending order it did not cancel:
  it cancels it now;
- ``shipped_first`` (harm): an order it reaches has shipped (the world moved while it, or a
  refresh, spent an env action): it cannot cancel it.

So a stale or missing result at a ``get_order`` hides a pending order (a refresh rescues it),
and a refresh after a clean result costs one env action, which an order with no slack does not
have (a harm). ``FORGETS_TABLE`` and ``FORGETS_ROW`` are the same family whose database restore
forgets the notes table, or the last order's row: ``cir check-env`` and ``cir run`` must catch both.
"""

from __future__ import annotations

import json
import random
import re
import sqlite3
from typing import Any

from cir import Family
from cir.agents.modelfree import Fired
from cir.episode.protocol import REFRESH_PREFIX
from cir.tools import ToolError, ToolTask, ToolWorld, parse_call, tool
from cir.tools.env import Event
from cir.tools.state import SqliteState

SCHEMA = """
CREATE TABLE orders (id TEXT PRIMARY KEY, customer TEXT NOT NULL, item TEXT NOT NULL, status TEXT NOT NULL);
CREATE TABLE notes (id INTEGER PRIMARY KEY AUTOINCREMENT, order_id TEXT NOT NULL, text TEXT NOT NULL);
"""
_IDS = re.compile(r"\bW\d{4}\b")


@tool(read_only=True)
def list_orders(db: sqlite3.Connection) -> list:
    """List every order with its status."""
    return [dict(r) for r in db.execute("SELECT id AS order_id, status FROM orders ORDER BY id")]


@tool(read_only=True)
def get_order(db: sqlite3.Connection, order_id: str) -> dict:
    """Look up one order by its id.

    Args:
        order_id: the order's id, like "W0012".
    """
    row = db.execute("SELECT id AS order_id, customer, item, status FROM orders WHERE id = ?", (order_id,)).fetchone()
    if row is None:
        raise ToolError(f"no order {order_id}")
    return dict(row)


@tool(read_only=False)
def cancel_order(db: sqlite3.Connection, order_id: str, reason: str = "customer request") -> dict:
    """Cancel a pending order.

    Args:
        order_id: the order's id.
        reason: why it is cancelled.
    """
    row = db.execute("SELECT status FROM orders WHERE id = ?", (order_id,)).fetchone()
    if row is None:
        raise ToolError(f"no order {order_id}")
    if row["status"] != "pending":
        raise ToolError(f"order {order_id} is {row['status']}; only a pending order can be cancelled")
    db.execute("UPDATE orders SET status = 'cancelled' WHERE id = ?", (order_id,))
    db.execute("INSERT INTO notes (order_id, text) VALUES (?, ?)", (order_id, f"cancelled: {reason}"))
    return {"order_id": order_id, "status": "cancelled"}


def solved(db: sqlite3.Connection, task: ToolTask, answer: str) -> bool:
    """Every order of the task is cancelled."""
    wanted = task.data["orders"]
    rows = db.execute(f"SELECT status FROM orders WHERE id IN ({','.join('?' * len(wanted))})", wanted).fetchall()
    return len(rows) == len(wanted) and all(r["status"] == "cancelled" for r in rows)


def refresh_of(call: Any) -> Any:
    """After a cancel, re-read the order."""
    return f'get_order(order_id="{call.arguments["order_id"]}")' if call.name == "cancel_order" else None


# -- tasks -------------------------------------------------------------------------------------------------
SPLIT_CODES = {"train": 1, "valid": 2, "test": 3}


def generate(split: str, n: int, seed: int) -> list[ToolTask]:
    """``n`` tasks: three orders to cancel (and two others), each shipping at an env action set by
    the clean agent's timeline plus a slack (none: never ships; 0: just after its cancel)."""
    tasks = []
    for i in range(n):
        rng = random.Random(f"shop:{split}:{seed}:{i}")
        code = SPLIT_CODES[split] * 1000 + i * 5
        ids = [f"W{(code + j) % 10000:04d}" for j in range(5)]
        wanted = ids[:3]
        shipped = [rng.random() < 0.05 for _ in ids]
        rows = "".join(f"INSERT INTO orders VALUES ('{o}', 'C{rng.randrange(100):02d}', "
                       f"'{rng.choice(['lamp', 'mug', 'shirt', 'desk'])}', "
                       f"'{'shipped' if s else 'pending'}');\n" for o, s in zip(ids, shipped, strict=True))
        events, t = [], 0
        for j, order in enumerate(wanted):
            t += 1  # get_order
            if shipped[j]:
                continue
            t += 1  # cancel_order
            slack = rng.choices([None, 0, 1, 2, -1], weights=[35, 35, 15, 10, 5])[0]
            if slack is not None:
                events.append(Event(t + slack, f"UPDATE orders SET status = 'shipped' WHERE id = '{order}' "
                                               "AND status = 'pending';", f"{order} ships"))
        events.append(Event(2, f"UPDATE orders SET status = 'shipped' WHERE id = '{ids[4]}' AND status = 'pending';",
                            "another order ships"))
        text = (f"Cancel orders {wanted[0]}, {wanted[1]} and {wanted[2]}: all three must be cancelled before they "
                "ship. Then finish.")
        tasks.append(ToolTask(f"shop-{split}-{i:03d}", text, SCHEMA + rows, split, "cancel", tuple(events),
                              {"orders": wanted}))
    return tasks


# -- the agent ---------------------------------------------------------------------------------------------
class ShopAgent:
    """Cancels the listed orders one after another, believing what it is shown (module docstring)."""

    name = "shop-agent"

    def params(self) -> dict[str, Any]:
        return {"agent": self.name, "version": 1}

    def act(self, context: list[dict[str, str]]) -> str:
        return self.act_traced(context)[0]

    def act_traced(self, context: list[dict[str, str]]) -> tuple[str, tuple[Fired, ...], tuple[Fired, ...]]:
        orders = list(dict.fromkeys(_IDS.findall(context[0]["content"])))
        visited: list[str] = []
        cancelled: set[str] = set()
        last: tuple[str, str] | None = None  # (tool, order) of the agent's last call
        attempts: dict[str, int] = {}
        read: list[Fired] = []
        shown: Any = None
        refreshed: Any = None
        for i, m in enumerate(context[1:], start=1):
            final = i == len(context) - 1
            if m["role"] == "assistant":
                call = _call(m["content"])
                last = call
                if call and call[0] == "get_order" and call[1] not in visited:
                    visited.append(call[1])
                if call and call[0] == "cancel_order":
                    attempts[call[1]] = attempts.get(call[1], 0) + 1
                continue
            if m["content"].startswith(REFRESH_PREFIX):
                refreshed = _json(m["content"][len(REFRESH_PREFIX):])
                if final:
                    shown = None
                continue
            shown = _json(m["content"])
            if last and last[0] == "cancel_order" and isinstance(shown, dict) and shown.get("status") == "cancelled":
                cancelled.add(last[1])
        if len(context) == 1:
            return _get(orders[0]), (), ()
        # a refreshed result that shows a pending order it did not cancel: cancel it now
        if context[-1]["content"].startswith(REFRESH_PREFIX) and isinstance(refreshed, dict):
            order = refreshed.get("order_id")
            if refreshed.get("status") == "pending" and order in orders and order not in cancelled:
                return _cancel(order), (Fired("refresh_correction", order),), ()
            return _next(orders, visited), (), ()
        if last and last[0] == "get_order":
            order = last[1]
            status = shown.get("status") if isinstance(shown, dict) else None
            if status is None:
                return _next(orders, visited), (Fired("no_status", order),), ()
            if shown.get("order_id") != order:
                read.append(Fired("stale_status", order))
            if status == "shipped":
                read.append(Fired("shipped_first", order))
            if status == "pending":
                return _cancel(order), tuple(read), ()
            return _next(orders, visited), tuple(read), ()
        if last and last[0] == "cancel_order":
            order = last[1]
            says = shown.get("status") if isinstance(shown, dict) else None
            if isinstance(shown, dict) and "shipped" in str(shown.get("error", "")):
                read.append(Fired("shipped_first", order))
            if says == "pending" and attempts.get(order, 0) < 2:
                return _cancel(order), (Fired("retry_cancel", order),), ()
            return _next(orders, visited), tuple(read), ()
        return _next(orders, visited), (), ()


def _call(text: str) -> tuple[str, str] | None:
    try:
        call = parse_call(text.splitlines()[0] if text else "")
    except Exception:
        return None
    return call.name, str(call.arguments.get("order_id", ""))


def _json(text: str) -> Any:
    try:
        return json.loads(text.strip())
    except ValueError:
        return None


def _get(order: str) -> str:
    return f'get_order(order_id="{order}")'


def _cancel(order: str) -> str:
    return f'cancel_order(order_id="{order}", reason="customer request")'


def _next(orders: list[str], visited: list[str]) -> str:
    todo = [o for o in orders if o not in visited]
    return _get(todo[0]) if todo else 'finish(answer="")'


def shop_agent(profile: str = "default", *, seed: int = 0) -> ShopAgent:
    return ShopAgent()


MECHANISMS = ("stale_status", "no_status", "retry_cancel", "refresh_correction", "shipped_first")


def world(name: str = "shop", state: Any = "sqlite") -> ToolWorld:
    return ToolWorld(name, tools=[list_orders, get_order, cancel_order], state=state, check=solved,
                     refresh=refresh_of, generate=generate, builtin_agent=shop_agent,
                     mechanisms=("refresh_correction", "shipped_first"), splits=("train", "valid", "test"),
                     instructions="You are a shop's support agent.",
                     examples=('Cancel order W0001 before it ships. Then finish.\n> get_order(order_id="W0001")\n'
                               '{"order_id": "W0001", "customer": "C01", "item": "mug", "status": "pending"}\n'
                               '> cancel_order(order_id="W0001", reason="customer request")\n'
                               '{"order_id": "W0001", "status": "cancelled"}\n> finish(answer="")\n'
                               '{"finished": true}',))


WORLD = world()
FAMILY = Family(**WORLD.parts())


# -- restores that forget (the bugs check-env and the replayer must catch) ------------------------------------
class ForgetsNotes(SqliteState):
    """A database restore that forgets the notes table: it keeps the notes of now."""

    def _put(self, snapshot: Any) -> None:
        notes = self.conn.execute("SELECT id, order_id, text FROM notes").fetchall()
        super()._put(snapshot)
        self.conn.execute("DELETE FROM notes")
        self.conn.executemany("INSERT INTO notes VALUES (?, ?, ?)", [tuple(r) for r in notes])


class ForgetsRow(SqliteState):
    """A database restore that forgets one row: the last listed order keeps its status of now."""

    def _put(self, snapshot: Any) -> None:
        row = self.conn.execute("SELECT rowid, status FROM orders ORDER BY id DESC LIMIT 1").fetchone()
        super()._put(snapshot)
        if row is not None:
            self.conn.execute("UPDATE orders SET status = ? WHERE rowid = ?", (row["status"], row["rowid"]))


FORGETS_TABLE = Family(**world("shop-forgets-table", ForgetsNotes).parts())
FORGETS_ROW = Family(**world("shop-forgets-row", ForgetsRow).parts())
