"""The Causal Intervention Router policy: three models, thresholds, baselines and the
sequential held-out evaluation (paper, sections 4 and 5.4).

Input is a paired table (:mod:`cir.paired`) with ``f_*`` feature columns computed on
the no-recovery arm at each delay. One *episode* is a (task, condition) pair; its
*cells* are the candidate delays. A policy walks the cells in order and refreshes at
the first cell where its rule fires, at most once; a task that already ended before
a delay (``executed = 0``) keeps its no-recovery outcome. Every policy below is
evaluated by the same walk, on the precomputed branches.

Models (T-learner style, one L2 logistic regression each, ``C=0.1``, standardised):

* ``p_err``: was the observation erroneous (label ``condition != clean``);
* ``p0``: success without recovery (``y0``);
* ``p1``: success with refresh at this delay (``y1``).

All three are fitted on the *decision cells*: rows of the chosen operation at a
candidate delay whose recovery actually ran (``executed = 1``) and whose arms
matched up to the branch point (``prefix_match = 1``). A cell whose episode had
already ended is not a decision the policy could make, so it teaches nothing.

Scores: ``s_R = (1-p0) p1``, ``s_H = p0 (1-p1)``, ``u = s_R - lambda s_H``. Rule:
``d >= d_min and p_err >= alpha and 1-p0 >= beta and u >= gamma``.

The fitted models are kept as :class:`LinearModel` (scaler mean/scale, coefficients,
intercept) and every prediction -- out-of-fold, offline, and the runtime
:class:`cir.router.Router` -- uses the same arithmetic, so the router's live decision
equals the offline decision on the same features bit for bit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError

from cir.errors import CirError
from cir.features import FEATURES
from cir.paired import feature_columns, validate_paired

MODEL_NAMES = ("p_err", "p0", "p1")
THRESHOLD_NAMES = ("alpha", "beta", "gamma")
BLOCKERS = ("delay", "p_err", "p_fail", "utility")
POLICIES = ("never", "always", "anomaly", "anomaly_rate_matched", "cir", "oracle")

# Status of one cell of the walk.
_DECIDE, _ENDED, _MISSING = 0, 1, 2


# -- the fitted models as plain numbers ------------------------------------------------
@dataclass
class LinearModel:
    """A standardised logistic model: ``p = expit(((x - mean) / scale) . coef + intercept)``.

    This is all a fitted ``Pipeline(StandardScaler, LogisticRegression)`` computes, as
    plain lists that a JSON file can hold. A label with one class only (possible for
    p0/p1 in a small fold) gives ``coef = 0`` and the class rate as a clipped logit.
    """

    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float

    @classmethod
    def fit(cls, X: np.ndarray, y: np.ndarray, C: float = 0.1, max_iter: int = 1000) -> LinearModel:
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import Pipeline
        from sklearn.preprocessing import StandardScaler

        y = np.asarray(y, dtype=int)
        if len(np.unique(y)) < 2:
            scaler = StandardScaler().fit(X)
            rate = min(max(float(y.mean()) if len(y) else 0.5, 1e-3), 1 - 1e-3)
            return cls(scaler.mean_.copy(), scaler.scale_.copy(), np.zeros(X.shape[1]),
                       math.log(rate / (1 - rate)))
        pipe = Pipeline([
            ("scale", StandardScaler()),
            # newton-cholesky: the same L2 objective as lbfgs, solved exactly in a few Newton
            # steps (few features); 10x faster than lbfgs on a busy machine.
            ("logit", LogisticRegression(C=C, solver="newton-cholesky", max_iter=max_iter)),
        ]).fit(X, y)
        scaler, logit = pipe.named_steps["scale"], pipe.named_steps["logit"]
        return cls(scaler.mean_.copy(), scaler.scale_.copy(), logit.coef_[0].copy(),
                   float(logit.intercept_[0]))

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


def _ge(values: np.ndarray | float, threshold: float | None) -> np.ndarray | bool:
    """``values >= threshold``; a ``None`` threshold never passes (the never-refresh setting)."""
    if threshold is None:
        return np.zeros_like(values, dtype=bool) if isinstance(values, np.ndarray) else False
    return values >= threshold


def blocked_by(delay: int, s: dict[str, float], thresholds: dict[str, float | None],
               d_min: int, delays: tuple[int, ...]) -> str | None:
    """Which condition of the CIR rule blocks a refresh at this cell, or None (refresh)."""
    if delay < d_min or delay not in delays:
        return "delay"
    if not _ge(s["p_err"], thresholds["alpha"]):
        return "p_err"
    if not _ge(s["p_fail"], thresholds["beta"]):
        return "p_fail"
    if not _ge(s["utility"], thresholds["gamma"]):
        return "utility"
    return None


# -- episodes as (episode x delay) grids --------------------------------------------------
@dataclass
class Grid:
    """The cells of a paired table for one operation, shaped (episodes, delays)."""

    episodes: pd.DataFrame  # task_id, condition, y0
    delays: tuple[int, ...]
    status: np.ndarray  # _DECIDE / _ENDED / _MISSING
    y1: np.ndarray
    row: np.ndarray  # index into the decision-cell table, -1 where none
    cells: pd.DataFrame  # the decision cells (rows with status _DECIDE)
    meta: dict[str, int] = field(default_factory=dict)

    @property
    def clean(self) -> np.ndarray:
        return (self.episodes["condition"] == "clean").to_numpy()

    @property
    def y0(self) -> np.ndarray:
        return self.episodes["y0"].to_numpy(dtype=int)


def check_features(df: pd.DataFrame, source: str, names: list[str] | None = None) -> list[str]:
    """The feature columns to use; CirError if missing, unknown or not finite numbers."""
    have = feature_columns(df)
    if not have:
        raise CirError(f"{source}: no feature columns (f_*); a paired table from `cir run` has them")
    if names is None:
        unknown = [c for c in have if c not in FEATURES]
        if unknown:
            raise CirError(f"{source}: unknown feature column {unknown[0]!r}: the router can only "
                           f"compute features of cir.features.FEATURES")
        names = have
    missing = [c for c in names if c not in df.columns]
    if missing:
        raise CirError(f"{source}: missing feature column {missing[0]!r} that the router uses")
    for c in names:
        values = pd.to_numeric(df[c], errors="coerce")
        if values.isna().any() or not np.isfinite(values.to_numpy(dtype=float)).all():
            raise CirError(f"{source}: feature column {c!r} must hold finite numbers; "
                           f"found {df[c][values.isna() | ~np.isfinite(values)].iloc[0]!r}")
    return list(names)


def build_grid(df: pd.DataFrame, delays: tuple[int, ...], operation: str, source: str) -> Grid:
    """Arrange the rows of one operation into episodes x candidate delays.

    A cell is *decidable* when its row exists, ran (``executed``) and passed the prefix
    check; *ended* when its row says the episode ended before that delay (the walk stops
    there and keeps y0); *missing* otherwise (the walk skips it).
    """
    if operation not in set(df["operation"]):
        raise CirError(f"{source}: no rows with operation {operation!r} "
                       f"(found {', '.join(sorted(set(df['operation'])))})")
    sub = df[(df["operation"] == operation) & (df["delay"].isin(delays))]
    if sub.empty:
        raise CirError(f"{source}: no {operation!r} rows at the candidate delays "
                       f"{','.join(map(str, delays))} (found delays "
                       f"{','.join(map(str, sorted(set(df['delay']))))})")
    all_op = df[df["operation"] == operation]
    y0 = all_op.groupby(["task_id", "condition"], sort=True)["y0"].agg(["min", "max"])
    if (y0["min"] != y0["max"]).any():
        bad = y0.index[(y0["min"] != y0["max"]).to_numpy()][0]
        raise CirError(f"{source}: task {bad[0]!r}, condition {bad[1]!r} has different y0 across "
                       "delays; the no-recovery arm is shared by all delays")
    episodes = y0["min"].rename("y0").reset_index()
    index = {key: i for i, key in enumerate(zip(episodes["task_id"], episodes["condition"], strict=True))}
    n, m = len(episodes), len(delays)
    status = np.full((n, m), _MISSING, dtype=int)
    y1 = np.zeros((n, m), dtype=int)
    row = np.full((n, m), -1, dtype=int)
    col = {d: j for j, d in enumerate(delays)}
    ok = (sub["executed"] == 1) & (sub["prefix_match"] == 1)
    cells = sub[ok].reset_index(drop=True)
    ei = np.array([index[k] for k in zip(sub["task_id"], sub["condition"], strict=True)], dtype=int)
    dj = np.array([col[d] for d in sub["delay"]], dtype=int)
    executed = sub["executed"].to_numpy() == 1
    prefix = sub["prefix_match"].to_numpy() == 1
    status[ei[~executed], dj[~executed]] = _ENDED
    sel = executed & prefix
    status[ei[sel], dj[sel]] = _DECIDE
    y1[ei[sel], dj[sel]] = sub["y1"].to_numpy()[sel]
    row[ei[sel], dj[sel]] = np.arange(int(sel.sum()))
    meta = {"episodes": n, "tasks": int(episodes["task_id"].nunique()), "cells": int(sel.sum()),
            "ended_cells": int((~executed).sum()), "prefix_mismatch_cells": int((executed & ~prefix).sum())}
    return Grid(episodes, tuple(delays), status, y1, row, cells, meta)


def walk(grid: Grid, fire: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run the sequential policy: ``fire`` (..., episodes, delays) says where the rule fires.

    Returns (outcome, intervened, delay index or -1), each shaped like ``fire[..., 0]``.
    A cell fires only if decidable; the walk stops at the first firing cell, and the
    first ended cell ends it (later cells of an ended episode are ended too).
    """
    decidable = grid.status == _DECIDE
    ended = grid.status == _ENDED
    # cells before the first ended cell
    allowed = decidable & (np.cumsum(ended, axis=1) == 0)
    outcome = np.broadcast_to(grid.y0, fire.shape[:-1]).copy()
    decided = np.zeros(fire.shape[:-1], dtype=bool)
    first = np.full(fire.shape[:-1], -1)
    for j in range(fire.shape[-1]):  # few delays: one vectorised pass each
        f = fire[..., j] & allowed[:, j] & ~decided
        outcome[f] = np.broadcast_to(grid.y1[:, j], f.shape)[f]
        first[f] = j
        decided |= f
    return outcome, decided, first


