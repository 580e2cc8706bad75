"""What the service-desk agent believes after each message it was shown, and the mechanisms
reading fires.

:func:`fold` reads one message into a copy of the beliefs. The agent believes what it is shown:
a record answering its call is the record (an order's status, a variant's stock, a price, the
customer's saved address), however old it is; it cannot tell a stale record that answers its
call from a fresh one. What it can see it reacts to through named mechanisms
(:mod:`.mechanisms`): a result that did not arrive (``reread_missing`` / ``assume_missing``;
after a change, ``retry_missing``), a result that answers another call (``reread_mismatch`` /
``misread_other``), a read right after its own change that does not show it
(``lost_write`` / ``poll_write``), a refusal from the store (believed: the order's status or the
stock it names), a change the store made on its own schedule (``world_clock``). A harness
message may rescue it (``refresh_correction``, ``harness_recheck``) or harm it
(``over_correct``, ``interruption``, ``distraction``). Every chance is a content-keyed draw.

The ticket is read once, from the task text (:func:`.tickets.parse_ticket`); each request is a
:class:`Job` whose stage says what the agent does next for it: read the customer's profile (an
address from the account), read the order, read the product (an exchange, a price adjustment),
make the change, read the order again to see the change (``verify``, a habit), done.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from cir.agents.modelfree import Draws, Fired
from cir.episode.perturb import MISSING_TEXT
from cir.episode.protocol import ABLATED_TEXT, REFRESH_PREFIX, REWIND_HEADER
from cir.families.service_desk.calls import (
    ANSWERS,
    TOOL_MAP,
    answers,
    call_of,
    record_kind,
    reflects,
    render,
)
from cir.families.service_desk.store import STATUSES, money, tick_of
from cir.families.service_desk.tickets import Request, Ticket, parse_ticket
from cir.families.service_desk.tools import ORDER_WRITES
from cir.tools.calls import ToolCall, render_call

#: stages of a job, in order (``done`` ends it)
STAGES = ("profile", "order", "product", "write", "verify", "done")
#: what a request's kind writes
WRITE_TOOL = {"cancel": "cancel_order", "address": "change_address", "exchange": "exchange_item",
              "return": "return_item", "adjust": "refund"}
ADJUST_REASON = "price adjustment"


@dataclass(frozen=True)
class Job:
    """One request and how far the agent believes it is (see the module docstring)."""

    request: Request
    stage: str
    note: str = ""
    item: str | None = None  # the order's item it acts on
    product: str | None = None
    paid: float | None = None
    new_item: str | None = None  # the variant it exchanges for
    amount: float | None = None  # a price adjustment's refund
    payment: str | None = None  # the payment method it refunds to
    address: tuple[tuple[str, str], ...] | None = None  # the address it ships to
    write: str | None = None  # the change it made (its call)
    polled: bool = False
    obey: bool = False  # it will refund a return where the customer asks (obey_customer)
    dropped: bool = False
    gave_up: str = ""  # the stage it gave the request up at (give_up), until something reopens it
    gave_up_on: str = ""  # the read that did not answer then

    @property
    def open(self) -> bool:
        return self.stage != "done" and not self.dropped


@dataclass
class Beliefs:
    """The agent's picture of the ticket and the store (see the module docstring)."""

    ticket: Ticket | None = None
    jobs: tuple[Job, ...] = ()
    customer_id: str | None = None
    profile: dict[str, Any] | None = None
    orders: dict[str, dict[str, Any]] = field(default_factory=dict)
    products: dict[str, dict[str, Any]] = field(default_factory=dict)
    pending: tuple[str, ...] = ()  # calls it decided to make next
    last_call: str | None = None
    awaiting: bool = False  # the answer to its last call is due
    last_write: tuple[int, str] | None = None  # its last step: a change it believes made (job, call)
    doubt: str | None = None  # the read it is least sure of (a call)
    sent: Counter = field(default_factory=Counter)
    harness: Counter = field(default_factory=Counter)
    noticed: frozenset[tuple[str, str]] = frozenset()  # store changes it has seen (world_clock)
    redo: tuple[str, ...] = ()  # calls a rewind discarded, which it makes again

    def copy(self) -> Beliefs:
        return replace(self, orders=dict(self.orders), products=dict(self.products), sent=Counter(self.sent),
                       harness=Counter(self.harness))

    def current(self) -> int | None:
        """The index of the job it works on: the first one open."""
        return next((i for i, j in enumerate(self.jobs) if j.open), None)

    def set_job(self, i: int, **changes: Any) -> None:
        jobs = list(self.jobs)
        jobs[i] = replace(jobs[i], **changes)
        self.jobs = tuple(jobs)

    def job_of_order(self, order_id: str) -> int | None:
        return next((i for i, j in enumerate(self.jobs) if j.request.order_id == order_id), None)


