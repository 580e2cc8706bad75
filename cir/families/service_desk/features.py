"""What a harness of the service desk knows before a recovery decision (the family's extractor).

:data:`SERVICE_DESK_FEATURES` is the kit's generic tool-world extractor
(:class:`cir.tools.features.ToolFeatures`: the delay, the budgets, whether the suspect result is
missing, an error, visibly another call's, a repeat or a change of an earlier result of the same
call, how long ago that call was made, the changes made around it) with the family's own
features after it. Like every extractor it reads only what the agent was shown: the ticket (the
task text), the calls and each step's shown JSON; never a true result, an event or the trace.
A stale record that answers its call is meant to be hard to tell from a fresh one: nothing here
reads the truth, only what a careful reader of the transcript could see (a read right after the
agent's own change that does not show it, a record older than one shown before, a record that
changed while the ticket was open).

The *suspect* result is that of env action ``env_actions - delay`` (as in the kit's features);
with none, the suspect features are 0.
"""

from __future__ import annotations

import json
from typing import Any

from cir.episode.transcript import Step, Transcript
from cir.families.service_desk.calls import ANSWERS, TOOL_MAP, call_of, record_kind, reflects
from cir.families.service_desk.shown import anomalous
from cir.families.service_desk.store import tick_of
from cir.families.service_desk.tickets import parse_ticket
from cir.families.service_desk.tools import ORDER_WRITES
from cir.tools.features import ToolFeatures

#: the family's own features, each one line (after the kit's generic ones)
FEATURES: dict[str, str] = {
    "f_other_record": "1 if the suspect result is visibly another call's (another kind of record, or another id: "
                      "the family's rule, cir.families.service_desk.shown)",
    "f_suspect_order": "1 if the suspect result is an order (a read, or the answer to a change)",
    "f_suspect_product": "1 if the suspect result is a product with its variants",
    "f_suspect_customer": "1 if the suspect result is a customer's profile",
    "f_suspect_change": "1 if the suspect call changed an order (cancel, address, exchange, return, refund)",
    "f_change_not_shown": "1 if the suspect result is about an order the agent changed just before (or the change's "
                          "own answer) and does not show that change (a read-your-writes violation)",
    "f_suspect_older": "1 if the suspect record's updated_at is earlier than that of the same record shown before",
    "f_suspect_changed_during_ticket": "1 if the suspect record (or a variant of it) changed while the ticket was "
                                       "open (its updated_at is at or after the ticket's time)",
    "f_suspect_status_rank": "the suspect order's status: 1 pending, 2 processing, 3 shipped, 4 delivered, "
                             "5 cancelled (0: not an order)",
    "f_since_record": "env actions since the same record was last shown before the suspect (0: never)",
    "f_last_change": "1 if the last env action was a change the store accepted",
    "f_changes": "changes the store accepted so far",
    "f_requests": "requests in the ticket",
    "f_requests_changed": "requests whose order got an accepted change so far",
    "f_order_read_age": "env actions since the order of the latest call was last shown (0: never, or no order)",
}
_STATUS_RANK = {"pending": 1, "processing": 2, "shipped": 3, "delivered": 4, "cancelled": 5}


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _record_id(value: Any) -> tuple[str, str] | None:
    kind = record_kind(value)
    if kind in ("order", "product", "customer"):
        key = {"order": "order_id", "product": "product_id", "customer": "customer_id"}[kind]
        return kind, str(value.get(key))
    return None


def _shown_value(step: Step) -> Any:
    text = step.shown or ""
    if step.actor == "harness" and "] " in text:
        text = text.split("] ", 1)[1]  # a refreshed result after its prefix
    return _json(text)


def _stamp(value: Any) -> int | None:
    """The latest change of a record the shown value says (a product: its latest variant's)."""
    if not isinstance(value, dict):
        return None
    stamps = [tick_of(value.get("updated_at", ""))]
    stamps += [tick_of(v.get("updated_at", "")) for v in value.get("variants") or [] if isinstance(v, dict)]
    known = [t for t in stamps if t is not None]
    return max(known) if known else None


