"""Replay benchmark: work done by the branching replayer versus the unique work the grid
needs and versus naive designs; snapshot-based versus replay-based branching; memory.

    python benchmarks/replay_bench.py --tasks DIR [--n 8] [--conditions clean,stale2,stale1,missing]
        [--delays 0,1,2,4] [--operations refresh,refresh_ablated,replan,rewind] [--json OUT]

Counts (per grid, summed over tasks):
- actual: agent calls made (reply-cache misses) and engine steps made (transition-memo misses);
- unique: distinct agent contexts over every transcript of the grid, and distinct env
  transitions (state = the env actions applied since reset, rewinds applied);
- naive "arms from start": the factual run, each condition's no-recovery arm and each
  branch run from reset without sharing (agent calls = model turns, env steps = env actions);
- naive "pairs from start": every row runs both arms from reset (the paired design without
  the shared no-recovery continuation).
Wall time: the same grid with ``snapshots="fast"`` (engine state ids) and ``"replay"``
(reset + replay), in the same process, one after the other; the paired rows must agree.
Peak memory: tracemalloc peak of one task's grid, and the process's max RSS.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
import tracemalloc
from typing import Any

from cir.episode.delays import check_delays
from cir.episode.transcript import Transcript, context_hash
from cir.families import make_agent
from cir.families.alfworld.env import AlfworldEnv
from cir.families.alfworld.tasks import load_tasks
from cir.pairs.replay import ReplaySettings, run_task_pairs


def unique_and_naive(result: Any, settings: dict[str, Any]) -> dict[str, int]:
    contexts: set[str] = set()
    transitions: set[tuple[str, ...]] = set()
    naive_arm_calls = naive_arm_steps = 0
    by_role: dict[tuple, Transcript] = {}
    for ep in result.episodes:
        if ep["transcript"] is None:
            continue
        t = Transcript.from_dict(ep["transcript"])
        by_role[(ep["role"], ep["condition"], ep["delay"], ep["operation"])] = t
        naive_arm_calls += t.model_turns
        naive_arm_steps += t.env_actions
        for i, step in enumerate(t.steps):
            if step.actor == "agent":
                contexts.add(context_hash(t.prefix(i).context(), settings))
            if step.action is not None:
                transitions.add(tuple(t.env_path(i + 1)))
    naive_pair_calls = naive_pair_steps = 0
    factual = by_role.get(("factual", "clean", None, None))
    for row in result.rows:
        arm = factual if row["condition"] == "clean" else by_role[("no_recovery", row["condition"], None, None)]
        branch = by_role.get(("recovery", row["condition"], row["delay"], row["operation"]))
        naive_pair_calls += arm.model_turns + (branch.model_turns if branch else arm.model_turns)
        naive_pair_steps += arm.env_actions + (branch.env_actions if branch else arm.env_actions)
    if not result.rows and factual is not None:
        naive_pair_calls, naive_pair_steps = factual.model_turns, factual.env_actions
    return {"unique_contexts": len(contexts), "unique_transitions": len(transitions),
            "naive_arm_calls": naive_arm_calls, "naive_arm_steps": naive_arm_steps,
            "naive_pair_calls": naive_pair_calls, "naive_pair_steps": naive_pair_steps}


def run_grid(tasks: list[Any], spec: str, settings: ReplaySettings, mode: str) -> tuple[list[Any], float]:
    results = []
    t0 = time.perf_counter()
    for task in tasks:
        agent = make_agent(spec, seed=0)
        results.append(run_task_pairs(task, agent, AlfworldEnv(task.game_file, snapshots=mode), settings))
    return results, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", required=True)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--agent", default="builtin")
    ap.add_argument("--conditions", default="clean,stale2,stale1,missing")
    ap.add_argument("--delays", default="0,1,2,4")
    ap.add_argument("--operations", default="refresh,refresh_ablated,replan,rewind")
    ap.add_argument("--modes", default="fast,replay")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    settings = ReplaySettings(conditions=tuple(args.conditions.split(",")),
                              delays=check_delays(args.delays),
                              operations=tuple(args.operations.split(",")))
    tasks = load_tasks(args.tasks)[: args.n]
    agent_params = make_agent(args.agent, seed=0).params()
    report: dict[str, Any] = {"tasks": len(tasks), "grid": settings.as_dict(), "agent": args.agent}
    rows_by_mode: dict[str, list] = {}
    for mode in args.modes.split(","):
        results, wall = run_grid(tasks, args.agent, settings, mode)
        costs: dict[str, int] = {}
        for r in results:
            for k, v in r.costs.items():
                costs[k] = costs.get(k, 0) + v
        report[mode] = {"wall_s": round(wall, 2), "costs": costs,
                        "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
        rows_by_mode[mode] = [r.rows for r in results]
        if "work" not in report:
            work: dict[str, int] = {}
            for r in results:
                for k, v in unique_and_naive(r, agent_params).items():
                    work[k] = work.get(k, 0) + v
            work["pairs"] = sum(len(r.rows) for r in results)
            work["feasible_tasks"] = sum(1 for r in results if r.feasible)
            work["actual_calls"] = costs["agent_calls"]
            work["actual_steps"] = costs["env_steps"]
            work["calls_vs_unique"] = round(costs["agent_calls"] / work["unique_contexts"], 3)
            work["steps_vs_unique"] = round(costs["env_steps"] / work["unique_transitions"], 3)
            work["naive_arms_calls_x"] = round(work["naive_arm_calls"] / costs["agent_calls"], 2)
            work["naive_arms_steps_x"] = round(work["naive_arm_steps"] / costs["env_steps"], 2)
            work["naive_pairs_calls_x"] = round(work["naive_pair_calls"] / costs["agent_calls"], 2)
            work["naive_pairs_steps_x"] = round(work["naive_pair_steps"] / costs["env_steps"], 2)
            report["work"] = work
    modes = list(rows_by_mode)
    if len(modes) == 2:
        a, b = modes
        report["rows_identical_across_modes"] = rows_by_mode[a] == rows_by_mode[b]
        report["wall_ratio_" + b + "_over_" + a] = round(report[b]["wall_s"] / report[a]["wall_s"], 2)
    # peak traced memory of one task's grid (fast snapshots)
    feasible = [t for t, rows in zip(tasks, rows_by_mode[modes[0]], strict=True) if rows]
    if feasible:
        tracemalloc.start()
        run_task_pairs(feasible[0], make_agent(args.agent, seed=0),
                       AlfworldEnv(feasible[0].game_file, snapshots="fast"), settings)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        report["peak_traced_mb_one_task"] = round(peak / 2**20, 1)
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