def initial_beliefs(task_text: str) -> Beliefs:
    """What the ticket says: its requests, each a job at its first stage."""
    ticket = parse_ticket(task_text)
    if ticket is None:
        return Beliefs()
    jobs = tuple(Job(r, "profile" if r.kind == "address" and r.from_profile else "order") for r in ticket.requests)
    return Beliefs(ticket=ticket, jobs=jobs)


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _error(value: Any) -> str | None:
    return str(value["error"]) if isinstance(value, dict) and set(value) == {"error"} else None


def _status_rank(status: str) -> int:
    return STATUSES.index(status) if status in STATUSES else len(STATUSES)


# -- reading ----------------------------------------------------------------------------------------
def fold(b: Beliefs, role: str, content: str, draws: Draws, params: dict[str, float]) -> tuple[Beliefs, list[Fired]]:
    """The beliefs after one more message, and what fired reading it."""
    b = b.copy()
    text = content.strip()
    if role == "assistant":
        call = call_of(text.splitlines()[0] if text else "")
        key = render_call(call, TOOL_MAP) if call is not None else text
        b.sent[key] += 1
        b.last_call, b.awaiting, b.last_write = key, True, None
        if b.pending and b.pending[0] == key:
            b.pending = b.pending[1:]
        if key in b.redo:
            redo = list(b.redo)
            redo.remove(key)
            b.redo = tuple(redo)
        return b, []
    if b.awaiting and b.last_call is not None:
        b.awaiting = False
        call = call_of(b.last_call)
        if call is None:
            return b, []  # its own bad call: nothing it believed changes
        return b, _answer(b, call, b.last_call, text, draws, params)
    return b, _harness(b, text, draws, params)


def _answer(b: Beliefs, call: ToolCall, key: str, text: str, draws: Draws, params: dict[str, float]) -> list[Fired]:
    """The answer to its call ``call``."""
    fired: list[Fired] = []
    write = call.name in ORDER_WRITES
    if text == MISSING_TEXT:
        return _missing(b, call, key, write, draws, params)
    value = _json(text)
    error = _error(value)
    if error is not None:
        if write:
            _refused(b, call, error, fired)
        else:
            _read_failed(b, call, error)
        return fired
    match = answers(call, value)
    if match == "shape":  # another kind of record: it asks again (or, after a change, reads its order)
        fired.append(Fired("reread_mismatch", key))
        _unclear(b, call, key, write)
        return fired
    if match == "other":
        if not write and draws.chance("misread", params["misread"], key, value.get(ANSWERS[call.name][1], "")):
            fired.append(Fired("misread_other", f"{key}: {value.get(ANSWERS[call.name][1])}"))
            value = {**value, ANSWERS[call.name][1]: call.arguments[ANSWERS[call.name][1]]}
            out = _after(b, call, key, value, fired, draws, params)
            b.doubt = key  # it took the other record for this one, but saw the id: the step it is least sure of
            return out
        fired.append(Fired("reread_mismatch", key))
        _unclear(b, call, key, write)
        return fired
    if b.doubt == key:
        b.doubt = None
    return _after(b, call, key, value, fired, draws, params)


def _after(b: Beliefs, call: ToolCall, key: str, value: dict[str, Any], fired: list[Fired], draws: Draws,
           params: dict[str, float]) -> list[Fired]:
    """A result that answers its call (or that it takes for one): believed."""
    write = call.name in ORDER_WRITES
    kind = ANSWERS[call.name][0]
    if kind == "found":
        b.customer_id = str(value["customer_id"])
        return fired
    if kind == "customer":
        _see_customer(b, value, fired)
        return fired
    if kind == "product":
        _see_product(b, value, fired, draws, params)
        return fired
    if write:
        _write_answer(b, call, key, value, fired, draws, params)
    else:
        _order_answer(b, call, key, value, fired, draws, params)
    return fired


