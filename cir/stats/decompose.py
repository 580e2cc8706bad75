"""Rescue/harm decomposition of a paired table (paper, section 3.3): subsets, groups, counts.

An average success rate hides whether recovery changed a trajectory; the paired
outcome of each row (stable success, rescue, harm, stable failure) does not. This
module is the public home of what every analysis starts from: selecting the subset
(:func:`select_subset`), checking and ordering the grouping keys, coding groups and
tasks as integers, and counting the outcomes by any grouping (:func:`outcome_counts`).
The statistics on top of these counts live in :mod:`cir.stats.effects` and :mod:`cir.stats.joint`,
the figures in :mod:`cir.study.figures`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from cir.episode.operations import OPERATIONS
from cir.pairs.paired import OUTCOMES, validate_paired
from cir.pairs.samples import SAMPLE_COLUMNS, has_samples, outcome_probabilities
from cir.util.deprecation import former_function, renamed_parameters, warn_former
from cir.util.errors import CirError

SUBSETS = ("all", "factual-success")
DEFAULT_BY = ("condition", "delay", "operation")

# Display order for known values; anything else sorts after these, alphabetically.
_CONDITION_ORDER = ["clean", "stale1", "stale2", "stale3", "stale4", "lag1", "lag2", "lag3", "lag4", "missing"]
_VALUE_ORDER = {
    "condition": _CONDITION_ORDER,
    "operation": list(OPERATIONS),
    "outcome": list(OUTCOMES),
}
# Columns that hold per-row results rather than labels: grouping by them is a mistake.
_NOT_GROUPABLE = {"y0", "y1", *SAMPLE_COLUMNS}


def prepare(df: pd.DataFrame, source: str = "paired table") -> pd.DataFrame:
    """Validate and return the normalised table.

    Every public function calls this, so a notebook user may pass a raw (or edited)
    DataFrame and still get a clear error for bad input.
    """
    if not isinstance(df, pd.DataFrame):
        raise CirError(f"{source}: expected a pandas DataFrame, got {type(df).__name__}")
    return validate_paired(df, source=source)


def select_subset(
    df: pd.DataFrame,
    subset: str = "all",
    require_prefix_match: bool = True,
) -> pd.DataFrame:
    """Rows of the requested subset.

    ``all``: every prefix-feasible task (a task is prefix-feasible when it has rows).
    ``factual-success``: only tasks whose factual (clean, no-recovery) run succeeded,
    the paper's factual-success analyses (its "factual-success cohort"), in which any
    clean-observation failure after recovery is a harm.
    Rows whose two arms differ before the branch point (``prefix_match`` false) break
    the paired design and are dropped unless ``require_prefix_match`` is False.
    The result is validated (:func:`prepare`) and records ``subset`` and
    ``dropped_prefix_mismatch`` in its ``attrs``.
    """
    df = prepare(df)
    if subset not in SUBSETS:
        raise CirError(f"subset {subset!r} is unknown; expected one of {', '.join(SUBSETS)}")
    keep = pd.Series(True, index=df.index)
    if subset == "factual-success":
        keep &= df["factual_success"] == 1
    mismatch = keep & (df["prefix_match"] == 0)
    if require_prefix_match:
        keep &= ~mismatch
    out = df.loc[keep].copy()
    out.attrs.update(df.attrs)
    out.attrs["subset"] = subset
    out.attrs["dropped_prefix_mismatch"] = int(mismatch.sum()) if require_prefix_match else 0
    if out.empty:
        raise CirError(
            f"subset {subset!r} has no rows"
            + (" with prefix_match true" if require_prefix_match else "")
            + f" (the table has {len(df)} rows, {df['task_id'].nunique()} tasks)"
        )
    return out


def check_keys(df: pd.DataFrame, by: Sequence[str]) -> list[str]:
    """The grouping keys as a list, or a CirError naming the key that does not exist."""
    keys = [k for k in by if k]
    for key in keys:
        if key not in df.columns:
            available = [c for c in df.columns if c not in _NOT_GROUPABLE and not c.startswith("f_")]
            raise CirError(
                f"grouping key {key!r} is not a column of the paired table; "
                f"available: {', '.join(available)}"
            )
        if key in _NOT_GROUPABLE:
            raise CirError(f"grouping key {key!r} is an outcome, not a label; group by labels such as condition, delay, operation")
    if len(set(keys)) != len(keys):
        raise CirError(f"grouping keys repeat: {', '.join(keys)}")
    return keys


def check_pooling(rows: pd.DataFrame, keys: Sequence[str], on: str | None = None) -> None:
    """Refuse to pool pairs of different recovery operations into one group: each operation
    is its own treatment, and adding their counts would describe none of them."""
    if "operation" in keys or on == "operation" or "operation" not in rows.columns:
        return
    operations = sorted(rows["operation"].astype(str).unique())
    if len(operations) > 1:
        raise CirError(
            f"the table holds {len(operations)} recovery operations ({', '.join(operations)}) and the "
            "grouping would add their counts together; group by operation too (by="
            f"{[*keys, 'operation']!r}, on the command line --by {','.join([*keys, 'operation'])}) or keep "
            f"one operation's rows (rows[rows.operation == {operations[0]!r}], --operation {operations[0]})"
        )


def check_value(df: pd.DataFrame, column: str, value: object) -> None:
    """A CirError unless ``column`` holds ``value`` (compared as text) in some row."""
    present = df[column].astype(str).unique().tolist()
    if str(value) not in present:
        raise CirError(
            f"{column} {value!r} is not in the paired table; present: {', '.join(sorted(present))}"
        )


def _order_value(column: str, value: object) -> tuple:
    order = _VALUE_ORDER.get(column)
    if order is not None and value in order:
        return (0, order.index(value), "")
    if isinstance(value, (int, float, np.integer, np.floating)):
        return (1, float(value), "")
    return (2, 0.0, str(value))


def sort_groups(table: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """Sort rows by the grouping keys in reading order (clean before stale2, 0 before 4)."""
    if not keys or table.empty:
        return table.reset_index(drop=True)
    columns = [table[k].tolist() for k in keys]
    order = sorted(
        range(len(table)),
        key=lambda i: tuple(_order_value(k, col[i]) for k, col in zip(keys, columns, strict=True)),
    )
    return table.iloc[order].reset_index(drop=True)


def group_index(df: pd.DataFrame, keys: Sequence[str]) -> tuple[np.ndarray, pd.DataFrame]:
    """Integer group code of every row and the (sorted) table of group keys.

    Codes follow :func:`sort_groups` order, so results never depend on row order.
    """
    if not keys:
        return np.zeros(len(df), dtype=np.int64), pd.DataFrame(index=[0])
    keys = list(keys)
    raw = df.groupby(keys, sort=False, dropna=False).ngroup().to_numpy()
    first = df[keys].drop_duplicates().reset_index(drop=True)  # same order as ngroup(sort=False)
    first["_raw"] = np.arange(len(first))
    ordered = sort_groups(first, keys)
    remap = np.empty(len(ordered), dtype=np.int64)
    remap[ordered["_raw"].to_numpy()] = np.arange(len(ordered))
    return remap[raw], ordered.drop(columns="_raw")


def group_key(groups: pd.DataFrame, keys: Sequence[str], g: int) -> tuple:
    """The key values of group number ``g`` of :func:`group_index`'s group table."""
    return tuple(groups[k].iloc[g] for k in keys) if keys else ()


