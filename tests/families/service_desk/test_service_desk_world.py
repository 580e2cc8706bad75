"""The service desk's world: the tools (what the backend refuses, what it accepts), the policy's
check, the store's clock and the generator (deterministic, splits apart, solvable)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from cir.episode.harness import Harness
from cir.families.registry import get_family
from cir.families.service_desk.agent.builtin import ServiceDeskAgent
from cir.families.service_desk.catalog import CATALOGS
from cir.families.service_desk.check import solved, stock_at
from cir.families.service_desk.family import WORLD
from cir.families.service_desk.generate import SPLITS, careful_plan, generate_task
from cir.families.service_desk.prompts import EXAMPLE_SQL, EXAMPLE_TICKET
from cir.families.service_desk.shown import anomalous, shown_kind
from cir.families.service_desk.store import store_time, tick_of
from cir.families.service_desk.tickets import parse_ticket, ticket_text
from cir.tools.tasks import ToolTask


def env_of(sql=EXAMPLE_SQL, events=(), data=None):
    return WORLD.make_env(ToolTask("t", EXAMPLE_TICKET, sql, "valid", "example", events,
                                   {"customer_id": "C3001", **(data or {})}))


def call(env, text):
    return json.loads(env.step(text)[0])


def test_the_backend_refuses_what_status_and_stock_forbid():
    env = env_of()
    env.reset()
    assert "error" in call(env, 'exchange_item(order_id="W2001", item_id="I9010", new_item_id="I9002")')  # pending
    assert "out of stock" in call(env, 'exchange_item(order_id="W2002", item_id="I9001", new_item_id="I9002")')["error"]
    assert call(env, 'cancel_order(order_id="W2001", reason="ordered by mistake")')["status"] == "cancelled"
    refused = call(env, 'cancel_order(order_id="W2001", reason="ordered by mistake")')
    assert refused == {"error": "order W2001 is cancelled; only pending orders can be cancelled"}
    assert "before it ships" in call(env, 'change_address(order_id="W2002", address1="1 A St", city="B", '
                                          'state="ID", zip="83702")')["error"]
    assert "status" in call(env, 'return_item(order_id="W2002", item_id="I9001", payment_id="credit_card_4821")')
    assert "already returned" in call(env, 'return_item(order_id="W2002", item_id="I9001", '
                                           'payment_id="credit_card_4821")')["error"]


def test_the_backend_accepts_a_request_made_on_a_stale_value():
    env = env_of()
    env.reset()
    refund = 'refund(order_id="W2002", amount=5.0, payment_id="credit_card_4821", reason="price adjustment")'
    first, second = call(env, refund), call(env, refund)  # no idempotency key: a duplicate is accepted
    assert len(second["refunds"]) == len(first["refunds"]) + 1 == 2
    assert "left to refund" in call(env, refund.replace("5.0", "500.0"))["error"]
    moved = call(env, 'change_address(order_id="W2001", address1="1 Old Rd", city="Boise", state="ID", zip="83702")')
    assert moved["address"]["address1"] == "1 Old Rd"  # any address: the backend cannot know it is stale


def test_changes_are_stamped_with_the_store_time_and_a_restore_brings_the_clock_back():
    env = env_of()
    env.reset()
    call(env, 'get_order(order_id="W2001")')
    snap = env.snapshot()
    done = call(env, 'cancel_order(order_id="W2001", reason="no longer needed")')
    assert done["updated_at"] == store_time(1) and tick_of(done["refunds"][0]["created_at"]) == 1
    env.restore(snap)
    call(env, 'get_order(order_id="W2002")')
    again = call(env, 'cancel_order(order_id="W2001", reason="no longer needed")')
    assert again["updated_at"] == store_time(2)


def test_the_back_office_processes_a_change_a_minute_after_it_is_made():
    from cir.families.service_desk.shown import differs_in_content

    env = env_of()
    env.reset()
    snap = env.snapshot()
    done = env.step('cancel_order(order_id="W2001", reason="no longer needed")')[0]
    assert json.loads(done)["refunds"][0]["status"] == "pending"  # the change's own answer: just made
    read = env.step('get_order(order_id="W2001")')[0]
    assert json.loads(read)["refunds"][0]["status"] == "completed"  # a minute later: settled
    # the change's answer shown for the read is out of date in content, not only in its times
    assert differs_in_content(done, read)
    swapped = call(env, 'exchange_item(order_id="W2002", item_id="I9001", new_item_id="I9003")')
    assert [e["status"] for e in swapped["exchanges"]] == ["requested"]
    assert [e["status"] for e in call(env, 'get_order(order_id="W2002")')["exchanges"]] == ["approved"]
    env.restore(snap)  # the clock comes back with the rows: the same change is just made again
    assert env.step('cancel_order(order_id="W2001", reason="no longer needed")')[0] == done


def test_world_events_fire_on_the_clock_and_a_refresh_is_time_too():
    from cir.tools.env import Event

    ship = Event(2, "UPDATE orders SET status = 'processing', updated_at = '2025-03-14T09:02' WHERE order_id = 'W2001';")
    env = env_of(events=(ship,))
    env.reset()
    call(env, 'get_order(order_id="W2001")')
    assert call(env, 'get_order(order_id="W2001")')["status"] == "pending"  # fires after the 2nd env action
    assert "only pending" in call(env, 'cancel_order(order_id="W2001", reason="no longer needed")')["error"]


def test_the_refresh_of_a_change_reads_the_order_it_changed():
    env = env_of()
    assert env.refresh_for('cancel_order(order_id="W2001", reason="no longer needed")') == 'get_order(order_id="W2001")'
    assert env.refresh_for('get_product(product_id="P900")') == 'get_product(product_id="P900")'


@pytest.mark.parametrize("action, shown, kind", [
    ('get_order(order_id="W1")', '{"order_id": "W1", "status": "pending", "items": [], "refunds": [], "exchanges": []}',
     "looks_right"),
    ('get_order(order_id="W1")', '{"order_id": "W2", "status": "pending", "items": [], "refunds": [], "exchanges": []}',
     "anomalous"),
    ('get_order(order_id="W1")', '{"product_id": "P1", "variants": []}', "anomalous"),
    ('get_order(order_id="W1")', '{"error": "no order"}', "anomalous"),
    ('get_order(order_id="W1")', "[Observation unavailable.]", "anomalous"),
    ('get_product(product_id="P1")', '{"product_id": "P1", "name": "x", "variants": []}', "looks_right"),
])
def test_what_a_shown_result_is(action, shown, kind):
    assert shown_kind(action, shown, '{"true": 1}') == kind
    assert shown_kind(action, shown, shown) == "true"
    assert anomalous(action, shown) == (kind == "anomalous")


def test_the_family_s_shown_column_uses_its_own_rule():
    from cir.families.service_desk.family import FAMILY

    # a product shown for get_order has no id that disagrees: the kit's generic rule, knowing no shape
    # yet, would call it looking right; the family knows what each tool answers with
    shown = '{"product_id": "P1", "name": "x", "variants": []}'
    assert FAMILY.anomalous('get_order(order_id="W1")', shown)
    assert not FAMILY.anomalous('get_product(product_id="P1")', shown)
    assert FAMILY.anomalous(None, "[Observation unavailable.]")


def test_the_generator_is_deterministic_and_prefix_stable_and_the_splits_sell_apart():
    a, b = generate_task("valid", 3, 5), generate_task("valid", 3, 5)
    assert (a.sql, a.events, a.instruction, a.data) == (b.sql, b.events, b.instruction, b.data)
    assert generate_task("valid", 4, 5).sql != a.sql
    names = {split: {p.name for p in CATALOGS[split]} for split in SPLITS}
    assert not names["valid"] & names["test"] and not names["train"] & names["valid"]


def test_tickets_read_back_as_they_were_written():
    for i in range(100, 130):  # generator seeds no study or calibration uses
        draft = generate_task("test", 2, i)
        ticket = parse_ticket(draft.instruction)
        assert ticket is not None and ticket_text(ticket).splitlines()[0] == draft.instruction.splitlines()[0]
        assert [r.kind for r in ticket.requests] == draft.task_type.split("+")
        assert [r.order_id for r in ticket.requests] == [r["order_id"] for r in draft.data["requests"]]
        assert len(careful_plan(ticket)) == draft.data["careful_plan_length"]


def test_a_careful_agent_solves_every_generated_ticket(tmp_path):
    """The world is consistent with its check: every slip off, the verify habit on, no ticket fails
    (a deadline's slack is counted from exactly this agent's plan)."""
    family = get_family("service-desk")
    family.generate(tmp_path, "train", 25, 11, progress=False)
    careful = ServiceDeskAgent("default", seed=0, overrides={
        "wrong_item": 0.0, "wrong_variant": 0.0, "forget_request": 0.0, "obey_customer": 0.0, "extra_lookup": 0.0,
        "verify": 1.0})
    for task in family.load_tasks(tmp_path / "train"):
        transcript = Harness(careful).episode(family.make_env(task), task.task_id)
        assert transcript.won, task.task_id
        assert transcript.env_actions == task.data["careful_plan_length"] or "exchange" in task.task_type


def test_the_check_wants_each_request_done_once_and_nothing_else():
    draft = generate_task("valid", 9, 0)
    assert stock_at([[0, 2], [3, 1], [5, 0]], 4) == 1 and stock_at([[0, 2], [3, 1], [5, 0]], 5) == 0
    family = get_family("service-desk")
    task = SimpleNamespace(**{"task_id": draft.task_id, "data": draft.data})
    env = family.make_env(SimpleNamespace(task_id=draft.task_id, initial=draft.sql, events=(), data=draft.data,
                                          instruction=draft.instruction))
    env.reset()
    assert not solved(env.handle, task, "")  # nothing done yet
