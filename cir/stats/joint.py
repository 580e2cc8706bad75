"""Joint outcomes of two recovery operations on the same tasks (paper, appendix A).

Where a cohort ran two operations from the same state (e.g. full refresh and the
content-ablated refresh), each task has a paired outcome under each; their 4 x 4 joint
table separates "the env was queried" from "the agent read the answer".
:func:`joint_outcomes` counts the joint outcomes (tidy, zeros included),
:func:`joint_matrix` shapes one group as the 4 x 4 matrix, and :func:`joint_effects`
gives the paired effects on the tasks where both ran, with task-level intervals.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from cir import __version__
from cir.episode.protocol import DEFAULT_LEVEL, DEFAULT_RESAMPLES, DEFAULT_SEED
from cir.pairs.paired import KEY_COLUMNS, OUTCOMES, outcome_of
from cir.stats.bootstrap import bootstrap_ratios, check_resamples, percentile_ci, task_group_sums
from cir.stats.decompose import (
    check_keys,
    check_value,
    group_index,
    group_key,
    select_subset,
    sort_groups,
    task_index,
)
from cir.stats.significance import group_seed, mcnemar_p, sign_flip_test
from cir.util.deprecation import renamed_parameters
from cir.util.errors import CirError

JOINT_EFFECT_COLUMNS = [
    "comparison", "n", "n_tasks", "wins", "losses", "net",
    "effect_pp", "ci_low_pp", "ci_high_pp", "sign_flip_p", "mcnemar_p",
]


def _joint_pairs(
    df: pd.DataFrame,
    a: str,
    b: str,
    on: str,
    subset: str,
    require_prefix_match: bool,
    require_executed: bool,
    filters: dict[str, object],
) -> tuple[pd.DataFrame, dict]:
    rows = select_subset(df, subset, require_prefix_match)
    (on_key,) = check_keys(rows, [on])
    if str(a) == str(b):
        raise CirError(f"joint: a and b are both {a!r}; choose two different {on} values")
    for column, value in filters.items():
        if value is None:
            continue
        check_keys(rows, [column])
        check_value(rows, column, value)
        rows = rows.loc[rows[column].astype(str) == str(value)]
    check_value(rows, on_key, a)
    check_value(rows, on_key, b)
    pair_keys = ["task_id"] + [c for c in KEY_COLUMNS if c not in ("task_id", on_key)]
    extra = [c for c in ("split", "task_type", "agent") if c in rows.columns and c not in pair_keys + [on_key]]
    cols = pair_keys + extra + ["y0", "y1", "executed"]
    side_a = rows.loc[rows[on_key].astype(str) == str(a), cols]
    side_b = rows.loc[rows[on_key].astype(str) == str(b), [*pair_keys, "y0", "y1", "executed"]]
    pairs = side_a.merge(side_b, on=pair_keys, suffixes=("_a", "_b"), how="inner")
    info = {"pairs_total": len(pairs)}
    if require_executed:
        both = (pairs["executed_a"] == 1) & (pairs["executed_b"] == 1)
        info["excluded_not_executed"] = int((~both).sum())
        pairs = pairs.loc[both]
    else:
        info["excluded_not_executed"] = 0
    info["y0_mismatch"] = int((pairs["y0_a"] != pairs["y0_b"]).sum())
    if pairs.empty:
        raise CirError(
            f"joint: no task has executed rows for both {on} {a!r} and {b!r}"
            + "".join(f", {k}={v!r}" for k, v in filters.items() if v is not None)
        )
    pairs = pairs.reset_index(drop=True)
    pairs["outcome_a"] = [outcome_of(x, y) for x, y in zip(pairs["y0_a"], pairs["y1_a"], strict=True)]
    pairs["outcome_b"] = [outcome_of(x, y) for x, y in zip(pairs["y0_b"], pairs["y1_b"], strict=True)]
    return pairs, info


@renamed_parameters("cohort=", cohort="subset")
def joint_outcomes(
    df: pd.DataFrame,
    a: str = "refresh",
    b: str = "refresh_ablated",
    on: str = "operation",
    by: Sequence[str] = ("condition", "delay"),
    condition: str | None = None,
    delay: int | None = None,
    subset: str = "all",
    require_prefix_match: bool = True,
    require_executed: bool = True,
) -> pd.DataFrame:
    """Joint outcome counts of two operations on the same tasks (paper, appendix A).

    Tidy: one row per group and (outcome under a, outcome under b) with count ``n``,
    all 16 combinations present (zeros included). Only pairs where both operations
    were executed are counted (a run that ended before the delay has no recovery).
    """
    pairs, info = _joint_pairs(
        df, a, b, on, subset, require_prefix_match, require_executed,
        {"condition": condition, "delay": delay},
    )
    keys = check_keys(pairs, list(by))
    _, groups = group_index(pairs, keys)
    grid = pd.MultiIndex.from_product([OUTCOMES, OUTCOMES], names=["outcome_a", "outcome_b"]).to_frame(index=False)
    full = groups.merge(grid, how="cross") if keys else grid
    counts = pairs.groupby(keys + ["outcome_a", "outcome_b"], dropna=False).size().rename("n").reset_index()
    table = full.merge(counts, on=keys + ["outcome_a", "outcome_b"], how="left")
    table["n"] = table["n"].fillna(0).astype(int)
    table.insert(len(keys), "a", str(a))
    table.insert(len(keys) + 1, "b", str(b))
    table.attrs.update(cir_version=__version__, kind="joint_counts", on=on, a=str(a), b=str(b), by=keys,
                       subset=subset, condition=condition, delay=delay, **info)
    return table


def joint_matrix(counts: pd.DataFrame) -> pd.DataFrame:
    """The 4 x 4 matrix (rows: outcome under a, columns: under b) of one group of joint counts."""
    matrix = counts.pivot_table(index="outcome_a", columns="outcome_b", values="n", aggfunc="sum", fill_value=0)
    return matrix.reindex(index=OUTCOMES, columns=OUTCOMES, fill_value=0).astype(int)


def _comparison_records(label: str, groups: pd.DataFrame, keys: list[str], den: np.ndarray,
                        num: np.ndarray, wins: np.ndarray, losses: np.ndarray,
                        ci: tuple[np.ndarray, np.ndarray], resamples: int, seed: int) -> list[dict]:
    """One comparison's row per group, from the task x group sums of its differences (``num``)
    and of its rows (``den``), its wins, losses and bootstrap interval."""
    records = []
    for g in range(len(groups)):
        key = group_key(groups, keys, g)
        n = int(den[:, g].sum())
        records.append({
            **dict(zip(keys, key, strict=True)),
            "comparison": label,
            "n": n,
            "n_tasks": int((den[:, g] > 0).sum()),
            "wins": int(wins[g]),
            "losses": int(losses[g]),
            "net": int(wins[g] - losses[g]),
            "effect_pp": 100 * num[:, g].sum() / n,
            "ci_low_pp": 100 * ci[0][g],
            "ci_high_pp": 100 * ci[1][g],
            "sign_flip_p": sign_flip_test(num[den[:, g] > 0, g], resamples, group_seed(seed, (*key, label))),
            "mcnemar_p": mcnemar_p(int(wins[g]), int(losses[g])),
        })
    return records


@renamed_parameters("cohort=", cohort="subset")
def joint_effects(
    df: pd.DataFrame,
    a: str = "refresh",
    b: str = "refresh_ablated",
    on: str = "operation",
    by: Sequence[str] = ("condition", "delay"),
    condition: str | None = None,
    delay: int | None = None,
    subset: str = "all",
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = DEFAULT_LEVEL,
    require_prefix_match: bool = True,
    require_executed: bool = True,
) -> pd.DataFrame:
    """Paired effects on the tasks where both operations ran (paper, appendix A, table 2).

    Three comparisons per group: ``a`` vs no recovery, ``b`` vs no recovery and ``a``
    vs ``b`` (success under a minus under b). ``wins``/``losses`` count tasks where the
    first side succeeded and the second failed / the reverse; ``net`` = wins - losses.
    All comparisons share the task resamples.
    """
    check_resamples(resamples, level)
    pairs, info = _joint_pairs(
        df, a, b, on, subset, require_prefix_match, require_executed,
        {"condition": condition, "delay": delay},
    )
    keys = check_keys(pairs, list(by))
    gcodes, groups = group_index(pairs, keys)
    tcodes, tasks = task_index(pairs)
    n_tasks, n_groups = len(tasks), len(groups)
    comparisons = [
        (f"{a} vs none", pairs["y1_a"], pairs["y0_a"]),
        (f"{b} vs none", pairs["y1_b"], pairs["y0_b"]),
        (f"{a} vs {b}", pairs["y1_a"], pairs["y1_b"]),
    ]
    ones = np.ones(len(pairs))
    den = task_group_sums(tcodes, gcodes, ones, n_tasks, n_groups)
    nums = [
        task_group_sums(tcodes, gcodes, (first - second).to_numpy(dtype=float), n_tasks, n_groups)
        for _, first, second in comparisons
    ]
    reps = bootstrap_ratios(np.hstack(nums), np.hstack([den] * len(nums)), resamples, seed)
    low, high = percentile_ci(reps, level)
    records = []
    for c, (label, first, second) in enumerate(comparisons):
        wins = np.bincount(gcodes, weights=((first == 1) & (second == 0)).to_numpy(), minlength=n_groups)
        losses = np.bincount(gcodes, weights=((first == 0) & (second == 1)).to_numpy(), minlength=n_groups)
        ci = (low[c * n_groups:(c + 1) * n_groups], high[c * n_groups:(c + 1) * n_groups])
        records += _comparison_records(label, groups, keys, den, nums[c], wins, losses, ci, resamples, seed)
    table = pd.DataFrame.from_records(records, columns=keys + JOINT_EFFECT_COLUMNS)
    table = sort_groups(table, keys) if keys else table
    table.attrs.update(cir_version=__version__, kind="joint_effects", on=on, a=str(a), b=str(b), by=keys,
                       subset=subset, condition=condition, delay=delay, resamples=int(resamples),
                       seed=int(seed), level=level, **info)
    return table
