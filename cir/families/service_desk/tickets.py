"""A customer's ticket: its requests as data, written as the text an episode starts with, and read
back from that text (the one parser: the built-in agent and the features read a ticket through
:func:`parse_ticket`, never the task's hidden data).

Five kinds of request, in the style of tau-bench's retail domain: ``cancel`` a pending order,
change the shipping ``address`` of an order before it ships (to an address the ticket gives, or
to the one the customer has just saved in their account), ``exchange`` a delivered item for
another variant (with a second choice if the first is not available), ``return`` a delivered item
for a refund, and a price ``adjust``-ment (refund the difference when an item bought is now on
sale). A ticket holds one to three of them, each about its own order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cir.util.errors import CirError

KINDS = ("cancel", "address", "exchange", "return", "adjust")
#: the reason a cancel request gives, by the ``cancel_order`` reason it means
REASON_TEXT = {"ordered by mistake": "I ordered it by mistake", "no longer needed": "I no longer need it"}
#: how a customer names a payment method kind
PAYMENT_TEXT = {"gift_card": "gift card", "paypal": "PayPal account", "credit_card": "credit card"}


@dataclass(frozen=True)
class Address:
    address1: str
    city: str
    state: str
    zip: str

    def text(self) -> str:
        return f"{self.address1}, {self.city}, {self.state} {self.zip}"

    def as_dict(self) -> dict[str, str]:
        return {"address1": self.address1, "city": self.city, "state": self.state, "zip": self.zip}


@dataclass(frozen=True)
class Request:
    """One request of a ticket (see the module docstring). ``options`` name the item the request
    is about; an exchange wants ``wanted`` and accepts ``fallback``; a return may ask for the
    refund on a payment method of another ``payment_kind`` (the policy says: the original one)."""

    kind: str
    order_id: str
    reason: str = ""
    address: Address | None = None
    from_profile: bool = False
    product: str = ""
    options: tuple[tuple[str, str], ...] = ()
    wanted: tuple[tuple[str, str], ...] = ()
    fallback: tuple[tuple[str, str], ...] = ()
    payment_kind: str = ""
    phrasing: int = field(default=0, compare=False)

    @property
    def writes(self) -> bool:
        return True


@dataclass(frozen=True)
class Ticket:
    """Who wrote, when, and what they ask."""

    ticket_id: str
    name: str
    email: str
    opened: str
    requests: tuple[Request, ...]

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(r.kind for r in self.requests)


def _opts(options: tuple[tuple[str, str], ...]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in options)


def request_text(r: Request) -> str:
    """The sentence(s) of one request."""
    item = f"{r.product} ({_opts(r.options)})"
    if r.kind == "cancel":
        why = REASON_TEXT[r.reason]
        return (f"Please cancel order {r.order_id}: {why}." if r.phrasing == 0
                else f"I want to cancel order {r.order_id} because {why}.")
    if r.kind == "address":
        if r.from_profile:
            return (f"Please ship order {r.order_id} to my new address: I have just updated it in my account."
                    if r.phrasing == 0 else
                    f"I moved, so please change the shipping address of order {r.order_id} to the new address "
                    "in my account (I saved it a minute ago).")
        assert r.address is not None
        return (f"Please change the shipping address of order {r.order_id} to {r.address.text()}." if r.phrasing == 0
                else f"Order {r.order_id} should go to {r.address.text()} instead; please update its shipping address.")
    if r.kind == "exchange":
        return (f"From order {r.order_id} I'd like to exchange the {item} for the one with {_opts(r.wanted)}. "
                f"If that one is not available, {_opts(r.fallback)} is fine." if r.phrasing == 0 else
                f"In order {r.order_id}, please exchange my {item} for {_opts(r.wanted)}; "
                f"if it is out of stock, {_opts(r.fallback)} will do.")
    if r.kind == "return":
        text = (f"Please return the {item} from order {r.order_id} and refund me." if r.phrasing == 0
                else f"I'd like to return my {item} of order {r.order_id}.")
        if r.payment_kind:
            text += f" Please put the money on my {PAYMENT_TEXT[r.payment_kind]}."
        return text
    if r.kind == "adjust":
        return (f"The {item} I bought in order {r.order_id} is on sale now: please refund me the price difference."
                if r.phrasing == 0 else
                f"I just saw that the {item} from order {r.order_id} costs less now. Can you refund the difference?")
    raise CirError(f"request kind {r.kind!r}: expected one of {', '.join(KINDS)}")


def ticket_text(t: Ticket) -> str:
    """The text an episode starts with: the ticket's header, greeting, numbered requests."""
    many = len(t.requests) > 1
    lines = [f"Ticket {t.ticket_id}, opened {t.opened}, from {t.name} <{t.email}>:", "",
             "Hello, I need help with a few things." if many else "Hello, I need help with an order."]
    lines += [f"{i}. {request_text(r)}" for i, r in enumerate(t.requests, 1)]
    lines += ["Thank you!"]
    return "\n".join(lines)


