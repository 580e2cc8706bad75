"""The CIR rule as plain arithmetic: three linear models, the scores, and what blocks a refresh.

This is all the runtime :class:`~cir.router.runtime.Router` needs, so it imports numpy only
(no pandas, no scikit-learn): the estimator (:mod:`cir.router.policy`) fits the models, the
router and the offline evaluation apply them through these functions, and the live
decision therefore equals the offline one on the same features bit for bit.

Scores (paper, eq. 6-7): ``s_R = (1-p0) p1``, ``s_H = p0 (1-p1)``, ``u = s_R - lambda s_H``.
Rule: ``d >= d_min and p_err >= alpha and 1-p0 >= beta and u >= gamma``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

MODEL_NAMES = ("p_err", "p0", "p1")
THRESHOLD_NAMES = ("alpha", "beta", "gamma")
BLOCKERS = ("delay", "p_err", "p_fail", "utility")


@dataclass
class LinearModel:
    """A standardised logistic model: ``p = expit(((x - mean) / scale) . coef + intercept)``.

    This is all a fitted ``Pipeline(StandardScaler, LogisticRegression)`` computes, as
    plain lists that a JSON file can hold (:func:`cir.router.policy.fit_linear_model` fits one).
    """

    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """P(label = 1) for each row of ``X`` (same arithmetic row by row, any batch size)."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        terms = ((X - self.mean) / self.scale) * self.coef
        # Accumulate feature by feature in a fixed order: numpy's axis reductions may sum a
        # batch in another order than a single row, and the router must match bit for bit.
        z = np.full(len(X), float(self.intercept))
        for j in range(terms.shape[1]):
            z = z + terms[:, j]
        return 1.0 / (1.0 + np.exp(-z))

    def to_dict(self) -> dict[str, Any]:
        return {
            "scaler_mean": [float(v) for v in self.mean],
            "scaler_scale": [float(v) for v in self.scale],
            "coef": [float(v) for v in self.coef],
            "intercept": float(self.intercept),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LinearModel:
        return cls(np.asarray(data["scaler_mean"], dtype=float),
                   np.asarray(data["scaler_scale"], dtype=float),
                   np.asarray(data["coef"], dtype=float), float(data["intercept"]))


def scores(p_err: np.ndarray, p0: np.ndarray, p1: np.ndarray, lam: float) -> dict[str, np.ndarray]:
    """Rescue score, harm score and utility (paper, eq. 6-7)."""
    s_r = (1 - p0) * p1
    s_h = p0 * (1 - p1)
    return {"p_err": p_err, "p0": p0, "p1": p1, "p_fail": 1 - p0, "s_R": s_r, "s_H": s_h,
            "utility": s_r - lam * s_h}


def predict(models: dict[str, LinearModel], X: np.ndarray, lam: float) -> dict[str, np.ndarray]:
    """The three probabilities and the scores for each row of ``X``."""
    p = {name: models[name].predict_proba(X) for name in MODEL_NAMES}
    return scores(p["p_err"], p["p0"], p["p1"], lam)


def passes(values: np.ndarray | float, threshold: float | None) -> np.ndarray | bool:
    """``values >= threshold``; a ``None`` threshold never passes (the never-refresh setting)."""
    if threshold is None:
        return np.zeros_like(values, dtype=bool) if isinstance(values, np.ndarray) else False
    return values >= threshold


def blocked_by(delay: int, s: dict[str, float], thresholds: dict[str, float | None],
               d_min: int, delays: tuple[int, ...]) -> str | None:
    """Which condition of the CIR rule blocks a refresh at this cell, or None (refresh)."""
    if delay < d_min or delay not in delays:
        return "delay"
    if not passes(s["p_err"], thresholds["alpha"]):
        return "p_err"
    if not passes(s["p_fail"], thresholds["beta"]):
        return "p_fail"
    if not passes(s["utility"], thresholds["gamma"]):
        return "utility"
    return None
