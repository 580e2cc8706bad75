"""Stale reads that look right, measured on one replicate's fitting and held-out cohorts.

Generates one replicate's ``primary`` (fitting) and ``cir_eval`` (held-out) cohorts at their full
size with the shipped configs (clean, stale2, stale1, lag2, lag1, missing), runs them with the
built-in agent, fits the study's routers on the primary cohort's factual-success tasks and
writes, by perturbation kind (:mod:`cir.study.kinds`): each router's held-out ``p_err`` AUC
against the clean cells, every held-out policy's effect and share of its oracle, the margins,
and what each perturbed arm showed (the true text, an anomalous text, one that looks right), by
kind and by what was shown. The five-replicate study with the same
configs is ``cir reproduce --replicates 5`` (the reference study); this is its first replicate's
two cohorts, for a measurement before it runs.

Usage::

    python benchmarks/lag_detection.py --seed 0 --work /tmp/lag-work --jobs 2
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--resamples", type=int, default=10_000)
    args = ap.parse_args(argv)

    from cir.pairs.paired import read_paired
    from cir.pairs.run import RunSpec, run_experiments
    from cir.pairs.settings import RunSettings
    from cir.pairs.shown import with_shown
    from cir.stats.decompose import select_subset
    from cir.study.experiments import load_experiments
    from cir.study.kinds import kind_section, scored_cells, shown_split, with_arm_shown
    from cir.study.page import Report, markdown_table
    from cir.study.reproduce import cohort_tasks
    from cir.study.selective import run_selective

    started = time.perf_counter()
    experiments = load_experiments()
    fit = next(e for e in experiments if e.fit_cir)
    test = next(e for e in experiments if e.role == "eval")
    # the slices as the study cuts them (every cohort on the fitting cohort's split counted)
    cohorts = cohort_tasks(args.work, experiments, False, args.seed, False, args.jobs)
    settings = RunSettings(seed=args.seed, jobs=args.jobs)
    specs = [RunSpec(cohorts[e.name], args.work / "runs" / e.name, settings.with_replay(e.replay),
                     tasks_source=f"{e.split}[{e.name}]") for e in (fit, test)]
    run_experiments(specs, progress=False, echo=lambda s: None)
    ran = time.perf_counter() - started
    train = select_subset(read_paired(args.work / "runs" / fit.name, require_features=True), fit.fit_cir)
    test_df = with_shown(args.work / "runs" / test.name)
    sel = run_selective(train, test_df, None, resamples=args.resamples, seed=args.seed, source=test.name)
    report = Report("lag detection")
    out = args.work / "results"
    summary = sel.evaluation["summary"]
    kind_section(report, out, with_arm_shown(sel.evaluation["episodes"], test_df), list(dict.fromkeys(summary["policy"])),
                 list(sel.routers), scored_cells(sel.routers, test_df),
                 shown_split(with_shown(args.work / "runs" / e.name) for e in (fit, test)), resamples=args.resamples,
                 seed=args.seed)
    for kind, payload in report.blocks:
        if kind == "table":
            df, _, caption = payload
            print(f"\n{caption}\n\n{markdown_table(df)}")
    print(f"\nruns {ran:.0f} s, all {time.perf_counter() - started:.0f} s; tables in {out / 'tables'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
