"""Effects, intervals and tests on paired recovery outcomes (paper, sections 5.1-5.4, appendix A).

The unit of inference is the task: every condition, delay and operation of a task
shares its agent, its start state and its factual run, so rows of a task are not
independent. Intervals therefore come from a task-level cluster bootstrap (resample
tasks with replacement, keep all rows of a task together) and tests flip the sign
of whole-task differences. The bootstrap is vectorised: per-task sums go into a
(tasks x groups) matrix and each resample is a row of task weights, so 10,000
resamples cost a few matrix products, not a Python loop.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence

import numpy as np
import pandas as pd

from cir import __version__
from cir.decompose import (
    DEFAULT_BY,
    _outcome_counts,
    _select,
    check_keys,
    group_index,
    prepare,
    sort_groups,
    task_index,
)
from cir.errors import CirError
from cir.paired import KEY_COLUMNS, OUTCOMES, outcome_of

DEFAULT_RESAMPLES = 10_000
DEFAULT_SEED = 0
DEFAULT_LEVEL = 0.95
# Sign-flip tests enumerate all 2**k sign patterns up to this many non-zero tasks.
MAX_EXACT_SIGN_FLIP = 20
# Upper bound on resamples x tasks held in memory at once by the bootstrap.
_CHUNK_CELLS = 4_000_000

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
JOINT_EFFECT_COLUMNS = [
    "comparison", "n", "n_tasks", "wins", "losses", "net",
    "effect_pp", "ci_low_pp", "ci_high_pp", "sign_flip_p", "mcnemar_p",
]


# --------------------------------------------------------------------------- bootstrap


def _check_resamples(resamples: int, level: float) -> None:
    if int(resamples) != resamples or resamples < 1:
        raise CirError(f"resamples must be a positive integer; got {resamples!r}")
    if not 0 < level < 1:
        raise CirError(f"confidence level must be between 0 and 1; got {level!r}")


def task_weights(n_tasks: int, resamples: int, seed: int | Sequence[int]) -> Iterator[np.ndarray]:
    """Chunks of bootstrap weights: row b holds how often each task is drawn in resample b.

    Drawing ``n_tasks`` task indices with replacement and counting them (bincount)
    is the multinomial resample of tasks; chunking bounds the memory.
    """
    if n_tasks < 1:
        raise CirError("the cluster bootstrap needs at least one task")
    rng = np.random.default_rng(seed)
    chunk = max(1, min(resamples, _CHUNK_CELLS // n_tasks))
    done = 0
    while done < resamples:
        c = min(chunk, resamples - done)
        idx = rng.integers(0, n_tasks, size=(c, n_tasks))
        idx += (np.arange(c) * n_tasks)[:, None]
        yield np.bincount(idx.ravel(), minlength=c * n_tasks).reshape(c, n_tasks).astype(float)
        done += c


def bootstrap_ratios(
    num: np.ndarray, den: np.ndarray, resamples: int, seed: int | Sequence[int]
) -> np.ndarray:
    """Cluster-bootstrap replicates of ``sum(num) / sum(den)`` for every column.

    ``num`` and ``den`` are (tasks x columns) per-task sums (e.g. of y1 - y0 and of
    row counts). Returns a (resamples x columns) array; a replicate in which a column
    drew none of its tasks is NaN (``percentile_ci`` ignores those).
    """
    num = np.asarray(num, dtype=float)
    den = np.asarray(den, dtype=float)
    if num.shape != den.shape or num.ndim != 2:
        raise ValueError("num and den must be 2-D arrays of the same shape (tasks x columns)")
    k = num.shape[1]
    both = np.hstack([num, den])  # one matrix product per chunk for numerator and denominator
    out = np.empty((resamples, k))
    start = 0
    with np.errstate(invalid="ignore", divide="ignore"):
        for w in task_weights(num.shape[0], resamples, seed):
            sums = w @ both
            out[start : start + len(w)] = sums[:, :k] / sums[:, k:]
            start += len(w)
    return out


def percentile_ci(replicates: np.ndarray, level: float = DEFAULT_LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of bootstrap replicates along axis 0 (NaN replicates ignored)."""
    alpha = (1 - level) / 2
    reps = np.asarray(replicates, dtype=float)
    if reps.ndim == 1:
        reps = reps[:, None]
    low = np.full(reps.shape[1], np.nan)
    high = np.full(reps.shape[1], np.nan)
    nan = np.isnan(reps)
    if not nan.any():  # the common case; np.percentile is much faster than np.nanpercentile
        q = np.percentile(reps, [100 * alpha, 100 * (1 - alpha)], axis=0)
        return q[0], q[1]
    ok = ~np.all(nan, axis=0)
    if ok.any():
        q = np.nanpercentile(reps[:, ok], [100 * alpha, 100 * (1 - alpha)], axis=0)
        low[ok], high[ok] = q[0], q[1]
    return low, high


