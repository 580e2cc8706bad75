"""The router on the hard planted worlds, replicated: gains, margins, clean harm, interval coverage.

Runs :func:`cir.study.hard_worlds.run_hard` (worlds (d)-(h) of
:func:`cir.pairs.synthetic.planted_world`: an XOR interaction, weak detection, clean harm in a
subgroup, a shifted held-out population, a null held-out world a router recovers in; every router
setting the study's defaults; 375 held-out tasks, the reference study's) and reports per world:

- each policy's share of the planted oracles' gain (ratio of mean held-out effects);
- each router's margin over the anomaly rule (mean, t interval over replicates) and the share of
  replicates whose own 95% interval of the margin excludes 0;
- clean-harm violations (the share of replicates whose realized and expected clean harm exceed
  epsilon) of each router and of the anomaly rule;
- the coverage of each policy's true effect on the world's held-out population (from a
  20,000-task draw of it) by the replicate's 95% intervals: the study's (the task-cluster
  bootstrap's percentile interval, or the counts' one where few arms differ: ``cir.stats.counts``),
  the bootstrap's alone, scipy's BCa and the counts' one, with their mean widths;
- each world's checks (written before any replicate ran: ``cir.study.hard_worlds.HARD``).

Usage::

    nice -n 10 python benchmarks/planted_hard.py --replicates 200 --jobs 1 --out data/planted

keeps each replicate's rows in ``--cache`` as it finishes (the same command resumes), then
writes ``hard_worlds.json`` (settings, seconds, the summary, the checks) and
``hard_worlds_rows.csv.gz`` (one row per world, replicate and policy) into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicates", type=int, default=200, help="replicates of each world")
    ap.add_argument("--worlds", default="d,e,f,g,h")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples of each replicate's intervals")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--cache", type=Path, default=None,
                    help="where each replicate's rows are kept as it finishes (default: OUT/replicates-...)")
    args = ap.parse_args(argv)

    import numpy as np
    import pandas as pd

    from cir import __version__
    from cir.study.hard_worlds import (
        STUDY_HELDOUT,
        TRUTH_TASKS,
        hard_criteria,
        hard_summary,
        run_hard,
    )
    from cir.study.page import markdown_table

    worlds = tuple(w.strip() for w in args.worlds.split(",") if w.strip())
    args.out.mkdir(parents=True, exist_ok=True)
    cache = args.cache or args.out / f"replicates-seed{args.seed}-resamples{args.resamples}"
    started = time.perf_counter()

    def progress(done: int, total: int) -> None:
        print(f"\r{done}/{total} replicates, {time.perf_counter() - started:.0f} s", end="", file=sys.stderr,
              flush=True)

    rows = run_hard(args.replicates, worlds=worlds, seed=args.seed, jobs=args.jobs, resamples=args.resamples,
                    folder=cache, progress=progress)
    print(file=sys.stderr)
    seconds = time.perf_counter() - started
    summary = hard_summary(rows)
    checks = hard_criteria(summary)
    rows.to_csv(args.out / "hard_worlds_rows.csv.gz", index=False)

    def plain(df: pd.DataFrame) -> list[dict]:
        return [{k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in r.items()}
                for r in json.loads(df.to_json(orient="records"))]

    (args.out / "hard_worlds.json").write_text(json.dumps(
        {"settings": {"replicates": args.replicates, "worlds": list(worlds), "seed": args.seed,
                      "resamples": args.resamples, "jobs": args.jobs, "heldout_tasks": STUDY_HELDOUT,
                      "truth_tasks": TRUTH_TASKS, "cir_version": __version__},
         "seconds": round(seconds, 1), "summary": plain(summary), "criteria": plain(checks)}, indent=1) + "\n")
    pd.set_option("display.width", 250)
    shown = summary[summary["policy"].isin(["cir", "cir_paired", "cir_paired_certified", "anomaly",
                                            "planted_oracle", "feature_oracle"])]
    print(markdown_table(shown[["world", "policy", "replicates", "effect_pp", "true_effect_pp",
                                "share_planted_oracle", "share_feature_oracle", "margin_anomaly_pp",
                                "margin_anomaly_excludes_zero", "violations_realized", "violations_expected",
                                "coverage_study", "coverage_percentile", "coverage_bca", "coverage_counts",
                                "counted_share", "width_study_pp", "width_percentile_pp", "width_bca_pp",
                                "width_counts_pp", "point_intervals",
                                "recovered_any", "p_err_auc"]]))
    print()
    print(markdown_table(checks))
    print(f"\n{len(rows)} rows, {seconds:.0f} s; written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
