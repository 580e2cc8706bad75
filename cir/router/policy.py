"""The Causal Intervention Router policy as an estimator: models and thresholds fitted on a
paired table (paper, section 4).

Input is a paired table (:mod:`cir.pairs.paired`) with ``f_*`` feature columns computed on
the no-recovery arm at each delay. The models are those of the chosen estimator
(:mod:`cir.router.rule`), each a standardised L2 logistic regression fitted on the decision
cells of the sequential walk (:mod:`cir.router.walk`):

* ``estimator="paper"`` (the default, the paper's CIR exactly): ``p_err`` (label
  ``condition != clean``), ``p0`` (``y0``) and ``p1[m]`` (``y1`` of operation ``m``),
  ``C = 0.1`` for all three;
* ``estimator="paired"``: ``p_err`` as above, ``p_rescue[m]`` (label: the row is a rescue)
  and ``p_harm[m]`` (a harm), their ``C`` chosen by cross-validated log loss grouped by task.

Thresholds are chosen on out-of-fold predictions grouped by task, under the clean-harm
budget, and the baselines' parameters are chosen the same way; then the models are refitted
on all fitting tasks. The budget is ``empirical`` (the paper's: observed clean harm <=
epsilon) or ``certified`` (Learn-then-Test, :mod:`cir.router.budget`: clean harm <= epsilon
with probability >= 1 - delta). The fitted policy becomes a runtime
:class:`~cir.router.runtime.Router` through :meth:`CIRPolicy.to_router`; the held-out
evaluation is :mod:`cir.router.evaluation`.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
import pandas as pd
from sklearn import config_context
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from cir.episode.extractor import FeatureExtractor
from cir.episode.protocol import (
    DEFAULT_C,
    DEFAULT_CANDIDATE_DELAYS,
    DEFAULT_D_MIN,
    DEFAULT_DELTA,
    DEFAULT_EPSILON,
    DEFAULT_FOLDS,
    DEFAULT_LAMBDA,
    DEFAULT_MAX_ACTIONS,
    DEFAULT_MAX_TURNS,
    DEFAULT_SEED,
    PAIRED_CS,
)
from cir.families.registry import resolve_extractor
from cir.pairs.paired import validate_paired
from cir.router.budget import Budget
from cir.router.evaluation import decide_rows, score_rows
from cir.router.rule import (
    BUDGETS,
    ESTIMATORS,
    Estimator,
    LinearModel,
    choose,
    no_threshold,
    split_model_name,
)
from cir.router.runtime import Router, never_recovers_text
from cir.router.walk import Cells, build_cells, check_features, model_labels, summarize, walk
from cir.util.deprecation import former_attribute, renamed_parameters
from cir.util.errors import CirValueError
from cir.util.memo import memoized
from cir.util.parallel import one_thread_each

log = logging.getLogger(__name__)


@memoized  # the same model on the same rows: once per process (cir.util.memo)
def fit_linear_model(X: np.ndarray, y: np.ndarray, C: float = DEFAULT_C, max_iter: int = 1000) -> LinearModel:
    """Fit ``Pipeline(StandardScaler, LogisticRegression)`` and keep it as plain numbers.

    A label with one class only (possible for rare labels in a small fold) gives ``coef = 0``
    and the class rate as a clipped logit. Soft labels in [0, 1] (a table of ``--samples``:
    :func:`cir.router.walk.model_labels`) are fitted as weighted rows: the same cross-entropy.
    """
    soft = is_soft(y)
    y = np.asarray(y, dtype=float if soft else int)
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
    ])
    if soft:  # soft labels as weighted rows: each row once as a success (weight y), once not (1 - y)
        pipe.fit(np.vstack([X, X]), np.r_[np.ones(len(y)), np.zeros(len(y))].astype(int),
                 logit__sample_weight=np.r_[y, 1 - y])
    else:
        pipe.fit(X, y)
    scaler, logit = pipe.named_steps["scale"], pipe.named_steps["logit"]
    return LinearModel(scaler.mean_.copy(), scaler.scale_.copy(), logit.coef_[0].copy(),
                       float(logit.intercept_[0]))


def is_soft(y: np.ndarray) -> bool:
    """Whether labels are soft (some value strictly between 0 and 1)."""
    y = np.asarray(y, dtype=float)
    return bool(((y > 0) & (y < 1)).any())


@memoized
def choose_C(X: np.ndarray, y: np.ndarray, groups: np.ndarray, Cs: tuple[float, ...], folds: int,
             seed: int, max_iter: int = 1000) -> float:
    """The ``C`` of lowest log loss under cross-validation grouped by task (ties: the smaller C).

    Every ``C`` is fitted on every training fold as :func:`fit_linear_model` fits it, the
    candidates of a fold together (:func:`fold_models`). Not ``LogisticRegressionCV``: a rare
    label (harm) can leave a training fold with one class, which it refuses and
    :func:`fit_linear_model` handles.
    """
    soft = is_soft(y)
    y = np.asarray(y, dtype=float if soft else int)
    n_groups = len(np.unique(groups))
    if len(np.unique(y)) < 2 or n_groups < 2:
        return float(min(Cs))
    splitter = GroupKFold(n_splits=min(folds, n_groups), shuffle=True, random_state=seed)
    pred = np.zeros((len(Cs), len(y)))
    for tr, te in splitter.split(X, y, groups):
        for i, model in enumerate(fold_models(X[tr], y[tr], Cs, max_iter)):
            pred[i, te] = model.predict_proba(X[te])
    losses = []
    for p in np.clip(pred, 1e-12, 1 - 1e-12):
        # scikit-learn's log_loss of 0/1 labels, without its checks (a few ms a call, here thousands)
        losses.append(float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))) if soft
                      else float(np.mean(-np.where(y == 1, np.log(p), np.log(1 - p)))))
    best = min(losses)
    return float(min(C for C, loss in zip(Cs, losses, strict=True) if loss <= best + 1e-12))


def fold_models(X: np.ndarray, y: np.ndarray, Cs: tuple[float, ...], max_iter: int = 1000) -> list[LinearModel]:
    """:func:`fit_linear_model` of ``(X, y)`` for every ``C`` of ``Cs`` (scikit-learn's own solver for
    each: its input checks skipped, as these rows were checked once by the caller)."""
    if len(np.unique(y)) < 2:  # one class: the class rate, whatever C
        return [fit_linear_model(X, y, C=Cs[0], max_iter=max_iter)] * len(Cs)
    with config_context(assume_finite=True, skip_parameter_validation=True):
        return [fit_linear_model(X, y, C=C, max_iter=max_iter) for C in Cs]


class CIRPolicy(BaseEstimator):
    """The CIR policy as a scikit-learn style estimator over a paired table.

    Settings live in ``__init__`` (``get_params``/``set_params``/``clone`` work):
    ``estimator`` (``"paper"`` or ``"paired"``), ``operations`` (the recovery operations it
    may choose; one for the paper's CIR), ``budget`` (``"empirical"`` or ``"certified"``,
    with ``delta``), ``lam``, ``epsilon``, ``d_min``, ``delays``, ``C``, ``folds``, ``Cs``
    (the paired estimator's candidate ``C`` values), ``threshold_steps``, ``seed``, ``max_iter``
    and ``extractor`` (the :class:`~cir.episode.extractor.FeatureExtractor` whose ``f_*``
    columns it is fitted on, default ALFWorld's; the router records its name).

    :meth:`fit` takes a paired DataFrame and sets the attributes ending in ``_``:
    ``features_``, ``extractor_``, ``models_`` (name -> :class:`LinearModel`), ``Cs_``
    (the C of each model), ``thresholds_``, ``budget_`` (what the budget search found,
    including whether it bound and, when certified, whether any candidate could be
    certified), ``baselines_``, ``oof_`` (out-of-fold scores per decision cell),
    ``oof_summary_``, ``candidates_`` (every threshold candidate tried, with its OOF gain, clean
    harm and whether it met the budget), ``n_tasks_`` and ``training_``. :meth:`to_router`
    turns the fitted policy into the runtime :class:`~cir.router.runtime.Router`.

    Which ``sklearn.utils.estimator_checks`` apply: the input is a paired *table* (task
    ids, conditions, delays, two outcomes and feature columns), not an ``(X, y)`` array
    pair, and the estimator is neither a classifier nor a regressor (its output is a
    sequential decision per arm). So the checks that feed random numeric arrays do not
    apply. The conventions that do apply are tested: ``check_no_attributes_set_in_init``,
    ``check_get_params_invariance``, ``check_set_params`` and
    ``check_parameters_default_constructible``, ``clone`` giving an unfitted copy with
    equal params, ``NotFittedError`` before ``fit``, and identical fits from identical
    settings.
    """

    @renamed_parameters("CIRPolicy(grid_size=)", grid_size="threshold_steps")
    def __init__(
        self,
        estimator: str = "paper",
        operations: tuple[str, ...] = ("refresh",),
        budget: str = "empirical",
        lam: float = DEFAULT_LAMBDA,
        epsilon: float = DEFAULT_EPSILON,
        delta: float = DEFAULT_DELTA,
        d_min: int = DEFAULT_D_MIN,
        delays: tuple[int, ...] = DEFAULT_CANDIDATE_DELAYS,
        C: float = DEFAULT_C,
        Cs: tuple[float, ...] = PAIRED_CS,
        folds: int = DEFAULT_FOLDS,
        threshold_steps: int = 21,
        seed: int = DEFAULT_SEED,
        max_iter: int = 1000,
        extractor: FeatureExtractor | None = None,
    ) -> None:
        self.estimator = estimator
        self.operations = operations
        self.budget = budget
        self.lam = lam
        self.epsilon = epsilon
        self.delta = delta
        self.d_min = d_min
        self.delays = delays
        self.C = C
        self.Cs = Cs
        self.folds = folds
        self.threshold_steps = threshold_steps
        self.seed = seed
        self.max_iter = max_iter
        self.extractor = extractor

    grid_ = former_attribute("CIRPolicy.grid_", "candidates_")  # its name before cir 0.2.0

    # -- params ---------------------------------------------------------------------------------
    def _check_params(self) -> tuple[Estimator, tuple[str, ...], tuple[int, ...]]:
        if self.estimator not in ESTIMATORS:
            raise CirValueError(f"estimator: expected one of {', '.join(ESTIMATORS)}, got {self.estimator!r}")
        ops = (self.operations,) if isinstance(self.operations, str) else tuple(self.operations)
        if not ops or len(set(ops)) != len(ops) or not all(isinstance(o, str) and o for o in ops):
            raise CirValueError(f"operations: expected distinct operation names, got {self.operations!r}")
        if self.budget not in BUDGETS:
            raise CirValueError(f"budget: expected one of {', '.join(BUDGETS)}, got {self.budget!r}")
        delays = tuple(int(d) for d in self.delays)
        if not delays or any(d < 0 for d in delays) or list(delays) != sorted(set(delays)):
            raise CirValueError(f"delays: expected increasing distinct integers >= 0, got {self.delays!r}")
        if not 0 <= self.epsilon <= 1:
            raise CirValueError(f"epsilon: expected a rate in [0, 1], got {self.epsilon!r}")
        if not 0 < self.delta < 1:
            raise CirValueError(f"delta: expected a probability in (0, 1), got {self.delta!r}")
        if self.lam <= 0:
            raise CirValueError(f"lam: expected lambda > 0, got {self.lam!r}")
        if self.C <= 0 or not self.Cs or any(c <= 0 for c in self.Cs):
            raise CirValueError(f"C and Cs: expected values > 0, got C={self.C!r}, Cs={self.Cs!r}")
        if int(self.folds) < 2:
            raise CirValueError(f"folds: expected at least 2, got {self.folds!r}")
        if int(self.threshold_steps) < 2:
            raise CirValueError(f"threshold_steps: expected at least 2, got {self.threshold_steps!r}")
        return ESTIMATORS[self.estimator], ops, delays

    # -- models ---------------------------------------------------------------------------------
    def _choose_Cs(self, estimator: Estimator, ops: tuple[str, ...], cells: pd.DataFrame,
                   features: list[str]) -> dict[str, float]:
        """The paper's models keep C; the paired estimator's outcome models get a C chosen by
        grouped cross-validation on ``cells``."""
        X = cells[features].to_numpy(dtype=float)
        groups = cells["task_id"].to_numpy()
        out = {}
        for name in estimator.model_names(ops):
            base, _ = split_model_name(name)
            tuned = estimator.name == "paired" and base in ("p_rescue", "p_harm")
            out[name] = (choose_C(X, model_labels(cells, name), groups, tuple(self.Cs), int(self.folds),
                                  self.seed, self.max_iter) if tuned else float(self.C))
        return out

    def _fit_models(self, estimator: Estimator, ops: tuple[str, ...], cells: pd.DataFrame,
                    features: list[str]) -> tuple[dict[str, LinearModel], dict[str, float]]:
        Cs = self._choose_Cs(estimator, ops, cells, features)
        X = cells[features].to_numpy(dtype=float)
        models = {name: fit_linear_model(X, model_labels(cells, name), C=Cs[name], max_iter=self.max_iter)
                  for name in estimator.model_names(ops)}
        return models, Cs

    def _oof(self, estimator: Estimator, ops: tuple[str, ...], cells: pd.DataFrame,
             features: list[str]) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Out-of-fold probabilities of every model, grouped by task (all conditions/delays
        of a task in one fold), and each cell's fold."""
        X = cells[features].to_numpy(dtype=float)
        names = estimator.model_names(ops)
        oof = {name: np.zeros(len(cells)) for name in names}
        fold_of = np.zeros(len(cells), dtype=int)
        splitter = GroupKFold(n_splits=int(self.folds), shuffle=True, random_state=self.seed)
        for k, (tr, te) in enumerate(splitter.split(X, groups=cells["task_id"].to_numpy())):
            models, _ = self._fit_models(estimator, ops, cells.iloc[tr], features)
            for name in names:
                oof[name][te] = models[name].predict_proba(X[te])
            fold_of[te] = k
        return oof, fold_of

    # -- fit ------------------------------------------------------------------------------------
    def _training_cells(self, paired: pd.DataFrame, ops: tuple[str, ...],
                       delays: tuple[int, ...]) -> tuple[pd.DataFrame, list[str], FeatureExtractor, Cells]:
        source = "training table"
        df = validate_paired(paired, source=source)
        extractor = resolve_extractor(self.extractor)
        features = check_features(df, source, extractor=extractor)
        cells = build_cells(df, delays, ops, source)
        conditions = set(cells.decisions["condition"])
        if "clean" not in conditions:
            raise CirValueError(f"{source}: no clean rows at the candidate delays; the clean-harm limit "
                           "(epsilon) and the error model p_err need clean trajectories")
        if conditions == {"clean"}:
            raise CirValueError(f"{source}: only clean rows; p_err needs erroneous observations "
                           "(stale or missing conditions) to learn from")
        n_tasks = cells.decisions["task_id"].nunique()
        if n_tasks < int(self.folds):
            raise CirValueError(f"{source}: {n_tasks} task(s) with decision cells, fewer than "
                           f"folds={int(self.folds)}; lower --folds or add tasks")
        return df, features, extractor, cells

    def fit(self, paired: pd.DataFrame, y: None = None) -> CIRPolicy:
        """Fit the models, choose thresholds on OOF predictions, fit the baselines."""
        # thousands of small solves: one thread each (cir.util.parallel), and scikit-learn's checks
        # of its arguments and of finite inputs skipped (the table was checked once: finite features)
        with one_thread_each(), config_context(assume_finite=True, skip_parameter_validation=True):
            return self._fit(paired)

    def _fit(self, paired: pd.DataFrame) -> CIRPolicy:
        estimator, ops, delays = self._check_params()
        df, features, extractor, cells = self._training_cells(paired, ops, delays)
        decisions = cells.decisions
        oof, fold_of = self._oof(estimator, ops, decisions, features)
        oof_scores = choose({op: estimator.scores(oof, op, self.lam) for op in ops}, ops)
        g = cells.spread(oof_scores)
        y1 = cells.outcome_if_chosen(g["choice"])

        # CIR thresholds: the search under the clean-harm budget.
        budget = Budget(self.budget, float(self.epsilon), float(self.delta))
        search = self._search(estimator, cells, g, y1, budget)
        best = search.iloc[0]
        thresholds = {name: _none_if_inf(best[name]) for name in estimator.thresholds}
        fire = cells.rule_fires(estimator, g, thresholds, self.d_min)
        outcome, intervened, _ = walk(cells, fire, y1)
        oof_summary = _plain(summarize(cells, outcome, intervened))

        # Baselines, chosen on the same OOF predictions / training table; the models
        # refitted on all training tasks.
        baselines = self._fit_baselines(cells, g, oof_summary["intervention_rate"], budget)
        models, Cs = self._fit_models(estimator, ops, decisions, features)

        # The fitted state: set here and nowhere else, once everything succeeded.
        self.features_ = features
        self.extractor_ = extractor
        self.oof_ = self._oof_table(decisions, fold_of, oof, oof_scores, ops)
        self.candidates_ = search
        self.thresholds_ = thresholds
        self.budget_ = budget.summary(search, len(cells.y0[cells.clean]))
        self.oof_summary_ = oof_summary
        self.baselines_ = baselines
        self.models_ = models
        self.Cs_ = Cs
        self.n_tasks_ = int(decisions["task_id"].nunique())
        self.training_ = {**cells.meta, "decision_cells": int(len(decisions)),
                          "task_ids": sorted(str(t) for t in set(df["task_id"])),
                          "agents": sorted(str(a) for a in set(df["agent"]))
                          if "agent" in df.columns else []}
        if self.never_recovers:
            log.warning("CIRPolicy (%s estimator, %s): the fitted router %s", self.estimator,
                        ", ".join(ops), self.never_recovers)
        return self

    @property
    def never_recovers(self) -> str | None:
        """Why the fitted router never recovers (:attr:`cir.router.runtime.Router.never_recovers`),
        or None when it can."""
        self._check_fitted()
        return never_recovers_text(no_threshold(ESTIMATORS[self.estimator], self.thresholds_))

    @staticmethod
    def _oof_table(cells: pd.DataFrame, fold_of: np.ndarray, oof: dict[str, np.ndarray],
                   s: dict[str, np.ndarray], ops: tuple[str, ...]) -> pd.DataFrame:
        """One row per decision cell: its labels and fold, every model's OOF probability (by
        model name), the operation of highest utility and its scores."""
        sampled = [c for c in ("k", "p0_hat") if c in cells.columns]  # a table of --samples: soft labels
        out = cells[["task_id", "condition", "delay", "y0", *sampled, *[f"y1_{op}" for op in ops]]].copy()
        if len(ops) == 1:
            out["y1"] = out[f"y1_{ops[0]}"]
        out["fold"] = fold_of
        for name, values in oof.items():
            out[name] = values
        out["operation"] = [ops[i] for i in s["choice"]]
        for name, values in s.items():
            if name.endswith("_chosen"):
                out[name[: -len("_chosen")]] = values
        return out

    def _candidates(self, values: np.ndarray, extra: list[float]) -> np.ndarray:
        v = values[np.isfinite(values)]
        q = np.quantile(v, np.linspace(0, 1, int(self.threshold_steps))) if len(v) else np.array([])
        return np.unique(np.concatenate([q, np.asarray(extra, dtype=float)]))

    def _search(self, estimator: Estimator, cells: Cells, g: dict[str, np.ndarray], y1: np.ndarray,
                budget: Budget) -> pd.DataFrame:
        """Every threshold candidate with its OOF objective; best first.

        Candidates are quantiles of the OOF scores of the chosen operation (plus alpha = inf,
        i.e. never recover, which always meets the budget; beta = 0; gamma = 0); gamma >= 0
        only (the rule recovers when the expected benefit outweighs the weighted risk, paper
        eq. 8). Among candidates within the budget: largest net gain under erroneous
        observations; ties: lower clean harm, fewer interventions, then larger (more
        conservative) thresholds.
        """
        axes: dict[str, np.ndarray] = {}
        for score, name in estimator.gates:
            values = g[f"{score}_chosen"]
            if name == "alpha":
                axes[name] = np.append(self._candidates(values, []), np.inf)
            else:
                c = self._candidates(values, [0.0])
                axes[name] = c[c >= 0] if name == "gamma" else c
        names = [n for n in estimator.thresholds if n != "alpha"]
        mesh = [a.ravel() for a in np.meshgrid(*[axes[n] for n in names], indexing="ij")]
        delay_ok = cells.delay_ok(self.d_min)
        rows = []
        with np.errstate(invalid="ignore"):
            passing = np.ones((len(mesh[0]),) + cells.status.shape, dtype=bool)
            for (score, _), values in zip([gt for gt in estimator.gates if gt[1] != "alpha"], mesh,
                                             strict=True):
                passing &= g[f"{score}_chosen"][None] >= values[:, None, None]
            for a in axes["alpha"]:
                fire = passing & (delay_ok & (g["p_err_chosen"] >= a))[None]
                outcome, intervened, _ = walk(cells, fire, y1)
                s = summarize(cells, outcome, intervened)
                rows.append(pd.DataFrame({
                    "alpha": a, **dict(zip(names, mesh, strict=True)),
                    "gain_count": s["gain_count"], "clean_harm_count": s["clean_harm_count"],
                    "interventions": s["interventions"], "net_gain": s["net_gain"],
                    "clean_harm": s["clean_harm"], "intervention_rate": s["intervention_rate"]}))
        table = pd.concat(rows, ignore_index=True)
        table["feasible"] = budget.admits(table, int(cells.clean.sum()))
        order = ["feasible", "gain_count", "clean_harm_count", "interventions", *estimator.thresholds]
        return table.sort_values(order, ascending=[False, False, True, True, *[False] * len(estimator.thresholds)],
                                 kind="mergesort").reset_index(drop=True)

    def _fit_baselines(self, cells: Cells, g: dict[str, np.ndarray], cir_rate: float,
                       budget: Budget) -> dict[str, Any]:
        """The baselines, each with the operation it recovers with: the anomaly detector (its
        OOF threshold, and the threshold whose rate matches the router's) and always
        recovering at one fixed delay. Per operation each is chosen on the training table;
        ``anomaly``, ``anomaly_rate_matched`` and ``always`` use the operation that gained most
        (the only one for a single-operation router), and a router over several operations
        also keeps ``anomaly_<op>`` and ``always_<op>`` for every operation."""
        per_op = {op: self._baselines_of(cells, g, o, cir_rate, budget) for o, op in enumerate(cells.operations)}
        best_anomaly = max(cells.operations, key=lambda op: (per_op[op]["anomaly"]["oof_net_gain"],
                                                             -cells.operations.index(op)))
        best_always = max(cells.operations, key=lambda op: (per_op[op]["always"]["meets_epsilon"],
                                                            per_op[op]["always"]["train_net_gain"],
                                                            -cells.operations.index(op)))
        out = {"anomaly": per_op[best_anomaly]["anomaly"],
               "anomaly_rate_matched": per_op[best_anomaly]["anomaly_rate_matched"],
               "always": per_op[best_always]["always"]}
        if len(cells.operations) > 1:
            for op in cells.operations:
                out[f"anomaly_{op}"] = per_op[op]["anomaly"]
                out[f"always_{op}"] = per_op[op]["always"]
        return out

    def _baselines_of(self, cells: Cells, g: dict[str, np.ndarray], o: int, cir_rate: float,
                      budget: Budget) -> dict[str, dict[str, Any]]:
        """The three baselines recovering with the cells's operation ``o``."""
        op = cells.operations[o]
        y1 = cells.y1[..., o]
        alphas = np.append(np.unique(g["p_err_chosen"][np.isfinite(g["p_err_chosen"])]), np.inf)
        delay_ok = cells.delay_ok(self.d_min)
        with np.errstate(invalid="ignore"):
            fire = delay_ok[None] & (g["p_err_chosen"][None] >= alphas[:, None, None])
        outcome, intervened, _ = walk(cells, fire, y1)
        s = summarize(cells, outcome, intervened)
        anomaly = pd.DataFrame({"alpha": alphas, "gain_count": s["gain_count"],
                                "clean_harm_count": s["clean_harm_count"],
                                "interventions": s["interventions"],
                                "intervention_rate": s["intervention_rate"],
                                "net_gain": s["net_gain"], "clean_harm": s["clean_harm"]})
        anomaly["feasible"] = budget.admits(anomaly, int(cells.clean.sum()))
        best = anomaly.sort_values(["feasible", "gain_count", "clean_harm_count", "interventions", "alpha"],
                                   ascending=[False, False, True, True, False], kind="mergesort").iloc[0]
        # rate-matched: the OOF intervention rate closest to the router's (no budget)
        anomaly["rate_gap"] = (anomaly["intervention_rate"] - cir_rate).abs()
        matched = anomaly.sort_values(["rate_gap", "gain_count", "alpha"], ascending=[True, False, False],
                                      kind="mergesort").iloc[0]
        return {"anomaly": {**_pick(best), "operation": op}, "anomaly_rate_matched": {**_pick(matched), "operation": op},
                "always": {**self._always(cells, y1, budget), "operation": op}}

    def _always(self, cells: Cells, y1: np.ndarray, budget: Budget) -> dict[str, Any]:
        """Always recover at one fixed delay, chosen on the training table itself (no model)."""
        always = []
        for j, d in enumerate(cells.delays):
            if d < self.d_min:
                continue
            f = np.zeros(cells.status.shape, dtype=bool)
            f[:, j] = True
            outcome, intervened, _ = walk(cells, f, y1)
            s = summarize(cells, outcome, intervened)
            count = float if cells.expected else int  # expected counts of a table of --samples
            always.append({"delay": d, "gain_count": count(s["gain_count"]),
                           "clean_harm_count": count(s["clean_harm_count"]), "interventions": int(s["interventions"]),
                           "net_gain": float(s["net_gain"]), "clean_harm": float(s["clean_harm"])})
        if not always:
            raise CirValueError(f"d_min={self.d_min} is above every candidate delay {cells.delays}")
        table = pd.DataFrame(always)
        table["meets_epsilon"] = budget.admits(table, int(cells.clean.sum()))
        best = table.sort_values(["meets_epsilon", "gain_count", "clean_harm_count", "delay"],
                                 ascending=[False, False, True, True], kind="mergesort").iloc[0]
        return {"delay": int(best["delay"]), "train_net_gain": float(best["net_gain"]),
                "train_clean_harm": float(best["clean_harm"]), "meets_epsilon": bool(best["meets_epsilon"])}

    # -- using the fitted policy ----------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "models_"):
            raise NotFittedError("This CIRPolicy is not fitted yet; call fit(paired) first")

    def to_router(self, *, max_turns: int = DEFAULT_MAX_TURNS, max_actions: int = DEFAULT_MAX_ACTIONS,
                  task_ids: list[str] | None = None, family: str | None = None) -> Router:
        """The fitted policy as a runtime :class:`~cir.router.runtime.Router`.

        ``max_turns``/``max_actions`` are the budgets of the harness that will ask it (its
        features read them); ``task_ids`` are the training tasks (default: every task of
        the training table), recorded so that ``cir evaluate`` can refuse a test table
        that overlaps them. ``family``: the environment family it was fitted on, recorded in
        the file (None: ALFWorld's).
        """
        self._check_fitted()
        params = {k: v for k, v in self.get_params().items()
                  if k not in ("extractor", "estimator", "operations", "budget")}
        params["delays"] = [int(d) for d in params["delays"]]
        params["Cs"] = [float(c) for c in params["Cs"]]
        params.update(max_turns=int(max_turns), max_actions=int(max_actions))
        s = self.oof_summary_
        training = {"n_tasks": int(self.n_tasks_), "decision_cells": int(self.training_["decision_cells"]),
                    "oof_net_gain": float(s["net_gain"]), "oof_clean_harm": float(s["clean_harm"]),
                    "oof_intervention_rate": float(s["intervention_rate"]),
                    "task_ids": [str(t) for t in (task_ids if task_ids is not None
                                                  else self.training_.get("task_ids", []))],
                    "agents": [str(a) for a in self.training_.get("agents", [])]}
        ops = (self.operations,) if isinstance(self.operations, str) else tuple(self.operations)
        return Router(self.features_, dict(self.models_), self.thresholds_, params, self.baselines_, training,
                      extractor=self.extractor_, estimator=self.estimator, operations=ops,
                      budget=dict(self.budget_), **({} if family is None else {"family": family}))

    def estimator_scores(self, probabilities: dict[str, np.ndarray], operation: str) -> dict[str, np.ndarray]:
        """The estimator's scores of ``operation`` from model probabilities (by model name)."""
        return ESTIMATORS[self.estimator].scores(probabilities, operation, self.lam)

    def predict_scores(self, paired: pd.DataFrame) -> pd.DataFrame:
        """The scores of the estimator (of the chosen operation) for every row of ``paired``."""
        return score_rows(self.to_router(), paired)

    def decide(self, paired: pd.DataFrame) -> pd.DataFrame:
        """Per row: the rule's decision if the walk reaches that row, with scores and blocker."""
        return decide_rows(self.to_router(), paired)


def _pick(r: pd.Series) -> dict[str, Any]:
    return {"alpha": _none_if_inf(r["alpha"]), "oof_net_gain": float(r["net_gain"]),
            "oof_clean_harm": float(r["clean_harm"]), "oof_intervention_rate": float(r["intervention_rate"])}


def _none_if_inf(v: float) -> float | None:
    return None if not np.isfinite(v) else float(v)


def _plain(d: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.item() if isinstance(v, np.generic) else v) for k, v in d.items()}
