"""The service desk's env: the kit's :class:`~cir.tools.env.ToolEnv` with the store's clock.

The world clock of a tool world (env actions so far, a refresh's too) is the store's clock:
before each env action it is written into the database's ``clock`` row, so that a change the
tools make is stamped with the store time it happens at (``updated_at``, a refund's
``created_at``) and a restore brings the clock back with every row (a ``lagK`` read is then
answered, and stamped, as at the earlier time). The world events of the task (:mod:`.generate`)
carry their own times.
"""

from __future__ import annotations

import json
from typing import Any

from cir.families.service_desk.store import set_clock
from cir.tools.env import ToolEnv


class StoreEnv(ToolEnv):
    """A :class:`~cir.tools.env.ToolEnv` whose database knows the time (see the module docstring)."""

    def step(self, action: str) -> tuple[str, bool, bool]:
        if not self.done:
            set_clock(self.handle, self.clock)
        return super().step(action)


def refresh_query(task: Any) -> str:
    """What a refresh sends when it has no call to re-run: the ticket's customer's profile."""
    customer = (getattr(task, "data", None) or {}).get("customer_id", "")
    return f"get_customer(customer_id={json.dumps(customer)})"
