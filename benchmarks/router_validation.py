"""The router validated where the answer is known: the planted worlds, 200 replicates each.

Runs :func:`cir.study.validation.run_validation` (worlds (a), (b), (c) of
:func:`cir.pairs.synthetic.planted_world`; every router setting the study's defaults) and prints
each world's checks, measured:

- (a) errors detectable only partly, effects that vary with the features: ``cir_paired`` reaches
  at least 80% of the planted oracle's gain (the one that knows what a router sees, and the one
  that knows everything), and its margin over the anomaly rule has a 95% interval above zero;
- (b) a null world: the share of replicates whose router-minus-never interval excludes zero is
  at most 7%;
- (c) clean harm: the certified budget's held-out clean harm exceeds epsilon in at most delta
  (0.1) of the replicates (expected and realized), the empirical budget's beside it.

Usage::

    python benchmarks/router_validation.py --replicates 200 --jobs 2 --out /tmp/router-validation

writes each replicate's rows as it finishes (the same command resumes; with ``--no-cache`` every
replicate is fitted, else one the user's cache holds for this code and these settings is read from
there and each one fitted is kept there, where ``cir reproduce`` finds it), then
``validation_rows.csv`` (one row per world, replicate and policy), ``validation.csv``,
``validation_margins.csv``, ``validation_criteria.csv`` and ``validation.json`` (the settings
and timings) into ``--out``; ``cir reproduce`` writes the same tables (``tables/router_validation*.csv``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicates", type=int, default=200, help="replicates of each world")
    ap.add_argument("--worlds", default="a,b,c")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples of each replicate's intervals")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--no-cache", action="store_true",
                    help="fit every replicate, whatever the user's cache holds (and keep none there): a cold run")
    ap.add_argument("--quiet", action="store_true", help="no progress line")
    args = ap.parse_args(argv)

    import pandas as pd

    from cir import __version__
    from cir.study.page import markdown_table
    from cir.study.validation import code_version, criteria, run_validation, validation_summary
    from cir.util.progress import Steps

    worlds = tuple(w.strip() for w in args.worlds.split(",") if w.strip())
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    # each replicate's rows in OUT/replicates-.../ as it finishes (the same command resumes), and
    # in the user's cache unless --no-cache (a study with these settings then reads them there)
    parts = args.replicates * len(worlds)
    with Steps("planted worlds", {"replicates": 1.0}, enabled=not args.quiet) as steps:
        steps.next("replicates", parts=parts)
        rows = run_validation(args.replicates, worlds=worlds, seed=args.seed, jobs=args.jobs,
                              resamples=args.resamples, cache=not args.no_cache, steps=steps,
                              folder=args.out / f"replicates-{code_version()[:12]}-seed{args.seed}"
                                                f"-resamples{args.resamples}")
        steps.finish()
    seconds = time.perf_counter() - started
    summary, margins = validation_summary(rows)
    checks = criteria(summary, margins)
    rows.to_csv(args.out / "validation_rows.csv", index=False)
    summary.to_csv(args.out / "validation.csv", index=False)
    margins.to_csv(args.out / "validation_margins.csv", index=False)
    checks.to_csv(args.out / "validation_criteria.csv", index=False)
    (args.out / "validation.json").write_text(json.dumps(
        {"replicates": args.replicates, "worlds": list(worlds), "seed": args.seed, "resamples": args.resamples,
         "jobs": args.jobs, "seconds": round(seconds, 1), "cir_version": __version__, "code": code_version(),
         "cache": not args.no_cache}, indent=2) + "\n")
    pd.set_option("display.width", 200)
    shown = summary[summary["policy"].isin(["cir", "cir_paired", "anomaly", "anomaly_rate_matched_heldout",
                                            "cir_paired_empirical", "cir_paired_certified", "planted_oracle",
                                            "feature_oracle"])]
    print(markdown_table(shown[["world", "policy", "replicates", "effect_pp", "ci_low_pp", "ci_high_pp",
                                "share_feature_oracle", "share_planted_oracle", "excludes_zero", "intervention_rate",
                                "expected_clean_harm", "violations_expected", "violations_realized", "p_err_auc"]]))
    print()
    print(markdown_table(checks))
    print(f"\n{len(rows)} rows, {seconds:.0f} s; tables in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
