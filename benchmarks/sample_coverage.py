"""Coverage of the effect's 95% interval on tables of K draws per arm with a planted answer.

Each replicate draws a new table from :func:`cir.pairs.synthetic.simulate_sampled` (a new
population sample of tasks, per-state success chances planted, K draws per arm and branch),
computes :func:`cir.stats.effects.effect_table` by condition and delay, and counts whether each
interval covers

* the *population* effect, ``100 E[p1 - p0]`` over the task distribution (``attrs["truth"]``),
  which is what the task-level cluster bootstrap (``bootstrap="tasks"``, the default) is for;
* the *conditional* effect, the mean true ``p1 - p0`` of the replicate's own tasks
  (``attrs["conditional"]``), for comparison.

for both ``bootstrap="tasks"`` and ``bootstrap="tasks+samples"`` (which also redraws each row's
K draw pairs). Every group of every replicate is one coverage event (groups of a replicate
share its tasks). Prints one line per K and bootstrap and, with ``--out FILE``, writes them
as JSON:

    python benchmarks/sample_coverage.py --replicates 500 --samples 1,4,16 --out coverage.json
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np

from cir.pairs.synthetic import simulate_sampled
from cir.stats.effects import effect_table

BOOTSTRAPS = ("tasks", "tasks+samples")


def coverage(replicates: int, samples: int, n_tasks: int, resamples: int, seed: int,
             level: float = 0.95) -> dict[str, dict[str, Any]]:
    """Per bootstrap: the intervals' coverage of the population and the conditional effect,
    their mean width, and the count of coverage events."""
    hits = {b: {"population": [], "conditional": [], "width": []} for b in BOOTSTRAPS}
    for r in range(replicates):
        df = simulate_sampled(n_tasks=n_tasks, samples=samples, seed=seed + r)
        for b in BOOTSTRAPS:
            table = effect_table(df, by=["condition", "delay", "operation"], resamples=resamples,
                                 seed=seed + r, level=level, bootstrap=b)
            for _, row in table.iterrows():
                key = (row["condition"], int(row["delay"]), row["operation"])
                low, high = row["ci_low_pp"], row["ci_high_pp"]
                hits[b]["population"].append(low <= df.attrs["truth"][key] <= high)
                hits[b]["conditional"].append(low <= df.attrs["conditional"][key] <= high)
                hits[b]["width"].append(high - low)
    return {b: {"events": len(h["population"]), "population": float(np.mean(h["population"])),
                "conditional": float(np.mean(h["conditional"])), "mean_width_pp": float(np.mean(h["width"]))}
            for b, h in hits.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=500)
    parser.add_argument("--samples", default="1,4,16", help="comma list of K")
    parser.add_argument("--tasks", type=int, default=80, help="tasks per replicate")
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="write the results as JSON")
    args = parser.parse_args()
    results = []
    for k in (int(x) for x in args.samples.split(",")):
        t0 = time.perf_counter()
        for b, c in coverage(args.replicates, k, args.tasks, args.resamples, args.seed).items():
            results.append({"samples": k, "bootstrap": b, **c})
            print(f"K={k:>2} bootstrap={b:<14} events={c['events']:>5}  population {100 * c['population']:5.1f}%  "
                  f"conditional {100 * c['conditional']:5.1f}%  mean width {c['mean_width_pp']:5.1f} pp", flush=True)
        print(f"   ({time.perf_counter() - t0:.0f} s for K={k})", flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump({"settings": vars(args), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