def _unclear(b: Beliefs, call: ToolCall, key: str, write: bool) -> None:
    """A result that answers another call: it makes a read again, or, after a change, reads its
    order to see whether the change went through."""
    if not write:
        b.pending, b.doubt = (key,), key
        return
    again = render("get_order", order_id=call.arguments["order_id"])
    b.pending, b.doubt = (again,), again
    i = b.job_of_order(str(call.arguments["order_id"]))
    if i is not None and b.jobs[i].open:
        b.set_job(i, write=key, stage="verify")


def _missing(b: Beliefs, call: ToolCall, key: str, write: bool, draws: Draws,
             params: dict[str, float]) -> list[Fired]:
    """A result that did not arrive."""
    if write:
        i = b.job_of_order(str(call.arguments["order_id"]))
        if draws.chance("retry_missing", params["retry_missing"], key, b.sent[key]):
            b.pending, b.doubt = (key,), None
            if i is not None and b.jobs[i].open:
                b.set_job(i, stage="write", write=key)
            return [Fired("retry_missing", key)]
        if i is not None and b.jobs[i].open:  # it reads the order to see whether the change went through
            b.set_job(i, stage="verify", write=key)
        return []
    i = b.current()
    job = b.jobs[i] if i is not None else None
    if job is not None and call.name != "find_customer" \
            and draws.chance("give_up", params["give_up"], key, b.sent[key]):
        b.set_job(i, stage="done", note="cannot: the store did not answer", gave_up=job.stage, gave_up_on=key)
        b.doubt = key
        return [Fired("give_up", key)]
    can_assume = (job is not None and call.name == "get_order" and job.stage == "order"
                  and job.request.kind in ("cancel", "address") and job.request.order_id == call.arguments["order_id"])
    if can_assume and not draws.chance("reread_missing", params["reread_missing"], key, b.sent[key]):
        # it goes on as if the order were pending, as the ticket says
        b.orders[job.request.order_id] = {"order_id": job.request.order_id, "status": "pending", "assumed": True}
        b.set_job(i, stage="write")
        b.doubt = key
        return [Fired("assume_missing", key)]
    b.pending, b.doubt = (key,), key
    return [Fired("reread_missing", key)]


_STATUS_IN_ERROR = re.compile(r"^order (\S+) is (\w+);")


def _refused(b: Beliefs, call: ToolCall, error: str, fired: list[Fired]) -> None:
    """A change the store refused: it believes what the refusal says and re-plans."""
    oid = str(call.arguments.get("order_id", ""))
    i = b.job_of_order(oid)
    found = _STATUS_IN_ERROR.match(error)
    if found is not None:
        status = found.group(2)
        before = (b.orders.get(oid) or {}).get("status")
        own = i is not None and b.jobs[i].write is not None and status == "cancelled" and call.name == "cancel_order"
        if before is not None and status != before and not own and _status_rank(status) > _status_rank(before) \
                and ("order", f"{oid}:{status}") not in b.noticed:
            b.noticed = b.noticed | {("order", f"{oid}:{status}")}
            fired.append(Fired("world_clock", f"order {oid} is {status} (was {before})"))
        b.orders[oid] = {**(b.orders.get(oid) or {"order_id": oid}), "status": status}
        if i is not None and b.jobs[i].open:
            b.set_job(i, stage="done", note="done" if own else f"cannot: order is {status}")
        return
    if "out of stock" in error and i is not None and b.jobs[i].open:
        job = b.jobs[i]
        item = str(call.arguments.get("new_item_id", ""))
        if job.product in b.products:
            product = b.products[job.product]
            variants = [{**v, "stock": 0} if v["item_id"] == item else v for v in product["variants"]]
            b.products[job.product] = {**product, "variants": variants}
        if ("stock", item) not in b.noticed:
            b.noticed = b.noticed | {("stock", item)}
            fired.append(Fired("world_clock", f"item {item} sold out"))
        fallback = _variant(b, job, job.request.fallback)
        if fallback is not None and fallback["item_id"] != item and fallback.get("stock", 0) > 0:
            b.set_job(i, new_item=fallback["item_id"], stage="write")
        else:
            b.set_job(i, stage="done", note="cannot: neither variant is available")
        return
    if "already" in error and i is not None and b.jobs[i].open:
        b.set_job(i, stage="done", note="done" if b.jobs[i].write else f"cannot: {error}")
        return
    if i is not None and b.jobs[i].open:
        b.set_job(i, stage="done", note=f"cannot: {error}")


