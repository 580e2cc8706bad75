"""Calibrate the built-in agent's skill profiles on generated ALFWorld tasks.

Prints, measured in this run:
- each profile's clean success rate (the factual run: no perturbation, no recovery);
- for the reference profile (``default``): no-recovery success when the observation of
  the env action after 25% of the factual run is replaced by the one from two env
  actions earlier (``stale2``) or by the missing-observation text (``missing``), with
  the project's harness and perturbations (every arm replays from reset: the agent and
  engine are deterministic), so the numbers come from the agent's behaviour on the real
  engine and nothing else;
- refresh rescues and harms per condition and delay (the paired outcomes);
- mean env actions per clean episode against the optimal plan length from the manifest;
- the agent's own cost per ``act`` call (milliseconds; a ratio of the run, not a test).

Usage::

    python benchmarks/agent_calibration.py --tasks DIR [--limit N] [--out results.json]
    python benchmarks/agent_calibration.py --generate 100 --seed 0   # into a temp folder

Targets for ``default`` (issue 3): clean success 70-92%; stale2 lowers success by at
least 8 points; ``weak`` and ``strong`` differ by at least 15 points; mean env actions
well above the plan length.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from statistics import mean
from typing import Any


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", help="folder of tasks (a generated split or its parent)")
    ap.add_argument("--split", default="valid_unseen")
    ap.add_argument("--generate", type=int, default=0, help="generate N tasks first (temp folder)")
    ap.add_argument("--seed", type=int, default=0, help="generator seed (with --generate)")
    ap.add_argument("--limit", type=int, default=0, help="use the first N tasks only")
    ap.add_argument("--profiles", default="weak,default,strong")
    ap.add_argument("--reference", default="default", help="profile for the perturbed arms")
    ap.add_argument("--agent-seed", type=int, default=0)
    ap.add_argument("--conditions", default="stale2,missing", help="perturbed no-recovery arms")
    ap.add_argument("--delays", default="1", help="refresh delays for the paired check ('' for none)")
    ap.add_argument("--out", help="write all numbers and per-task outcomes as JSON")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    # parse before the engine is imported: fast_downward overwrites sys.argv
    args = _parse_args(argv)
    from cir.agents.builtin import BuiltinAgent
    from cir.envs.tasks import load_tasks
    from cir.replay import parse_delays

    if args.generate:
        from cir.envs.generate import generate_split

        root = Path(tempfile.mkdtemp(prefix="cir-calib-"))
        generate_split(root, args.split, args.generate, args.seed, progress=False)
        task_dir = root / args.split
    elif args.tasks:
        task_dir = Path(args.tasks)
    else:
        print("give --tasks DIR or --generate N", file=sys.stderr)
        return 2
    tasks = load_tasks(task_dir)
    if args.limit:
        tasks = tasks[: args.limit]
    profiles = [p.strip() for p in args.profiles.split(",") if p.strip()]
    conditions = [c.strip() for c in args.conditions.split(",") if c.strip() and c.strip() != "clean"]
    delays = parse_delays(args.delays) if args.delays else ()

    per_task: list[dict[str, Any]] = []
    timers: list[_Timed] = []
    started = time.perf_counter()
    for i, task in enumerate(tasks):
        env = task.make_env()
        row: dict[str, Any] = {"task_id": task.task_id, "task_type": task.task_type,
                               "plan_length": task.plan_length or _walkthrough_length(task.game_file)}
        for prof in profiles:
            agent = _Timed(BuiltinAgent(prof, seed=args.agent_seed))
            timers.append(agent)
            if prof == args.reference:
                row.update(run_reference(agent, env, task.task_id, conditions, delays, prof))
            else:
                tr = _episode(agent, env, task.task_id, {})
                row[f"{prof}:clean"] = int(tr.won)
                row[f"{prof}:env_actions"] = tr.env_actions
        per_task.append(row)
        done = ", ".join(f"{k}={v}" for k, v in row.items() if ":" in k and not k.endswith("actions"))
        print(f"[{i + 1}/{len(tasks)}] {task.task_id}: {done}", file=sys.stderr, flush=True)

    summary = summarise(per_task, profiles, args.reference, conditions, delays)
    calls = sum(t.calls for t in timers)
    summary["act_ms_mean"] = round(1000 * sum(t.seconds for t in timers) / max(calls, 1), 3)
    summary["act_calls"] = calls
    summary["seconds"] = round(time.perf_counter() - started, 1)
    summary["tasks"] = str(task_dir)
    print(report(summary))
    if args.out:
        Path(args.out).write_text(json.dumps({"summary": summary, "per_task": per_task}, indent=1))
    return 0


def _episode(agent: Any, env: Any, task_id: str, cache: dict[str, str], *, perturbation: Any = None,
             refresh_at: int | None = None) -> Any:
    """One episode from reset; optionally a refresh right after env action ``refresh_at``."""
    from cir.harness import Harness

    harness = Harness(agent, reply_cache=cache)
    tr = harness.reset(env, task_id)
    if refresh_at is not None:
        harness.run(env, tr, until_env_actions=refresh_at, perturbation=perturbation)
        if not harness.can_continue(tr) or tr.env_actions < refresh_at:
            return tr  # ended before the recovery point: not executed
        harness.recover(env, tr, "refresh")
    return harness.run(env, tr, perturbation=perturbation)


def run_reference(agent: Any, env: Any, task_id: str, conditions: list[str],
                  delays: tuple[int, ...], prof: str) -> dict[str, Any]:
    """Factual run, no-recovery arms per condition, refresh branches per delay.

    Every arm restarts from reset; the agent is a pure function of its context and the
    engine is deterministic, so the arms share their prefix exactly (checked below).
    """
    from cir.perturb import Perturbation, feasibility, parse_condition, perturbation_point

    cache: dict[str, str] = {}
    factual = _episode(agent, env, task_id, cache)
    out: dict[str, Any] = {f"{prof}:clean": int(factual.won), f"{prof}:env_actions": factual.env_actions}
    n = factual.env_actions
    conds = [parse_condition(c) for c in conditions]
    ok, _reason = feasibility(n, conds) if conds else (True, "")
    out["feasible"] = bool(ok)
    if not ok:
        for c in conditions:
            out[f"{prof}:{c}"] = int(factual.won)  # nothing perturbed: the factual outcome
        return out
    p = perturbation_point(n)
    out["point"] = p
    pairs = []
    for cond in [parse_condition("clean"), *conds]:
        pert = None if cond.kind == "clean" else Perturbation(cond, p)
        arm = factual if pert is None else _episode(agent, env, task_id, cache, perturbation=pert)
        if pert is not None:
            out[f"{prof}:{cond.name}"] = int(arm.won)
        for d in delays:
            branch = _episode(agent, env, task_id, cache, perturbation=pert, refresh_at=p + d)
            executed = any(s.actor == "harness" for s in branch.steps)
            k = branch.steps_until_env_action(p + d) if executed else 0
            if executed:
                assert [s.to_dict() for s in branch.steps[:k]] == [s.to_dict() for s in arm.steps[:k]], (
                    f"{task_id}: branch and arm differ before the branch point"
                )
            y0, y1 = int(arm.won), int(branch.won) if executed else int(arm.won)
            outcome = {(0, 1): "rescue", (1, 0): "harm", (1, 1): "stable_success",
                       (0, 0): "stable_failure"}[(y0, y1)]
            pairs.append({"condition": cond.name, "delay": d, "y0": y0, "y1": y1,
                          "executed": executed, "outcome": outcome})
    out["pairs"] = pairs
    return out


def _walkthrough_length(game_file: Path) -> int | None:
    """Length of the optimal plan stored in the game file (when no manifest says it)."""
    try:
        walk = json.loads(Path(game_file).read_text()).get("walkthrough")
    except (OSError, ValueError):
        return None
    return len(walk) if isinstance(walk, list) else None


class _Timed:
    """Wraps an agent to measure the time spent in ``act`` (the agent's own cost)."""

    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.name = agent.name
        self.seconds = 0.0
        self.calls = 0

    def settings(self) -> dict[str, Any]:
        return self.agent.settings()

    def act(self, context: list[dict[str, str]]) -> str:
        t0 = time.perf_counter()
        reply = self.agent.act(context)
        self.seconds += time.perf_counter() - t0
        self.calls += 1
        return reply


def summarise(per_task: list[dict[str, Any]], profiles: list[str], ref: str,
              conditions: list[str], delays: tuple[int, ...] = ()) -> dict[str, Any]:
    """Success rates, differences, action counts and paired outcome counts."""
    n = len(per_task)
    out: dict[str, Any] = {"n_tasks": n}
    for p in profiles:
        out[f"{p}:clean_success"] = round(100 * mean(r[f"{p}:clean"] for r in per_task), 1) if n else None
        out[f"{p}:mean_env_actions"] = round(mean(r[f"{p}:env_actions"] for r in per_task), 2) if n else None
    plans = [r["plan_length"] for r in per_task if r.get("plan_length")]
    out["mean_plan_length"] = round(mean(plans), 2) if plans else None
    if ref in profiles:
        feas = [r for r in per_task if r.get("feasible")]
        out["feasible"] = len(feas)
        for cond in conditions:
            out[f"{ref}:{cond}_success"] = round(100 * mean(r[f"{ref}:{cond}"] for r in per_task), 1)
            out[f"{ref}:{cond}_drop_points"] = round(out[f"{ref}:clean_success"] - out[f"{ref}:{cond}_success"], 1)
        counts: dict[str, dict[str, int]] = {}
        for r in per_task:
            for pr in r.get("pairs", []):
                key = f"{pr['condition']}@d{pr['delay']}"
                c = counts.setdefault(key, {"rescue": 0, "harm": 0, "stable_success": 0,
                                            "stable_failure": 0, "executed": 0})
                c[pr["outcome"]] = c.get(pr["outcome"], 0) + 1
                c["executed"] += int(pr["executed"])
        out["refresh_outcomes"] = counts
    if "weak" in profiles and "strong" in profiles:
        out["strong_minus_weak_points"] = round(out["strong:clean_success"] - out["weak:clean_success"], 1)
    return out


def report(s: dict[str, Any]) -> str:
    lines = [f"built-in agent calibration on {s['n_tasks']} tasks ({s.get('tasks')}), {s['seconds']} s"]
    for k, v in s.items():
        if k.endswith(("clean_success", "_success", "drop_points", "mean_env_actions")) or k in (
            "mean_plan_length", "strong_minus_weak_points", "feasible", "act_ms_mean", "act_calls"
        ):
            lines.append(f"  {k:32s} {v}")
    for key, c in sorted(s.get("refresh_outcomes", {}).items()):
        lines.append(f"  refresh {key:22s} " + " ".join(f"{a}={b}" for a, b in c.items()))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
