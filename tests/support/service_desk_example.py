"""The worked example's store (cir/families/service_desk/prompts.py) for the service desk's tests: its
calls and their true answers."""

from __future__ import annotations

from types import SimpleNamespace

from cir.families.service_desk.calls import TOOL_MAP
from cir.families.service_desk.env import StoreEnv
from cir.families.service_desk.prompts import EXAMPLE_CALLS, EXAMPLE_SQL, EXAMPLE_TICKET
from cir.tools.state import build_state

FIND, READ1, CANCEL, VERIFY1, READ2, PRODUCT, EXCHANGE, VERIFY2 = EXAMPLE_CALLS[:8]

def answers(calls, sql=EXAMPLE_SQL):
    """The true answers of ``calls`` on a fresh example store, in order."""
    task = SimpleNamespace(task_id="t", instruction=EXAMPLE_TICKET, data={})
    env = StoreEnv(task, tools=TOOL_MAP, state=build_state("sqlite", sql), check=lambda *_: True,
                   refresh_query='get_customer(customer_id="C3001")')
    env.reset()
    out = [env.step(c)[0] for c in calls]
    env.close()
    return out