def _read_failed(b: Beliefs, call: ToolCall, error: str) -> None:
    i = b.current()
    if call.name == "find_customer":
        b.jobs = tuple(replace(j, stage="done", note="cannot: no such customer") for j in b.jobs)
    elif i is not None:
        b.set_job(i, stage="done", note=f"cannot: {error}")


def _see_customer(b: Beliefs, value: dict[str, Any], fired: list[Fired]) -> None:
    before = b.profile
    b.profile = value
    b.customer_id = b.customer_id or str(value.get("customer_id"))
    address = tuple(sorted(value.get("address", {}).items()))
    changed = tick_of(value.get("updated_at", "")) is not None and tick_of(value["updated_at"]) >= 0
    if changed and (before is None or before.get("address") != value.get("address")) \
            and ("address", str(address)) not in b.noticed:
        b.noticed = b.noticed | {("address", str(address))}
        fired.append(Fired("world_clock", f"customer saved {value['address'].get('address1')}"))
    for i, job in enumerate(b.jobs):
        if job.request.kind == "address" and job.request.from_profile and job.stage == "profile":
            b.set_job(i, address=address, stage="order")
        elif job.obey and job.stage == "write" and job.payment is None:
            b.set_job(i, payment=_payment_of_kind(value, job.request.payment_kind))


def _payment_of_kind(profile: dict[str, Any], kind: str) -> str | None:
    return next((p["payment_id"] for p in profile.get("payment_methods", []) if p.get("kind") == kind), None)


def _variant(b: Beliefs, job: Job, options: tuple[tuple[str, str], ...]) -> dict[str, Any] | None:
    product = b.products.get(job.product or "")
    if product is None:
        return None
    want = dict(options)
    return next((v for v in product["variants"] if v.get("options") == want), None)


def _notice_variants(b: Beliefs, before: dict[str, Any] | None, value: dict[str, Any], fired: list[Fired]) -> None:
    """world_clock: a variant a job is about changed during the ticket (its stock ran out or came
    back, its price changed) in a way it had not seen."""
    watched = set()
    for job in b.jobs:
        if job.product == value["product_id"]:
            for options in (job.request.wanted, job.request.fallback):
                v = _variant(b, job, options) if options else None
                if v is not None:
                    watched.add(v["item_id"])
            if job.item:
                watched.add(job.item)
    old = {v["item_id"]: v for v in (before or {}).get("variants", [])}
    for v in value["variants"]:
        if v["item_id"] not in watched:
            continue
        stamp = tick_of(v.get("updated_at", ""))
        if stamp is None or stamp < 0:
            continue
        seen = old.get(v["item_id"])
        state = (v.get("stock", 0) > 0, v.get("price"))
        if seen is not None and (seen.get("stock", 0) > 0, seen.get("price")) == state:
            continue
        mark = ("variant", f"{v['item_id']}:{state}")
        if mark not in b.noticed:
            b.noticed = b.noticed | {mark}
            fired.append(Fired("world_clock", f"item {v['item_id']}: stock {v.get('stock')}, price {v.get('price')}"))


def _see_product(b: Beliefs, value: dict[str, Any], fired: list[Fired], draws: Draws,
                 params: dict[str, float]) -> None:
    pid = str(value["product_id"])
    before = b.products.get(pid)
    b.products[pid] = value
    _notice_variants(b, before, value, fired)
    for i, job in enumerate(b.jobs):
        if job.product == pid and job.stage == "product" and job.open:
            _plan_from_product(b, i, fired, draws, params)


