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
from cir.router.evaluation import as_router
from cir.router.policy import CIRPolicy, is_soft
from cir.router.rule import split_model_name
from cir.router.runtime import Router
from cir.router.walk import build_cells, check_features, model_labels
from cir.util.errors import CirError

LABELS = {"p_err": "observation erroneous (condition != clean)",
          "p0": "success without recovery (y0)",
          "p1": "success with {op} (y1)",
          "p_rescue": "rescued by {op}",
          "p_harm": "harmed by {op}"}


def label_of(name: str) -> str:
    """What model ``name`` predicts, in words."""
    base, op = split_model_name(name)
    return LABELS[base].format(op=op)


def predictions(model: CIRPolicy | Router, paired: pd.DataFrame | None = None) -> pd.DataFrame:
    """Long table ``model, p, label`` on the decision cells, one block per model of the router.

    Without ``paired``: a fitted policy's out-of-fold predictions. With ``paired``: the
    predictions of a router (or of a fitted policy's router) on that table's cells.
    """
    if paired is None:
        if not isinstance(model, CIRPolicy) or not hasattr(model, "oof_"):
            raise CirError("calibration: out-of-fold predictions need a fitted CIRPolicy "
                           "(fit one, or give a table)")
        decisions, names = model.oof_, list(model.models_)
        preds = {name: decisions[name].to_numpy() for name in names}
    else:
        router = as_router(model)
        df = validate_paired(paired, source="calibration table")
        check_features(df, "calibration table", router.features)
        decisions = build_cells(df, router.delays, router.operations, "calibration table").decisions
        names = list(router.estimator.model_names(router.operations))
        X = decisions[router.features].to_numpy(dtype=float)
        preds = {name: router.models[name].predict_proba(X) for name in names}
    return pd.concat([pd.DataFrame({"model": name, "p": preds[name], "label": model_labels(decisions, name)})
                      for name in names], ignore_index=True)


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
        if is_soft(y):  # soft labels of a table of --samples: the same scores, by hand
            brier, base = float(np.mean((y - p) ** 2)), float(np.mean((y - y.mean()) ** 2))
            frac, mean = _soft_curve(y, p, n_bins, strategy)
        else:
            brier = float(brier_score_loss(y, p))
            base = float(brier_score_loss(y, np.full(len(y), y.mean())))
            frac, mean = calibration_curve(y, p, n_bins=n_bins, strategy=strategy)
        for b, (fp, mp) in enumerate(zip(frac, mean, strict=True)):
            rows.append({"model": name, "bin": b, "mean_predicted": float(mp), "fraction_positive": float(fp),
                         "brier": brier, "brier_baseline": base, "n": int(len(y)),
                         "base_rate": float(y.mean())})
    return pd.DataFrame(rows)


def _soft_curve(y: np.ndarray, p: np.ndarray, n_bins: int, strategy: str) -> tuple[np.ndarray, np.ndarray]:
    """``calibration_curve`` for soft labels: per bin of the predictions (quantile or uniform, as
    scikit-learn's), the mean label and the mean prediction, empty bins left out."""
    edges = (np.quantile(p, np.linspace(0, 1, n_bins + 1)) if strategy == "quantile"
             else np.linspace(0, 1, n_bins + 1))
    which = np.searchsorted(edges[1:-1], p, side="right")
    used = [b for b in range(n_bins) if (which == b).any()]
    return (np.array([y[which == b].mean() for b in used]), np.array([p[which == b].mean() for b in used]))


def calibration_figure(model: CIRPolicy | Router, paired: pd.DataFrame | None = None, n_bins: int = 10,
                       strategy: str = "quantile") -> Figure:
    """Reliability curves of the router's models side by side, Brier scores in the titles."""
    table = calibration_table(model, paired, n_bins=n_bins, strategy=strategy)
    names = list(dict.fromkeys(table["model"]))
    fig = Figure(figsize=(3.7 * len(names), 3.8))
    axes = np.atleast_1d(fig.subplots(1, len(names), sharey=True))
    where = "out-of-fold (training)" if paired is None else "held-out table"
    for ax, name in zip(axes, names, strict=True):
        part = table[table["model"] == name]
        ax.plot([0, 1], [0, 1], ls="--", color="grey", lw=1, label="perfect")
        # the report's first colour (Okabe-Ito blue, cir.study.figures), not matplotlib's default
        ax.plot(part["mean_predicted"], part["fraction_positive"], marker="o", label=name, color="#0072B2")
        if len(part):
            r = part.iloc[0]
            ax.set_title(f"{name}: Brier {r['brier']:.3f} (base-rate predictor {r['brier_baseline']:.3f})\n"
                         f"{label_of(name)}", fontsize=9)
        ax.set_xlabel("mean predicted probability")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
    axes[0].set_ylabel("observed fraction positive")
    axes[0].legend(loc="upper left", fontsize=8)
    fig.suptitle(f"CIR model calibration, {where}", fontsize=10)
    fig.tight_layout()
    return fig
