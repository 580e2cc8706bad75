"""Generate tasks of every type over all splits and print what they look like.

    python benchmarks/task_stats.py --out /tmp/task_stats --per-type 50 [--jobs 2] [--verify]

Writes (or reuses) OUT/train, OUT/valid_seen, OUT/valid_unseen with ``per_type`` tasks of each
of the six types in total (40% train, 30% each valid split), then prints: generation time per
task, plan length per type (min/median/max), receptacle and object counts per room kind, the
split layout pools (valid_unseen scenes never in train; valid_seen scenes all in train), and
with ``--verify`` loads every game file afresh on the engine and replays its walkthrough.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

from cir.families.alfworld.generate import generate_split, read_manifest
from cir.families.alfworld.tasks import TASK_TYPES
from cir.families.alfworld.verify import verify_game_file


def split_sizes(per_type: int) -> dict[str, int]:
    """Tasks per split so that each type gets ``per_type`` in total (types cycle per split)."""
    k = len(TASK_TYPES)
    train = round(per_type * 0.4)
    seen = (per_type - train) // 2
    unseen = per_type - train - seen
    return {"train": train * k, "valid_seen": seen * k, "valid_unseen": unseen * k}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="/tmp/cir_task_stats")
    ap.add_argument("--per-type", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--verify", action="store_true", help="reload and replay every game file")
    args = ap.parse_args()

    out = Path(args.out)
    timing = []
    for split, n in split_sizes(args.per_type).items():
        t0, c0 = time.perf_counter(), time.process_time()
        m = generate_split(out, split, n, args.seed, jobs=args.jobs)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        if "_stats" in m:
            timing.append({"split": split, "tasks": n, "wall_s": round(wall, 1),
                           "wall_s_per_task": round(wall / n, 2),
                           "parent_cpu_s_per_task": round(cpu / n, 2) if args.jobs == 1 else None,
                           "draws_per_task": round(m["_stats"]["draws"] / n, 2)})
    if timing:
        print("## generation time\n")
        print(pd.DataFrame(timing).to_string(index=False), "\n")

    rows = []
    for m in read_manifest(out):
        for r in m["tasks"]:
            rows.append(dict(r, split=m["settings"]["split"]))
    df = pd.DataFrame(rows)
    print(f"## {len(df)} tasks: {df.groupby('split').size().to_dict()}\n")

    print("## plan length per task type\n")
    plan = df.groupby("task_type")["plan_length"].agg(["count", "min", "median", "max"])
    print(plan.to_string(), "\n")

    print("## receptacles and objects per room kind\n")
    size = df.groupby("room").agg(
        tasks=("task_id", "size"),
        rec_min=("n_receptacles", "min"), rec_median=("n_receptacles", "median"),
        rec_max=("n_receptacles", "max"),
        obj_min=("n_objects", "min"), obj_median=("n_objects", "median"),
        obj_max=("n_objects", "max"))
    print(size.to_string(), "\n")

    print("## task types per room kind\n")
    print(pd.crosstab(df["task_type"], df["room"]).to_string(), "\n")

    scenes = {s: set(df.loc[df["split"] == s, "scene"]) for s in df["split"].unique()}
    print("## layouts (scenes)\n")
    for s, v in sorted(scenes.items()):
        print(f"{s}: {len(v)} scenes")
    if "train" in scenes:
        if "valid_unseen" in scenes:
            print("valid_unseen scenes also in train:", len(scenes["valid_unseen"] & scenes["train"]))
        if "valid_seen" in scenes:
            print("valid_seen scenes not in train:", len(scenes["valid_seen"] - scenes["train"]))
    print()

    if args.verify:
        t0 = time.perf_counter()
        ok, failed = 0, []
        for r in rows:
            game = out / r["split"] / r["task_id"] / "game.tw-pddl"
            try:
                plan_cmds = verify_game_file(game)
                ok += int(len(plan_cmds) == r["plan_length"])
            except Exception as err:  # report, do not stop
                failed.append((str(game), str(err)))
        dt = time.perf_counter() - t0
        print(f"## verify: {ok}/{len(rows)} games load and their walkthrough wins "
              f"({dt / max(1, len(rows)):.2f} s per game)")
        for g, e in failed[:10]:
            print("FAILED", g, e)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