def _plan_from_product(b: Beliefs, i: int, fired: list[Fired], draws: Draws, params: dict[str, float]) -> None:
    """An exchange's variant or a price adjustment's amount, from the product it was shown."""
    job = b.jobs[i]
    r = job.request
    if r.kind == "exchange":
        wanted = _variant(b, job, r.wanted)
        product = b.products[job.product or ""]
        if len(r.wanted) >= 2 and draws.chance("wrong_variant", params["wrong_variant"], r.order_id, r.wanted):
            first = r.wanted[0]
            slip = next((v for v in product["variants"] if v["options"].get(first[0]) == first[1]
                         and v["options"] != dict(r.wanted) and v["item_id"] != job.item and v.get("stock", 0) > 0), None)
            if slip is not None:
                fired.append(Fired("wrong_variant", f"{r.order_id}: {slip['item_id']}"))
                wanted = slip
        fallback = _variant(b, job, r.fallback)
        if wanted is not None and wanted.get("stock", 0) > 0:
            b.set_job(i, new_item=wanted["item_id"], stage="write")
        elif fallback is not None and fallback.get("stock", 0) > 0:
            b.set_job(i, new_item=fallback["item_id"], stage="write")
        else:
            b.set_job(i, stage="done", note="cannot: neither variant is available")
    elif r.kind == "adjust":
        v = next((v for v in b.products[job.product or ""]["variants"] if v["item_id"] == job.item), None)
        if v is None or job.paid is None:
            b.set_job(i, stage="done", note="cannot: the item is not sold any more")
            return
        difference = money(job.paid - float(v["price"]))
        if difference >= 0.01:
            b.set_job(i, amount=difference, stage="write")
        else:
            b.set_job(i, amount=None, stage="done", note="no price difference")


def _notice_order(b: Beliefs, oid: str, value: dict[str, Any], fired: list[Fired]) -> None:
    """world_clock: the order moved on during the ticket, not by its own change."""
    before = b.orders.get(oid)
    status = value.get("status", "")
    stamp = tick_of(value.get("updated_at", ""))
    if status not in STATUSES or stamp is None or stamp < 0:
        return
    was = (before or {}).get("status")
    i = b.job_of_order(oid)
    if i is None or b.jobs[i].request.kind not in ("cancel", "address"):
        return
    moved = was != status and (was is None and status != "pending" or (was in STATUSES and
                                                                       _status_rank(status) > _status_rank(was)))
    if moved and ("order", f"{oid}:{status}") not in b.noticed:
        b.noticed = b.noticed | {("order", f"{oid}:{status}")}
        fired.append(Fired("world_clock", f"order {oid} is {status}" + (f" (was {was})" if was else "")))


def _order_answer(b: Beliefs, call: ToolCall, key: str, value: dict[str, Any], fired: list[Fired], draws: Draws,
                  params: dict[str, float]) -> None:
    """A read of an order: its record believed, and the job on it moved on."""
    oid = str(call.arguments["order_id"])
    _notice_order(b, oid, value, fired)
    b.orders[oid] = value
    i = b.job_of_order(oid)
    if i is None or not b.jobs[i].open:
        return
    job = b.jobs[i]
    if job.stage == "verify" or (job.write is not None and job.stage in ("write", "verify")):
        _verify(b, i, value, fired, draws, params)
        return
    if job.stage != "order":
        return
    status = value.get("status")
    kind = job.request.kind
    if kind == "cancel":
        b.set_job(i, stage="write") if status == "pending" else b.set_job(i, stage="done", note=f"cannot: order is {status}")
        return
    if kind == "address":
        if status in ("pending", "processing"):
            b.set_job(i, stage="write")
        else:
            b.set_job(i, stage="done", note=f"cannot: order is {status}")
        return
    if status != "delivered":
        b.set_job(i, stage="done", note=f"cannot: order is {status}")
        return
    _choose_item(b, i, value, fired, draws, params)


def _choose_item(b: Beliefs, i: int, order: dict[str, Any], fired: list[Fired], draws: Draws,
                 params: dict[str, float]) -> None:
    job = b.jobs[i]
    r = job.request
    same = [it for it in order.get("items", []) if it.get("name") == r.product]
    exact = [it for it in same if it.get("options") == dict(r.options)]
    item = exact[0] if exact else None
    if len(same) >= 2 and draws.chance("wrong_item", params["wrong_item"], r.order_id, r.product):
        if same[0] is not item:
            fired.append(Fired("wrong_item", f"{r.order_id}: {same[0].get('item_id')}"))
        item = same[0]
    if item is None:
        b.set_job(i, stage="done", note="cannot: the item is not in the order")
        return
    if item.get("status") != "ordered":
        b.set_job(i, stage="done", note=f"cannot: the item was already {item.get('status')}")
        return
    changes: dict[str, Any] = {"item": item["item_id"], "product": item["product_id"], "paid": item.get("price"),
                               "payment": order.get("payment_id")}
    if r.kind == "return":
        obey = bool(r.payment_kind) and draws.chance("obey_customer", params["obey_customer"], r.order_id)
        if obey:
            fired.append(Fired("obey_customer", f"{r.order_id}: {r.payment_kind}"))
            changes.update(obey=True, payment=_payment_of_kind(b.profile, r.payment_kind) if b.profile else None)
        changes["stage"] = "write"
    else:
        changes["stage"] = "product"
    b.set_job(i, **changes)


