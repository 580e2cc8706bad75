"""How many tasks a router needs before it can recover: routers fitted on n training tasks of an
agent's paired table (n from a few to a pool), several draws of n tasks each, each evaluated on the
same held-out tasks: the share of draws whose router recovers on some held-out arm, its recoveries
and its gain over never recovering, against the oracle's.

The agent runs through ``cir run`` on key-and-door tasks (``tests/support/keydoor.py``) against the
fake chat server of the tests, which answers as the key-and-door agent (a framework example's table
then equals the built-in agent's row for row: the adapters' tests), or a typed-tool family's tasks
with ``--family`` (its built-in agent, or a framework example against its fake server with
``--answer MODULE:ATTR``). The grid is the docs' by default (clean, stale2, missing; delays 0, 1, 2;
refresh, replan; 30 turns and actions), the routers those of docs/frameworks.md (paired estimator,
refresh and replan, delays 1 and 2, 4 folds; ``--estimator paper`` for the default one); each is an
option. The typed-tool examples on the tests' shop world::

    python benchmarks/router_tasks.py --family tests.support.shop:FAMILY --answer support.toy_framework:shop_answer \
        --agent langgraph:examples.langgraph_tools:agent --conditions clean,stale1,lag1,missing --grid-delays 0,1 \
        --operations refresh --router-delays 0,1 --d-min 0 --out data/frameworks/router_tasks_shop.json

    python benchmarks/router_tasks.py --agent langgraph:examples.langgraph_stategraph:agent \\
        --pool 96 --test 40 --sizes 4,6,8,12,16,24,32,48,96 --draws 5 --out data/frameworks/router_tasks.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

def grid(conditions: str, delays: str, operations: str) -> list[str]:
    return ["--conditions", conditions, "--delays", delays, "--operations", operations,
            "--max-turns", "30", "--max-actions", "30"]


def run(family: str, tasks: Path, out: Path, agent: str, base_url: str | None, jobs: int, cells: list[str]) -> float:
    """``cir run`` of the agent; its seconds."""
    start = time.monotonic()
    cmd = [sys.executable, "-m", "cir", "run", "--family", family, "--tasks", str(tasks), "--out", str(out),
           "--agent", agent, "--quiet", "--jobs", str(jobs), *cells]
    if base_url:
        cmd += ["--base-url", base_url]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return time.monotonic() - start


def sweep(train: Any, test: Any, extractor: Any, sizes: list[int], draws: int, estimator: str,
          operations: tuple[str, ...], delays: tuple[int, ...], d_min: int) -> list[dict]:
    """Each size's routers (``draws`` of them, each on its own random n tasks of the pool) on ``test``."""
    from cir.router.evaluation import walk_policies
    from cir.router.policy import CIRPolicy

    pool = sorted(train["task_id"].unique())
    rows = []
    for n in sizes:
        for draw in range(draws if n < len(pool) else 1):
            chosen = sorted(np.random.default_rng([n, draw]).choice(pool, size=n, replace=False))
            sub = train[train["task_id"].isin(chosen)]
            try:
                router = CIRPolicy(estimator=estimator, operations=operations, delays=delays, d_min=d_min, folds=4,
                                   extractor=extractor).fit(sub).to_router(max_turns=30, max_actions=30)
            except Exception as err:  # noqa: BLE001 - a fit that fails is a finding of its size
                rows.append({"n": n, "draw": draw, "fitted": False, "error": f"{type(err).__name__}: {err}"})
                continue
            walked = walk_policies(router, test)
            rows.append({"n": n, "draw": draw, "fitted": True, "recoveries": int(walked["int_cir"].sum()),
                         "arms": int(len(walked)), "gain_pp": round(100 * float(walked["y_cir"].mean()
                                                                             - walked["y_never"].mean()), 2),
                         "oracle_gain_pp": round(100 * float(walked["y_oracle"].mean()
                                                             - walked["y_never"].mean()), 2),
                         "thresholds": router.thresholds})
    return rows


