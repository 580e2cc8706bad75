"""The named mechanisms by which the service-desk agent fails, is rescued or is harmed.

As for ALFWorld's agent (:mod:`cir.families.alfworld.agent.mechanisms`), every random choice is
a :class:`cir.agents.modelfree.Draws` call keyed by the task, the agent's seed and *content*: the
mechanism's name and what it is about (an order id, a call and how often it was sent, the
ordinal of a harness message of one kind), never a message's position. So an extra harness
message changes an episode only through what it says and through the mechanisms whose role is
``rescue``, ``harm``, ``sampling`` or ``harness`` (:data:`DIVERGENCE_MECHANISMS`), which is what
``cir explain`` reports a divergence between two arms by. ``docs/service-desk.md`` gives each one
and why it is there.
"""

from __future__ import annotations

from cir.agents.modelfree import (
    BUDGET,
    Mechanism,
    divergence_mechanisms,
    mechanism_table,
    sampled_choice,
)

_ALL = (
    # slips of a plain run
    Mechanism("wrong_item", "slip", "wrong_item",
              "an order holds two variants of the product the customer names: it acts on the first listed, "
              "not the one whose options the ticket gives"),
    Mechanism("wrong_variant", "slip", "wrong_variant",
              "picks the variant matching the first option the customer wants but not the second (the right "
              "colour in the wrong size): the exchange is accepted and wrong"),
    Mechanism("forget_request", "slip", "forget_request",
              "overlooks the last request of a ticket of several and answers the customer without it"),
    Mechanism("obey_customer", "slip", "obey_customer",
              "refunds a return to the payment method the customer asks for instead of the original one, "
              "against the policy"),
    Mechanism("extra_lookup", "slip", "extra_lookup",
              "opens the customer's profile first although no request needs it (an env action: the store "
              "moves on meanwhile)"),
    # how it corrects itself without help
    Mechanism("reread_missing", "self_correction", "reread_missing",
              "a result that did not arrive (the missing text): it makes the same read again"),
    Mechanism("reread_mismatch", "self_correction", "misread",
              "a result that visibly answers another call (another record's id, or another kind of record): "
              "it makes its call again (after a change, it reads the order); the chance is 1 - misread, and "
              "another kind of record is always asked again"),
    Mechanism("poll_write", "self_correction", "lost_write",
              "a result about its own change does not show it: it reads the order once more before doing "
              "anything else (the chance is 1 - lost_write; read twice without it, it trusts its change)"),
    # what a stale or missing result does to it
    Mechanism("assume_missing", "error", "reread_missing",
              "a result of an order's read did not arrive: it goes on as if the order were as the ticket says "
              "(pending) instead of reading it again (the chance is 1 - reread_missing)"),
    Mechanism("give_up", "error", "give_up",
              "a read about a request did not answer (the missing text): it tells itself the store is not "
              "answering and gives that request up (until a harness message or a refreshed record reopens it)"),
    Mechanism("misread_other", "error", "misread",
              "a result of another order (another id) answers its read: it takes that order's status and items "
              "for the one it asked about"),
    Mechanism("lost_write", "error", "lost_write",
              "a result about its own change (the change's answer, or a read right after it) shows the record "
              "without the change: it believes the change was lost and makes it again (a second refund is "
              "accepted: a duplicate)"),
    Mechanism("retry_missing", "error", "retry_missing",
              "the answer to one of its changes did not arrive: it makes the change again at once (a second "
              "refund is accepted: a duplicate)"),
    # what a harness message does to it
    Mechanism("refresh_correction", "rescue", "refresh_correction",
              "a refreshed record contradicts what it believes (a status, a variant's stock, a price, the saved "
              "address, its own change applied after all): it believes the refreshed record and re-plans "
              "(redoes an address, reopens a price adjustment, drops a re-issue, takes the wanted variant)"),
    Mechanism("harness_recheck", "rescue", "harness_recheck",
              "a harness message makes it re-read the record it is least sure of: one whose last result was "
              "missing, answered another call, or did not show its own change"),
    Mechanism("over_correct", "harm", "over_correct",
              "a harness message right after one of its changes makes it doubt the change and make it again "
              "(a second refund is accepted: a duplicate; another change is refused and costs an env action)"),
    Mechanism("interruption", "harm", "interruption",
              "a harness message in the middle of a ticket of several requests makes it lose the rest: it "
              "finishes after the request at hand"),
    Mechanism("distraction", "harm", "distraction",
              "a refreshed record that lists several items (an order) or variants (a product) pulls it to the "
              "first one listed for the change it is about to make"),
    # what sampling does (only at a temperature above 0: cir.agents.sampling)
    sampled_choice("a re-read of the order at hand, the customer's profile"),
    # what the harness and the world do
    Mechanism("world_clock", "harness", None,
              "a record shows a change the store made on its own schedule during the ticket that it had not seen "
              "(an order moved on, the wanted variant sold out or came back, a sale started, the customer saved "
              "an address); every env action is a minute of the store, a recovery's too, so after a refresh the "
              "store's schedule runs one action ahead of its calls: this is how the time a recovery takes changes "
              "what it reads"),
    BUDGET,
    Mechanism("rewind", "harness", None,
              "a rewind restored the store and its context to before the suspect result: it makes that call again"),
)

MECHANISMS: dict[str, Mechanism] = mechanism_table(_ALL)

#: the mechanisms through which a recovery operation can change an episode (and, at a
#: temperature, the sampled choices through which two draws of one state part)
DIVERGENCE_MECHANISMS: frozenset[str] = divergence_mechanisms(_ALL)
