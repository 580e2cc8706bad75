"""Do the routers learn the factual run's length? Fit at the 25% point, evaluate elsewhere.

The paper perturbs the env action after 25% of the factual run, so the decision point (and
the features that count turns, actions and context) says how long the factual run was, which
a live harness never knows. This script tests whether the study's refresh routers lean on that:

1. per replicate of a finished study (``STUDY_DIR``: a ``cir reproduce`` output, with or without
   replicates), the held-out cohort's tasks are generated again (the same generator, seed and
   slice, checked against the study's own run) and run with the study's agent and grid at two
   more points: env action 5 for every task (``--perturb-at 5``) and an env action from 3 to 7
   drawn per task from a digest of its id (``--perturb-between 3,7``); the 25% run is the
   study's own;
2. the routers ``cir`` (the paper's estimator) and ``cir_paired`` are fitted on the study's
   fitting cohort (its factual-success tasks, at the 25% point) twice: with every feature and
   without the six length features (:data:`LENGTH`);
3. each fitted pair walks the held-out tasks that are prefix-feasible at all three points, at
   each point, beside their baselines and the oracle (:func:`cir.router.evaluation.walk_routers`);
   the arms of every replicate are pooled and summarised with one task-level cluster bootstrap.

If the routers' gain at the 25% point came from the factual run's length, it would shrink at
the other points with every feature and much less without the length features; if it shrinks
alike with and without them, and the anomaly rule's and the oracle's shrink too, the points
change the problem, not what the routers learned.

Usage::

    python benchmarks/length_test.py data --work /tmp/length-work --out /tmp/length --jobs 2

``--work`` keeps the generated tasks and the new run folders (resumable: a second call reuses
them); ``--out`` gets ``length_test.csv`` (every policy at every point and feature set),
``length_margins.csv`` and ``length_test.md`` (the table the README cites).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

#: The features that count how far the run has come (turns, actions, context): the factual
#: run's length at the 25% point.
LENGTH = ("f_env_actions", "f_actions_left", "f_model_turns", "f_turns_left", "f_budget_used", "f_context_kchars")
#: The two points besides the study's 25%: (name, ReplaySettings fields).
POINTS = (("at 5", {"perturb_at": 5}), ("random 3-7", {"perturb_between": (3, 7)}))
ROUTERS = {"cir": "paper", "cir_paired": "paired"}
SHOWN = ("cir", "cir_paired", "anomaly", "anomaly_rate_matched", "anomaly_matched_cir_paired", "oracle")


def _parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("study", type=Path, help="a finished cir reproduce output")
    ap.add_argument("--work", type=Path, required=True, help="tasks and run folders of the new points")
    ap.add_argument("--out", type=Path, help="where the tables go (default: WORK/results)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--resamples", type=int, default=10_000)
    ap.add_argument("--runs-only", action="store_true", help="run the cohorts, do not analyse")
    return ap.parse_args(argv)


def _studies(study: Path) -> dict[int, Path]:
    """Each replicate's folder by its seed (a single study: its own)."""
    record = json.loads((study / "study.json").read_text(encoding="utf-8"))
    seeds = record.get("replicate_seeds")
    if seeds:
        return {int(s): study / "replicates" / f"seed-{s}" for s in seeds}
    return {int(record["settings"]["seed"]): study}


def _experiments(study: Path) -> list:
    """The study's experiments as it recorded them (its grid, not this checkout's configs)."""
    from cir.pairs.settings import ReplaySettings
    from cir.study.experiments import Experiment

    record = json.loads((study / "study.json").read_text(encoding="utf-8"))["settings"]
    out = []
    for e in record["experiments"]:
        replay = ReplaySettings(conditions=tuple(e["conditions"]), delays=tuple(e["delays"]),
                                operations=tuple(e["operations"]))
        out.append(Experiment(e["name"], e["role"], e["order"], e["split"], e["n_tasks"], e["quick_n_tasks"],
                              replay, e["source"], e.get("fit_cir"), e.get("env", "alfworld")))
    return sorted(out, key=lambda e: e.order)


def run_points(seed: int, study: Path, work: Path, jobs: int) -> dict[str, Path]:
    """The held-out cohort's run folder at every point (the study's own at 25%)."""
    from cir.pairs.record import RunRecord
    from cir.pairs.run import run_experiment
    from cir.pairs.settings import RunSettings
    from cir.pairs.store import RunStore
    from cir.study.reproduce import cohort_tasks

    experiments = _experiments(study)
    settings = json.loads((study / "study.json").read_text(encoding="utf-8"))["settings"]
    test = next(e for e in experiments if e.role == "eval")
    quick = bool(settings["quick"])
    same_split = [e for e in experiments if e.split == test.split]  # the slices of that split only
    tasks = cohort_tasks(work / f"seed-{seed}", same_split, quick, seed, False, jobs)[test.name]
    own = RunRecord.read(RunStore(study / "runs" / test.name))
    if own is None or sorted(own.task_ids or []) != sorted(t.task_id for t in tasks):
        raise SystemExit(f"seed {seed}: the tasks generated again are not the study's {test.name} tasks")
    runs = {"25%": study / "runs" / test.name}
    for name, fields in POINTS:
        out = work / f"seed-{seed}" / name.replace(" ", "_")
        run = RunSettings(replay=replace(test.replay, **fields), agent=settings["agent"], seed=seed, jobs=jobs)
        run_experiment(tasks, out, run, tasks_source=f"{test.split}[{test.name}] {name}", progress=False,
                       echo=lambda s: None)
        runs[name] = out
    return runs


