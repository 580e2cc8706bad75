"""Selective recovery in the study: the routers fitted, evaluated on held-out tasks and diagnosed.

Two routers are fitted on the same fitting cohort: ``cir`` (the paper's estimator, the
default router, ``router.json``) and ``cir_paired`` (the paired estimator, P(rescue) and
P(harm) fitted on the outcome classes, ``router_paired.json``), under the same clean-harm
budget and out-of-fold threshold search (:mod:`cir.router.policy`). Both walk the held-out
cohort beside the baselines (:func:`cir.router.evaluation.evaluate`). Every table here is a
plain DataFrame, computed from the run folders and the fitted policies, so a single study's
report and the pooled report of replicates (:mod:`cir.study.replicates`) show the same
columns.

* :func:`fit_table`: thresholds, whether the budget bound (settings within it of settings
  searched), the out-of-fold result;
* :func:`optimism_table`: out-of-fold (the threshold search's own estimate) next to held out;
* :func:`discrimination_table`: how well each router's scores tell rescue and harm cells apart
  from the rest (ROC AUC), out of fold and held out.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

from cir.router.evaluation import as_router, evaluate
from cir.router.policy import CIRPolicy
from cir.router.runtime import Router
from cir.router.walk import build_grid, model_labels

#: The study's routers: policy name -> estimator, and the file each is written to.
ROUTERS = {"cir": "paper", "cir_paired": "paired"}
ROUTER_FILES = {"cir": "router.json", "cir_paired": "router_paired.json"}
#: Per estimator: the score that should rank rescue cells high and the one for harm cells.
RESCUE_HARM_SCORES = {"paper": ("s_R", "s_H"), "paired": ("p_rescue", "p_harm")}


@dataclass
class Selective:
    """The fitted policies, their routers and the held-out evaluation of one study."""

    policies: dict[str, CIRPolicy]
    routers: dict[str, Router]
    evaluation: dict[str, Any]


def fit_routers(train: pd.DataFrame, seed: int) -> dict[str, CIRPolicy]:
    """Both estimators fitted on the fitting cohort, with every other setting the paper's."""
    return {name: CIRPolicy(estimator=estimator, seed=seed).fit(train) for name, estimator in ROUTERS.items()}


def run_selective(train: pd.DataFrame, test: pd.DataFrame, out: Path | None, *, resamples: int, seed: int,
                  source: str) -> Selective:
    """Fit both routers, write their files into ``out`` (when given), evaluate them on ``test``."""
    policies = fit_routers(train, seed)
    task_ids = sorted(set(train["task_id"]))
    routers = {name: p.to_router(task_ids=task_ids) for name, p in policies.items()}
    if out is not None:
        for name, router in routers.items():
            router.save(out / ROUTER_FILES[name])
    result = evaluate(routers, test, resamples=resamples, seed=seed, source=source)
    return Selective(policies, routers, result)


def fit_table(policies: dict[str, CIRPolicy]) -> pd.DataFrame:
    """One row per router: its thresholds, the budget search and its out-of-fold result."""
    rows = []
    for name, p in policies.items():
        b, s, t = p.budget_, p.oof_summary_, p.thresholds_
        rows.append({
            "router": name, "estimator": p.estimator, "operations": ",".join(p.operations),
            "train_tasks": p.n_tasks_, "lambda": p.lam, "epsilon": p.epsilon, "d_min": p.d_min,
            "delays": ",".join(map(str, p.delays)), "alpha": t.get("alpha"), "beta": t.get("beta"),
            "gamma": t.get("gamma"), "budget": b["kind"], "settings_searched": b["settings_searched"],
            "settings_within_epsilon": b["settings_within_budget"], "budget_bound": b["bound"],
            "clean_arms": b["n_clean"], "oof_net_gain_pp": 100 * s["net_gain"], "oof_clean_harm": s["clean_harm"],
            "oof_intervention_rate": s["intervention_rate"],
        })
    return pd.DataFrame(rows)


def optimism_table(policies: dict[str, CIRPolicy], arms: pd.DataFrame) -> pd.DataFrame:
    """The objective and constraint of the paper's eq. 4, out of fold and held out, per router."""
    err = arms["condition"] != "clean"
    clean = ~err
    rows = []
    for name, p in policies.items():
        oof = p.oof_summary_
        y, y0 = arms[f"y_{name}"], arms["y_never"]
        gain = (y - y0)[err].mean() if err.any() else float("nan")
        harm = ((y0 == 1) & (y == 0))[clean].mean() if clean.any() else float("nan")
        rows += [
            {"router": name, "estimate": "out of fold (fitting tasks)", "net_gain_erroneous_pp": 100 * oof["net_gain"],
             "clean_harm": oof["clean_harm"], "intervention_rate": oof["intervention_rate"]},
            {"router": name, "estimate": "held out", "net_gain_erroneous_pp": 100 * float(gain),
             "clean_harm": float(harm), "intervention_rate": float(arms[f"int_{name}"].mean())},
        ]
    return pd.DataFrame(rows)


def _auc(labels: np.ndarray, score: np.ndarray) -> float:
    return float(roc_auc_score(labels, score)) if 0 < labels.sum() < len(labels) else float("nan")


def _discrimination_rows(name: str, where: str, estimator: str, cells: pd.DataFrame,
                         scores: pd.DataFrame, operation: str) -> list[dict[str, Any]]:
    rescue_score, harm_score = RESCUE_HARM_SCORES[estimator]
    rows = []
    for outcome, score, sign in (("rescue", rescue_score, 1), ("harm", harm_score, -1)):
        labels = model_labels(cells, f"p_{outcome}[{operation}]")
        rows.append({"router": name, "where": where, "outcome": outcome, "cells": int(len(labels)),
                     "positives": int(labels.sum()), "score": score,
                     "auc_score": _auc(labels, scores[score].to_numpy()),
                     # the utility should rank rescues high and harms low
                     "auc_utility": _auc(labels, sign * scores["utility"].to_numpy())})
    return rows


def discrimination_table(policies: dict[str, CIRPolicy], routers: dict[str, Router],
                         test: pd.DataFrame) -> pd.DataFrame:
    """How well each router tells rescue and harm cells apart from the rest (ROC AUC of its rescue
    score, its harm score and its utility), out of fold on the fitting tasks and held out."""
    rows = []
    for name, p in policies.items():
        op = p.operations[0]
        rows += _discrimination_rows(name, "out of fold", p.estimator, p.oof_, p.oof_, op)
        router = as_router(routers[name])
        cells = build_grid(test, router.delays, router.operations, "held-out table").cells
        s = router.predict(cells[router.features].to_numpy(dtype=float))
        scores = pd.DataFrame({k[: -len("_chosen")]: v for k, v in s.items() if k.endswith("_chosen")})
        rows += _discrimination_rows(name, "held out", p.estimator, cells, scores, op)
    return pd.DataFrame(rows)
