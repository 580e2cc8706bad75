"""Held-out evaluation of a router against its baselines (paper, section 5.4).

Every policy walks the candidate delays of a held-out paired table on the precomputed
branches (:mod:`cir.router.walk`): never, always (at the delay chosen on the training
table), the anomaly detector (at its OOF threshold and at the threshold whose rate
matches CIR's), CIR, and the oracle (refresh exactly where it rescues). Everything a
walk needs is in the :class:`~cir.router.runtime.Router` (its models, thresholds and the
baselines' parameters), so a router file and a test table are enough; a fitted
:class:`~cir.router.policy.CIRPolicy` (anything with ``to_router()``) is accepted too.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import pandas as pd

from cir import __version__
from cir.episode.protocol import DEFAULT_LEVEL, DEFAULT_RESAMPLES, DEFAULT_SEED
from cir.pairs.paired import validate_paired
from cir.router.rule import blocked_by, passes, predict
from cir.router.runtime import Router
from cir.router.walk import build_grid, check_features, walk
from cir.stats.bootstrap import bootstrap_ratios, percentile_ci
from cir.stats.significance import sign_flip_test

POLICIES = ("never", "always", "anomaly", "anomaly_rate_matched", "cir", "oracle")
GROUP_ALL = "all"
SUMMARY_COLUMNS = [
    "policy", "condition", "n", "n_tasks", "success_never", "success_policy", "effect_pp",
    "ci_low_pp", "ci_high_pp", "sign_flip_p", "rescues", "harms", "interventions",
    "intervention_rate", "clean_harm_rate", "oracle_fraction",
]
MARGIN_COLUMNS = ["policy", "versus", "condition", "n", "margin_pp", "ci_low_pp", "ci_high_pp", "sign_flip_p"]


class Fitted(Protocol):
    """A fitted policy: it can become a :class:`~cir.router.runtime.Router`."""

    def to_router(self) -> Router: ...


def as_router(model: Router | Fitted) -> Router:
    """A router as is; a fitted policy as its router."""
    return model if isinstance(model, Router) else model.to_router()


def score_rows(model: Router | Fitted, paired: pd.DataFrame, source: str = "paired table") -> pd.DataFrame:
    """p_err, p0, p1, p_fail, s_R, s_H and utility for every row of ``paired``."""
    router = as_router(model)
    check_features(paired, source, router.features)
    X = paired[router.features].to_numpy(dtype=float)
    return pd.DataFrame(predict(router.models, X, router.settings["lam"]), index=paired.index)


def decide_rows(model: Router | Fitted, paired: pd.DataFrame, source: str = "paired table") -> pd.DataFrame:
    """Per row: the CIR rule's decision if the walk reaches that row, with scores and blocker."""
    router = as_router(model)
    s = score_rows(router, paired, source)
    d_min = router.settings["d_min"]
    blockers = [
        blocked_by(int(d), {k: s.at[i, k] for k in ("p_err", "p_fail", "utility")}, router.thresholds,
                   d_min, router.delays)
        for i, d in zip(paired.index, paired["delay"], strict=True)
    ]
    out = s.copy()
    out["blocked_by"] = pd.Series(blockers, index=out.index, dtype=object)  # None: refresh
    out["refresh"] = [b is None for b in blockers]
    return out


def walk_policies(model: Router | Fitted, paired: pd.DataFrame, source: str = "paired table") -> pd.DataFrame:
    """Every policy's sequential walk on ``paired``: one row per episode (task, condition).

    Columns ``y_<policy>``, ``int_<policy>`` (intervened) and ``delay_<policy>`` for
    never, always, anomaly, anomaly_rate_matched, cir and oracle.
    """
    router = as_router(model)
    df = validate_paired(paired, source=source)
    check_features(df, source, router.features)
    delays = router.delays
    d_min = router.settings["d_min"]
    grid = build_grid(df, delays, router.settings["operation"], source)
    X = grid.cells[router.features].to_numpy(dtype=float)
    g = grid.spread(predict(router.models, X, router.settings["lam"]))
    delay_ok = grid.delay_ok(d_min)
    fires: dict[str, np.ndarray] = {"never": np.zeros(grid.status.shape, dtype=bool)}
    always = np.zeros(grid.status.shape, dtype=bool)
    always[:, delays.index(router.baselines["always"]["delay"])] = True
    fires["always"] = always
    with np.errstate(invalid="ignore"):
        for name in ("anomaly", "anomaly_rate_matched"):
            fires[name] = delay_ok & passes(g["p_err"], router.baselines[name]["alpha"])
    fires["cir"] = grid.rule_fires(g, router.thresholds, d_min)
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


def evaluate(model: Router | Fitted, paired: pd.DataFrame, *, resamples: int = DEFAULT_RESAMPLES,
             seed: int = DEFAULT_SEED, level: float = DEFAULT_LEVEL,
             source: str = "test table") -> dict[str, Any]:
    """Held-out evaluation of CIR and its baselines on ``paired`` (tasks never used in fitting).

    Returns ``{"episodes", "summary", "margins", "settings"}``: per policy and condition (and
    ``all``): success never vs policy, effect (pp) with a task-level cluster-bootstrap CI
    and sign-flip p-value versus never, rescues, harms, intervention and clean-harm rates,
    and the fraction of the oracle's gain reached; margins of CIR over every other
    policy with paired (same-task) intervals. Intervals and tests are those of
    :mod:`cir.stats.bootstrap` and :mod:`cir.stats.significance`; all columns share the same
    bootstrap resamples.
    """
    router = as_router(model)
    episodes = walk_policies(router, paired, source=source)
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
    # the policy's settings as fitted (the harness budgets are the router's, not the policy's)
    params = {k: v for k, v in router.settings.items() if k not in ("max_turns", "max_actions")}
    settings = {**{k: (list(v) if isinstance(v, tuple) else v) for k, v in params.items()},
                "thresholds": router.thresholds, "baselines": router.baselines,
                "resamples": int(resamples), "seed": int(seed), "level": level,
                "episodes": int(len(episodes)), "tasks": int(episodes["task_id"].nunique()),
                **{f"grid_{k}": v for k, v in episodes.attrs.get("meta", {}).items()},
                "cir_version": __version__}
    return {"episodes": episodes, "summary": summary,
            "margins": pd.DataFrame(mrows, columns=MARGIN_COLUMNS), "settings": settings}
