"""Generating service-desk tasks by split and seed: a store, a ticket, the store's schedule.

One task is one customer's ticket at a busy store (:func:`generate_task`): a store database
(tens to hundreds of rows: customers, payment methods, products and variants, orders and their
items, shipments, earlier exchanges and refunds), the ticket's one to three requests
(:mod:`.tickets`), each about an order of that customer made to fit it, the *world events* the
store makes while the agent works, and the data the task's check reads (:mod:`.check`).

The world events are what make a stale read natural, so they are part of the world's design
(``docs/service-desk.md``, "A busy store"), keyed by the world clock (env actions so far, a
refresh's too): an order the customer wants cancelled or re-addressed moves on (pending ->
processing -> shipped) at a time drawn around when a careful agent would act on it
(:func:`careful_plan`: its deadline's *slack*, sometimes none); the variant a customer wants in
exchange sells out, is out of stock, or is restocked, around when such an agent reads it; a
sale starts on an item the customer asks a price adjustment for, and a customer who asks for
their new address saves it, shortly before; and, the store being busy, other customers buy
(stock of the ticket's products and others goes down) and other orders progress.

Deterministic: a task's randomness is a digest of the generator seed, the split and its index,
so the same settings give the same tasks (byte for byte) on any machine, with any number of
workers, and the first ``n`` tasks of a split do not depend on how many are asked for.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from cir.families.service_desk.catalog import (
    CARRIERS,
    CATALOGS,
    CITIES,
    FIRST_NAMES,
    LAST_NAMES,
    STREETS,
    Product,
)
from cir.families.service_desk.store import OPENED, SCHEMA, money, store_time
from cir.families.service_desk.tickets import KINDS, Address, Request, Ticket, ticket_text
from cir.util.errors import SettingError

SPLITS: tuple[str, ...] = ("train", "valid", "test")
#: events are scheduled up to this world clock (beyond the protocol's 64 env actions)
HORIZON = 80


@dataclass(frozen=True)
class StoreSettings:
    """The world's design: how tickets are made and how busy the store is (set on the
    calibration cohort, generator seed 1, and frozen; ``docs/service-desk.md``; the second
    calibration, with the perturbation point at a read, raised ``busy`` from 0.7 and ``popular``
    from 4).

    - ``requests``: weights of tickets with one, two and three requests;
    - ``kinds``: weights of the request kinds (:data:`.tickets.KINDS`);
    - ``slack``: weights of a deadline's slack (env actions between when a careful agent's change
      goes through and when the order moves on and refuses it); ``no_deadline``: the chance that
      the order does not move on within the episode;
    - ``stock``: weights of what happens to the variant an exchange wants (``in_stock``,
      ``sells_out`` around when it is read, ``unavailable``, ``restocked`` shortly before);
    - ``busy``: the chance per env action of a background change (another customer buys, an
      order of another customer progresses), ``popular`` how much likelier a sale is of a
      product the ticket is about;
    - ``customers``: how many customers the store has (lowest, highest).
    """

    requests: tuple[float, ...] = (0.3, 0.45, 0.25)
    kinds: tuple[float, ...] = (0.22, 0.2, 0.22, 0.16, 0.2)
    slack: tuple[float, ...] = (0.18, 0.16, 0.14, 0.12, 0.1, 0.1, 0.1, 0.1)
    no_deadline: float = 0.35
    stock: tuple[float, ...] = (0.35, 0.15, 0.2, 0.3)
    busy: float = 0.9
    popular: float = 10.0
    customers: tuple[int, int] = (8, 12)

    def __post_init__(self) -> None:
        for name, n in (("requests", 3), ("kinds", len(KINDS)), ("stock", 4)):
            weights = getattr(self, name)
            if len(weights) != n or any(w < 0 for w in weights) or sum(weights) <= 0:
                raise SettingError(name, weights, f"{n} weights >= 0, not all 0")
        if not self.slack or any(w < 0 for w in self.slack) or sum(self.slack) <= 0:
            raise SettingError("slack", self.slack, "weights >= 0 of slack 0, 1, 2, ...")
        for name in ("no_deadline", "busy"):
            if not 0 <= getattr(self, name) <= 1:
                raise SettingError(name, getattr(self, name), "a chance from 0 to 1")
        lo, hi = self.customers
        if not 2 <= lo <= hi:
            raise SettingError("customers", self.customers, "(lowest, highest) with 2 <= lowest <= highest")


STOCK_SCENARIOS = ("in_stock", "sells_out", "unavailable", "restocked")


@dataclass
class DraftTask:
    """A generated task before it is written: its text, its database as SQL, its events, the
    check's data (a plain mapping: what ``task.json`` holds)."""

    task_id: str
    split: str
    task_type: str
    instruction: str
    sql: str
    events: list[dict[str, Any]] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)