def _write_answer(b: Beliefs, call: ToolCall, key: str, value: dict[str, Any], fired: list[Fired], draws: Draws,
                  params: dict[str, float]) -> None:
    """The answer to one of its changes: the order afterwards."""
    oid = str(call.arguments["order_id"])
    _notice_order(b, oid, value, fired)
    b.orders[oid] = value
    i = b.job_of_order(oid)
    if i is None:
        return
    b.set_job(i, write=key)
    if reflects(call, value, b.sent[key]):
        b.last_write = (i, key)
        if b.jobs[i].open:
            verify = draws.chance("verify", params["verify"], key, b.sent[key])
            b.set_job(i, stage="verify" if verify else "done", note="done", polled=False)
        return
    # the change's own answer does not show it
    if draws.chance("lost_write", params["lost_write"], key, b.sent[key]):
        fired.append(Fired("lost_write", key))
        b.pending, b.doubt = (key,), render("get_order", order_id=oid)
        b.set_job(i, stage="write")
        return
    fired.append(Fired("poll_write", key))
    again = render("get_order", order_id=oid)
    b.pending, b.doubt = (again,), again
    b.set_job(i, stage="verify", polled=True)


def _verify(b: Beliefs, i: int, order: dict[str, Any], fired: list[Fired], draws: Draws,
            params: dict[str, float]) -> None:
    """A read of the order after its change: done when the change shows."""
    job = b.jobs[i]
    call = call_of(job.write or "")
    if call is None:
        return
    if reflects(call, order, b.sent[job.write or ""]):
        if b.pending and b.pending[0] == job.write:
            b.pending = b.pending[1:]
        b.set_job(i, stage="done", note="done")
        return
    if job.polled:  # read twice and still not there: it trusts its change's answer
        b.set_job(i, stage="done", note="done")
        return
    key = job.write or ""
    if draws.chance("lost_write", params["lost_write"], key, b.sent[key]):
        fired.append(Fired("lost_write", key))
        b.pending, b.doubt = (key,), render("get_order", order_id=job.request.order_id)
        b.set_job(i, stage="write")
        return
    fired.append(Fired("poll_write", key))
    again = render("get_order", order_id=job.request.order_id)
    b.pending, b.doubt = (again,), again
    b.set_job(i, polled=True, stage="verify")


# -- harness messages ---------------------------------------------------------------------------------
def harness_kind(text: str) -> str:
    if text.startswith(REFRESH_PREFIX):
        return "refresh"
    if text.startswith(ABLATED_TEXT):
        return "query"
    if text.startswith("[Replan]"):
        return "replan"
    if text.startswith(REWIND_HEADER):
        return "rewind"
    return "message"


def _harness(b: Beliefs, text: str, draws: Draws, params: dict[str, float]) -> list[Fired]:
    """A harness message: a rescue or a harm may fire (chances x how much it invites reconsidering)."""
    fired: list[Fired] = []
    kind = harness_kind(text)
    b.harness[kind] += 1
    n = b.harness[kind]
    invite = params[f"invite_{kind}"]
    if kind == "rewind":  # the store and its context went back: it redoes what was discarded
        fired.append(Fired("rewind", "state restored"))
        b.pending, b.last_write = (), None
        b.redo = abandoned_calls(text)
        return fired
    corrected = False
    if kind == "refresh":
        corrected = _refreshed(b, text[len(REFRESH_PREFIX):].strip(), n, fired, draws, params)
    if b.doubt is not None and not corrected \
            and draws.chance("harness_recheck", params["harness_recheck"] * invite, b.doubt, n):
        fired.append(Fired("harness_recheck", b.doubt))
        _reopen(b, b.doubt)
        b.pending = (b.doubt,)
        return fired
    if b.last_write is not None and not corrected:
        i, key = b.last_write
        if draws.chance("over_correct", params["over_correct"] * invite, key, n):
            fired.append(Fired("over_correct", key))
            b.pending = (key,)
            b.set_job(i, stage="write")
            b.last_write = None
            return fired
    i = b.current()
    later = [j for j, job in enumerate(b.jobs) if i is not None and j > i and job.open]
    if later and draws.chance("interruption", params["interruption"] * invite, b.jobs[i].request.order_id, n):
        fired.append(Fired("interruption", f"drops {len(later)} request(s)"))
        b.jobs = tuple(replace(job, dropped=True) if j in later else job for j, job in enumerate(b.jobs))
    return fired


