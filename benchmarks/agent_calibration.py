"""Calibrate the built-in agent's skill profiles on generated ALFWorld tasks.

Runs the paired replayer (the project's own harness, perturbations and recovery
operations) on a calibration cohort, for each agent seed asked for, and prints, measured
in this run:

- each profile's clean success rate (the factual run: no perturbation, no recovery) and
  its mean env actions against the optimal plan length from the manifest;
- for the reference profile: no-recovery success under each perturbed condition (the
  observation of the env action after 25% of the factual run replaced), and the drop
  against clean; how often the stale1 and stale2 no-recovery outcomes of a task agree;
  the share of factual successes that a clean refresh at delay 0 harms;
- rescues and harms per operation, condition and delay;
- how often each mechanism fired, and how many rescues and harms each explains;
- the number of diverging pairs no mechanism explains (must be 0);
- whether the features a router reads see where a refresh harms a clean run: the
  out-of-fold AUC (5 folds grouped by task) of an L2 logistic model of harm on the ``f_*``
  columns of the clean, factual-success refresh rows (a check, not a target);
- every target below, per seed, met or missed.

Usage::

    python benchmarks/agent_calibration.py --generate 100 --seed 1 --agent-seeds 0,1,2 --jobs 2
    python benchmarks/agent_calibration.py --tasks DIR [--limit N] [--jobs 2] [--out calib.json]

Targets (issues 11 and 19), default profile on 100 valid_unseen tasks, agent seeds 0, 1, 2:
clean success 70-90%; a clean refresh at delay 0 harms 3-10% of factual successes; stale2
without recovery at least 12 points below clean, missing at least 5 below; strong minus
weak at least 15 points; stale1 and stale2 no-recovery outcomes agree in at most 90% of
tasks; no divergence left unexplained. Calibrate on a generator seed the study does not use
(the study uses seed 0), so no cohort of the study is tuned on.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

#: (summary key, what it is, test) for every calibration target
TARGETS: list[tuple[str, str, Any]] = [
    ("default:clean_success", "clean success 70-90%", lambda v: 70 <= v <= 90),
    ("clean_refresh_d0_harm_share", "clean refresh at delay 0 harms 3-10% of factual successes",
     lambda v: 3 <= v <= 10),
    ("default:stale2_drop_points", "stale2 without recovery >= 12 points below clean", lambda v: v >= 12),
    ("default:missing_drop_points", "missing without recovery >= 5 points below clean", lambda v: v >= 5),
    ("strong_minus_weak_points", "strong minus weak >= 15 points", lambda v: v >= 15),
    ("stale1_stale2_agreement", "stale1 and stale2 no-recovery outcomes agree in <= 90% of tasks",
     lambda v: v <= 90),
    ("unexplained", "no divergence without a mechanism", lambda v: v == 0),
]


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", help="folder of tasks (a generated split)")
    ap.add_argument("--split", default="valid_unseen")
    ap.add_argument("--generate", type=int, default=0, help="generate N tasks first (temp folder)")
    ap.add_argument("--seed", type=int, default=1, help="generator seed (with --generate)")
    ap.add_argument("--limit", type=int, default=0, help="use the first N tasks only")
    ap.add_argument("--profiles", default="weak,default,strong")
    ap.add_argument("--reference", default="default", help="profile for the perturbed arms")
    ap.add_argument("--conditions", default="clean,stale2,stale1,missing")
    ap.add_argument("--delays", default="0,1,2,4")
    ap.add_argument("--operations", default="refresh,refresh_ablated,replan,rewind,placebo")
    ap.add_argument("--agent-seeds", "--agent-seed", dest="agent_seeds", default="0",
                    help="the agent's seeds (cir run --seed), comma-separated: every draw changes with it")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--work", help="keep the runs in this folder (default: a temp folder)")
    ap.add_argument("--out", help="write the numbers as JSON")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    # parse before the engine is imported: fast_downward overwrites sys.argv
    args = _parse_args(argv)
    from cir.families.alfworld.tasks import load_tasks

    if args.generate:
        from cir.families.alfworld.generate import generate_split

        root = Path(tempfile.mkdtemp(prefix="cir-calib-"))
        generate_split(root, args.split, args.generate, args.seed, progress=False, jobs=args.jobs)
        task_dir = root / args.split
    elif args.tasks:
        task_dir = Path(args.tasks)
    else:
        print("give --tasks DIR or --generate N", file=sys.stderr)
        return 2
    tasks = load_tasks(task_dir)
    if args.limit:
        tasks = tasks[: args.limit]
    try:
        seeds = [int(s) for s in args.agent_seeds.split(",") if s.strip()]
    except ValueError:
        print(f"--agent-seeds {args.agent_seeds!r}: expected integers separated by commas", file=sys.stderr)
        return 2
    work = Path(args.work or tempfile.mkdtemp(prefix="cir-calib-runs-"))
    summaries = [calibrate_seed(args, tasks, task_dir, seed, work / f"seed{seed}") for seed in seeds]
    for s in summaries:
        print(report(s))
    print(targets_table(summaries))
    if args.out:
        Path(args.out).write_text(json.dumps(summaries if len(summaries) > 1 else summaries[0], indent=1) + "\n")
    return 0


def calibrate_seed(args: argparse.Namespace, tasks: list[Any], task_dir: Path, seed: int,
                   work: Path) -> dict[str, Any]:
    """Every profile's runs with one agent seed, and what they measure."""
    from cir.episode.delays import check_delays
    from cir.pairs.run import run_experiment
    from cir.pairs.settings import ReplaySettings, RunSettings
    from cir.pairs.store import read_episodes

    profiles = [p.strip() for p in args.profiles.split(",") if p.strip()]
    started = time.perf_counter()
    summary: dict[str, Any] = {"n_tasks": len(tasks), "tasks": str(task_dir), "agent_seed": seed}
    plans = [t.plan_length for t in tasks if t.plan_length]
    summary["mean_plan_length"] = round(sum(plans) / len(plans), 2) if plans else None
    for prof in profiles:
        ref = prof == args.reference
        settings = ReplaySettings(
            conditions=tuple(args.conditions.split(",")) if ref else ("clean",),
            delays=check_delays(args.delays) if ref else (0,),
            operations=tuple(args.operations.split(",")) if ref else ("placebo",),
        )
        run = work / prof
        run_experiment(tasks, run, RunSettings(replay=settings, agent=f"builtin:{prof}", jobs=args.jobs,
                                               seed=seed),
                       tasks_source=str(task_dir), progress=False, echo=lambda s: None)
        factual = [ep for ep in read_episodes(run) if ep.role == "factual"]
        summary[f"{prof}:clean_success"] = _pct(sum(ep.won for ep in factual), len(factual))
        summary[f"{prof}:mean_env_actions"] = round(sum(ep.env_actions for ep in factual) / len(factual), 2)
        if ref:
            summary.update(reference_summary(run, prof, settings.conditions, factual))
    if "weak" in profiles and "strong" in profiles:
        summary["strong_minus_weak_points"] = round(
            summary["strong:clean_success"] - summary["weak:clean_success"], 1)
    summary["seconds"] = round(time.perf_counter() - started, 1)
    return summary