# -- reading a ticket back --------------------------------------------------------------------------
_HEADER = re.compile(r"^Ticket (?P<id>\S+), opened (?P<opened>\S+), from (?P<name>.+?) <(?P<email>[^>]+)>:", re.M)
_LINE = re.compile(r"^(\d+)\. (.+)$", re.M)
_ORDER = re.compile(r"\b(W\d+)\b")
_ITEM = re.compile(r"(?:[Tt]he|[Mm]y) (?P<product>[A-Z][\w'-]*(?: [\w'-]+)*?) \((?P<opts>[^)]*)\)")
_ADDRESS = re.compile(r"to (?P<a1>[^,]+), (?P<city>[^,]+), (?P<state>[A-Z]{2}) (?P<zip>\d{5})")


def parse_options(text: str) -> tuple[tuple[str, str], ...]:
    """``color: blue, size: M`` -> ``(("color", "blue"), ("size", "M"))``."""
    out = []
    for part in text.split(", "):
        key, sep, value = part.partition(": ")
        if not sep:
            return ()
        out.append((key.strip(), value.strip()))
    return tuple(out)


def parse_request(line: str) -> Request | None:
    """One numbered line of a ticket as a request; None when it is none of the five kinds."""
    order = _ORDER.search(line)
    if order is None:
        return None
    order_id = order.group(1)
    item = _ITEM.search(line)
    product, options = (item.group("product"), parse_options(item.group("opts"))) if item else ("", ())
    low = line.lower()
    if "cancel" in low:
        reason = next((k for k, v in REASON_TEXT.items() if v[2:] in line), "")
        return Request("cancel", order_id, reason=reason)
    if "address" in low:
        if "in my account" in low:
            return Request("address", order_id, from_profile=True)
        found = _ADDRESS.search(line)
        if found is None:
            return None
        return Request("address", order_id, address=Address(found.group("a1").strip(), found.group("city").strip(),
                                                              found.group("state"), found.group("zip")))
    if "exchange" in low:
        wanted = re.search(r"for the one with (.+?)\. If that one", line) or re.search(r"\) for (.+?); if it is", line)
        fallback = re.search(r"not available, (.+?) is fine", line) or re.search(r"out of stock, (.+?) will do", line)
        if wanted is None or fallback is None:
            return None
        return Request("exchange", order_id, product=product, options=options,
                       wanted=parse_options(wanted.group(1)), fallback=parse_options(fallback.group(1)))
    if "return" in low:
        kind = next((k for k, v in PAYMENT_TEXT.items() if f"on my {v}" in line), "")
        return Request("return", order_id, product=product, options=options, payment_kind=kind)
    if "difference" in low:
        return Request("adjust", order_id, product=product, options=options)
    return None


def parse_ticket(text: str) -> Ticket | None:
    """A ticket's text as a :class:`Ticket` (requests it cannot read are left out); None when the
    text is not a ticket."""
    head = _HEADER.search(text or "")
    if head is None:
        return None
    requests = tuple(r for r in (parse_request(m.group(2)) for m in _LINE.finditer(text)) if r is not None)
    return Ticket(head.group("id"), head.group("name"), head.group("email"), head.group("opened"), requests)
