"""What each kind of perturbed arm held, in a finished study with replicates (the committed ``data/`` too).

Reads a ``cir reproduce --replicates N`` output (each replicate's run folders and router files;
no cohort runs again) and writes, pooled over the replicates as the pooled report does: what the
no-recovery arms of every cohort showed (the true text, a text the family's test finds anomalous, a
wrong text that looks right: :func:`cir.study.kinds.shown_split`; derived from the episode stores
for runs written before the paired table had the ``shown`` column), the error model's held-out AUC
by kind and by what was shown, every held-out policy's effect by kind and by what was shown, the
margins, and the study's named comparisons (those of the configs it is given) with Holm-adjusted p.
For a study that named none before it ran, the comparisons are post hoc: the output says so.

Usage::

    python benchmarks/shown_split.py data --out /tmp/split [--resamples 10000] [--experiments DIR]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("study", type=Path, help="a finished `cir reproduce --replicates N` output (e.g. data)")
    ap.add_argument("--out", type=Path, required=True, help="where the tables go (OUT/tables)")
    ap.add_argument("--resamples", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--experiments", type=Path, default=None,
                    help="the configs (default: the shipped ones, whose comparisons the output uses)")
    args = ap.parse_args(argv)

    from cir.study.comparisons import comparisons_block
    from cir.study.experiments import load_experiments
    from cir.study.kinds import kind_section, shown_split, with_arm_shown
    from cir.study.page import Report, markdown_table
    from cir.study.replicates import pooled_evaluation, pooled_paired, pooled_scored_cells

    started = time.perf_counter()
    record = json.loads((args.study / "study.json").read_text())
    studies = {int(s): args.study / "replicates" / f"seed-{s}" for s in record["replicate_seeds"]}
    experiments = load_experiments(args.experiments)
    test = next(e for e in experiments if e.role == "eval")
    arms, _, margins = pooled_evaluation(studies, experiments, resamples=args.resamples, seed=args.seed)
    tables = {e.name: pooled_paired(studies, e.name, shown=True) for e in experiments}
    arms = with_arm_shown(arms, tables[test.name])
    report = Report("what each kind held")
    kinds = kind_section(report, args.out, arms, arms.attrs["policies"], arms.attrs["routers"],
                         pooled_scored_cells(studies, experiments), shown_split(tables.values()),
                         resamples=args.resamples, seed=args.seed, suffix="_pooled")
    named_before = any("comparisons" in e for e in record["settings"].get("experiments", []))
    comparisons_block(report, args.out, test, {"condition": margins, "kind": kinds and kinds.margins,
                                               "shown": kinds and kinds.part_margins}, suffix="_pooled",
                      named_before=named_before)
    for kind, payload in report.blocks:
        if kind == "table":
            df, _, caption = payload
            print(f"\n{caption}\n\n{markdown_table(df)}")
        elif kind == "text":
            print(f"\n{payload}")
    print(f"\n{time.perf_counter() - started:.0f} s; tables in {args.out / 'tables'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