def reference_summary(run: Path, prof: str, conditions: tuple[str, ...],
                      factual: list[Any]) -> dict[str, Any]:
    """The reference profile's perturbed arms, recovery outcomes and explanations."""
    import pandas as pd

    from cir.pairs.store import read_episodes
    from cir.stats.explain import explain_run, mechanism_counts

    out: dict[str, Any] = {}
    arms = {(ep.task_id, ep.condition): ep for ep in read_episodes(run) if ep.role == "no_recovery"}
    out["feasible"] = len({t for t, _ in arms})
    won = {ep.task_id: ep.won for ep in factual}
    clean = _pct(sum(won.values()), len(won))
    for cond in conditions:
        # an infeasible task keeps its factual outcome (nothing was perturbed)
        wins = sum(arms[(t, cond)].won if (t, cond) in arms else won[t] for t in won)
        out[f"{prof}:{cond}_success"] = _pct(wins, len(won))
        out[f"{prof}:{cond}_drop_points"] = round(clean - out[f"{prof}:{cond}_success"], 1)
    if "stale1" in conditions and "stale2" in conditions:
        both = [t for t in won if (t, "stale1") in arms and (t, "stale2") in arms]
        same = sum(arms[(t, "stale1")].won == arms[(t, "stale2")].won for t in both)
        out["stale1_stale2_agreement"] = _pct(same, len(both))
    paired = pd.read_csv(run / "paired.csv")
    hit = paired[(paired["condition"] == "clean") & (paired["delay"] == 0) & (paired["operation"] == "refresh")
                 & (paired["factual_success"] == 1)]
    if len(hit):
        out["clean_refresh_d0_harms"] = int((hit["outcome"] == "harm").sum())
        out["clean_refresh_d0_harm_share"] = _pct(out["clean_refresh_d0_harms"], len(hit))
    out["clean_refresh_harm_auc"] = harm_visibility(paired)
    table = explain_run(run)
    out["pairs"] = len(table)
    out["diverged"] = int(table["diverged"].sum())
    out["unexplained"] = int((~table["explained"]).sum())
    clean_placebo = table[(table["operation"] == "placebo") & (table["condition"] == "clean") & table["executed"]]
    if len(clean_placebo):
        out["placebo_clean_identical"] = _pct(int((~clean_placebo["diverged"]).sum()), len(clean_placebo))
        reacted = clean_placebo["mechanisms"].str.contains("interruption|over_correct")
        out["placebo_clean_no_reaction"] = _pct(int((~reacted).sum()), len(clean_placebo))
    outcomes = (table.groupby(["operation", "condition", "delay"])["outcome"]
                .value_counts().unstack(fill_value=0))
    out["outcomes"] = {f"{op}/{c}/d{d}": {k: int(v) for k, v in row.items()}
                       for (op, c, d), row in outcomes.iterrows()}
    out["explained_by"] = mechanism_counts(table).to_dict(orient="records")
    fired: Counter[str] = Counter()
    for ep in read_episodes(run):
        for e in ep.transcript.trace if ep.transcript is not None else []:
            fired[e.mechanism] += 1
    out["mechanism_events"] = dict(sorted(fired.items()))
    return out


