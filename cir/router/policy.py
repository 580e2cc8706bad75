"""The Causal Intervention Router policy as an estimator: three models and thresholds
fitted on a paired table (paper, section 4).

Input is a paired table (:mod:`cir.pairs.paired`) with ``f_*`` feature columns computed on
the no-recovery arm at each delay. Models (T-learner style, one L2 logistic regression
each, ``C=0.1``, standardised): ``p_err`` (was the observation erroneous: label
``condition != clean``), ``p0`` (success without recovery, ``y0``) and ``p1`` (success
with refresh at this delay, ``y1``), fitted on the decision cells of the sequential
walk (:mod:`cir.router.walk`). The rule and its scores are those of :mod:`cir.router.rule`;
thresholds are chosen on out-of-fold predictions grouped by task, under the clean-harm
limit, and the baselines' parameters are chosen the same way. The fitted policy
becomes a runtime :class:`~cir.router.runtime.Router` through :meth:`CIRPolicy.to_router`;
the held-out evaluation is :mod:`cir.router.evaluation`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from cir.episode.extractor import FeatureExtractor, resolve_extractor
from cir.episode.protocol import (
    DEFAULT_C,
    DEFAULT_CANDIDATE_DELAYS,
    DEFAULT_D_MIN,
    DEFAULT_EPSILON,
    DEFAULT_FOLDS,
    DEFAULT_LAMBDA,
    DEFAULT_MAX_ACTIONS,
    DEFAULT_MAX_TURNS,
    DEFAULT_SEED,
)
from cir.pairs.paired import validate_paired
from cir.router.evaluation import decide_rows, score_rows
from cir.router.rule import MODEL_NAMES, THRESHOLD_NAMES, LinearModel, scores
from cir.router.runtime import Router
from cir.router.walk import Grid, build_grid, check_features, summarize, walk
from cir.util.errors import CirError


def fit_linear_model(X: np.ndarray, y: np.ndarray, C: float = DEFAULT_C, max_iter: int = 1000) -> LinearModel:
    """Fit ``Pipeline(StandardScaler, LogisticRegression)`` and keep it as plain numbers.

    A label with one class only (possible for p0/p1 in a small fold) gives ``coef = 0``
    and the class rate as a clipped logit.
    """
    y = np.asarray(y, dtype=int)
    if len(np.unique(y)) < 2:
        scaler = StandardScaler().fit(X)
        rate = min(max(float(y.mean()) if len(y) else 0.5, 1e-3), 1 - 1e-3)
        return LinearModel(scaler.mean_.copy(), scaler.scale_.copy(), np.zeros(X.shape[1]),
                           math.log(rate / (1 - rate)))
    pipe = Pipeline([
        ("scale", StandardScaler()),
        # newton-cholesky: the same L2 objective as lbfgs, solved exactly in a few Newton
        # steps (few features); 10x faster than lbfgs on a busy machine.
        ("logit", LogisticRegression(C=C, solver="newton-cholesky", max_iter=max_iter)),
    ]).fit(X, y)
    scaler, logit = pipe.named_steps["scale"], pipe.named_steps["logit"]
    return LinearModel(scaler.mean_.copy(), scaler.scale_.copy(), logit.coef_[0].copy(),
                       float(logit.intercept_[0]))


class CIRPolicy(BaseEstimator):
    """The CIR policy as a scikit-learn style estimator over a paired table.

    Settings live in ``__init__`` (``get_params``/``set_params``/``clone`` work);
    :meth:`fit` takes a paired DataFrame and sets the attributes ending in ``_``:
    ``features_``, ``extractor_`` (the :class:`~cir.episode.extractor.FeatureExtractor` whose
    ``f_*`` columns it was fitted on: ``extractor``, default ALFWorld's; the router records
    its name), ``models_`` (name -> :class:`LinearModel`), ``thresholds_``,
    ``baselines_``, ``oof_`` (out-of-fold scores per decision cell), ``oof_summary_``,
    ``grid_`` (every threshold setting tried, with its OOF gain and clean harm),
    ``n_tasks_`` and ``training_``. :meth:`to_router` turns the fitted policy into the
    runtime :class:`~cir.router.runtime.Router`.

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
        lam: float = DEFAULT_LAMBDA,
        epsilon: float = DEFAULT_EPSILON,
        d_min: int = DEFAULT_D_MIN,
        delays: tuple[int, ...] = DEFAULT_CANDIDATE_DELAYS,
        C: float = DEFAULT_C,
        folds: int = DEFAULT_FOLDS,
        operation: str = "refresh",
        grid_size: int = 21,
        seed: int = DEFAULT_SEED,
        max_iter: int = 1000,
        extractor: FeatureExtractor | None = None,
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
        self.extractor = extractor

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

    def _fit_models(self, cells: pd.DataFrame, features: list[str]) -> dict[str, LinearModel]:
        X = cells[features].to_numpy(dtype=float)
        labels = {"p_err": (cells["condition"] != "clean").to_numpy(dtype=int),
                  "p0": cells["y0"].to_numpy(dtype=int), "p1": cells["y1"].to_numpy(dtype=int)}
        return {name: fit_linear_model(X, labels[name], C=self.C, max_iter=self.max_iter)
                for name in MODEL_NAMES}

    # -- fit --------------------------------------------------------------------------------
    def fit(self, paired: pd.DataFrame, y: None = None) -> CIRPolicy:
        """Fit the three models, choose thresholds on OOF predictions, fit the baselines."""
        delays = self._check_settings()
        source = "training table"
        df = validate_paired(paired, source=source)
        extractor = resolve_extractor(self.extractor)
        features = check_features(df, source, extractor=extractor)
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

        # Out-of-fold predictions, grouped by task (all conditions/delays of a task together).
        X = cells[features].to_numpy(dtype=float)
        oof = {name: np.zeros(len(cells)) for name in MODEL_NAMES}
        fold_of = np.zeros(len(cells), dtype=int)
        splitter = GroupKFold(n_splits=folds, shuffle=True, random_state=self.seed)
        for k, (tr, te) in enumerate(splitter.split(X, groups=cells["task_id"].to_numpy())):
            models = self._fit_models(cells.iloc[tr], features)
            for name in MODEL_NAMES:
                oof[name][te] = models[name].predict_proba(X[te])
            fold_of[te] = k
        oof_scores = scores(oof["p_err"], oof["p0"], oof["p1"], self.lam)
        g = grid.spread(oof_scores)

        # CIR thresholds: grid search under the clean-harm limit.
        search = self._search(grid, g)
        best = search.iloc[0]
        thresholds = {name: _none_if_inf(best[name]) for name in THRESHOLD_NAMES}
        cir_fire = grid.rule_fires(g, thresholds, self.d_min)
        oof_summary = _plain(summarize(grid, *walk(grid, cir_fire)[:2]))

        # Baselines, chosen on the same OOF predictions / training table; the models
        # refitted on all training tasks.
        baselines = self._fit_baselines(grid, g, oof_summary["intervention_rate"])
        models = self._fit_models(cells, features)

        # The fitted state: set here and nowhere else, once everything succeeded.
        self.features_ = features
        self.extractor_ = extractor
        self.oof_ = cells[["task_id", "condition", "delay", "y0", "y1"]].assign(
            fold=fold_of, **{k: v for k, v in oof_scores.items()})
        self.grid_ = search
        self.thresholds_ = thresholds
        self.oof_summary_ = oof_summary
        self.baselines_ = baselines
        self.models_ = models
        self.n_tasks_ = int(n_tasks)
        self.training_ = {**grid.meta, "decision_cells": int(len(cells)),
                          "task_ids": sorted(str(t) for t in set(df["task_id"])),
                          "agents": sorted(str(a) for a in set(df["agent"]))
                          if "agent" in df.columns else []}
        return self

    def _candidates(self, values: np.ndarray, extra: list[float]) -> np.ndarray:
        v = values[np.isfinite(values)]
        q = np.quantile(v, np.linspace(0, 1, int(self.grid_size))) if len(v) else np.array([])
        return np.unique(np.concatenate([q, np.asarray(extra, dtype=float)]))

    def _search(self, grid: Grid, g: dict[str, np.ndarray]) -> pd.DataFrame:
        """Every (alpha, beta, gamma) of the grid with its OOF objective; best first.

        Candidates are quantiles of the OOF scores (plus alpha = inf, i.e. never
        refresh, which always meets the limit, and beta = 0, gamma = 0); gamma >= 0 only. Among settings
        with clean harm <= epsilon: largest net gain under erroneous observations;
        ties: lower clean harm, fewer interventions, then larger (more conservative)
        alpha, beta, gamma.
        """
        alphas = np.append(self._candidates(g["p_err"], []), np.inf)
        betas = self._candidates(g["p_fail"], [0.0])
        # the rule refreshes when the expected benefit outweighs the weighted risk (paper,
        # eq. 8): gamma >= 0; a negative gamma would refresh where predicted harm dominates
        gammas = self._candidates(g["utility"], [0.0])
        gammas = gammas[gammas >= 0]
        delay_ok = grid.delay_ok(self.d_min)
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
        delay_ok = grid.delay_ok(self.d_min)
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

    def to_router(self, *, max_turns: int = DEFAULT_MAX_TURNS, max_actions: int = DEFAULT_MAX_ACTIONS,
                  task_ids: list[str] | None = None) -> Router:
        """The fitted policy as a runtime :class:`~cir.router.runtime.Router`.

        ``max_turns``/``max_actions`` are the budgets of the harness that will ask it (its
        features read them); ``task_ids`` are the training tasks (default: every task of
        the training table), recorded so that ``cir evaluate`` can refuse a test table
        that overlaps them.
        """
        self._check_fitted()
        settings = {k: v for k, v in self.get_params().items() if k != "extractor"}
        settings["delays"] = [int(d) for d in settings["delays"]]
        settings.update(max_turns=int(max_turns), max_actions=int(max_actions))
        s = self.oof_summary_
        training = {"n_tasks": int(self.n_tasks_), "decision_cells": int(self.training_["decision_cells"]),
                    "oof_net_gain": float(s["net_gain"]), "oof_clean_harm": float(s["clean_harm"]),
                    "oof_intervention_rate": float(s["intervention_rate"]),
                    "task_ids": [str(t) for t in (task_ids if task_ids is not None
                                                  else self.training_.get("task_ids", []))],
                    "agents": [str(a) for a in self.training_.get("agents", [])]}
        return Router(self.features_, dict(self.models_), self.thresholds_, settings, self.baselines_, training,
                      extractor=self.extractor_)

    def predict_scores(self, paired: pd.DataFrame) -> pd.DataFrame:
        """p_err, p0, p1, p_fail, s_R, s_H and utility for every row of ``paired``."""
        return score_rows(self.to_router(), paired)

    def decide(self, paired: pd.DataFrame) -> pd.DataFrame:
        """Per row: the CIR rule's decision if the walk reaches that row, with scores and blocker."""
        return decide_rows(self.to_router(), paired)


def _none_if_inf(v: float) -> float | None:
    return None if not np.isfinite(v) else float(v)


def _plain(d: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.item() if isinstance(v, np.generic) else v) for k, v in d.items()}
