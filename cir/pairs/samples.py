"""The paired table's sample columns: outcome probabilities from K draws per arm (``--samples``).

With ``--samples K`` above 1 the replayer draws, from each branch point, K continuations of
the no-recovery arm and K of each operation's branch (sample 0 is the arm and the branch
themselves; :mod:`cir.agents.sampling`). Each row of the paired table then also holds:

==========  ====================================================================
k           draws per arm (K)
y0_sum      successes among the K no-recovery draws from the branch point
y1_sum      successes among the K recovery draws
p0_hat      ``y0_sum / k``: the estimated chance of success without recovery
p1_hat      ``y1_sum / k``: with recovery
p_rescue    the share of the K draw pairs (sample s of the arm with sample s of the
            branch, which share the sampling seed) that are rescues: an unbiased estimate
            of the chance that one draw of each is a rescue
p_harm      the same for harms (``p_rescue - p_harm = p1_hat - p0_hat``)
==========  ====================================================================

``y0``, ``y1`` and ``outcome`` stay sample 0's: the single-draw row of a run without samples.
An arm that ended before the delay has nothing to draw (every draw is its outcome). A table
of one draw has none of these columns, and every reader takes it as ``k = 1`` with the
probabilities its outcomes (:func:`outcome_probabilities`), so one draw is exactly the table
as it was before samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from cir.util.errors import CirError

SAMPLE_COLUMNS = ["k", "y0_sum", "y1_sum", "p0_hat", "p1_hat", "p_rescue", "p_harm"]
#: what :func:`outcome_probabilities` returns, per row
PROBABILITIES = ("k", "p0", "p1", "p_rescue", "p_harm")
_TOLERANCE = 1e-9


def sample_columns(arm_draws: Sequence[int], branch_draws: Sequence[int]) -> dict[str, Any]:
    """The sample columns of one row from the outcomes of its K arm and K branch draws (in
    sample order: draw s of the arm is paired with draw s of the branch)."""
    k = len(arm_draws)
    if k < 1 or len(branch_draws) != k:
        raise ValueError("sample_columns: expected as many branch draws as arm draws, at least one")
    y0, y1 = sum(arm_draws), sum(branch_draws)
    rescues = sum(1 for a, b in zip(arm_draws, branch_draws, strict=True) if not a and b)
    harms = sum(1 for a, b in zip(arm_draws, branch_draws, strict=True) if a and not b)
    return {"k": k, "y0_sum": y0, "y1_sum": y1, "p0_hat": y0 / k, "p1_hat": y1 / k,
            "p_rescue": rescues / k, "p_harm": harms / k}


def has_samples(df: pd.DataFrame) -> bool:
    """Whether a paired table holds sample columns (a run of ``--samples`` above 1)."""
    return "k" in df.columns


def outcome_probabilities(df: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per row: ``k``, ``p0``, ``p1``, ``p_rescue``, ``p_harm``; from the sample columns, or,
    in a table of one draw, from ``y0`` and ``y1`` (``k = 1``, each probability 0 or 1)."""
    if has_samples(df):
        return {"k": df["k"].to_numpy(dtype=np.int64), "p0": df["p0_hat"].to_numpy(dtype=float),
                "p1": df["p1_hat"].to_numpy(dtype=float), "p_rescue": df["p_rescue"].to_numpy(dtype=float),
                "p_harm": df["p_harm"].to_numpy(dtype=float)}
    y0, y1 = df["y0"].to_numpy(dtype=float), df["y1"].to_numpy(dtype=float)
    return {"k": np.ones(len(df), dtype=np.int64), "p0": y0, "p1": y1, "p_rescue": (1 - y0) * y1,
            "p_harm": y0 * (1 - y1)}


def check_sample_columns(df: pd.DataFrame, source: str, row_text: Any) -> pd.DataFrame:
    """The sample columns checked (all present, counts within ``k``, probabilities their
    counts', a recovery that did not run leaving every draw as it was) and normalised; a
    CirError names the row and the rule it breaks. ``row_text(df, row)`` names a row."""
    missing = [c for c in SAMPLE_COLUMNS if c not in df.columns]
    if missing:
        raise CirError(f"{source}: has sample column 'k' but not {', '.join(map(repr, missing))}; a "
                       f"table of --samples holds {', '.join(SAMPLE_COLUMNS)}")
    out = df.copy()
    for column in SAMPLE_COLUMNS:
        values = pd.to_numeric(out[column], errors="coerce")
        if values.isna().any():
            row = values.isna().idxmax()
            raise CirError(f"{source}: {row_text(out, row)} has {column}={_plain(out.at[row, column])!r}; "
                           "expected a number")
        out[column] = values
    k = out["k"]
    for column in ("k", "y0_sum", "y1_sum"):
        bad = (out[column] != out[column].round()) | (out[column] < (1 if column == "k" else 0)) | (out[column] > k)
        if bad.any():
            row = bad.idxmax()
            raise CirError(f"{source}: {row_text(out, row)} has {column}={_plain(out.at[row, column])!r} with "
                           f"k={_plain(out.at[row, 'k'])!r}; expected a whole number of draws from "
                           f"{1 if column == 'k' else 0} to k")
        out[column] = out[column].astype(np.int64)
    rules = [
        (((out["p0_hat"] - out["y0_sum"] / k).abs() > _TOLERANCE), "p0_hat = y0_sum / k"),
        (((out["p1_hat"] - out["y1_sum"] / k).abs() > _TOLERANCE), "p1_hat = y1_sum / k"),
        ((out["p_rescue"] < 0) | (out["p_harm"] < 0) | (out["p_rescue"] > out["p1_hat"] + _TOLERANCE)
         | (out["p_harm"] > out["p0_hat"] + _TOLERANCE), "0 <= p_rescue <= p1_hat and 0 <= p_harm <= p0_hat"),
        ((((out["p_rescue"] - out["p_harm"]) - (out["p1_hat"] - out["p0_hat"])).abs() > _TOLERANCE),
         "p_rescue - p_harm = p1_hat - p0_hat"),
        (((out["executed"] == 0) & (out["y1_sum"] != out["y0_sum"])),
         "y1_sum = y0_sum where the recovery did not run"),
        (((out["y0_sum"] < out["y0"]) | (out["y0_sum"] > k - 1 + out["y0"])
          | (out["y1_sum"] < out["y1"]) | (out["y1_sum"] > k - 1 + out["y1"])),
         "y0 and y1 are the first draws of y0_sum and y1_sum"),
    ]
    for bad, rule in rules:
        if bad.any():
            row = bad.idxmax()
            raise CirError(f"{source}: {row_text(out, row)} breaks {rule} (k={_plain(out.at[row, 'k'])}, "
                           f"y0_sum={_plain(out.at[row, 'y0_sum'])}, y1_sum={_plain(out.at[row, 'y1_sum'])})")
    return out


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value (so messages say 3, not np.int64(3))."""
    return value.item() if hasattr(value, "item") else value