def harm_visibility(paired: Any) -> float | None:
    """Out-of-fold AUC of harm among clean factual-success refresh rows, from the features
    (None with fewer than 5 harms or 5 tasks)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import GroupKFold, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rows = paired[(paired["condition"] == "clean") & (paired["operation"] == "refresh")
                  & (paired["factual_success"] == 1) & paired["executed"].astype(bool)]
    y = (rows["outcome"] == "harm").astype(int).to_numpy()
    if y.sum() < 5 or rows["task_id"].nunique() < 5:
        return None
    model = make_pipeline(StandardScaler(), LogisticRegression(C=0.1, max_iter=2000))
    x = rows[[c for c in rows.columns if c.startswith("f_")]].to_numpy()
    p = cross_val_predict(model, x, y, cv=GroupKFold(5), groups=rows["task_id"], method="predict_proba")[:, 1]
    return round(float(roc_auc_score(y, p)), 3)


def _pct(k: int, n: int) -> float:
    return round(100 * k / n, 1) if n else float("nan")


def report(s: dict[str, Any]) -> str:
    lines = [f"built-in agent calibration on {s['n_tasks']} tasks ({s['tasks']}), agent seed {s['agent_seed']}, "
             f"{s['seconds']} s"]
    for k, v in s.items():
        if isinstance(v, int | float | str) and k not in ("n_tasks", "tasks", "seconds", "agent_seed"):
            lines.append(f"  {k:34s} {v}")
    for key, c in s.get("outcomes", {}).items():
        lines.append(f"  {key:28s} " + " ".join(f"{a}={b}" for a, b in c.items()))
    for row in s.get("explained_by", []):
        lines.append(f"  explains {row['operation']:16s} {row['mechanism']:20s} pairs={row['pairs']} "
                     f"rescues={row['rescues']} harms={row['harms']}")
    lines.append("  mechanism events: " + ", ".join(f"{k}={v}" for k, v in s.get("mechanism_events", {}).items()))
    return "\n".join(lines)


def targets_table(summaries: list[dict[str, Any]]) -> str:
    """Every target, per agent seed: the value and whether it is met."""
    seeds = [s["agent_seed"] for s in summaries]
    lines = ["targets (default profile)", "  " + f"{'target':66s}" + "".join(f"seed {x:<8}" for x in seeds)]
    for key, what, ok in TARGETS:
        cells = []
        for s in summaries:
            v = s.get(key)
            cells.append("-" if v is None else f"{v:g} {'ok' if ok(v) else 'MISS'}")
        lines.append(f"  {what:66s}" + "".join(f"{c:13s}" for c in cells))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
