"""The service-desk agent's next call from its beliefs.

In order: a call it decided on while reading (a re-read, a re-issue); ``find_customer`` with the
ticket's email; perhaps a look at the profile no request needs (``extra_lookup``); then the first
open request at its stage (:mod:`.beliefs`): read the profile, read the order, read the product,
make the change, read the order again; once no request is open, ``finish`` with an answer to the
customer that says what was done. Only ``extra_lookup`` and ``forget_request`` are drawn here;
everything else fired while reading.
"""

from __future__ import annotations

from cir.agents.modelfree import Draws, Fired
from cir.families.service_desk.agent.beliefs import ADJUST_REASON, Beliefs, Job
from cir.families.service_desk.calls import render


class Decider:
    """One decision: ``decide()`` returns the call; ``fired`` what was drawn deciding it."""

    def __init__(self, beliefs: Beliefs, params: dict[str, float], draws: Draws) -> None:
        self.b, self.params, self.draws = beliefs, params, draws
        self.fired: list[Fired] = []

    def decide(self) -> str:
        reply = self._decide()
        if reply in self.b.redo:  # the rewind acts here: it makes a discarded call again
            self.fired.append(Fired("rewind", f"redoes {reply}"))
        return reply

    def _decide(self) -> str:
        b = self.b
        if b.pending:
            return b.pending[0]
        if b.ticket is None:
            return render("finish", answer="I could not read the ticket.")
        if b.customer_id is None:
            return render("find_customer", email=b.ticket.email)
        if b.profile is None and self.draws.chance("extra_lookup", self.params["extra_lookup"], b.ticket.email):
            self.fired.append(Fired("extra_lookup", b.customer_id))
            return render("get_customer", customer_id=b.customer_id)
        for i, job in enumerate(b.jobs):
            if not job.open:
                continue
            if self._forgotten(i, job):
                continue
            call = self._next(job)
            if call is not None:
                return call
        dropped = [j.request.order_id for j in b.jobs if j.dropped]
        if dropped:  # the interruption acts here: it answers without them
            self.fired.append(Fired("interruption", f"finishes without {', '.join(dropped)}"))
        return render("finish", answer=self.answer())

    def _forgotten(self, i: int, job: Job) -> bool:
        """The last request of several, overlooked (``forget_request``), before it is started."""
        b = self.b
        if i != len(b.jobs) - 1 or len(b.jobs) < 2 or job.stage not in ("order", "profile") \
                or job.request.order_id in b.orders:
            return False
        if self.draws.chance("forget_request", self.params["forget_request"], job.request.order_id):
            self.fired.append(Fired("forget_request", job.request.order_id))
            return True
        return False

    def _next(self, job: Job) -> str | None:
        r, b = job.request, self.b
        if job.stage == "profile":
            return render("get_customer", customer_id=b.customer_id)
        if job.stage in ("order", "verify"):
            return render("get_order", order_id=r.order_id)
        if job.stage == "product":
            return render("get_product", product_id=job.product)
        if job.stage != "write":
            return None
        if r.kind == "cancel":
            return render("cancel_order", order_id=r.order_id, reason=r.reason or "no longer needed")
        if r.kind == "address":
            address = dict(job.address) if job.address else (r.address.as_dict() if r.address else None)
            if address is None:
                return render("get_customer", customer_id=b.customer_id)
            return render("change_address", order_id=r.order_id, **address)
        if r.kind == "exchange":
            return render("exchange_item", order_id=r.order_id, item_id=job.item, new_item_id=job.new_item)
        if r.kind == "return":
            if job.payment is None:  # the payment method the customer named: in their profile
                return render("get_customer", customer_id=b.customer_id)
            return render("return_item", order_id=r.order_id, item_id=job.item, payment_id=job.payment)
        if r.kind == "adjust":
            return render("refund", order_id=r.order_id, amount=job.amount, payment_id=job.payment,
                          reason=ADJUST_REASON)
        return None

    def answer(self) -> str:
        """What it tells the customer: each request and what came of it."""
        parts = []
        for job in self.b.jobs:
            r = job.request
            what = {"cancel": "cancel", "address": "change the address of", "exchange": "exchange an item of",
                    "return": "return an item of", "adjust": "adjust the price of"}[r.kind]
            if job.dropped or (job.open and job.request.order_id not in self.b.orders):
                continue
            if job.note.startswith("cannot"):
                parts.append(f"I could not {what} order {r.order_id} ({job.note[len('cannot: '):]}).")
            elif job.note == "no price difference":
                parts.append(f"Order {r.order_id}: the price has not changed, so there is nothing to refund.")
            else:
                parts.append(f"Done: {what} order {r.order_id}.")
        return " ".join(parts) or "I could not help with this ticket."

    # -- sampling (at a temperature: cir.agents.modelfree's sampled_choice) -------------------------
    @property
    def turn(self) -> int:
        return sum(self.b.sent.values())

    def alternatives(self, reply: str) -> list[str]:
        """What else it might plausibly call instead of ``reply``: the order at hand, the profile."""
        b = self.b
        out: list[str] = []
        i = b.current()
        if i is not None:
            out.append(render("get_order", order_id=b.jobs[i].request.order_id))
        if b.customer_id is not None:
            out.append(render("get_customer", customer_id=b.customer_id))
        return [c for c in out if c != reply]
