"""The state kinds of tool worlds (cir.tools.state): exact restores, digests of content that every
process agrees on, and a restore that is not exact named by what differs."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from cir.tools import state as kinds
from cir.tools.state import ObjectState, SqliteState
from cir.util.errors import RestoreError

SQL = """
CREATE TABLE orders (id TEXT PRIMARY KEY, status TEXT);
CREATE TABLE log (n INTEGER PRIMARY KEY AUTOINCREMENT, text TEXT);
CREATE TABLE plain (a, b);
INSERT INTO orders VALUES ('W1', 'pending'), ('W2', 'pending');
INSERT INTO plain VALUES (1, 'x'), (2, 'y'), (3, 'z');
"""


def _rows(conn):
    return {t: [tuple(r) for r in conn.execute(f'SELECT rowid, * FROM "{t}" ORDER BY rowid')]
            for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


@pytest.mark.parametrize("serialize", [True, False], ids=["pages", "backup-api"])
def test_a_database_comes_back_with_its_schema_rows_and_rowids(monkeypatch, serialize):
    if not serialize:  # Python 3.10's way: the backup API into another in-memory database
        monkeypatch.setattr(kinds, "SERIALIZE", False)
    db = SqliteState.build(SQL)
    conn = db.handle
    snap = db.snapshot()
    schema, rows = conn.execute("SELECT sql FROM sqlite_master ORDER BY name").fetchall(), _rows(conn)
    conn.execute("DELETE FROM plain WHERE a = 2")  # rowid 2 gone: a rebuilt table would renumber
    conn.execute("INSERT INTO log (text) VALUES ('one')")
    conn.execute("ALTER TABLE orders ADD COLUMN note TEXT")
    conn.execute("CREATE INDEX i ON plain (b)")
    conn.execute("PRAGMA user_version = 7")
    db.restore(snap)
    assert [tuple(r) for r in conn.execute("SELECT sql FROM sqlite_master ORDER BY name")] == [tuple(r) for r in schema]
    assert _rows(conn) == rows and conn.execute("PRAGMA user_version").fetchone()[0] == 0
    assert db.handle is conn  # the tools' handle stays the same connection


def test_a_database_restore_that_forgets_a_row_names_it():
    class Forgets(SqliteState):
        def _put(self, snapshot):
            keep = self.conn.execute("SELECT status FROM orders WHERE id = 'W2'").fetchone()[0]
            super()._put(snapshot)
            self.conn.execute("UPDATE orders SET status = ? WHERE id = 'W2'", (keep,))

    db = Forgets.build(SQL)
    snap = db.snapshot()
    db.handle.execute("UPDATE orders SET status = 'shipped' WHERE id = 'W2'")
    with pytest.raises(RestoreError, match=r"sqlite state: the restore is not exact: table 'orders' differs: "
                                           r"row 2 is \('W2', 'shipped'\), the snapshot had \('W2', 'pending'\)"):
        db.restore(snap)


@dataclasses.dataclass
class Cart:
    items: list
    tags: set
    owner: str = "ann"


def test_an_object_comes_back_and_its_digest_is_the_same_in_every_process():
    value = {"cart": Cart(["mug", "lamp"], {"b", "a", "c"}), "n": 1, (1, 2): None, "f": 0.1}
    state = ObjectState.build(value)
    snap = state.snapshot()
    state.handle["cart"].items.append("desk")
    state.handle["n"] = True  # True is not 1 in the digest
    with pytest.raises(RestoreError):
        class Keeps(ObjectState):
            def _put(self, snapshot):
                pass
        Keeps(state.handle).restore(snap)
    state.restore(snap)
    assert state.handle["cart"].items == ["mug", "lamp"] and state.handle["n"] == 1
    code = ("import dataclasses, sys; sys.path.insert(0, 'tests'); from tools.test_tool_state import Cart; "
            "from cir.tools.state import ObjectState; "
            "print(ObjectState({'cart': Cart(['mug', 'lamp'], {'c', 'a', 'b'}), 'n': 1, (1, 2): None, 'f': 0.1}).digest())")
    for seed in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={"PYTHONHASHSEED": seed, "PATH": ""}, cwd=str(__import__("pathlib").Path(__file__).parents[2]))
        assert out.stdout.strip() == snap.digest
