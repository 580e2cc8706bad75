"""The service-desk agent as an instrument: each mechanism where it fires and what it does, on the
worked example's store (a pending order to cancel, a delivered fan to exchange whose first choice
is out of stock), plus common random numbers, the memo and the careful plan."""

from __future__ import annotations

import json

import pytest
from support.service_desk_example import (
    CANCEL,
    EXCHANGE,
    FIND,
    PRODUCT,
    READ1,
    READ2,
    VERIFY1,
    answers,
)

from cir.episode.perturb import MISSING_TEXT
from cir.episode.protocol import PLACEBO_TEXT, REFRESH_PREFIX, REPLAN_TEXT
from cir.episode.recovery import rewind_memory
from cir.episode.transcript import Step
from cir.families.service_desk.agent.builtin import PROFILES, ServiceDeskAgent
from cir.families.service_desk.agent.mechanisms import DIVERGENCE_MECHANISMS, MECHANISMS
from cir.families.service_desk.prompts import EXAMPLE_CALLS, EXAMPLE_SQL, EXAMPLE_TICKET

#: every slip off and the verify habit on: the agent makes exactly the example's calls
CAREFUL = {"wrong_item": 0.0, "wrong_variant": 0.0, "forget_request": 0.0, "obey_customer": 0.0,
           "extra_lookup": 0.0, "verify": 1.0, "interruption": 0.0, "over_correct": 0.0, "harness_recheck": 0.0,
           "distraction": 0.0}


def context(calls, shown, extra=()):
    msgs = [{"role": "user", "content": EXAMPLE_TICKET}]
    for call, text in zip(calls, shown, strict=True):
        msgs += [{"role": "assistant", "content": call}, {"role": "user", "content": text}]
    return msgs + [{"role": "user", "content": m} for m in extra]


def agent(**overrides):
    return ServiceDeskAgent("default", seed=0, overrides={**CAREFUL, **overrides})


def act(calls, shown, extra=(), **overrides):
    reply, read, decided = agent(**overrides).act_traced(context(calls, shown, extra))
    return reply, {f.mechanism for f in read} | {f.mechanism for f in decided}


def test_the_careful_agent_makes_the_worked_examples_calls():
    calls, shown = [], []
    for expected in EXAMPLE_CALLS[:8]:
        reply, fired = act(calls, shown)
        assert reply == expected
        calls.append(reply)
        shown = answers(calls)
    reply, _ = act(calls, shown)
    assert reply.startswith("finish(") and "W2001" in reply and "W2002" in reply


def test_every_mechanism_is_named_with_a_role_and_the_divergence_ones_are_those_a_recovery_reaches():
    assert {m.role for m in MECHANISMS.values()} <= {"slip", "self_correction", "error", "rescue", "harm",
                                                     "sampling", "harness"}
    assert DIVERGENCE_MECHANISMS == {m.name for m in MECHANISMS.values()
                                     if m.role in ("rescue", "harm", "sampling", "harness")}
    assert {"world_clock", "refresh_correction", "harness_recheck", "over_correct", "interruption",
            "distraction", "rewind", "budget"} <= DIVERGENCE_MECHANISMS
    for profile in PROFILES.values():
        assert set(profile) == set(PROFILES["default"])


@pytest.mark.parametrize("overrides, reply, fired", [
    ({"reread_missing": 1.0, "give_up": 0.0}, READ1, "reread_missing"),
    ({"reread_missing": 0.0, "give_up": 0.0}, CANCEL, "assume_missing"),
    ({"give_up": 1.0}, READ2, "give_up"),
])
def test_a_missing_read_is_made_again_assumed_or_given_up(overrides, reply, fired):
    calls = [FIND, READ1]
    shown = [*answers([FIND]), MISSING_TEXT]
    got, mechanisms = act(calls, shown, **overrides)
    assert (got, fired in mechanisms) == (reply, True)


