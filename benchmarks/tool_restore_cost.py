"""Snapshot and restore of the tool-world kit's state kinds beside ALFWorld's, in one sitting.

The replayer snapshots after every distinct transition and restores whenever it moves between
states (cir.envs.branching), so the cost of a state kind's snapshot and restore is the cost of
a tool world's fork. Measured here, each as the median over random states of a random walk, in
rounds that alternate between the kinds so machine load falls on all alike:

- ALFWorld: the adapter's snapshot and fast restore (cir.families.alfworld.env, the replayer's);
- SQLite: a database of 1,000 order rows (and two small tables), each step updating a few rows
  through a tool; the env's snapshot (the page copy and the content digest) and restore (the
  pages back and the digest checked), and the bare page copy without the digest;
- folder: 100 files of about 2 KB in five folders, each step editing one file; the snapshot (a
  manifest from the stat cache, changed files copied into the store) and the restore (changed
  files written back, the digest checked), and the restore without its check.

Times are CPU time of the process (user and system), not wall time: on a shared 2-core machine
the wall clock mostly measures the others' load. Ratios are against ALFWorld's restore (and
snapshot) of the same sitting.

    python benchmarks/tool_restore_cost.py                 # 2 generated ALFWorld tasks (temp folder)
    python benchmarks/tool_restore_cost.py --tasks DIR --json out.json
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", help="an ALFWorld task folder (default: generate --n-tasks into a temp folder)")
    p.add_argument("--n-tasks", type=int, default=2, help="ALFWorld tasks (2)")
    p.add_argument("--walk", type=int, default=20, help="steps of each walk, a snapshot after each (20)")
    p.add_argument("--rounds", type=int, default=5, help="rounds, each restoring every kind --restores times (5)")
    p.add_argument("--restores", type=int, default=20, help="restores per kind and round (20)")
    p.add_argument("--rows", type=int, default=1000, help="order rows of the database (1000)")
    p.add_argument("--files", type=int, default=100, help="files of the folder (100)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="also write the results here")
    return p.parse_args(argv)


def _timed(fn: Any, *args: Any) -> tuple[float, Any]:
    """CPU seconds of this process (user and system: the file system's work counts) spent in
    ``fn(*args)``: on a shared machine, wall time is mostly other people's load."""
    t = time.process_time()
    out = fn(*args)
    return time.process_time() - t, out


# -- the three worlds ---------------------------------------------------------------------------------
def alfworld_envs(args: argparse.Namespace, tmp: Path) -> list[Any]:
    from cir.families.alfworld.env import AlfworldEnv
    from cir.families.alfworld.tasks import load_tasks

    if args.tasks:
        refs = load_tasks(args.tasks)[: args.n_tasks]
    else:
        from cir.families.alfworld.generate import generate_split

        generate_split(tmp, "train", args.n_tasks, args.seed, types=["pick_and_place_simple", "pick_two_obj_and_place"],
                       progress=False)
        refs = load_tasks(tmp / "train")
    return [AlfworldEnv(r.game_file, "fast") for r in refs]


def alfworld_walk(env: Any, args: argparse.Namespace, rng: random.Random, t: dict[str, list[float]]) -> list[Any]:
    env.reset()
    snaps = [env.snapshot()]
    for _ in range(args.walk):
        t["alfworld step"].append(_timed(env.step, rng.choice(env.admissible_commands()))[0])
        dt, snap = _timed(env.snapshot)
        t["alfworld snapshot"].append(dt)
        snaps.append(snap)
    return snaps


def sqlite_env(args: argparse.Namespace) -> Any:
    from cir.tools import ToolTask, ToolWorld, tool

    @tool(read_only=False)
    def ship(db: sqlite3.Connection, order_id: int) -> dict:
        """Ship an order."""
        db.execute("UPDATE orders SET status = 'shipped', updated = updated + 1 WHERE id = ?", (order_id,))
        db.execute("INSERT INTO shipments (order_id, carrier) VALUES (?, 'post')", (order_id,))
        return {"order_id": order_id}

    @tool(read_only=True)
    def count(db: sqlite3.Connection) -> int:
        """Count the orders."""
        return db.execute("SELECT COUNT(*) FROM orders").fetchone()[0]

    rng = random.Random(args.seed)
    rows = ",".join(f"({i}, 'C{rng.randrange(200):03d}', 'item {rng.randrange(50)}', {rng.randrange(1, 500)}.5, "
                    f"'pending', '{'x' * rng.randrange(20, 60)}', 0)" for i in range(1, args.rows + 1))
    sql = ("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT, item TEXT, amount REAL, status TEXT, "
           "address TEXT, updated INTEGER);\n"
           "CREATE TABLE shipments (id INTEGER PRIMARY KEY AUTOINCREMENT, order_id INTEGER, carrier TEXT);\n"
           "CREATE TABLE customers (id TEXT PRIMARY KEY, name TEXT);\n"
           f"INSERT INTO orders VALUES {rows};\n"
           "INSERT INTO customers VALUES " + ",".join(f"('C{i:03d}', 'name {i}')" for i in range(200)) + ";\n")
    world = ToolWorld("bench-sqlite", tools=[ship, count], state="sqlite", check=lambda db, task, answer: True)
    return world.make_env(ToolTask("db", "bench", sql))


def folder_env(args: argparse.Namespace) -> Any:
    from cir.tools import ToolTask, ToolWorld, tool

    @tool(read_only=False)
    def edit(root: Path, path: str, line: str) -> dict:
        """Append a line to a file."""
        with open(root / path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
        return {"path": path}

    @tool(read_only=True)
    def listing(root: Path) -> int:
        """Count the files."""
        return sum(1 for p in root.rglob("*") if p.is_file())

    rng = random.Random(args.seed)
    files = {f"pkg{i % 5}/module_{i:03d}.py": "".join(f"line {j} {'y' * rng.randrange(10, 40)}\n" for j in range(60))
             for i in range(args.files)}
    world = ToolWorld("bench-folder", tools=[edit, listing], state="folder", check=lambda root, task, answer: True)
    return world.make_env(ToolTask("folder", "bench", files)), sorted(files)


def tool_walk(env: Any, actions: list[str], kind: str, t: dict[str, list[float]]) -> list[Any]:
    env.reset()
    snaps = [env.snapshot()]
    for action in actions:
        env.step(action)
        dt, snap = _timed(env.snapshot)
        t[f"{kind} snapshot"].append(dt)
        snaps.append(snap)
    return snaps


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    rng = random.Random(args.seed)
    t: dict[str, list[float]] = {k: [] for k in (
        "alfworld step", "alfworld snapshot", "alfworld restore", "sqlite snapshot", "sqlite restore", "sqlite restore unchecked",
        "folder snapshot", "folder restore", "folder restore unchecked")}
    with tempfile.TemporaryDirectory() as tmp:
        alfworlds = alfworld_envs(args, Path(tmp))
        db = sqlite_env(args)
        folder, paths = folder_env(args)
        alf_snaps = [alfworld_walk(e, args, rng, t) for e in alfworlds]
        db_snaps = tool_walk(db, [f"ship(order_id={rng.randrange(1, args.rows + 1)})" for _ in range(args.walk)],
                             "sqlite", t)
        folder_snaps = tool_walk(folder, [f'edit(path="{rng.choice(paths)}", line="step {i}")' for i in range(args.walk)],
                                 "folder", t)
        for _ in range(args.rounds):
            for env, snaps in zip(alfworlds, alf_snaps, strict=True):
                for _ in range(args.restores // len(alfworlds)):
                    t["alfworld restore"].append(_timed(env.restore, rng.choice(snaps))[0])
            for _ in range(args.restores):
                t["sqlite restore"].append(_timed(db.restore, rng.choice(db_snaps))[0])
            for _ in range(args.restores):
                t["sqlite restore unchecked"].append(_timed(db.state._put, rng.choice(db_snaps).state)[0])
            for _ in range(args.restores):
                t["folder restore"].append(_timed(folder.restore, rng.choice(folder_snaps))[0])
            for _ in range(args.restores):
                snap = rng.choice(folder_snaps)
                t["folder restore unchecked"].append(_timed(folder.state._put, snap.state)[0])
                folder.restore(snap)  # back to a known state (the stat cache current)
        size = len(db.snapshot().state.data) if isinstance(db.snapshot().state.data, bytes) else None
    med = {k: statistics.median(v) * 1000 for k, v in t.items() if v}
    print(f"tool-world state kinds beside ALFWorld: {len(alfworlds)} ALFWorld tasks, a {args.rows}-row database"
          f"{f' ({size:,} bytes of pages)' if size else ''}, a {args.files}-file folder; walks of {args.walk}, "
          f"{args.rounds} rounds of {args.restores} restores, seed {args.seed}")
    print(f"{'operation':28s} {'median CPU ms':>13s} {'n':>5s}")
    for k, v in med.items():
        print(f"{k:28s} {v:13.3f} {len(t[k]):5d}")
    ratios = {f"{k} / alfworld restore": med[k] / med["alfworld restore"]
              for k in ("sqlite restore", "sqlite restore unchecked", "folder restore", "folder restore unchecked")}
    ratios.update({f"{k} / alfworld snapshot": med[k] / med["alfworld snapshot"]
                   for k in ("sqlite snapshot", "folder snapshot")})
    ratios.update({f"{k} / alfworld step": med[k] / med["alfworld step"]
                   for k in ("sqlite restore", "folder restore", "folder snapshot")})
    print()
    for k, v in ratios.items():
        print(f"{k:48s} {v:8.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"settings": vars(args), "median_ms": med, "ratios": ratios,
                                               "n": {k: len(v) for k, v in t.items()}}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
