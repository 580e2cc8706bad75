"""Effects of recovery and contrasts of effects, with task-level intervals and tests
(paper, sections 5.1-5.4).

:func:`effect_table`: per group, the paired outcome counts, the effect of recovery
(success with minus without, pp) with a cluster-bootstrap interval, the sign-flip and
McNemar tests, and the Tian-Pearl bounds. :func:`contrast_table`: the difference of
two effects (e.g. stale2 minus clean) on shared task resamples. Cohorts and counts come
from :mod:`cir.stats.decompose`, resampling from :mod:`cir.stats.bootstrap`, tests from
:mod:`cir.stats.significance`; joint outcomes of two operations are in :mod:`cir.stats.joint`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from cir import __version__
from cir.episode.protocol import DEFAULT_LEVEL, DEFAULT_RESAMPLES, DEFAULT_SEED
from cir.pairs.samples import has_samples, outcome_probabilities
from cir.stats.bootstrap import (
    bootstrap_ratios,
    check_resamples,
    percentile_ci,
    task_group_sums,
    two_stage_ratios,
)
from cir.stats.decompose import (
    DEFAULT_BY,
    check_keys,
    check_pooling,
    check_value,
    count_outcomes,
    group_index,
    group_key,
    select_subset,
    task_index,
)
from cir.stats.noise import floor_of, noise_floor
from cir.stats.significance import group_seed, mcnemar_p, sign_flip_test
from cir.util.deprecation import renamed_parameters
from cir.util.errors import CirError

EFFECT_COLUMNS = [
    "n",
    "n_tasks",
    "n_executed",
    "rescues",
    "harms",
    "stable_success",
    "stable_failure",
    "success_without",
    "success_with",
    "rescue_rate",
    "harm_rate",
    "effect_pp",
    "ci_low_pp",
    "ci_high_pp",
    "sign_flip_p",
    "mcnemar_p",
    "rescue_bound_low_pp",
    "rescue_bound_high_pp",
    "harm_bound_low_pp",
    "harm_bound_high_pp",
]

#: the columns an effect table of ``--samples`` above 1 adds (:func:`effect_table`)
SAMPLED_COLUMNS = ["k", "noise_floor_pp", "within_noise"]
#: what an interval may resample (:func:`effect_table`)
BOOTSTRAPS = ("tasks", "tasks+samples")

CONTRAST_COLUMNS = [
    "a",
    "b",
    "n_a",
    "rescues_a",
    "harms_a",
    "n_b",
    "rescues_b",
    "harms_b",
    "n_paired",
    "effect_a_pp",
    "effect_b_pp",
    "difference_pp",
    "ci_low_pp",
    "ci_high_pp",
    "sign_flip_p",
]

def tian_pearl_bounds(success_with: np.ndarray, success_without: np.ndarray) -> dict[str, np.ndarray]:
    """Bounds on P(rescue) and P(harm) from the two marginal success rates alone.

    Tian and Pearl (2000): max(0, p1 - p0) <= P(y1=1, y0=0) <= min(p1, 1 - p0), and
    symmetrically for harm. They show how little the marginals say; the paired
    design measures the rescue rate directly, and it always lies inside these bounds.
    """
    p1 = np.asarray(success_with, dtype=float)
    p0 = np.asarray(success_without, dtype=float)
    return {
        "rescue_low": np.maximum(0.0, p1 - p0),
        "rescue_high": np.minimum(p1, 1.0 - p0),
        "harm_low": np.maximum(0.0, p0 - p1),
        "harm_high": np.minimum(p0, 1.0 - p1),
    }


@renamed_parameters("cohort=", cohort="subset")
def effect_table(
    df: pd.DataFrame,
    by: Sequence[str] = DEFAULT_BY,
    subset: str = "all",
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = DEFAULT_LEVEL,
    require_prefix_match: bool = True,
    bootstrap: str = "tasks",
) -> pd.DataFrame:
    """Paired outcome counts, effect of recovery (pp) with cluster-bootstrap CI, tests, bounds.

    One row per group of ``by``. ``effect_pp`` = 100 * (mean y1 - mean y0) =
    100 * (rescue rate - harm rate). The interval resamples the tasks of the subset
    (all groups on the same resamples). ``sign_flip_p`` tests the task-level sum of
    y1 - y0; ``mcnemar_p`` is McNemar's exact test on rescues vs harms (NaN when a task
    has several rows in the group, as its pairs are then not independent). Tian-Pearl
    bounds on the rescue and harm probabilities (pp) sit beside the observed rates.

    A table of ``--samples`` K above 1 (:mod:`cir.pairs.samples`): the effect is
    ``100 * mean(p1_hat - p0_hat)`` over all K draws of every row, the counts are expected
    counts (:func:`cir.stats.decompose.expected_counts`), McNemar's test is NaN (its pairs
    are not independent draws), and three columns follow: ``k``, ``noise_floor_pp`` (how
    often two draws of the same arm disagree, in the group's condition:
    :mod:`cir.stats.noise`) and ``within_noise`` (the effect's size is within that floor).
    ``bootstrap`` says what the interval resamples: ``tasks`` (the task-level cluster
    bootstrap: the effect over the population of tasks, each task's sampling noise
    included) or ``tasks+samples`` (also, within each drawn task, each row's K draw pairs:
    conservative, for it counts the sampling noise twice); see
    ``benchmarks/sample_coverage.py`` for their coverage.
    """
    check_resamples(resamples, level)
    if bootstrap not in BOOTSTRAPS:
        raise CirError(f"bootstrap {bootstrap!r}: expected one of {', '.join(BOOTSTRAPS)}")
    rows = select_subset(df, subset, require_prefix_match)
    keys = check_keys(rows, by)
    check_pooling(rows, keys)
    table = count_outcomes(rows, keys)
    gcodes, groups = group_index(rows, keys)
    tcodes, tasks = task_index(rows)
    n_tasks, n_groups = len(tasks), len(groups)
    p = outcome_probabilities(rows)
    diff = p["p1"] - p["p0"]  # y1 - y0 for a table of one draw
    num = task_group_sums(tcodes, gcodes, diff, n_tasks, n_groups)
    den = task_group_sums(tcodes, gcodes, np.ones(len(rows)), n_tasks, n_groups)
    if bootstrap == "tasks":
        reps = bootstrap_ratios(num, den, resamples, seed)
    else:
        reps = two_stage_ratios(tcodes, gcodes, p, n_tasks, n_groups, resamples, seed)
    low, high = percentile_ci(reps, level)
    table["effect_pp"] = 100 * num.sum(axis=0) / den.sum(axis=0)
    table["ci_low_pp"] = 100 * low
    table["ci_high_pp"] = 100 * high
    table["sign_flip_p"] = [
        sign_flip_test(num[den[:, g] > 0, g], resamples, group_seed(seed, group_key(groups, keys, g)))
        for g in range(n_groups)
    ]
    # McNemar treats pairs as independent: only sensible when each task gives one pair to the group.
    sampled = has_samples(rows)
    table["mcnemar_p"] = [
        mcnemar_p(r, h) if n == nt and not sampled else np.nan
        for r, h, n, nt in zip(table["rescues"], table["harms"], table["n"], table["n_tasks"], strict=True)
    ]
    bounds = tian_pearl_bounds(table["success_with"].to_numpy(), table["success_without"].to_numpy())
    for name, values in bounds.items():
        table[f"{name.replace('_', '_bound_')}_pp"] = 100 * values
    extra = []
    if sampled:
        _noise_columns(table, rows, keys, gcodes)
        extra = SAMPLED_COLUMNS
    table = table[keys + EFFECT_COLUMNS + extra]
    table.attrs.update(
        cir_version=__version__, kind="effects", by=keys, subset=subset, resamples=int(resamples),
        seed=int(seed), level=level, require_prefix_match=require_prefix_match,
        dropped_prefix_mismatch=rows.attrs.get("dropped_prefix_mismatch", 0), tasks=n_tasks,
        **({"bootstrap": bootstrap} if sampled or bootstrap != "tasks" else {}),
    )
    return table


def _noise_columns(table: pd.DataFrame, rows: pd.DataFrame, keys: list[str], gcodes: np.ndarray) -> None:
    """``k``, ``noise_floor_pp`` (the floor of the group's condition, or of the group's rows when
    the grouping has no condition) and ``within_noise`` for a table of samples."""
    floors = noise_floor(rows).set_index("condition")["noise_floor_pp"]
    if "condition" in keys:
        floor = [float(floors.get(c, np.nan)) for c in table["condition"]]
    else:
        floor = [floor_of(rows.loc[gcodes == g]) for g in range(len(table))]
    table["k"] = [int(rows.loc[gcodes == g, "k"].max()) for g in range(len(table))]
    table["noise_floor_pp"] = floor
    table["within_noise"] = np.abs(table["effect_pp"].to_numpy()) <= np.asarray(floor)


@renamed_parameters("cohort=", cohort="subset")
def contrast_table(
    df: pd.DataFrame,
    a: str,
    b: str,
    on: str = "condition",
    by: Sequence[str] = ("operation", "delay"),
    subset: str = "all",
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = DEFAULT_LEVEL,
    require_prefix_match: bool = True,
) -> pd.DataFrame:
    """Difference of recovery effects between two values of ``on`` (e.g. stale2 - clean) per group.

    Both effects are computed on the same task resamples, so the correlation of a
    task's conditions is kept. ``sign_flip_p`` tests the per-task difference of
    effects on the ``n_paired`` tasks that have both ``a`` and ``b`` rows.
    """
    check_resamples(resamples, level)
    rows, on_key, keys = _contrast_rows(df, a, b, on, by, subset, require_prefix_match)
    is_a = (rows[on_key].astype(str) == str(a)).to_numpy()
    gcodes, groups = group_index(rows, keys)
    tcodes, tasks = task_index(rows)
    n_tasks, n_groups = len(tasks), len(groups)
    p = outcome_probabilities(rows)
    diff = p["p1"] - p["p0"]  # y1 - y0 for a table of one draw
    ones = np.ones(len(rows))
    num_a = task_group_sums(tcodes, gcodes, diff * is_a, n_tasks, n_groups)
    den_a = task_group_sums(tcodes, gcodes, ones * is_a, n_tasks, n_groups)
    num_b = task_group_sums(tcodes, gcodes, diff * ~is_a, n_tasks, n_groups)
    den_b = task_group_sums(tcodes, gcodes, ones * ~is_a, n_tasks, n_groups)
    reps = bootstrap_ratios(np.hstack([num_a, num_b]), np.hstack([den_a, den_b]), resamples, seed)
    low, high = percentile_ci(reps[:, :n_groups] - reps[:, n_groups:], level)
    table = groups.reset_index(drop=True).copy() if keys else pd.DataFrame(index=range(1))
    table["a"] = str(a)
    table["b"] = str(b)
    for name, side in (("a", is_a), ("b", ~is_a)):
        counts = count_outcomes(rows.loc[side], keys)
        merged = table[keys].merge(counts, on=keys, how="left") if keys else counts
        count = float if has_samples(rows) else int  # expected counts of a table of samples
        table[f"n_{name}"] = merged["n"].fillna(0).astype(int).to_numpy()
        table[f"rescues_{name}"] = merged["rescues"].fillna(0).astype(count).to_numpy()
        table[f"harms_{name}"] = merged["harms"].fillna(0).astype(count).to_numpy()
    _contrast_effects(table, (num_a, den_a), (num_b, den_b), groups, keys, resamples, seed)
    table["ci_low_pp"] = 100 * low
    table["ci_high_pp"] = 100 * high
    table = table[keys + CONTRAST_COLUMNS]
    table.attrs.update(
        cir_version=__version__, kind="contrast", on=on_key, a=str(a), b=str(b), by=keys, subset=subset,
        resamples=int(resamples), seed=int(seed), level=level,
        require_prefix_match=require_prefix_match, tasks=n_tasks,
    )
    return table


def _contrast_rows(df: pd.DataFrame, a: str, b: str, on: str, by: Sequence[str], subset: str,
                   require_prefix_match: bool) -> tuple[pd.DataFrame, str, list[str]]:
    """The subset's rows whose ``on`` is ``a`` or ``b``, the checked ``on`` and grouping keys."""
    rows = select_subset(df, subset, require_prefix_match)
    (on_key,) = check_keys(rows, [on])
    keys = check_keys(rows, by)
    if on_key in keys:
        raise CirError(f"contrast: {on!r} is compared (--a/--b), so it cannot also be a grouping key")
    check_pooling(rows, keys, on_key)
    if str(a) == str(b):
        raise CirError(f"contrast: a and b are both {a!r}; choose two different {on} values")
    check_value(rows, on_key, a)
    check_value(rows, on_key, b)
    return rows.loc[rows[on_key].astype(str).isin([str(a), str(b)])], on_key, keys


def _contrast_effects(table: pd.DataFrame, side_a: tuple[np.ndarray, np.ndarray],
                      side_b: tuple[np.ndarray, np.ndarray], groups: pd.DataFrame, keys: list[str],
                      resamples: int, seed: int) -> None:
    """Each side's effect, their difference and the sign-flip test of the per-task differences,
    from the task x group sums (numerators, denominators) of each side."""
    (num_a, den_a), (num_b, den_b) = side_a, side_b
    with np.errstate(invalid="ignore", divide="ignore"):
        effect_a = 100 * num_a.sum(axis=0) / den_a.sum(axis=0)
        effect_b = 100 * num_b.sum(axis=0) / den_b.sum(axis=0)
        paired = (den_a > 0) & (den_b > 0)
        task_diff = num_a / np.where(den_a > 0, den_a, 1) - num_b / np.where(den_b > 0, den_b, 1)
    table["n_paired"] = paired.sum(axis=0)
    table["effect_a_pp"] = effect_a
    table["effect_b_pp"] = effect_b
    table["difference_pp"] = effect_a - effect_b
    table["sign_flip_p"] = [
        sign_flip_test(task_diff[paired[:, g], g], resamples, group_seed(seed, group_key(groups, keys, g)))
        if paired[:, g].any() else np.nan
        for g in range(paired.shape[1])
    ]