class ServiceDeskFeatures(ToolFeatures):
    """The kit's generic tool-world features and the service desk's own (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__(TOOL_MAP, name="service-desk")

    def more_features(self) -> dict[str, str]:
        return FEATURES

    def more(self, transcript: Transcript, acted: list[Step], suspect: int, delay: int) -> dict[str, float]:
        f = dict.fromkeys(FEATURES, 0.0)
        ticket = parse_ticket(transcript.task_text)
        f["f_requests"] = float(len(ticket.requests) if ticket else 0)
        changes = [s for s in acted if s.actor == "agent" and _accepted_change(s)]
        f["f_changes"] = float(len(changes))
        orders_changed = {str(call_of(s.action or "").arguments.get("order_id")) for s in changes}
        if ticket is not None:
            f["f_requests_changed"] = float(sum(r.order_id in orders_changed for r in ticket.requests))
        if acted:
            f["f_last_change"] = float(acted[-1].actor == "agent" and _accepted_change(acted[-1]))
            last = call_of(acted[-1].action or "")
            order = str(last.arguments.get("order_id")) if last is not None and "order_id" in last.arguments else None
            if order is not None:
                seen = [j for j, s in enumerate(acted[:-1]) if _record_id(_shown_value(s)) == ("order", order)]
                f["f_order_read_age"] = float(len(acted) - 1 - seen[-1]) if seen else 0.0
        if suspect < 0:
            return f
        step = acted[suspect]
        call = call_of(step.action or "")
        value = _shown_value(step)
        f["f_other_record"] = float(call is not None and call.name in ANSWERS and step.shown.strip() != ""
                                    and anomalous(step.action or "", step.shown) and value is not None
                                    and not (isinstance(value, dict) and "error" in value))
        kind = record_kind(value)
        f["f_suspect_order"] = float(kind == "order")
        f["f_suspect_product"] = float(kind == "product")
        f["f_suspect_customer"] = float(kind == "customer")
        f["f_suspect_change"] = float(call is not None and call.name in ORDER_WRITES)
        if kind == "order":
            f["f_suspect_status_rank"] = float(_STATUS_RANK.get(str(value.get("status")), 0))
        record = _record_id(value)
        stamp = _stamp(value)
        if stamp is not None:
            f["f_suspect_changed_during_ticket"] = float(stamp >= 0)
        if record is not None:
            before = [j for j in range(suspect) if _record_id(_shown_value(acted[j])) == record]
            if before:
                f["f_since_record"] = float(suspect - before[-1])
                earlier = [_stamp(_shown_value(acted[j])) for j in before]
                f["f_suspect_older"] = float(stamp is not None and any(e is not None and e > stamp for e in earlier))
        f["f_change_not_shown"] = float(_change_not_shown(acted, suspect, call, value))
        return f


def _accepted_change(step: Step) -> bool:
    call = call_of(step.action or "")
    if call is None or call.name not in ORDER_WRITES:
        return False
    value = _json(step.shown or "")
    return record_kind(value) == "order"


def _change_not_shown(acted: list[Step], suspect: int, call: Any, value: Any) -> bool:
    """A result about an order the agent changed right before (or the change's own answer) that does
    not show the change."""
    if record_kind(value) != "order" or call is None:
        return False
    if call.name in ORDER_WRITES:
        return not reflects(call, value, 1)
    previous = [s for s in acted[:suspect] if s.actor == "agent"]
    if not previous:
        return False
    change = call_of(previous[-1].action or "")
    if change is None or change.name not in ORDER_WRITES or change.arguments.get("order_id") != value.get("order_id"):
        return False
    times = sum(1 for s in previous if s.action == previous[-1].action)
    return not reflects(change, value, times)


#: the family's extractor (its name is recorded in a router fitted with it)
SERVICE_DESK_FEATURES = ServiceDeskFeatures()
