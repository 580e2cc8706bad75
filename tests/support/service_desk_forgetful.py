"""The service-desk family with a database restore that forgets: a table (the refunds) or a row
(the order changed last). ``cir check-env`` and ``cir run`` must catch both."""

from __future__ import annotations

import dataclasses
from typing import Any

from cir.families.service_desk.family import FAMILY, world
from cir.tools.state import SqliteState


class ForgetsRefunds(SqliteState):
    """A restore that keeps the refunds of now."""

    def _put(self, snapshot: Any) -> None:
        rows = [tuple(r) for r in self.conn.execute("SELECT * FROM refunds").fetchall()]
        super()._put(snapshot)
        self.conn.execute("DELETE FROM refunds")
        self.conn.executemany(f"INSERT INTO refunds VALUES ({', '.join('?' * 8)})", rows)


class ForgetsOrderRow(SqliteState):
    """A restore that keeps the order changed last as it is now."""

    def _put(self, snapshot: Any) -> None:
        row = self.conn.execute("SELECT rowid, * FROM orders ORDER BY updated_at DESC, order_id LIMIT 1").fetchone()
        super()._put(snapshot)
        if row is not None:
            self.conn.execute("UPDATE orders SET status = ?, address1 = ?, updated_at = ?, cancel_reason = ? "
                              "WHERE rowid = ?", (row["status"], row["address1"], row["updated_at"],
                                                  row["cancel_reason"], row["rowid"]))


FORGETS_TABLE = dataclasses.replace(FAMILY, name="service-desk-forgets-table", make_env=world(ForgetsRefunds).make_env)
FORGETS_ROW = dataclasses.replace(FAMILY, name="service-desk-forgets-row", make_env=world(ForgetsOrderRow).make_env)