def summarize(grid: Grid, outcome: np.ndarray, intervened: np.ndarray) -> dict[str, Any]:
    """Objective and constraint of a policy's walk (paper, eq. 4), as counts and rates."""
    clean = grid.clean
    y0 = grid.y0
    err = (~clean).astype(np.int64)
    gain = outcome.astype(np.int64) @ err - int(y0 @ err)
    harm = (1 - outcome.astype(np.int64)) @ (y0 * clean).astype(np.int64)
    n_err, n_clean = int((~clean).sum()), int(clean.sum())
    return {
        "gain_count": gain, "clean_harm_count": harm, "interventions": intervened.sum(axis=-1, dtype=np.int64),
        "net_gain": gain / max(n_err, 1), "clean_harm": harm / max(n_clean, 1),
        "intervention_rate": intervened.sum(axis=-1) / max(len(y0), 1),
        "n_err": n_err, "n_clean": n_clean,
    }


# -- the estimator ------------------------------------------------------------------------
class CIRPolicy(BaseEstimator):
    """The CIR policy as a scikit-learn style estimator over a paired table.

    Settings live in ``__init__`` (``get_params``/``set_params``/``clone`` work);
    :meth:`fit` takes a paired DataFrame and sets the attributes ending in ``_``:
    ``features_``, ``models_`` (name -> :class:`LinearModel`), ``thresholds_``,
    ``baselines_``, ``oof_`` (out-of-fold scores per decision cell), ``oof_summary_``,
    ``grid_`` (every threshold setting tried, with its OOF gain and clean harm) and
    ``n_tasks_``.

    Which ``sklearn.utils.estimator_checks`` apply: the input is a paired *table*
    (task ids, conditions, delays, two outcomes and feature columns), not an ``(X, y)``
    array pair, and the estimator is neither a classifier nor a regressor (its output
    is a sequential decision per episode). So the checks that feed random numeric
    arrays (``check_fit2d_*``, ``check_estimators_dtypes``, ``check_fit_score_takes_y``,
    ``check_methods_subset_invariance`` and the other array-input checks) do not apply.
    The conventions that do apply are tested: ``check_no_attributes_set_in_init``,
    ``check_get_params_invariance``, ``check_set_params`` and ``check_parameters_default_constructible``
    from ``estimator_checks``, ``clone`` giving an unfitted copy with equal params,
    ``NotFittedError`` from ``check_is_fitted`` before ``fit``, and identical fits from
    identical settings.
    """

    def __init__(
        self,
        lam: float = 2.0,
        epsilon: float = 0.02,
        d_min: int = 1,
        delays: tuple[int, ...] = (1, 2, 4),
        C: float = 0.1,
        folds: int = 5,
        operation: str = "refresh",
        grid_size: int = 21,
        seed: int = 0,
        max_iter: int = 1000,
    ) -> None:
        self.lam = lam
        self.epsilon = epsilon
        self.d_min = d_min
        self.delays = delays
        self.C = C
        self.folds = folds
        self.operation = operation
        self.grid_size = grid_size
        self.seed = seed
        self.max_iter = max_iter

    # -- helpers ------------------------------------------------------------------------
    def _check_settings(self) -> tuple[int, ...]:
        delays = tuple(int(d) for d in self.delays)
        if not delays or any(d < 0 for d in delays) or list(delays) != sorted(set(delays)):
            raise CirError(f"delays: expected increasing distinct integers >= 0, got {self.delays!r}")
        if not 0 <= self.epsilon <= 1:
            raise CirError(f"epsilon: expected a rate in [0, 1], got {self.epsilon!r}")
        if self.lam <= 0:
            raise CirError(f"lam: expected lambda > 0, got {self.lam!r}")
        if self.C <= 0:
            raise CirError(f"C: expected > 0, got {self.C!r}")
        if int(self.folds) < 2:
            raise CirError(f"folds: expected at least 2, got {self.folds!r}")
        if int(self.grid_size) < 2:
            raise CirError(f"grid_size: expected at least 2, got {self.grid_size!r}")
        return delays

    def _fit_models(self, cells: pd.DataFrame) -> dict[str, LinearModel]:
        X = cells[self.features_].to_numpy(dtype=float)
        labels = {"p_err": (cells["condition"] != "clean").to_numpy(dtype=int),
                  "p0": cells["y0"].to_numpy(dtype=int), "p1": cells["y1"].to_numpy(dtype=int)}
        return {name: LinearModel.fit(X, labels[name], C=self.C, max_iter=self.max_iter)
                for name in MODEL_NAMES}

    @staticmethod
    def _predict(models: dict[str, LinearModel], X: np.ndarray, lam: float) -> dict[str, np.ndarray]:
        p = {name: models[name].predict_proba(X) for name in MODEL_NAMES}
        return scores(p["p_err"], p["p0"], p["p1"], lam)

    def _cell_scores(self, grid: Grid, cell_scores: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Spread per-cell scores onto the (episodes, delays) grid (NaN where not decidable)."""
        out = {}
        has = grid.row >= 0
        for name, values in cell_scores.items():
            a = np.full(grid.row.shape, np.nan)
            a[has] = values[grid.row[has]]
            out[name] = a
        return out

    def _delay_ok(self, grid: Grid) -> np.ndarray:
        return np.asarray(grid.delays)[None, :] >= self.d_min

    # -- fit --------------------------------------------------------------------------------
    def fit(self, paired: pd.DataFrame, y: None = None) -> CIRPolicy:
        """Fit the three models, choose thresholds on OOF predictions, fit the baselines."""
        from sklearn.model_selection import GroupKFold

        delays = self._check_settings()
        source = "training table"
        df = validate_paired(paired, source=source)
        features = check_features(df, source)
        grid = build_grid(df, delays, self.operation, source)
        cells = grid.cells
        conditions = set(cells["condition"])
        if "clean" not in conditions:
            raise CirError(f"{source}: no clean rows at the candidate delays; the clean-harm limit "
                           "(epsilon) and the error model p_err need clean trajectories")
        if conditions == {"clean"}:
            raise CirError(f"{source}: only clean rows; p_err needs erroneous observations "
                           "(stale or missing conditions) to learn from")
        n_tasks = cells["task_id"].nunique()
        folds = int(self.folds)
        if n_tasks < folds:
            raise CirError(f"{source}: {n_tasks} task(s) with decision cells, fewer than "
                           f"folds={folds}; lower --folds or add tasks")
        self.features_ = features

        # Out-of-fold predictions, grouped by task (all conditions/delays of a task together).
        X = cells[features].to_numpy(dtype=float)
        oof = {name: np.zeros(len(cells)) for name in MODEL_NAMES}
        fold_of = np.zeros(len(cells), dtype=int)
        splitter = GroupKFold(n_splits=folds, shuffle=True, random_state=self.seed)
        for k, (tr, te) in enumerate(splitter.split(X, groups=cells["task_id"].to_numpy())):
            models = self._fit_models(cells.iloc[tr])
            for name in MODEL_NAMES:
                oof[name][te] = models[name].predict_proba(X[te])
            fold_of[te] = k
        oof_scores = scores(oof["p_err"], oof["p0"], oof["p1"], self.lam)
        self.oof_ = cells[["task_id", "condition", "delay", "y0", "y1"]].assign(
            fold=fold_of, **{k: v for k, v in oof_scores.items()})
        g = self._cell_scores(grid, oof_scores)

        # CIR thresholds: grid search under the clean-harm limit.
        self.grid_ = self._search(grid, g)
        best = self.grid_.iloc[0]
        self.thresholds_ = {name: _none_if_inf(best[name]) for name in THRESHOLD_NAMES}
        cir_fire = self._fire(grid, g, self.thresholds_)
        self.oof_summary_ = _plain(summarize(grid, *walk(grid, cir_fire)[:2]))

        # Baselines, chosen on the same OOF predictions / training table.
        self.baselines_ = self._fit_baselines(grid, g, self.oof_summary_["intervention_rate"])

        # Refit on all training tasks.
        self.models_ = self._fit_models(cells)
        self.n_tasks_ = int(n_tasks)
        self.training_ = {**grid.meta, "decision_cells": int(len(cells)),
                          "task_ids": sorted(str(t) for t in set(df["task_id"])),
                          "agents": sorted(str(a) for a in set(df["agent"]))
                          if "agent" in df.columns else []}
        return self

    def _fire(self, grid: Grid, g: dict[str, np.ndarray], t: dict[str, float | None]) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return (self._delay_ok(grid) & _ge(g["p_err"], t["alpha"]) & _ge(g["p_fail"], t["beta"])
                    & _ge(g["utility"], t["gamma"]))

    def _candidates(self, values: np.ndarray, extra: list[float]) -> np.ndarray:
        v = values[np.isfinite(values)]
        q = np.quantile(v, np.linspace(0, 1, int(self.grid_size))) if len(v) else np.array([])
        return np.unique(np.concatenate([q, np.asarray(extra, dtype=float)]))

    def _search(self, grid: Grid, g: dict[str, np.ndarray]) -> pd.DataFrame:
        """Every (alpha, beta, gamma) of the grid with its OOF objective; best first.

        Candidates are quantiles of the OOF scores (plus alpha = inf, i.e. never
        refresh, which always meets the limit, and beta = 0, gamma = 0). Among settings
        with clean harm <= epsilon: largest net gain under erroneous observations;
        ties: lower clean harm, fewer interventions, then larger (more conservative)
        alpha, beta, gamma.
        """
        alphas = np.append(self._candidates(g["p_err"], []), np.inf)
        betas = self._candidates(g["p_fail"], [0.0])
        gammas = self._candidates(g["utility"], [0.0])
        delay_ok = self._delay_ok(grid)
        rows = []
        bb, gg = np.meshgrid(betas, gammas, indexing="ij")
        bb, gg = bb.ravel(), gg.ravel()
        with np.errstate(invalid="ignore"):
            pass_b = g["p_fail"][None] >= bb[:, None, None]
            pass_g = g["utility"][None] >= gg[:, None, None]
            pass_bg = pass_b & pass_g  # (settings, episodes, delays)
            for a in alphas:
                fire = pass_bg & (delay_ok & (g["p_err"] >= a))[None]
                s = summarize(grid, *walk(grid, fire)[:2])
                rows.append(pd.DataFrame({
                    "alpha": a, "beta": bb, "gamma": gg,
                    "gain_count": s["gain_count"], "clean_harm_count": s["clean_harm_count"],
                    "interventions": s["interventions"], "net_gain": s["net_gain"],
                    "clean_harm": s["clean_harm"], "intervention_rate": s["intervention_rate"]}))
        table = pd.concat(rows, ignore_index=True)
        n_clean = max(int(grid.clean.sum()), 1)
        table["feasible"] = table["clean_harm_count"] <= self.epsilon * n_clean + 1e-9
        return table.sort_values(
            ["feasible", "gain_count", "clean_harm_count", "interventions", "alpha", "beta", "gamma"],
            ascending=[False, False, True, True, False, False, False], kind="mergesort",
        ).reset_index(drop=True)

    def _fit_baselines(self, grid: Grid, g: dict[str, np.ndarray], cir_rate: float) -> dict[str, Any]:
        n_clean = max(int(grid.clean.sum()), 1)
        # anomaly: p_err >= alpha alone, every distinct OOF p_err value is a candidate
        alphas = np.append(np.unique(g["p_err"][np.isfinite(g["p_err"])]), np.inf)
        delay_ok = self._delay_ok(grid)
        with np.errstate(invalid="ignore"):
            fire = delay_ok[None] & (g["p_err"][None] >= alphas[:, None, None])
        s = summarize(grid, *walk(grid, fire)[:2])
        anomaly = pd.DataFrame({"alpha": alphas, "gain_count": s["gain_count"],
                                "clean_harm_count": s["clean_harm_count"],
                                "interventions": s["interventions"],
                                "intervention_rate": s["intervention_rate"],
                                "net_gain": s["net_gain"], "clean_harm": s["clean_harm"]})
        anomaly["feasible"] = anomaly["clean_harm_count"] <= self.epsilon * n_clean + 1e-9
        best = anomaly.sort_values(["feasible", "gain_count", "clean_harm_count", "interventions", "alpha"],
                                   ascending=[False, False, True, True, False], kind="mergesort").iloc[0]
        # rate-matched: the OOF intervention rate closest to CIR's (no harm limit)
        anomaly["rate_gap"] = (anomaly["intervention_rate"] - cir_rate).abs()
        matched = anomaly.sort_values(["rate_gap", "gain_count", "alpha"], ascending=[True, False, False],
                                      kind="mergesort").iloc[0]
        # always refresh at one fixed delay, chosen on the training table itself (no model)
        always = []
        for j, d in enumerate(grid.delays):
            if d < self.d_min:
                continue
            f = np.zeros(grid.status.shape, dtype=bool)
            f[:, j] = True
            s = summarize(grid, *walk(grid, f)[:2])
            always.append({"delay": d, "gain_count": int(s["gain_count"]),
                           "clean_harm_count": int(s["clean_harm_count"]),
                           "net_gain": float(s["net_gain"]), "clean_harm": float(s["clean_harm"]),
                           "intervention_rate": float(s["intervention_rate"])})
        if not always:
            raise CirError(f"d_min={self.d_min} is above every candidate delay {grid.delays}")
        for a in always:
            a["meets_epsilon"] = a["clean_harm_count"] <= self.epsilon * n_clean + 1e-9
        best_always = sorted(always, key=lambda a: (not a["meets_epsilon"], -a["gain_count"],
                                                    a["clean_harm_count"], a["delay"]))[0]

        def pick(r: pd.Series) -> dict[str, Any]:
            return {"alpha": _none_if_inf(r["alpha"]), "oof_net_gain": float(r["net_gain"]),
                    "oof_clean_harm": float(r["clean_harm"]),
                    "oof_intervention_rate": float(r["intervention_rate"])}

        return {
            "anomaly": pick(best),
            "anomaly_rate_matched": pick(matched),
            "always": {"delay": int(best_always["delay"]),
                       "train_net_gain": best_always["net_gain"],
                       "train_clean_harm": best_always["clean_harm"],
                       "meets_epsilon": bool(best_always["meets_epsilon"])},
        }

    # -- using the fitted policy ------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "models_"):
            raise NotFittedError("This CIRPolicy is not fitted yet; call fit(paired) first")

    def predict_scores(self, paired: pd.DataFrame) -> pd.DataFrame:
        """p_err, p0, p1, p_fail, s_R, s_H and utility for every row of ``paired``."""
        self._check_fitted()
        check_features(paired, "paired table", self.features_)
        X = paired[self.features_].to_numpy(dtype=float)
        s = self._predict(self.models_, X, self.lam)
        return pd.DataFrame(s, index=paired.index)

    def decide(self, paired: pd.DataFrame) -> pd.DataFrame:
        """Per row: the CIR rule's decision if the walk reaches that row, with scores and blocker."""
        s = self.predict_scores(paired)
        t = self.thresholds_
        delays = tuple(int(d) for d in self.delays)
        blockers = [
            blocked_by(int(d), {k: s.at[i, k] for k in ("p_err", "p_fail", "utility")}, t, self.d_min, delays)
            for i, d in zip(paired.index, paired["delay"], strict=True)
        ]
        out = s.copy()
        out["blocked_by"] = pd.Series(blockers, index=out.index, dtype=object)  # None: refresh
        out["refresh"] = [b is None for b in blockers]
        return out

    def walk_policies(self, paired: pd.DataFrame, source: str = "paired table") -> pd.DataFrame:
        """Every policy's sequential walk on ``paired``: one row per episode (task, condition).

        Columns ``y_<policy>``, ``int_<policy>`` (intervened) and ``delay_<policy>`` for
        never, always, anomaly, anomaly_rate_matched, cir and oracle.
        """
        self._check_fitted()
        df = validate_paired(paired, source=source)
        check_features(df, source, self.features_)
        delays = tuple(int(d) for d in self.delays)
        grid = build_grid(df, delays, self.operation, source)
        X = grid.cells[self.features_].to_numpy(dtype=float)
        g = self._cell_scores(grid, self._predict(self.models_, X, self.lam))
        delay_ok = self._delay_ok(grid)
        fires: dict[str, np.ndarray] = {"never": np.zeros(grid.status.shape, dtype=bool)}
        always = np.zeros(grid.status.shape, dtype=bool)
        always[:, delays.index(self.baselines_["always"]["delay"])] = True
        fires["always"] = always
        with np.errstate(invalid="ignore"):
            for name in ("anomaly", "anomaly_rate_matched"):
                fires[name] = delay_ok & _ge(g["p_err"], self.baselines_[name]["alpha"])
        fires["cir"] = self._fire(grid, g, self.thresholds_)
        fires["oracle"] = delay_ok & (grid.y0[:, None] == 0) & (grid.y1 == 1)
        out = grid.episodes.copy()
        d = np.asarray(delays)
        for name in POLICIES:
            outcome, intervened, first = walk(grid, fires[name])
            out[f"y_{name}"] = outcome.astype(int)
            out[f"int_{name}"] = intervened.astype(int)
            out[f"delay_{name}"] = np.where(first >= 0, d[np.maximum(first, 0)], -1)
        out.attrs["meta"] = grid.meta
        return out


def _none_if_inf(v: float) -> float | None:
    return None if not np.isfinite(v) else float(v)


def _plain(d: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.item() if isinstance(v, np.generic) else v) for k, v in d.items()}


