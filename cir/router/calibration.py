"""Calibration of CIR's three models: Brier scores and reliability curves.

CIR's thresholds compare predicted probabilities with fixed numbers, so the
probabilities must mean what they say. Calibration is measured on predictions the
models did not fit: the out-of-fold predictions of training (``policy.oof_``), or a
router's (or fitted policy's) predictions on a held-out paired table.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from sklearn.calibration import calibration_curve
from sklearn.metrics import brier_score_loss

from cir.pairs.paired import validate_paired
from cir.router.evaluation import as_router, score_rows
from cir.router.policy import CIRPolicy
from cir.router.rule import MODEL_NAMES
from cir.router.runtime import Router
from cir.router.walk import build_grid, check_features
from cir.util.errors import CirError

LABELS = {"p_err": "observation erroneous (condition != clean)",
          "p0": "success without recovery (y0)",
          "p1": "success with refresh (y1)"}


def predictions(model: CIRPolicy | Router, paired: pd.DataFrame | None = None) -> pd.DataFrame:
    """Long table ``model, p, label`` on the decision cells.

    Without ``paired``: a fitted policy's out-of-fold predictions. With ``paired``: the
    predictions of a router (or of a fitted policy's router) on that table's cells.
    """
    if paired is None:
        if not isinstance(model, CIRPolicy) or not hasattr(model, "oof_"):
            raise CirError("calibration: out-of-fold predictions need a fitted CIRPolicy "
                           "(fit one, or give a table)")
        cells = model.oof_
        preds = {name: cells[name].to_numpy() for name in MODEL_NAMES}
    else:
        router = as_router(model)
        df = validate_paired(paired, source="calibration table")
        check_features(df, "calibration table", router.features)
        cells = build_grid(df, router.delays, router.settings["operation"], "calibration table").cells
        s = score_rows(router, cells)
        preds = {name: s[name].to_numpy() for name in MODEL_NAMES}
    labels = {"p_err": (cells["condition"] != "clean").to_numpy(dtype=int),
              "p0": cells["y0"].to_numpy(dtype=int), "p1": cells["y1"].to_numpy(dtype=int)}
    return pd.concat([pd.DataFrame({"model": name, "p": preds[name], "label": labels[name]})
                      for name in MODEL_NAMES], ignore_index=True)


def calibration_table(model: CIRPolicy | Router, paired: pd.DataFrame | None = None, n_bins: int = 10,
                      strategy: str = "quantile") -> pd.DataFrame:
    """Reliability-curve points and Brier score per model.

    One row per (model, bin): ``mean_predicted``, ``fraction_positive`` (from
    ``sklearn.calibration.calibration_curve``), plus per model ``brier`` (from
    ``sklearn.metrics.brier_score_loss``), ``brier_baseline`` (Brier of always
    predicting the base rate) and ``n``.
    """
    pred = predictions(model, paired)
    rows = []
    for name, part in pred.groupby("model", sort=False):
        y, p = part["label"].to_numpy(), part["p"].to_numpy()
        brier = float(brier_score_loss(y, p))
        base = float(brier_score_loss(y, np.full(len(y), y.mean())))
        frac, mean = calibration_curve(y, p, n_bins=n_bins, strategy=strategy)
        for b, (fp, mp) in enumerate(zip(frac, mean, strict=True)):
            rows.append({"model": name, "bin": b, "mean_predicted": float(mp), "fraction_positive": float(fp),
                         "brier": brier, "brier_baseline": base, "n": int(len(y)),
                         "base_rate": float(y.mean())})
    return pd.DataFrame(rows)


def calibration_figure(model: CIRPolicy | Router, paired: pd.DataFrame | None = None, n_bins: int = 10,
                       strategy: str = "quantile") -> Figure:
    """Reliability curves of p_err, p0 and p1 side by side, Brier scores in the titles."""
    table = calibration_table(model, paired, n_bins=n_bins, strategy=strategy)
    fig = Figure(figsize=(11, 3.8))
    axes = fig.subplots(1, 3, sharey=True)
    where = "out-of-fold (training)" if paired is None else "held-out table"
    for ax, name in zip(axes, ("p_err", "p0", "p1"), strict=True):
        part = table[table["model"] == name]
        ax.plot([0, 1], [0, 1], ls="--", color="grey", lw=1, label="perfect")
        ax.plot(part["mean_predicted"], part["fraction_positive"], marker="o", label=name)
        if len(part):
            r = part.iloc[0]
            ax.set_title(f"{name}: Brier {r['brier']:.3f} (base-rate predictor {r['brier_baseline']:.3f})\n"
                         f"{LABELS[name]}", fontsize=9)
        ax.set_xlabel("mean predicted probability")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
    axes[0].set_ylabel("observed fraction positive")
    axes[0].legend(loc="upper left", fontsize=8)
    fig.suptitle(f"CIR model calibration, {where}", fontsize=10)
    fig.tight_layout()
    return fig