def summary(rows: list[dict]) -> list[dict]:
    out = []
    for n in sorted({r["n"] for r in rows}):
        mine = [r for r in rows if r["n"] == n]
        fitted = [r for r in mine if r["fitted"]]
        out.append({"n": n, "draws": len(mine), "fitted": len(fitted),
                    "draws_recovering": sum(r["recoveries"] > 0 for r in fitted),
                    "mean_recoveries": round(float(np.mean([r["recoveries"] for r in fitted])), 1) if fitted else None,
                    "mean_gain_pp": round(float(np.mean([r["gain_pp"] for r in fitted])), 2) if fitted else None,
                    "oracle_gain_pp": fitted[0]["oracle_gain_pp"] if fitted else None})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", default="builtin")
    parser.add_argument("--family", default="tests.support.keydoor:FAMILY")
    parser.add_argument("--answer", default="support.toy_framework:keydoor_answer",
                        help="the fake server's answer function (MODULE:ATTR, tests/ on the path)")
    parser.add_argument("--pool", type=int, default=96, help="training tasks generated (the largest size)")
    parser.add_argument("--test", type=int, default=40, help="held-out tasks")
    parser.add_argument("--sizes", default="4,6,8,12,16,24,32,48,96")
    parser.add_argument("--draws", type=int, default=5, help="routers per size (each on its own draw of tasks)")
    parser.add_argument("--estimator", default="paired", choices=["paired", "paper"])
    parser.add_argument("--conditions", default="clean,stale2,missing")
    parser.add_argument("--grid-delays", default="0,1,2", help="the runs' delays")
    parser.add_argument("--operations", default="refresh,replan")
    parser.add_argument("--router-delays", default="1,2", help="the routers' candidate delays")
    parser.add_argument("--d-min", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--work", default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    import importlib

    from support.fake_openai import FakeOpenAI

    from cir.families.registry import get_family
    from cir.pairs.paired import read_paired

    family = get_family(args.family)
    work = Path(args.work or tempfile.mkdtemp(prefix="cir-router-tasks-"))
    family.generate(work / "tasks", family.splits[0], args.pool, 0, progress=False)
    family.generate(work / "tasks", family.splits[-1], args.test, 0, progress=False)
    module, _, attr = args.answer.rpartition(":")
    answer = getattr(importlib.import_module(module), attr)
    seconds = {}
    cells = grid(args.conditions, args.grid_delays, args.operations)
    with FakeOpenAI(answer=answer, keep_requests=False) as fake:
        base_url = None if args.agent.startswith("builtin") else fake.base_url
        for split, name in ((family.splits[0], "train"), (family.splits[-1], "test")):
            seconds[name] = round(run(args.family, work / "tasks" / split, work / name, args.agent, base_url,
                                      args.jobs, cells), 1)
        requests = fake.count
    train, test = read_paired(work / "train"), read_paired(work / "test")
    delays = tuple(int(d) for d in args.router_delays.split(","))
    rows = sweep(train, test, family.extractor, [int(s) for s in args.sizes.split(",")], args.draws, args.estimator,
                 tuple(args.operations.split(",")), delays, args.d_min)
    report = {"agent": args.agent, "family": args.family, "pool": args.pool, "test_tasks": args.test,
              "grid": cells, "estimator": args.estimator, "operations": args.operations.split(","),
              "router_delays": list(delays), "d_min": args.d_min, "seconds": seconds,
              "requests": requests, "summary": summary(rows), "rows": rows}
    print("| training tasks | routers | recovering on some held-out arm | mean recoveries (of "
          f"{rows[0].get('arms', '?')} arms) | mean gain (pp) | oracle gain (pp) |")
    print("|---|---|---|---|---|---|")
    for s in report["summary"]:
        print(f"| {s['n']} | {s['fitted']} of {s['draws']} | {s['draws_recovering']} | {s['mean_recoveries']} | "
              f"{s['mean_gain_pp']} | {s['oracle_gain_pp']} |")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
