"""The worked example's store (cir/families/service_desk/prompts.py) for the service desk's tests: its
calls and their true answers."""

from __future__ import annotations

from cir.families.service_desk.family import WORLD
from cir.families.service_desk.prompts import EXAMPLE_CALLS, EXAMPLE_SQL, EXAMPLE_TICKET
from cir.tools.tasks import ToolTask

FIND, READ1, CANCEL, VERIFY1, READ2, PRODUCT, EXCHANGE, VERIFY2 = EXAMPLE_CALLS[:8]

def answers(calls, sql=EXAMPLE_SQL):
    """The true answers of ``calls`` on a fresh example store, in order."""
    env = WORLD.make_env(ToolTask("t", EXAMPLE_TICKET, sql, data={"customer_id": "C3001"}))
    env.reset()
    out = [env.step(c)[0] for c in calls]
    env.close()
    return out
