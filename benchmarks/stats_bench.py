"""Speed and agreement of the task-level cluster bootstrap (issue 5).

Speed: 10,000 resamples of a 300-task table with 16 condition x delay cells, by the
vectorised bootstrap of ``cir.stats.bootstrap`` and by two naive loops measured in the same
run: a pandas loop (rebuild the resampled table, group, average: what an analyst
would write first) and a numpy loop (gather the rows of the drawn tasks, bincount).
The naive loops run fewer resamples and their time is scaled linearly to the full
count (each resample costs the same); the printed line says how many ran.

Agreement: the bootstrap interval against ``scipy.stats.bootstrap`` on a
one-condition table, the sign-flip p against ``scipy.stats.permutation_test``, and
McNemar against a hand binomial count.

    nice python benchmarks/stats_bench.py [--resamples 10000] [--tasks 300] [--naive 200]
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np
import pandas as pd
from scipy import stats as sps

from cir.pairs.synthetic import simulate_paired
from cir.stats.bootstrap import bootstrap_ratios, percentile_ci, task_group_sums, task_weights
from cir.stats.decompose import group_index, task_index
from cir.stats.effects import effect_table
from cir.stats.significance import mcnemar_p, sign_flip_test


def _rng(seed: int) -> dict:
    """scipy >= 1.15 takes ``rng``; older releases ``random_state``."""
    import inspect

    key = "rng" if "rng" in inspect.signature(sps.bootstrap).parameters else "random_state"
    return {key: np.random.default_rng(seed)}


def _setup(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, int]:
    gcodes, groups = group_index(df, ["condition", "delay"])
    tcodes, tasks = task_index(df)
    diff = (df["y1"] - df["y0"]).to_numpy(dtype=float)
    return tcodes, gcodes, diff, tasks, len(tasks), len(groups)


def vectorised(df: pd.DataFrame, resamples: int, seed: int) -> tuple[float, np.ndarray]:
    tcodes, gcodes, diff, _, n_tasks, n_groups = _setup(df)
    start = time.perf_counter()
    num = task_group_sums(tcodes, gcodes, diff, n_tasks, n_groups)
    den = task_group_sums(tcodes, gcodes, np.ones(len(diff)), n_tasks, n_groups)
    reps = bootstrap_ratios(num, den, resamples, seed)
    low, high = percentile_ci(reps)
    return time.perf_counter() - start, np.vstack([low, high])


def naive_numpy(df: pd.DataFrame, resamples: int, seed: int) -> tuple[float, np.ndarray]:
    """One Python iteration per resample: gather the drawn tasks' rows, average per cell."""
    tcodes, gcodes, diff, _, n_tasks, n_groups = _setup(df)
    rows_of = [np.flatnonzero(tcodes == t) for t in range(n_tasks)]
    start = time.perf_counter()
    reps = []
    for w in task_weights(n_tasks, resamples, seed):
        for weights in w:
            picked = np.concatenate([rows_of[t] for t in np.repeat(np.arange(n_tasks), weights.astype(int))])
            sums = np.bincount(gcodes[picked], weights=diff[picked], minlength=n_groups)
            counts = np.bincount(gcodes[picked], minlength=n_groups)
            reps.append(sums / counts)
    low, high = percentile_ci(np.array(reps))
    return time.perf_counter() - start, np.vstack([low, high])


def naive_pandas(df: pd.DataFrame, resamples: int, seed: int) -> float:
    """The first thing an analyst writes: concat the drawn tasks' rows, groupby, mean."""
    by_task = {t: part for t, part in df.assign(d=df["y1"] - df["y0"]).groupby("task_id")}
    tasks = sorted(by_task)
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    reps = []
    for _ in range(resamples):
        picked = rng.integers(0, len(tasks), len(tasks))
        sample = pd.concat([by_task[tasks[i]] for i in picked])
        reps.append(sample.groupby(["condition", "delay"])["d"].mean().to_numpy())
    np.percentile(np.array(reps), [2.5, 97.5], axis=0)
    return time.perf_counter() - start