def _fit(train, seed: int, drop: tuple[str, ...]) -> dict:
    from cir.router.policy import CIRPolicy

    table = train.drop(columns=list(drop))
    return {name: CIRPolicy(estimator=est, operations=("refresh",), seed=seed).fit(table).to_router()
            for name, est in ROUTERS.items()}


def analyse(studies: dict[int, Path], runs: dict[int, dict[str, Path]], resamples: int, seed: int):
    """(summary, margins, counts): every policy at every point and feature set, pooled."""
    import pandas as pd

    from cir.pairs.paired import read_paired
    from cir.router.evaluation import summarize_walks, walk_routers
    from cir.stats.decompose import select_subset

    walked: dict[tuple[str, str], list] = {}
    policies: dict[tuple[str, str], list[str]] = {}
    counts = []
    for s, study in studies.items():
        experiments = _experiments(study)
        fit = next(e for e in experiments if e.fit_cir)
        train = select_subset(read_paired(study / "runs" / fit.name, require_features=True), fit.fit_cir)
        tables = {name: read_paired(path, require_features=True) for name, path in runs[s].items()}
        common = set.intersection(*(set(t["task_id"]) for t in tables.values()))
        counts.append({"seed": s, **{f"tasks {k}": t["task_id"].nunique() for k, t in tables.items()},
                       "tasks at every point": len(common)})
        for features, drop in (("all", ()), ("without length", LENGTH)):
            routers = _fit(train, s, drop)
            for point, table in tables.items():
                arms, names = walk_routers(routers, table[table["task_id"].isin(common)], source=f"seed {s} {point}")
                arms = arms.assign(task_id=f"seed-{s}/" + arms["task_id"].astype(str))
                walked.setdefault((point, features), []).append(arms)
                policies[(point, features)] = names
    rows, margins = [], []
    for (point, features), parts in walked.items():
        arms = pd.concat(parts, ignore_index=True)
        summary, margin = summarize_walks(arms, policies[(point, features)], list(ROUTERS), resamples=resamples,
                                          seed=seed)
        rows.append(summary.assign(point=point, features=features))
        margins.append(margin.assign(point=point, features=features))
    return pd.concat(rows, ignore_index=True), pd.concat(margins, ignore_index=True), pd.DataFrame(counts)


def _markdown(summary, margins, counts) -> str:
    from cir.study.page import markdown_table

    every = summary[(summary["condition"] == "all") & summary["policy"].isin(SHOWN)]
    table = every.assign(effect=[f"{e:+.2f} [{lo:+.2f}, {hi:+.2f}]" for e, lo, hi in
                                 zip(every["effect_pp"], every["ci_low_pp"], every["ci_high_pp"], strict=True)],
                         share=[f"{100 * f:.0f}%" for f in every["oracle_fraction"]],
                         recovering=[f"{100 * r:.1f}%" for r in every["intervention_rate"]])
    table = table[["features", "point", "policy", "n_tasks", "effect", "share", "recovering"]]
    m = margins[(margins["condition"] == "all") & margins["versus"].isin(["anomaly", "anomaly_rate_matched",
                                                                            "anomaly_matched_cir_paired"])]
    m = m.assign(margin=[f"{v:+.2f} [{lo:+.2f}, {hi:+.2f}]" for v, lo, hi in
                         zip(m["margin_pp"], m["ci_low_pp"], m["ci_high_pp"], strict=True)])
    return ("## Held-out effect (pp, pooled, 95% task-level CI), share of the oracle's gain, recovery rate\n\n"
            + markdown_table(table) + "\n\n## Margins over the anomaly rules (pp)\n\n"
            + markdown_table(m[["features", "point", "policy", "versus", "margin"]]) + "\n\n## Tasks\n\n"
            + markdown_table(counts) + "\n")


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if str(Path(__file__).resolve().parents[1]) not in sys.path:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    studies = _studies(args.study)
    started = time.perf_counter()
    runs = {}
    for s, study in studies.items():
        t0 = time.perf_counter()
        runs[s] = run_points(s, study, args.work, args.jobs)
        print(f"seed {s}: held-out runs at every point ready ({time.perf_counter() - t0:.0f} s)", flush=True)
    if args.runs_only:
        return 0
    first = json.loads((args.study / "study.json").read_text(encoding="utf-8"))["settings"]["seed"]
    summary, margins, counts = analyse(studies, runs, args.resamples, int(first))
    out = args.out or args.work / "results"
    out.mkdir(parents=True, exist_ok=True)
    summary.to_csv(out / "length_test.csv", index=False)
    margins.to_csv(out / "length_margins.csv", index=False)
    counts.to_csv(out / "length_tasks.csv", index=False)
    text = _markdown(summary, margins, counts)
    (out / "length_test.md").write_text(text, encoding="utf-8")
    print(text)
    print(f"{time.perf_counter() - started:.0f} s; tables in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