def test_a_result_of_another_order_is_read_again_or_misread():
    calls = [FIND, READ1]
    other = answers([READ2])[0]  # W2002: delivered
    got, fired = act(calls, [answers([FIND])[0], other], misread=0.0)
    assert (got, "reread_mismatch" in fired) == (READ1, True)
    got, fired = act(calls, [answers([FIND])[0], other], misread=1.0)
    assert "misread_other" in fired and got == READ2  # it took W2001 for delivered: cannot cancel, on to W2002


def test_a_result_of_another_kind_is_always_asked_again():
    calls = [FIND, READ1]
    got, fired = act(calls, [answers([FIND])[0], answers([FIND])[0]], misread=1.0)
    assert (got, fired) == (READ1, {"reread_mismatch"})


def test_a_read_that_does_not_show_its_own_change_makes_it_change_again_or_read_again():
    calls = [FIND, READ1, CANCEL, VERIFY1]
    true = answers(calls)
    stale = [*true[:3], true[1]]  # the verify read shows the order before the cancel (lag1)
    assert act(calls, stale, lost_write=1.0) == (CANCEL, {"lost_write"})
    assert act(calls, stale, lost_write=0.0) == (VERIFY1, {"poll_write"})


def test_a_missing_answer_to_a_change_is_retried_or_checked():
    calls = [FIND, READ1, CANCEL]
    shown = [*answers(calls[:2]), MISSING_TEXT]
    assert act(calls, shown, retry_missing=1.0) == (CANCEL, {"retry_missing"})
    assert act(calls, shown, retry_missing=0.0)[0] == VERIFY1


def test_a_refreshed_record_corrects_a_stale_belief():
    calls = [FIND, READ1, CANCEL, VERIFY1, READ2, PRODUCT]
    true = answers(calls)
    product = json.loads(true[5])
    stale = json.loads(true[5])
    for v in stale["variants"]:
        if v["item_id"] == "I9002":
            v["stock"] = 2  # the first choice shown in stock, as a lagging replica might
    shown = [*true[:5], json.dumps(stale)]
    assert act(calls, shown)[0] == 'exchange_item(order_id="W2002", item_id="I9001", new_item_id="I9002")'
    refreshed = f"{REFRESH_PREFIX} {json.dumps(product)}"
    got, fired = act(calls, shown, [refreshed], refresh_correction=1.0)
    assert got == EXCHANGE and "refresh_correction" in fired
    got, fired = act(calls, shown, [refreshed], refresh_correction=0.0)
    assert "refresh_correction" not in fired and "I9002" in got


def test_a_harness_message_makes_it_recheck_what_it_is_least_sure_of():
    calls = [FIND, READ1]
    shown = [*answers([FIND]), MISSING_TEXT]
    got, fired = act(calls, shown, [REPLAN_TEXT], give_up=1.0, harness_recheck=1.0)
    assert (got, "harness_recheck" in fired) == (READ1, True)  # the request it gave up is open again
    got, _ = act(calls, shown, [REPLAN_TEXT], give_up=1.0, harness_recheck=0.0)
    assert got == READ2


def test_a_harness_message_right_after_a_change_may_make_it_change_again():
    calls = [FIND, READ1, CANCEL]
    shown = answers(calls)
    assert act(calls, shown, [REPLAN_TEXT], over_correct=1.0) == (CANCEL, {"over_correct"})
    assert act(calls, shown, [PLACEBO_TEXT], over_correct=0.0) == (VERIFY1, set())
    assert act(calls, shown, over_correct=1.0) == (VERIFY1, set())  # no message, no doubt


def test_an_interruption_drops_the_rest_of_the_ticket_where_it_acts():
    calls = [FIND, READ1, CANCEL]
    shown = answers(calls)
    got, fired = act(calls, shown, [REPLAN_TEXT], interruption=1.0)
    assert got == VERIFY1 and "interruption" in fired
    calls2 = [*calls, VERIFY1]
    msgs = context(calls, shown, [REPLAN_TEXT]) + [{"role": "assistant", "content": VERIFY1},
                                                    {"role": "user", "content": answers(calls2)[3]}]
    reply, read, decided = agent(interruption=1.0).act_traced(msgs)
    assert reply.startswith("finish(") and "W2002" not in reply
    assert [f.mechanism for f in decided] == ["interruption"]