def agreement(seed: int) -> dict:
    out: dict = {}
    one = simulate_paired(300, conditions=("stale2",), delays=(2,), seed=seed + 1)
    table = effect_table(one, by=[], resamples=10_000, seed=seed)
    d = (one["y1"] - one["y0"]).to_numpy(dtype=float) * 100
    ref = sps.bootstrap((d,), np.mean, method="percentile", n_resamples=10_000,
                        **_rng(seed + 2), vectorized=True).confidence_interval
    out["bootstrap_vs_scipy"] = {
        "tasks": len(one), "effect_pp": float(table["effect_pp"].item()),
        "cir_ci_pp": [float(table["ci_low_pp"].item()), float(table["ci_high_pp"].item())],
        "scipy_ci_pp": [float(ref.low), float(ref.high)],
        "max_abs_diff_pp": float(max(abs(table["ci_low_pp"].item() - ref.low),
                                     abs(table["ci_high_pp"].item() - ref.high))),
        "one_task_step_pp": 100 / len(one),
    }
    rng = np.random.default_rng(seed + 3)
    exact_diffs = []
    for _ in range(200):
        x = rng.choice([-1.0, 0.0, 1.0, 0.5, -2.0], size=int(rng.integers(2, 13)))
        ours = sign_flip_test(x)
        theirs = sps.permutation_test((x,), lambda v, axis: np.mean(v, axis=axis), permutation_type="samples",
                                      n_resamples=np.inf).pvalue
        exact_diffs.append(abs(ours - theirs))
    x = rng.choice([-1.0, 0.0, 1.0], p=[0.2, 0.55, 0.25], size=300)
    ours = sign_flip_test(x, resamples=100_000, seed=seed)
    theirs = sps.permutation_test((x,), lambda v, axis: np.mean(v, axis=axis), permutation_type="samples",
                                  n_resamples=100_000, **_rng(seed + 4)).pvalue
    out["sign_flip_vs_scipy"] = {
        "exact_cases": len(exact_diffs), "exact_max_abs_diff": float(max(exact_diffs)),
        "monte_carlo_nonzero_tasks": int((x != 0).sum()), "monte_carlo_resamples": 100_000,
        "cir_p": float(ours), "scipy_p": float(theirs), "abs_diff": float(abs(ours - theirs)),
        "monte_carlo_se": float(math.sqrt(2 * theirs * (1 - theirs) / 100_000)),
    }
    worst = 0.0
    for b in range(0, 41):
        for c in range(0, 41):
            if b + c == 0:
                continue
            n, k = b + c, min(b, c)
            hand = min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n)
            worst = max(worst, abs(mcnemar_p(b, c) - hand))
    out["mcnemar_vs_hand"] = {"cases": 41 * 41 - 1, "max_abs_diff": worst}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--tasks", type=int, default=300)
    parser.add_argument("--naive", type=int, default=200, help="resamples run by each naive loop (scaled)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()

    df = simulate_paired(args.tasks, conditions=("clean", "stale1", "stale2", "missing"),
                         delays=(0, 1, 2, 4), seed=args.seed)
    cells = df.groupby(["condition", "delay"]).ngroups
    vectorised(df, 200, args.seed)  # warm up imports and caches
    t_vec, ci_vec = vectorised(df, args.resamples, args.seed)
    start = time.perf_counter()
    effect_table(df, by=["condition", "delay"], resamples=args.resamples, seed=args.seed)
    t_table = time.perf_counter() - start
    t_np, _ = naive_numpy(df, args.naive, args.seed)
    t_pd = naive_pandas(df, args.naive, args.seed)
    # Same resamples, same intervals: run the numpy loop on a prefix of the vectorised draws.
    _, ci_vec_small = vectorised(df, args.naive, args.seed)
    _, ci_np_small = naive_numpy(df, args.naive, args.seed)
    scale = args.resamples / args.naive
    result = {
        "tasks": args.tasks, "rows": len(df), "cells": cells, "resamples": args.resamples,
        "vectorised_bootstrap_s": t_vec,
        "effect_table_total_s": t_table,
        "naive_numpy_loop_s_scaled": t_np * scale, "naive_numpy_resamples_run": args.naive,
        "naive_pandas_loop_s_scaled": t_pd * scale, "naive_pandas_resamples_run": args.naive,
        "speedup_vs_numpy_loop": t_np * scale / t_vec,
        "speedup_vs_pandas_loop": t_pd * scale / t_vec,
        "same_draws_same_ci": bool(np.allclose(ci_vec_small, ci_np_small)),
    }
    result["agreement"] = agreement(args.seed)
    print(f"table: {args.tasks} tasks x {cells} condition-delay cells ({len(df)} rows), "
          f"{args.resamples} task-level resamples")
    print(f"vectorised bootstrap (cir.stats.bootstrap):    {t_vec:8.3f} s")
    print(f"effect_table incl. counts, sign-flip, McNemar: {t_table:8.3f} s")
    print(f"naive numpy loop per resample:          {t_np * scale:8.3f} s "
          f"(ran {args.naive}, scaled x{scale:g}) -> vectorised is {result['speedup_vs_numpy_loop']:.0f}x faster")
    print(f"naive pandas loop per resample:         {t_pd * scale:8.3f} s "
          f"(ran {args.naive}, scaled x{scale:g}) -> vectorised is {result['speedup_vs_pandas_loop']:.0f}x faster")
    print(f"vectorised and numpy loop on the same {args.naive} draws give the same CIs: "
          f"{result['same_draws_same_ci']}")
    print(json.dumps(result["agreement"], indent=2))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)


if __name__ == "__main__":
    main()