def _task_group_sums(
    tcodes: np.ndarray, gcodes: np.ndarray, values: np.ndarray, n_tasks: int, n_groups: int
) -> np.ndarray:
    """(tasks x groups) matrix of the sums of ``values`` per task and group."""
    flat = tcodes * n_groups + gcodes
    return np.bincount(flat, weights=values, minlength=n_tasks * n_groups).reshape(n_tasks, n_groups)


# --------------------------------------------------------------------------- tests


def _signed_sums(values: np.ndarray) -> np.ndarray:
    """All 2**k sums of +/- values (k = len(values))."""
    sums = np.zeros(1)
    for v in values:
        sums = np.concatenate([sums + v, sums - v])
    return sums


def sign_flip_test(
    differences: Sequence[float] | np.ndarray,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int | Sequence[int] = DEFAULT_SEED,
    max_exact: int = MAX_EXACT_SIGN_FLIP,
) -> float:
    """Two-sided task-level sign-flip test of ``mean(differences) == 0``.

    One difference per task. Under the null of no effect each task's difference is
    as likely to have either sign, so the statistic is compared with its values over
    sign flips: all 2**k patterns when the k non-zero tasks are few (exact), else
    ``resamples`` random patterns with the (count + 1) / (resamples + 1) correction.
    """
    d = np.asarray(differences, dtype=float)
    scale = max(1.0, float(np.abs(d).sum()))
    d = d[np.abs(d) > 1e-12 * scale]
    if len(d) == 0:
        return 1.0
    observed = abs(d.sum())
    tol = 1e-9 * scale
    if len(d) <= max_exact:
        return float(np.mean(np.abs(_signed_sums(d)) >= observed - tol))
    rng = np.random.default_rng(seed)
    count = 0
    chunk = max(1, min(resamples, _CHUNK_CELLS // len(d)))
    done = 0
    while done < resamples:
        c = min(chunk, resamples - done)
        signs = rng.integers(0, 2, size=(c, len(d)), dtype=np.int8) * 2 - 1
        count += int(np.sum(np.abs(signs @ d) >= observed - tol))
        done += c
    return (count + 1) / (resamples + 1)


def mcnemar_p(rescues: int, harms: int) -> float:
    """McNemar's exact test on the discordant pairs (statsmodels), as a cross-check.

    Rows are treated as independent pairs, which holds within one condition x delay
    x operation cell (one row per task); the sign-flip test is the task-level test.
    """
    from statsmodels.stats.contingency_tables import mcnemar

    if rescues + harms == 0:
        return 1.0
    return float(mcnemar([[0, int(harms)], [int(rescues), 0]], exact=True).pvalue)


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


def _group_seed(seed: int, key: tuple) -> list[int]:
    """A seed for one group that does not depend on which other groups exist."""
    return [int(seed), zlib.crc32(repr(tuple(str(k) for k in key)).encode())]


def _group_keys(groups: pd.DataFrame, keys: list[str], g: int) -> tuple:
    return tuple(groups[k].iloc[g] for k in keys) if keys else ()


def _settings(**kwargs: object) -> dict:
    return {"cir_version": __version__, **kwargs}


# --------------------------------------------------------------------------- tables


def effect_table(
    df: pd.DataFrame,
    by: Sequence[str] = DEFAULT_BY,
    cohort: str = "all",
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = DEFAULT_LEVEL,
    require_prefix_match: bool = True,
) -> pd.DataFrame:
    """Paired outcome counts, effect of recovery (pp) with cluster-bootstrap CI, tests, bounds.

    One row per group of ``by``. ``effect_pp`` = 100 * (mean y1 - mean y0) =
    100 * (rescue rate - harm rate). The interval resamples the tasks of the cohort
    (all groups on the same resamples). ``sign_flip_p`` tests the task-level sum of
    y1 - y0; ``mcnemar_p`` is McNemar's exact test on rescues vs harms (NaN when a task
    has several rows in the group, as its pairs are then not independent). Tian-Pearl
    bounds on the rescue and harm probabilities (pp) sit beside the observed rates.
    """
    _check_resamples(resamples, level)
    rows = _select(prepare(df), cohort, require_prefix_match)
    keys = check_keys(rows, by)
    table = _outcome_counts(rows, keys)
    gcodes, groups = group_index(rows, keys)
    tcodes, tasks = task_index(rows)
    n_tasks, n_groups = len(tasks), len(groups)
    diff = (rows["y1"] - rows["y0"]).to_numpy(dtype=float)
    num = _task_group_sums(tcodes, gcodes, diff, n_tasks, n_groups)
    den = _task_group_sums(tcodes, gcodes, np.ones(len(rows)), n_tasks, n_groups)
    reps = bootstrap_ratios(num, den, resamples, seed)
    low, high = percentile_ci(reps, level)
    table["effect_pp"] = 100 * num.sum(axis=0) / den.sum(axis=0)
    table["ci_low_pp"] = 100 * low
    table["ci_high_pp"] = 100 * high
    table["sign_flip_p"] = [
        sign_flip_test(num[den[:, g] > 0, g], resamples, _group_seed(seed, _group_keys(groups, keys, g)))
        for g in range(n_groups)
    ]
    # McNemar treats pairs as independent: only sensible when each task gives one pair to the group.
    table["mcnemar_p"] = [
        mcnemar_p(r, h) if n == nt else np.nan
        for r, h, n, nt in zip(table["rescues"], table["harms"], table["n"], table["n_tasks"], strict=True)
    ]
    bounds = tian_pearl_bounds(table["success_with"].to_numpy(), table["success_without"].to_numpy())
    for name, values in bounds.items():
        table[f"{name.replace('_', '_bound_')}_pp"] = 100 * values
    table = table[keys + EFFECT_COLUMNS]
    table.attrs.update(
        _settings(
            kind="effects",
            by=keys,
            cohort=cohort,
            resamples=int(resamples),
            seed=int(seed),
            level=level,
            require_prefix_match=require_prefix_match,
            dropped_prefix_mismatch=rows.attrs.get("dropped_prefix_mismatch", 0),
            tasks=n_tasks,
        )
    )
    return table


def _check_value(rows: pd.DataFrame, column: str, value: str) -> None:
    present = rows[column].astype(str).unique().tolist()
    if str(value) not in present:
        raise CirError(
            f"{column} {value!r} is not in the paired table; present: {', '.join(sorted(present))}"
        )


def contrast_table(
    df: pd.DataFrame,
    a: str,
    b: str,
    on: str = "condition",
    by: Sequence[str] = ("operation", "delay"),
    cohort: str = "all",
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
    _check_resamples(resamples, level)
    rows = _select(prepare(df), cohort, require_prefix_match)
    (on_key,) = check_keys(rows, [on])
    keys = check_keys(rows, by)
    if on_key in keys:
        raise CirError(f"contrast: {on!r} is compared (--a/--b), so it cannot also be a grouping key")
    if str(a) == str(b):
        raise CirError(f"contrast: a and b are both {a!r}; choose two different {on} values")
    _check_value(rows, on_key, a)
    _check_value(rows, on_key, b)
    side = rows[on_key].astype(str)
    rows = rows.loc[side.isin([str(a), str(b)])]
    is_a = (rows[on_key].astype(str) == str(a)).to_numpy()
    gcodes, groups = group_index(rows, keys)
    tcodes, tasks = task_index(rows)
    n_tasks, n_groups = len(tasks), len(groups)
    diff = (rows["y1"] - rows["y0"]).to_numpy(dtype=float)
    ones = np.ones(len(rows))
    num_a = _task_group_sums(tcodes, gcodes, diff * is_a, n_tasks, n_groups)
    den_a = _task_group_sums(tcodes, gcodes, ones * is_a, n_tasks, n_groups)
    num_b = _task_group_sums(tcodes, gcodes, diff * ~is_a, n_tasks, n_groups)
    den_b = _task_group_sums(tcodes, gcodes, ones * ~is_a, n_tasks, n_groups)
    reps = bootstrap_ratios(np.hstack([num_a, num_b]), np.hstack([den_a, den_b]), resamples, seed)
    low, high = percentile_ci(reps[:, :n_groups] - reps[:, n_groups:], level)
    counts_a = _outcome_counts(rows.loc[is_a], keys)
    counts_b = _outcome_counts(rows.loc[~is_a], keys)
    table = groups.reset_index(drop=True).copy() if keys else pd.DataFrame(index=range(1))
    table["a"] = str(a)
    table["b"] = str(b)
    with np.errstate(invalid="ignore", divide="ignore"):
        effect_a = 100 * num_a.sum(axis=0) / den_a.sum(axis=0)
        effect_b = 100 * num_b.sum(axis=0) / den_b.sum(axis=0)
        paired = (den_a > 0) & (den_b > 0)
        task_diff = num_a / np.where(den_a > 0, den_a, 1) - num_b / np.where(den_b > 0, den_b, 1)
    for name, counts in (("a", counts_a), ("b", counts_b)):
        merged = table[keys].merge(counts, on=keys, how="left") if keys else counts
        table[f"n_{name}"] = merged["n"].fillna(0).astype(int).to_numpy()
        table[f"rescues_{name}"] = merged["rescues"].fillna(0).astype(int).to_numpy()
        table[f"harms_{name}"] = merged["harms"].fillna(0).astype(int).to_numpy()
    table["n_paired"] = paired.sum(axis=0)
    table["effect_a_pp"] = effect_a
    table["effect_b_pp"] = effect_b
    table["difference_pp"] = effect_a - effect_b
    table["ci_low_pp"] = 100 * low
    table["ci_high_pp"] = 100 * high
    table["sign_flip_p"] = [
        sign_flip_test(
            task_diff[paired[:, g], g], resamples, _group_seed(seed, _group_keys(groups, keys, g))
        )
        if paired[:, g].any()
        else np.nan
        for g in range(n_groups)
    ]
    table = table[keys + CONTRAST_COLUMNS]
    table.attrs.update(
        _settings(
            kind="contrast", on=on_key, a=str(a), b=str(b), by=keys, cohort=cohort,
            resamples=int(resamples), seed=int(seed), level=level,
            require_prefix_match=require_prefix_match, tasks=n_tasks,
        )
    )
    return table


# --------------------------------------------------------------------------- joint outcomes


def _joint_pairs(
    df: pd.DataFrame,
    a: str,
    b: str,
    on: str,
    cohort: str,
    require_prefix_match: bool,
    require_executed: bool,
    filters: dict[str, object],
) -> tuple[pd.DataFrame, dict]:
    rows = _select(prepare(df), cohort, require_prefix_match)
    (on_key,) = check_keys(rows, [on])
    if str(a) == str(b):
        raise CirError(f"joint: a and b are both {a!r}; choose two different {on} values")
    for column, value in filters.items():
        if value is None:
            continue
        check_keys(rows, [column])
        mask = rows[column].astype(str) == str(value)
        if not mask.any():
            present = sorted(rows[column].astype(str).unique().tolist())
            raise CirError(f"{column} {value!r} is not in the paired table; present: {', '.join(present)}")
        rows = rows.loc[mask]
    _check_value(rows, on_key, a)
    _check_value(rows, on_key, b)
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


def joint_outcomes(
    df: pd.DataFrame,
    a: str = "refresh",
    b: str = "refresh_ablated",
    on: str = "operation",
    by: Sequence[str] = ("condition", "delay"),
    condition: str | None = None,
    delay: int | None = None,
    cohort: str = "all",
    require_prefix_match: bool = True,
    require_executed: bool = True,
) -> pd.DataFrame:
    """Joint outcome counts of two operations on the same tasks (paper, appendix A).

    Tidy: one row per group and (outcome under a, outcome under b) with count ``n``,
    all 16 combinations present (zeros included). Only pairs where both operations
    were executed are counted (a run that ended before the delay has no recovery).
    """
    pairs, info = _joint_pairs(
        df, a, b, on, cohort, require_prefix_match, require_executed,
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
    table.attrs.update(_settings(kind="joint_counts", on=on, a=str(a), b=str(b), by=keys, cohort=cohort,
                                 condition=condition, delay=delay, **info))
    return table


def joint_matrix(counts: pd.DataFrame) -> pd.DataFrame:
    """The 4 x 4 matrix (rows: outcome under a, columns: under b) of one group of joint counts."""
    matrix = counts.pivot_table(index="outcome_a", columns="outcome_b", values="n", aggfunc="sum", fill_value=0)
    return matrix.reindex(index=OUTCOMES, columns=OUTCOMES, fill_value=0).astype(int)


def joint_effects(
    df: pd.DataFrame,
    a: str = "refresh",
    b: str = "refresh_ablated",
    on: str = "operation",
    by: Sequence[str] = ("condition", "delay"),
    condition: str | None = None,
    delay: int | None = None,
    cohort: str = "all",
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
    _check_resamples(resamples, level)
    pairs, info = _joint_pairs(
        df, a, b, on, cohort, require_prefix_match, require_executed,
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
    den = _task_group_sums(tcodes, gcodes, ones, n_tasks, n_groups)
    nums = [
        _task_group_sums(tcodes, gcodes, (first - second).to_numpy(dtype=float), n_tasks, n_groups)
        for _, first, second in comparisons
    ]
    reps = bootstrap_ratios(np.hstack(nums), np.hstack([den] * len(nums)), resamples, seed)
    low, high = percentile_ci(reps, level)
    records = []
    for c, (label, first, second) in enumerate(comparisons):
        wins = np.bincount(gcodes, weights=((first == 1) & (second == 0)).to_numpy(), minlength=n_groups)
        losses = np.bincount(gcodes, weights=((first == 0) & (second == 1)).to_numpy(), minlength=n_groups)
        for g in range(n_groups):
            key = _group_keys(groups, keys, g)
            n = int(den[:, g].sum())
            records.append(
                {
                    **dict(zip(keys, key, strict=True)),
                    "comparison": label,
                    "n": n,
                    "n_tasks": int((den[:, g] > 0).sum()),
                    "wins": int(wins[g]),
                    "losses": int(losses[g]),
                    "net": int(wins[g] - losses[g]),
                    "effect_pp": 100 * nums[c][:, g].sum() / n,
                    "ci_low_pp": 100 * low[c * n_groups + g],
                    "ci_high_pp": 100 * high[c * n_groups + g],
                    "sign_flip_p": sign_flip_test(
                        nums[c][den[:, g] > 0, g], resamples, _group_seed(seed, (*key, label))
                    ),
                    "mcnemar_p": mcnemar_p(int(wins[g]), int(losses[g])),
                }
            )
    table = pd.DataFrame.from_records(records, columns=keys + JOINT_EFFECT_COLUMNS)
    table = sort_groups(table, keys) if keys else table
    table.attrs.update(_settings(kind="joint_effects", on=on, a=str(a), b=str(b), by=keys, cohort=cohort,
                                 condition=condition, delay=delay, resamples=int(resamples),
                                 seed=int(seed), level=level, **info))
    return table


# --------------------------------------------------------------------------- synthetic data


def simulate_paired(
    n_tasks: int = 100,
    conditions: Sequence[str] = ("clean", "stale2"),
    delays: Sequence[int] = (0, 1, 2, 4),
    operations: Sequence[str] = ("refresh",),
    seed: int = 0,
    rescue: dict[str, float] | None = None,
    harm: dict[str, float] | None = None,
) -> pd.DataFrame:
    """A synthetic paired table with task structure, for examples, tests and benchmarks.

    Each task has a latent skill shared by all its rows (so rows of a task are
    correlated, as in real runs). y0 depends on skill and condition; recovery flips
    a failure to success with probability ``rescue[condition]`` and a success to
    failure with ``harm[condition]``, scaled per operation. Late delays sometimes find
    the run already over (``executed`` false, y1 = y0).
    """
    rng = np.random.default_rng(seed)
    rescue = {"clean": 0.05, **{c: 0.3 for c in conditions if c != "clean"}, **(rescue or {})}
    harm = {"clean": 0.06, **{c: 0.08 for c in conditions if c != "clean"}, **(harm or {})}
    op_scale = {"refresh": 1.0, "refresh_ablated": 0.8, "replan": 0.4, "rewind": 0.6}
    task_types = ["pick_and_place", "pick_clean_then_place", "pick_heat_then_place",
                  "pick_cool_then_place", "look_at_obj", "pick_two_obj"]
    records = []
    for t in range(n_tasks):
        skill = rng.normal()
        factual = int(rng.random() < 1 / (1 + np.exp(-(skill + 1.2))))
        length = int(rng.integers(4, 40))
        task_id = f"task{t:04d}"
        for condition in conditions:
            penalty = 0.0 if condition == "clean" else 1.0
            y0 = factual if condition == "clean" else int(rng.random() < 1 / (1 + np.exp(-(skill + 1.2 - penalty))))
            shared = rng.random()  # how open this task-condition is to change: shared across cells
            for delay in delays:
                executed = int(delay < length)
                for operation in operations:
                    scale = op_scale.get(operation, 0.7)
                    u = shared if rng.random() < 0.8 else rng.random()
                    y1 = y0
                    if executed:
                        if y0 == 0 and u < rescue.get(condition, 0.2) * scale:
                            y1 = 1
                        elif y0 == 1 and u < harm.get(condition, 0.05) * scale:
                            y1 = 0
                    records.append({
                        "task_id": task_id,
                        "split": "valid_seen" if t % 2 else "valid_unseen",
                        "task_type": task_types[t % len(task_types)],
                        "agent": "builtin:synthetic",
                        "condition": condition,
                        "delay": int(delay),
                        "operation": operation,
                        "y0": y0,
                        "y1": y1,
                        "executed": executed,
                        "factual_success": factual,
                        "prefix_match": 1,
                        "outcome": outcome_of(y0, y1),
                    })
    return pd.DataFrame.from_records(records)
