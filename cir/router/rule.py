"""The CIR rule as plain arithmetic: linear models, the estimators' scores, the gates.

This is all the runtime :class:`~cir.router.runtime.Router` needs, so it imports numpy only
(no pandas, no scikit-learn): the policy (:mod:`cir.router.policy`) fits the models, and
the router, the sequential walk (:mod:`cir.router.walk`), the threshold search and the
offline evaluation all decide through :func:`gates_pass` and :func:`blocked_by` here, so
the live decision equals the offline one on the same features bit for bit, and the rule
is written once.

Two estimators of the value of recovering with an operation ``m`` at a decision point:

* ``paper`` (the paper's CIR, section 4.2, a T-learner): ``p0`` = P(success without
  recovery), ``p1[m]`` = P(success with ``m``), scores ``s_R = (1-p0) p1``,
  ``s_H = p0 (1-p1)``, ``u = s_R - lambda s_H``; gates ``p_err >= alpha``,
  ``p_fail = 1-p0 >= beta``, ``u >= gamma``.
* ``paired``: the paired design observes both outcomes from the same state, so the outcome
  class of every row (rescue, harm, stable) is known and is modelled directly:
  ``p_rescue[m]`` = P(rescue), ``p_harm[m]`` = P(harm), ``u = p_rescue - lambda p_harm``;
  gates ``p_err >= alpha``, ``u >= gamma``. The paper warns that the marginals ``p0, p1``
  do not identify rescue and harm (Tian and Pearl); these are the joint quantities.

Both share the error model ``p_err`` = P(the observation was erroneous). With several
operations, the rule recovers with the operation of highest utility, when the gates pass
for it. Model names are flat: ``p_err``, ``p0``, and per operation ``p1[refresh]``,
``p_rescue[replan]`` and so on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

#: The clean-harm budgets of the threshold search (:mod:`cir.router.budget`).
BUDGETS = ("empirical", "certified")
#: Every condition of the rule, in the order a blocked decision names the first that failed.
BLOCKERS = ("delay", "p_err", "p_fail", "utility")
_PER_OPERATION = re.compile(r"^([a-z_0-9]+)\[([a-z_0-9]+)\]$")


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


@dataclass(frozen=True)
class Estimator:
    """What one estimator models and how its scores and gates are formed (module docstring).

    ``shared`` models are fitted once; ``per_operation`` ones once per operation.
    ``gates`` pairs each gated score with its threshold's name, in the rule's order.
    """

    name: str
    shared: tuple[str, ...]
    per_operation: tuple[str, ...]
    gates: tuple[tuple[str, str], ...]

    @property
    def thresholds(self) -> tuple[str, ...]:
        return tuple(t for _, t in self.gates)

    def model_names(self, operations: tuple[str, ...]) -> tuple[str, ...]:
        return (*self.shared, *(f"{m}[{op}]" for op in operations for m in self.per_operation))

    def scores(self, p: dict[str, np.ndarray], operation: str, lam: float) -> dict[str, np.ndarray]:
        """The scores of one operation from the probabilities ``p`` (keyed by model name)."""
        if self.name == "paper":
            p0, p1 = p["p0"], p[f"p1[{operation}]"]
            s_r, s_h = (1 - p0) * p1, p0 * (1 - p1)
            return {"p_err": p["p_err"], "p0": p0, "p1": p1, "p_fail": 1 - p0, "s_R": s_r, "s_H": s_h,
                    "utility": s_r - lam * s_h}
        rescue, harm = p[f"p_rescue[{operation}]"], p[f"p_harm[{operation}]"]
        return {"p_err": p["p_err"], "p_rescue": rescue, "p_harm": harm, "utility": rescue - lam * harm}


ESTIMATORS: dict[str, Estimator] = {
    "paper": Estimator("paper", ("p_err", "p0"), ("p1",),
                       (("p_err", "alpha"), ("p_fail", "beta"), ("utility", "gamma"))),
    "paired": Estimator("paired", ("p_err",), ("p_rescue", "p_harm"),
                        (("p_err", "alpha"), ("utility", "gamma"))),
}


def split_model_name(name: str) -> tuple[str, str | None]:
    """``p1[refresh]`` -> ("p1", "refresh"); ``p_err`` -> ("p_err", None)."""
    m = _PER_OPERATION.match(name)
    return (m.group(1), m.group(2)) if m else (name, None)


def predict(estimator: Estimator, models: dict[str, LinearModel], operations: tuple[str, ...],
            X: np.ndarray, lam: float) -> dict[str, np.ndarray]:
    """The scores at each row of ``X``, each shaped (rows, operations), and ``choice``.

    ``choice`` is the index of the operation of highest utility (the first on ties), and
    every score without an operation axis (``*_chosen``) is that operation's.
    """
    p = {name: models[name].predict_proba(X) for name in estimator.model_names(operations)}
    return choose({op: estimator.scores(p, op, lam) for op in operations}, operations)


def choose(per_op: dict[str, dict[str, np.ndarray]], operations: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Stack per-operation scores (rows, operations) and pick the operation of highest utility."""
    names = list(per_op[operations[0]])
    stacked = {n: np.stack([np.asarray(per_op[op][n], dtype=float) for op in operations], axis=-1)
               for n in names}
    choice = np.argmax(stacked["utility"], axis=-1)
    out: dict[str, np.ndarray] = {"choice": choice}
    for n, values in stacked.items():
        out[n] = values
        out[f"{n}_chosen"] = np.take_along_axis(values, choice[..., None], axis=-1)[..., 0]
    return out


def passes(values: np.ndarray | float, threshold: float | None) -> np.ndarray | bool:
    """``values >= threshold``; a ``None`` threshold never passes (the never-recover setting)."""
    if threshold is None:
        return np.zeros_like(values, dtype=bool) if isinstance(values, np.ndarray) else False
    return values >= threshold


def gates_pass(estimator: Estimator, s: dict[str, Any], thresholds: dict[str, float | None]) -> Any:
    """Whether every gate of the rule passes for the chosen operation (any array shape)."""
    ok: Any = True
    with np.errstate(invalid="ignore"):
        for score, threshold in estimator.gates:
            ok = ok & passes(s[f"{score}_chosen"], thresholds[threshold])
    return ok


#: What blocks every decision of a rule with a gate whose threshold is None: the threshold search
#: found no candidate that gained within the clean-harm budget, so the router never recovers.
NO_THRESHOLD = "no_threshold"


def no_threshold(estimator: Estimator, thresholds: dict[str, float | None]) -> str | None:
    """The first threshold of the rule that is None (so its gate never passes), or None."""
    return next((t for _, t in estimator.gates if thresholds.get(t) is None), None)


def blocked_by(estimator: Estimator, delay: int, s: dict[str, Any], thresholds: dict[str, float | None],
               d_min: int, delays: tuple[int, ...]) -> str | None:
    """Which condition of the rule blocks recovery at one decision point, or None (recover):
    :data:`NO_THRESHOLD` first (the rule never recovers, whatever the scores), then ``"delay"``,
    then the first gate whose score is below its threshold.

    ``s`` holds the scores of one row (``*_chosen`` scalars), as :func:`predict` gives them.
    """
    if no_threshold(estimator, thresholds) is not None:
        return NO_THRESHOLD
    if delay < d_min or delay not in delays:
        return "delay"
    for score, threshold in estimator.gates:
        if not passes(float(s[f"{score}_chosen"]), thresholds[threshold]):
            return score
    return None
