"""The service desk's LLM prompt: the store's policy, its tools (the kit lists them and says how to
call), and one worked example.

:data:`INSTRUCTIONS` is the store's policy as a service agent is told it. :func:`worked_example`
is a whole ticket solved with the real tools on a small store of its own (:data:`EXAMPLE_SQL`: a
product none of the splits sells), made by running the calls through the family's env, so every
answer in it is exactly what the tools answer: the customer found by email, an order read and
cancelled and read again, a delivered item exchanged for the customer's second choice because
the first is out of stock, and the reply to the customer. The kit derives the rest of the prompt
(:func:`cir.tools.prompt.tool_prompt`): the tools' signatures and descriptions, the call syntax
(``name(arg="value")``, one call per reply) and a parser that reads a call from a reply.
"""

from __future__ import annotations

from cir.families.service_desk.store import SCHEMA

INSTRUCTIONS = """\
You are a customer service agent of an online store. Solve the customer's ticket with the store's tools, \
following the store's policy:
- Find the customer by the email address of the ticket first.
- Only pending orders can be cancelled. A shipping address can be changed until the order ships (while it is \
pending or processing).
- Only delivered items can be exchanged or returned. An exchange must be for another variant of the same product \
that is in stock: the customer's first choice if it is available, else their second choice.
- A return is refunded to the order's original payment method, whatever the customer asks.
- A price adjustment refunds the difference between the price paid and the item's current price, once, to the \
original payment method.
- Do only what the ticket asks, and never make a change twice.
- Records change while you work (orders move on, stock sells out, customers update their details): read a record \
before you act on it.
When every request is handled, call finish with your reply to the customer."""

EXAMPLE_TICKET = """\
Ticket T-example-0001, opened 2025-03-14T09:00, from Ada Moreno <ada.moreno7@example.com>:

Hello, I need help with a few things.
1. Please cancel order W2001: I ordered it by mistake.
2. In order W2002, please exchange my Table Fan (color: white, speed: 3) for color: black, speed: 3; if it is \
out of stock, color: grey, speed: 3 will do.
Thank you!"""

EXAMPLE_SQL = SCHEMA + """
INSERT INTO clock VALUES (0);
INSERT INTO customers VALUES ('C3001', 'Ada Moreno', 'ada.moreno7@example.com', '12 Hill Road', 'Boise', 'ID',
    '83702', '2024-11-02T10:15');
INSERT INTO payment_methods VALUES ('credit_card_4821', 'C3001', 'credit_card', 'Visa ending 4821');
INSERT INTO products VALUES ('P900', 'Table Fan', 'home');
INSERT INTO variants VALUES ('I9001', 'P900', '{"color": "white", "speed": "3"}', 39.99, 4, '2025-03-01T08:00');
INSERT INTO variants VALUES ('I9002', 'P900', '{"color": "black", "speed": "3"}', 39.99, 0, '2025-03-13T17:40');
INSERT INTO variants VALUES ('I9003', 'P900', '{"color": "grey", "speed": "3"}', 41.99, 6, '2025-03-01T08:00');
INSERT INTO products VALUES ('P901', 'Reading Glasses', 'accessories');
INSERT INTO variants VALUES ('I9010', 'P901', '{"strength": "+1.5", "frame": "tortoise"}', 19.99, 9, '2025-02-20T09:00');
INSERT INTO orders VALUES ('W2001', 'C3001', 'pending', '12 Hill Road', 'Boise', 'ID', '83702', 'credit_card_4821',
    '2025-03-13T21:04', '2025-03-13T21:04', NULL);
INSERT INTO order_items VALUES ('W2001', 1, 'I9010', 19.99, 'ordered');
INSERT INTO orders VALUES ('W2002', 'C3001', 'delivered', '12 Hill Road', 'Boise', 'ID', '83702', 'credit_card_4821',
    '2025-03-02T11:30', '2025-03-06T15:12', NULL);
INSERT INTO order_items VALUES ('W2002', 1, 'I9001', 39.99, 'ordered');
INSERT INTO shipments VALUES ('W2002', 'UPS', '1Z4402918833', '2025-03-03T08:00', '2025-03-06T15:12');
"""

EXAMPLE_CALLS = (
    'find_customer(email="ada.moreno7@example.com")',
    'get_order(order_id="W2001")',
    'cancel_order(order_id="W2001", reason="ordered by mistake")',
    'get_order(order_id="W2001")',
    'get_order(order_id="W2002")',
    'get_product(product_id="P900")',
    'exchange_item(order_id="W2002", item_id="I9001", new_item_id="I9003")',
    'get_order(order_id="W2002")',
    'finish(answer="Order W2001 is cancelled and its total refunded to your card. The black fan is out of stock, '
    'so your white fan in order W2002 is exchanged for the grey one; the price difference is charged to your card.")',
)


def worked_example() -> str:
    """The worked example: the ticket, then each call (``> call``) and the store's answer to it."""
    from types import SimpleNamespace

    from cir.families.service_desk.calls import TOOL_MAP
    from cir.families.service_desk.store import set_clock
    from cir.tools.env import ToolEnv
    from cir.tools.state import build_state

    task = SimpleNamespace(task_id="example", instruction=EXAMPLE_TICKET, data={})
    env = ToolEnv(task, tools=TOOL_MAP, state=build_state("sqlite", EXAMPLE_SQL), check=lambda *_: True,
                  refresh_query='get_customer(customer_id="C3001")', on_clock=set_clock)
    lines = [env.reset()]
    for call in EXAMPLE_CALLS:
        answer, _, _ = env.step(call)
        lines += [f"> {call}", answer]
    env.close()
    return "\n".join(lines)