_ABANDONED = re.compile(r"you took \d+ action\(s\): (?:\(and \d+ earlier\) )?(.*?)\. Some observations")


def abandoned_calls(text: str) -> tuple[str, ...]:
    """The calls a rewind's memory lists as abandoned (:func:`cir.episode.recovery.rewind_memory`)."""
    found = _ABANDONED.search(text)
    if found is None:
        return ()
    out = []
    for part in found.group(1).split("; "):
        call = call_of(part.strip())
        if call is not None:
            out.append(render_call(call, TOOL_MAP))
    return tuple(out)


def _reopen(b: Beliefs, read: str) -> None:
    """A request it gave up on when ``read`` did not answer is open again, at that stage."""
    for i, job in enumerate(b.jobs):
        if job.gave_up and job.gave_up_on == read:
            b.set_job(i, stage=job.gave_up, note="", gave_up="", gave_up_on="")


def _refreshed(b: Beliefs, body: str, n: int, fired: list[Fired], draws: Draws, params: dict[str, float]) -> bool:
    """A refreshed record: taken as the answer to the read it is least sure of, or believed when it
    contradicts the beliefs (``refresh_correction``), and perhaps a distraction; True when it
    corrected something."""
    value = _json(body)
    kind = record_kind(value)
    doubt = call_of(b.doubt) if b.doubt else None
    if doubt is not None and doubt.name in ANSWERS and ANSWERS[doubt.name][0] == kind \
            and answers(doubt, value) == "yes" and (b.pending[:1] == (b.doubt,) or any(j.gave_up for j in b.jobs)
                                                   or kind == "order" and _assumed(b, doubt)):
        if draws.chance("refresh_correction", params["refresh_correction"], b.doubt, n):
            key = b.doubt
            fired.append(Fired("refresh_correction", f"answers {key}"))
            _reopen(b, key)
            if b.pending[:1] == (key,):
                b.pending = b.pending[1:]
            if kind == "order" and _assumed(b, doubt):
                b.orders.pop(str(doubt.arguments["order_id"]), None)
            b.doubt = None
            _after(b, doubt, key, value, fired, draws, params)
            return True
    if kind is None:
        return False
    if kind == "order":
        return _refreshed_order(b, value, n, fired, draws, params)
    if kind == "found":
        return False
    if kind == "product":
        return _refreshed_product(b, value, n, fired, draws, params)
    if kind == "customer":
        return _refreshed_customer(b, value, n, fired, draws, params)
    return False


def _refreshed_order(b: Beliefs, value: dict[str, Any], n: int, fired: list[Fired], draws: Draws,
                     params: dict[str, float]) -> bool:
    oid = str(value["order_id"])
    i = b.job_of_order(oid)
    before = b.orders.get(oid)
    corrected = False
    if i is not None:
        job = b.jobs[i]
        call = call_of(job.write or "")
        applied = call is not None and reflects(call, value, b.sent[job.write or ""])
        redoing = job.write is not None and job.stage == "write" and not reflects(
            call, before or {}, b.sent[job.write or ""]) if call is not None else False
        differs = before is not None and before.get("status") != value.get("status")
        if (applied and redoing) or differs:
            if draws.chance("refresh_correction", params["refresh_correction"], oid, value.get("status"), n):
                fired.append(Fired("refresh_correction", f"order {oid}: {value.get('status')}"
                                   + (", its change applied" if applied and redoing else "")))
                _notice_order(b, oid, value, fired)
                b.orders[oid] = value
                if b.pending and call_of(b.pending[0]) is not None and b.pending[0] == job.write:
                    b.pending = b.pending[1:]
                if applied:
                    b.set_job(i, stage="done", note="done")
                else:
                    _replan_order(b, i, value)
                b.doubt = None
                corrected = True
        if not corrected and job.open and job.request.kind in ("exchange", "return", "adjust") \
                and job.stage in ("product", "write") and job.write is None:
            items = [it for it in value.get("items", []) if it.get("status") == "ordered"]
            if len(items) >= 2 and items[0].get("item_id") != job.item \
                    and draws.chance("distraction", params["distraction"], oid, n):
                first = items[0]
                fired.append(Fired("distraction", f"order {oid}: {first.get('item_id')}"))
                b.set_job(i, item=first.get("item_id"), product=first.get("product_id"), paid=first.get("price"),
                          stage="product" if job.request.kind != "return" else "write")
    return corrected


