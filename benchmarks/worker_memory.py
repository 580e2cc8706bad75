"""Worker memory over a long parallel run: resident set size of each worker, task after task.

    python benchmarks/worker_memory.py                  # 60 generated tasks, --jobs 2
    python benchmarks/worker_memory.py --tasks DIR --n 60 --jobs 2 --json out.json

Runs the same cohort through ``cir.pairs.run.run_experiment`` (the built-in agent, 4 conditions
x 4 delays, refresh) once per arm, each arm in a fresh child process (so its workers are
new): ``savings`` (``cir.families.alfworld.engine.Savings()``: library copies recycled, facts dropped) and
``main`` (only the text memo: a new library copy per game, never released, as before).
Each worker records its RSS (psutil) when it builds the env of a task, i.e. after the
previous task's env was dropped. Reported per arm and worker: RSS after the warm-up tasks,
at the end, the largest rise after warm-up, and the growth per task (least squares).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import psutil

ARMS = ("savings", "main")


def savings_of(arm: str) -> Any:
    from cir.families.alfworld.engine import Savings

    return {"savings": Savings(), "main": replace(Savings.none(), memo_text=True)}[arm]


def logged_env(task: Any, *, snapshots: str, savings: Any, log: str) -> Any:
    """The task's env, after appending this worker's RSS to ``log`` (one JSON line)."""
    from cir.families.alfworld.env import AlfworldEnv

    rss = psutil.Process().memory_info().rss / 2**20
    with open(log, "a", encoding="utf-8") as fh:  # short appends from two workers interleave whole
        fh.write(json.dumps({"pid": os.getpid(), "rss_mb": rss}) + "\n")
    return AlfworldEnv(task.game_file, snapshots=snapshots, savings=savings)  # type: ignore[arg-type]


def child(cfg: dict[str, Any]) -> None:
    from cir.families.alfworld.tasks import load_tasks
    from cir.pairs.run import run_experiment
    from cir.pairs.settings import RunSettings

    tasks = load_tasks(cfg["tasks"])[: cfg["n"]]
    run_experiment(tasks, cfg["out"],
                   RunSettings(jobs=cfg["jobs"], env_factory=partial(logged_env, savings=savings_of(cfg["arm"]), log=cfg["log"])),
                   progress=False, echo=lambda _: None)


def slope(ys: list[float]) -> float:
    """Least-squares growth per step of a series."""
    n = len(ys)
    if n < 2:
        return 0.0
    xm, ym = (n - 1) / 2, statistics.fmean(ys)
    return sum((x - xm) * (y - ym) for x, y in enumerate(ys)) / sum((x - xm) ** 2 for x in range(n))


def summarize(log: Path, warmup: int) -> dict[str, Any]:
    series: dict[int, list[float]] = {}
    for line in log.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        series.setdefault(rec["pid"], []).append(rec["rss_mb"])
    workers = []
    for rss in series.values():
        after = rss[warmup:] if len(rss) > warmup else rss[-1:]
        workers.append({"tasks": len(rss), "rss_first_mb": round(rss[0], 1),
                        "rss_after_warmup_mb": round(after[0], 1), "rss_last_mb": round(rss[-1], 1),
                        "rise_after_warmup_mb": round(max(after) - after[0], 1),
                        "growth_per_task_mb": round(slope(after), 3),
                        "rss_mb": [round(x, 1) for x in rss]})
    return {"workers": workers,
            "max_rise_after_warmup_mb": max(w["rise_after_warmup_mb"] for w in workers)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", default=None, help="a task folder (default: generate --n "
                    "valid_unseen tasks, seed 0, into a temporary folder)")
    ap.add_argument("--n", type=int, default=60)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=5, help="tasks per worker before the baseline (5)")
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(json.loads(args.child))
        return 0
    report: dict[str, Any] = {"n_tasks": args.n, "jobs": args.jobs, "warmup": args.warmup}
    with tempfile.TemporaryDirectory() as tmp:
        tasks = args.tasks
        if tasks is None:
            from cir.families.alfworld.generate import generate_split

            generate_split(tmp, "valid_unseen", args.n, 0, progress=False, jobs=args.jobs)
            tasks = str(Path(tmp) / "valid_unseen")
        for arm in args.arms.split(","):
            log = Path(tmp) / f"rss-{arm}.jsonl"
            cfg = {"arm": arm, "tasks": tasks, "n": args.n, "jobs": args.jobs, "log": str(log),
                   "out": str(Path(tmp) / f"run-{arm}")}
            subprocess.run([sys.executable, __file__, "--child", json.dumps(cfg)], check=True)
            report[arm] = summarize(log, args.warmup)
    for arm in args.arms.split(","):
        print(f"{arm}: largest RSS rise of a worker after {args.warmup} warm-up tasks: "
              f"{report[arm]['max_rise_after_warmup_mb']:.1f} MB")
        for w in report[arm]["workers"]:
            print(f"  worker: {w['tasks']} tasks, RSS {w['rss_first_mb']:.0f} MB at its first task, "
                  f"{w['rss_after_warmup_mb']:.0f} after warm-up, {w['rss_last_mb']:.0f} at its last; "
                  f"{w['growth_per_task_mb']:+.2f} MB per task after warm-up")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
