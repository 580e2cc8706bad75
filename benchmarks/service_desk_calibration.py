"""Calibrate the service-desk agent (and check the world's design) on its calibration cohort.

Runs the paired replayer (the project's own harness, perturbations and recovery operations) on
generated service-desk tickets of a generator seed no study uses (seed 1; the study uses seed 7
and its replicates S + 1000 r), for each agent seed asked for, and prints, measured in this run:

- each profile's clean success rate (the factual run) and its mean env actions against the
  length of a careful agent's plan (the generator's ``careful_plan``);
- for the reference profile (``default``), the whole grid: no-recovery success under each
  perturbed condition and its drop against clean; what each perturbed arm *showed*
  (:func:`cir.families.service_desk.shown.shown_kind`: the true result, a visibly anomalous
  one, or one that looks right and is wrong), per condition and pooled over the stale and lag
  arms (the issue's target: at least half look right), and the same with the kit's generic rule
  (:func:`cir.tools.results.anomalous`, shapes from the episode's earlier answers) beside it;
  of the looks-right arms of factual-success tasks, how many fail without recovery and how
  many of those a refresh at delay 0 rescues; the share of factual successes that a clean
  refresh at delay 0 harms; rescues and harms per operation, condition and delay; how often each
  mechanism fired and how many rescues and harms each explains; the divergences no mechanism
  explains (must be 0); whether the features see where a clean refresh harms (out-of-fold
  AUC, a check, not a target);
- beside the share that looks right, the share whose content is out of date (more than the store
  times differ: a change's answer on an older state is the same record stamped earlier), which
  the lead's reading of the looks-right target requires to be at least half too; and, a
  measurement, which fields differ (``looks_right_fields``) and the share out of date in a field
  of the ticket's own facts, not only in when a change was made or where the back office is with
  processing it (``looks_right_ticket_field_share``);
- every target below, per seed, met or missed.

Usage::

    python benchmarks/service_desk_calibration.py --generate 100 --seed 1 --agent-seeds 0,1,2 --jobs 2 --out calib.json
    python benchmarks/service_desk_calibration.py --tasks DIR [--limit N] [--jobs 2]

The targets (:data:`TARGETS`, default profile, 100 valid tickets of generator seed 1, agent
seeds 0, 1, 2) were written and committed before any perturbed arm of this family was run:
clean success 70-90%; a clean refresh at delay 0 harms 2-10% of factual successes; of the
stale2, stale1, lag2 and lag1 arms at least half look right; of the looks-right arms of
factual-success tasks at least 10% fail without recovery, and a refresh at delay 0 rescues at
least 30% of those; missing without recovery at least 3 points below clean; strong minus weak
at least 15 points; every rescue and harm mechanism of the agent, and the world clock, explains
at least one rescue or harm on the grid; no divergence without a mechanism. When the perturbation
point of a tool world became its first read at or after the protocol's point, the targets stayed
as they were for the second calibration (same cohort, same seeds), and the looks-right target is
read by content too (``looks_right_content_share``: the lead's decision, committed before the
second calibration ran).
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

#: (summary key, what it is, test) for every calibration target (committed before any run)
TARGETS: list[tuple[str, str, Any]] = [
    ("default:clean_success", "clean success 70-90%", lambda v: 70 <= v <= 90),
    ("clean_refresh_d0_harm_share", "clean refresh at delay 0 harms 2-10% of factual successes",
     lambda v: 2 <= v <= 10),
    ("looks_right_share", "of the stale2, stale1, lag2, lag1 arms >= 50% look right", lambda v: v >= 50),
    ("looks_right_content_share", "the same, by content (out of date in more than its store times)",
     lambda v: v >= 50),
    ("looks_right_fail_share", "of looks-right arms (factual successes) >= 10% fail without recovery",
     lambda v: v >= 10),
    ("looks_right_rescue_d0_share", "refresh at delay 0 rescues >= 30% of those failures", lambda v: v >= 30),
    ("default:missing_drop_points", "missing without recovery >= 3 points below clean", lambda v: v >= 3),
    ("strong_minus_weak_points", "strong minus weak >= 15 points", lambda v: v >= 15),
    ("mechanisms_without_effect", "every rescue/harm mechanism and world_clock explains >= 1 rescue or harm",
     lambda v: v == 0),
    ("unexplained", "no divergence without a mechanism", lambda v: v == 0),
]
STALE_LAG = ("stale2", "stale1", "lag2", "lag1")


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", help="folder of tasks (a generated split)")
    ap.add_argument("--split", default="valid")
    ap.add_argument("--generate", type=int, default=0, help="generate N tasks first (temp folder)")
    ap.add_argument("--seed", type=int, default=1, help="generator seed (with --generate)")
    ap.add_argument("--limit", type=int, default=0, help="use the first N tasks only")
    ap.add_argument("--profiles", default="weak,default,strong")
    ap.add_argument("--reference", default="default", help="profile for the perturbed arms")
    ap.add_argument("--conditions", default="clean,stale2,stale1,lag2,lag1,missing")
    ap.add_argument("--delays", default="0,1,2,4")
    ap.add_argument("--operations", default="refresh,refresh_ablated,replan,rewind,placebo")
    ap.add_argument("--agent-seeds", dest="agent_seeds", default="0",
                    help="the agent's seeds (cir run --seed), comma-separated: every draw changes with it")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--work", help="keep the runs in this folder (default: a temp folder)")
    ap.add_argument("--out", help="write the numbers as JSON")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    from cir.families.registry import get_family

    family = get_family("service-desk")
    if args.generate:
        root = Path(tempfile.mkdtemp(prefix="cir-sd-calib-"))
        family.generate(root, args.split, args.generate, args.seed, progress=False)
        task_dir = root / args.split
    elif args.tasks:
        task_dir = Path(args.tasks)
    else:
        print("give --tasks DIR or --generate N", file=sys.stderr)
        return 2
    tasks = family.load_tasks(task_dir)
    if args.limit:
        tasks = tasks[: args.limit]
    try:
        seeds = [int(s) for s in args.agent_seeds.split(",") if s.strip()]
    except ValueError:
        print(f"--agent-seeds {args.agent_seeds!r}: expected integers separated by commas", file=sys.stderr)
        return 2
    work = Path(args.work or tempfile.mkdtemp(prefix="cir-sd-calib-runs-"))
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
    plans = [t.data.get("careful_plan_length") for t in tasks if t.data.get("careful_plan_length")]
    summary["mean_careful_plan_length"] = round(sum(plans) / len(plans), 2) if plans else None
    for prof in profiles:
        ref = prof == args.reference
        settings = ReplaySettings(
            conditions=tuple(args.conditions.split(",")) if ref else ("clean",),
            delays=check_delays(args.delays) if ref else (0,),
            operations=tuple(args.operations.split(",")) if ref else ("placebo",),
        )
        run = work / prof
        run_experiment(tasks, run, RunSettings(replay=settings, agent=f"builtin:{prof}", jobs=args.jobs, seed=seed,
                                               family="service-desk"),
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


def shown_split(run: Path) -> dict[tuple[str, str], str]:
    """(task, condition) -> what the arm's perturbed step showed: ``true``, ``anomalous`` or
    ``looks_right`` (the family's rule), with the kit's generic rule beside it (key suffix ``:kit``)."""
    from cir.families.service_desk.calls import TOOL_MAP
    from cir.families.service_desk.shown import differs_in_content, shown_kind
    from cir.pairs.store import read_episodes
    from cir.tools.results import anomalous as kit_anomalous
    from cir.tools.results import error_of, shape

    out: dict[tuple[str, str], str] = {}
    for ep in read_episodes(run):
        if ep.role != "no_recovery" or ep.sample or ep.transcript is None or ep.condition == "clean":
            continue
        steps = [s for s in ep.transcript.steps if s.action is not None]
        for j, s in enumerate(steps):
            if f"perturb:{ep.condition}" in s.events:
                kind = shown_kind(s.action or "", s.shown, s.observation or "")
                out[(ep.task_id, ep.condition)] = kind
                if kind == "looks_right":  # beside it: whether more than the store times differ
                    out[(ep.task_id, ep.condition + ":content")] = (
                        "looks_right" if differs_in_content(s.shown, s.observation or "") else "times_only")
                    out[(ep.task_id, ep.condition + ":fields")] = ",".join(
                        differing_fields(s.shown, s.observation or "")) or "-"
                shapes: dict[str, set[str]] = {}
                for earlier in steps[:j]:
                    try:
                        value = json.loads(earlier.shown)
                        name = (earlier.action or "").split("(")[0]
                    except ValueError:
                        continue
                    if error_of(earlier.shown) is None:
                        shapes.setdefault(name, set()).add(shape(value))
                kit = "true" if s.shown == s.observation else (
                    "anomalous" if kit_anomalous(s.action or "", s.shown, TOOL_MAP, shapes) else "looks_right")
                out[(ep.task_id, ep.condition + ":kit")] = kit
                break
    return out


#: what a record shows besides the ticket's own facts: when it changed, and where the back office is
#: with a refund or an exchange the change made (``store.SETTLE_MINUTES``)
_STAMPS = ("updated_at", "created_at")


def _ticket_view(value: Any, within: str = "") -> Any:
    if isinstance(value, dict):
        return {k: _ticket_view(v, k) for k, v in value.items()
                if k not in _STAMPS and not (within in ("refunds", "exchanges") and k == "status")}
    if isinstance(value, list):
        return [_ticket_view(v, within) for v in value]
    return value


def differing_fields(shown: str, true: str) -> list[str]:
    """The fields in which a looks-right result differs from the true one, timestamps aside:
    top-level keys (``status``, ``address``, ``variants``...), and ``refunds.status`` /
    ``exchanges.status`` where only the back office's processing status of a change differs."""
    try:
        a, b = json.loads(shown), json.loads(true)
    except ValueError:
        return ["text"]
    if not isinstance(a, dict) or not isinstance(b, dict):
        return [] if a == b else ["value"]
    out = []
    for key in sorted(set(a) | set(b)):
        if key in _STAMPS:
            continue
        x, y = a.get(key), b.get(key)
        if _ticket_view(x, key) != _ticket_view(y, key):
            out.append(key)
        elif _ticket_view(x) != _ticket_view(y):
            out.append(f"{key}.status")
    return out


def reference_summary(run: Path, prof: str, conditions: tuple[str, ...], factual: list[Any]) -> dict[str, Any]:
    """The reference profile's perturbed arms, what they showed, recovery outcomes and explanations."""
    import pandas as pd

    from cir.families.registry import get_family
    from cir.pairs.store import read_episodes
    from cir.stats.explain import explain_run, mechanism_counts

    out: dict[str, Any] = {}
    arms = {(ep.task_id, ep.condition): ep for ep in read_episodes(run) if ep.role == "no_recovery" and not ep.sample}
    out["feasible"] = len({t for t, _ in arms})
    won = {ep.task_id: ep.won for ep in factual}
    clean = _pct(sum(won.values()), len(won))
    for cond in conditions:
        wins = sum(arms[(t, cond)].won if (t, cond) in arms else won[t] for t in won)
        out[f"{prof}:{cond}_success"] = _pct(wins, len(won))
        out[f"{prof}:{cond}_drop_points"] = round(clean - out[f"{prof}:{cond}_success"], 1)
    split = shown_split(run)
    for rule, suffix in (("family", ""), ("kit", ":kit")):
        pooled: Counter[str] = Counter()
        for cond in conditions:
            if cond == "clean":
                continue
            kinds = Counter(v for (t, c), v in split.items() if c == cond + suffix)
            out[f"shown:{rule}:{cond}"] = dict(sorted(kinds.items()))
            if cond in STALE_LAG:
                pooled.update(kinds)
        total = sum(pooled.values())
        key = "looks_right_share" if rule == "family" else "looks_right_share_kit_rule"
        out[key] = _pct(pooled["looks_right"], total)
    times_only = [k for k, v in split.items() if v == "times_only" and k[1].split(":")[0] in STALE_LAG]
    out["looks_right_times_only"] = len(times_only)
    stale_lag = sum(1 for (t, c) in split if c in STALE_LAG)
    out["looks_right_content_share"] = _pct(sum(1 for (t, c), v in split.items() if c in STALE_LAG
                                                and v == "looks_right") - len(times_only), stale_lag)
    fields = Counter(v for (t, c), v in split.items() if c.endswith(":fields") and c.split(":")[0] in STALE_LAG)
    out["looks_right_fields"] = dict(fields.most_common())
    ticket = sum(n for v, n in fields.items() if v != "-" and any(not f.endswith(".status") for f in v.split(",")))
    out["looks_right_ticket_field_share"] = _pct(ticket, stale_lag)
    paired = pd.read_csv(run / "paired.csv")
    right = {(t, c) for (t, c), v in split.items() if v == "looks_right" and c in STALE_LAG}
    right_success = [k for k in right if won.get(k[0])]
    failing = [k for k in right_success if not arms[k].won]
    out["looks_right_arms"] = len(right)
    out["looks_right_factual_success_arms"] = len(right_success)
    out["looks_right_fail"] = len(failing)
    out["looks_right_fail_share"] = _pct(len(failing), len(right_success))
    d0 = paired[(paired["delay"] == 0) & (paired["operation"] == "refresh")]
    rescued = sum(int(((d0["task_id"] == t) & (d0["condition"] == c) & (d0["outcome"] == "rescue")).sum())
                  for t, c in failing)
    out["looks_right_rescued_d0"] = rescued
    out["looks_right_rescue_d0_share"] = _pct(rescued, len(failing))
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
    outcomes = (table.groupby(["operation", "condition", "delay"])["outcome"].value_counts().unstack(fill_value=0))
    out["outcomes"] = {f"{op}/{c}/d{d}": {k: int(v) for k, v in row.items()} for (op, c, d), row in outcomes.iterrows()}
    explained = mechanism_counts(table)
    out["explained_by"] = explained.to_dict(orient="records")
    from cir.families.service_desk.agent.mechanisms import MECHANISMS

    wanted = [m.name for m in MECHANISMS.values() if m.role in ("rescue", "harm")] + ["world_clock"]
    effect: Counter[str] = Counter()
    for row in out["explained_by"]:
        effect[row["mechanism"]] += row["rescues"] + row["harms"]
    silent = sorted(m for m in wanted if effect[m] == 0)
    out["mechanisms_without_effect"] = len(silent)
    out["mechanisms_without_effect_names"] = silent
    fired: Counter[str] = Counter()
    for ep in read_episodes(run):
        for e in ep.transcript.trace if ep.transcript is not None else []:
            fired[e.mechanism] += 1
    out["mechanism_events"] = dict(sorted(fired.items()))
    out["family_mechanisms"] = sorted(get_family("service-desk").mechanisms)
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
    lines = [f"service-desk agent calibration on {s['n_tasks']} tasks ({s['tasks']}), agent seed {s['agent_seed']}, "
             f"{s['seconds']} s"]
    for k, v in s.items():
        if isinstance(v, int | float | str) and k not in ("n_tasks", "tasks", "seconds", "agent_seed"):
            lines.append(f"  {k:40s} {v}")
        elif k.startswith("shown:") or k == "looks_right_fields":
            lines.append(f"  {k:40s} {v}")
    for key, c in s.get("outcomes", {}).items():
        lines.append(f"  {key:32s} " + " ".join(f"{a}={b}" for a, b in c.items()))
    for row in s.get("explained_by", []):
        lines.append(f"  explains {row['operation']:16s} {row['mechanism']:20s} pairs={row['pairs']} "
                     f"rescues={row['rescues']} harms={row['harms']}")
    lines.append("  mechanisms without a rescue or harm: " + ", ".join(s.get("mechanisms_without_effect_names", [])))
    lines.append("  mechanism events: " + ", ".join(f"{k}={v}" for k, v in s.get("mechanism_events", {}).items()))
    return "\n".join(lines)


def targets_table(summaries: list[dict[str, Any]]) -> str:
    """Every target, per agent seed: the value and whether it is met."""
    seeds = [s["agent_seed"] for s in summaries]
    lines = ["targets (default profile)", "  " + f"{'target':76s}" + "".join(f"seed {x:<8}" for x in seeds)]
    for key, what, ok in TARGETS:
        cells = []
        for s in summaries:
            v = s.get(key)
            cells.append("-" if v is None else f"{v:g} {'ok' if ok(v) else 'MISS'}")
        lines.append(f"  {what:76s}" + "".join(f"{c:13s}" for c in cells))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