def test_a_store_change_it_had_not_seen_is_the_world_clock():
    calls = [FIND, READ1, CANCEL]
    refused = '{"error": "order W2001 is processing; only pending orders can be cancelled"}'
    got, fired = act(calls, [*answers(calls[:2]), refused])
    assert got == READ2 and fired == {"world_clock"}


def test_a_rewind_makes_it_redo_what_was_discarded_and_says_so_where_it_acts():
    calls = [FIND, READ1]
    shown = answers(calls)
    abandoned = [Step("agent", c, c, "x", "x") for c in (CANCEL, VERIFY1)]
    msgs = context(calls, shown, [rewind_memory(abandoned)])
    reply, read, decided = agent().act_traced(msgs)
    assert reply == CANCEL
    assert [f.mechanism for f in read] == ["rewind"] and [f.mechanism for f in decided] == ["rewind"]


@pytest.mark.parametrize("slip", ["extra_lookup"])
def test_a_slip_fires_where_its_chance_is_one(slip):
    reply, fired = act([FIND], answers([FIND]), **{slip: 1.0})
    assert reply == 'get_customer(customer_id="C3001")' and fired == {slip}


def test_forget_request_answers_without_the_last_request():
    calls = [FIND, READ1, CANCEL, VERIFY1]
    reply, fired = act(calls, answers(calls), forget_request=1.0)
    assert reply.startswith("finish(") and fired == {"forget_request"}


def test_the_memo_changes_no_reply():
    calls = [FIND, READ1, CANCEL, VERIFY1, READ2, PRODUCT, EXCHANGE]
    msgs = context(calls, answers(calls))
    with_memo = ServiceDeskAgent("default", seed=3)
    without = ServiceDeskAgent("default", seed=3, memo=False)
    for n in range(1, len(msgs) + 1, 2):
        assert with_memo.act(msgs[:n]) == without.act(msgs[:n])


def test_profiles_share_their_draws_and_a_seed_changes_them():
    """Common random numbers: a chance raised fires wherever it fired before."""
    calls = [FIND, READ1]
    shown = [*answers([FIND]), MISSING_TEXT]
    fired_at = {}
    for chance in (0.2, 0.5, 0.8):
        fired_at[chance] = {seed for seed in range(40)
                            if "give_up" in {f.mechanism for f in ServiceDeskAgent(
                                "default", seed=seed, overrides={"give_up": chance}).act_traced(context(calls, shown))[1]}}
    assert fired_at[0.2] <= fired_at[0.5] <= fired_at[0.8] and fired_at[0.2] != fired_at[0.8]


def test_bad_profiles_and_parameters_are_refused():
    from cir.util.errors import CirError

    with pytest.raises(CirError, match="profiles are weak, default, strong|profiles are default, weak, strong"):
        ServiceDeskAgent("genius")
    with pytest.raises(CirError, match="unknown"):
        ServiceDeskAgent(overrides={"luck": 1.0})
    with pytest.raises(CirError, match="chance from 0 to 1"):
        ServiceDeskAgent(overrides={"give_up": 2.0})


