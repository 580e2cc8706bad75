"""The short forms of a report's long tables, for its main text.

A table longer than :data:`cir.study.page.MAIN_ROWS` rows is kept whole in the report's
appendix and in ``tables/``; the main text shows what a reader needs of it, built here from
the table itself (so it follows whatever the table holds):

* :func:`effect_grid`: an effect table by condition and delay as one row per condition, a
  column per delay (effect and interval in each cell);
* :func:`largest_margins`: a margin table's named comparisons first (when it marks them),
  then the largest margins, each with its interval and its adjusted p-value when the table
  has one;
* :func:`policy_rows`: the rows of chosen policies, in the order given;
* :func:`mix_sentence`: which operations a router chose, in words.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from cir.study.page import MAIN_ROWS, format_number


def _cell(row: pd.Series) -> str:
    effect = format_number(row["effect_pp"], 1)
    if pd.isna(row.get("ci_low_pp")) or pd.isna(row.get("ci_high_pp")):
        return effect
    return f"{effect} [{format_number(row['ci_low_pp'], 1)}, {format_number(row['ci_high_pp'], 1)}]"


def effect_grid(effects: pd.DataFrame, rows: str = "condition", columns: str = "delay") -> pd.DataFrame:
    """One row per ``rows`` value (in the table's order), one column per ``columns`` value: the
    effect in pp and its interval (``+3.3 [0.0, 10.0]``), with the row's task count."""
    order = list(dict.fromkeys(effects[rows]))
    keys = list(dict.fromkeys(effects[columns]))
    grid = []
    for value in order:
        part = effects[effects[rows] == value].set_index(columns)
        line: dict[str, object] = {rows: value}
        if "n" in part.columns:
            line["tasks"] = int(part["n"].max())
        for key in keys:
            line[f"{columns} {key}"] = _cell(part.loc[key]) if key in part.index else ""
        grid.append(line)
    return pd.DataFrame(grid)


#: What a margin table's columns may be called: its difference, and the p-values adjusted for how
#: many comparisons are shown (any column whose name says so), before the unadjusted one.
MARGIN = ("margin_pp", "difference_pp")
ADJUSTED = ("holm", "adjusted")
NAMED = ("primary", "named")


def adjusted_p_column(margins: pd.DataFrame) -> str | None:
    """The margin table's adjusted p-value column, if it has one."""
    return next((c for c in margins.columns if any(w in str(c).lower() for w in ADJUSTED)), None)


def largest_margins(margins: pd.DataFrame, n: int = 8) -> pd.DataFrame:
    """The comparisons the table names first (a true ``primary`` or ``named`` column), then the
    largest margins by size, ``n`` rows at most (:data:`MAIN_ROWS` and fewer); each with its
    interval and p-value (the adjusted one when the table has it, else the sign-flip test's)."""
    n = min(n, MAIN_ROWS)
    value = next(c for c in MARGIN if c in margins.columns)
    named = next((c for c in NAMED if c in margins.columns), None)
    adjusted = adjusted_p_column(margins)
    size = margins[value].abs()
    order = margins.assign(_named=margins[named].fillna(False).astype(bool) if named else False, _size=size)
    order = order.sort_values(["_named", "_size"], ascending=[False, False], kind="mergesort")
    keys = [c for c in ("policy", "versus", "kind", "condition") if c in margins.columns
            and (c != "condition" or margins["condition"].nunique() > 1)]
    shown = [*keys, *[c for c in ("n", value, "ci_low_pp", "ci_high_pp") if c in margins.columns]]
    shown += [c for c in (adjusted, "sign_flip_p") if c is not None and c in margins.columns][:1]
    return order.head(n)[shown].reset_index(drop=True)


def margins_caption(margins: pd.DataFrame, n: int) -> str:
    """What :func:`largest_margins` shows, in words."""
    value = next(c for c in MARGIN if c in margins.columns)
    named = next((c for c in NAMED if c in margins.columns), None)
    adjusted = adjusted_p_column(margins)
    zero = int((margins[value].abs() < 0.005).sum())
    first = "the named comparisons, then " if named else ""
    p = (f"p: `{adjusted}`, adjusted for the comparisons shown" if adjusted else
         "p: the sign-flip test's, not adjusted for the many comparisons")
    return (f"{first}the largest {min(n, len(margins))} of {len(margins):,} margins by size ({zero:,} are 0.00); {p}")


def policy_rows(summary: pd.DataFrame, policies: Sequence[str]) -> pd.DataFrame:
    """The rows of ``policies`` that the table has, in that order."""
    rank = {p: i for i, p in enumerate(dict.fromkeys(policies))}
    rows = summary[summary["policy"].isin(rank)]
    return rows.assign(_r=rows["policy"].map(rank)).sort_values("_r", kind="mergesort").drop(columns="_r")


def mix_sentence(mix: pd.DataFrame) -> str:
    """Which operations a router chose over the held-out arms, by condition, in words."""
    chose = mix[mix["operation"] != "none"]
    arms = int(mix.groupby("condition")["arms"].sum().sum())
    if chose.empty:
        return f"It recovered in none of {arms:,} arms."
    by_op = chose.groupby("operation", sort=False)["arms"].sum()
    ops = ", ".join(f"{op} in {int(k):,}" for op, k in by_op.items())
    where = ", ".join(f"{c} {format_number(100 * float(g['share'].sum()), 0)}%"
                      for c, g in chose.groupby("condition", sort=False))
    none = sorted(set(mix["condition"]) - set(chose["condition"]))
    text = (f"It recovered in {int(by_op.sum()):,} of {arms:,} arms ({ops}); the share of each condition's arms "
            f"recovered: {where}")
    return text + (f"; none in {', '.join(none)}." if none else ".")