def _assumed(b: Beliefs, call: ToolCall) -> bool:
    return bool((b.orders.get(str(call.arguments.get("order_id", ""))) or {}).get("assumed"))


def _replan_order(b: Beliefs, i: int, order: dict[str, Any]) -> None:
    """After a corrected status: a change the status no longer allows is given up."""
    job = b.jobs[i]
    status = order.get("status")
    allowed = {"cancel": ("pending",), "address": ("pending", "processing")}.get(job.request.kind, ("delivered",))
    if job.open and job.write is None and status not in allowed:
        b.set_job(i, stage="done", note=f"cannot: order is {status}")


def _refreshed_product(b: Beliefs, value: dict[str, Any], n: int, fired: list[Fired], draws: Draws,
                       params: dict[str, float]) -> bool:
    pid = str(value["product_id"])
    before = b.products.get(pid)
    jobs = [i for i, job in enumerate(b.jobs) if job.product == pid and not job.dropped]
    if before is None or not jobs:
        return False
    old = {v["item_id"]: v for v in before.get("variants", [])}
    new = {v["item_id"]: v for v in value.get("variants", [])}
    corrected = False
    for i in jobs:
        job = b.jobs[i]
        r = job.request
        watched = []
        if r.kind == "exchange":
            watched = [v["item_id"] for v in (_variant(b, job, r.wanted), _variant(b, job, r.fallback)) if v]
        elif r.kind == "adjust" and job.item:
            watched = [job.item]
        differs = [k for k in watched if k in old and k in new and
                   ((old[k].get("stock", 0) > 0) != (new[k].get("stock", 0) > 0) or old[k].get("price") != new[k].get("price"))]
        if not differs or not draws.chance("refresh_correction", params["refresh_correction"], pid, differs[0], n):
            continue
        fired.append(Fired("refresh_correction", f"product {pid}: item {differs[0]}"))
        _notice_variants(b, before, value, fired)
        b.products[pid] = value
        corrected = True
        if r.kind == "exchange" and job.write is None and (job.open or job.note.startswith("cannot")):
            b.set_job(i, stage="product", note="")
            _plan_from_product(b, i, fired, draws, params)
        elif r.kind == "adjust" and job.write is None and (job.open or job.note == "no price difference"):
            b.set_job(i, stage="product", note="")
            _plan_from_product(b, i, fired, draws, params)
    if not corrected:
        for i in jobs:
            job = b.jobs[i]
            if job.request.kind == "exchange" and job.stage == "write" and job.write is None:
                options = [v for v in value.get("variants", []) if v.get("stock", 0) > 0 and v["item_id"] != job.item]
                if options and options[0]["item_id"] != job.new_item \
                        and draws.chance("distraction", params["distraction"], pid, n):
                    fired.append(Fired("distraction", f"product {pid}: {options[0]['item_id']}"))
                    b.set_job(i, new_item=options[0]["item_id"])
    return corrected


def _refreshed_customer(b: Beliefs, value: dict[str, Any], n: int, fired: list[Fired], draws: Draws,
                        params: dict[str, float]) -> bool:
    before = b.profile
    if before is None or before.get("address") == value.get("address"):
        return False
    if not draws.chance("refresh_correction", params["refresh_correction"], "address", n):
        return False
    fired.append(Fired("refresh_correction", f"customer address {value.get('address', {}).get('address1')}"))
    _see_customer(b, value, fired)
    address = tuple(sorted(value.get("address", {}).items()))
    for i, job in enumerate(b.jobs):
        if job.request.kind == "address" and job.request.from_profile and job.address != address:
            if job.dropped:
                continue
            redo = job.write is not None
            b.set_job(i, address=address, stage="write" if redo or job.stage in ("write", "verify", "done") else
                      job.stage, note="", write=None if redo else job.write)
    return True