# -- a second store: an order of two fans, a return the customer wants on PayPal ---------------------
TICKET2 = """\
Ticket T-example-0002, opened 2025-03-14T09:00, from Ada Moreno <ada.moreno7@example.com>:

Hello, I need help with a few things.
1. In order W2003, please exchange my Table Fan (color: grey, speed: 3) for color: black, speed: 3; if it is \
out of stock, color: white, speed: 3 will do.
2. I'd like to return my Reading Glasses (strength: +1.5, frame: tortoise) of order W2004. Please put the money on \
my PayPal account.
Thank you!"""
SQL2 = EXAMPLE_SQL.replace("'I9002', 'P900', '{\"color\": \"black\", \"speed\": \"3\"}', 39.99, 0,",
                           "'I9002', 'P900', '{\"color\": \"black\", \"speed\": \"3\"}', 39.99, 5,") + """
INSERT INTO variants VALUES ('I9004', 'P900', '{"color": "black", "speed": "5"}', 44.99, 3, '2025-03-01T08:00');
INSERT INTO payment_methods VALUES ('paypal_5512', 'C3001', 'paypal', 'ada.moreno');
INSERT INTO orders VALUES ('W2003', 'C3001', 'delivered', '12 Hill Road', 'Boise', 'ID', '83702', 'credit_card_4821',
    '2025-03-02T11:30', '2025-03-06T15:12', NULL);
INSERT INTO order_items VALUES ('W2003', 1, 'I9001', 39.99, 'ordered');
INSERT INTO order_items VALUES ('W2003', 2, 'I9003', 41.99, 'ordered');
INSERT INTO orders VALUES ('W2004', 'C3001', 'delivered', '12 Hill Road', 'Boise', 'ID', '83702', 'credit_card_4821',
    '2025-03-02T11:30', '2025-03-06T15:12', NULL);
INSERT INTO order_items VALUES ('W2004', 1, 'I9010', 19.99, 'ordered');
"""
READ3 = 'get_order(order_id="W2003")'


def act2(calls, extra=(), **overrides):
    shown = answers(calls, SQL2)
    msgs = [{"role": "user", "content": TICKET2}]
    for call, text in zip(calls, shown, strict=True):
        msgs += [{"role": "assistant", "content": call}, {"role": "user", "content": text}]
    msgs += [{"role": "user", "content": m} for m in extra]
    reply, read, decided = agent(**overrides).act_traced(msgs)
    return reply, {f.mechanism for f in read} | {f.mechanism for f in decided}


def test_wrong_item_acts_on_the_first_listed_variant_of_the_product():
    calls = [FIND, READ3, PRODUCT]
    assert "item_id=\"I9003\"" in act2(calls)[0]
    assert "wrong_item" in act2([FIND, READ3], wrong_item=1.0)[1]  # fired reading the order
    assert 'item_id="I9001"' in act2(calls, wrong_item=1.0)[0]


def test_wrong_variant_takes_the_first_option_right_and_the_second_wrong():
    calls = [FIND, READ3, PRODUCT]
    assert 'new_item_id="I9002"' in act2(calls)[0]
    got, fired = act2(calls, wrong_variant=1.0)
    assert 'new_item_id="I9004"' in got and "wrong_variant" in fired


def test_obey_customer_refunds_where_the_customer_asks():
    first = [FIND, READ3, PRODUCT, 'exchange_item(order_id="W2003", item_id="I9003", new_item_id="I9002")', READ3]
    calls = [*first, 'get_order(order_id="W2004")']
    assert act2(calls)[0] == 'return_item(order_id="W2004", item_id="I9010", payment_id="credit_card_4821")'
    got, fired = act2(calls, obey_customer=1.0)
    assert got == 'get_customer(customer_id="C3001")' and "obey_customer" in fired
    got, _ = act2([*calls, 'get_customer(customer_id="C3001")'], obey_customer=1.0)
    assert got == 'return_item(order_id="W2004", item_id="I9010", payment_id="paypal_5512")'


def test_a_refreshed_order_listing_two_items_may_pull_it_to_the_first():
    shown = answers([FIND, READ3, PRODUCT], SQL2)
    refreshed = f"{REFRESH_PREFIX} {shown[1]}"
    msgs = [{"role": "user", "content": TICKET2}, {"role": "assistant", "content": FIND},
            {"role": "user", "content": shown[0]}, {"role": "assistant", "content": READ3},
            {"role": "user", "content": shown[1]}, {"role": "user", "content": refreshed},
            {"role": "assistant", "content": PRODUCT}, {"role": "user", "content": shown[2]}]
    for chance, item in ((1.0, "I9001"), (0.0, "I9003")):
        pulled = agent(distraction=chance)
        assert ("distraction" in {f.mechanism for f in pulled.act_traced(msgs[:6])[1]}) == (chance == 1.0)
        assert f'item_id="{item}"' in pulled.act(msgs)