def task_rng(split: str, seed: int, index: int) -> random.Random:
    digest = hashlib.sha256(f"service-desk\x1f{split}\x1f{seed}\x1f{index}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def careful_plan(ticket: Ticket) -> list[tuple[int, str, str]]:
    """The calls a careful agent makes for ``ticket``, as ``(env action number, request index or
    -1, step)``: it finds the customer, then per request reads the order (and the customer's
    profile, or the product, when the request needs them), makes the change, and reads the order
    again to see it applied; then ``finish``. The store's schedule is drawn around it."""
    plan = [(1, -1, "find")]
    for i, r in enumerate(ticket.requests):
        steps = (["profile"] if r.kind == "address" and r.from_profile else []) + ["order"]
        steps += ["product"] if r.kind in ("exchange", "adjust") else []
        steps += ["write", "verify"]
        plan += [(len(plan) + 1 + j, i, s) for j, s in enumerate(steps)]
    return [*plan, (len(plan) + 1, -1, "finish")]


def _when(plan: list[tuple[int, str, str]], index: int, step: str) -> int:
    return next(n for n, i, s in plan if i == index and s == step)


class _Store:
    """The rows of one store as it is generated, and its ids."""

    def __init__(self, rng: random.Random, split: str) -> None:
        self.rng, self.split = rng, split
        self.rows: dict[str, list[tuple[Any, ...]]] = {t: [] for t in (
            "customers", "payment_methods", "products", "variants", "orders", "order_items", "shipments",
            "exchanges", "refunds")}
        self.used: set[str] = set()
        self.variants: dict[str, dict[str, Any]] = {}  # item_id -> product, options, price, stock
        self.by_product: dict[str, list[str]] = {}
        self.products: dict[str, Product] = {}
        self.refund_n = 0
        self.exchange_n = 0

    def new_id(self, prefix: str, lo: int, hi: int) -> str:
        while True:
            candidate = f"{prefix}{self.rng.randint(lo, hi)}"
            if candidate not in self.used:
                self.used.add(candidate)
                return candidate

    def past(self, days_lo: int = 2, days_hi: int = 60) -> str:
        minutes = self.rng.randint(days_lo * 1440, days_hi * 1440)
        return store_time(-minutes)

    def address(self) -> Address:
        city, state, prefix = self.rng.choice(CITIES)
        return Address(f"{self.rng.randint(2, 980)} {self.rng.choice(STREETS)}", city, state,
                       f"{prefix}{self.rng.randint(10, 99)}")


def _catalog(store: _Store) -> None:
    for product in CATALOGS[store.split]:
        pid = store.new_id("P", 100, 999)
        store.products[pid] = product
        store.rows["products"].append((pid, product.name, product.category))
        (k1, v1), (k2, v2) = product.dims
        combos = [((k1, a), (k2, b)) for a in v1 for b in v2]
        keep = [c for c in combos if store.rng.random() > 0.2] or combos
        if len(keep) < 4:
            keep = combos
        store.by_product[pid] = []
        for j, combo in enumerate(keep):
            iid = store.new_id("I", 1000, 9999)
            price = money(product.price * (1 + 0.04 * (j % 3)) - 0.01)
            stock = store.rng.choice((0, 2, 3, 4, 5, 6, 8, 10, 12))
            store.variants[iid] = {"product_id": pid, "options": combo, "price": price, "stock": stock}
            store.by_product[pid].append(iid)


def _customer(store: _Store, name: str | None = None) -> tuple[str, list[tuple[str, str]], Address]:
    rng = store.rng
    cid = store.new_id("C", 1000, 9999)
    if name is None:
        name = f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"
    email = name.lower().replace(" ", ".") + f"{rng.randint(1, 99)}@example.com"
    while email in store.used:
        email = name.lower().replace(" ", ".") + f"{rng.randint(100, 999)}@example.com"
    store.used.add(email)
    home = store.address()
    store.rows["customers"].append((cid, name, email, home.address1, home.city, home.state, home.zip, store.past(30, 400)))
    kinds = ["credit_card"] + rng.sample(["paypal", "gift_card", "credit_card"], rng.randint(0, 2))
    payments = []
    for kind in kinds:
        pid = f"{kind}_{rng.randint(1000, 9999)}"
        while pid in store.used:
            pid = f"{kind}_{rng.randint(1000, 9999)}"
        store.used.add(pid)
        label = {"credit_card": f"Visa ending {rng.randint(1000, 9999)}", "paypal": name.lower().replace(' ', '.'),
                 "gift_card": f"gift card, balance {rng.randint(5, 120)}.00"}[kind]
        store.rows["payment_methods"].append((pid, cid, kind, label))
        payments.append((pid, kind))
    return cid, payments, home


def _order(store: _Store, cid: str, payment: str, home: Address, status: str, items: Sequence[str]) -> str:
    rng = store.rng
    oid = store.new_id("W", 1000, 9999)
    placed = store.past(1, 3) if status in ("pending", "processing") else store.past(4, 60)
    store.rows["orders"].append((oid, cid, status, home.address1, home.city, home.state, home.zip, payment, placed,
                                 placed, None if status != "cancelled" else "no longer needed"))
    for line, iid in enumerate(items, 1):
        store.rows["order_items"].append((oid, line, iid, store.variants[iid]["price"], "ordered"))
    if status in ("shipped", "delivered"):
        store.rows["shipments"].append((oid, rng.choice(CARRIERS), f"1Z{rng.randint(10**9, 10**10 - 1)}",
                                        placed, placed if status == "delivered" else None))
    return oid


def _random_items(store: _Store, n: int, avoid: set[str] = frozenset()) -> list[str]:  # type: ignore[assignment]
    pool = [i for i in store.variants if i not in avoid]
    return store.rng.sample(pool, min(n, len(pool)))


def _sql(store: _Store) -> str:
    out = [SCHEMA.strip(), "INSERT INTO clock VALUES (0);"]
    for table in ("customers", "payment_methods", "products", "orders", "shipments", "exchanges", "refunds"):
        for row in store.rows[table]:
            out.append(f"INSERT INTO {table} VALUES ({', '.join(_lit(v) for v in row)});")
    for iid, v in sorted(store.variants.items()):
        opts = json.dumps(dict(v["options"]), ensure_ascii=False)
        out.append(f"INSERT INTO variants VALUES ({_lit(iid)}, {_lit(v['product_id'])}, {_lit(opts)}, "
                   f"{_lit(v['price'])}, {int(v['stock'])}, {_lit(store.past(1, 30))});")
    for row in store.rows["order_items"]:
        out.append(f"INSERT INTO order_items VALUES ({', '.join(_lit(v) for v in row)});")
    return "\n".join(out) + "\n"


def _lit(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int | float):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def _event(at: int, sql: str, note: str) -> dict[str, Any]:
    return {"at": int(at), "sql": sql, "note": note}


def _status_event(at: int, oid: str, old: str, new: str, store: _Store) -> dict[str, Any]:
    stamp = store_time(at)
    sql = f"UPDATE orders SET status = '{new}', updated_at = '{stamp}' WHERE order_id = '{oid}' AND status = '{old}';"
    if new == "shipped":
        sql += (f" INSERT OR IGNORE INTO shipments (order_id, carrier, tracking, shipped_at) SELECT '{oid}', "
                f"'{store.rng.choice(CARRIERS)}', '1Z{store.rng.randint(10**9, 10**10 - 1)}', '{stamp}' "
                f"FROM orders WHERE order_id = '{oid}' AND status = 'shipped';")
    if new == "delivered":
        sql += (f" UPDATE shipments SET delivered_at = '{stamp}' WHERE order_id = '{oid}' AND EXISTS "
                f"(SELECT 1 FROM orders WHERE order_id = '{oid}' AND status = 'delivered');")
    return _event(at, sql, f"order {oid} {old} -> {new}")


def _stock_event(at: int, iid: str, delta: int, note: str) -> dict[str, Any]:
    stamp = store_time(at)
    guard = " AND stock > 0" if delta < 0 else ""
    return _event(at, f"UPDATE variants SET stock = stock + ({delta}), updated_at = '{stamp}' "
                      f"WHERE item_id = '{iid}'{guard};", note)


def _pick(rng: random.Random, weights: Sequence[float]) -> int:
    return rng.choices(range(len(weights)), weights=weights)[0]


def generate_task(split: str, seed: int, index: int, settings: StoreSettings | None = None) -> DraftTask:
    """The task ``index`` of ``split`` at generator ``seed`` (see the module docstring)."""
    if split not in SPLITS:
        raise SettingError("split", split, f"one of {', '.join(SPLITS)}")
    s = settings or StoreSettings()
    rng = task_rng(split, seed, index)
    store = _Store(rng, split)
    _catalog(store)
    others = [_customer(store) for _ in range(rng.randint(*s.customers) - 1)]
    cid, payments, home = _customer(store)
    name, email = store.rows["customers"][-1][1], store.rows["customers"][-1][2]
    original = payments[0][0]

    n_requests = 1 + _pick(rng, s.requests)
    kinds = [KINDS[_pick(rng, s.kinds)] for _ in range(n_requests)]
    requests: list[Request] = []
    data_requests: list[dict[str, Any]] = []
    reserved: set[str] = set()  # variants a request's check depends on
    targets: set[str] = set()  # variants in the ticket's orders
    ticket_products: set[str] = set()
    plans: list[dict[str, Any]] = []
    for kind in kinds:
        phrasing = rng.randint(0, 1)
        if kind in ("cancel", "address"):
            items = _random_items(store, rng.randint(1, 3), reserved | {i for p in ticket_products
                                                                         for i in store.by_product[p]})
            oid = _order(store, cid, original, home, "pending", items)
            if kind == "cancel":
                reason = rng.choice(("ordered by mistake", "no longer needed"))
                requests.append(Request("cancel", oid, reason=reason, phrasing=phrasing))
                data_requests.append({"kind": "cancel", "order_id": oid, "reason": reason})
            else:
                # one new address a customer has saved: at most one request ships to it
                from_profile = rng.random() < 0.45 and not any(p.get("from_profile") for p in plans)
                new = store.address()
                requests.append(Request("address", oid, address=None if from_profile else new,
                                        from_profile=from_profile, phrasing=phrasing))
                data_requests.append({"kind": "address", "order_id": oid, "address": new.as_dict(),
                                      "from_profile": from_profile})
            targets.update(items)
            plans.append({"kind": kind, "order_id": oid, "address": new if kind == "address" else None,
                          "from_profile": kind == "address" and from_profile})
            continue
        # the item the request is about: a product with at least three variants
        pid = rng.choice(sorted(p for p, ids in store.by_product.items() if len(ids) >= 3
                                and not set(ids) & (reserved | targets) and p not in ticket_products))
        ticket_products.add(pid)
        ids = store.by_product[pid]
        item = rng.choice(ids)
        extra = [i for i in ids if i != item]
        twin = rng.choice(extra) if rng.random() < 0.3 else None  # a second variant of it in the order
        others_items = _random_items(store, rng.randint(0, 1), set(ids) | reserved)
        targets.update([item, *([twin] if twin else []), *others_items])
        line_items = [item, *([twin] if twin else []), *others_items]
        rng.shuffle(line_items)
        oid = _order(store, cid, original, home, "delivered", line_items)
        product = store.products[pid]
        options = store.variants[item]["options"]
        plan: dict[str, Any] = {"kind": kind, "order_id": oid, "item_id": item, "product_id": pid}
        if kind == "exchange":
            choices = [i for i in extra if i != twin]
            wanted, fallback = rng.sample(choices if len(choices) >= 2 else extra, 2)
            scenario = STOCK_SCENARIOS[_pick(rng, s.stock)]
            store.variants[fallback]["stock"] = rng.randint(3, 8)
            store.variants[wanted]["stock"] = {"in_stock": rng.randint(3, 8), "sells_out": rng.randint(1, 2),
                                               "unavailable": 0, "restocked": 0}[scenario]
            reserved |= {wanted, fallback}
            requests.append(Request("exchange", oid, product=product.name, options=options,
                                    wanted=store.variants[wanted]["options"],
                                    fallback=store.variants[fallback]["options"], phrasing=phrasing))
            data_requests.append({"kind": "exchange", "order_id": oid, "item_id": item, "wanted": wanted,
                                  "fallback": fallback, "scenario": scenario})
            plan.update(wanted=wanted, fallback=fallback, scenario=scenario)
        elif kind == "return":
            other_kinds = sorted({k for _, k in payments[1:]} - {"credit_card"})
            ask = rng.choice(other_kinds) if other_kinds and rng.random() < 0.35 else ""
            requests.append(Request("return", oid, product=product.name, options=options, payment_kind=ask,
                                    phrasing=phrasing))
            data_requests.append({"kind": "return", "order_id": oid, "item_id": item, "payment_id": original})
        else:  # adjust
            paid = store.variants[item]["price"]
            sale = money(paid * rng.choice((0.7, 0.75, 0.8, 0.85, 0.9)))
            reserved.add(item)
            requests.append(Request("adjust", oid, product=product.name, options=options, phrasing=phrasing))
            data_requests.append({"kind": "adjust", "order_id": oid, "item_id": item, "payment_id": original,
                                  "amount": money(paid - sale), "sale_price": sale})
            plan.update(sale=sale)
        plans.append(plan)
    # the customer's other orders, and the other customers'
    for _ in range(rng.randint(1, 2)):
        _order(store, cid, original, home, rng.choice(("delivered", "delivered", "shipped", "cancelled")),
               _random_items(store, rng.randint(1, 2), reserved))
    background_orders: list[tuple[str, str]] = []
    for ocid, opays, ohome in others:
        for _ in range(rng.randint(1, 4)):
            status = rng.choice(("pending", "processing", "shipped", "delivered", "delivered", "cancelled"))
            oid = _order(store, ocid, opays[0][0], ohome, status, _random_items(store, rng.randint(1, 3), reserved))
            if status in ("pending", "processing", "shipped"):
                background_orders.append((oid, status))
    # past refunds and exchanges of delivered orders (before the ticket)
    for row in list(store.rows["orders"]):
        if row[2] == "delivered" and row[1] != cid and rng.random() < 0.2:
            store.refund_n += 1
            store.rows["refunds"].append((f"RX{store.refund_n:03d}", row[0], row[7], money(rng.choice((5, 10, 15))),
                                          "goodwill credit", None, -rng.randint(1440, 20000), store.past(2, 30)))

    ticket = Ticket(f"T-{split}-{seed}-{index:04d}", name, email, store_time(0), tuple(requests))
    plan_steps = careful_plan(ticket)
    events = _schedule(store, s, plans, plan_steps, background_orders, cid, ticket_products, reserved)
    data = {"customer_id": cid, "requests": data_requests,
            "addresses": {r[0]: {"address1": r[3], "city": r[4], "state": r[5], "zip": r[6]}
                          for r in store.rows["orders"] if r[1] == cid},
            "orders": sorted(r[0] for r in store.rows["orders"] if r[1] == cid),
            "careful_plan_length": len(plan_steps)}
    _stock_schedules(store, data, events)
    return DraftTask(task_id=f"{split}-{index:04d}", split=split, task_type="+".join(kinds),
                     instruction=ticket_text(ticket), sql=_sql(store), events=events, data=data)


def _deadline(rng: random.Random, s: StoreSettings, write_at: int) -> int | None:
    if rng.random() < s.no_deadline:
        return None
    return write_at + _pick(rng, s.slack)


def _schedule(store: _Store, s: StoreSettings, plans: list[dict[str, Any]], steps: list[tuple[int, int, str]],
              background: list[tuple[str, str]], cid: str, ticket_products: set[str],
              reserved: set[str]) -> list[dict[str, Any]]:
    """The store's events: the requests' own (deadlines, stock, a sale, a saved address) and the
    busy store's (other customers buying, other orders progressing)."""
    rng = store.rng
    events: list[dict[str, Any]] = []
    for i, plan in enumerate(plans):
        oid, kind = plan["order_id"], plan["kind"]
        if kind == "cancel":
            at = _deadline(rng, s, _when(steps, i, "write"))
            if at is not None:
                events.append(_status_event(at, oid, "pending", "processing", store))
                events.append(_status_event(at + rng.randint(4, 12), oid, "processing", "shipped", store))
        elif kind == "address":
            at = _deadline(rng, s, _when(steps, i, "write"))
            if at is not None:
                start = max(1, at - rng.randint(2, 8))
                events.append(_status_event(start, oid, "pending", "processing", store))
                events.append(_status_event(at, oid, "processing", "shipped", store))
            if plan["from_profile"]:
                read = _when(steps, i, "profile")
                at = rng.randint(max(1, read - 3), max(1, read - 1))
                a = plan["address"]
                events.append(_event(at, f"UPDATE customers SET address1 = {_lit(a.address1)}, city = {_lit(a.city)}, "
                                         f"state = {_lit(a.state)}, zip = {_lit(a.zip)}, updated_at = "
                                         f"'{store_time(at)}' WHERE customer_id = '{cid}';",
                                     "the customer saves a new address"))
        elif kind == "exchange":
            read = _when(steps, i, "product")
            wanted, scenario = plan["wanted"], plan["scenario"]
            if scenario == "sells_out":
                left = store.variants[wanted]["stock"]
                last = rng.randint(max(1, read - 2), read + 1)
                for k in range(left):
                    at = max(1, last - (left - 1 - k) * rng.randint(1, 3))
                    events.append(_stock_event(at, wanted, -1, "another customer buys the wanted variant"))
            elif scenario == "restocked":
                at = rng.randint(max(1, read - 3), max(1, read - 1))
                events.append(_stock_event(at, wanted, rng.randint(2, 6), "the wanted variant is restocked"))
        elif kind == "adjust":
            read = _when(steps, i, "product")
            at = rng.randint(max(1, read - 3), max(1, read - 1))
            events.append(_event(at, f"UPDATE variants SET price = {plan['sale']!r}, updated_at = '{store_time(at)}' "
                                     f"WHERE item_id = '{plan['item_id']}';", "a sale starts on the item"))
    # a busy store: other customers buy, other orders progress
    progress = {oid: status for oid, status in background}
    sellable = sorted(i for i in store.variants if i not in reserved)
    weights = [s.popular if store.variants[i]["product_id"] in ticket_products else 1.0 for i in sellable]
    for at in range(1, HORIZON + 1):
        if rng.random() >= s.busy:
            continue
        if progress and rng.random() < 0.3:
            oid = rng.choice(sorted(progress))
            old = progress[oid]
            new = {"pending": "processing", "processing": "shipped", "shipped": "delivered"}[old]
            events.append(_status_event(at, oid, old, new, store))
            if new == "delivered":
                del progress[oid]
            else:
                progress[oid] = new
        elif sellable:
            iid = rng.choices(sellable, weights=weights)[0]
            events.append(_stock_event(at, iid, -1, "another customer buys"))
    return sorted(events, key=lambda e: e["at"])


def _stock_schedules(store: _Store, data: dict[str, Any], events: list[dict[str, Any]]) -> None:
    """For each exchange: the wanted variant's stock after each event that changes it (the check
    reads whether it was in stock when the exchange was made)."""
    for r in data["requests"]:
        if r["kind"] != "exchange":
            continue
        stock = store.variants[r["wanted"]]["stock"]
        schedule = [[0, stock]]
        for e in events:
            if f"WHERE item_id = '{r['wanted']}'" in e["sql"] and "stock" in e["sql"]:
                delta = int(e["sql"].split("stock + (")[1].split(")")[0])
                stock = max(0, stock + delta)
                schedule.append([e["at"], stock])
        r["wanted_stock"] = schedule


def settings_dict(settings: StoreSettings) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(settings).items()}


__all__ = ["SPLITS", "HORIZON", "OPENED", "StoreSettings", "DraftTask", "careful_plan", "generate_task"]
