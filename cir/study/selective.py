"""Selective recovery in the study: the routers fitted, evaluated on held-out tasks and diagnosed.

The routers are fitted on the same fitting cohort: ``cir`` (the paper's estimator, the
default router, ``router.json``), ``cir_paired`` (the paired estimator, P(rescue) and
P(harm) fitted on the outcome classes, ``router_paired.json``), the paired estimator for each
further operation the cohort ran (``cir_paired_<op>``) and ``cir_multi``, which chooses among
them, all under the same clean-harm budget and out-of-fold threshold search
(:mod:`cir.router.policy`). All walk the held-out
cohort beside the baselines (:func:`cir.router.evaluation.evaluate`). Every table here is a
plain DataFrame, computed from the run folders and the fitted policies, so a single study's
report and the pooled report of replicates (:mod:`cir.study.replicates`) show the same
columns.

* :func:`fit_table`: thresholds, whether the budget bound (candidates within it of candidates
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

from cir.families.registry import get_family
from cir.router.evaluation import HELDOUT_MATCHED, as_router, evaluate
from cir.router.policy import CIRPolicy, is_soft
from cir.router.runtime import Router
from cir.router.walk import build_cells, model_labels

#: The study's two refresh routers: policy name -> estimator. ``cir`` is the default router.
ROUTERS = {"cir": "paper", "cir_paired": "paired"}
#: The router that chooses among several operations (when the cohorts run more than refresh).
MULTI = "cir_multi"
#: Per estimator: the score that should rank rescue cells high and the one for harm cells.
RESCUE_HARM_SCORES = {"paper": ("s_R", "s_H"), "paired": ("p_rescue", "p_harm")}


@dataclass
class Selective:
    """The fitted policies, their routers and the held-out evaluation of one study."""

    policies: dict[str, CIRPolicy]
    routers: dict[str, Router]
    evaluation: dict[str, Any]


def study_routers(operations: tuple[str, ...]) -> dict[str, tuple[str, tuple[str, ...]]]:
    """The routers of a study whose fitting and held-out cohorts both run ``operations``:
    name -> (estimator, operations). Always ``cir`` and ``cir_paired`` (refresh); with more
    operations, a paired single-operation router for each other one (``cir_paired_<op>``) and
    ``cir_multi``, the paired estimator choosing among all of them."""
    routers = {name: (estimator, ("refresh",)) for name, estimator in ROUTERS.items()}
    others = tuple(op for op in operations if op != "refresh")
    if others:
        routers.update({f"cir_paired_{op}": ("paired", (op,)) for op in others})
        routers[MULTI] = ("paired", ("refresh", *others))
    return routers


def study_policies(operations: tuple[str, ...]) -> list[str]:
    """Every policy the held-out walk of :func:`study_routers`' routers holds
    (:func:`cir.router.evaluation.walk_routers`): never, the baselines, each router and its
    rate-matched anomaly rules, with several operations each operation's always and anomaly rule,
    and the oracles."""
    routers = study_routers(operations)
    ops = tuple(dict.fromkeys(op for _, router_ops in routers.values() for op in router_ops))
    names = ["never", "always", "anomaly", "anomaly_rate_matched", HELDOUT_MATCHED]
    for i, name in enumerate(routers):  # the first router's rate-matched rules are the baselines
        names += [name, *([] if i == 0 else [f"anomaly_matched_{name}", f"anomaly_matched_heldout_{name}"])]
    if len(ops) > 1:
        names += [f"always_{MULTI}", *(f"always_{op}" for op in ops), *(f"anomaly_{op}" for op in ops),
                  *(f"oracle_{op}" for op in ops)]
    return [*names, "oracle"]


def router_file(name: str) -> str:
    """``router.json`` for cir (the default router), ``router_<rest>.json`` for the others."""
    return "router.json" if name == "cir" else f"router_{name.removeprefix('cir_')}.json"


def shared_operations(*tables: pd.DataFrame) -> tuple[str, ...]:
    """The operations every table runs, refresh first (the order of the first table otherwise)."""
    ops = [op for op in dict.fromkeys(tables[0]["operation"]) if all(op in set(t["operation"]) for t in tables)]
    return tuple(sorted(ops, key=lambda op: op != "refresh"))


def experiment_operations(experiments: list) -> tuple[str, ...]:
    """The operations both the fitting and the held-out cohorts run (from their configs)."""
    fit = next(e for e in experiments if e.fit_cir).replay.operations
    test = next(e for e in experiments if e.role == "eval").replay.operations
    return tuple(sorted((op for op in fit if op in test), key=lambda op: op != "refresh"))


def fit_routers(train: pd.DataFrame, seed: int, operations: tuple[str, ...] = ("refresh",),
                family: str | None = None) -> dict[str, CIRPolicy]:
    """The study's routers fitted on the fitting cohort with the family's extractor (``family``;
    ALFWorld's by default), every other setting the paper's."""
    extractor = None if family is None else get_family(family).extractor
    return {name: CIRPolicy(estimator=estimator, operations=ops, seed=seed, extractor=extractor).fit(train)
            for name, (estimator, ops) in study_routers(operations).items()}


def run_selective(train: pd.DataFrame, test: pd.DataFrame, out: Path | None, *, resamples: int, seed: int,
                  source: str, family: str | None = None) -> Selective:
    """Fit the routers (with the extractor of the family ``family``), write their files into
    ``out`` (when given), evaluate them on ``test``."""
    policies = fit_routers(train, seed, shared_operations(train, test), family)
    task_ids = sorted(set(train["task_id"]))
    routers = {name: p.to_router(task_ids=task_ids, family=family) for name, p in policies.items()}
    if out is not None:
        for name, router in routers.items():
            router.save(out / router_file(name))
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
            "gamma": t.get("gamma"), "budget": b["kind"], "candidates_searched": b["candidates_searched"],
            "candidates_within_epsilon": b["candidates_within_budget"], "budget_bound": b["bound"],
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
        # a drop in success: a harm (0/1), or a drop in the chance of success (expected outcomes)
        harm = np.maximum(y0 - y, 0)[clean].mean() if clean.any() else float("nan")
        rows += [
            {"router": name, "estimate": "out of fold (fitting tasks)", "net_gain_erroneous_pp": 100 * oof["net_gain"],
             "clean_harm": oof["clean_harm"], "intervention_rate": oof["intervention_rate"]},
            {"router": name, "estimate": "held out", "net_gain_erroneous_pp": 100 * float(gain),
             "clean_harm": float(harm), "intervention_rate": float(arms[f"int_{name}"].mean())},
        ]
    return pd.DataFrame(rows)


def _auc(labels: np.ndarray, score: np.ndarray) -> float:
    """ROC AUC; soft labels (a table of --samples) as weighted rows, each once a positive (weight
    the label) and once a negative (one minus it)."""
    if not 0 < labels.sum() < len(labels):
        return float("nan")
    if is_soft(labels):
        return float(roc_auc_score(np.r_[np.ones(len(labels)), np.zeros(len(labels))], np.r_[score, score],
                                   sample_weight=np.r_[labels, 1 - labels]))
    return float(roc_auc_score(labels, score))


def _discrimination_rows(name: str, where: str, estimator: str, cells: pd.DataFrame,
                         scores: dict[str, np.ndarray], operation: str) -> list[dict[str, Any]]:
    """AUC of the rescue score, the harm score and the utility of ``operation`` at ``cells``."""
    rescue_score, harm_score = RESCUE_HARM_SCORES[estimator]
    rows = []
    for outcome, score, sign in (("rescue", rescue_score, 1), ("harm", harm_score, -1)):
        labels = model_labels(cells, f"p_{outcome}[{operation}]")
        rows.append({"router": name, "where": where, "operation": operation, "outcome": outcome,
                     "cells": int(len(labels)),
                     "positives": float(labels.sum()) if is_soft(labels) else int(labels.sum()), "score": score,
                     "auc_score": _auc(labels, scores[score]),
                     # the utility should rank rescues high and harms low
                     "auc_utility": _auc(labels, sign * scores["utility"])})
    return rows


def _scores_by_operation(router: Router, X: np.ndarray) -> dict[str, dict[str, np.ndarray]]:
    """Each operation's scores at the rows of ``X`` (the estimator's, before the choice)."""
    s = router.predict(X)
    return {op: {k: v[:, i] for k, v in s.items() if k != "choice" and not k.endswith("_chosen")}
            for i, op in enumerate(router.operations)}


def discrimination_table(policies: dict[str, CIRPolicy], routers: dict[str, Router],
                         test: pd.DataFrame) -> pd.DataFrame:
    """How well each router tells rescue and harm cells apart from the rest (ROC AUC of its rescue
    score, its harm score and its utility), per operation, out of fold on the fitting tasks and
    held out."""
    rows = []
    for name, p in policies.items():
        router = as_router(routers[name])
        oof = p.oof_
        oof_probs = {m: oof[m].to_numpy() for m in p.models_}
        for op in p.operations:
            s = p.estimator_scores(oof_probs, op)
            rows += _discrimination_rows(name, "out of fold", p.estimator, oof, s, op)
        decisions = build_cells(test, router.delays, router.operations, "held-out table").decisions
        held = _scores_by_operation(router, decisions[router.features].to_numpy(dtype=float))
        for op in p.operations:
            rows += _discrimination_rows(name, "held out", p.estimator, decisions, held[op], op)
    return pd.DataFrame(rows)


def mix_table(arms: pd.DataFrame, policy: str) -> pd.DataFrame:
    """Which recovery ``policy`` chose, by condition and delay: arms recovered with each
    operation (and ``none``), as counts and shares of the condition's arms."""
    chosen = arms.assign(operation=arms[f"op_{policy}"].replace("", "none"),
                         delay=arms[f"delay_{policy}"].where(arms[f"int_{policy}"] == 1, -1))
    table = chosen.groupby(["condition", "delay", "operation"], as_index=False).size().rename(columns={"size": "arms"})
    table["share"] = table["arms"] / table.groupby("condition")["arms"].transform("sum")
    return table.assign(policy=policy)[["policy", "condition", "delay", "operation", "arms", "share"]]
