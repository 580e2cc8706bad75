"""The noise floor of a sampled run: how often two draws of the same arm disagree.

Two independent draws of the same no-recovery arm from the same state are a placebo of
nothing: no recovery, no message, yet with a sampling agent one may succeed where the other
fails, and a single-draw pair would call that a rescue or a harm. With ``--samples K`` (K >= 2)
every executed branch point has K draws of its arm (:mod:`cir.pairs.samples`), and the chance
that two of them disagree is estimated without bias by ``2 y0_sum (k - y0_sum) / (k (k - 1))``
(the share of ordered pairs of distinct draws that differ). :func:`noise_floor` averages it
over the arm cells (task, condition, delay) whose recovery ran, per condition; an effect whose
size is within its condition's floor is no larger than what one draw per arm labels as rescue
or harm by sampling alone (:func:`cir.stats.effects.effect_table` flags it). A table of one
draw (or of an agent that does not sample) has no floor to measure: NaN.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from cir.pairs.samples import has_samples

NOISE_COLUMNS = ["condition", "arm_cells", "n_tasks", "k", "disagreement", "noise_floor_pp"]


def arm_cells(rows: pd.DataFrame) -> pd.DataFrame:
    """The distinct executed arm cells (task, condition, delay) of a sampled table with the
    unbiased disagreement rate of two of their draws (NaN where k < 2)."""
    if not has_samples(rows):
        return pd.DataFrame(columns=["task_id", "condition", "delay", "k", "disagreement"])
    cells = (rows[rows["executed"] == 1].drop_duplicates(["task_id", "condition", "delay"])
             [["task_id", "condition", "delay", "k", "y0_sum"]].reset_index(drop=True))
    k, s = cells["k"].to_numpy(dtype=float), cells["y0_sum"].to_numpy(dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        cells["disagreement"] = np.where(k >= 2, 2 * s * (k - s) / (k * (k - 1)), np.nan)
    return cells.drop(columns="y0_sum")


def noise_floor(rows: pd.DataFrame) -> pd.DataFrame:
    """Per condition: the arm cells measured, their tasks, the draws per arm, the mean
    disagreement rate of two draws of one arm and that rate in pp (the noise floor)."""
    cells = arm_cells(rows)
    out = []
    for condition, sub in cells.groupby("condition", sort=True):
        rate = float(sub["disagreement"].mean()) if sub["disagreement"].notna().any() else float("nan")
        out.append({"condition": condition, "arm_cells": int(len(sub)), "n_tasks": int(sub["task_id"].nunique()),
                    "k": int(sub["k"].max()), "disagreement": rate, "noise_floor_pp": 100 * rate})
    return pd.DataFrame(out, columns=NOISE_COLUMNS)


def floor_of(rows: pd.DataFrame) -> float:
    """The noise floor (pp) of some rows: the mean disagreement of their executed arm cells."""
    cells = arm_cells(rows)
    values = cells["disagreement"].dropna()
    return 100 * float(values.mean()) if len(values) else float("nan")