def task_index(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Integer code of each row's task (sorted task ids) and the task ids."""
    tasks, codes = np.unique(df["task_id"].to_numpy(dtype=str), return_inverse=True)
    return codes.astype(np.int64), tasks


def outcome_counts(df: pd.DataFrame, by: Sequence[str] = DEFAULT_BY) -> pd.DataFrame:
    """Counts and rates of the four paired outcomes per group.

    Columns: the keys, ``n`` (pairs), ``n_tasks``, ``n_executed``, ``rescues``, ``harms``,
    ``stable_success``, ``stable_failure``, ``success_without`` (mean y0),
    ``success_with`` (mean y1), ``rescue_rate``, ``harm_rate`` (rates in [0, 1]). For a table
    of ``--samples`` K above 1 the four counts are *expected* counts over each row's K draw
    pairs and the success rates the mean probabilities (:func:`expected_counts`).
    """
    return count_outcomes(prepare(df), check_keys(df, by))


def count_outcomes(rows: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """:func:`outcome_counts` of rows already validated (e.g. by :func:`select_subset`) by
    keys already checked (:func:`check_keys`): the statistics count many groupings of one
    subset, and validating it once is enough."""
    codes, groups = group_index(rows, keys)
    k = len(groups)
    y0 = rows["y0"].to_numpy()
    y1 = rows["y1"].to_numpy()
    n = np.bincount(codes, minlength=k)
    tcodes, tasks = task_index(rows)
    task_cells = np.unique(codes * len(tasks) + tcodes) // max(len(tasks), 1)

    def count(mask: np.ndarray) -> np.ndarray:
        return np.bincount(codes, weights=mask, minlength=k).astype(int)

    columns = {
        "n": n,
        "n_tasks": np.bincount(task_cells, minlength=k),
        "n_executed": count(rows["executed"].to_numpy()),
        "rescues": count((y0 == 0) & (y1 == 1)),
        "harms": count((y0 == 1) & (y1 == 0)),
        "stable_success": count((y0 == 1) & (y1 == 1)),
        "stable_failure": count((y0 == 0) & (y1 == 0)),
        "success_without": np.bincount(codes, weights=y0, minlength=k) / n,
        "success_with": np.bincount(codes, weights=y1, minlength=k) / n,
    }
    if has_samples(rows):  # K draws per arm: the expected counts over their draw pairs
        columns.update(expected_counts(rows, codes, k))
    columns["rescue_rate"] = columns["rescues"] / n
    columns["harm_rate"] = columns["harms"] / n
    base = groups.reset_index(drop=True) if keys else pd.DataFrame(index=range(1))
    return pd.concat([base, pd.DataFrame(columns, index=base.index)], axis=1)


def expected_counts(rows: pd.DataFrame, codes: np.ndarray, k: int) -> dict[str, np.ndarray]:
    """Per group of ``codes``: the expected counts of the four paired outcomes of a sampled table
    (sums of each row's share of rescues, harms, stable successes and stable failures among its
    K draw pairs: :mod:`cir.pairs.samples`) and the mean success probabilities without and with."""
    p = outcome_probabilities(rows)
    n = np.bincount(codes, minlength=k)

    def total(values: np.ndarray) -> np.ndarray:
        return np.bincount(codes, weights=values, minlength=k)

    return {"rescues": total(p["p_rescue"]), "harms": total(p["p_harm"]),
            "stable_success": total(p["p0"] - p["p_harm"]), "stable_failure": total(1 - p["p1"] - p["p_harm"]),
            "success_without": total(p["p0"]) / n, "success_with": total(p["p1"]) / n}


@renamed_parameters("cohort=", cohort="subset")
def decompose(
    df: pd.DataFrame,
    by: Sequence[str] = DEFAULT_BY,
    subset: str = "all",
    require_prefix_match: bool = True,
) -> pd.DataFrame:
    """Outcome counts and rates of a subset by any grouping (see :func:`outcome_counts`)."""
    rows = select_subset(df, subset, require_prefix_match)
    keys = check_keys(rows, by)
    check_pooling(rows, keys)
    out = count_outcomes(rows, keys)
    out.attrs.update({"subset": subset, "by": list(by)})
    return out


def __getattr__(name: str) -> Any:
    """The module's former names (cir 0.1): ``select_cohort``, ``COHORTS``; each warns once."""
    if name == "select_cohort":
        return former_function("cir.stats.select_cohort()", renamed_parameters("cohort=", cohort="subset")(select_subset))
    if name == "COHORTS":
        warn_former("cir.stats.decompose.COHORTS", stacklevel=2)
        return SUBSETS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