# -- held-out evaluation ------------------------------------------------------------------
GROUP_ALL = "all"
SUMMARY_COLUMNS = [
    "policy", "condition", "n", "n_tasks", "success_never", "success_policy", "effect_pp",
    "ci_low_pp", "ci_high_pp", "sign_flip_p", "rescues", "harms", "interventions",
    "intervention_rate", "clean_harm_rate", "oracle_fraction",
]
MARGIN_COLUMNS = ["policy", "versus", "condition", "n", "margin_pp", "ci_low_pp", "ci_high_pp", "sign_flip_p"]


def _task_sums(episodes: pd.DataFrame, values: dict[str, np.ndarray], groups: list[str]) -> tuple[
        np.ndarray, np.ndarray, list[tuple[str, str]]]:
    """(tasks x columns) sums of each value per task for each condition and for all."""
    tasks, tcode = np.unique(episodes["task_id"].to_numpy(), return_inverse=True)
    cond = episodes["condition"].to_numpy()
    nums, dens, cols = [], [], []
    for name, v in values.items():
        for g in groups:
            mask = np.ones(len(cond), dtype=bool) if g == GROUP_ALL else cond == g
            nums.append(np.bincount(tcode[mask], weights=v[mask].astype(float), minlength=len(tasks)))
            dens.append(np.bincount(tcode[mask], minlength=len(tasks)).astype(float))
            cols.append((name, g))
    return np.column_stack(nums), np.column_stack(dens), cols


def evaluate(policy: CIRPolicy, paired: pd.DataFrame, *, resamples: int = 10_000, seed: int = 0,
             level: float = 0.95, source: str = "test table") -> dict[str, Any]:
    """Held-out evaluation of CIR and its baselines on ``paired`` (tasks never used in fitting).

    Every policy walks the candidate delays on the precomputed branches. Returns
    ``{"episodes", "summary", "margins", "settings"}``: per policy and condition (and
    ``all``): success never vs policy, effect (pp) with a task-level cluster-bootstrap CI
    and sign-flip p-value versus never, rescues, harms, intervention and clean-harm rates,
    and the fraction of the oracle's gain reached; margins of CIR over every other
    policy with paired (same-task) intervals. Intervals and tests are those of
    :mod:`cir.stats`; all columns share the same bootstrap resamples.
    """
    from cir.stats import bootstrap_ratios, percentile_ci, sign_flip_test

    episodes = policy.walk_policies(paired, source=source)
    conditions = sorted(set(episodes["condition"]), key=lambda c: (c != "clean", c))
    groups = [GROUP_ALL, *conditions]
    y0 = episodes["y_never"].to_numpy()
    diffs = {p: episodes[f"y_{p}"].to_numpy() - y0 for p in POLICIES}
    margins = {f"cir-{p}": episodes["y_cir"].to_numpy() - episodes[f"y_{p}"].to_numpy()
               for p in POLICIES if p != "cir"}
    num, den, cols = _task_sums(episodes, {**diffs, **margins}, groups)
    reps = bootstrap_ratios(num, den, resamples, seed)
    low, high = percentile_ci(reps, level)
    ci = {col: (low[i], high[i]) for i, col in enumerate(cols)}
    flip = {col: sign_flip_test(num[den[:, i] > 0, i], resamples, seed) for i, col in enumerate(cols)}

    cond = episodes["condition"].to_numpy()
    clean = cond == "clean"
    rows = []
    for p in POLICIES:
        yp = episodes[f"y_{p}"].to_numpy()
        intervened = episodes[f"int_{p}"].to_numpy()
        for g in groups:
            m = np.ones(len(cond), dtype=bool) if g == GROUP_ALL else cond == g
            n = int(m.sum())
            harms = int(((y0 == 1) & (yp == 0) & m).sum())
            oracle_gain = float((diffs["oracle"][m]).sum())
            cm = m & clean
            rows.append({
                "policy": p, "condition": g, "n": n, "n_tasks": int(episodes.loc[m, "task_id"].nunique()),
                "success_never": float(y0[m].mean()), "success_policy": float(yp[m].mean()),
                "effect_pp": 100 * float(diffs[p][m].mean()),
                "ci_low_pp": 100 * ci[(p, g)][0], "ci_high_pp": 100 * ci[(p, g)][1],
                "sign_flip_p": flip[(p, g)],
                "rescues": int(((y0 == 0) & (yp == 1) & m).sum()), "harms": harms,
                "interventions": int(intervened[m].sum()), "intervention_rate": float(intervened[m].mean()),
                "clean_harm_rate": (float(((y0 == 1) & (yp == 0) & cm).sum() / cm.sum())
                                    if cm.any() else float("nan")),
                "oracle_fraction": (float(diffs[p][m].sum()) / oracle_gain if oracle_gain > 0
                                    else float("nan")),
            })
    summary = pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
    mrows = []
    for name in margins:
        versus = name.split("-", 1)[1]
        for g in groups:
            m = np.ones(len(cond), dtype=bool) if g == GROUP_ALL else cond == g
            mrows.append({"policy": "cir", "versus": versus, "condition": g, "n": int(m.sum()),
                          "margin_pp": 100 * float(margins[name][m].mean()),
                          "ci_low_pp": 100 * ci[(name, g)][0], "ci_high_pp": 100 * ci[(name, g)][1],
                          "sign_flip_p": flip[(name, g)]})
    settings = {**{k: (list(v) if isinstance(v, tuple) else v) for k, v in policy.get_params().items()},
                "thresholds": policy.thresholds_, "baselines": policy.baselines_,
                "resamples": int(resamples), "seed": int(seed), "level": level,
                "episodes": int(len(episodes)), "tasks": int(episodes["task_id"].nunique()),
                **{f"grid_{k}": v for k, v in episodes.attrs.get("meta", {}).items()}}
    from cir import __version__

    settings["cir_version"] = __version__
    return {"episodes": episodes, "summary": summary,
            "margins": pd.DataFrame(mrows, columns=MARGIN_COLUMNS), "settings": settings}


# -- synthetic data -------------------------------------------------------------------------
def simulate(n_tasks: int = 200, seed: int = 0, conditions: tuple[str, ...] = ("clean", "stale2", "stale1", "missing"),
             delays: tuple[int, ...] = (0, 1, 2, 4), operation: str = "refresh") -> pd.DataFrame:
    """A synthetic paired table with ``f_*`` columns and a planted signal (examples, tests).

    Each task has a latent skill. An erroneous observation is visible in the features
    (``f_suspect_seen_before``, ``f_suspect_mismatch``) most of the time, and sometimes
    also on clean runs (false alarms). Only erroneous runs that *confuse* the agent
    (visible as ``f_post_noops`` growing with the delay) lose success, and refresh
    rescues those; refreshing a run that holds an object (``f_holding``) sometimes
    harms it, errors or not. So an error detector alone refreshes many runs it cannot
    help and some it harms; a policy that also predicts the outcomes can do better.
    """
    rng = np.random.default_rng(seed)
    records = []

    def sigmoid(z: float) -> float:
        return 1.0 / (1.0 + math.exp(-z))

    for t in range(n_tasks):
        skill = rng.normal()
        length = int(rng.integers(2, 14))  # env actions left after the perturbation point
        progress = round(sigmoid(skill + rng.normal(scale=0.5)), 6)
        for condition in conditions:
            error = condition != "clean"
            seen = int(rng.random() < (0.8 if error else 0.1))
            mismatch = int(rng.random() < (0.6 if error else 0.05))
            confused = error and rng.random() < 0.4
            holding = int(rng.random() < 0.3)
            y0 = int(rng.random() < sigmoid(1.5 * skill + 1.2 - (3.0 if confused else 0.0)))
            y_rescued = int(rng.random() < sigmoid(1.5 * skill + 1.2))
            noops = [int(rng.poisson(0.8 * d if confused else 0.15 * d)) for d in range(max(delays) + 1)]
            for d in delays:
                executed = int(d < length)
                y1 = y0
                if executed:
                    if confused and y0 == 0:
                        y1 = y_rescued
                    elif y0 == 1 and rng.random() < (0.5 if holding else 0.01):
                        y1 = 0
                records.append({
                    "task_id": f"syn{t:04d}", "split": "train", "task_type": "pick_and_place",
                    "agent": "synthetic", "condition": condition, "delay": int(d), "operation": operation,
                    "y0": y0, "y1": y1, "executed": executed, "factual_success": int(skill > -0.8),
                    "prefix_match": 1, "outcome": "",
                    "f_delay": float(d), "f_suspect_seen_before": float(seen),
                    "f_suspect_mismatch": float(mismatch), "f_post_noops": float(sum(noops[1:d + 1])),
                    "f_holding": float(holding), "f_progress": progress,
                    "f_env_actions": float(5 + d + int(rng.integers(0, 3))),
                })
    return validate_paired(pd.DataFrame.from_records(records), source="synthetic table")
